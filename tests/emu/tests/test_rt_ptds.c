/* Emulated runtime, per-thread default stream build: with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM the headers route cudaMemcpy,
 * cudaMemset, cudaMemcpyAsync, cudaLaunchHostFunc, cudaStreamSynchronize,
 * cudaEventRecord... to their _ptds/_ptsz symbols, where stream 0 is the
 * calling thread's own stream.  Two threads each hold their stream 0; each
 * one's work proceeds independently, which on the legacy stream it could
 * not. */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "emu.h"

/* nvcc's per-thread <<<>>> path, called here directly */
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream);

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED); } } while (0)
#define CHECK_RT(call, want) do { cudaError_t e_ = (call); if (e_ != (want)) { \
        fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #call, (int)e_, \
                cudaGetErrorName(e_), (int)(want)); __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED); } } while (0)

struct gate { int open; int timed_out; };
static void CUDART_CB hold_until_open(void *arg)
{
    struct gate *g = arg;
    for (int i = 0; i < 3000 && !__atomic_load_n(&g->open, __ATOMIC_ACQUIRE); i++)
        usleep(1000);
    if (!__atomic_load_n(&g->open, __ATOMIC_ACQUIRE))
        g->timed_out = 1;
}
static void CUDART_CB set_flag(void *arg) { __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE); }

/* kernel: *(int *)args[0] += 1 (a host address: kernels run on the CPU) */
static const char bump_kernel_id = 0;
static void bump_impl(void **args, const emu_launch *l)
{
    (void)l;
    __atomic_add_fetch(*(int **)args[0], 1, __ATOMIC_RELEASE);
}

#define N 65536

struct worker {
    struct gate gate;
    int ran;
    int kernels;
    int value;
    int ok;
};

static void *work(void *p)
{
    struct worker *w = p;
    char *h = malloc(N), *out = malloc(N);
    void *d = NULL;
    CHECK_RT(cudaMalloc(&d, N), cudaSuccess);
    /* hold this thread's default stream, then queue work behind it */
    CHECK_RT(cudaLaunchHostFunc(0, hold_until_open, &w->gate), cudaSuccess);
    memset(h, w->value, N);
    CHECK_RT(cudaMemcpyAsync(d, h, N, cudaMemcpyHostToDevice, 0), cudaSuccess);
    /* kernels on stream 0 = this thread's stream: cudaLaunchKernel (the
     * header's _ptsz form) and nvcc's __cudaLaunchKernel_ptsz */
    int *counter = &w->kernels;
    void *args[] = { &counter };
    dim3 one = {1, 1, 1};
    CHECK_RT(cudaLaunchKernel(&bump_kernel_id, one, one, args, 0, 0), cudaSuccess);
    cudaKernel_t k = NULL;
    CHECK_RT(cudaGetKernel(&k, &bump_kernel_id), cudaSuccess);
    CHECK_RT(__cudaLaunchKernel_ptsz(k, one, one, args, 0, 0), cudaSuccess);
    CHECK_RT(cudaLaunchHostFunc(0, set_flag, &w->ran), cudaSuccess);
    cudaEvent_t e;
    CHECK_RT(cudaEventCreate(&e), cudaSuccess);
    CHECK_RT(cudaEventRecord(e, 0), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(0), cudaSuccess);
    CHECK_RT(cudaEventQuery(e), cudaSuccess);
    /* synchronous forms on the per-thread stream */
    CHECK_RT(cudaMemset(d, w->value + 1, N / 2), cudaSuccess);
    memset(out, 0, N);
    CHECK_RT(cudaMemcpy(out, d, N, cudaMemcpyDeviceToHost), cudaSuccess);
    int ok = 1;
    for (int i = 0; i < N; i++)
        if (out[i] != (char)(i < N / 2 ? w->value + 1 : w->value))
            ok = 0;
    w->ok = ok;
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
    CHECK_RT(cudaStreamIsCapturing(0, &st), cudaSuccess);   /* the _ptsz form */
    CHECK(st == cudaStreamCaptureStatusNone);
    CHECK_RT(cudaEventDestroy(e), cudaSuccess);
    CHECK_RT(cudaFree(d), cudaSuccess);
    free(h);
    free(out);
    return NULL;
}

int main(void)
{
    size_t sz = sizeof(int *);
    CHECK(emuRegisterKernel(&bump_kernel_id, NULL, bump_impl, 1, &sz) == 0);
    struct worker a = {{0, 0}, 0, 0, 0x21, 0}, b = {{0, 0}, 0, 0, 0x42, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, work, &a);
    pthread_create(&tb, NULL, work, &b);
    usleep(30000);
    __atomic_store_n(&b.gate.open, 1, __ATOMIC_RELEASE);
    /* b's stream 0 drains although a's is still held */
    for (int i = 0; i < 2000 && !__atomic_load_n(&b.ran, __ATOMIC_ACQUIRE); i++)
        usleep(1000);
    CHECK(__atomic_load_n(&b.ran, __ATOMIC_ACQUIRE) == 1);
    CHECK(__atomic_load_n(&b.kernels, __ATOMIC_ACQUIRE) == 2);
    CHECK(__atomic_load_n(&a.ran, __ATOMIC_ACQUIRE) == 0);
    CHECK(__atomic_load_n(&a.kernels, __ATOMIC_ACQUIRE) == 0);   /* still behind a's gate */
    __atomic_store_n(&a.gate.open, 1, __ATOMIC_RELEASE);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.ok && b.ok);
    CHECK(a.kernels == 2 && b.kernels == 2);
    CHECK(!a.gate.timed_out && !b.gate.timed_out);
    if (failures) {
        fprintf(stderr, "test_rt_ptds: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_rt_ptds: ok\n");
    return 0;
}
