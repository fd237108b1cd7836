// gpu_copy: host<->device copy throughput for make gpu-check.
//
//   gpu_copy memcpy [T...]          the host's memcpy GB/s, 1 and all threads
//                                   (up to 16), and with each T threads asked
//                                   for (tT=GB/s): the staging side's bound
//   gpu_copy sweep MAX_MIB [MIN_KIB] for each size 64 KiB .. MAX_MIB and each
//                                   direction: GB/s of cudaMemcpy from pinned
//                                   and from pageable memory, and the host time
//                                   one cudaMemcpyAsync of pageable memory
//                                   blocks the caller (stream drained between)
//   gpu_copy pageable MIB...        GB/s of cudaMemcpy from and to pageable
//                                   memory only, at each size (the engine
//                                   settings sweep: run under the shim)
//   gpu_copy threads T SIZE_MIB     T threads, each with its own stream and
//                                   buffers, copying SIZE_MIB at once: total
//                                   GB/s, pinned and pageable, both directions
//
// One "key=value ..." line per figure.  Run plainly and under the shim
// (LD_PRELOAD=libtrainshim.so): there "pageable" is the shim's converted copy,
// and scripts/gpu-check.sh divides it by the plain run's pinned figure.
// Every copy's data is checked once (a copy that is fast and wrong fails).
#include <pthread.h>
#include <unistd.h>

#include "gpu_common.h"

static size_t reps_for(size_t n)
{   // about 512 MiB per figure, 3..200 copies
    size_t r = (512u << 20) / n;
    return r < 3 ? 3 : r > 200 ? 200 : r;
}

static double timed_copies(void *dst, const void *src, size_t n, cudaMemcpyKind k, size_t reps)
{
    // warm-up: first touch, and the shim's staging ring, which reaches its
    // steady size over a few calls (a synchronous H2D finds the buffers of
    // the call before it still in flight)
    for (int w = 0; w < 3; w++) CK(cudaMemcpy(dst, src, n, k));
    CK(cudaDeviceSynchronize());
    double t0 = now_s();
    for (size_t r = 0; r < reps; r++) CK(cudaMemcpy(dst, src, n, k));
    CK(cudaDeviceSynchronize());
    return (double)n * (double)reps / (now_s() - t0) / 1e9;
}

static double blocked_us(void *d, const void *h, size_t n, size_t reps)
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    double total = 0;
    for (size_t r = 0; r < reps; r++) {
        double t0 = now_s();
        CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
        total += now_s() - t0;
        CK(cudaStreamSynchronize(s));
    }
    CK(cudaStreamDestroy(s));
    return total / (double)reps * 1e6;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i += 4096) p[i] = (unsigned char)(seed + i / 4096);
    p[n / 2 + 1] = (unsigned char)(seed ^ 0x5a);
}

static void verify(const unsigned char *a, const unsigned char *b, size_t n, const char *what)
{
    if (memcmp(a, b, n) != 0) { fprintf(stderr, "gpu_copy: %s: data differs\n", what); exit(1); }
}

static int sweep(size_t max_mib, size_t min_kib)
{
    size_t max = max_mib << 20;
    if (max_mib == 0 || max_mib > (1u << 14)) return 2;
    unsigned char *pin, *page = (unsigned char *)malloc(max), *back = (unsigned char *)malloc(max);
    void *d;
    if (!page || !back) return 1;
    CK(cudaMallocHost((void **)&pin, max));
    CK(cudaMalloc(&d, max));
    memset(page, 1, max); memset(back, 0, max); memset(pin, 2, max);
    for (size_t n = 64u << 10; n <= max; n *= (n < (16u << 20) ? 2 : 4)) {
        if (n < (min_kib << 10)) continue;
        size_t reps = reps_for(n);
        fill(page, n, (unsigned)n >> 10);
        double h2d_page = timed_copies(d, page, n, cudaMemcpyHostToDevice, reps);
        CK(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost));
        verify(page, back, n, "pageable H2D");
        double d2h_page = timed_copies(back, d, n, cudaMemcpyDeviceToHost, reps);
        verify(page, back, n, "pageable D2H");
        memcpy(pin, page, n);
        double h2d_pin = timed_copies(d, pin, n, cudaMemcpyHostToDevice, reps);
        double d2h_pin = timed_copies(pin, d, n, cudaMemcpyDeviceToHost, reps);
        verify(page, pin, n, "pinned round trip");
        double blk = blocked_us(d, page, n, reps < 20 ? reps : 20);
        printf("copy dir=h2d size=%zu pinned_gbps=%.3f pageable_gbps=%.3f blocked_us=%.1f\n", n, h2d_pin,
               h2d_page, blk);
        printf("copy dir=d2h size=%zu pinned_gbps=%.3f pageable_gbps=%.3f\n", n, d2h_pin, d2h_page);
        fflush(stdout);
    }
    CK(cudaFree(d)); CK(cudaFreeHost(pin));
    free(page); free(back);
    return 0;
}

