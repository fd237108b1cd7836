/* Randomized single-thread stress of the device allocator in all three modes
 * over the fake provider with manual fences.  After every operation:
 * ts_pool_check (tiling, index, FIFO, page references and mappings, exact
 * byte accounting), no two live blocks overlap, allocated bytes equal the
 * test's own sum, reserved equals the fake's physical bytes, the fake saw no
 * misuse and no fence on a capturing stream, and no block freed while work
 * may still use it was handed out again or unmapped before its fence.
 * Seed: EMU_SEED (default 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "alloc/alloc.h"
#include "replay/sim_provider.h"

#define NSTREAMS 3
#define MAXLIVE 400
#define MAXFREED 4096
#define MiB (1ull << 20)

typedef struct { uint64_t ptr, size, stream; } live_t;
/* a freed region not yet known safe: snapshot of fences recorded per stream */
typedef struct { uint64_t ptr, size, stream; int ordered; uint64_t snap[NSTREAMS]; } freed_t;

static uint64_t rng;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static live_t live[MAXLIVE];
static int nlive;
static freed_t freed[MAXFREED];
static int nfreed;
static const uint64_t streams[NSTREAMS] = {0, 0x1000, 0x2000};
static int failures;
static int trace;

#define CHECK(c, ...) do { if (!(c)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); failures++; return -1; } } while (0)

static uint64_t rsize(void)
{
    switch (rnd() % 6) {
    case 0: return rnd() % 4096;                     /* tiny, incl. 0 */
    case 1: return rnd() % (1 * MiB);                 /* small arena */
    case 2: return MiB + rnd() % (9 * MiB);
    case 3: return 2 * MiB * (1 + rnd() % 8);         /* page multiples */
    case 4: return rnd() % (48 * MiB);
    default: return 512 * (1 + rnd() % 64);
    }
}

/* Drops freed regions that became safe: a fence recorded after the free
 * completed on every stream, or, stream-ordered, on its own stream (as the
 * driver's pools reuse a completed stream-ordered free on any stream: work
 * of other streams on the block was ordered before the free by the
 * program). */
static void age_freed(ts_fake_provider *f)
{
    uint64_t rec[NSTREAMS], done[NSTREAMS];
    for (int s = 0; s < NSTREAMS; s++)
        ts_fake_stream_progress(f, streams[s], &rec[s], &done[s]);
    for (int i = 0; i < nfreed;) {
        int safe = 1;
        for (int s = 0; s < NSTREAMS; s++)
            if (done[s] <= freed[i].snap[s] && (!freed[i].ordered || streams[s] == freed[i].stream))
                safe = 0;
        if (safe)
            freed[i] = freed[--nfreed];
        else
            i++;
    }
}

static int check_all(ts_pool *p, ts_fake_provider *f, int mode)
{
    char err[256];
    CHECK(ts_pool_check(p, err, sizeof err) == 0, "check: %s", err);
    ts_alloc_stats st;
    ts_pool_stats(p, &st);
    uint64_t sum = 0;
    for (int i = 0; i < nlive; i++)
        sum += ts_round_up(live[i].size, 512);
    CHECK(st.allocated_bytes == sum, "allocated %lu != live sum %lu", (unsigned long)st.allocated_bytes, (unsigned long)sum);
    ts_fake_counters c;
    ts_fake_counters_get(f, &c);
    CHECK(c.misuse == 0, "provider misuse %lu", (unsigned long)c.misuse);
    CHECK(c.fence_on_capturing == 0, "fence work on a capturing stream");
    uint64_t phys = mode == TS_ALLOC_EXPANDABLE ? c.phys_bytes : c.seg_bytes;
    CHECK(phys == st.reserved_bytes, "reserved %lu != provider bytes %lu", (unsigned long)st.reserved_bytes, (unsigned long)phys);
    if (mode == TS_ALLOC_EXPANDABLE) {
        /* every unsafe freed region still mapped: no unmap before its fence */
        for (int i = 0; i < nfreed; i++)
            for (uint64_t a = freed[i].ptr & ~(2 * MiB - 1); a < freed[i].ptr + freed[i].size; a += 2 * MiB)
                CHECK(ts_fake_mapped(f, a < freed[i].ptr ? freed[i].ptr : a),
                      "page of a freed block unmapped before its fence");
        for (int i = 0; i < nlive; i++)
            for (uint64_t a = live[i].ptr; a < live[i].ptr + live[i].size; a += 2 * MiB)
                CHECK(ts_fake_mapped(f, a), "live block page not mapped");
    }
    return 0;
}

