/* Emulated runtime stream capture and graphs: capture state queries
 * (cudaStreamIsCapturing, the CUDA 13 7-argument cudaStreamGetCaptureInfo),
 * captured work runs only at cudaGraphLaunch and at every launch, illegal
 * calls during capture (cudaMalloc in global mode invalidates the capture,
 * synchronizing a capturing stream, legacy-stream use), relaxed mode, and
 * cudaThreadExchangeStreamCaptureMode. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)
#define CHECK_RT(call, want) do { cudaError_t e_ = (call); if (e_ != (want)) { \
        fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #call, (int)e_, \
                cudaGetErrorName(e_), (int)(want)); failures++; } } while (0)

static int counter;
static void CUDART_CB bump(void *arg) { (void)arg; __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED); }

#define N 4096

static void test_capture_and_replay(void)
{
    cudaStream_t s;
    CHECK_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    void *d = NULL;
    unsigned char *pinned = NULL;
    CHECK_RT(cudaMalloc(&d, N), cudaSuccess);
    CHECK_RT(cudaMallocHost((void **)&pinned, N), cudaSuccess);
    CHECK_RT(cudaMemset(d, 0, N), cudaSuccess);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);

    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusInvalidated;
    CHECK_RT(cudaStreamIsCapturing(s, &st), cudaSuccess);
    CHECK(st == cudaStreamCaptureStatusNone);

    counter = 0;
    CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    CHECK_RT(cudaStreamIsCapturing(s, &st), cudaSuccess);
    CHECK(st == cudaStreamCaptureStatusActive);
    unsigned long long id = 0;
    cudaGraph_t g_in_capture = NULL;
    const cudaGraphNode_t *deps = NULL;
    const cudaGraphEdgeData *edges = NULL;
    size_t ndeps = 99;
    CHECK_RT(cudaStreamGetCaptureInfo(s, &st, &id, &g_in_capture, &deps, &edges, &ndeps), cudaSuccess);
    CHECK(st == cudaStreamCaptureStatusActive);
    CHECK(id != 0);
    CHECK(g_in_capture != NULL);
    CHECK(ndeps == 0);
    CHECK_RT(cudaMemsetAsync(d, 0x42, N, s), cudaSuccess);
    CHECK_RT(cudaLaunchHostFunc(s, bump, NULL), cudaSuccess);
    CHECK_RT(cudaMemcpyAsync(pinned, d, N, cudaMemcpyDeviceToHost, s), cudaSuccess);
    unsigned long long id2 = 0;
    CHECK_RT(cudaStreamGetCaptureInfo(s, &st, &id2, NULL, NULL, NULL, &ndeps), cudaSuccess);
    CHECK(st == cudaStreamCaptureStatusActive && id2 == id);
    cudaGraph_t graph = NULL;
    CHECK_RT(cudaStreamEndCapture(s, &graph), cudaSuccess);
    CHECK(graph != NULL);
    CHECK_RT(cudaStreamIsCapturing(s, &st), cudaSuccess);
    CHECK(st == cudaStreamCaptureStatusNone);

    /* nothing ran during capture */
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(counter == 0);
    CHECK(pinned[0] == 0 && pinned[N - 1] == 0);

    cudaGraphExec_t exec = NULL;
    CHECK_RT(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    CHECK_RT(cudaGraphUpload(exec, s), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(counter == 0);   /* uploading runs nothing */
    CHECK_RT(cudaGraphLaunch(exec, s), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(counter == 1);
    CHECK(pinned[0] == 0x42 && pinned[N - 1] == 0x42);

    /* replay: the same work again */
    memset(pinned, 0, N);
    CHECK_RT(cudaMemset(d, 0x42, N), cudaSuccess);
    CHECK_RT(cudaGraphLaunch(exec, s), cudaSuccess);
    CHECK_RT(cudaGraphLaunch(exec, s), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(counter == 3);
    CHECK(pinned[7] == 0x42);

    cudaGraphExec_t exec2 = NULL;
    CHECK_RT(cudaGraphInstantiateWithFlags(&exec2, graph, 0), cudaSuccess);
    CHECK_RT(cudaGraphLaunch(exec2, cudaStreamPerThread), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
    CHECK(counter == 4);

    CHECK_RT(cudaGraphExecDestroy(exec), cudaSuccess);
    CHECK_RT(cudaGraphExecDestroy(exec2), cudaSuccess);
    CHECK_RT(cudaGraphDestroy(graph), cudaSuccess);
    CHECK_RT(cudaFree(d), cudaSuccess);
    CHECK_RT(cudaFreeHost(pinned), cudaSuccess);
    CHECK_RT(cudaStreamDestroy(s), cudaSuccess);
}

static void test_illegal_during_capture(void)
{
    cudaStream_t s;
    CHECK_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    void *p = NULL;
    cudaGraph_t graph = NULL;
    enum cudaStreamCaptureStatus st;

    /* cudaMalloc is "potentially unsafe": an error in global mode, and the
     * capture is invalidated */
    CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    CHECK_RT(cudaMalloc(&p, 1024), cudaErrorStreamCaptureUnsupported);
    CHECK_RT(cudaGetLastError(), cudaErrorStreamCaptureUnsupported);
    CHECK_RT(cudaStreamIsCapturing(s, &st), cudaSuccess);
    CHECK(st == cudaStreamCaptureStatusInvalidated);
    CHECK_RT(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    CHECK(graph == NULL);
    (void)cudaGetLastError();

    /* synchronizing a capturing stream */
    CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    cudaError_t e = cudaStreamSynchronize(s);
    CHECK(e == cudaErrorStreamCaptureUnsupported || e == cudaErrorStreamCaptureImplicit);
    graph = NULL;
    e = cudaStreamEndCapture(s, &graph);
    CHECK(e == cudaErrorStreamCaptureInvalidated);
    (void)cudaGetLastError();

    /* relaxed mode allows cudaMalloc */
    CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
    CHECK_RT(cudaMalloc(&p, 1024), cudaSuccess);
    CHECK_RT(cudaLaunchHostFunc(s, bump, NULL), cudaSuccess);
    CHECK_RT(cudaStreamEndCapture(s, &graph), cudaSuccess);
    CHECK(graph != NULL);
    if (graph)
        CHECK_RT(cudaGraphDestroy(graph), cudaSuccess);
    CHECK_RT(cudaFree(p), cudaSuccess);

    /* the thread's mode: relaxed lets this thread call cudaMalloc while
     * another capture (global mode) is active */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    CHECK_RT(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
    CHECK(mode == cudaStreamCaptureModeGlobal);
    CHECK_RT(cudaMalloc(&p, 1024), cudaSuccess);
    CHECK_RT(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
    CHECK(mode == cudaStreamCaptureModeRelaxed);
    CHECK_RT(cudaStreamEndCapture(s, &graph), cudaSuccess);
    if (graph)
        CHECK_RT(cudaGraphDestroy(graph), cudaSuccess);
    CHECK_RT(cudaFree(p), cudaSuccess);

    /* ending a capture that was never begun */
    CHECK_RT(cudaStreamEndCapture(s, &graph), cudaErrorIllegalState);
    (void)cudaGetLastError();
    CHECK_RT(cudaStreamDestroy(s), cudaSuccess);
}

/* The legacy stream while a blocking stream captures: implicit dependency,
 * an error that invalidates the capture. */
static void test_legacy_during_capture(void)
{
    cudaStream_t blocking;
    CHECK_RT(cudaStreamCreate(&blocking), cudaSuccess);
    void *d = NULL;
    CHECK_RT(cudaMalloc(&d, 256), cudaSuccess);
    CHECK_RT(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeGlobal), cudaSuccess);
    CHECK_RT(cudaMemsetAsync(d, 1, 256, 0), cudaErrorStreamCaptureImplicit);
    cudaGraph_t graph = NULL;
    CHECK_RT(cudaStreamEndCapture(blocking, &graph), cudaErrorStreamCaptureInvalidated);
    (void)cudaGetLastError();
    CHECK_RT(cudaFree(d), cudaSuccess);
    CHECK_RT(cudaStreamDestroy(blocking), cudaSuccess);
}

int main(void)
{
    test_capture_and_replay();
    test_illegal_during_capture();
    test_legacy_during_capture();
    if (failures) {
        fprintf(stderr, "test_rt_capture: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_rt_capture: ok\n");
    return 0;
}
