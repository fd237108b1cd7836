/* A tight loop that makes many events of every kind the report sums: each
 * iteration allocates a device buffer (size varies), copies to it from the
 * host, runs a small SGEMM, all-reduces it over a one-rank communicator and
 * frees it; every 8th buffer is kept until the end, so the peak grows.
 * Used by test_log_limits.sh (log size cap, full disk).  Prints what it
 * did: iterations, allocations, bytes allocated, bytes copied, GEMM FLOPs
 * and NCCL bytes, for the script to compare with the report. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

enum { GEMM_N = 16, KEEP_EVERY = 8 };

static int failures;
#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                                     \
            failures++;                                                                                      \
        }                                                                                                    \
    } while (0)

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 3000;
    float host[1024];
    for (int i = 0; i < 1024; i++)
        host[i] = (float)i;
    cublasHandle_t h;
    ncclComm_t comm;
    int dev0 = 0;
    float *A;
    CHECK(cudaSetDevice(0) == cudaSuccess);
    CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    CHECK(ncclCommInitAll(&comm, 1, &dev0) == ncclSuccess);
    CHECK(cudaMalloc((void **)&A, GEMM_N * GEMM_N * sizeof(float)) == cudaSuccess);
    CHECK(cudaMemset(A, 0, GEMM_N * GEMM_N * sizeof(float)) == cudaSuccess);
    void **kept = calloc((size_t)iters / KEEP_EVERY + 1, sizeof *kept);
    unsigned long long allocs = 1, alloc_bytes = GEMM_N * GEMM_N * sizeof(float), copy_bytes = 0, flops = 0,
                       nccl_bytes = 0;
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < iters; i++) {
        size_t size = 4096 + (size_t)(i % 64) * 512;
        float *p;
        CHECK(cudaMalloc((void **)&p, size) == cudaSuccess);
        allocs++, alloc_bytes += size;
        size_t cp = (size_t)(1 + i % 16) * 256;
        CHECK(cudaMemcpy(p, host, cp, cudaMemcpyHostToDevice) == cudaSuccess);
        copy_bytes += cp;
        CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one, A, GEMM_N, A, GEMM_N,
                          &zero, A, GEMM_N)
              == CUBLAS_STATUS_SUCCESS);
        flops += 2ull * GEMM_N * GEMM_N * GEMM_N;
        CHECK(ncclAllReduce(p, p, 64, ncclFloat, ncclSum, comm, 0) == ncclSuccess);
        nccl_bytes += 64 * sizeof(float);
        if (i % KEEP_EVERY == 0)
            kept[i / KEEP_EVERY] = p;
        else
            CHECK(cudaFree(p) == cudaSuccess);
    }
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    for (int i = 0; i < iters; i += KEEP_EVERY)
        CHECK(cudaFree(kept[i / KEEP_EVERY]) == cudaSuccess);
    CHECK(cudaFree(A) == cudaSuccess);
    CHECK(ncclCommDestroy(comm) == ncclSuccess);
    CHECK(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
    free(kept);
    printf("iters %d allocs %llu alloc_bytes %llu copy_bytes %llu flops %llu nccl_bytes %llu\n", iters,
           allocs, alloc_bytes, copy_bytes, flops, nccl_bytes);
    return failures ? 1 : 0;
}
