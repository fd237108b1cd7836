/* test_devmem_capture_count: trainshim counts every capture begin and end,
 * so that its stream-ordered allocation path asks cuStreamIsCapturing only
 * while a capture is in progress somewhere in the process.  Run by
 * test_devmem_capture_count.sh under the shim (pooling on).  The emulator
 * counts the driver's cuStreamIsCapturing calls; a few cudaMallocAsync /
 * cudaFreeAsync pairs on an idle, non-capturing stream show whether the
 * shim believes a capture is in progress (it asks) or not (it does not):
 *   - no capture: no question;
 *   - runtime begin (which reaches the driver's begin through the hooks:
 *     counted once) ... end;
 *   - driver begin (cuStreamBeginCapture_v2), with cuMemAllocAsync /
 *     cuMemFreeAsync inside the capture passed through as graph nodes;
 *   - ToGraph begins (runtime and driver): counted when they succeed,
 *     nothing when the emulator refuses them;
 *   - failed begins (a stream already capturing, the legacy stream): nothing;
 *   - a capture invalidated inside (global mode, cudaMalloc) still ends;
 *   - an end from the wrong thread ends nothing; the owner's end does;
 *   - a relaxed capture begun and ended on another thread;
 *   - last, a capture begun through an entry point the shim does not hook
 *     (the CUDA 10.0 ABI's cuStreamBeginCapture): ending it through the
 *     hooks reveals it, and the shim asks every time from then on (the
 *     script checks its one warning).
 * Without the shim (tests/run.sh runs every test binary as it is) the same
 * calls get the same answers and nobody asks cuStreamIsCapturing. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

static int failures;
#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (!(cond)) {                                     \
            printf("FAIL line %d: %s: ", __LINE__, #cond); \
            printf(__VA_ARGS__);                           \
            printf("\n");                                  \
            failures++;                                    \
        }                                                  \
    } while (0)

static cudaStream_t s, s2, s3;

static uint64_t queries(void)
{
    return emuGetCounter("calls.cuStreamIsCapturing") + emuGetCounter("calls.cuStreamIsCapturing_ptsz");
}

/* cuStreamIsCapturing calls made by n allocation+free pairs on s */
static uint64_t pair_queries(int n)
{
    uint64_t before = queries();
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        CHECK(cudaMallocAsync(&p, 4096, s) == cudaSuccess, "malloc %d", i);
        CHECK(cudaFreeAsync(p, s) == cudaSuccess, "free %d", i);
    }
    return queries() - before;
}

static int under_shim;
#define EXPECT_COUNTED(what)                                                                   \
    do {                                                                                       \
        uint64_t n_ = pair_queries(4);                                                         \
        if (under_shim) CHECK(n_ > 0, "%s: the shim does not see the capture", what);          \
        else CHECK(n_ == 0, "%s: %llu questions without the shim", what, (unsigned long long)n_); \
    } while (0)
#define EXPECT_NONE(what) CHECK(pair_queries(50) == 0, "%s: cuStreamIsCapturing was asked", what)

