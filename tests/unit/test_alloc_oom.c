/* OOM path, memory limit and fault injection over the fake provider:
 * the caller sees TS_ALLOC_OOM with a filled report and ptr 0, nothing leaks,
 * idle memory is given back and the allocation retried once, trim returns
 * everything, the limit caps reserved bytes, and create/map/set_access/
 * seg_alloc/fence_record failing at random points leave the pool consistent
 * (ts_pool_check after every operation) and leak nothing. */
#include <stdio.h>
#include <stdlib.h>
#include "alloc/alloc.h"
#include "replay/sim_provider.h"

#define MiB (1ull << 20)
static int failures;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); failures++; } } while (0)

static ts_pool *mk(ts_fake_provider **fp, int mode, uint64_t cap, uint64_t limit)
{
    *fp = ts_fake_create(cap, 2 * MiB);
    ts_pool_config cfg = {.mode = mode, .capacity = cap, .memory_limit = limit};
    int st;
    ts_pool *p = ts_pool_create(&cfg, ts_fake_provider_table(*fp), &st);
    if (!p) {
        printf("FAIL: pool create %d\n", st);
        exit(1);
    }
    return p;
}

static void check(ts_pool *p, const char *what)
{
    char err[256];
    CHECK(ts_pool_check(p, err, sizeof err) == 0, "%s: %s", what, err);
}

static void finish(ts_pool *p, ts_fake_provider *f)
{
    CHECK(ts_pool_trim(p) == TS_ALLOC_OK, "trim");
    ts_alloc_stats st;
    ts_pool_stats(p, &st);
    CHECK(st.reserved_bytes == 0, "reserved after trim: %lu", (unsigned long)st.reserved_bytes);
    check(p, "finish");
    ts_pool_destroy(p);
    ts_fake_counters c;
    ts_fake_counters_get(f, &c);
    CHECK(c.live_handles == 0 && c.mapped_pages == 0 && c.seg_bytes == 0 && c.live_fences == 0,
          "leak: handles %lu pages %lu seg %lu fences %lu", (unsigned long)c.live_handles,
          (unsigned long)c.mapped_pages, (unsigned long)c.seg_bytes, (unsigned long)c.live_fences);
    CHECK(c.misuse == 0, "misuse %lu", (unsigned long)c.misuse);
    ts_fake_destroy(f);
}

/* Fill the device, see OOM with a report, free, succeed. */
static void oom_report(int mode)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, mode, 64 * MiB, 0);
    uint64_t ptrs[64];
    int n = 0;
    uint64_t ptr = 7;
    int rc;
    while (n < 64 && (rc = ts_pool_alloc(p, 5 * MiB + 1000 * n, 0, 0, &ptr)) == TS_ALLOC_OK)
        ptrs[n++] = ptr;
    CHECK(n >= 5 && n < 64, "%s: %d allocations of ~5 MiB fit in 64 MiB", ts_alloc_mode_name(mode), n);
    CHECK(rc == TS_ALLOC_OOM && ptr == 0, "rc %d ptr %#lx", rc, (unsigned long)ptr);
    ts_oom_report r;
    ts_pool_last_oom(p, &r);
    CHECK(r.requested == 5 * MiB + 1000 * (uint64_t)n, "report requested %lu", (unsigned long)r.requested);
    CHECK(r.reserved > 0 && r.reserved <= 64 * MiB && r.allocated > 0 && r.allocated <= r.reserved,
          "report reserved %lu allocated %lu", (unsigned long)r.reserved, (unsigned long)r.allocated);
    CHECK(r.ntop > 0 && r.ntop <= TS_OOM_TOP, "report ntop %d", r.ntop);
    for (int i = 1; i < r.ntop; i++)
        CHECK(r.top_size[i - 1] >= r.top_size[i], "top blocks not sorted");
    CHECK(r.top_size[0] == ts_round_up(5 * MiB + 1000 * (uint64_t)(n - 1), 512), "largest live %lu",
          (unsigned long)r.top_size[0]);
    ts_alloc_stats st;
    ts_pool_stats(p, &st);
    CHECK(st.ooms == 1, "ooms %lu", (unsigned long)st.ooms);
    check(p, "after oom");
    for (int i = 0; i < n; i += 2)
        ts_pool_free(p, ptrs[i], 0, 0);
    /* memory freed by sync frees becomes reusable: the same request now fits */
    CHECK(ts_pool_alloc(p, 5 * MiB, 0, 0, &ptr) == TS_ALLOC_OK, "retry after free");
    ts_pool_free(p, ptr, 0, 0);
    for (int i = 1; i < n; i += 2)
        ts_pool_free(p, ptrs[i], 0, 0);
    finish(p, f);
}

