/* bench_copy: figures of the pinned copy engine (issue 5), in one run.
 *
 *   1. this machine's memcpy bandwidth, 1 thread and all threads, and the
 *      emulator bound (all-threads memcpy / 2, see EMU_BOUND_WHY below);
 *   2. the engine's H2D and D2H throughput (cudaMemcpy from/to pageable
 *      memory, 64 MiB and 512 MiB) under the shim, as a fraction of memcpy
 *      1 thread, memcpy all threads and the emulator bound; the emulator
 *      without the shim beside it;
 *   3. the staging side alone: host time blocked per cudaMemcpyAsync H2D
 *      call (pageable, 8 MiB), with and without the shim, as the rate the
 *      program sees;
 *   4. the defaults: throughput against TRAINSHIM_COPY_CHUNK and
 *      TRAINSHIM_COPY_THREADS, and host time per small async copy converted
 *      or not (TRAINSHIM_PINNED_COPY_MIN);
 *   5. simulated: the emulator's bandwidth model set to a typical PCIe link
 *      (EMU_PINNED_GBPS=25, EMU_PAGEABLE_GBPS=8), end-to-end H2D/D2H
 *      throughput with and without the shim;
 *   6. the copy goal restated (after 2): EMU_PINNED_GBPS a quarter of the
 *      all-threads memcpy bandwidth, converted pageable copies of 8, 16, 64
 *      and 256 MiB against pinned ones in the same child (samples of
 *      back-to-back copies alternated, median of the pairs' ratios), goal >= 0.9 both
 *      directions, and the unlimited-link figure as a share of the emulator
 *      bound.
 *
 * The program re-runs itself as a child for every measurement that needs
 * the emulator (with or without LD_PRELOAD=<build>/libtrainshim.so, with the
 * bandwidth model or not), since both are fixed at process start.  Timings
 * are wall-clock: they mean something only on an otherwise idle machine, so
 * the load average is printed before and after. */
#include <cuda_runtime_api.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
/* CPU seconds (user + system, all threads) of this process so far. */
static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
           (double)u.ru_stime.tv_usec * 1e-6;
}

/* CPU seconds per GB of the last child_throughput (load-independent: what
 * the copies cost, not how long they waited for a CPU). */
static double child_cpu_per_gb;

static double child_throughput(int h2d, size_t n, int reps, int pinned)
{
    char *h = NULL;
    void *d;
    if (pinned) CK(cudaMallocHost((void **)&h, n));
    else h = malloc(n);
    memset(h, 3, n);
    CK(cudaMalloc(&d, n));
    /* warm-up: first-touch of the device pages and of the staging ring (a
     * synchronous H2D finds the buffers of the call before it still in
     * flight, so the ring reaches its steady size over a few calls) */
    for (int w = 0; w < 3; w++) {
        if (h2d) CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
        else CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    }
    CK(cudaDeviceSynchronize());
    double t0 = now_s(), c0 = cpu_s();
    for (int r = 0; r < reps; r++) {
        if (h2d) CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
        else CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    }
    CK(cudaDeviceSynchronize());
    double g = (double)n * reps / (now_s() - t0) / 1e9;
    child_cpu_per_gb = (cpu_s() - c0) / ((double)n * reps / 1e9);
    CK(cudaFree(d));
    if (pinned) CK(cudaFreeHost(h));
    else free(h);
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

/* Section 6 in one process under the shim: pinned copies (passed through by
 * the shim) and converted pageable copies of the same size, in samples of
 * `reps` back-to-back cudaMemcpy calls ended by a device synchronize (so
 * both include their last transfer), alternated sample by sample with the
 * order swapped each time, so both see the same machine state.  Prints the
 * median GB/s of each and the median and spread of the per-pair ratios. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double timed_sample(int h2d, void *d, char *h, size_t n, int reps)
{
    double t0 = now_s();
    for (int r = 0; r < reps; r++) {
        if (h2d) CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
        else CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    }
    CK(cudaDeviceSynchronize());
    return (double)n * reps / (now_s() - t0) / 1e9;
}

enum { PAIRS_MAX = 64 };

static int child_paired(int h2d, size_t n, int reps, int pairs)
{
    char *pin = NULL, *pageable = malloc(n);
    void *d;
    if (pairs > PAIRS_MAX) pairs = PAIRS_MAX;
    CK(cudaMallocHost((void **)&pin, n));
    if (!pageable) return 2;
    memset(pin, 3, n);
    memset(pageable, 3, n);
    CK(cudaMalloc(&d, n));
    /* warm-up: device pages, the staging ring, the helper threads */
    for (int w = 0; w < 2; w++) {
        timed_sample(h2d, d, pin, n, 1);
        timed_sample(h2d, d, pageable, n, 1);
    }
    double pg[PAIRS_MAX], cg[PAIRS_MAX], ratio[PAIRS_MAX];
    for (int i = 0; i < pairs; i++) {
        if (i % 2 == 0) {
            pg[i] = timed_sample(h2d, d, pin, n, reps);
            cg[i] = timed_sample(h2d, d, pageable, n, reps);
        } else {
            cg[i] = timed_sample(h2d, d, pageable, n, reps);
            pg[i] = timed_sample(h2d, d, pin, n, reps);
        }
        ratio[i] = cg[i] / pg[i];
    }
    /* the pairs' pinned GB/s, converted GB/s and ratios: the parent takes
     * the medians over the rounds it ran this row in */
    for (int i = 0; i < pairs; i++)
        printf("%.6f %.6f %.6f\n", pg[i], cg[i], ratio[i]);
    CK(cudaFree(d));
    CK(cudaFreeHost(pin));
    free(pageable);
    return 0;
}