static void age_freed(ts_fake_provider *f);
static int on_alloc(uint64_t ptr, uint64_t size, uint64_t stream)
{
    uint64_t end = ptr + ts_round_up(size, 512);
    CHECK(ptr % 512 == 0, "unaligned %#lx", (unsigned long)ptr);
    for (int i = 0; i < nlive; i++)
        CHECK(end <= live[i].ptr || ptr >= live[i].ptr + ts_round_up(live[i].size, 512),
              "overlap %#lx+%lu with %#lx+%lu", (unsigned long)ptr, (unsigned long)size,
              (unsigned long)live[i].ptr, (unsigned long)live[i].size);
    for (int i = 0; i < nfreed;) {
        freed_t fr = freed[i];
        int overlap = !(end <= fr.ptr || ptr >= fr.ptr + fr.size);
        CHECK(!overlap || (fr.ordered && fr.stream == stream),
              "reused %#lx (ordered %d) freed on stream %#lx before its fence (alloc on %#lx)",
              (unsigned long)fr.ptr, fr.ordered, (unsigned long)fr.stream, (unsigned long)stream);
        if (!overlap) {
            i++;
            continue;
        }
        /* reuse in stream order: the new owner's uses follow the old ones and
         * its own free answers for both (as with cudaMallocAsync); the parts
         * outside the new block stay unsafe */
        freed[i] = freed[--nfreed];
        if (fr.ptr < ptr && nfreed < MAXFREED) {
            freed[nfreed] = fr;
            freed[nfreed++].size = ptr - fr.ptr;
        }
        if (fr.ptr + fr.size > end && nfreed < MAXFREED) {
            freed[nfreed] = fr;
            freed[nfreed].ptr = end;
            freed[nfreed++].size = fr.ptr + fr.size - end;
        }
    }
    return 0;
}

