/* The thread caches' synchronous path (cfg.sync_thread_cache, what devmem.c
 * turns on for cudaFree), over the fake provider:
 *   1. with fences that complete only when the test says so, a block freed
 *      synchronously into the calling thread's cache is never handed out
 *      again (by that thread or another) before fences recorded after the
 *      free complete on every stream; once they have, the cache serves it
 *      again without growing the pool, and draining the cache (trim, pool
 *      destruction) loses nothing;
 *   2. four threads mix synchronous and stream-ordered pairs, cross-thread
 *      frees and trims; a shared registry checks that no two live blocks
 *      overlap; at the end nothing is allocated, the pool is consistent and
 *      the provider saw no misuse or leak.
 * Built a second time with -fsanitize=thread by test_devmem_fast_tsan.sh. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "alloc/alloc.h"
#include "replay/sim_provider.h"

#define MiB (1ull << 20)
#define SYNC UINT64_MAX   /* devmem.c's pseudo stream of synchronous calls */
static int failures;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); \
                                       printf("\n"); __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED); } } while (0)

static ts_pool *mk(ts_fake_provider **fp, int mode, bool manual)
{
    *fp = ts_fake_create(4096 * MiB, 2 * MiB);
    ts_fake_set_manual_fences(*fp, manual);
    ts_pool_config cfg = {.mode = mode, .capacity = 4096 * MiB, .sync_thread_cache = true};
    int st;
    ts_pool *p = ts_pool_create(&cfg, ts_fake_provider_table(*fp), &st);
    if (!p) {
        printf("FAIL: pool create %d\n", st);
        exit(1);
    }
    return p;
}

static void finish(ts_pool *p, ts_fake_provider *f)
{
    char err[256];
    CHECK(ts_pool_trim(p) == TS_ALLOC_OK, "trim");
    CHECK(ts_pool_check(p, err, sizeof err) == 0, "check: %s", err);
    ts_alloc_stats s;
    ts_pool_stats(p, &s);
    CHECK(s.allocated_bytes == 0 && s.live_blocks == 0, "still allocated: %lu bytes, %lu blocks",
          (unsigned long)s.allocated_bytes, (unsigned long)s.live_blocks);
    ts_pool_destroy(p);
    ts_fake_counters c;
    ts_fake_counters_get(f, &c);
    CHECK(c.misuse == 0 && c.live_handles == 0 && c.live_fences == 0 && c.seg_bytes == 0,
          "leaks/misuse: misuse %lu handles %lu fences %lu seg %lu", (unsigned long)c.misuse,
          (unsigned long)c.live_handles, (unsigned long)c.live_fences, (unsigned long)c.seg_bytes);
    ts_fake_destroy(f);
}

/* ---- 1. no reuse before the fences ---------------------------------------- */

struct other { ts_pool *p; uint64_t avoid; int seen; };
static void *other_thread(void *arg)
{
    struct other *o = arg;
    ts_alloc_stats st;
    ts_pool_stats(o->p, &st);
    uint64_t waits = st.fence_waits;
    for (int i = 0; i < 20; i++) {
        uint64_t q;
        CHECK(ts_pool_alloc(o->p, 1 * MiB, SYNC, 0, &q) == TS_ALLOC_OK, "other alloc");
        ts_pool_stats(o->p, &st);
        o->seen += q == o->avoid && st.fence_waits == waits;
        CHECK(ts_pool_free(o->p, q, SYNC, 0) == TS_ALLOC_OK, "other free");
    }
    return NULL;
}

