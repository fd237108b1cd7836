/* bench_emu: the emulator's own hot paths, so that benchmarks of the shim are
 * known to measure the shim, not the emulator.  Prints ns per
 * cudaMalloc+cudaFree pair, per cuMemAlloc+cuMemFree pair, per empty
 * cudaLaunchKernel (enqueue) and per launch+synchronize round trip, beside
 * glibc malloc+free of the same size measured in the same run.  Run with
 * EMU_JITTER_US=0 (tests/bench/run.sh sets it). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "emu.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void empty_kernel_impl(void **args, const emu_launch *l) { (void)args; (void)l; }
static char empty_kernel_id;   /* the "host stub" address of the kernel */

#define BEST_OF 5
#define TIME_LOOP(label, n, body) do { \
        double best_ = 1e300; \
        for (int r_ = 0; r_ < BEST_OF; r_++) { \
            double t0_ = now_ns(); \
            for (int i_ = 0; i_ < (n); i_++) { body; } \
            double per_ = (now_ns() - t0_) / (n); \
            if (per_ < best_) best_ = per_; \
        } \
        printf("  %-44s %10.0f ns\n", label, best_); } while (0)

int main(void)
{
    const size_t size = 1 << 20;
    void *p;
    if (cudaFree(0) != cudaSuccess) { fprintf(stderr, "bench_emu: no CUDA device\n"); return 1; }
    printf("emulator hot paths (best of %d runs, EMU_JITTER_US=%u)\n", BEST_OF, emuJitterUs());
    TIME_LOOP("glibc malloc+free 1 MiB (baseline)", 100000, {
        void *volatile q = malloc(size); free(q); });
    TIME_LOOP("cudaMalloc+cudaFree 1 MiB", 20000, {
        if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess) return 1; });
    CUdeviceptr dp;
    TIME_LOOP("cuMemAlloc+cuMemFree 1 MiB", 20000, {
        if (cuMemAlloc(&dp, size) != CUDA_SUCCESS || cuMemFree(dp) != CUDA_SUCCESS) return 1; });

    emuRegisterKernel(&empty_kernel_id, NULL, empty_kernel_impl, 0, NULL);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    dim3 one = {1, 1, 1};
    TIME_LOOP("empty cudaLaunchKernel (enqueue only)", 20000, {
        if (cudaLaunchKernel(&empty_kernel_id, one, one, NULL, 0, s) != cudaSuccess) return 1; });
    cudaStreamSynchronize(s);
    TIME_LOOP("empty cudaLaunchKernel + cudaStreamSynchronize", 5000, {
        cudaLaunchKernel(&empty_kernel_id, one, one, NULL, 0, s); cudaStreamSynchronize(s); });
    TIME_LOOP("idle cudaDeviceSynchronize", 100000, { cudaDeviceSynchronize(); });
    cudaStreamDestroy(s);
    return 0;
}
