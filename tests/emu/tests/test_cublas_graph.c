/* GEMMs and a collective captured into a CUDA graph run at every launch, on
 * the data present at that launch (the emulated libraries keep the work
 * description alive for replays instead of freeing it after one run). */
#include <cublas_v2.h>
#include <cuda.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, (int)r_); exit(2); } } while (0)
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s = %d\n", #x, (int)s_); exit(3); } } while (0)
#define NC(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { fprintf(stderr, "%s = %d\n", #x, (int)r_); exit(4); } } while (0)

enum { N = 8 };

static void upload(CUdeviceptr d, const void *h, size_t n)
{
    CU(cuMemcpyHtoD(d, h, n));
    CU(cuStreamSynchronize(NULL));   /* the capture stream is non-blocking */
}

int main(void)
{
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    cublasHandle_t h;
    CB(cublasCreate(&h));
    CB(cublasSetStream(h, (cudaStream_t)s));
    ncclComm_t comm;
    ncclUniqueId id;
    NC(ncclGetUniqueId(&id));
    NC(ncclCommInitRank(&comm, 1, id, 0));

    float hI[N * N], hB[N * N], hC[N * N];
    for (int i = 0; i < N * N; i++) hI[i] = (i % (N + 1)) == 0 ? 1.0f : 0.0f;
    CUdeviceptr dI, dB, dC, dR;
    CU(cuMemAlloc(&dI, sizeof hI));
    CU(cuMemAlloc(&dB, sizeof hB));
    CU(cuMemAlloc(&dC, sizeof hC));
    CU(cuMemAlloc(&dR, sizeof hC));
    upload(dI, hI, sizeof hI);

    /* C = 3 * I * B (cuBLAS, through cuBLASLt), then R = allreduce(C) on a 1-rank communicator */
    float three = 3, zero = 0;
    CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &three, (float *)dI, N, (float *)dB, N, &zero, (float *)dC, N));
    NC(ncclAllReduce((void *)dC, (void *)dR, N * N, ncclFloat32, ncclSum, comm, (cudaStream_t)s));
    CUgraph graph;
    CU(cuStreamEndCapture(s, &graph));
    CUgraphExec exec;
    CU(cuGraphInstantiate(&exec, graph, 0));

    for (int launch = 0; launch < 3; launch++) {
        for (int i = 0; i < N * N; i++) hB[i] = (float)(i + 100 * launch);
        upload(dB, hB, sizeof hB);
        CU(cuGraphLaunch(exec, s));
        CU(cuStreamSynchronize(s));
        CU(cuMemcpyDtoH(hC, dR, sizeof hC));
        for (int i = 0; i < N * N; i++)
            if (hC[i] != 3.0f * hB[i]) { CHECK(0, "launch %d: R[%d] = %g want %g", launch, i, hC[i], 3.0f * hB[i]); break; }
    }
    CU(cuGraphExecDestroy(exec));
    CU(cuGraphDestroy(graph));
    NC(ncclCommDestroy(comm));
    CB(cublasDestroy(h));
    cuMemFree(dI);
    cuMemFree(dB);
    cuMemFree(dC);
    cuMemFree(dR);
    CU(cuStreamDestroy(s));
    if (failures) { printf("test_cublas_graph: FAILED\n"); return 1; }
    printf("test_cublas_graph: ok\n");
    return 0;
}