/* Cached idle memory of one shape must be given back for another shape:
 * caching mode keeps small segments; expandable keeps idle pages. */
static void oom_releases_cache(int mode)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, mode, 64 * MiB, 0);
    ts_fake_set_manual_fences(f, 1);
    ts_pool_stream_add(p, 0x100);
    uint64_t small[200];
    int n = 0;
    for (; n < 200; n++)
        if (ts_pool_alloc(p, 256 * 1024, 0x100, 0, &small[n]))
            break;
    CHECK(n >= 100, "only %d small blocks", n);
    for (int i = 0; i < n; i++)
        ts_pool_free(p, small[i], 0x100, 0);   /* pending on a fence not yet complete */
    uint64_t big;
    CHECK(ts_pool_alloc(p, 40 * MiB, 0x100, 0, &big) == TS_ALLOC_OK,
          "%s: big block after small ones were freed (idle memory not reclaimed)", ts_alloc_mode_name(mode));
    check(p, "after reclaim");
    ts_pool_free(p, big, 0, 0);
    finish(p, f);
}

/* A memory limit caps reserved bytes. */
static void limit(int mode)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, mode, 1024 * MiB, 48 * MiB);
    uint64_t ptrs[64];
    int n = 0;
    while (n < 64 && ts_pool_alloc(p, 3 * MiB, 0, 0, &ptrs[n]) == TS_ALLOC_OK) {
        n++;
        ts_alloc_stats st;
        ts_pool_stats(p, &st);
        CHECK(st.reserved_bytes <= 48 * MiB, "reserved %lu over limit", (unsigned long)st.reserved_bytes);
    }
    CHECK(n >= 10 && n <= 16, "%s: %d x 3 MiB under a 48 MiB limit", ts_alloc_mode_name(mode), n);
    ts_oom_report r;
    ts_pool_last_oom(p, &r);
    CHECK(r.memory_limit == 48 * MiB, "report limit");
    for (int i = 0; i < n; i++)
        ts_pool_free(p, ptrs[i], 0, 0);
    finish(p, f);
}

