/* bench_log: the cost of logging one event (ts_ev_alloc / ts_ev_copy through
 * the real writer, background thread and file included) beside the same loop
 * calling a function of the same shape that logs nothing.  Target: under
 * 100 ns per event.  Both the wall time and the logging threads' own CPU
 * time are shown (the writer thread's work runs on another core when there
 * is one); each figure is the best of REPS runs, since the machine is shared.
 * Usage: bench_log [events-per-thread] [threads] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log/clock.h"
#include "core/core.h"
#include "log/log.h"

static volatile uint64_t sink;

/* the loop without logging: same arguments, an opaque call */
__attribute__((noinline)) static void no_log(int api, int device, uint64_t ptr, uint64_t size,
                                             uint64_t stream, int result)
{
    sink += (uint64_t)api + (uint64_t)device + ptr + size + stream + (uint64_t)result;
    __asm__ volatile("" ::: "memory");
}

#define REPS 5

static double clock_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double now_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

static _Atomic long cpu_ns; /* summed CPU time of the loop threads */

static long n_events = 1000000;

static void *log_loop(void *arg)
{
    (void)arg;
    double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < n_events; i++) {
        if (i & 1)
            ts_ev_copy(2, TS_H2D, (uint64_t)i, TS_HOST_PINNED, 0, true, 100, 0);
        else
            ts_ev_alloc(0, 0, (uint64_t)i << 12, 4096, 0, 0);
    }
    cpu_ns += (long)((clock_s(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e9);
    return NULL;
}

static void *base_loop(void *arg)
{
    (void)arg;
    double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < n_events; i++)
        no_log(0, 0, (uint64_t)i << 12, 4096, 0, 0);
    cpu_ns += (long)((clock_s(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e9);
    return NULL;
}

/* ns per timestamp: the log's clock reading (shim/log/clock.h) beside
 * clock_gettime(CLOCK_MONOTONIC), which each record used to cost; and the
 * conversion each record costs when it is written out. */
static void time_clocks(double *mono, double *reading, double *convert)
{
    const long n = 2000000;
    uint64_t acc = 0;
    *mono = *reading = *convert = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_s();
        for (long i = 0; i < n; i++)
            acc += ts_clock_mono_ns();
        double t1 = now_s();
        for (long i = 0; i < n; i++)
            acc += ts_clock_read();
        double t2 = now_s();
        for (long i = 0; i < n; i++)
            acc += ts_clock_to_ns(acc + (uint64_t)i);
        double t3 = now_s();
        double m = (t1 - t0) * 1e9 / n, c = (t2 - t1) * 1e9 / n, v = (t3 - t2) * 1e9 / n;
        *mono = m < *mono ? m : *mono;
        *reading = c < *reading ? c : *reading;
        *convert = v < *convert ? v : *convert;
    }
    sink += acc;
}

/* ns per event per thread, wall and CPU, best of REPS */
static void run(int threads, void *(*fn)(void *), double *wall, double *cpu)
{
    *wall = *cpu = 1e30;
    for (int r = 0; r < REPS; r++) {
        pthread_t t[64];
        cpu_ns = 0;
        double t0 = now_s();
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, fn, NULL);
        for (int i = 0; i < threads; i++)
            pthread_join(t[i], NULL);
        double w = (now_s() - t0) * 1e9 / (double)n_events;
        double c = (double)cpu_ns / threads / (double)n_events;
        *wall = w < *wall ? w : *wall;
        *cpu = c < *cpu ? c : *cpu;
    }
}

int main(int argc, char **argv)
{
    int threads = 1;
    if (argc > 1)
        n_events = atol(argv[1]);
    if (argc > 2)
        threads = atoi(argv[2]);
    if (n_events <= 0 || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: bench_log [events-per-thread] [threads 1..64]\n");
        return 2;
    }
    char dir[] = "/tmp/ts_bench_log.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char path[256];
    snprintf(path, sizeof path, "%s/bench.log", dir);
    setenv("TRAINSHIM_LOG", path, 1);

    ts_ev_error(0, 0); /* open the log (a one-time cost) before timing */
    double base_wall, base_cpu, log_wall, log_cpu;
    run(threads, base_loop, &base_wall, &base_cpu);
    run(threads, log_loop, &log_wall, &log_cpu);
    double t0 = now_s();
    ts_log_shutdown();
    double drain = now_s() - t0;

    printf("bench_log: %d thread(s) x %ld events, best of %d\n", threads, n_events, REPS);
    printf("                   %12s %12s\n", "wall", "thread CPU");
    printf("  without logging  %9.1f ns %9.1f ns per event\n", base_wall, base_cpu);
    printf("  with logging     %9.1f ns %9.1f ns per event\n", log_wall, log_cpu);
    printf("  cost of logging  %9.1f ns %9.1f ns per event (target < 100)\n", log_wall - base_wall,
           log_cpu - base_cpu);
    printf("  final flush      %9.1f ms\n", drain * 1e3);
    double mono, reading, convert;
    time_clocks(&mono, &reading, &convert);
    printf("timestamp per record (log clock: %s)\n", ts_clock_counter ? "CPU counter" : "CLOCK_MONOTONIC");
    printf("  clock_gettime(CLOCK_MONOTONIC) %6.1f ns (baseline)\n", mono);
    printf("  log clock reading              %6.1f ns (logging thread)\n", reading);
    printf("  conversion to CLOCK_MONOTONIC  %6.1f ns (writer, when written)\n", convert);
    unlink(path);
    rmdir(dir);
    return 0;
}