static int pageable_sizes(int argc, char **argv)
{
    size_t max = 0;
    for (int i = 0; i < argc; i++) {
        size_t n = strtoull(argv[i], NULL, 10) << 20;
        if (n == 0 || n > (16ull << 30)) return 2;
        if (n > max) max = n;
    }
    unsigned char *page = (unsigned char *)malloc(max), *back = (unsigned char *)malloc(max);
    void *d;
    if (!page || !back) return 1;
    CK(cudaMalloc(&d, max));
    memset(page, 1, max); memset(back, 0, max);
    for (int i = 0; i < argc; i++) {
        size_t n = strtoull(argv[i], NULL, 10) << 20, reps = reps_for(n);
        fill(page, n, (unsigned)(n >> 10) + 3);
        double h2d = timed_copies(d, page, n, cudaMemcpyHostToDevice, reps);
        memset(back, 0, n);
        double d2h = timed_copies(back, d, n, cudaMemcpyDeviceToHost, reps);
        verify(page, back, n, "pageable round trip");
        printf("copy dir=h2d size=%zu pageable_gbps=%.3f\n", n, h2d);
        printf("copy dir=d2h size=%zu pageable_gbps=%.3f\n", n, d2h);
        fflush(stdout);
    }
    CK(cudaFree(d));
    free(page); free(back);
    return 0;
}

struct worker {
    size_t n;
    int pinned, h2d, reps;
    pthread_barrier_t *bar;
    unsigned char *h;
    void *d;
    cudaStream_t s;
};

static void *worker_main(void *p)
{
    struct worker *w = (struct worker *)p;
    CK(cudaSetDevice(0));
    pthread_barrier_wait(w->bar);
    for (int r = 0; r < w->reps; r++) {
        if (w->h2d) CK(cudaMemcpyAsync(w->d, w->h, w->n, cudaMemcpyHostToDevice, w->s));
        else CK(cudaMemcpyAsync(w->h, w->d, w->n, cudaMemcpyDeviceToHost, w->s));
    }
    CK(cudaStreamSynchronize(w->s));
    pthread_barrier_wait(w->bar);
    return NULL;
}