static void no_reuse_before_fences(int mode)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, mode, true);
    const uint64_t s1 = 0x100, s2 = 0x200;
    ts_pool_stream_add(p, s1);
    ts_pool_stream_add(p, s2);
    ts_pool_stream_add(p, SYNC);
    uint64_t a;
    CHECK(ts_pool_alloc(p, 1 * MiB, SYNC, 0, &a) == TS_ALLOC_OK, "alloc a");
    CHECK(ts_pool_free(p, a, SYNC, 0) == TS_ALLOC_OK, "free a");
    /* many pairs: enough to fill the cache's ways with stale blocks and run
     * its fence checks, which record fences that stay pending */
    int early = 0;
    ts_alloc_stats st;
    ts_pool_stats(p, &st);
    uint64_t waits = st.fence_waits;
    for (int i = 0; i < 40; i++) {
        uint64_t q;
        CHECK(ts_pool_alloc(p, 1 * MiB, SYNC, 0, &q) == TS_ALLOC_OK, "alloc %d", i);
        /* the pool may wait for its fences (growing with frees pending):
         * that, and nothing else here, makes the block safe */
        ts_pool_stats(p, &st);
        early += q == a && st.fence_waits == waits;
        CHECK(ts_pool_free(p, q, SYNC, 0) == TS_ALLOC_OK, "free %d", i);
    }
    CHECK(early == 0, "%s: a freed block was handed out %d times before its fences", ts_alloc_mode_name(mode), early);
    struct other o = {p, a, 0};
    pthread_t t;
    pthread_create(&t, NULL, other_thread, &o);
    pthread_join(t, NULL);
    CHECK(o.seen == 0, "%s: another thread got the freed block %d times before its fences", ts_alloc_mode_name(mode),
          o.seen);
    /* fences done on every stream: the cached blocks serve again, without
     * new memory.  First a working set mapped once (16 blocks), so that the
     * pool's own path has memory at hand and the cache fills its ways. */
    uint64_t ws[16];
    for (int i = 0; i < 16; i++)
        CHECK(ts_pool_alloc(p, 1 * MiB, SYNC, 0, &ws[i]) == TS_ALLOC_OK, "working set %d", i);
    for (int i = 0; i < 16; i++)
        CHECK(ts_pool_free(p, ws[i], SYNC, 0) == TS_ALLOC_OK, "working set free %d", i);
    ts_fake_complete_stream(f, s1);
    ts_fake_complete_stream(f, s2);
    ts_fake_complete_stream(f, SYNC);
    ts_fake_complete_stream(f, 0);
    ts_alloc_stats before, after;
    ts_pool_stats(p, &before);
    int hits = 0;
    for (int i = 0; i < 40; i++) {
        uint64_t q;
        CHECK(ts_pool_alloc(p, 1 * MiB, SYNC, 0, &q) == TS_ALLOC_OK, "alloc after fences %d", i);
        CHECK(ts_pool_free(p, q, SYNC, 0) == TS_ALLOC_OK, "free after fences %d", i);
        /* each check covers only the frees before it: complete the fences
         * recorded since, as a device would */
        ts_fake_complete_stream(f, s1);
        ts_fake_complete_stream(f, s2);
        ts_fake_complete_stream(f, SYNC);
        ts_fake_complete_stream(f, 0);
        hits++;
    }
    ts_pool_stats(p, &after);
    CHECK(after.thread_cache_hits > before.thread_cache_hits, "%s: no thread-cache hit once the fences completed "
          "(hits %lu -> %lu, waits %lu -> %lu, records %lu -> %lu)", ts_alloc_mode_name(mode),
          (unsigned long)before.thread_cache_hits, (unsigned long)after.thread_cache_hits,
          (unsigned long)before.fence_waits, (unsigned long)after.fence_waits, (unsigned long)before.fence_records,
          (unsigned long)after.fence_records);
    CHECK(after.reserved_bytes == before.reserved_bytes, "%s: the pool grew (%lu -> %lu) with cached blocks at hand",
          ts_alloc_mode_name(mode), (unsigned long)before.reserved_bytes, (unsigned long)after.reserved_bytes);
    ts_fake_set_manual_fences(f, false);
    finish(p, f);
    (void)hits;
}

/* ---- 2. threads ------------------------------------------------------------ */

#define NTHREADS 4
#define MAXLIVE 2048
static ts_pool *pool;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t reg_ptr[MAXLIVE], reg_size[MAXLIVE];
static int reg_n, ops_per_thread = 6000;
static uint64_t handoff[NTHREADS];

