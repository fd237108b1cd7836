/* bench_copy: figures of the pinned copy engine (issue 5), in one run.
 *
 *   1. this machine's memcpy bandwidth, 1 thread and all threads (the limit
 *      of staging, which is a host memcpy);
 *   2. the engine's H2D and D2H throughput (cudaMemcpy from/to pageable
 *      memory, 64 MiB and 512 MiB) under the shim, and as a fraction of (1);
 *   3. host time blocked per cudaMemcpyAsync H2D call (pageable, 8 MiB), with
 *      and without the shim;
 *   4. simulated: the emulator's bandwidth model set to a typical PCIe link
 *      (EMU_PINNED_GBPS=25, EMU_PAGEABLE_GBPS=8), end-to-end H2D/D2H
 *      throughput with and without the shim.
 *
 * The program re-runs itself as a child for every measurement that needs
 * the emulator (with or without LD_PRELOAD=<build>/libtrainshim.so, with the
 * bandwidth model or not), since both are fixed at process start. */
#include <cuda_runtime_api.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MIB = 1 << 20 };

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- memcpy bandwidth ----------------------------------------------------- */
struct mc_arg { char *dst; const char *src; size_t n; int reps; };
static void *mc_thread(void *p)
{
    struct mc_arg *a = p;
    for (int r = 0; r < a->reps; r++) memcpy(a->dst, a->src, a->n);
    return NULL;
}

/* GB/s of copying n bytes with `threads` threads, each its own slice. */
static double memcpy_gbps(size_t n, int threads, int reps)
{
    char *src = malloc(n), *dst = malloc(n);
    if (!src || !dst) return 0;
    memset(src, 1, n);
    memset(dst, 2, n);
    pthread_t t[64];
    struct mc_arg a[64];
    size_t part = n / (size_t)threads;
    double best = 0;
    for (int trial = 0; trial < 3; trial++) {
        double t0 = now_s();
        for (int i = 0; i < threads; i++) {
            a[i] = (struct mc_arg){dst + (size_t)i * part, src + (size_t)i * part, part, reps};
            pthread_create(&t[i], NULL, mc_thread, &a[i]);
        }
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        double g = (double)part * (double)threads * reps / (now_s() - t0) / 1e9;
        if (g > best) best = g;
    }
    free(src);
    free(dst);
    return best;
}

/* ---- child measurements --------------------------------------------------- */
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s = %d\n", #x, (int)e_); exit(2); } } while (0)

/* Throughput (GB/s) of synchronous pageable copies of n bytes, h2d or d2h. */
static double child_throughput(int h2d, size_t n, int reps)
{
    char *h = malloc(n);
    void *d;
    memset(h, 3, n);
    CK(cudaMalloc(&d, n));
    /* warm-up: first-touch of the device pages and of the staging ring */
    if (h2d) CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    else CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    CK(cudaDeviceSynchronize());
    double t0 = now_s();
    for (int r = 0; r < reps; r++) {
        if (h2d) CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
        else CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    }
    CK(cudaDeviceSynchronize());
    double g = (double)n * reps / (now_s() - t0) / 1e9;
    CK(cudaFree(d));
    free(h);
    return g;
}

/* Mean host microseconds per cudaMemcpyAsync H2D call of n pageable bytes
 * on a stream, with the stream drained between calls. */
static double child_blocked(size_t n, int reps)
{
    char *h = malloc(n);
    void *d;
    cudaStream_t s;
    memset(h, 4, n);
    CK(cudaMalloc(&d, n));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    double total = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
        total += now_s() - t0;
        CK(cudaStreamSynchronize(s));
    }
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));
    free(h);
    return total / reps * 1e6;
}

static int child_main(int argc, char **argv)
{
    if (argc < 5) return 2;
    size_t n = (size_t)strtoull(argv[3], NULL, 10);
    int reps = atoi(argv[4]);
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    double v = 0;
    if (strcmp(argv[2], "h2d") == 0) v = child_throughput(1, n, reps);
    else if (strcmp(argv[2], "d2h") == 0) v = child_throughput(0, n, reps);
    else if (strcmp(argv[2], "blocked") == 0) v = child_blocked(n, reps);
    else return 2;
    printf("%.6f\n", v);
    return 0;
}

/* ---- parent --------------------------------------------------------------- */
static char self[PATH_MAX], shim[PATH_MAX], logdir[] = "/tmp/bench_copy.XXXXXX", logpath[PATH_MAX];

/* Extra NAME=value for the next children (NULL: none). */
static const char *extra_env;

