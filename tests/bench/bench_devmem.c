/* bench_devmem: nanoseconds per device allocation+free pair as the program
 * sees it, without the shim and through trainshim's pool (a cache hit), in
 * one run: the benchmark measures itself, then re-executes itself with
 * LD_PRELOAD=libtrainshim.so (found next to the bench directory, or in
 * $TRAINSHIM_LIB) and prints both.  Pairs: cudaMalloc+cudaFree and
 * cudaMallocAsync+cudaFreeAsync on one stream, 1 MiB, with one and two
 * threads (ns per pair per thread).  Times are the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), so a machine shared with other jobs does not
 * inflate them; the best of three runs is printed.  The row "log off" runs
 * the shim with an event log that cannot open (no records written): the
 * hooks' and the allocator's own cost without the log's timestamps. */
#include <cuda_runtime_api.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

struct job { int async, iters; double ns; int err; };

static void *run(void *arg)
{
    struct job *j = arg;
    cudaStream_t s = NULL;
    if (j->async && cudaStreamCreate(&s) != cudaSuccess) { j->err = 1; return NULL; }
    const size_t size = 1 << 20;
    void *p;
    for (int warm = 0; warm < 100; warm++) {   /* first pages, pool creation */
        if ((j->async ? cudaMallocAsync(&p, size, s) : cudaMalloc(&p, size)) != cudaSuccess) { j->err = 1; return NULL; }
        if ((j->async ? cudaFreeAsync(p, s) : cudaFree(p)) != cudaSuccess) { j->err = 1; return NULL; }
    }
    uint64_t t0 = now_ns();
    for (int i = 0; i < j->iters; i++) {
        if ((j->async ? cudaMallocAsync(&p, size, s) : cudaMalloc(&p, size)) != cudaSuccess) { j->err = 1; break; }
        if ((j->async ? cudaFreeAsync(p, s) : cudaFree(p)) != cudaSuccess) { j->err = 1; break; }
    }
    j->ns = (double)(now_ns() - t0) / j->iters;
    if (s) { cudaStreamSynchronize(s); cudaStreamDestroy(s); }
    return NULL;
}

static double min2(double a, double b) { return a < b ? a : b; }

/* One line: "<sync 1T> <sync 2T> <async 1T> <async 2T>" ns per pair, best of 3. */
static int measure(int iters, double out[4])
{
    for (int k = 0; k < 4; k++) out[k] = 1e30;
    for (int rep = 0; rep < 3; rep++)
        for (int async = 0; async < 2; async++) {
            struct job one = {async, iters, 0, 0};
            run(&one);
            struct job two[2] = {{async, iters, 0, 0}, {async, iters, 0, 0}};
            pthread_t t[2];
            for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, run, &two[i]);
            for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
            if (one.err || two[0].err || two[1].err) return -1;
            out[2 * async] = min2(out[2 * async], one.ns);
            out[2 * async + 1] = min2(out[2 * async + 1], (two[0].ns + two[1].ns) / 2);
        }
    return 0;
}

int main(int argc, char **argv)
{
    int iters = 20000;
    double v[4];
    if (argc > 1 && !strcmp(argv[1], "--measure")) {
        if (measure(iters, v)) return 1;
        printf("%.1f %.1f %.1f %.1f\n", v[0], v[1], v[2], v[3]);
        return 0;
    }
    char self[PATH_MAX], lib[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 1;
    self[n] = 0;
    const char *env = getenv("TRAINSHIM_LIB");
    if (env) snprintf(lib, sizeof lib, "%s", env);
    else {
        char *slash = strrchr(self, '/');
        *slash = 0;   /* .../bench */
        snprintf(lib, sizeof lib, "%s/../libtrainshim.so", self);
        *slash = '/';
    }
    if (access(lib, R_OK)) { fprintf(stderr, "bench_devmem: %s not found (set TRAINSHIM_LIB)\n", lib); return 1; }
    double plain[4], shim[4];
    char cmd[3 * PATH_MAX];
    const char *modes[] = {"expandable", "caching", "expandable"};
    const char *names[] = {"trainshim expandable", "trainshim caching", "expandable, log off"};
    printf("ns per alloc+free pair of 1 MiB, thread CPU time (per thread with 2 threads)\n");
    printf("%-22s %12s %12s %12s %12s\n", "", "sync 1T", "sync 2T", "async 1T", "async 2T");
    for (int m = -1; m < 3; m++) {
        if (m < 0)
            snprintf(cmd, sizeof cmd, "'%s' --measure", self);
        else
            snprintf(cmd, sizeof cmd, "TRAINSHIM_ALLOC=%s %s LD_PRELOAD='%s' '%s' --measure%s", modes[m],
                     m == 2 ? "TRAINSHIM_LOG=/proc/self/no/such/dir/log" : "", lib, self, m == 2 ? " 2>/dev/null" : "");
        FILE *f = popen(cmd, "r");
        double *d = m < 0 ? plain : shim;
        if (!f || fscanf(f, "%lf %lf %lf %lf", &d[0], &d[1], &d[2], &d[3]) != 4) {
            fprintf(stderr, "bench_devmem: run failed: %s\n", cmd);
            if (f) pclose(f);
            return 1;
        }
        pclose(f);
        printf("%-22s %12.1f %12.1f %12.1f %12.1f\n", m < 0 ? "without the shim" : names[m], d[0], d[1], d[2], d[3]);
    }
    return 0;
}
