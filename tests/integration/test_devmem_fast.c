/* test_devmem_fast: what the allocator's fast path (per-thread caches, the
 * device asked once per call) could break, run with and without the shim on
 * two emulated devices (EMU_DEVICES=2); the script compares the outputs.
 *
 *  1. devices: a thread switching devices between allocations (cudaSetDevice,
 *     and the driver's cuCtxSetCurrent / cuCtxPushCurrent, which no hook
 *     sees) gets blocks of the current device every time, synchronous and
 *     stream-ordered, cached or not; two threads on two devices at once too.
 *  2. cudaFree: a slow kernel on a non-blocking stream still reads a block
 *     when it is freed; then many cudaMalloc/cudaFree pairs of its size (the
 *     thread cache's synchronous path: enough to fill its ways and run its
 *     fence checks) each overwrite their block on another stream.  The
 *     kernel's sum must be exact.
 *  3. cudaFreeAsync: the same with a stream-ordered free on the kernel's
 *     stream and cudaMallocAsync pairs on another stream: reused there only
 *     after a fence, so the sum is exact; on the kernel's own stream the
 *     block is reused at once (checked with "pool").
 *
 * Argument "pool": also checks what only the pool does (the steady-state
 * synchronous pair reuses one block; same-stream reuse is immediate). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/emu.h"

static int failures;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (!(cond)) {                                     \
            pthread_mutex_lock(&out_lock);                 \
            printf("FAIL: %s: ", #cond);                   \
            printf(__VA_ARGS__);                           \
            printf("\n");                                  \
            failures++;                                    \
            pthread_mutex_unlock(&out_lock);               \
        }                                                  \
    } while (0)

static int device_of(const void *p)
{
    int dev = -1;
    if (cuPointerGetAttribute(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
        return -2;
    return dev;
}

/* ---- 1. devices ----------------------------------------------------------- */

static void alloc_on(int want, bool async, cudaStream_t s, const char *how)
{
    void *p = NULL;
    for (int k = 0; k < 3; k++) {   /* the second and third are cache hits */
        cudaError_t e = async ? cudaMallocAsync(&p, 1 << 20, s) : cudaMalloc(&p, 1 << 20);
        CHECK(e == cudaSuccess, "%s alloc on device %d: %d", how, want, e);
        if (e != cudaSuccess) return;
        CHECK(device_of(p) == want, "%s: block of device %d, want %d", how, device_of(p), want);
        CHECK((async ? cudaFreeAsync(p, s) : cudaFree(p)) == cudaSuccess, "%s free", how);
    }
}

static void devices_runtime(void)
{
    cudaStream_t s[2];
    for (int d = 0; d < 2; d++) {
        CHECK(cudaSetDevice(d) == cudaSuccess, "set %d", d);
        CHECK(cudaStreamCreateWithFlags(&s[d], cudaStreamNonBlocking) == cudaSuccess, "stream %d", d);
    }
    for (int i = 0; i < 20; i++) {
        int d = i & 1;
        CHECK(cudaSetDevice(d) == cudaSuccess, "set %d", d);
        alloc_on(d, false, NULL, "cudaSetDevice + cudaMalloc");
        alloc_on(d, true, s[d], "cudaSetDevice + cudaMallocAsync");
    }
    for (int d = 0; d < 2; d++) {
        CHECK(cudaSetDevice(d) == cudaSuccess, "set %d", d);
        CHECK(cudaStreamSynchronize(s[d]) == cudaSuccess && cudaStreamDestroy(s[d]) == cudaSuccess, "destroy %d", d);
    }
    printf("devices: cudaSetDevice switches ok\n");
}

static void devices_driver(void)
{
    CUcontext ctx[2];
    for (int d = 0; d < 2; d++) CHECK(cuDevicePrimaryCtxRetain(&ctx[d], d) == CUDA_SUCCESS, "retain %d", d);
    for (int i = 0; i < 20; i++) {
        int d = (i / 2) & 1;
        if (i & 1) {
            /* push/pop: the current context changes twice without a hook */
            CHECK(cuCtxPushCurrent(ctx[d]) == CUDA_SUCCESS, "push %d", d);
            alloc_on(d, false, NULL, "cuCtxPushCurrent + cudaMalloc");
            CUdeviceptr p = 0;
            CHECK(cuMemAlloc(&p, 1 << 20) == CUDA_SUCCESS, "cuMemAlloc");
            CHECK(device_of((void *)(uintptr_t)p) == d, "cuMemAlloc: device %d, want %d", device_of((void *)(uintptr_t)p), d);
            CHECK(cuMemFree(p) == CUDA_SUCCESS, "cuMemFree");
            CUcontext popped = NULL;
            CHECK(cuCtxPopCurrent(&popped) == CUDA_SUCCESS && popped == ctx[d], "pop %d", d);
            CUdevice cur = -1;
            CHECK(cuCtxGetDevice(&cur) == CUDA_SUCCESS, "context device");
            alloc_on((int)cur, false, NULL, "after cuCtxPopCurrent");
        } else {
            CHECK(cuCtxSetCurrent(ctx[d]) == CUDA_SUCCESS, "set current %d", d);
            alloc_on(d, false, NULL, "cuCtxSetCurrent + cudaMalloc");
        }
    }
    for (int d = 0; d < 2; d++) CHECK(cuDevicePrimaryCtxRelease(d) == CUDA_SUCCESS, "release %d", d);
    CHECK(cudaSetDevice(0) == cudaSuccess, "set 0");
    printf("devices: driver context switches ok\n");
}

