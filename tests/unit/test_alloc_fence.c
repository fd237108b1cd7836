/* Stream-safe reuse with a fake provider whose fences complete only when the
 * test says so: a block freed (cudaFree semantics) while fences are pending is
 * not handed out again; a stream-ordered free is reused at once on its own
 * stream but not on another before its fence, which only its own stream
 * gets (a synchronous free's: every stream); the pool waits on a fence
 * rather than growing; nothing is recorded, queried or waited on a capturing
 * stream; idle pages are not unmapped before their fence. */
#include <stdio.h>
#include <stdlib.h>
#include "alloc/alloc.h"
#include "replay/sim_provider.h"

#define MiB (1ull << 20)
static int failures;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); failures++; } } while (0)

static int no_tcache;
static ts_pool *mk(ts_fake_provider **fp, int mode, uint64_t cap, uint64_t limit)
{
    *fp = ts_fake_create(cap, 2 * MiB);
    ts_fake_set_manual_fences(*fp, 1);
    ts_pool_config cfg = {.mode = mode, .capacity = cap, .memory_limit = limit, .no_thread_cache = no_tcache};
    int st;
    ts_pool *p = ts_pool_create(&cfg, ts_fake_provider_table(*fp), &st);
    if (!p) {
        printf("FAIL: pool create %d\n", st);
        exit(1);
    }
    return p;
}

static void done(ts_pool *p, ts_fake_provider *f)
{
    char err[256];
    CHECK(ts_pool_check(p, err, sizeof err) == 0, "check: %s", err);
    ts_pool_destroy(p);
    ts_fake_counters c;
    ts_fake_counters_get(f, &c);
    CHECK(c.misuse == 0 && c.live_handles == 0 && c.live_fences == 0 && c.seg_bytes == 0,
          "leaks/misuse: misuse %lu handles %lu fences %lu seg %lu", (unsigned long)c.misuse,
          (unsigned long)c.live_handles, (unsigned long)c.live_fences, (unsigned long)c.seg_bytes);
    CHECK(c.fence_on_capturing == 0, "fence operation on a capturing stream");
    ts_fake_destroy(f);
}

/* A synchronously freed block is not reused while a fence on any stream is
 * pending, as long as memory can grow; it is reused once the fences complete. */
static void sync_free_not_reused(int mode)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, mode, 1024 * MiB, 0);
    const uint64_t s1 = 0x100, s2 = 0x200;
    ts_pool_stream_add(p, s1);
    ts_pool_stream_add(p, s2);
    uint64_t a, b, c;
    CHECK(ts_pool_alloc(p, 4 * MiB, s1, 0, &a) == TS_ALLOC_OK, "alloc a");
    CHECK(ts_pool_alloc(p, 4 * MiB, s1, 0, &c) == TS_ALLOC_OK, "alloc c (keeps a's pages from being idle-merged)");
    CHECK(ts_pool_free(p, a, s1, 0) == TS_ALLOC_OK, "free a");
    /* memory limit not reached: the pool may grow instead of waiting, or wait;
     * either way it must not hand out a before a fence recorded after the free
     * completed.  Complete nothing: only a wait could make a reusable. */
    CHECK(ts_pool_alloc(p, 4 * MiB, s2, 0, &b) == TS_ALLOC_OK, "alloc b");
    ts_fake_counters fc;
    ts_fake_counters_get(f, &fc);
    if (b == a)
        CHECK(fc.fence_waits >= 2, "a reused without waiting for fences on both streams (waits %lu)",
              (unsigned long)fc.fence_waits);
    /* now complete everything: a must become reusable without growing */
    ts_fake_complete_stream(f, s1);
    ts_fake_complete_stream(f, s2);
    ts_fake_complete_stream(f, 0);
    ts_pool_free(p, b, s2, 0);
    ts_fake_complete_stream(f, s1);
    ts_fake_complete_stream(f, s2);
    ts_fake_complete_stream(f, 0);
    ts_pool_trim(p);   /* records and waits; afterwards everything is reusable */
    ts_alloc_stats st0, st1;
    ts_pool_stats(p, &st0);
    uint64_t d;
    CHECK(ts_pool_alloc(p, 4 * MiB, s2, 0, &d) == TS_ALLOC_OK, "alloc d");
    ts_pool_stats(p, &st1);
    CHECK(st1.pending_bytes == 0, "pending bytes after trim");
    ts_pool_free(p, c, s1, 0);
    ts_pool_free(p, d, s2, 0);
    done(p, f);
}

/* At the memory limit the pool waits on the fence instead of failing or
 * reusing early, and records fences on every registered stream. */
