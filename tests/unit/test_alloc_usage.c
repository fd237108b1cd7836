/* A pool's usage figures, what a memory pool's attributes answer
 * (ts_pool_usage_of; torch's memory_allocated / max_memory_allocated under
 * backend:cudaMallocAsync): live stream-ordered bytes are the bytes asked
 * for, unrounded, on every path (a fresh block, a thread-cache hit whose
 * block served another size before, the slow path), as the driver counts
 * them; synchronous blocks are not counted, and reserved leaves out whole
 * synchronous blocks; resetting the attributes' peaks
 * (torch.cuda.reset_peak_memory_stats) leaves the pool's own whole-run peaks
 * (ts_pool_stats, the report's peak reserved) alone.  A block parked in a
 * thread's cache stays in the pool's counter until reused or drained, so
 * the figures are checked with two threads' caches holding blocks; and how
 * much a cache may hold follows the pool's size. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include "alloc/alloc.h"
#include "replay/sim_provider.h"

#define MiB (1ull << 20)
#define STREAM 0x100u
static int failures;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); failures++; } } while (0)

static ts_pool *mk_of(ts_fake_provider **fp, uint64_t capacity)
{
    *fp = ts_fake_create(capacity, 2 * MiB);
    ts_pool_config cfg = { .mode = TS_ALLOC_EXPANDABLE, .capacity = capacity };
    int st;
    ts_pool *p = ts_pool_create(&cfg, ts_fake_provider_table(*fp), &st);
    if (!p) {
        printf("FAIL: pool create %d\n", st);
        exit(1);
    }
    ts_pool_stream_add(p, STREAM);
    return p;
}

static ts_pool_usage usage(ts_pool *p)
{
    ts_pool_usage u;
    ts_pool_usage_of(p, &u);
    return u;
}

static uint64_t alloc(ts_pool *p, uint64_t size, uint64_t stream)
{
    uint64_t ptr = 0;
    CHECK(ts_pool_alloc(p, size, stream, 0, &ptr) == TS_ALLOC_OK && ptr, "alloc %lu", (unsigned long)size);
    return ptr;
}

static void free_async(ts_pool *p, uint64_t ptr)
{
    CHECK(ts_pool_free(p, ptr, STREAM, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free");
}

/* Sizes that round to the same block: the thread cache hands the block of
 * the first to the second, whose own size must be what counts. */
static void exact_bytes(void)
{
    ts_fake_provider *f;
    ts_pool *p = mk_of(&f, 256 * MiB);
    uint64_t a = alloc(p, 100, STREAM);
    CHECK(usage(p).live == 100, "fresh block: live %lu, want 100", (unsigned long)usage(p).live);
    free_async(p, a);
    CHECK(usage(p).live == 0, "after free: live %lu", (unsigned long)usage(p).live);
    uint64_t b = alloc(p, 4, STREAM); /* the same 512-byte block, from the thread cache */
    CHECK(b == a, "the cached block was not reused (%lx, %lx): the case is not tested", (unsigned long)a,
          (unsigned long)b);
    CHECK(usage(p).live == 4 && usage(p).peak_live == 100, "cache hit: live %lu peak %lu, want 4 and 100",
          (unsigned long)usage(p).live, (unsigned long)usage(p).peak_live);
    uint64_t c = alloc(p, (3 * MiB) + 4, STREAM);
    uint64_t sync = alloc(p, 1000, TS_STREAM_NONE); /* cudaMalloc: no pool holds it */
    CHECK(usage(p).live == 4 + 3 * MiB + 4, "slow path: live %lu", (unsigned long)usage(p).live);
    /* reserved: the pool's pages less the live synchronous blocks, whole
     * blocks (not less the rounding of the stream-ordered ones) */
    CHECK(usage(p).reserved >= usage(p).live && usage(p).reserved % 512 == 0, "reserved %lu (live %lu)",
          (unsigned long)usage(p).reserved, (unsigned long)usage(p).live);
    free_async(p, b);
    free_async(p, c);
    CHECK(ts_pool_free(p, sync, TS_STREAM_NONE, 0) == TS_ALLOC_OK, "free sync");
    CHECK(usage(p).live == 0 && usage(p).peak_live == 3 * MiB + 8, "end: live %lu peak %lu",
          (unsigned long)usage(p).live, (unsigned long)usage(p).peak_live);
    ts_pool_destroy(p);
    ts_fake_destroy(f);
}

