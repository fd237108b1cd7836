/* Emulated runtime kernel launches from a pure-C program: cudaLaunchKernel
 * (and _ptsz, cudaLaunchKernelExC) of kernels registered with
 * emuRegisterKernel under any unique host address, argument passing,
 * launch configuration checks, unregistered kernels, parameter info,
 * function attributes, occupancy.  Prints ns per cudaMalloc+cudaFree pair
 * and per empty launch (informative). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "emu.h"

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)
#define CHECK_RT(call, want) do { cudaError_t e_ = (call); if (e_ != (want)) { \
        fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #call, (int)e_, \
                cudaGetErrorName(e_), (int)(want)); failures++; } } while (0)

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                  cudaStream_t stream);

/* saxpy(n, a, x, y): y[i] = a * x[i] + y[i] over the whole grid */
static const char saxpy_id = 0;
static void saxpy_impl(void **args, const emu_launch *l)
{
    int n = *(int *)args[0];
    float a = *(float *)args[1];
    const float *x = *(const float **)args[2];
    float *y = *(float **)args[3];
    unsigned threads = l->grid.x * l->block.x;
    for (unsigned t = 0; t < threads; t++)
        for (int i = (int)t; i < n; i += (int)threads)
            y[i] = a * x[i] + y[i];
}

static const char empty_id = 0;
static void empty_impl(void **args, const emu_launch *l) { (void)args; (void)l; }

