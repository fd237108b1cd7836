/* test_drv_exec_capture: stream capture and graphs on the emulated driver:
 * captured work does not run; a graph replays it, in order, at each launch,
 * with the kernel arguments of capture time; events fork other streams into
 * a capture; the documented errors for synchronizing a capturing stream,
 * using the legacy stream, device-wide sync and "potentially unsafe" calls
 * in each capture mode, and the invalidation they cause. */
#include "driver/exec_testutil.h"

#include <pthread.h>

struct log { int n; int v[64]; };
struct log_item { struct log *log; int value; };
static void log_value(void *p)
{
    struct log_item *it = p;
    it->log->v[__atomic_fetch_add(&it->log->n, 1, __ATOMIC_ACQ_REL)] = it->value;
}
static void set_flag(void *p) { __atomic_store_n((int *)p, 1, __ATOMIC_RELEASE); }

static int kernel_last_arg, kernel_calls;
static void record_impl(void **args, const emu_launch *l)
{
    (void)l;
    kernel_last_arg = *(int *)args[0];
    kernel_calls++;
}

static void test_capture_and_replay(void)
{
    CUstream s, other;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    REQUIRE(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    static const char stub = 0;
    size_t isz = sizeof(int);
    void *f;
    EXPECT(emuRegisterKernel(&stub, NULL, record_impl, 1, &isz) == 0);
    EXPECT(emuGetFunction(&f, &stub, NULL) == CUDA_SUCCESS);
    CUdeviceptr d;
    REQUIRE(cuMemAlloc(&d, 256));
    OK(cuMemsetD8(d, 0, 256));
    OK(cuCtxSynchronize());

    static struct log log;
    static struct log_item items[3] = {{&log, 1}, {&log, 2}, {&log, 3}};
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    OK(cuStreamIsCapturing(s, &st));
    EXPECT(st == CU_STREAM_CAPTURE_STATUS_NONE);
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuStreamIsCapturing(s, &st));
    EXPECT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cuuint64_t id = 0;
    CUgraph g_info = NULL;
    const CUgraphNode *deps = NULL;
    size_t ndeps = 99;
    OK(cuStreamGetCaptureInfo(s, &st, &id, &g_info, &deps, NULL, &ndeps));
    EXPECT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id != 0 && g_info != NULL);
    int arg = 5;
    void *params[] = {&arg};
    uint64_t launched0 = emuGetCounter("kernels.launched");
    OK(cuLaunchHostFunc(s, log_value, &items[0]));
    OK(cuLaunchKernel((CUfunction)f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    arg = 6;                                                  /* the graph keeps 5 */
    OK(cuMemsetD8Async(d, 'g', 256, s));
    /* Fork: an event recorded in the capture pulls `other` into it. */
    CUevent fork, join;
    REQUIRE(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    REQUIRE(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    OK(cuEventRecord(fork, s));
    EXPECT_RC(cuEventQuery(fork), CUDA_ERROR_CAPTURED_EVENT);
    OK(cuStreamWaitEvent(other, fork, 0));
    OK(cuStreamIsCapturing(other, &st));
    EXPECT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(cuLaunchHostFunc(other, log_value, &items[1]));
    OK(cuEventRecord(join, other));
    OK(cuStreamWaitEvent(s, join, 0));
    OK(cuLaunchHostFunc(s, log_value, &items[2]));
    CUgraph g;
    OK(cuStreamEndCapture(s, &g));
    OK(cuStreamIsCapturing(other, &st));
    EXPECT(st == CU_STREAM_CAPTURE_STATUS_NONE);              /* the join ended with the capture */
    EXPECT(g == g_info);
    et_sleep_ms(10);
    EXPECT(log.n == 0 && kernel_calls == 0);                  /* nothing ran during capture */
    EXPECT(*(char *)(uintptr_t)d == 0);

    CUgraphExec exec;
    OK(cuGraphInstantiate(&exec, g, 0));
    OK(cuGraphDestroy(g));                                    /* the executable keeps the work */
    CUstream launch_stream;
    REQUIRE(cuStreamCreate(&launch_stream, 0));
    OK(cuGraphLaunch(exec, launch_stream));
    OK(cuGraphLaunch(exec, launch_stream));
    OK(cuStreamSynchronize(launch_stream));
    EXPECT(log.n == 6);
    int expect[6] = {1, 2, 3, 1, 2, 3}, same = 1;
    for (int i = 0; i < 6 && i < log.n; i++) same &= log.v[i] == expect[i];
    EXPECT(same);
    EXPECT(kernel_calls == 2 && kernel_last_arg == 5);
    EXPECT(emuGetCounter("kernels.launched") == launched0 + 2);   /* per replay, not at capture */
    EXPECT(*(char *)(uintptr_t)d == 'g');
    /* Destroying the executable while a launch is queued is safe. */
    struct et_gate gate = {0};
    OK(cuLaunchHostFunc(launch_stream, et_gate_wait, &gate));
    OK(cuGraphLaunch(exec, launch_stream));
    OK(cuGraphExecDestroy(exec));
    et_gate_open(&gate);
    OK(cuStreamSynchronize(launch_stream));
    EXPECT(log.n == 9);
    EXPECT_RC(cuGraphLaunch(exec, launch_stream), CUDA_ERROR_INVALID_VALUE);
    OK(cuEventDestroy(fork));
    OK(cuEventDestroy(join));
    OK(cuStreamDestroy(s));
    OK(cuStreamDestroy(other));
    OK(cuStreamDestroy(launch_stream));
    OK(cuMemFree(d));
}

static void expect_invalidated(CUstream s)
{
    CUstreamCaptureStatus st;
    OK(cuStreamIsCapturing(s, &st));
    EXPECT(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CUgraph g = (CUgraph)1;
    EXPECT_RC(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    EXPECT(g == NULL);
}

static void test_capture_errors(void)
{
    CUstream nb, blocking;
    REQUIRE(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    REQUIRE(cuStreamCreate(&blocking, 0));
    int flag = 0;
    CUgraph g;
    EXPECT_RC(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT_RC(cuStreamBeginCapture(nb, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuStreamEndCapture(nb, &g), CUDA_ERROR_ILLEGAL_STATE);   /* not capturing */

    /* Synchronizing or querying a capturing stream. */
    OK(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_RC(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    EXPECT_RC(cuStreamSynchronize(nb), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT_RC(cuLaunchHostFunc(nb, set_flag, &flag), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    expect_invalidated(nb);
    OK(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_RC(cuStreamQuery(nb), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(nb);

    /* The legacy stream while a blocking stream captures... */
    OK(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_RC(cuLaunchHostFunc(NULL, set_flag, &flag), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    expect_invalidated(blocking);
    /* ...but not while only a non-blocking one does. */
    OK(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuLaunchHostFunc(NULL, set_flag, &flag));
    OK(cuStreamSynchronize(NULL));
    EXPECT(flag == 1);
    /* Device-wide synchronization. */
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(nb);
    OK(cuStreamDestroy(nb));
    OK(cuStreamDestroy(blocking));
}

/* ---- capture modes and "potentially unsafe" calls (a synchronous copy) */
struct other_call { CUresult rc; CUstreamCaptureMode mode; CUstream end_stream; };
static CUcontext g_ctx;
static CUdeviceptr g_dev;
static void *unsafe_in_thread(void *p)
{
    struct other_call *o = p;
    cuCtxSetCurrent(g_ctx);
    CUstreamCaptureMode m = o->mode;
    cuThreadExchangeStreamCaptureMode(&m);
    char buf[16] = {0};
    o->rc = cuMemcpyHtoD(g_dev, buf, sizeof buf);
    return NULL;
}
static CUresult unsafe_elsewhere(CUstreamCaptureMode mode)
{
    struct other_call o = {CUDA_ERROR_UNKNOWN, mode, NULL};
    pthread_t t;
    pthread_create(&t, NULL, unsafe_in_thread, &o);
    pthread_join(t, NULL);
    return o.rc;
}
static void *end_in_thread(void *p)
{
    struct other_call *o = p;
    cuCtxSetCurrent(g_ctx);
    CUgraph g;
    o->rc = cuStreamEndCapture(o->end_stream, &g);
    return NULL;
}

static void test_modes(void)
{
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    REQUIRE(cuMemAlloc(&g_dev, 64));
    char buf[16] = {0};
    CUgraph g;

    /* Global: unsafe calls fail in this thread and in other global-mode threads. */
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_RC(unsafe_elsewhere(CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);   /* relaxed thread */
    EXPECT_RC(unsafe_elsewhere(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    struct other_call o = {CUDA_SUCCESS, CU_STREAM_CAPTURE_MODE_GLOBAL, s};
    pthread_t t;
    pthread_create(&t, NULL, end_in_thread, &o);
    pthread_join(t, NULL);
    EXPECT(o.rc == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    EXPECT_RC(unsafe_elsewhere(CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(s);
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUdeviceptr during;
    EXPECT_RC(cuMemAlloc(&during, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(s);

    /* Thread-local: only this thread's unsafe calls fail. */
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    EXPECT_RC(unsafe_elsewhere(CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    OK(cuStreamEndCapture(s, &g));
    OK(cuGraphDestroy(g));
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    EXPECT_RC(cuMemcpyHtoD(g_dev, buf, sizeof buf), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_invalidated(s);

    /* Relaxed: allowed, also in this thread. */
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(cuMemcpyHtoD(g_dev, buf, sizeof buf));
    EXPECT_RC(unsafe_elsewhere(CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    OK(cuStreamEndCapture(s, &g));
    OK(cuGraphDestroy(g));

    /* The thread's own mode can relax a global capture for itself. */
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&m));
    EXPECT(m == CU_STREAM_CAPTURE_MODE_GLOBAL);
    OK(cuMemcpyHtoD(g_dev, buf, sizeof buf));
    OK(cuThreadExchangeStreamCaptureMode(&m));
    OK(cuStreamEndCapture(s, &g));
    OK(cuGraphDestroy(g));
    EXPECT_RC(cuThreadExchangeStreamCaptureMode(NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuCtxSynchronize());
    OK(cuMemFree(g_dev));
    OK(cuStreamDestroy(s));
}

int main(void)
{
    g_ctx = et_setup(0);
    test_capture_and_replay();
    test_capture_errors();
    test_modes();
    return et_finish("test_drv_exec_capture");
}