/* Runs this program as a child measurement; returns its figure (or -1). */
static double measure(int with_shim, int simulated, const char *what, size_t n, int reps)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        if (with_shim) setenv("LD_PRELOAD", shim, 1);
        else unsetenv("LD_PRELOAD");
        setenv("TRAINSHIM_LOG", logpath, 1);
        setenv("EMU_JITTER_US", "0", 1);
        if (simulated) {
            setenv("EMU_PINNED_GBPS", "25", 1);
            setenv("EMU_PAGEABLE_GBPS", "8", 1);
        } else {
            unsetenv("EMU_PINNED_GBPS");
            unsetenv("EMU_PAGEABLE_GBPS");
        }
        if (extra_env) putenv((char *)extra_env);
        char nbuf[32], rbuf[16];
        snprintf(nbuf, sizeof nbuf, "%zu", n);
        snprintf(rbuf, sizeof rbuf, "%d", reps);
        execl(self, self, "--child", what, nbuf, rbuf, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[64] = "";
    ssize_t got = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (got <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return -1;
    return atof(buf);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 1;
    self[len] = 0;
    /* <B>/bench/bench_copy -> <B>/libtrainshim.so */
    snprintf(shim, sizeof shim, "%s", self);
    for (int cut = 0; cut < 2; cut++) {
        char *slash = strrchr(shim, '/');
        if (slash) *slash = 0;
    }
    strncat(shim, "/libtrainshim.so", sizeof shim - strlen(shim) - 1);
    if (access(shim, R_OK) != 0) {
        fprintf(stderr, "bench_copy: %s not built\n", shim);
        return 1;
    }
    /* The shim's event logs of the children go to a directory removed at the end. */
    if (!mkdtemp(logdir)) return 1;
    snprintf(logpath, sizeof logpath, "%s/ts.%%p.log", logdir);
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1) ncpu = 1;
    if (ncpu > 64) ncpu = 64;

    double bw1 = memcpy_gbps(256u * MIB, 1, 2), bwn = memcpy_gbps(256u * MIB, ncpu, 2);
    printf("memcpy bandwidth (256 MiB): 1 thread %.2f GB/s, %d threads %.2f GB/s\n", bw1, ncpu, bwn);
    double best = bw1 > bwn ? bw1 : bwn;

    static const size_t sizes[] = {64u * MIB, 512u * MIB};
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        int reps = n >= 512u * MIB ? 2 : 8;
        for (int dir = 0; dir < 2; dir++) {
            const char *what = dir ? "d2h" : "h2d";
            double on = measure(1, 0, what, n, reps), off = measure(0, 0, what, n, reps);
            printf("engine %s %3zu MiB: %.2f GB/s = %.0f%% of memcpy (%.0f%% of 1-thread memcpy); "
                   "emulator without shim %.2f GB/s\n",
                   dir ? "D2H" : "H2D", n / MIB, on, 100 * on / best, 100 * on / bw1, off);
        }
    }

    size_t bn = 8u * MIB;
    double blk_on = measure(1, 0, "blocked", bn, 20), blk_off = measure(0, 0, "blocked", bn, 20);
    printf("host time blocked per cudaMemcpyAsync H2D (8 MiB pageable): with shim %.0f us, without %.0f us\n",
           blk_on, blk_off);
    double sblk_on = measure(1, 1, "blocked", bn, 10), sblk_off = measure(0, 1, "blocked", bn, 10);
    printf("simulated PCIe (EMU_PINNED_GBPS=25 EMU_PAGEABLE_GBPS=8): host time blocked per cudaMemcpyAsync "
           "H2D (8 MiB): with shim %.0f us, without %.0f us\n", sblk_on, sblk_off);

    /* Where conversion starts to pay (TRAINSHIM_PINNED_COPY_MIN): host time
     * per async H2D call, every size converted vs none. */
    static const size_t small[] = {64u << 10, 256u << 10, 1u << 20};
    for (int k = 0; k < 3; k++) {
        extra_env = "TRAINSHIM_PINNED_COPY_MIN=1";
        double conv = measure(1, 1, "blocked", small[k], 50);
        extra_env = "TRAINSHIM_PINNED_COPY=off";
        double pass = measure(1, 1, "blocked", small[k], 50);
        extra_env = NULL;
        printf("simulated PCIe: host time per cudaMemcpyAsync H2D of %4zu KiB: converted %.0f us, passed through %.0f us\n",
               small[k] >> 10, conv, pass);
    }

    size_t sn = 64u * MIB;
    for (int dir = 0; dir < 2; dir++) {
        const char *what = dir ? "d2h" : "h2d";
        double on = measure(1, 1, what, sn, 4), off = measure(0, 1, what, sn, 4);
        printf("simulated PCIe (EMU_PINNED_GBPS=25 EMU_PAGEABLE_GBPS=8): %s 64 MiB end-to-end: "
               "with shim %.2f GB/s, without %.2f GB/s (x%.2f)\n",
               dir ? "D2H" : "H2D", on, off, off > 0 ? on / off : 0);
    }
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", logdir);
    if (system(cmd) != 0) fprintf(stderr, "bench_copy: could not remove %s\n", logdir);
    return 0;
}