static int run(int mode, uint64_t seed, int ops)
{
    rng = seed * 0x9e3779b97f4a7c15ull + 1;
    nlive = nfreed = 0;
    uint64_t cap = 512 * MiB;
    ts_fake_provider *f = ts_fake_create(cap, 2 * MiB);
    ts_fake_set_manual_fences(f, 1);
    ts_pool_config cfg = {.mode = mode, .capacity = cap, .va_factor = 4,
                          .no_thread_cache = (seed & 1)};
    int st;
    ts_pool *p = ts_pool_create(&cfg, ts_fake_provider_table(f), &st);
    CHECK(p && st == TS_ALLOC_OK, "create mode %d: %d", mode, st);
    for (int s = 0; s < NSTREAMS; s++)
        ts_pool_stream_add(p, streams[s]);
    int capturing = -1;
    for (int op = 0; op < ops; op++) {
        uint64_t r = rnd() % 100;
        if (r < 45 && nlive < MAXLIVE) {
            uint64_t size = rsize(), ptr = 1;
            uint64_t stream = streams[rnd() % NSTREAMS];
            unsigned flags = capturing >= 0 && streams[capturing] == stream ? TS_AF_CAPTURING : 0;
            int rc = ts_pool_alloc(p, size, stream, flags, &ptr);
            if (trace)
                printf("op %d alloc %lu on %#lx%s -> %d %#lx\n", op, (unsigned long)size, (unsigned long)stream,
                       flags ? " (capturing)" : "", rc, (unsigned long)ptr);
            if (size == 0) {
                CHECK(rc == TS_ALLOC_OK && ptr == 0, "size 0 -> %d %#lx", rc, (unsigned long)ptr);
            } else if (rc == TS_ALLOC_OK) {
                age_freed(f);   /* fences the pool waited for inside the call count */
                if (on_alloc(ptr, size, stream))
                    return printf("  (mode %s seed %lu op %d size %lu)\n", ts_alloc_mode_name(mode),
                                  (unsigned long)seed, op, (unsigned long)size), -1;
                live[nlive++] = (live_t){ptr, size, stream};
            } else {
                CHECK(rc == TS_ALLOC_OOM && ptr == 0, "alloc %lu: rc %d", (unsigned long)size, rc);
            }
        } else if (r < 88 && nlive) {
            int i = (int)(rnd() % nlive);
            uint64_t stream = streams[rnd() % NSTREAMS];
            int ordered = rnd() % 2 && mode != TS_ALLOC_OFF;
            freed_t fr = {live[i].ptr, ts_round_up(live[i].size, 512), stream, ordered, {0}};
            uint64_t done;
            for (int s = 0; s < NSTREAMS; s++)
                ts_fake_stream_progress(f, streams[s], &fr.snap[s], &done);
            CHECK(ts_pool_free(p, live[i].ptr, stream, ordered ? TS_FF_STREAM_ORDERED : 0) == TS_ALLOC_OK, "free");
            CHECK(ts_pool_free(p, live[i].ptr, stream, 0) == TS_ALLOC_INVALID, "double free accepted");
            if (trace)
                printf("op %d free %#lx+%lu on %#lx%s\n", op, (unsigned long)fr.ptr, (unsigned long)fr.size,
                       (unsigned long)stream, ordered ? " ordered" : "");
            live[i] = live[--nlive];
            if (mode != TS_ALLOC_OFF && nfreed < MAXFREED)
                freed[nfreed++] = fr;
            else if (mode != TS_ALLOC_OFF) {
                ts_pool_trim(p);   /* oracle full: let everything finish */
            }
        } else if (r < 95) {
            int s = (int)(rnd() % NSTREAMS);
            if (capturing != s)
                ts_fake_complete_stream(f, streams[s]);   /* device progress */
            if (trace)
                printf("op %d complete %#lx\n", op, (unsigned long)streams[s]);
        } else if (r < 97) {
            /* begin or end a capture on one stream */
            if (capturing >= 0) {
                ts_fake_set_capturing(f, streams[capturing], 0);
                ts_pool_stream_set_capturing(p, streams[capturing], false);
                capturing = -1;
            } else {
                capturing = (int)(rnd() % NSTREAMS);
                if (trace)
                    printf("op %d capture %#lx\n", op, (unsigned long)streams[capturing]);
                ts_fake_set_capturing(f, streams[capturing], 1);
                ts_pool_stream_set_capturing(p, streams[capturing], true);
            }
        } else if (r < 98 && capturing < 0) {
            CHECK(ts_pool_trim(p) == TS_ALLOC_OK, "trim");
        } else {
            CHECK(ts_pool_free(p, 0x12345600, 0, 0) == TS_ALLOC_INVALID, "bogus free accepted");
        }
        age_freed(f);
        if (check_all(p, f, mode))
            return printf("  (mode %s seed %lu op %d)\n", ts_alloc_mode_name(mode), (unsigned long)seed, op), -1;
    }
    ts_alloc_stats s;
    ts_pool_stats(p, &s);
    printf("mode %-10s seed %lu: allocs %lu frees %lu peak reserved %lu MiB peak allocated %lu MiB driver calls %lu ooms %lu hits %lu\n",
           ts_alloc_mode_name(mode), (unsigned long)seed, (unsigned long)s.allocs, (unsigned long)s.frees,
           (unsigned long)(s.peak_reserved_bytes >> 20), (unsigned long)(s.peak_allocated_bytes >> 20),
           (unsigned long)s.driver_calls, (unsigned long)s.ooms, (unsigned long)s.cache_hits);
    CHECK(s.allocs > 100 && s.frees > 100, "too few operations happened");
    if (capturing >= 0) {
        ts_fake_set_capturing(f, streams[capturing], 0);
        ts_pool_stream_set_capturing(p, streams[capturing], false);
    }
    for (int i = 0; i < nlive; i++)
        CHECK(ts_pool_free(p, live[i].ptr, 0, 0) == TS_ALLOC_OK, "final free");
    nlive = 0;
    CHECK(ts_pool_trim(p) == TS_ALLOC_OK, "final trim");
    nfreed = 0;
    if (check_all(p, f, mode))
        return -1;
    ts_pool_stats(p, &s);
    CHECK(s.reserved_bytes == 0 && s.allocated_bytes == 0, "after trim: reserved %lu allocated %lu",
          (unsigned long)s.reserved_bytes, (unsigned long)s.allocated_bytes);
    ts_pool_destroy(p);
    ts_fake_counters c;
    ts_fake_counters_get(f, &c);
    CHECK(c.live_handles == 0 && c.mapped_pages == 0 && c.seg_bytes == 0 && c.live_fences == 0 && c.misuse == 0,
          "leak after destroy: handles %lu pages %lu seg %lu fences %lu misuse %lu", (unsigned long)c.live_handles,
          (unsigned long)c.mapped_pages, (unsigned long)c.seg_bytes, (unsigned long)c.live_fences, (unsigned long)c.misuse);
    CHECK(c.reserves == c.unreserves, "virtual range not freed");
    ts_fake_destroy(f);
    return 0;
}

int main(void)
{
    const char *e = getenv("EMU_SEED");
    uint64_t seed = e ? strtoull(e, NULL, 0) : 1;
    trace = getenv("TS_TRACE") != NULL;
    for (int mode = 0; mode < 3; mode++)
        for (uint64_t k = 0; k < 2; k++)
            if (run(mode, seed + k, 3000))
                return 1;
    printf(failures ? "FAILED\n" : "ok\n");
    return failures != 0;
}
