/* test_drv_exec_event: events of the emulated driver: query/synchronize
 * follow the recorded position in the stream; elapsed time measures the time
 * between the records running; timing-disabled and unrecorded events give
 * the documented errors; cuStreamWaitEvent orders work across streams. */
#include "driver/exec_testutil.h"

static void set_flag(void *p) { __atomic_store_n((int *)p, 1, __ATOMIC_RELEASE); }
static int flag(int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void sleep_30ms(void *p) { (void)p; et_sleep_ms(30); }

static void test_query_and_sync(void)
{
    CUstream s;
    CUevent e;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    REQUIRE(cuEventCreate(&e, CU_EVENT_DEFAULT));
    OK(cuEventQuery(e));                                  /* never recorded: complete */
    OK(cuEventSynchronize(e));
    struct et_gate gate = {0};
    OK(cuLaunchHostFunc(s, et_gate_wait, &gate));
    OK(cuEventRecord(e, s));
    EXPECT_RC(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    et_gate_open(&gate);
    OK(cuEventSynchronize(e));
    OK(cuEventQuery(e));
    OK(cuEventDestroy(e));
    EXPECT_RC(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    OK(cuStreamDestroy(s));
}

static void test_elapsed(void)
{
    CUstream s;
    CUevent a, b, notime;
    REQUIRE(cuStreamCreate(&s, 0));
    REQUIRE(cuEventCreate(&a, 0));
    REQUIRE(cuEventCreate(&b, CU_EVENT_BLOCKING_SYNC));
    REQUIRE(cuEventCreate(&notime, CU_EVENT_DISABLE_TIMING));
    float ms = -1;
    EXPECT_RC(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE);   /* not recorded */
    struct et_gate gate = {0};
    OK(cuLaunchHostFunc(s, et_gate_wait, &gate));
    OK(cuEventRecord(a, s));
    OK(cuLaunchHostFunc(s, sleep_30ms, NULL));
    OK(cuEventRecord(b, s));
    OK(cuEventRecord(notime, s));
    EXPECT_RC(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_NOT_READY);
    et_gate_open(&gate);
    OK(cuEventSynchronize(b));
    OK(cuEventElapsedTime(&ms, a, b));
    EXPECT(ms >= 29.0f && ms < 1000.0f);                   /* the 30 ms between the records */
    OK(cuEventSynchronize(notime));
    EXPECT_RC(cuEventElapsedTime(&ms, a, notime), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuEventElapsedTime(NULL, a, b), CUDA_ERROR_INVALID_VALUE);
    OK(cuEventElapsedTime_v2(&ms, b, a));
    EXPECT(ms <= -29.0f);
    OK(cuEventDestroy(a));
    OK(cuEventDestroy(b));
    OK(cuEventDestroy(notime));
    OK(cuStreamDestroy(s));
}

static void test_wait_event(void)
{
    CUstream producer, consumer;
    CUevent e;
    REQUIRE(cuStreamCreate(&producer, CU_STREAM_NON_BLOCKING));
    REQUIRE(cuStreamCreate(&consumer, CU_STREAM_NON_BLOCKING));
    REQUIRE(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    struct et_gate gate = {0};
    int produced = 0, consumed = 0, before = 0;
    OK(cuLaunchHostFunc(producer, et_gate_wait, &gate));
    OK(cuLaunchHostFunc(producer, set_flag, &produced));
    OK(cuEventRecord(e, producer));
    OK(cuLaunchHostFunc(consumer, set_flag, &before));     /* before the wait: free to run */
    OK(cuStreamWaitEvent(consumer, e, 0));
    OK(cuLaunchHostFunc(consumer, set_flag, &consumed));
    /* A later record of e does not affect the earlier wait. */
    OK(cuEventRecord(e, consumer));
    double t0 = et_now_ms();
    while (!flag(&before) && et_now_ms() - t0 < 2000) et_sleep_ms(1);
    EXPECT(flag(&before));
    et_sleep_ms(20);
    EXPECT(!flag(&consumed));
    et_gate_open(&gate);
    OK(cuStreamSynchronize(consumer));
    EXPECT(flag(&produced) && flag(&consumed));
    EXPECT_RC(cuStreamWaitEvent(consumer, e, 7), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuStreamWaitEvent(consumer, NULL, 0), CUDA_ERROR_INVALID_HANDLE);
    /* Waiting on a never-recorded event is a no-op. */
    CUevent fresh;
    REQUIRE(cuEventCreate(&fresh, 0));
    OK(cuStreamWaitEvent(consumer, fresh, 0));
    OK(cuStreamSynchronize(consumer));
    OK(cuEventDestroy(fresh));
    OK(cuEventDestroy(e));
    OK(cuStreamDestroy(producer));
    OK(cuStreamDestroy(consumer));
}

static void test_create_errors(void)
{
    CUevent e;
    EXPECT_RC(cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuEventCreate(&e, 0x40), CUDA_ERROR_INVALID_VALUE);
    /* Interprocess events must disable timing. */
    EXPECT_RC(cuEventCreate(&e, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
    OK(cuEventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    EXPECT_RC(cuEventRecordWithFlags(e, NULL, 8), CUDA_ERROR_INVALID_VALUE);
    OK(cuEventRecordWithFlags(e, NULL, CU_EVENT_RECORD_DEFAULT));
    OK(cuEventSynchronize(e));
    OK(cuEventDestroy(e));
    EXPECT_RC(cuEventDestroy(e), CUDA_ERROR_INVALID_HANDLE);
}

int main(void)
{
    et_setup(0);
    test_query_and_sync();
    test_elapsed();
    test_wait_event();
    test_create_errors();
    return et_finish("test_drv_exec_event");
}
