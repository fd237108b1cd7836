/* One-row 2D copies of pageable memory, the form cublasSetVector and
 * cublasGetVector reach (a 2D copy of height 1): cudaMemcpy2D, its Async
 * form, cuMemcpy2D with zero pitches and with pitches wider than the row,
 * cuMemcpy2DAsync, and cublasSetVector/GetVector.  The data round-trips
 * exactly; under the shim (argument "shim") the emulator must have seen no
 * pageable byte: every one of them went through pinned staging. */
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/emu.h"

#define ROW ((size_t)300 << 10) /* 300 KiB, above the default conversion threshold */

#include "check.h"

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 131 + seed * 7 + (i >> 11));
}

static void runtime_forms(unsigned char *src, unsigned char *dst, void *d)
{
    cudaStream_t s;
    cudaStreamCreate(&s);
    fill(src, ROW, 1);
    CHECK(cudaMemcpy2D(d, ROW, src, ROW, ROW, 1, cudaMemcpyHostToDevice) == cudaSuccess, "2D h2d");
    memset(dst, 0, ROW);
    CHECK(cudaMemcpy2D(dst, ROW, d, ROW, ROW, 1, cudaMemcpyDeviceToHost) == cudaSuccess, "2D d2h");
    CHECK(!memcmp(src, dst, ROW), "2D round trip");
    fill(src, ROW, 2);
    CHECK(cudaMemcpy2DAsync(d, ROW + 512, src, ROW + 64, ROW, 1, cudaMemcpyHostToDevice, s) == cudaSuccess,
          "2DAsync h2d");
    memset(dst, 0, ROW);
    CHECK(cudaMemcpy2DAsync(dst, ROW, d, ROW, ROW, 1, cudaMemcpyDeviceToHost, s) == cudaSuccess, "2DAsync d2h");
    cudaStreamSynchronize(s);
    CHECK(!memcmp(src, dst, ROW), "2DAsync round trip");
    cudaStreamDestroy(s);
}

static void driver_forms(unsigned char *src, unsigned char *dst, CUdeviceptr d)
{
    fill(src, ROW, 3);
    CUDA_MEMCPY2D c = { 0 };
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = src;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = d;
    c.WidthInBytes = ROW;
    c.Height = 1; /* zero pitches: the driver reads them as the width */
    CHECK(cuMemcpy2D(&c) == CUDA_SUCCESS, "cuMemcpy2D h2d");
    CUDA_MEMCPY2D b = { 0 };
    b.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    b.srcDevice = d;
    b.srcPitch = ROW + 256;
    b.dstMemoryType = CU_MEMORYTYPE_HOST;
    b.dstHost = dst;
    b.dstPitch = ROW;
    b.WidthInBytes = ROW;
    b.Height = 1;
    memset(dst, 0, ROW);
    CHECK(cuMemcpy2DAsync(&b, 0) == CUDA_SUCCESS, "cuMemcpy2DAsync d2h");
    CHECK(cuStreamSynchronize(0) == CUDA_SUCCESS, "sync");
    CHECK(!memcmp(src, dst, ROW), "driver round trip");
}

static void cublas_forms(unsigned char *src, unsigned char *dst, void *d)
{
    float *x = (float *)src, *y = (float *)dst;
    int n = (int)(ROW / sizeof(float));
    for (int i = 0; i < n; i++)
        x[i] = (float)i * 0.25f;
    CHECK(cublasSetVector(n, sizeof(float), x, 1, d, 1) == CUBLAS_STATUS_SUCCESS, "cublasSetVector");
    memset(y, 0, ROW);
    CHECK(cublasGetVector(n, sizeof(float), d, 1, y, 1) == CUBLAS_STATUS_SUCCESS, "cublasGetVector");
    CHECK(!memcmp(x, y, ROW), "cublas vector round trip");
}

int main(int argc, char **argv)
{
    int under_shim = argc > 1 && !strcmp(argv[1], "shim");
    unsigned char *src = malloc(ROW), *dst = malloc(ROW);
    void *d = NULL;
    if (!src || !dst || cudaMalloc(&d, 2 * ROW + 4096) != cudaSuccess) {
        printf("setup failed\n");
        return 1;
    }
    runtime_forms(src, dst, d);
    driver_forms(src, dst, (CUdeviceptr)(uintptr_t)d);
    cublas_forms(src, dst, d);
    unsigned long long pageable = emuGetCounter("bytes.h2d.pageable") + emuGetCounter("bytes.d2h.pageable");
    printf("pageable bytes the emulator saw: %llu\n", pageable);
    if (under_shim)
        CHECK(pageable == 0, "%llu pageable bytes reached the driver", pageable);
    else
        CHECK(pageable == 8 * ROW, "the plain run copies 8 pageable rows: %llu", pageable);
    cudaFree(d);
    free(src);
    free(dst);
    if (failures)
        return 1;
    printf("one-row copies ok\n");
    return 0;
}
