/* The emulated cuBLAS and NCCL driven the way frameworks drive them: through
 * the runtime API (cudaMalloc, cudaStreamCreate, cudaMemcpyAsync), including
 * the special stream handles (legacy 0 / cudaStreamLegacy and
 * cudaStreamPerThread). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)
#define RT(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, (int)e_); exit(2); } } while (0)
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s = %d\n", #x, (int)s_); exit(3); } } while (0)
#define NC(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { fprintf(stderr, "%s = %d\n", #x, (int)r_); exit(4); } } while (0)

enum { N = 16 };

static void gemm_on(cublasHandle_t h, cudaStream_t s, const char *what)
{
    float hA[N * N], hB[N * N], hC[N * N];
    for (int i = 0; i < N * N; i++) { hA[i] = (float)(i % 5) - 2; hB[i] = (float)(i % 3); hC[i] = 0; }
    float *dA, *dB, *dC;
    RT(cudaMalloc((void **)&dA, sizeof hA));
    RT(cudaMalloc((void **)&dB, sizeof hB));
    RT(cudaMalloc((void **)&dC, sizeof hC));
    RT(cudaMemcpyAsync(dA, hA, sizeof hA, cudaMemcpyHostToDevice, s));
    RT(cudaMemcpyAsync(dB, hB, sizeof hB, cudaMemcpyHostToDevice, s));
    CB(cublasSetStream(h, s));
    float one = 1, zero = 0;
    CB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, N, N, &one, dA, N, dB, N, &zero, dC, N));
    RT(cudaMemcpyAsync(hC, dC, sizeof hC, cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    int bad = 0;
    for (int j = 0; j < N && !bad; j++)
        for (int i = 0; i < N && !bad; i++) {
            float want = 0;
            for (int l = 0; l < N; l++) want += hA[l + i * N] * hB[l + j * N];
            if (hC[i + j * N] != want) { CHECK(0, "%s: C(%d,%d) = %g want %g", what, i, j, hC[i + j * N], want); bad = 1; }
        }
    RT(cudaFree(dA));
    RT(cudaFree(dB));
    RT(cudaFree(dC));
}

int main(void)
{
    RT(cudaSetDevice(0));
    cublasHandle_t h;
    CB(cublasCreate(&h));
    cudaStream_t s;
    RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    gemm_on(h, s, "created stream");
    gemm_on(h, 0, "legacy stream 0");
    gemm_on(h, cudaStreamLegacy, "cudaStreamLegacy");
    gemm_on(h, cudaStreamPerThread, "cudaStreamPerThread");
    CB(cublasDestroy(h));

    /* NCCL on a runtime stream, buffers from cudaMalloc */
    ncclUniqueId id;
    ncclComm_t comm;
    NC(ncclGetUniqueId(&id));
    NC(ncclCommInitRank(&comm, 1, id, 0));
    int dev = -1;
    NC(ncclCommCuDevice(comm, &dev));
    CHECK(dev == 0, "comm device %d", dev);
    double hx[64], *dx;
    for (int i = 0; i < 64; i++) hx[i] = i;
    RT(cudaMalloc((void **)&dx, sizeof hx));
    RT(cudaMemcpyAsync(dx, hx, sizeof hx, cudaMemcpyHostToDevice, s));
    NC(ncclAllReduce(dx, dx, 64, ncclFloat64, ncclAvg, comm, s));
    RT(cudaMemcpyAsync(hx, dx, sizeof hx, cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    for (int i = 0; i < 64; i++) CHECK(hx[i] == i, "allreduce on a runtime stream [%d] = %g", i, hx[i]);
    NC(ncclCommDestroy(comm));
    RT(cudaFree(dx));
    RT(cudaStreamDestroy(s));
    if (failures) { printf("test_cublas_runtime: FAILED\n"); return 1; }
    printf("test_cublas_runtime: ok\n");
    return 0;
}
