/* cuBLAS and NCCL used as a framework uses them, checking their own
 * results.  test_interpose_libs.sh runs it with and without the shim and
 * checks outermost-call accounting across libraries that call each other:
 * cublasSgemm_v2 -> cublasLtMatmul (nested), cublasCreate's workspace
 * cuMemAlloc_v2 (outermost: cublasCreate is not hooked), ncclBcast ->
 * ncclBroadcast (counted once). */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

static int failures;
#define EXPECT(cond) do { if (!(cond)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

enum { M = 8, N = 6, K = 5, COUNT = 1000 };

int main(void)
{
    EXPECT(cudaSetDevice(0) == cudaSuccess);
    cudaStream_t s;
    EXPECT(cudaStreamCreate(&s) == cudaSuccess);

    /* ---- cuBLAS: C = A * B, column-major ---- */
    float a[M * K], b[K * N], c[M * N], want[M * N];
    for (int i = 0; i < M * K; i++) a[i] = (float)(i % 7) - 2.0f;
    for (int i = 0; i < K * N; i++) b[i] = (float)(i % 5) * 0.5f;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++) acc += a[k * M + i] * b[j * K + k];
            want[j * M + i] = acc;
        }
    float *da, *db, *dc;
    EXPECT(cudaMalloc((void **)&da, sizeof a) == cudaSuccess);
    EXPECT(cudaMalloc((void **)&db, sizeof b) == cudaSuccess);
    EXPECT(cudaMalloc((void **)&dc, sizeof c) == cudaSuccess);
    EXPECT(cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice) == cudaSuccess);
    EXPECT(cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice) == cudaSuccess);
    cublasHandle_t h;
    EXPECT(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    EXPECT(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS);
    const float one = 1.0f, zero = 0.0f;
    EXPECT(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, da, M, db, K, &zero, dc, M) ==
           CUBLAS_STATUS_SUCCESS);
    EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
    EXPECT(cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost) == cudaSuccess);
    int ok = 1;
    for (int i = 0; i < M * N; i++) ok &= c[i] == want[i];
    EXPECT(ok);
    printf("sgemm %s c[0]=%g c[last]=%g\n", ok ? "ok" : "BAD", c[0], c[M * N - 1]);
    /* An invalid argument comes back unchanged. */
    cublasStatus_t bad = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, N, K, &one, da, M, db, K, &zero, dc, M);
    printf("sgemm m=-1 -> %d\n", (int)bad);
    EXPECT(bad != CUBLAS_STATUS_SUCCESS);
    EXPECT(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);

    /* ---- NCCL on one rank ---- */
    ncclComm_t comm;
    EXPECT(ncclCommInitAll(&comm, 1, NULL) == ncclSuccess);
    float host[COUNT], back[COUNT];
    for (int i = 0; i < COUNT; i++) host[i] = (float)i * 0.25f;
    float *dx, *dy;
    EXPECT(cudaMalloc((void **)&dx, sizeof host) == cudaSuccess);
    EXPECT(cudaMalloc((void **)&dy, sizeof host) == cudaSuccess);
    EXPECT(cudaMemcpy(dx, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess);
    EXPECT(ncclBcast(dx, COUNT, ncclFloat, 0, comm, s) == ncclSuccess);
    EXPECT(ncclGroupStart() == ncclSuccess);
    EXPECT(ncclAllReduce(dx, dy, COUNT, ncclFloat, ncclSum, comm, s) == ncclSuccess);
    EXPECT(ncclGroupEnd() == ncclSuccess);
    EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
    EXPECT(cudaMemcpy(back, dy, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess);
    EXPECT(memcmp(back, host, sizeof host) == 0);
    printf("nccl one-rank bcast+allreduce %s\n", memcmp(back, host, sizeof host) == 0 ? "ok" : "BAD");
    EXPECT(ncclCommDestroy(comm) == ncclSuccess);

    EXPECT(cudaFree(da) == cudaSuccess && cudaFree(db) == cudaSuccess && cudaFree(dc) == cudaSuccess);
    EXPECT(cudaFree(dx) == cudaSuccess && cudaFree(dy) == cudaSuccess);
    EXPECT(cudaStreamDestroy(s) == cudaSuccess);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
