/* Emulated runtime, nvcc-built program: real __global__ kernels launched
 * with <<<>>> (nvcc 13's __cudaGetKernel + __cudaLaunchKernel path, after
 * __cudaRegisterFatBinary/__cudaRegisterFunction at load), whose CPU
 * implementations are registered with emuRegisterKernel under the host stub
 * address and the mangled device name; the same kernel through
 * cudaLaunchKernel; a kernel without an implementation fails with
 * cudaErrorInvalidDeviceFunction; cudaFuncGetName; a cudaKernel_t is a
 * CUkernel, as on CUDA 12+ (cuKernelGetParamInfo and cuKernelGetFunction
 * answer it, and the runtime launches it given as a function).
 * (__managed__ variables: test_rt_managedvar.cu.) */
#include <cuda.h>
#include <cuda_runtime.h>
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

__global__ void scale_add(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] += a * x[i];
}

__global__ void no_cpu_implementation(int *p)
{
    *p = 1;
}

__global__ void fill(int *p, int v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = v;
}

/* CPU implementations: one call runs the whole grid */
static void scale_add_cpu(void **args, const emu_launch *l)
{
    float *y = *(float **)args[0];
    const float *x = *(const float **)args[1];
    float a = *(float *)args[2];
    int n = *(int *)args[3];
    unsigned total = l->grid.x * l->block.x;
    for (unsigned i = 0; i < total; i++)
        if ((int)i < n)
            y[i] += a * x[i];
}

static void fill_cpu(void **args, const emu_launch *l)
{
    int *p = *(int **)args[0];
    int v = *(int *)args[1];
    int n = *(int *)args[2];
    unsigned total = l->grid.x * l->block.x;
    for (unsigned i = 0; i < total && (int)i < n; i++)
        p[i] = v;
}