static int child_main(int argc, char **argv)
{
    if (argc < 5) return 2;
    size_t n = (size_t)strtoull(argv[3], NULL, 10);
    int reps = atoi(argv[4]);
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    double v = 0;
    if (strcmp(argv[2], "paired_h2d") == 0 || strcmp(argv[2], "paired_d2h") == 0)
        return child_paired(argv[2][7] == 'h', n, reps, argc > 5 ? atoi(argv[5]) : 9);
    if (strcmp(argv[2], "h2d") == 0) v = child_throughput(1, n, reps, 0);
    else if (strcmp(argv[2], "d2h") == 0) v = child_throughput(0, n, reps, 0);
    else if (strcmp(argv[2], "pinned_h2d") == 0) v = child_throughput(1, n, reps, 1);
    else if (strcmp(argv[2], "pinned_d2h") == 0) v = child_throughput(0, n, reps, 1);
    else if (strcmp(argv[2], "blocked") == 0) v = child_blocked(n, reps);
    else return 2;
    printf("%.6f %.6f\n", v, child_cpu_per_gb);
    return 0;
}

/* ---- parent --------------------------------------------------------------- */
static char self[PATH_MAX], shim[PATH_MAX], logdir[] = "/tmp/bench_copy.XXXXXX", logpath[PATH_MAX];

/* Extra NAME=value settings for the next children (NULL-terminated). */
static const char *extra_env[4];

