/* How much a thread's cache may hold parked: 1/256 of the pool's reserved
 * bytes, at least 4 MiB and at most 32 MiB.  Parked blocks are held, so a
 * pool's reserved peak covers them; a fixed 32 MiB made small models reserve
 * several percent more than torch's expandable segments.  A small pool
 * parks at most 4 MiB of 48 MiB freed; once the pool has grown to 4 GiB,
 * the same frees park up to 16 MiB; at 10 GiB up to 32 MiB, no more.  A
 * free that would pass the cap empties the cache into the pool first, so
 * the cache holds the latest frees, not blocks parked long ago. */
#include <stdio.h>
#include <stdlib.h>
#include "alloc/alloc.h"
#include "check.h"
#include "replay/sim_provider.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define STREAM 0x100u
#define NBLOCKS 100
/* distinct sizes (a cache keeps at most 8 blocks of one size): 48 MiB in all */
#define BLOCK(i) ((256 + 8 * (uint64_t)(i)) << 10)

static ts_pool *mk(ts_fake_provider **fp)
{
    *fp = ts_fake_create(16 * GiB, 2 * MiB);
    ts_pool_config cfg = { .mode = TS_ALLOC_EXPANDABLE, .capacity = 16 * GiB };
    int st;
    ts_pool *p = ts_pool_create(&cfg, ts_fake_provider_table(*fp), &st);
    if (!p) {
        printf("FAIL: pool create %d\n", st);
        exit(1);
    }
    ts_pool_stream_add(p, STREAM);
    return p;
}

static ts_alloc_stats stats(ts_pool *p)
{
    ts_alloc_stats s;
    ts_pool_stats(p, &s);
    return s;
}

/* NBLOCKS blocks of BLOCK(i) bytes allocated, then freed in stream order
 * by this thread: the most its cache held meanwhile. */
static uint64_t parked_after_churn(ts_pool *p)
{
    uint64_t ptr[NBLOCKS], most = 0;
    for (int i = 0; i < NBLOCKS; i++)
        CHECK(ts_pool_alloc(p, BLOCK(i), STREAM, 0, &ptr[i]) == TS_ALLOC_OK && ptr[i], "alloc %d", i);
    for (int i = 0; i < NBLOCKS; i++) {
        CHECK(ts_pool_free(p, ptr[i], STREAM, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free %d", i);
        uint64_t now = stats(p).thread_cached_bytes;
        most = now > most ? now : most;
    }
    return most;
}

int main(void)
{
    ts_fake_provider *fp;
    ts_pool *p = mk(&fp);
    uint64_t small = parked_after_churn(p);
    printf("reserved %lu MiB: parked at most %lu KiB\n", (unsigned long)(stats(p).reserved_bytes / MiB),
           (unsigned long)(small >> 10));
    CHECK(small > 0 && small <= 4 * MiB, "a small pool's cache holds %lu bytes (cap 4 MiB)", (unsigned long)small);
    /* the latest free is in the cache: its size is a hit */
    uint64_t hits = stats(p).thread_cache_hits, last = 0;
    CHECK(ts_pool_alloc(p, BLOCK(NBLOCKS - 1), STREAM, 0, &last) == TS_ALLOC_OK && last, "last size again");
    CHECK(stats(p).thread_cache_hits == hits + 1, "the latest free was not in the cache (hits %lu -> %lu)",
          (unsigned long)hits, (unsigned long)stats(p).thread_cache_hits);
    CHECK(ts_pool_free(p, last, STREAM, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free last");

    /* the pool grows: the cap follows its reserved bytes */
    uint64_t big = 0;
    CHECK(ts_pool_alloc(p, 4 * GiB, STREAM, 0, &big) == TS_ALLOC_OK && big, "4 GiB");
    uint64_t mid = parked_after_churn(p);
    uint64_t reserved = stats(p).reserved_bytes;
    printf("reserved %lu MiB: parked at most %lu KiB\n", (unsigned long)(reserved / MiB), (unsigned long)(mid >> 10));
    CHECK(mid > 4 * MiB && mid <= reserved / 256, "a 4 GiB pool's cache holds %lu bytes (cap %lu)",
          (unsigned long)mid, (unsigned long)(reserved / 256));

    uint64_t bigger = 0;
    CHECK(ts_pool_alloc(p, 6 * GiB, STREAM, 0, &bigger) == TS_ALLOC_OK && bigger, "6 GiB more");
    uint64_t top = parked_after_churn(p);
    printf("reserved %lu MiB: parked at most %lu KiB\n", (unsigned long)(stats(p).reserved_bytes / MiB),
           (unsigned long)(top >> 10));
    CHECK(top > 16 * MiB && top <= 32 * MiB, "a 10 GiB pool's cache holds %lu bytes (cap 32 MiB)",
          (unsigned long)top);

    CHECK(ts_pool_free(p, big, STREAM, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free 4 GiB");
    CHECK(ts_pool_free(p, bigger, STREAM, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free 6 GiB");
    ts_pool_destroy(p);
    ts_fake_destroy(fp);
    if (failures) {
        printf("test_alloc_tcache_cap: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_alloc_tcache_cap: ok\n");
    return 0;
}
