/* test_drv_exec_context: stream, event, launch, capture and graph entry
 * points check the driver state as cuda.h documents it:
 *   - before cuInit every one returns CUDA_ERROR_NOT_INITIALIZED;
 *   - creating a stream or an event needs a current context;
 *   - calls on a stream whose return list names CUDA_ERROR_INVALID_CONTEXT
 *     (synchronize, query, wait, host functions, callbacks, event records,
 *     launches, stream queries) need one only for the handles that name a
 *     stream of the current context (0, CU_STREAM_LEGACY,
 *     CU_STREAM_PER_THREAD): an explicit stream carries its own, so a
 *     thread with no current context may use it;
 *   - events, capture and graphs on explicit handles need only cuInit. */
#include "driver/exec_testutil.h"

#include <pthread.h>
#include <stdint.h>

static char add_key;
static void add_impl(void **args, const emu_launch *l)
{
    (void)l;
    int *p = *(int **)args[0];
    *p += *(int *)args[1];
}

static void noop_host(void *p) { __atomic_fetch_add((int *)p, 1, __ATOMIC_RELAXED); }
static void noop_callback(CUstream s, CUresult st, void *p) { (void)s; (void)st; noop_host(p); }

static int host_runs;

/* Every call that resolves a stream through the current context. */
static void expect_implicit_stream_calls(CUresult want, CUstream s, CUevent ev, CUfunction f, const char *when)
{
    int before = et_failures;
    int prio;
    unsigned flags;
    CUdevice dev;
    CUcontext c;
    int *dummy = NULL, one = 1;
    void *args[] = {&dummy, &one};
    EXPECT_RC(cuStreamSynchronize(s), want);
    EXPECT_RC(cuStreamSynchronize_ptsz(s), want);
    EXPECT_RC(cuStreamQuery(s), want);
    EXPECT_RC(cuStreamQuery_ptsz(s), want);
    EXPECT_RC(cuStreamWaitEvent(s, ev, 0), want);
    EXPECT_RC(cuLaunchHostFunc(s, noop_host, &host_runs), want);
    EXPECT_RC(cuLaunchHostFunc_ptsz(s, noop_host, &host_runs), want);
    EXPECT_RC(cuStreamAddCallback(s, noop_callback, &host_runs, 0), want);
    EXPECT_RC(cuEventRecord(ev, s), want);
    EXPECT_RC(cuEventRecordWithFlags(ev, s, 0), want);
    EXPECT_RC(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), want);
    EXPECT_RC(cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), want);
    EXPECT_RC(cuStreamGetPriority(s, &prio), want);
    EXPECT_RC(cuStreamGetFlags(s, &flags), want);
    EXPECT_RC(cuStreamGetDevice(s, &dev), want);
    EXPECT_RC(cuStreamGetCtx(s, &c), want);
    if (et_failures != before) fprintf(stderr, "  (%s, stream %p)\n", when, (void *)s);
}

struct thread_arg { CUcontext ctx; CUstream s; CUevent ev; CUfunction f; int *dev_int; };