static const char never_registered_id = 0;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void test_saxpy(void)
{
    size_t sizes[] = { sizeof(int), sizeof(float), sizeof(float *), sizeof(float *) };
    CHECK(emuRegisterKernel(&saxpy_id, NULL, saxpy_impl, 4, sizes) == 0);
    const int n = 10000;
    float *hx = malloc(n * sizeof(float)), *hy = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        hx[i] = (float)i;
        hy[i] = 1.0f;
    }
    float *x = NULL, *y = NULL;
    CHECK_RT(cudaMalloc((void **)&x, n * sizeof(float)), cudaSuccess);
    CHECK_RT(cudaMalloc((void **)&y, n * sizeof(float)), cudaSuccess);
    CHECK_RT(cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    CHECK_RT(cudaMemcpy(y, hy, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    int nn = n;
    float a = 2.0f;
    void *args[] = { &nn, &a, &x, &y };
    dim3 grid = { (n + 255) / 256, 1, 1 }, block = { 256, 1, 1 };
    CHECK_RT(cudaLaunchKernel(&saxpy_id, grid, block, args, 0, 0), cudaSuccess);
    a = 3.0f;   /* arguments are captured at launch */
    CHECK_RT(cudaLaunchKernel_ptsz(&saxpy_id, grid, block, args, 0, 0), cudaSuccess);
    CHECK_RT(cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
    CHECK_RT(cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    int ok = 1;
    for (int i = 0; i < n; i++)
        if (hy[i] != 1.0f + 5.0f * (float)i)
            ok = 0;
    CHECK(ok);

    /* cudaLaunchKernelExC without attributes */
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.stream = 0;
    a = -5.0f;
    CHECK_RT(cudaLaunchKernelExC(&cfg, &saxpy_id, args), cudaSuccess);
    CHECK_RT(cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(hy[10] == 1.0f && hy[n - 1] == 1.0f);

    /* cooperative launch */
    a = 1.0f;
    CHECK_RT(cudaLaunchCooperativeKernel(&saxpy_id, grid, block, args, 0, 0), cudaSuccess);
    CHECK_RT(cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(hy[10] == 11.0f && hy[n - 1] == (float)n);
    CHECK_RT(cudaLaunchCooperativeKernel(&never_registered_id, grid, block, args, 0, 0),
             cudaErrorInvalidDeviceFunction);
    (void)cudaGetLastError();

    /* parameter info, as cudaFuncGetParamInfo callers loop until an error */
    size_t off = 99, sz = 0;
    CHECK_RT(cudaFuncGetParamInfo(&saxpy_id, 3, &off, &sz), cudaSuccess);
    CHECK(sz == sizeof(float *));
    CHECK(off >= sizeof(int) + sizeof(float));
    CHECK(cudaFuncGetParamInfo(&saxpy_id, 4, &off, &sz) != cudaSuccess);
    (void)cudaGetLastError();

    struct cudaFuncAttributes fa;
    CHECK_RT(cudaFuncGetAttributes(&fa, &saxpy_id), cudaSuccess);
    CHECK(fa.maxThreadsPerBlock == 1024);
    CHECK(fa.binaryVersion >= 90 || fa.ptxVersion >= 90);
    CHECK_RT(cudaFuncSetAttribute(&saxpy_id, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024), cudaSuccess);
    CHECK_RT(cudaFuncGetAttributes(&fa, &saxpy_id), cudaSuccess);
    CHECK(fa.maxDynamicSharedSizeBytes == 100 * 1024);
    CHECK_RT(cudaFuncSetAttribute(&saxpy_id, cudaFuncAttributeMaxDynamicSharedMemorySize, -1), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    int blocks = 0;
    CHECK_RT(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &saxpy_id, 256, 0), cudaSuccess);
    CHECK(blocks == 8);   /* 2048 threads per SM / 256 */
    CHECK_RT(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &saxpy_id, 2048, 0), cudaSuccess);
    CHECK(blocks == 0);
    size_t dyn = 0;
    CHECK_RT(cudaOccupancyAvailableDynamicSMemPerBlock(&dyn, &saxpy_id, 2, 256), cudaSuccess);
    CHECK(dyn > 0);

    CHECK_RT(cudaFree(x), cudaSuccess);
    CHECK_RT(cudaFree(y), cudaSuccess);
    free(hx);
    free(hy);
}

static void test_bad_launches(void)
{
    dim3 one = {1, 1, 1}, zero = {0, 1, 1}, huge = {2048, 1, 1};
    CHECK_RT(cudaLaunchKernel(&never_registered_id, one, one, NULL, 0, 0), cudaErrorInvalidDeviceFunction);
    CHECK_RT(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
    CHECK_RT(cudaGetLastError(), cudaSuccess);   /* not sticky */
    CHECK_RT(cudaLaunchKernel(NULL, one, one, NULL, 0, 0), cudaErrorInvalidDeviceFunction);
    CHECK_RT(cudaLaunchKernel(&empty_id, zero, one, NULL, 0, 0), cudaErrorInvalidConfiguration);
    CHECK_RT(cudaLaunchKernel(&empty_id, one, huge, NULL, 0, 0), cudaErrorInvalidConfiguration);
    (void)cudaGetLastError();
}

static void timings(void)
{
    CHECK(emuRegisterKernel(&empty_id, NULL, empty_impl, 0, NULL) == 0);
    dim3 one = {1, 1, 1};
    const int iters = 20000;
    void *p = NULL;
    CHECK_RT(cudaMalloc(&p, 1 << 20), cudaSuccess);   /* warm up */
    CHECK_RT(cudaFree(p), cudaSuccess);
    double t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess) {
            failures++;
            break;
        }
    }
    double t1 = now_ns();
    CHECK_RT(cudaLaunchKernel(&empty_id, one, one, NULL, 0, 0), cudaSuccess);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
    cudaStream_t s;
    CHECK_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    double t2 = now_ns();
    for (int i = 0; i < iters; i++)
        if (cudaLaunchKernel(&empty_id, one, one, NULL, 0, s) != cudaSuccess) {
            failures++;
            break;
        }
    double t3 = now_ns();
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    double t4 = now_ns();
    CHECK_RT(cudaStreamDestroy(s), cudaSuccess);
    printf("timing: cudaMalloc+cudaFree pair %.0f ns; empty cudaLaunchKernel %.0f ns enqueue, %.0f ns to completion "
           "(EMU_JITTER_US=%u)\n", (t1 - t0) / iters, (t3 - t2) / iters, (t4 - t2) / iters, emuJitterUs());
}

int main(void)
{
    test_saxpy();
    test_bad_launches();
    timings();
    if (failures) {
        fprintf(stderr, "test_rt_launch: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_rt_launch: ok\n");
    return 0;
}