static void waits_at_limit(int mode)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, mode, 1024 * MiB, mode == TS_ALLOC_CACHING ? 40 * MiB : 20 * MiB);
    const uint64_t s1 = 0x100, s2 = 0x200;
    ts_pool_stream_add(p, s1);
    ts_pool_stream_add(p, s2);
    uint64_t a, b;
    CHECK(ts_pool_alloc(p, 20 * MiB, s1, 0, &a) == TS_ALLOC_OK, "alloc a");
    CHECK(ts_pool_free(p, a, s1, 0) == TS_ALLOC_OK, "free a");
    ts_fake_counters c0, c1;
    ts_fake_counters_get(f, &c0);
    CHECK(ts_pool_alloc(p, 20 * MiB, s2, 0, &b) == TS_ALLOC_OK, "alloc b at the limit");
    ts_fake_counters_get(f, &c1);
    CHECK(c1.fence_records - c0.fence_records >= 2, "fences recorded on %lu streams, want both",
          (unsigned long)(c1.fence_records - c0.fence_records));
    CHECK(c1.fence_waits > c0.fence_waits, "reused at the limit without waiting");
    ts_pool_free(p, b, s2, 0);
    done(p, f);
}

/* cudaFreeAsync semantics: reused at once on the same stream, not on another
 * stream before the fence. */