static cudaError_t end_rc;
static void *end_from_thread(void *arg)
{
    cudaGraph_t g = NULL;
    end_rc = cudaStreamEndCapture((cudaStream_t)arg, &g);
    if (g) cudaGraphDestroy(g);
    return NULL;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase;
static void wait_phase(int p)
{
    pthread_mutex_lock(&mu);
    while (phase < p) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}
static void set_phase(int p)
{
    pthread_mutex_lock(&mu);
    phase = p;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}
static void *relaxed_capturer(void *arg)
{
    (void)arg;
    CHECK(cudaStreamBeginCapture(s3, cudaStreamCaptureModeRelaxed) == cudaSuccess, "thread begin");
    set_phase(1);
    wait_phase(2);
    cudaGraph_t g = NULL;
    CHECK(cudaStreamEndCapture(s3, &g) == cudaSuccess, "thread end");
    if (g) cudaGraphDestroy(g);
    set_phase(3);
    return NULL;
}

int main(void)
{
    const char *pre = getenv("LD_PRELOAD");
    under_shim = pre && strstr(pre, "libtrainshim");
    printf("%s trainshim\n", under_shim ? "under" : "without");
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "s");
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess, "s2");
    CHECK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking) == cudaSuccess, "s3");
    pair_queries(8); /* warm: the pool holds the block */
    EXPECT_NONE("no capture");

    /* runtime begin, nested driver begin: one capture */
    cudaGraph_t g = NULL;
    CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed) == cudaSuccess, "rt begin");
    EXPECT_COUNTED("runtime capture");
    CHECK(cudaStreamEndCapture(s2, &g) == cudaSuccess, "rt end");
    cudaGraphDestroy(g);
    EXPECT_NONE("after a runtime capture");

    /* driver begin; stream-ordered driver allocations inside pass through
     * (test_devmem_capture checks their graph's results) */
    CHECK(cuStreamBeginCapture_v2((CUstream)s2, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS, "cu begin");
    EXPECT_COUNTED("driver capture");
    CUdeviceptr d = 0;
    CHECK(cuMemAllocAsync(&d, 1 << 20, (CUstream)s2) == CUDA_SUCCESS, "graph alloc");
    CHECK(cuMemsetD8Async(d, 3, 1 << 20, (CUstream)s2) == CUDA_SUCCESS, "graph memset");
    CHECK(cuMemFreeAsync(d, (CUstream)s2) == CUDA_SUCCESS, "graph free");
    CUgraph cg = NULL;
    CHECK(cuStreamEndCapture((CUstream)s2, &cg) == CUDA_SUCCESS, "cu end");
    cuGraphDestroy(cg);
    EXPECT_NONE("after a driver capture");

    /* ToGraph begins: counted exactly when they begin a capture */
    cudaGraph_t into = NULL;
    CHECK(cudaGraphCreate(&into, 0) == cudaSuccess, "graph create");
    cudaError_t tr = cudaStreamBeginCaptureToGraph(s2, into, NULL, NULL, 0, cudaStreamCaptureModeRelaxed);
    printf("cudaStreamBeginCaptureToGraph: %d\n", (int)tr);
    if (tr == cudaSuccess) {
        EXPECT_COUNTED("runtime ToGraph capture");
        CHECK(cudaStreamEndCapture(s2, &g) == cudaSuccess, "rt ToGraph end");
    } else {
        CHECK(tr == cudaErrorNotSupported, "unexpected refusal %d", (int)tr);
        cudaGetLastError();
    }
    EXPECT_NONE("after a runtime ToGraph begin");
    CUresult cr = cuStreamBeginCaptureToGraph((CUstream)s2, (CUgraph)into, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED);
    printf("cuStreamBeginCaptureToGraph: %d\n", (int)cr);
    if (cr == CUDA_SUCCESS) {
        EXPECT_COUNTED("driver ToGraph capture");
        CHECK(cuStreamEndCapture((CUstream)s2, &cg) == CUDA_SUCCESS, "cu ToGraph end");
    } else {
        CHECK(cr == CUDA_ERROR_NOT_SUPPORTED, "unexpected refusal %d", (int)cr);
    }
    EXPECT_NONE("after a driver ToGraph begin");
    cudaGraphDestroy(into);

    /* failed begins count nothing */
    CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed) == cudaSuccess, "begin");
    CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed) != cudaSuccess, "second begin on s2 works");
    cudaGetLastError();
    CHECK(cuStreamBeginCapture_v2((CUstream)s2, CU_STREAM_CAPTURE_MODE_RELAXED) != CUDA_SUCCESS, "cu second begin works");
    CHECK(cudaStreamEndCapture(s2, &g) == cudaSuccess, "end");
    cudaGraphDestroy(g);
    EXPECT_NONE("after failed begins on a capturing stream");
    CHECK(cuStreamBeginCapture_v2(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_RELAXED) != CUDA_SUCCESS, "legacy begin works");
    CHECK(cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeGlobal) != cudaSuccess, "rt legacy begin works");
    cudaGetLastError();
    EXPECT_NONE("after failed begins on the legacy stream");

    /* a capture invalidated inside still ends */
    CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal) == cudaSuccess, "global begin");
    void *q = NULL;
    CHECK(cudaMalloc(&q, 4096) != cudaSuccess, "cudaMalloc inside a global capture works");
    cudaGetLastError();
    g = NULL;
    CHECK(cudaStreamEndCapture(s2, &g) == cudaErrorStreamCaptureInvalidated, "invalidated end");
    cudaGetLastError();
    EXPECT_NONE("after an invalidated capture");

    /* an end from the wrong thread ends nothing */
    CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "thread-local begin");
    pthread_t t;
    pthread_create(&t, NULL, end_from_thread, s2);
    pthread_join(t, NULL);
    CHECK(end_rc == cudaErrorStreamCaptureWrongThread, "wrong-thread end %d", (int)end_rc);
    EXPECT_COUNTED("after a wrong-thread end");
    CHECK(cudaStreamEndCapture(s2, &g) == cudaSuccess, "owner's end");
    cudaGraphDestroy(g);
    EXPECT_NONE("after the owner's end");

    /* another thread's capture */
    pthread_create(&t, NULL, relaxed_capturer, NULL);
    wait_phase(1);
    EXPECT_COUNTED("another thread's capture");
    set_phase(2);
    wait_phase(3);
    pthread_join(t, NULL);
    EXPECT_NONE("after another thread's capture");

    /* a begin the hooks cannot see (the CUDA 10.0 ABI, one argument) */
    CUresult (*legacy_begin)(CUstream) = (CUresult(*)(CUstream))dlsym(RTLD_DEFAULT, "cuStreamBeginCapture");
    CHECK(legacy_begin != NULL, "no cuStreamBeginCapture");
    if (legacy_begin) {
        CHECK(legacy_begin((CUstream)s2) == CUDA_SUCCESS, "legacy-ABI begin");
        CHECK(cuStreamEndCapture((CUstream)s2, &cg) == CUDA_SUCCESS, "end of the unseen capture");
        cuGraphDestroy(cg);
        EXPECT_COUNTED("after an unseen capture was revealed");
    }

    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
    cudaStreamDestroy(s);
    cudaStreamDestroy(s2);
    cudaStreamDestroy(s3);
    printf(failures ? "%d failures\n" : "ok\n", failures);
    return failures ? 1 : 0;
}