/* Random failures of provider calls. */
static void faults(int mode, uint64_t seed)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, mode, 256 * MiB, 0);
    const char *ops[] = {"create", "map", "set_access", "seg_alloc", "fence_record"};
    for (int i = 0; i < 5; i++)
        ts_fake_fail_random(f, ops[i], 0.08, seed + i, i % 2 ? TS_PROV_ERROR : TS_PROV_OOM);
    uint64_t live[128], rng = seed * 7919 + 1;
    int n = 0, errors = 0, oks = 0;
    for (int op = 0; op < 2000; op++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        if (rng % 100 < 55 && n < 128) {
            uint64_t ptr = 1, size = rng % 3 ? (rng >> 8) % (2 * MiB) : (rng >> 8) % (24 * MiB);
            int rc = ts_pool_alloc(p, size, (rng >> 40) % 2 ? 0x100 : 0, 0, &ptr);
            if (rc == TS_ALLOC_OK && size) {
                live[n++] = ptr;
                oks++;
            } else if (rc != TS_ALLOC_OK) {
                CHECK(rc == TS_ALLOC_OOM || rc == TS_ALLOC_ERROR, "rc %d", rc);
                CHECK(ptr == 0, "ptr set on failure");
                errors++;
            }
        } else if (n) {
            int i = (int)((rng >> 20) % n);
            CHECK(ts_pool_free(p, live[i], (rng >> 40) % 2 ? 0x100 : 0, (rng >> 30) % 2 ? TS_FF_STREAM_ORDERED : 0)
                  == TS_ALLOC_OK, "free");
            live[i] = live[--n];
        }
        char err[256];
        if (ts_pool_check(p, err, sizeof err)) {
            printf("FAIL faults %s seed %lu op %d: %s\n", ts_alloc_mode_name(mode), (unsigned long)seed, op, err);
            failures++;
            break;
        }
        ts_fake_counters c;
        ts_fake_counters_get(f, &c);
        if (c.misuse) {
            printf("FAIL faults %s: provider misuse at op %d\n", ts_alloc_mode_name(mode), op);
            failures++;
            break;
        }
    }
    CHECK(errors > 0 && oks > 100, "faults %s: %d errors, %d successes", ts_alloc_mode_name(mode), errors, oks);
    for (int i = 0; i < 5; i++)
        ts_fake_fail_random(f, ops[i], 0, 0, 0);
    for (int i = 0; i < n; i++)
        ts_pool_free(p, live[i], 0, 0);
    finish(p, f);
}

/* A failure at a chosen point of a multi-page allocation rolls back. */
static void nth_failure(void)
{
    for (int which = 0; which < 3; which++) {
        const char *op = (const char *[]){"create", "map", "set_access"}[which];
        /* 7 MiB = 4 pages: 4 creates, 4 maps, one set_access over the run */
        for (uint64_t nth = 1; nth <= (which == 2 ? 1u : 4u); nth++) {
            ts_fake_provider *f;
            ts_pool *p = mk(&f, TS_ALLOC_EXPANDABLE, 256 * MiB, 0);
            ts_fake_fail_nth(f, op, nth, which == 0 ? TS_PROV_OOM : TS_PROV_ERROR);
            uint64_t ptr = 1;
            int rc = ts_pool_alloc(p, 7 * MiB, 0, 0, &ptr);
            ts_fake_counters c;
            ts_fake_counters_get(f, &c);
            if (which == 0)   /* one failed create is retried after releasing idle memory */
                CHECK(rc == TS_ALLOC_OK, "create failing once (nth %lu): rc %d", (unsigned long)nth, rc);
            else
                CHECK(rc == TS_ALLOC_ERROR && ptr == 0 && c.live_handles == 0 && c.mapped_pages == 0,
                      "%s failing (nth %lu): rc %d, %lu handles %lu pages left", op, (unsigned long)nth, rc,
                      (unsigned long)c.live_handles, (unsigned long)c.mapped_pages);
            check(p, op);
            if (rc == TS_ALLOC_OK)
                ts_pool_free(p, ptr, 0, 0);
            /* afterwards the same request works */
            CHECK(ts_pool_alloc(p, 7 * MiB, 0, 0, &ptr) == TS_ALLOC_OK, "after %s failure", op);
            ts_pool_free(p, ptr, 0, 0);
            finish(p, f);
        }
    }
}

int main(void)
{
    const char *e = getenv("EMU_SEED");
    uint64_t seed = e ? strtoull(e, NULL, 0) : 1;
    for (int mode = 0; mode < 3; mode++) {
        oom_report(mode);
        if (mode != TS_ALLOC_OFF)
            oom_releases_cache(mode);
        limit(mode);
        faults(mode, seed);
        faults(mode, seed + 100);
    }
    nth_failure();
    printf(failures ? "%d failures\n" : "ok\n", failures);
    return failures != 0;
}
