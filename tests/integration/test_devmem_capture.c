/* test_devmem_capture: CUDA graph capture with trainshim's device allocator.
 * Run by test_devmem_capture.sh without and with the shim; stdout (status
 * codes, data after graph replays) must be identical:
 *   - cudaMallocAsync/cudaFreeAsync inside capture are graph allocations
 *     (passed through), valid at every replay;
 *   - a pooled block used by the graph keeps its data;
 *   - freeing a non-graph block inside capture is refused as the driver
 *     refuses it;
 *   - pool activity on another stream while one captures (a large
 *     allocation that needs fences) records no event on the capturing
 *     stream: the capture is not invalidated;
 *   - a synchronous cudaMalloc inside a global-mode capture gets the real
 *     answer, and so does a cuMemAlloc inside a capture begun through the
 *     driver API (cuStreamBeginCapture);
 *   - cuMemAllocAsync/cuMemFreeAsync inside a driver-API capture
 *     (cuStreamBeginCapture_v2) are graph allocations, valid at every
 *     replay;
 *   - the ToGraph begins answer as without the shim.
 * test_devmem_capture_count checks that the shim counts these captures. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N ((size_t)1 << 20)

#include "check.h"

int main(void)
{
    cudaStream_t s, s3;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "s");
    CHECK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking) == cudaSuccess, "s3");
    unsigned char *p = NULL, *x = NULL;
    CHECK(cudaMallocAsync((void **)&p, N, s) == cudaSuccess, "p");
    CHECK(cudaMemsetAsync(p, 1, N, s) == cudaSuccess, "memset p");
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
    CHECK(cudaMalloc((void **)&x, 8 * N) == cudaSuccess, "x");
    CHECK(cudaFree(x) == cudaSuccess, "free x");   /* pending in the pool: reuse needs fences */

    printf("begin %d\n", (int)cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    unsigned char *g = NULL;
    printf("graph malloc %d\n", (int)cudaMallocAsync((void **)&g, N, s));
    printf("graph memset %d\n", (int)cudaMemsetAsync(g, 7, N, s));
    printf("graph copy %d\n", (int)cudaMemcpyAsync(p, g, N, cudaMemcpyDeviceToDevice, s));
    printf("graph free %d\n", (int)cudaFreeAsync(g, s));
    printf("free pooled in capture %d\n", (int)cudaFreeAsync(p, s));
    /* another stream needs memory while s captures */
    unsigned char *y = NULL;
    printf("other stream malloc %d\n", (int)cudaMallocAsync((void **)&y, 64 * N, s3));
    printf("other stream free %d\n", (int)cudaFreeAsync(y, s3));
    cudaGraph_t graph = NULL;
    printf("end %d\n", (int)cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec = NULL;
    printf("instantiate %d\n", (int)cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 3; i++) {
        CHECK(cudaMemsetAsync(p, 1, N, s) == cudaSuccess, "reset p");
        printf("launch %d %d\n", i, (int)cudaGraphLaunch(exec, s));
        CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync replay");
        unsigned char h[16];
        CHECK(cudaMemcpy(h, p + N - 16, 16, cudaMemcpyDeviceToHost) == cudaSuccess, "read p");
        printf("replay %d p = %d\n", i, h[15]);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);

    /* a synchronous allocation inside a global-mode capture */
    printf("begin2 %d\n", (int)cudaStreamBeginCapture(s3, cudaStreamCaptureModeGlobal));
    void *q = NULL;
    cudaError_t mr = cudaMalloc(&q, N);
    printf("malloc in capture %d\n", (int)mr);
    cudaGraph_t g2 = NULL;
    printf("end2 %d\n", (int)cudaStreamEndCapture(s3, &g2));
    if (g2) cudaGraphDestroy(g2);
    printf("last %d\n", (int)cudaGetLastError());
    if (mr == cudaSuccess) CHECK(cudaFree(q) == cudaSuccess, "free q");

    /* the same through the driver API */
    printf("cu begin %d\n", (int)cuStreamBeginCapture((CUstream)s3, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUdeviceptr dq = 0;
    CUresult dr = cuMemAlloc(&dq, N);
    printf("cuMemAlloc in capture %d\n", (int)dr);
    CUgraph g3 = NULL;
    printf("cu end %d\n", (int)cuStreamEndCapture((CUstream)s3, &g3));
    if (g3) cuGraphDestroy(g3);
    cudaGetLastError();
    if (dr == CUDA_SUCCESS) CHECK(cuMemFree(dq) == CUDA_SUCCESS, "free dq");

    /* graph allocations through the driver API */
    printf("cu begin v2 %d\n", (int)cuStreamBeginCapture_v2((CUstream)s3, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUdeviceptr ga = 0;
    printf("cu graph alloc %d\n", (int)cuMemAllocAsync(&ga, N, (CUstream)s3));
    printf("cu graph memset %d\n", (int)cuMemsetD8Async(ga, 9, N, (CUstream)s3));
    printf("cu graph copy %d\n", (int)cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)p, ga, N, (CUstream)s3));
    printf("cu graph free %d\n", (int)cuMemFreeAsync(ga, (CUstream)s3));
    CUgraph g4 = NULL;
    printf("cu end v2 %d\n", (int)cuStreamEndCapture((CUstream)s3, &g4));
    CUgraphExec x4 = NULL;
    printf("cu instantiate %d\n", (int)cuGraphInstantiate(&x4, g4, 0));
    for (int i = 0; i < 2; i++) {
        CHECK(cudaMemsetAsync(p, 1, N, s3) == cudaSuccess, "reset p");
        printf("cu launch %d %d\n", i, (int)cuGraphLaunch(x4, (CUstream)s3));
        CHECK(cudaStreamSynchronize(s3) == cudaSuccess, "sync cu replay");
        unsigned char h[16];
        CHECK(cudaMemcpy(h, p + N / 2, 16, cudaMemcpyDeviceToHost) == cudaSuccess, "read p");
        printf("cu replay %d p = %d\n", i, h[0]);
    }
    if (x4) cuGraphExecDestroy(x4);
    if (g4) cuGraphDestroy(g4);

    /* ToGraph begins */
    cudaGraph_t into = NULL;
    CHECK(cudaGraphCreate(&into, 0) == cudaSuccess, "graph create");
    cudaError_t tr = cudaStreamBeginCaptureToGraph(s3, into, NULL, NULL, 0, cudaStreamCaptureModeRelaxed);
    printf("rt begin to graph %d\n", (int)tr);
    if (tr == cudaSuccess) printf("rt end to graph %d\n", (int)cudaStreamEndCapture(s3, &into));
    cudaGetLastError();
    CUresult cr = cuStreamBeginCaptureToGraph((CUstream)s3, (CUgraph)into, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED);
    printf("cu begin to graph %d\n", (int)cr);
    CUgraph into2 = NULL;
    if (cr == CUDA_SUCCESS) printf("cu end to graph %d\n", (int)cuStreamEndCapture((CUstream)s3, &into2));
    cudaGraphDestroy(into);

    CHECK(cudaFreeAsync(p, s) == cudaSuccess, "free p");
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "final sync");
    CHECK(cudaStreamDestroy(s) == cudaSuccess && cudaStreamDestroy(s3) == cudaSuccess, "destroy");
    printf("done\n");
    return failures ? 1 : 0;
}