int main()
{
    /* scale_add by host stub, fill by mangled device name only */
    size_t sa_sizes[] = { sizeof(float *), sizeof(float *), sizeof(float), sizeof(int) };
    CHECK(emuRegisterKernel((const void *)scale_add, NULL, scale_add_cpu, 4, sa_sizes) == 0);
    size_t fill_sizes[] = { sizeof(int *), sizeof(int), sizeof(int) };
    CHECK(emuRegisterKernel(NULL, "_Z4fillPiii", fill_cpu, 3, fill_sizes) == 0);

    const int n = 5000;
    float *hx = (float *)malloc(n * sizeof(float)), *hy = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        hx[i] = (float)i;
        hy[i] = 0.5f;
    }
    float *x, *y;
    CHECK_RT(cudaMalloc(&x, n * sizeof(float)), cudaSuccess);
    CHECK_RT(cudaMalloc(&y, n * sizeof(float)), cudaSuccess);
    CHECK_RT(cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    CHECK_RT(cudaMemcpy(y, hy, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);

    /* a blocking stream: its work is ordered after the legacy-stream copies */
    cudaStream_t s;
    CHECK_RT(cudaStreamCreate(&s), cudaSuccess);
    scale_add<<<(n + 127) / 128, 128, 0, s>>>(y, x, 2.0f, n);
    CHECK_RT(cudaGetLastError(), cudaSuccess);
    /* the same kernel through cudaLaunchKernel */
    float a = 1.0f;
    int nn = n;
    void *args[] = { &y, &x, &a, &nn };
    CHECK_RT(cudaLaunchKernel((const void *)scale_add, dim3((n + 127) / 128), dim3(128), args, 0, s), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK_RT(cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    int ok = 1;
    for (int i = 0; i < n; i++)
        if (hy[i] != 0.5f + 3.0f * (float)i)
            ok = 0;
    CHECK(ok);

    /* the handle nvcc's <<<>>> code launches (__cudaGetKernel) is the
     * driver's CUkernel: its parameter layout and function come from the
     * driver, and the runtime accepts it wherever it takes a function */
    cudaKernel_t k = NULL;
    CHECK_RT(cudaGetKernel(&k, (const void *)scale_add), cudaSuccess);
    CHECK(k != NULL);
    size_t off[4] = { 0 }, size[4] = { 0 };
    for (int i = 0; i < 4; i++)
        CHECK(cuKernelGetParamInfo((CUkernel)k, (size_t)i, &off[i], &size[i]) == CUDA_SUCCESS);
    CHECK(off[0] == 0 && off[1] == 8 && off[2] == 16 && off[3] == 20);
    CHECK(size[0] == 8 && size[1] == 8 && size[2] == 4 && size[3] == 4);
    CHECK(cuKernelGetParamInfo((CUkernel)k, 4, &off[0], &size[0]) == CUDA_ERROR_INVALID_VALUE);
    CUfunction kf = NULL;
    CHECK(cuKernelGetFunction(&kf, (CUkernel)k) == CUDA_SUCCESS && kf != NULL);
    cudaKernel_t k2 = NULL;
    CHECK_RT(cudaGetKernel(&k2, (const void *)scale_add), cudaSuccess);
    CHECK(k2 == k);
    CHECK_RT(cudaLaunchKernel((const void *)k, dim3((n + 127) / 128), dim3(128), args, 0, s), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK_RT(cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    ok = 1;
    for (int i = 0; i < n; i++)
        if (hy[i] != 0.5f + 4.0f * (float)i)
            ok = 0;
    CHECK(ok);
    size_t poff = 1, psize = 0;
    CHECK_RT(cudaFuncGetParamInfo((const void *)k, 1, &poff, &psize), cudaSuccess);
    CHECK(poff == 8 && psize == 8);

    /* a kernel known to the runtime by its registered device name */
    int *d;
    CHECK_RT(cudaMalloc(&d, n * sizeof(int)), cudaSuccess);
    fill<<<dim3((n + 255) / 256), dim3(256)>>>(d, 42, n);
    CHECK_RT(cudaGetLastError(), cudaSuccess);
    int *hd = (int *)malloc(n * sizeof(int));
    CHECK_RT(cudaMemcpy(hd, d, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(hd[0] == 42 && hd[n - 1] == 42);
    const char *name = NULL;
    CHECK_RT(cudaFuncGetName(&name, (const void *)fill), cudaSuccess);
    CHECK(name && strcmp(name, "_Z4fillPiii") == 0);

    /* no CPU implementation: the launch fails, visible through the last error */
    no_cpu_implementation<<<1, 1>>>(d);
    CHECK_RT(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
    CHECK_RT(cudaGetLastError(), cudaSuccess);
    void *args2[] = { &d };
    CHECK_RT(cudaLaunchKernel((const void *)no_cpu_implementation, dim3(1), dim3(1), args2, 0, 0),
             cudaErrorInvalidDeviceFunction);
    (void)cudaGetLastError();
    /* a bad configuration through <<<>>> */
    scale_add<<<1, 4096>>>(y, x, 1.0f, n);
    CHECK_RT(cudaGetLastError(), cudaErrorInvalidConfiguration);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);

    /* timing of the <<<>>> path (informative) */
    const int iters = 20000;
    cudaEvent_t e0, e1;
    CHECK_RT(cudaEventCreate(&e0), cudaSuccess);
    CHECK_RT(cudaEventCreate(&e1), cudaSuccess);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < iters; i++)
        fill<<<1, 1, 0, s>>>(d, i, 1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK_RT(cudaMemcpy(hd, d, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(hd[0] == iters - 1);
    printf("timing: <<<>>> launch %.0f ns per enqueue\n",
           ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / iters);

    CHECK_RT(cudaEventDestroy(e0), cudaSuccess);
    CHECK_RT(cudaEventDestroy(e1), cudaSuccess);
    CHECK_RT(cudaStreamDestroy(s), cudaSuccess);
    CHECK_RT(cudaFree(x), cudaSuccess);
    CHECK_RT(cudaFree(y), cudaSuccess);
    CHECK_RT(cudaFree(d), cudaSuccess);
    free(hx);
    free(hy);
    free(hd);
    if (failures) {
        fprintf(stderr, "test_rt_kernel: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_rt_kernel: ok\n");
    return 0;
}
