/* An nvcc-built program (CUDA 13 <<<>>> = __cudaGetKernel + __cudaLaunchKernel,
 * or __cudaLaunchKernel_ptsz with --default-stream per-thread) that checks
 * its own results.  test_interpose_kernel.sh runs it with and without the
 * shim, also rebuilt with --default-stream per-thread, where the header maps
 * cudaMemcpy & co. onto their _ptds/_ptsz twins without the program naming
 * them, and checks the launch and copy hooks saw every call. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include "emu.h"

__global__ void axpy(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}

static void axpy_cpu(void **args, const emu_launch *l)
{
    float *y = *(float **)args[0];
    const float *x = *(const float **)args[1];
    float a = *(float *)args[2];
    int n = *(int *)args[3];
    for (unsigned i = 0; i < l->grid.x * l->block.x; i++)
        if ((int)i < n) y[i] += a * x[i];
}

static int failures;
#define CHECK(cond) do { if (!(cond)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

int main()
{
    const int n = 1000;
    size_t sizes[4] = {sizeof(float *), sizeof(float *), sizeof(float), sizeof(int)};
    CHECK(emuRegisterKernel((const void *)axpy, NULL, axpy_cpu, 4, sizes) == 0);
    float *hx = (float *)malloc(n * sizeof(float)), *hy = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) { hx[i] = (float)i; hy[i] = 1.0f; }
    float *x, *y;
    CHECK(cudaMalloc(&x, n * sizeof(float)) == cudaSuccess);
    CHECK(cudaMalloc(&y, n * sizeof(float)) == cudaSuccess);
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s) == cudaSuccess);
    CHECK(cudaMemcpyAsync(x, hx, n * sizeof(float), cudaMemcpyHostToDevice, s) == cudaSuccess);
    CHECK(cudaMemcpy(y, hy, n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    axpy<<<(n + 127) / 128, 128>>>(y, x, 2.0f, n);                /* default stream */
    CHECK(cudaGetLastError() == cudaSuccess);
    float a = 0.5f;
    int nn = n;
    void *args[] = {&y, &x, &a, &nn};
    CHECK(cudaLaunchKernel((const void *)axpy, dim3((n + 127) / 128), dim3(128), args, 0, 0) == cudaSuccess);
    CHECK(cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    int ok = 1;
    for (int i = 0; i < n; i++) ok &= hy[i] == 1.0f + 2.5f * (float)i;
    CHECK(ok);
    printf("axpy twice: %s, y[999] = %g\n", ok ? "ok" : "BAD", hy[n - 1]);
    CHECK(cudaFree(x) == cudaSuccess && cudaFree(y) == cudaSuccess && cudaStreamDestroy(s) == cudaSuccess);
    free(hx);
    free(hy);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