static void stream_ordered(int mode, int tcache)
{
    ts_fake_provider *f;
    no_tcache = !tcache;
    ts_pool *p = mk(&f, mode, 1024 * MiB, 0);
    no_tcache = 0;
    const uint64_t s1 = 0x100, s2 = 0x200;
    uint64_t a, b, c;
    CHECK(ts_pool_alloc(p, 1 * MiB + 4096, s1, 0, &a) == TS_ALLOC_OK, "alloc a");
    CHECK(ts_pool_free(p, a, s1, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free a async");
    ts_fake_counters c0, c1;
    ts_fake_counters_get(f, &c0);
    CHECK(ts_pool_alloc(p, 1 * MiB + 4096, s1, 0, &b) == TS_ALLOC_OK && b == a,
          "same-stream reuse: got %#lx, freed %#lx", (unsigned long)b, (unsigned long)a);
    ts_fake_counters_get(f, &c1);
    CHECK(c1.fence_waits == c0.fence_waits, "same-stream reuse waited");
    CHECK(ts_pool_free(p, b, s1, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free b async");
    CHECK(ts_pool_alloc(p, 1 * MiB + 4096, s2, 0, &c) == TS_ALLOC_OK, "alloc c");
    ts_fake_counters_get(f, &c1);
    CHECK(c != a || c1.fence_waits > c0.fence_waits, "cross-stream reuse before the fence");
    ts_pool_free(p, c, s2, 0);
    done(p, f);
}

/* A check of stream-ordered frees fences their own stream only (PyTorch
 * registers some hundred streams per device, most of them idle: a fence
 * on each would cost as many driver calls per check); a check of a
 * synchronous free fences every stream. */
static void fences_where_needed(int mode)
{
    ts_fake_provider *f;
    no_tcache = 1;
    ts_pool *p = mk(&f, mode, 1024 * MiB, 0);
    no_tcache = 0;
    enum { NS = 64 };
    for (uint64_t s = 1; s <= NS; s++)
        ts_pool_stream_add(p, s << 8);
    const uint64_t s1 = 1 << 8, s2 = 2 << 8;
    uint64_t a, b, c, d;
    ts_fake_counters c0, c1;
    CHECK(ts_pool_alloc(p, 4 * MiB, s1, 0, &a) == TS_ALLOC_OK, "alloc a");
    CHECK(ts_pool_alloc(p, 4 * MiB, s1, 0, &c) == TS_ALLOC_OK, "alloc c");
    CHECK(ts_pool_free(p, a, s1, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free a async");
    ts_fake_counters_get(f, &c0);
    CHECK(ts_pool_alloc(p, 4 * MiB, s2, 0, &b) == TS_ALLOC_OK, "alloc b on another stream");
    ts_fake_counters_get(f, &c1);
    CHECK(c1.fence_records - c0.fence_records == 1, "a stream-ordered free fenced on %lu streams, want its own",
          (unsigned long)(c1.fence_records - c0.fence_records));
    CHECK(ts_pool_free(p, c, s1, 0) == TS_ALLOC_OK, "free c");
    ts_fake_counters_get(f, &c0);
    CHECK(ts_pool_alloc(p, 4 * MiB, s2, 0, &d) == TS_ALLOC_OK, "alloc d");
    ts_fake_counters_get(f, &c1);
    CHECK(c1.fence_records - c0.fence_records >= NS, "a synchronous free fenced on %lu streams, want all %d",
          (unsigned long)(c1.fence_records - c0.fence_records), NS);
    ts_pool_free(p, b, s2, 0);
    ts_pool_free(p, d, s2, 0);
    done(p, f);
}

/* While a stream captures: no fence operation on it (the fake counts them),
 * and a pending block is not reused (its safety cannot be established). */
static void capture(int mode)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, mode, 1024 * MiB, 0);
    const uint64_t s1 = 0x100, s2 = 0x200;
    ts_pool_stream_add(p, s1);
    ts_pool_stream_add(p, s2);
    uint64_t a, b, c;
    CHECK(ts_pool_alloc(p, 4 * MiB, s1, 0, &a) == TS_ALLOC_OK, "alloc a");
    ts_fake_set_capturing(f, s2, 1);
    ts_pool_stream_set_capturing(p, s2, true);
    CHECK(ts_pool_free(p, a, s1, 0) == TS_ALLOC_OK, "free a");
    CHECK(ts_pool_alloc(p, 4 * MiB, s1, 0, &b) == TS_ALLOC_OK, "alloc b during capture");
    CHECK(b != a, "pending block reused while a stream captures");
    CHECK(ts_pool_alloc(p, 1000, s2, TS_AF_CAPTURING, &c) == TS_ALLOC_OK, "alloc on the capturing stream");
    ts_pool_trim(p);   /* must not touch s2 either */
    ts_fake_counters fc;
    ts_fake_counters_get(f, &fc);
    CHECK(fc.fence_on_capturing == 0, "fence operations on the capturing stream: %lu",
          (unsigned long)fc.fence_on_capturing);
    ts_alloc_stats st;
    ts_pool_stats(p, &st);
    CHECK(st.pending_bytes == 4 * MiB, "pending bytes %lu during capture", (unsigned long)st.pending_bytes);
    ts_fake_set_capturing(f, s2, 0);
    ts_pool_stream_set_capturing(p, s2, false);
    CHECK(ts_pool_trim(p) == TS_ALLOC_OK, "trim after capture");
    ts_pool_stats(p, &st);
    CHECK(st.pending_bytes == 0, "still pending after capture ended and trim");
    ts_pool_free(p, b, s1, 0);
    ts_pool_free(p, c, s2, 0);
    done(p, f);
}

/* Expandable: freeing a block whose pages then become idle does not unmap
 * them before the fence, even when another allocation needs pages. */
static void no_unmap_before_fence(void)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, TS_ALLOC_EXPANDABLE, 1024 * MiB, 0);
    const uint64_t s1 = 0x100, s2 = 0x200;
    ts_pool_stream_add(p, s1);
    ts_pool_stream_add(p, s2);
    uint64_t a, b;
    CHECK(ts_pool_alloc(p, 8 * MiB, s1, 0, &a) == TS_ALLOC_OK, "alloc a");
    CHECK(ts_pool_free(p, a, s1, 0) == TS_ALLOC_OK, "free a");
    /* s2 captures: the pool cannot wait, so it must create pages, not move a's */
    ts_fake_set_capturing(f, s2, 1);
    ts_pool_stream_set_capturing(p, s2, true);
    CHECK(ts_pool_alloc(p, 64 * MiB, s1, 0, &b) == TS_ALLOC_OK, "alloc b");
    for (uint64_t x = a; x < a + 8 * MiB; x += 2 * MiB)
        CHECK(ts_fake_mapped(f, x), "page of a unmapped before its fence");
    ts_pool_free(p, b, s1, 0);
    ts_fake_set_capturing(f, s2, 0);
    ts_pool_stream_set_capturing(p, s2, false);
    done(p, f);
}

/* A removed stream is waited for once, then no longer fenced. */
static void stream_remove(void)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, TS_ALLOC_EXPANDABLE, 1024 * MiB, 0);
    const uint64_t s1 = 0x100, s2 = 0x200;
    ts_pool_stream_add(p, s1);
    ts_pool_stream_add(p, s2);
    uint64_t a;
    ts_pool_alloc(p, 3 * MiB, s2, 0, &a);
    ts_pool_free(p, a, s2, TS_FF_STREAM_ORDERED);
    ts_fake_counters c0, c1;
    ts_fake_counters_get(f, &c0);
    CHECK(ts_pool_stream_remove(p, s2) == TS_ALLOC_OK, "remove");
    ts_fake_counters_get(f, &c1);
    CHECK(c1.fence_waits == c0.fence_waits + 1, "remove did not wait on the stream");
    char err[256];
    CHECK(ts_pool_check(p, err, sizeof err) == 0, "check: %s", err);
    ts_pool_trim(p);
    ts_fake_counters_get(f, &c0);
    ts_pool_trim(p);
    ts_fake_counters_get(f, &c1);
    done(p, f);
}

int main(void)
{
    for (int mode = 0; mode < 2; mode++) {
        sync_free_not_reused(mode);
        waits_at_limit(mode);
        stream_ordered(mode, 1);
        stream_ordered(mode, 0);
        fences_where_needed(mode);
        capture(mode);
    }
    no_unmap_before_fence();
    stream_remove();
    printf(failures ? "%d failures\n" : "ok\n", failures);
    return failures != 0;
}
