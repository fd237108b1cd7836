/* bench_alloc: nanoseconds per allocation+free pair served from the cache,
 * with 1 and 2 threads, beside glibc malloc+free of the same sizes measured
 * in the same run.  The pool runs over the fake provider (the cost measured
 * is the allocator's own; driver calls happen only while warming up), in the
 * shim's default configuration (expandable, the step plan's growth).
 *   pool+tcache : cudaMallocAsync/cudaFreeAsync pattern (stream-ordered free,
 *                 same stream): served by the per-thread cache
 *   pool locked : the same with the thread cache off (the pool's lock and
 *                 free index: the path before the thread cache existed)
 *   sync frees  : cudaMalloc/cudaFree pattern (synchronous frees, which the
 *                 thread cache holds until a fence check: one check per
 *                 TC_WAYS pairs; the fake provider completes fences at once)
 * Times are per-thread CPU time (CLOCK_THREAD_CPUTIME_ID), so a machine
 * shared with other jobs does not inflate them; wall-clock figures are
 * printed beside them.
 * Usage: bench_alloc [pairs-per-thread] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "alloc/alloc.h"
#include "replay/sim_provider.h"

static const uint64_t sizes[8] = {512, 4096, 20000, 65536, 131072, 500000, 1 << 20, 3 << 20};
static long pairs = 2000000;
static ts_pool *pool;
static int kind;   /* 0 pool, 1 malloc */
static unsigned free_flags = TS_FF_STREAM_ORDERED;
static pthread_barrier_t barrier;

static double now(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *run(void *arg)
{
    uint64_t stream = 0x100 + (uint64_t)(intptr_t)arg;
    double *out = malloc(2 * sizeof *out);
    /* warm up: every size once, so the pairs below are cache hits */
    for (int i = 0; i < 8; i++) {
        uint64_t p;
        if (kind == 0 && ts_pool_alloc(pool, sizes[i], stream, 0, &p) == TS_ALLOC_OK)
            ts_pool_free(pool, p, stream, free_flags);
    }
    pthread_barrier_wait(&barrier);
    double t0 = now(CLOCK_THREAD_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
    uint64_t sink = 0;
    for (long i = 0; i < pairs; i++) {
        uint64_t sz = sizes[i & 7];
        if (kind == 0) {
            uint64_t p;
            if (ts_pool_alloc(pool, sz, stream, 0, &p)) {
                fprintf(stderr, "alloc failed\n");
                exit(1);
            }
            sink += p;
            ts_pool_free(pool, p, stream, free_flags);
        } else {
            void *p = malloc(sz);
            sink += (uintptr_t)p;
            __asm__ volatile("" : : "r"(p) : "memory");
            free(p);
        }
    }
    out[0] = (now(CLOCK_THREAD_CPUTIME_ID) - t0) / (double)pairs;
    out[1] = (now(CLOCK_MONOTONIC) - w0) / (double)pairs;
    if (sink == 1)
        printf(" ");
    return out;
}

static double worst_wall;
static double measure(int nthreads, int which, bool tcache, bool sync)
{
    ts_fake_provider *f = NULL;
    kind = which;
    if (which == 0) {
        f = ts_fake_create(64ull << 30, 2 << 20);
        /* the shim's defaults (TRAINSHIM_ALLOC_STEP_PLAN=1): a zero growth
         * slack would keep reserved at the allocated peak by moving a page
         * between the small and the large arena on every turn of this loop */
        ts_pool_config cfg = {.mode = TS_ALLOC_EXPANDABLE, .capacity = 64ull << 30, .no_thread_cache = !tcache,
                              .sync_thread_cache = sync, .grow_slack_pct = TS_GROW_STEP_PLAN, .step_plan = true};
        free_flags = sync ? 0 : TS_FF_STREAM_ORDERED;
        int st;
        pool = ts_pool_create(&cfg, ts_fake_provider_table(f), &st);
        if (!pool) {
            fprintf(stderr, "pool create failed\n");
            exit(1);
        }
    }
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    pthread_t t[2];
    double worst = 0;
    worst_wall = 0;
    for (int i = 0; i < nthreads; i++)
        pthread_create(&t[i], NULL, run, (void *)(intptr_t)i);
    for (int i = 0; i < nthreads; i++) {
        double *r;
        pthread_join(t[i], (void **)&r);
        if (r[0] > worst)
            worst = r[0];
        if (r[1] > worst_wall)
            worst_wall = r[1];
        free(r);
    }
    pthread_barrier_destroy(&barrier);
    if (which == 0) {
        ts_pool_destroy(pool);
        ts_fake_destroy(f);
    }
    return worst;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        pairs = atol(argv[1]);
    printf("bench_alloc: ns per alloc+free pair, thread CPU time [wall clock] (8 sizes 512 B - 3 MiB,\n"
           "             %ld pairs per thread; with 2 threads the slower thread)\n", pairs);
    printf("%-32s %18s %18s\n", "", "1 thread", "2 threads");
    struct { const char *name; int which; bool tcache, sync; } rows[] = {
        {"pool + thread cache", 0, true, false},
        {"pool + thread cache, sync frees", 0, true, true},
        {"pool, locked path", 0, false, false},
        {"glibc malloc+free (baseline)", 1, false, false},
    };
    for (int i = 0; i < 4; i++) {
        double c1 = measure(1, rows[i].which, rows[i].tcache, rows[i].sync), w1 = worst_wall;
        double c2 = measure(2, rows[i].which, rows[i].tcache, rows[i].sync), w2 = worst_wall;
        printf("%-32s %8.1f [%7.1f] %8.1f [%7.1f]\n", rows[i].name, c1, w1, c2, w2);
    }
    return 0;
}