static void reg_add(uint64_t ptr, uint64_t size)
{
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < reg_n; i++)
        CHECK(!(ptr < reg_ptr[i] + reg_size[i] && reg_ptr[i] < ptr + size), "overlap %#lx %#lx",
              (unsigned long)ptr, (unsigned long)reg_ptr[i]);
    if (reg_n < MAXLIVE) {
        reg_ptr[reg_n] = ptr;
        reg_size[reg_n++] = size;
    }
    pthread_mutex_unlock(&reg_lock);
}

static void reg_del(uint64_t ptr)
{
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < reg_n; i++)
        if (reg_ptr[i] == ptr) {
            reg_ptr[i] = reg_ptr[--reg_n];
            reg_size[i] = reg_size[reg_n];
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t stream = 0x1000 * (uint64_t)(id + 1), rng = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 3);
    uint64_t mine[128], mstream[128];
    int n = 0;
    for (int op = 0; op < ops_per_thread; op++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int r = (int)(rng % 100);
        if (r < 50 && n < 128) {
            uint64_t size = rng % 4 ? 512ull << ((rng >> 8) % 8) : (rng >> 8) % (6 * MiB);
            uint64_t s = (rng >> 40) % 2 ? SYNC : stream, ptr;
            int rc = ts_pool_alloc(pool, size, s, 0, &ptr);
            CHECK(rc == TS_ALLOC_OK, "alloc %lu: %d", (unsigned long)size, rc);
            if (rc == TS_ALLOC_OK && size) {
                reg_add(ptr, ts_round_up(size, 512));
                mstream[n] = s;
                mine[n++] = ptr;
            }
        } else if (r < 93 && n) {
            int i = (int)((rng >> 16) % n);
            uint64_t ptr = mine[i], s = mstream[i];
            mine[i] = mine[--n];
            mstream[i] = mstream[n];
            reg_del(ptr);
            CHECK(ts_pool_free(pool, ptr, s, s == SYNC ? 0 : TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free");
        } else if (r < 97 && n) {
            uint64_t ptr = mine[--n];
            uint64_t old = __atomic_exchange_n(&handoff[(id + 1) % NTHREADS], ptr, __ATOMIC_ACQ_REL);
            if (old) {
                reg_del(old);
                CHECK(ts_pool_free(pool, old, SYNC, 0) == TS_ALLOC_OK, "cross-thread free");
            }
        } else if (r < 98 && id == 0) {
            ts_pool_trim(pool);
        } else {
            ts_alloc_stats st;
            ts_pool_stats(pool, &st);
        }
    }
    for (int i = 0; i < n; i++) {
        reg_del(mine[i]);
        CHECK(ts_pool_free(pool, mine[i], SYNC, 0) == TS_ALLOC_OK, "final free");
    }
    return NULL;
}

static void threads(int mode)
{
    ts_fake_provider *f;
    pool = mk(&f, mode, false);
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NTHREADS; i++)
        if (handoff[i]) {
            reg_del(handoff[i]);
            CHECK(ts_pool_free(pool, handoff[i], SYNC, 0) == TS_ALLOC_OK, "handoff free");
            handoff[i] = 0;
        }
    ts_alloc_stats s;
    ts_pool_stats(pool, &s);
    printf("threads, %s: allocs %lu (+%lu from thread caches) frees %lu peak reserved %lu MiB\n",
           ts_alloc_mode_name(mode), (unsigned long)s.allocs, (unsigned long)s.thread_cache_hits,
           (unsigned long)s.frees, (unsigned long)(s.peak_reserved_bytes >> 20));
    CHECK(s.thread_cache_hits > 0, "thread caches never hit");
    finish(pool, f);
    reg_n = 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        ops_per_thread = atoi(argv[1]);
    for (int mode = 0; mode < 2; mode++) {
        no_reuse_before_fences(mode);
        threads(mode);
    }
    printf(failures ? "%d failures\n" : "ok\n", failures);
    return failures != 0;
}