static double threaded(struct worker *w, int t, int pinned, int h2d)
{
    pthread_barrier_t bar;
    pthread_t th[64];
    pthread_barrier_init(&bar, NULL, (unsigned)t + 1);
    for (int i = 0; i < t; i++) {
        w[i].bar = &bar; w[i].pinned = pinned; w[i].h2d = h2d;
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    pthread_barrier_wait(&bar);
    double t0 = now_s();
    pthread_barrier_wait(&bar);
    double secs = now_s() - t0;
    for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    return (double)w[0].n * w[0].reps * t / secs / 1e9;
}

static int threads_mode(int t, size_t mib)
{
    if (t < 1 || t > 64) return 2;
    struct worker w[64], wp[64];
    size_t n = mib << 20;
    int reps = (int)reps_for(n * (size_t)t);
    for (int i = 0; i < t; i++) {
        w[i] = (struct worker){n, 0, 0, reps, NULL, (unsigned char *)malloc(n), NULL, NULL};
        if (!w[i].h) return 1;
        memset(w[i].h, i + 1, n);
        CK(cudaMalloc(&w[i].d, n));
        CK(cudaStreamCreateWithFlags(&w[i].s, cudaStreamNonBlocking));
        wp[i] = w[i];
        CK(cudaMallocHost((void **)&wp[i].h, n));
        memset(wp[i].h, i + 1, n);
    }
    for (int h2d = 1; h2d >= 0; h2d--) {
        double page = threaded(w, t, 0, h2d), pin = threaded(wp, t, 1, h2d);
        printf("threads dir=%s threads=%d size=%zu pinned_gbps=%.3f pageable_gbps=%.3f\n", h2d ? "h2d" : "d2h", t,
               n, pin, page);
    }
    for (int i = 0; i < t; i++) {   // the last D2H brought each device buffer back: it holds i + 1
        for (size_t k = 0; k < n; k += 4093)
            if (w[i].h[k] != (unsigned char)(i + 1)) { fprintf(stderr, "gpu_copy: thread %d data\n", i); return 1; }
        CK(cudaFree(w[i].d)); CK(cudaStreamDestroy(w[i].s)); CK(cudaFreeHost(wp[i].h)); free(w[i].h);
    }
    return 0;
}

struct mc { char *dst; const char *src; size_t n; };
static void *mc_main(void *p)
{
    struct mc *m = (struct mc *)p;
    for (int r = 0; r < 4; r++) memcpy(m->dst, m->src, m->n);
    return NULL;
}

// GB/s of t threads each copying its slice of a..b, 4 times, best of 2.
static double memcpy_gbps(char *a, char *b, size_t n, int t)
{
    pthread_t th[64];
    struct mc m[64];
    double best = 0;
    for (int trial = 0; trial < 2; trial++) {
        double t0 = now_s();
        for (int i = 0; i < t; i++) {
            m[i] = (struct mc){a + i * (n / t), b + i * (n / t), n / t};
            pthread_create(&th[i], NULL, mc_main, &m[i]);
        }
        for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
        double v = (double)(n / t) * t * 4 / (now_s() - t0) / 1e9;
        if (v > best) best = v;
    }
    return best;
}

// The host's memcpy bandwidth (256 MiB, 1 thread and all CPUs up to 16, and
// each thread count asked for): the staging side of a converted copy cannot
// beat it with that many threads copying.
static int host_memcpy(int argc, char **argv)
{
    size_t n = 256u << 20;
    char *a = (char *)malloc(n), *b = (char *)malloc(n);
    if (!a || !b) return 1;
    memset(a, 1, n); memset(b, 2, n);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int all = cpus > 16 ? 16 : cpus < 1 ? 1 : (int)cpus;
    printf("memcpy cpus=%ld threads=%d one_thread_gbps=%.2f all_threads_gbps=%.2f", cpus, all,
           memcpy_gbps(a, b, n, 1), memcpy_gbps(a, b, n, all));
    for (int i = 0; i < argc; i++) {
        int t = atoi(argv[i]);
        if (t >= 1 && t <= 64) printf(" t%d=%.2f", t, memcpy_gbps(a, b, n, t));
    }
    printf("\n");
    free(a); free(b);
    return 0;
}

int main(int argc, char **argv)
{
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    if (argc >= 3 && !strcmp(argv[1], "sweep"))
        return sweep(strtoull(argv[2], NULL, 10), argc > 3 ? strtoull(argv[3], NULL, 10) : 0);
    if (argc >= 2 && !strcmp(argv[1], "memcpy")) return host_memcpy(argc - 2, argv + 2);
    if (argc >= 3 && !strcmp(argv[1], "pageable")) return pageable_sizes(argc - 2, argv + 2);
    if (argc >= 4 && !strcmp(argv[1], "threads")) return threads_mode(atoi(argv[2]), strtoull(argv[3], NULL, 10));
    fprintf(stderr, "usage: gpu_copy sweep MAX_MIB [MIN_KIB] | memcpy [T...] | pageable MIB... | threads T SIZE_MIB\n");
    return 2;
}