static void *device_thread(void *arg)
{
    int d = (int)(intptr_t)arg;
    CHECK(cudaSetDevice(d) == cudaSuccess, "thread set %d", d);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "thread stream");
    for (int i = 0; i < 200; i++) {
        alloc_on(d, false, NULL, "thread cudaMalloc");
        alloc_on(d, true, s, "thread cudaMallocAsync");
    }
    CHECK(cudaStreamSynchronize(s) == cudaSuccess && cudaStreamDestroy(s) == cudaSuccess, "thread destroy");
    return NULL;
}

static void devices_threads(void)
{
    pthread_t t[2];
    for (int d = 0; d < 2; d++) pthread_create(&t[d], NULL, device_thread, (void *)(intptr_t)d);
    for (int d = 0; d < 2; d++) pthread_join(t[d], NULL);
    printf("devices: two threads on two devices ok\n");
}

/* ---- 2, 3. a slow kernel still reading a freed block ----------------------- */

static char slow_sum_id;
/* out[0] = sum of a[0..n) read after a pause, so frees and new allocations
 * of the host thread happen while it is still queued or running. */
static void slow_sum_impl(void **args, const emu_launch *l)
{
    (void)l;
    const float *a = *(const float **)args[0];
    double *out = *(double **)args[1];
    size_t n = *(size_t *)args[2];
    usleep(20000);
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i];
    *out = s;
}

static void launch_sum(float *a, double *out, size_t n, cudaStream_t s)
{
    void *args[] = {&a, &out, &n};
    dim3 one = {1, 1, 1};
    CHECK(cudaLaunchKernel(&slow_sum_id, one, one, args, 0, s) == cudaSuccess, "launch");
}

enum { ROUNDS = 4, PAIRS = 40 };

/* Returns how many of the pairs' blocks were the freed one before the
 * kernel was done (0 is the only right answer; the sums prove it too). */
static int reuse_while_read(bool async, double *sum_out, const float *ones, size_t n, cudaStream_t s1,
                            cudaStream_t s2, int *same_stream_reuse)
{
    size_t bytes = n * sizeof(float);
    float *a = NULL;
    CHECK((async ? cudaMallocAsync((void **)&a, bytes, s1) : cudaMalloc((void **)&a, bytes)) == cudaSuccess, "a");
    CHECK(cudaMemcpyAsync(a, ones, bytes, cudaMemcpyHostToDevice, s1) == cudaSuccess, "fill a");
    uint64_t done0 = emuGetCounter("kernels.completed");
    launch_sum(a, sum_out, n, s1);
    CHECK((async ? cudaFreeAsync(a, s1) : cudaFree(a)) == cudaSuccess, "free a");
    int early = 0;
    for (int i = 0; i < PAIRS; i++) {
        float *b = NULL;
        CHECK((async ? cudaMallocAsync((void **)&b, bytes, s2) : cudaMalloc((void **)&b, bytes)) == cudaSuccess, "b");
        /* the counter moves when the kernel is done: a reuse seen before it
         * moved overlapped the kernel */
        early += b == a && emuGetCounter("kernels.completed") == done0;
        CHECK(cudaMemsetAsync(b, 0xff, bytes, s2) == cudaSuccess, "clobber b");
        CHECK(cudaStreamSynchronize(s2) == cudaSuccess, "sync s2");
        CHECK((async ? cudaFreeAsync(b, s2) : cudaFree(b)) == cudaSuccess, "free b");
    }
    if (async) {
        /* on the kernel's own stream, stream order makes reuse safe at once */
        float *c = NULL;
        CHECK(cudaMallocAsync((void **)&c, bytes, s1) == cudaSuccess, "c");
        CHECK(cudaMemcpyAsync(c, ones, bytes, cudaMemcpyHostToDevice, s1) == cudaSuccess, "fill c");
        launch_sum(c, sum_out + 1, n, s1);
        CHECK(cudaFreeAsync(c, s1) == cudaSuccess, "free c");
        float *d = NULL;
        CHECK(cudaMallocAsync((void **)&d, bytes, s1) == cudaSuccess, "d");
        *same_stream_reuse += d == c;
        CHECK(cudaMemsetAsync(d, 0xff, bytes, s1) == cudaSuccess, "clobber d");
        CHECK(cudaFreeAsync(d, s1) == cudaSuccess, "free d");
    }
    CHECK(cudaStreamSynchronize(s1) == cudaSuccess, "sync s1");
    return early;
}

