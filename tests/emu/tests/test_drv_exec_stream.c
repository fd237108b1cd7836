/* test_drv_exec_stream: streams of the emulated driver: work runs later on
 * the stream's worker, in FIFO order under jitter; the legacy stream orders
 * with blocking streams but not with non-blocking ones; per-thread default
 * streams; host functions and callbacks; destroy with pending work; cheap
 * cuCtxSynchronize; argument errors. */
#include "driver/exec_testutil.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static CUcontext ctx;

static void set_flag(void *p) { __atomic_store_n((int *)p, 1, __ATOMIC_RELEASE); }
static int flag(int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void sleep_20ms(void *p) { et_sleep_ms(20); set_flag(p); }

static void test_asynchrony(void)
{
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    struct et_gate gate = {0};
    int ran = 0;
    OK(cuLaunchHostFunc(s, et_gate_wait, &gate));
    OK(cuLaunchHostFunc(s, set_flag, &ran));
    EXPECT(!flag(&ran));                                   /* not run at the call */
    EXPECT_RC(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    et_gate_open(&gate);
    OK(cuStreamSynchronize(s));
    EXPECT(flag(&ran));
    OK(cuStreamQuery(s));
    OK(cuStreamDestroy(s));
}

struct order_log { int n; int seen[256]; };
struct order_item { struct order_log *log; int index; };
static void log_order(void *p)
{
    struct order_item *it = p;
    it->log->seen[it->log->n++] = it->index;   /* one worker per stream: no race */
}

static void test_fifo_under_jitter(void)
{
    unsigned old = emuSetJitterUs(200);
    CUstream s;
    REQUIRE(cuStreamCreate(&s, 0));
    static struct order_log log;
    static struct order_item items[256];
    for (int i = 0; i < 100; i++) {
        items[i] = (struct order_item){&log, i};
        OK(cuLaunchHostFunc(s, log_order, &items[i]));
    }
    OK(cuStreamSynchronize(s));
    EXPECT(log.n == 100);
    int in_order = 1;
    for (int i = 0; i < log.n; i++) in_order &= log.seen[i] == i;
    EXPECT(in_order);
    OK(cuStreamDestroy(s));
    emuSetJitterUs(old);
}

static void test_legacy_semantics(void)
{
    CUstream blocking, nonblocking;
    REQUIRE(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    REQUIRE(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));

    /* Legacy work waits for prior work of a blocking stream. */
    struct et_gate g1 = {0};
    int legacy_ran = 0;
    OK(cuLaunchHostFunc(blocking, et_gate_wait, &g1));
    OK(cuLaunchHostFunc(NULL, set_flag, &legacy_ran));
    et_sleep_ms(20);
    EXPECT(!flag(&legacy_ran));
    et_gate_open(&g1);
    OK(cuStreamSynchronize(NULL));
    EXPECT(flag(&legacy_ran));

    /* ... but not for a non-blocking stream. */
    struct et_gate g2 = {0};
    int legacy2 = 0;
    OK(cuLaunchHostFunc(nonblocking, et_gate_wait, &g2));
    OK(cuLaunchHostFunc(CU_STREAM_LEGACY, set_flag, &legacy2));
    OK(cuStreamSynchronize(CU_STREAM_LEGACY));             /* returns with the gate closed */
    EXPECT(flag(&legacy2));
    EXPECT_RC(cuStreamQuery(nonblocking), CUDA_ERROR_NOT_READY);
    et_gate_open(&g2);
    OK(cuStreamSynchronize(nonblocking));

    /* Later blocking-stream work waits for prior legacy work; non-blocking does not. */
    struct et_gate g3 = {0};
    int after_blocking = 0, after_nonblocking = 0;
    OK(cuLaunchHostFunc(NULL, et_gate_wait, &g3));
    OK(cuLaunchHostFunc(blocking, set_flag, &after_blocking));
    OK(cuLaunchHostFunc(nonblocking, set_flag, &after_nonblocking));
    OK(cuStreamSynchronize(nonblocking));
    EXPECT(flag(&after_nonblocking));
    et_sleep_ms(20);
    EXPECT(!flag(&after_blocking));
    et_gate_open(&g3);
    OK(cuStreamSynchronize(blocking));
    EXPECT(flag(&after_blocking));
    OK(cuStreamDestroy(blocking));
    OK(cuStreamDestroy(nonblocking));
}

struct pt_arg { struct et_gate gate; unsigned long long id; int done; };
static void *other_thread(void *p)
{
    struct pt_arg *a = p;
    cuCtxSetCurrent(ctx);
    int ran = 0;
    /* This thread's per-thread stream is independent of the main thread's. */
    if (cuStreamGetId(CU_STREAM_PER_THREAD, &a->id) != CUDA_SUCCESS) return NULL;
    if (cuLaunchHostFunc_ptsz(NULL, set_flag, &ran) != CUDA_SUCCESS) return NULL;
    if (cuStreamSynchronize_ptsz(NULL) != CUDA_SUCCESS) return NULL;
    a->done = flag(&ran);
    return NULL;
}

static void test_per_thread_stream(void)
{
    struct pt_arg a = {{0}, 0, 0};
    unsigned long long mine = 0, legacy = 0;
    OK(cuStreamGetId(CU_STREAM_PER_THREAD, &mine));
    OK(cuStreamGetId(NULL, &legacy));
    EXPECT(mine != legacy);
    struct et_gate gate = {0};
    int after = 0;
    OK(cuLaunchHostFunc_ptsz(NULL, et_gate_wait, &gate));   /* 0 in a _ptsz call = per-thread */
    OK(cuLaunchHostFunc(CU_STREAM_PER_THREAD, set_flag, &after));
    EXPECT_RC(cuStreamQuery_ptsz(NULL), CUDA_ERROR_NOT_READY);
    EXPECT_RC(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);
    pthread_t t;
    pthread_create(&t, NULL, other_thread, &a);
    pthread_join(t, NULL);
    EXPECT(a.done == 1);                                      /* not held up by our gate */
    EXPECT(a.id != 0 && a.id != mine);
    EXPECT(!flag(&after));
    /* The per-thread stream is blocking: legacy work waits for it. */
    int legacy_ran = 0;
    OK(cuLaunchHostFunc(NULL, set_flag, &legacy_ran));
    et_sleep_ms(10);
    EXPECT(!flag(&legacy_ran));
    et_gate_open(&gate);
    OK(cuStreamSynchronize(NULL));
    EXPECT(flag(&after) && flag(&legacy_ran));
}

struct cb_seen { CUstream stream; CUresult status; int calls; };
static void callback(CUstream s, CUresult status, void *p)
{
    struct cb_seen *c = p;
    c->stream = s;
    c->status = status;
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELEASE);
}

static void test_callbacks_and_destroy(void)
{
    CUstream s;
    REQUIRE(cuStreamCreate(&s, 0));
    struct cb_seen seen = {0, (CUresult)-1, 0};
    OK(cuStreamAddCallback(s, callback, &seen, 0));
    EXPECT_RC(cuStreamAddCallback(s, callback, &seen, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamSynchronize(s));
    EXPECT(seen.calls == 1 && seen.stream == s && seen.status == CUDA_SUCCESS);

    /* Destroying a stream with queued work returns at once; the work still runs. */
    struct et_gate gate = {0};
    int ran = 0;
    OK(cuLaunchHostFunc(s, et_gate_wait, &gate));
    OK(cuLaunchHostFunc(s, set_flag, &ran));
    OK(cuStreamDestroy(s));
    EXPECT_RC(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuLaunchHostFunc(s, set_flag, &ran), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(!flag(&ran));
    et_gate_open(&gate);
    double t0 = et_now_ms();
    while (!flag(&ran) && et_now_ms() - t0 < 2000) et_sleep_ms(1);
    EXPECT(flag(&ran));
}

static void test_ctx_synchronize(void)
{
    CUstream s[3];
    int done[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        REQUIRE(cuStreamCreate(&s[i], i == 2 ? CU_STREAM_NON_BLOCKING : 0));
        OK(cuLaunchHostFunc(s[i], sleep_20ms, &done[i]));
    }
    OK(cuCtxSynchronize());
    EXPECT(flag(&done[0]) && flag(&done[1]) && flag(&done[2]));
    for (int i = 0; i < 3; i++) OK(cuStreamDestroy(s[i]));
    /* Idle: cheap (an atomic pending count, no walk). */
    double t0 = et_now_ms();
    for (int i = 0; i < 100000; i++) cuCtxSynchronize();
    double ns = (et_now_ms() - t0) * 1e6 / 100000;
    printf("cuCtxSynchronize idle: %.0f ns/call\n", ns);
    /* A figure, not an assertion: speed is measured by benchmarks, never by
     * timed tests (a loaded CI machine would make this flaky). */
}

static void test_getters_and_errors(void)
{
    CUstream s;
    EXPECT_RC(cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuStreamCreate(&s, 4), CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -10));
    int prio = 1;
    unsigned flags = 0;
    CUdevice dev = -1;
    CUcontext c = NULL;
    OK(cuStreamGetPriority(s, &prio));
    EXPECT(prio == -5);                                   /* clamped to the greatest priority */
    OK(cuStreamGetFlags(s, &flags));
    EXPECT(flags == CU_STREAM_NON_BLOCKING);
    OK(cuStreamGetDevice(s, &dev));
    EXPECT(dev == 0);
    OK(cuStreamGetCtx(s, &c));
    EXPECT(c == ctx);
    EXPECT_RC(cuStreamGetPriority(s, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy(s));
    REQUIRE(cuStreamCreateWithPriority(&s, 0, 3));
    OK(cuStreamGetPriority(s, &prio));
    EXPECT(prio == 0);
    OK(cuStreamDestroy(s));
    EXPECT_RC(cuStreamDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuLaunchHostFunc(NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    static unsigned bogus[64];
    EXPECT_RC(cuStreamSynchronize((CUstream)bogus), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuStreamQuery((CUstream)bogus), CUDA_ERROR_INVALID_HANDLE);
}

/* A forked child has no stream workers: work fails instead of hanging. */
static void test_fork_child(void)
{
    struct et_gate gate = {0};
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuLaunchHostFunc(s, et_gate_wait, &gate));      /* the parent is busy at fork time */
    pid_t pid = fork();
    if (pid == 0) {
        int ran = 0;
        int ok = cuLaunchHostFunc(s, set_flag, &ran) == CUDA_ERROR_NOT_INITIALIZED &&
                 cuStreamSynchronize(s) == CUDA_ERROR_NOT_INITIALIZED &&
                 cuCtxSynchronize() == CUDA_ERROR_NOT_INITIALIZED;
        _exit(ok ? 0 : 1);
    }
    int status = -1;
    EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    et_gate_open(&gate);
    OK(cuStreamSynchronize(s));                         /* the parent is unaffected */
    OK(cuStreamDestroy(s));
}

/* A primary context's reset destroys the streams and events created in it
 * ("destroys all allocations and resets all state"): their handles are
 * invalid after, and queued work still ran.  Last: the context's state is
 * gone after. */
static void test_reset_destroys_streams(void)
{
    CUstream s;
    CUevent e, fresh;
    int ran = 0;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    REQUIRE(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    OK(cuLaunchHostFunc(s, sleep_20ms, &ran));
    OK(cuEventRecord(e, s));
    OK(cuDevicePrimaryCtxReset(0));
    EXPECT(flag(&ran));
    EXPECT_RC(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuEventSynchronize(e), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuEventDestroy(e), CUDA_ERROR_INVALID_HANDLE);
    CUcontext again;
    CUdevice dev;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&again, dev));
    OK(cuCtxSetCurrent(again));
    OK(cuStreamQuery(CU_STREAM_LEGACY)); /* the device works after */
    OK(cuEventCreate(&fresh, 0));         /* events too */
    OK(cuEventRecord(fresh, CU_STREAM_LEGACY));
    OK(cuEventSynchronize(fresh));
    OK(cuEventDestroy(fresh));
}

int main(void)
{
    ctx = et_setup(0);
    test_asynchrony();
    test_fifo_under_jitter();
    test_legacy_semantics();
    test_per_thread_stream();
    test_callbacks_and_destroy();
    test_ctx_synchronize();
    test_getters_and_errors();
    test_fork_child();
    test_reset_destroys_streams();
    return et_finish("test_drv_exec_stream");
}