/* The attributes' peaks restart; ts_pool_stats' stay the run's. */
static void reset_peaks(void)
{
    ts_fake_provider *f;
    ts_pool *p = mk_of(&f, 256 * MiB);
    uint64_t big = alloc(p, 40 * MiB, STREAM);
    free_async(p, big);
    CHECK(ts_pool_trim(p) == TS_ALLOC_OK, "trim");
    ts_alloc_stats before;
    ts_pool_stats(p, &before);
    CHECK(before.peak_reserved_bytes >= 40 * MiB, "peak reserved %lu", (unsigned long)before.peak_reserved_bytes);
    ts_pool_reset_peaks(p, true, true);
    ts_pool_usage u = usage(p);
    CHECK(u.peak_reserved < 40 * MiB && u.peak_live == 0, "attributes after reset: reserved high %lu, used high %lu",
          (unsigned long)u.peak_reserved, (unsigned long)u.peak_live);
    ts_alloc_stats after;
    ts_pool_stats(p, &after);
    CHECK(after.peak_reserved_bytes == before.peak_reserved_bytes
              && after.allocated_at_reserved_peak == before.allocated_at_reserved_peak
              && after.peak_allocated_bytes == before.peak_allocated_bytes,
          "the pool's own peaks were reset: reserved %lu -> %lu, allocated at it %lu -> %lu",
          (unsigned long)before.peak_reserved_bytes, (unsigned long)after.peak_reserved_bytes,
          (unsigned long)before.allocated_at_reserved_peak, (unsigned long)after.allocated_at_reserved_peak);
    ts_pool_destroy(p);
    ts_fake_destroy(f);
}

/* Two threads taking turns (one step each, in order), each with blocks
 * parked in its own cache while the other allocates: every figure must be
 * the live bytes, not the counter that still holds the other's parked
 * blocks. */
static struct two_threads {
    ts_pool *p;
    sem_t go_main, go_other;
    uint64_t b;
} tt;

static ts_pool_usage expect_usage(uint64_t live, uint64_t peak, const char *when)
{
    ts_pool_usage u = usage(tt.p);
    CHECK(u.live == live && u.peak_live == peak, "%s: live %lu peak %lu, want %lu and %lu", when,
          (unsigned long)u.live, (unsigned long)u.peak_live, (unsigned long)live, (unsigned long)peak);
    return u;
}

static void *other_thread(void *arg)
{
    (void)arg;
    sem_wait(&tt.go_other);
    tt.b = alloc(tt.p, 2 * MiB, STREAM); /* fresh, while main's 1 MiB sits parked */
    expect_usage(2 * MiB, 2 * MiB, "other's fresh block beside main's parked one");
    free_async(tt.p, tt.b);
    sem_post(&tt.go_main);
    sem_wait(&tt.go_other);
    uint64_t b = alloc(tt.p, 2 * MiB, STREAM); /* its own cache's block: both live now */
    CHECK(b == tt.b, "the other thread's cached block was not reused: the case is not tested");
    expect_usage(3 * MiB, 3 * MiB, "both threads' cached blocks reused");
    free_async(tt.p, b);
    sem_post(&tt.go_main);
    sem_wait(&tt.go_other); /* stays alive, its block parked, until main is done */
    return NULL;
}

static void parked_in_two_caches(void)
{
    ts_fake_provider *f;
    tt.p = mk_of(&f, 256 * MiB);
    sem_init(&tt.go_main, 0, 0);
    sem_init(&tt.go_other, 0, 0);
    pthread_t t;
    pthread_create(&t, NULL, other_thread, NULL);
    uint64_t a = alloc(tt.p, 1 * MiB, STREAM);
    free_async(tt.p, a);
    sem_post(&tt.go_other);
    sem_wait(&tt.go_main);
    uint64_t a2 = alloc(tt.p, 1 * MiB, STREAM); /* main's hit while the other's block is parked */
    CHECK(a2 == a, "main's cached block was not reused: the case is not tested");
    expect_usage(1 * MiB, 2 * MiB, "main's hit beside the other's parked block");
    sem_post(&tt.go_other);
    sem_wait(&tt.go_main);
    free_async(tt.p, a2);
    uint64_t a3 = alloc(tt.p, 1 * MiB - 100, STREAM); /* same block, fewer bytes */
    CHECK(a3 == a, "main's cached block was not reused for a smaller request");
    expect_usage(1 * MiB - 100, 3 * MiB, "a hit of another size");
    ts_pool_reset_peaks(tt.p, false, true);
    expect_usage(1 * MiB - 100, 1 * MiB - 100, "peak reset with a block parked");
    CHECK(ts_pool_trim(tt.p) == TS_ALLOC_OK, "trim"); /* drains main's cache, asks the other's */
    free_async(tt.p, a3);
    expect_usage(0, 1 * MiB - 100, "all freed");
    ts_alloc_stats st;
    ts_pool_stats(tt.p, &st);
    CHECK(st.live_bytes == 0 && st.peak_live_bytes == 1 * MiB - 100, "pool stats: live %lu peak %lu",
          (unsigned long)st.live_bytes, (unsigned long)st.peak_live_bytes);
    sem_post(&tt.go_other);
    pthread_join(t, NULL); /* its exit drains its cache */
    expect_usage(0, 1 * MiB - 100, "after the other thread's exit");
    ts_pool_destroy(tt.p);
    ts_fake_destroy(f);
}