/* A thread that never sets a context. */
static void *contextless_thread(void *p)
{
    struct thread_arg *a = p;
    CUcontext cur = (CUcontext)1;
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == NULL);
    CUstream implicit[] = {NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};
    for (int i = 0; i < 3; i++)
        expect_implicit_stream_calls(CUDA_ERROR_INVALID_CONTEXT, implicit[i], a->ev, a->f, "no context");
    CUstream s2;
    CUevent e2;
    EXPECT_RC(cuStreamCreate(&s2, 0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuEventCreate(&e2, 0), CUDA_ERROR_INVALID_CONTEXT);

    /* The explicit stream carries its context: everything works here. */
    int runs_before = __atomic_load_n(&host_runs, __ATOMIC_RELAXED);
    int two = 2;
    void *args[] = {&a->dev_int, &two};
    OK(cuLaunchKernel(a->f, 1, 1, 1, 1, 1, 1, 0, a->s, args, NULL));
    OK(cuLaunchHostFunc(a->s, noop_host, &host_runs));
    OK(cuStreamAddCallback(a->s, noop_callback, &host_runs, 0));
    OK(cuEventRecord(a->ev, a->s));
    OK(cuStreamWaitEvent(a->s, a->ev, 0));
    OK(cuStreamSynchronize(a->s));
    OK(cuStreamQuery(a->s));
    OK(cuEventQuery(a->ev));
    OK(cuEventSynchronize(a->ev));
    EXPECT(__atomic_load_n(&host_runs, __ATOMIC_RELAXED) == runs_before + 2);
    CUdevice dev = -1;
    OK(cuStreamGetDevice(a->s, &dev));
    EXPECT(dev == 0);
    CUcontext sc = NULL;
    OK(cuStreamGetCtx(a->s, &sc));
    EXPECT(sc == a->ctx);

    /* capture and graphs on the explicit stream */
    CUgraph g = NULL;
    CUgraphExec ge = NULL;
    CUstreamCaptureStatus cs;
    OK(cuStreamBeginCapture(a->s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(cuStreamIsCapturing(a->s, &cs));
    EXPECT(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(cuLaunchKernel(a->f, 1, 1, 1, 1, 1, 1, 0, a->s, args, NULL));
    OK(cuStreamEndCapture(a->s, &g));
    OK(cuGraphInstantiate(&ge, g, 0));
    OK(cuGraphLaunch(ge, a->s));
    OK(cuGraphLaunch(ge, a->s));
    OK(cuStreamSynchronize(a->s));
    OK(cuGraphExecDestroy(ge));
    OK(cuGraphDestroy(g));
    OK(cuGraphCreate(&g, 0));
    OK(cuGraphDestroy(g));
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    return NULL;
}

int main(void)
{
    /* Before cuInit: handles are not even looked at. */
    CUstream bogus_s = (CUstream)(uintptr_t)0x1234;
    CUevent bogus_e = (CUevent)(uintptr_t)0x5678;
    CUfunction bogus_f = (CUfunction)(uintptr_t)0x9abc;
    CUstream s = NULL;
    CUevent ev = NULL;
    float ms;
    CUgraph g = NULL;
    CUgraphExec ge = NULL;
    CUstreamCaptureStatus cs;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    expect_implicit_stream_calls(CUDA_ERROR_NOT_INITIALIZED, bogus_s, bogus_e, bogus_f, "before cuInit");
    expect_implicit_stream_calls(CUDA_ERROR_NOT_INITIALIZED, NULL, bogus_e, bogus_f, "before cuInit");
    EXPECT_RC(cuStreamCreate(&s, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuStreamDestroy(bogus_s), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuEventCreate(&ev, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuEventQuery(bogus_e), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuEventSynchronize(bogus_e), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuEventElapsedTime(&ms, bogus_e, bogus_e), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuEventDestroy(bogus_e), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuStreamBeginCapture(bogus_s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuStreamEndCapture(bogus_s, &g), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuStreamIsCapturing(bogus_s, &cs), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuThreadExchangeStreamCaptureMode(&mode), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuGraphCreate(&g, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuGraphInstantiate(&ge, (CUgraph)(uintptr_t)0x42, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuGraphLaunch((CUgraphExec)(uintptr_t)0x42, bogus_s), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuGraphExecDestroy((CUgraphExec)(uintptr_t)0x42), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuGraphDestroy((CUgraph)(uintptr_t)0x42), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT(s == NULL && ev == NULL && g == NULL && ge == NULL);

    REQUIRE(cuInit(0));
    size_t sizes[] = {sizeof(int *), sizeof(int)};
    if (emuRegisterKernel(&add_key, "add", add_impl, 2, sizes) != 0) {
        fprintf(stderr, "emuRegisterKernel failed\n");
        return 1;
    }
    CUfunction f;
    REQUIRE((CUresult)emuGetFunction((void **)&f, &add_key, NULL));
    EXPECT_RC(cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);   /* initialized, no context */
    EXPECT_RC(cuEventCreate(&ev, 0), CUDA_ERROR_INVALID_CONTEXT);
    expect_implicit_stream_calls(CUDA_ERROR_INVALID_CONTEXT, NULL, bogus_e, f, "after cuInit, no context");

    CUcontext ctx = et_setup(0);
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    REQUIRE(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr d;
    REQUIRE(cuMemAlloc(&d, sizeof(int)));
    REQUIRE(cuMemsetD32(d, 0, 1));
    REQUIRE(cuCtxSynchronize());
    /* With a current context the implicit handles work (and the kernel runs). */
    int *dev_int = (int *)(uintptr_t)d;
    int one = 1;
    void *args[] = {&dev_int, &one};
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    OK(cuStreamSynchronize(NULL));
    OK(cuEventRecord(ev, CU_STREAM_PER_THREAD));
    OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    OK(cuStreamQuery(CU_STREAM_LEGACY));

    pthread_t th;
    struct thread_arg a = {ctx, s, ev, f, dev_int};
    if (pthread_create(&th, NULL, contextless_thread, &a) != 0) { fprintf(stderr, "pthread_create\n"); return 1; }
    pthread_join(th, NULL);

    int got = 0;
    OK(cuMemcpyDtoH(&got, d, sizeof got));
    EXPECT(got == 1 + 2 + 2 + 2);   /* this thread's launch, the other's, two graph replays */
    /* Unbinding makes this thread context-less: the stream still works. */
    OK(cuCtxSetCurrent(NULL));
    EXPECT_RC(cuStreamSynchronize(NULL), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuStreamSynchronize(s));
    OK(cuStreamDestroy(s));
    OK(cuEventDestroy(ev));
    OK(cuCtxSetCurrent(ctx));
    OK(cuMemFree(d));
    return et_finish("test_drv_exec_context");
}