/* Runs this program as a child measurement; returns its figure (or -1). */
static double last_cpu_per_gb;   /* of the last measure() of a throughput */
static char last_output[4096];   /* the last child's whole answer */
static const char *child_extra_arg; /* NULL, or one more argument for the children */

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
        for (int i = 0; i < 4 && extra_env[i]; i++) putenv((char *)extra_env[i]);
        char nbuf[32], rbuf[16];
        snprintf(nbuf, sizeof nbuf, "%zu", n);
        snprintf(rbuf, sizeof rbuf, "%d", reps);
        execl(self, self, "--child", what, nbuf, rbuf, child_extra_arg, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char *buf = last_output;
    ssize_t got = 0, r;
    while (got < (ssize_t)sizeof last_output - 1 &&
           (r = read(fds[0], buf + got, sizeof last_output - 1 - (size_t)got)) > 0)
        got += r;
    buf[got > 0 ? got : 0] = 0;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (got <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return -1;
    char *end;
    double v = strtod(buf, &end);
    last_cpu_per_gb = strtod(end, NULL);
    return v;
}

static double loadavg1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

static void set_env(const char *a, const char *b)
{
    extra_env[0] = a;
    extra_env[1] = b;
    extra_env[2] = NULL;
}

#define EMU_BOUND_WHY \
    "on the emulator the \"DMA\" of each staged chunk is itself a CPU memcpy on a stream worker thread, so " \
    "every converted byte is copied twice on the CPU and the two copies share the memory bandwidth of all " \
    "threads (the engine can beat it a little: its staging chunks stay in cache between the two copies); " \
    "on a real GPU the DMA costs no CPU and the bound is the staging memcpy alone (memcpy all-T)"

/* Best of three child measurements (the machine is shared: a slow run is
 * another job's load, not the engine). */
static double best_of3(int with_shim, const char *what, size_t n, int reps)
{
    double best = -1;
    for (int i = 0; i < 3; i++) {
        double v = measure(with_shim, 0, what, n, reps);
        if (v > best) best = v;
    }
    return best;
}

/* The copy goal restated so that it means something on the emulator: the
 * link (EMU_PINNED_GBPS) a quarter of this machine's all-threads memcpy
 * bandwidth, as a GPU server whose staging threads together copy faster than
 * its PCIe link.  Converted pageable copies against pinned copies at that
 * rate measure how well staging overlaps the transfer.  Both run in one
 * child under the shim (it passes pinned copies through), in samples of
 * back-to-back copies as the GPU check times them, alternated
 * (child_paired): the figure is the median of the per-pair ratios, with
 * their range beside it.  A row's pairs are taken in RESTATED_ROUNDS
 * rounds, every row once a round, so that a neighbour's load lasting
 * some seconds lands on a few pairs of every row rather than on all the
 * pairs of one.  The unlimited-link figure beside it is a share of the
 * emulator bound. */
#define RESTATED_ROWS 8
#define RESTATED_ROUNDS 4
static const size_t restated_sizes[] = {8u * MIB, 16u * MIB, 64u * MIB, 256u * MIB};
typedef struct {
    double pin[PAIRS_MAX], conv[PAIRS_MAX], ratio[PAIRS_MAX];
    int n;
    double load; /* the 1-minute load average after its last round */
} restated_row;

/* One round of row k (size index k / 2, D2H when k is odd): `pairs` more
 * pairs into *row; false when the child failed. */
static bool restated_round(restated_row *row, int k, const char *link, int pairs)
{
    static const int sample_copies[] = {8, 4, 1, 1};
    char npairs[16];
    snprintf(npairs, sizeof npairs, "%d", pairs);
    set_env(link, NULL);
    child_extra_arg = npairs;
    double v = measure(1, 0, k % 2 ? "paired_d2h" : "paired_h2d", restated_sizes[k / 2], sample_copies[k / 2]);
    child_extra_arg = NULL;
    set_env(NULL, NULL);
    row->load = loadavg1();
    if (v < 0)
        return false;
    char *line = last_output;
    for (int i = 0; i < pairs && row->n < PAIRS_MAX; i++) {
        double pg, cg, r;
        if (sscanf(line, "%lf %lf %lf", &pg, &cg, &r) != 3)
            return false;
        row->pin[row->n] = pg, row->conv[row->n] = cg, row->ratio[row->n++] = r;
        line = strchr(line, '\n');
        if (!line++)
            break;
    }
    return true;
}

/* The link of a round: a quarter of the all-threads memcpy bandwidth
 * measured just before it (the machine's speed drifts over the minutes the
 * rows take: a link fixed from the start is too fast for staging when the
 * whole machine has slowed since, and too slow to mean much when it sped
 * up).  Each pair is a pinned and a converted copy at one rate, so its
 * ratio keeps its meaning whatever the round's rate. */
static void round_link(char *link, size_t n, int ncpu, double *q)
{
    *q = memcpy_gbps(256u * MIB, ncpu, 2) / 4;
    snprintf(link, n, "EMU_PINNED_GBPS=%.3f", *q);
}

static void restated_ratio(double bwn, double bound, int ncpu)
{
    static char link[64];
    double q = bwn / 4;
    printf("\ncopy goal restated: EMU_PINNED_GBPS=%.2f at the start (all-T memcpy / 4, measured again before "
           "each round), converted pageable / pinned, both "
           "under the shim in one process, a sample = 64 MiB of back-to-back cudaMemcpy calls (one 256 MiB call) "
           "and a synchronize, as tests/gpu/gpu_copy.cu times them, samples alternated; ratio = median "
           "of the pairs' ratios (range beside it), the pairs taken in %d rounds over every row; goal >= 0.9 for "
           ">= 8 MiB; unlimited link beside it as a share of the emulator bound (%.2f GB/s); load: the 1-minute "
           "load average after the row's last round (the converted copy needs CPU for staging and the emulated "
           "transfer, the pinned one for the transfer only):\n",
           q, RESTATED_ROUNDS, bound);
    printf("  %-3s %8s %6s %12s %15s %7s %13s %6s %22s %9s %5s\n", "dir", "size", "pairs", "pinned GB/s",
           "converted GB/s", "ratio", "range", "goal", "unlimited link GB/s", "of bound", "load");
    /* pairs per row: a median a neighbour's burst of a second or less does not move */
    static const int pairs[] = {32, 32, 20, 12};
    static restated_row rows[RESTATED_ROWS];
    bool ok[RESTATED_ROWS];
    for (int k = 0; k < RESTATED_ROWS; k++)
        rows[k].n = 0, ok[k] = true;
    double links[RESTATED_ROUNDS];
    for (int round = 0; round < RESTATED_ROUNDS; round++) {
        round_link(link, sizeof link, ncpu, &links[round]);
        for (int k = 0; k < RESTATED_ROWS; k++)
            ok[k] = ok[k] && restated_round(&rows[k], k, link, pairs[k / 2] / RESTATED_ROUNDS);
    }
    for (int k = 0; k < RESTATED_ROWS; k++) {
        restated_row *row = &rows[k];
        size_t n = restated_sizes[k / 2];
        double pin = -1, conv = -1, r = -1, lo = 0, hi = 0;
        if (ok[k] && row->n) {
            pin = median(row->pin, row->n), conv = median(row->conv, row->n), r = median(row->ratio, row->n);
            lo = row->ratio[0], hi = row->ratio[row->n - 1]; /* sorted by median() */
        }
        int free_reps = n >= 256u * MIB ? 2 : n >= 64u * MIB ? 4 : 16;
        double free_link = best_of3(1, k % 2 ? "d2h" : "h2d", n, free_reps);
        printf("  %-3s %4zu MiB %6d %12.2f %15.2f %7.3f %6.3f-%-6.3f %6s %22.2f %8.0f%% %5.2f\n",
               k % 2 ? "D2H" : "H2D", n / MIB, row->n, pin, conv, r, lo, hi, r >= 0.9 ? "PASS" : "FAIL", free_link,
               100 * free_link / bound, row->load);
    }
    printf("  link per round (GB/s):");
    for (int round = 0; round < RESTATED_ROUNDS; round++)
        printf(" %.2f", links[round]);
    printf("\n");
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
    printf("load average at start %.2f on %d CPUs (wall-clock figures assume an idle machine; EMU_JITTER_US=0)\n",
           loadavg1(), ncpu);

    double bw1 = memcpy_gbps(256u * MIB, 1, 2), bwn = memcpy_gbps(256u * MIB, ncpu, 2);
    double bound = bwn / 2;
    printf("memcpy bandwidth (256 MiB, best of 3): 1 thread (1T) %.2f GB/s, %d threads (all-T) %.2f GB/s\n", bw1,
           ncpu, bwn);
    printf("emulator bound %.2f GB/s = all-T memcpy / 2: %s\n", bound, EMU_BOUND_WHY);
    if (argc > 1 && strcmp(argv[1], "--restated") == 0) {   /* section 6 alone */
        restated_ratio(bwn, bound, ncpu);
        printf("load average at end %.2f\n", loadavg1());
        return 0;
    }

    printf("\nengine throughput, cudaMemcpy of pageable host memory under the shim (defaults):\n");
    printf("  %-3s %7s %9s %12s %14s %16s %22s %14s\n", "dir", "size", "GB/s", "of memcpy 1T", "of memcpy all-T",
           "of emulator bound", "emulator alone, GB/s", "CPU-s per GB");
    static const size_t sizes[] = {64u * MIB, 512u * MIB};
    set_env(NULL, NULL);
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        int reps = n >= 512u * MIB ? 2 : 8;
        for (int dir = 0; dir < 2; dir++) {
            const char *what = dir ? "d2h" : "h2d";
            double on = measure(1, 0, what, n, reps), cpu = last_cpu_per_gb, off = measure(0, 0, what, n, reps);
            printf("  %-3s %3zu MiB %9.2f %11.0f%% %14.0f%% %16.0f%% %22.2f %14.3f\n", dir ? "D2H" : "H2D", n / MIB,
                   on, 100 * on / bw1, 100 * on / bwn, 100 * on / bound, off, cpu);
        }
    }
    printf("  (emulator alone: pageable H2D is staged into a fresh malloc per call, D2H is one memcpy; CPU-s per "
           "GB: all threads' CPU time in the timed copies, against an ideal of 2 memcpys per byte = %.3f at the "
           "1T rate: it does not depend on the machine's load, GB/s does)\n",
           bw1 > 0 ? 2 / bw1 : 0);

    restated_ratio(bwn, bound, ncpu);

    size_t bn = 8u * MIB;
    double blk_on = measure(1, 0, "blocked", bn, 20), blk_off = measure(0, 0, "blocked", bn, 20);
    printf("\nstaging side: host time blocked per cudaMemcpyAsync H2D of 8 MiB pageable (stream drained between "
           "calls):\n  with shim %.0f us (%.2f GB/s staged as the program sees it, %.0f%% of memcpy all-T); "
           "without %.0f us (%.2f GB/s)\n",
           blk_on, blk_on > 0 ? bn / blk_on / 1e3 : 0, blk_on > 0 ? 100 * bn / blk_on / 1e3 / bwn : 0, blk_off,
           blk_off > 0 ? bn / blk_off / 1e3 : 0);

    /* Defaults by measurement: chunk size and helper threads, 64 MiB each way. */
    printf("\ndefaults: 64 MiB cudaMemcpy GB/s under the shim against TRAINSHIM_COPY_CHUNK / TRAINSHIM_COPY_THREADS "
           "(helpers are capped at CPUs - 1 = %d here):\n", ncpu - 1);
    static const char *const chunks[] = {"TRAINSHIM_COPY_CHUNK=2MiB", "TRAINSHIM_COPY_CHUNK=4MiB",
                                         "TRAINSHIM_COPY_CHUNK=8MiB", "TRAINSHIM_COPY_CHUNK=16MiB"};
    static const char *const threads[] = {"TRAINSHIM_COPY_THREADS=0", "TRAINSHIM_COPY_THREADS=1",
                                          "TRAINSHIM_COPY_THREADS=4"};
    printf("  %-26s", "");
    for (int t = 0; t < 3; t++) printf(" %26s", threads[t] + 10);
    printf("\n");
    for (int c = 0; c < 4; c++) {
        printf("  %-26s", chunks[c] + 10);
        for (int t = 0; t < 3; t++) {
            set_env(chunks[c], threads[t]);
            double h = measure(1, 0, "h2d", 64u * MIB, 4), d = measure(1, 0, "d2h", 64u * MIB, 4);
            printf("   H2D %5.2f  D2H %5.2f      ", h, d);
        }
        printf("\n");
    }
    set_env(NULL, NULL);

    double sblk_on = measure(1, 1, "blocked", bn, 10), sblk_off = measure(0, 1, "blocked", bn, 10);
    printf("\nsimulated PCIe (EMU_PINNED_GBPS=25 EMU_PAGEABLE_GBPS=8): host time blocked per cudaMemcpyAsync "
           "H2D (8 MiB): with shim %.0f us, without %.0f us\n", sblk_on, sblk_off);

    /* Where conversion starts to pay (TRAINSHIM_PINNED_COPY_MIN): host time
     * per async H2D call, every size converted vs none. */
    static const size_t small[] = {64u << 10, 128u << 10, 256u << 10, 1u << 20};
    for (int k = 0; k < 4; k++) {
        set_env("TRAINSHIM_PINNED_COPY_MIN=1", NULL);
        double conv = measure(1, 1, "blocked", small[k], 50);
        set_env("TRAINSHIM_PINNED_COPY=off", NULL);
        double pass = measure(1, 1, "blocked", small[k], 50);
        set_env(NULL, NULL);
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
    printf("load average at end %.2f\n", loadavg1());
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", logdir);
    if (system(cmd) != 0) fprintf(stderr, "bench_copy: could not remove %s\n", logdir);
    return 0;
}