static void slow_kernels(bool pool)
{
    size_t psizes[3] = {sizeof(float *), sizeof(double *), sizeof(size_t)};
    CHECK(emuRegisterKernel(&slow_sum_id, NULL, slow_sum_impl, 3, psizes) == 0, "emuRegisterKernel");
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess, "s1");
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess, "s2");
    double *sums = NULL;
    CHECK(cudaMalloc((void **)&sums, 3 * ROUNDS * sizeof(double)) == cudaSuccess, "sums");
    CHECK(cudaMemset(sums, 0, 3 * ROUNDS * sizeof(double)) == cudaSuccess, "zero sums");
    size_t maxn = (size_t)1 << 20;
    float *ones = malloc(maxn * sizeof(float));
    for (size_t i = 0; i < maxn; i++) ones[i] = 1.0f;
    int early = 0, same = 0;
    for (int r = 0; r < ROUNDS; r++) {
        size_t n = (size_t)(1 + r % 2) << 18;   /* 1 or 2 MiB: under the thread caches' 4 MiB */
        early += reuse_while_read(false, sums + 3 * r, ones, n, s1, s2, &same);
        early += reuse_while_read(true, sums + 3 * r + 1, ones, n, s1, s2, &same);
    }
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync");
    double got[3 * ROUNDS];
    CHECK(cudaMemcpy(got, sums, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess, "read sums");
    for (int r = 0; r < ROUNDS; r++) {
        double want = (double)((size_t)(1 + r % 2) << 18);
        const char *what[3] = {"cudaFree + cudaMalloc pairs", "cudaFreeAsync + cudaMallocAsync on another stream",
                               "cudaFreeAsync + cudaMallocAsync on the same stream"};
        for (int k = 0; k < 3; k++) {
            printf("round %d %s: sum %.0f\n", r, what[k], got[3 * r + k]);
            CHECK(got[3 * r + k] == want, "round %d %s: sum %.1f, want %.0f", r, what[k], got[3 * r + k], want);
        }
    }
    CHECK(early == 0, "%d reuses of a block a kernel was still reading", early);
    if (pool) CHECK(same == ROUNDS, "same-stream reuse %d of %d", same, ROUNDS);
    CHECK(cudaFree(sums) == cudaSuccess, "free sums");
    CHECK(cudaStreamDestroy(s1) == cudaSuccess && cudaStreamDestroy(s2) == cudaSuccess, "destroy");
    free(ones);
}

/* The steady-state synchronous pair on an idle device is served by the
 * thread cache: after a few rounds it keeps returning blocks it returned
 * before (the pool's fast path is in use, not only its slow path). */
static void steady_pairs(void)
{
    void *seen[16] = {0};
    int nseen = 0, repeats = 0;
    for (int i = 0; i < 400; i++) {
        void *p = NULL;
        CHECK(cudaMalloc(&p, 1 << 20) == cudaSuccess, "steady alloc");
        bool known = false;
        for (int k = 0; k < nseen; k++) known |= seen[k] == p;
        if (known) repeats++;
        else if (nseen < 16) seen[nseen++] = p;
        CHECK(cudaFree(p) == cudaSuccess, "steady free");
    }
    CHECK(repeats >= 350, "steady pairs reused a known block %d times of 400 (%d distinct)", repeats, nseen);
}

int main(int argc, char **argv)
{
    bool pool = argc > 1 && !strcmp(argv[1], "pool");
    if (!getenv("EMU_DEVICES")) {
        /* run by tests/run.sh directly: the emulator reads its device count
         * at initialization, before any call here */
        setenv("EMU_DEVICES", "2", 1);
        execv("/proc/self/exe", argv);
        printf("FAIL: re-exec with EMU_DEVICES=2\n");
        return 1;
    }
    int n = 0;
    CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n >= 2, "want 2 devices (EMU_DEVICES=2), have %d", n);
    if (n < 2) return 1;
    devices_runtime();
    devices_driver();
    devices_threads();
    slow_kernels(pool);
    if (pool) steady_pairs();
    printf("done\n");
    return failures ? 1 : 0;
}
