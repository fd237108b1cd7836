/* Emulated runtime, __device__ and __constant__ variables of an nvcc-built
 * program: cudaGetSymbolSize/Address, cudaMemcpyTo/FromSymbol (offsets,
 * kinds, async), storage shared with kernels through the symbol's address,
 * per-device storage, errors for bad kinds, ranges and unknown symbols. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu.h"

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)
#define CHECK_RT(call, want) do { cudaError_t e_ = (call); if (e_ != (want)) { \
        fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #call, (int)e_, \
                cudaGetErrorName(e_), (int)(want)); failures++; } } while (0)

__constant__ float coef[8];
__device__ int counters[16];

/* y[i] = coef[i % 8] * x[i]; the CPU version gets coef's device address */
__global__ void apply_coef(float *y, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = coef[i % 8] * x[i];
}

static const float *coef_storage;   /* cudaGetSymbolAddress(coef) */
static void apply_coef_cpu(void **args, const emu_launch *l)
{
    float *y = *(float **)args[0];
    const float *x = *(const float **)args[1];
    int n = *(int *)args[2];
    for (unsigned i = 0; i < l->grid.x * l->block.x && (int)i < n; i++)
        y[i] = coef_storage[i % 8] * x[i];
}

int main()
{
    setenv("EMU_DEVICES", "2", 1);   /* read at the emulator's first use */
    size_t sz = 0;
    CHECK_RT(cudaGetSymbolSize(&sz, coef), cudaSuccess);
    CHECK(sz == sizeof(float) * 8);
    CHECK_RT(cudaGetSymbolSize(&sz, counters), cudaSuccess);
    CHECK(sz == sizeof(int) * 16);
    int not_a_symbol = 0;
    CHECK_RT(cudaGetSymbolSize(&sz, &not_a_symbol), cudaErrorInvalidSymbol);
    (void)cudaGetLastError();

    /* storage starts zeroed and round-trips */
    int back[16];
    memset(back, 0xff, sizeof back);
    CHECK_RT(cudaMemcpyFromSymbol(back, counters, sizeof back, 0, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(back[0] == 0 && back[15] == 0);
    float h[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_RT(cudaMemcpyToSymbol(coef, h, sizeof h), cudaSuccess);   /* C++ defaults: offset 0, H2D */
    float tail[2] = {70, 80};
    CHECK_RT(cudaMemcpyToSymbol(coef, tail, sizeof tail, 6 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    float got[8] = {0};
    CHECK_RT(cudaMemcpyFromSymbol(got, coef, sizeof got), cudaSuccess);
    CHECK(got[0] == 1 && got[5] == 6 && got[6] == 70 && got[7] == 80);

    /* the symbol's address is device memory a kernel uses */
    void *addr = NULL;
    CHECK_RT(cudaGetSymbolAddress(&addr, coef), cudaSuccess);
    struct cudaPointerAttributes pa;
    CHECK_RT(cudaPointerGetAttributes(&pa, addr), cudaSuccess);
    CHECK(pa.type == cudaMemoryTypeDevice);
    coef_storage = (const float *)addr;
    size_t sizes[] = { sizeof(float *), sizeof(float *), sizeof(int) };
    CHECK(emuRegisterKernel((const void *)apply_coef, NULL, apply_coef_cpu, 3, sizes) == 0);
    const int n = 64;
    float hx[64], hy[64];
    for (int i = 0; i < n; i++)
        hx[i] = 1.0f + i;
    float *x, *y;
    CHECK_RT(cudaMalloc(&x, sizeof hx), cudaSuccess);
    CHECK_RT(cudaMalloc(&y, sizeof hy), cudaSuccess);
    CHECK_RT(cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice), cudaSuccess);
    apply_coef<<<1, 64>>>(y, x, n);
    CHECK_RT(cudaGetLastError(), cudaSuccess);
    CHECK_RT(cudaMemcpy(hy, y, sizeof hy, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(hy[0] == 1.0f && hy[6] == 70.0f * 7.0f && hy[15] == 80.0f * 16.0f);

    /* device-to-device and async forms */
    CHECK_RT(cudaMemcpyToSymbol(counters, x, 4 * sizeof(int), 0, cudaMemcpyDeviceToDevice), cudaSuccess);
    cudaStream_t s;
    CHECK_RT(cudaStreamCreate(&s), cudaSuccess);
    int seven[2] = {7, 7};
    CHECK_RT(cudaMemcpyToSymbolAsync(counters, seven, sizeof seven, 8 * sizeof(int), cudaMemcpyHostToDevice, s),
             cudaSuccess);
    CHECK_RT(cudaMemcpyFromSymbolAsync(back, counters, sizeof back, 0, cudaMemcpyDeviceToHost, s), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    float as_float;
    memcpy(&as_float, &back[1], sizeof as_float);
    CHECK(as_float == 2.0f);
    CHECK(back[8] == 7 && back[9] == 7 && back[10] == 0);

    /* errors */
    CHECK_RT(cudaMemcpyToSymbol(coef, h, sizeof h, 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    CHECK_RT(cudaMemcpyToSymbol(coef, h, sizeof h, 0, cudaMemcpyDeviceToHost), cudaErrorInvalidMemcpyDirection);
    CHECK_RT(cudaMemcpyFromSymbol(h, coef, sizeof h, 0, cudaMemcpyHostToDevice), cudaErrorInvalidMemcpyDirection);
    CHECK_RT(cudaMemcpyToSymbol(&not_a_symbol, h, 4), cudaErrorInvalidSymbol);
    CHECK_RT(cudaGetSymbolAddress(&addr, &not_a_symbol), cudaErrorInvalidSymbol);
    (void)cudaGetLastError();

    /* each device has its own copy */
    int ndev = 0;
    CHECK_RT(cudaGetDeviceCount(&ndev), cudaSuccess);
    if (ndev >= 2) {
        CHECK_RT(cudaSetDevice(1), cudaSuccess);
        void *addr1 = NULL;
        CHECK_RT(cudaGetSymbolAddress(&addr1, coef), cudaSuccess);
        CHECK(addr1 != coef_storage);
        CHECK_RT(cudaMemcpyFromSymbol(got, coef, sizeof got), cudaSuccess);
        CHECK(got[0] == 0 && got[7] == 0);
        CHECK_RT(cudaSetDevice(0), cudaSuccess);
    } else {
        fprintf(stderr, "FAIL: EMU_DEVICES=2 not honoured\n");
        failures++;
    }

    /* storage is re-created after a reset */
    CHECK_RT(cudaDeviceReset(), cudaSuccess);
    CHECK_RT(cudaMemcpyFromSymbol(got, coef, sizeof got), cudaSuccess);
    CHECK(got[0] == 0 && got[6] == 0);
    if (failures) {
        fprintf(stderr, "test_rt_symbol: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_rt_symbol: ok\n");
    return 0;
}