/* ---- the cache's cap ---- */
#define GiB (1ull << 30)
#define NBLOCKS 100
/* distinct sizes (a cache keeps at most 8 blocks of one size): 48 MiB in all */
#define BLOCK(i) ((256 + 8 * (uint64_t)(i)) << 10)

static ts_alloc_stats pool_stats(ts_pool *p)
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
        uint64_t now = pool_stats(p).thread_cached_bytes;
        most = now > most ? now : most;
    }
    return most;
}

/* How much a thread's cache may hold parked: 1/256 of the pool's reserved
 * bytes, at least 4 MiB and at most 32 MiB.  Parked blocks are held, so a
 * pool's reserved peak covers them; a fixed 32 MiB made small models reserve
 * several percent more than torch's expandable segments.  A small pool
 * parks at most 4 MiB of 48 MiB freed; once the pool has grown to 4 GiB,
 * the same frees park up to 16 MiB; at 10 GiB up to 32 MiB, no more.  A
 * free that would pass the cap empties the cache into the pool first, so
 * the cache holds the latest frees, not blocks parked long ago. */
static void cache_cap_follows_pool(void)
{
    ts_fake_provider *fp;
    ts_pool *p = mk_of(&fp, 16 * GiB);
    uint64_t small = parked_after_churn(p);
    printf("reserved %lu MiB: parked at most %lu KiB\n", (unsigned long)(pool_stats(p).reserved_bytes / MiB),
           (unsigned long)(small >> 10));
    CHECK(small > 0 && small <= 4 * MiB, "a small pool's cache holds %lu bytes (cap 4 MiB)", (unsigned long)small);
    /* the latest free is in the cache: its size is a hit */
    uint64_t hits = pool_stats(p).thread_cache_hits, last = 0;
    CHECK(ts_pool_alloc(p, BLOCK(NBLOCKS - 1), STREAM, 0, &last) == TS_ALLOC_OK && last, "last size again");
    CHECK(pool_stats(p).thread_cache_hits == hits + 1, "the latest free was not in the cache (hits %lu -> %lu)",
          (unsigned long)hits, (unsigned long)pool_stats(p).thread_cache_hits);
    CHECK(ts_pool_free(p, last, STREAM, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free last");

    /* the pool grows: the cap follows its reserved bytes */
    uint64_t big = 0;
    CHECK(ts_pool_alloc(p, 4 * GiB, STREAM, 0, &big) == TS_ALLOC_OK && big, "4 GiB");
    uint64_t mid = parked_after_churn(p);
    uint64_t reserved = pool_stats(p).reserved_bytes;
    printf("reserved %lu MiB: parked at most %lu KiB\n", (unsigned long)(reserved / MiB), (unsigned long)(mid >> 10));
    CHECK(mid > 4 * MiB && mid <= reserved / 256, "a 4 GiB pool's cache holds %lu bytes (cap %lu)",
          (unsigned long)mid, (unsigned long)(reserved / 256));

    uint64_t bigger = 0;
    CHECK(ts_pool_alloc(p, 6 * GiB, STREAM, 0, &bigger) == TS_ALLOC_OK && bigger, "6 GiB more");
    uint64_t top = parked_after_churn(p);
    printf("reserved %lu MiB: parked at most %lu KiB\n", (unsigned long)(pool_stats(p).reserved_bytes / MiB),
           (unsigned long)(top >> 10));
    CHECK(top > 16 * MiB && top <= 32 * MiB, "a 10 GiB pool's cache holds %lu bytes (cap 32 MiB)",
          (unsigned long)top);

    CHECK(ts_pool_free(p, big, STREAM, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free 4 GiB");
    CHECK(ts_pool_free(p, bigger, STREAM, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free 6 GiB");
    ts_pool_destroy(p);
    ts_fake_destroy(fp);
}

int main(void)
{
    exact_bytes();
    reset_peaks();
    parked_in_two_caches();
    cache_cap_follows_pool();
    if (failures) {
        printf("test_alloc_usage: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_alloc_usage: ok\n");
    return 0;
}
