/* bench_stacks: the cost of one allocation event with its call stack
 * (TRAINSHIM_STACKS=16: unw_backtrace of 16 frames, the hash lookup of the
 * distinct-stack table, the alloc + alloc-stack records) beside the same
 * event without stacks, in the same run, through the real log writer.
 * The events are made 22 frames below main by a recursive chain, from one
 * call site (so the stack table is warm, as in a training loop: every
 * capture is unwound and hashed, the stack itself is logged once).  Target: under 2 us per allocation.
 * Usage: bench_stacks [events] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "log/log.h"
#include "log/stacks.h"

#define REPS 5
#define CHAIN 20

static long n_events = 200000;
static volatile int sink;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* a chain of frames: each level a real call (not a tail call) */
__attribute__((noinline)) static void leaf(long i)
{
    ts_ev_alloc(0, 0, (uint64_t)(i + 1) << 12, 4096, 0, 0);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void level(int depth, long i)
{
    if (depth == 0)
        leaf(i);
    else
        level(depth - 1, i);
    sink++;
}

static double run_ns(void)
{
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_s();
        for (long i = 0; i < n_events; i++)
            level(CHAIN, i & 7);
        double ns = (now_s() - t0) * 1e9 / (double)n_events;
        best = ns < best ? ns : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        n_events = atol(argv[1]);
    if (n_events <= 0) {
        fprintf(stderr, "usage: bench_stacks [events]\n");
        return 2;
    }
    char dir[] = "/tmp/ts_bench_stacks.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char path[256];
    snprintf(path, sizeof path, "%s/bench.log", dir);
    setenv("TRAINSHIM_LOG", path, 1);
    ts_ev_error(0, 0); /* open the log before timing */

    ts_stacks_configure(0);
    double off = run_ns();
    int depth = ts_stacks_configure(16);
    double on = run_ns();
    uint64_t distinct, dropped;
    ts_stacks_counts(&distinct, &dropped);
    ts_log_shutdown();

    printf("bench_stacks: %ld allocation events, %d frames below main, best of %d\n", n_events, CHAIN + 2, REPS);
    printf("  without stacks        %9.1f ns per allocation\n", off);
    printf("  with stacks (depth %d) %9.1f ns per allocation (%llu distinct stacks, %llu not stored)\n", depth,
           on, (unsigned long long)distinct, (unsigned long long)dropped);
    printf("  cost of stacks        %9.1f ns per allocation (target < 2000)\n", on - off);
    unlink(path);
    rmdir(dir);
    return depth == 16 && distinct > 0 ? 0 : 1;
}
