/* Multi-threaded stress: 4 threads allocate and free concurrently on their
 * own streams (stream-ordered frees go through the per-thread caches), some
 * blocks are freed by another thread, one thread trims now and then.  A
 * shared registry (under its own lock) checks that no two live blocks ever
 * overlap; at the end every byte is returned and the pool is consistent.
 * Then threads whose caches hold parked blocks exit while the pool is
 * destroyed (a device reset racing a DataLoader's threads): the exits'
 * drains must not touch the freed pool.
 * Built a second time with -fsanitize=thread by test_alloc_tsan.sh. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "alloc/alloc.h"
#include "replay/sim_provider.h"

#define NTHREADS 4
#define MAXLIVE 2048
#define MiB (1ull << 20)

static ts_pool *pool;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t reg_ptr[MAXLIVE], reg_size[MAXLIVE];
static int reg_n, failures, ops_per_thread = 6000;
/* handed between threads: frees by a thread that did not allocate */
static uint64_t handoff[NTHREADS];

static void fail(const char *what, uint64_t a, uint64_t b)
{
    __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
    printf("FAIL %s %#lx %#lx\n", what, (unsigned long)a, (unsigned long)b);
}

static void reg_add(uint64_t ptr, uint64_t size)
{
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < reg_n; i++)
        if (ptr < reg_ptr[i] + reg_size[i] && reg_ptr[i] < ptr + size)
            fail("overlap", ptr, reg_ptr[i]);
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
    uint64_t stream = 0x1000 * (uint64_t)(id + 1), rng = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 7);
    uint64_t mine[128];
    int n = 0;
    for (int op = 0; op < ops_per_thread; op++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int r = (int)(rng % 100);
        if (r < 50 && n < 128) {
            /* mostly a few recurring sizes, so the thread cache hits */
            uint64_t size = rng % 4 ? 512ull << ((rng >> 8) % 8) : (rng >> 8) % (6 * MiB);
            uint64_t ptr;
            int rc = ts_pool_alloc(pool, size, stream, 0, &ptr);
            if (rc == TS_ALLOC_OK && size) {
                reg_add(ptr, ts_round_up(size, 512));
                mine[n++] = ptr;
            } else if (rc != TS_ALLOC_OK) {
                fail("alloc", size, (uint64_t)rc);
            }
        } else if (r < 93 && n) {
            int i = (int)((rng >> 16) % n);
            uint64_t ptr = mine[i];
            mine[i] = mine[--n];
            reg_del(ptr);
            if (ts_pool_free(pool, ptr, stream, (rng >> 32) % 4 ? TS_FF_STREAM_ORDERED : 0) != TS_ALLOC_OK)
                fail("free", ptr, 0);
        } else if (r < 97 && n) {
            /* give one block to the next thread, take what was left for us */
            uint64_t ptr = mine[--n];
            uint64_t old = __atomic_exchange_n(&handoff[(id + 1) % NTHREADS], ptr, __ATOMIC_ACQ_REL);
            if (old) {
                reg_del(old);
                if (ts_pool_free(pool, old, stream, 0) != TS_ALLOC_OK)
                    fail("cross-thread free", old, 0);
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
        if (ts_pool_free(pool, mine[i], stream, TS_FF_STREAM_ORDERED) != TS_ALLOC_OK)
            fail("final free", mine[i], 0);
    }
    return NULL;
}

/* exit_vs_destroy: each thread parks a few blocks in its cache, then exits
 * the moment the main thread starts destroying the pool. */
static pthread_barrier_t exit_barrier;
static void *park_and_exit(void *arg)
{
    uint64_t stream = 100 + (uint64_t)(intptr_t)arg, ptr[4];
    for (int i = 0; i < 4; i++)
        if (ts_pool_alloc(pool, (uint64_t)(i + 1) << 16, stream, 0, &ptr[i]) != TS_ALLOC_OK)
            fail("exit_vs_destroy alloc", (uint64_t)i, 0);
    for (int i = 0; i < 4; i++)
        ts_pool_free(pool, ptr[i], stream, TS_FF_STREAM_ORDERED);
    pthread_barrier_wait(&exit_barrier);
    return NULL; /* the cache's drain runs now, in the thread's exit */
}

static void exit_vs_destroy(int rounds)
{
    for (int r = 0; r < rounds; r++) {
        ts_fake_provider *f = ts_fake_create(256 * MiB, 2 * MiB);
        ts_pool_config cfg = {.mode = TS_ALLOC_EXPANDABLE, .capacity = 256 * MiB};
        int st;
        pool = ts_pool_create(&cfg, ts_fake_provider_table(f), &st);
        if (!pool) {
            fail("exit_vs_destroy create", (uint64_t)st, 0);
            return;
        }
        pthread_barrier_init(&exit_barrier, NULL, NTHREADS + 1);
        pthread_t t[NTHREADS];
        for (int i = 0; i < NTHREADS; i++)
            pthread_create(&t[i], NULL, park_and_exit, (void *)(intptr_t)i);
        pthread_barrier_wait(&exit_barrier);
        ts_pool_destroy(pool);
        for (int i = 0; i < NTHREADS; i++)
            pthread_join(t[i], NULL);
        pthread_barrier_destroy(&exit_barrier);
        ts_fake_counters c;
        ts_fake_counters_get(f, &c);
        if (c.misuse || c.live_handles || c.mapped_pages)
            fail("exit_vs_destroy: provider leak/misuse", c.misuse, c.live_handles + c.mapped_pages);
        ts_fake_destroy(f);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1)
        ops_per_thread = atoi(argv[1]);
    for (int mode = 0; mode < 2; mode++) {
        ts_fake_provider *f = ts_fake_create(2048 * MiB, 2 * MiB);
        ts_pool_config cfg = {.mode = mode, .capacity = 2048 * MiB};
        int st;
        pool = ts_pool_create(&cfg, ts_fake_provider_table(f), &st);
        if (!pool)
            return printf("FAIL create\n"), 1;
        pthread_t t[NTHREADS];
        for (int i = 0; i < NTHREADS; i++)
            pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
        for (int i = 0; i < NTHREADS; i++)
            pthread_join(t[i], NULL);
        for (int i = 0; i < NTHREADS; i++)
            if (handoff[i]) {
                reg_del(handoff[i]);
                if (ts_pool_free(pool, handoff[i], 0, 0) != TS_ALLOC_OK)
                    fail("handoff free", handoff[i], 0);
                handoff[i] = 0;
            }
        ts_alloc_stats s;
        ts_pool_stats(pool, &s);
        printf("mode %s: allocs %lu (+%lu from thread caches) frees %lu peak reserved %lu MiB\n",
               ts_alloc_mode_name(mode), (unsigned long)s.allocs, (unsigned long)s.thread_cache_hits,
               (unsigned long)s.frees, (unsigned long)(s.peak_reserved_bytes >> 20));
        if (s.allocated_bytes != 0 || s.live_blocks != 0)
            fail("bytes still allocated", s.allocated_bytes, s.live_blocks);
        if (s.thread_cache_hits == 0)
            fail("thread caches never hit", 0, 0);
        if (ts_pool_trim(pool) != TS_ALLOC_OK)
            fail("trim", 0, 0);
        char err[256];
        if (ts_pool_check(pool, err, sizeof err))
            printf("FAIL check: %s\n", err), failures++;
        ts_pool_stats(pool, &s);
        if (s.reserved_bytes)
            fail("reserved after trim", s.reserved_bytes, 0);
        ts_pool_destroy(pool);
        ts_fake_counters c;
        ts_fake_counters_get(f, &c);
        if (c.misuse || c.live_handles || c.seg_bytes || c.live_fences)
            fail("provider leak/misuse", c.misuse, c.live_handles + c.seg_bytes + c.live_fences);
        ts_fake_destroy(f);
        reg_n = 0;
    }
    exit_vs_destroy(ops_per_thread / 30);
    printf(failures ? "%d failures\n" : "ok\n", failures);
    return failures != 0;
}
