/* Emulated runtime streams, events, host functions and callbacks: creation
 * flags and priorities, FIFO order, cross-stream event waits, timing,
 * legacy-stream synchronization with blocking streams only, the
 * cudaStreamPerThread handle in several threads. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED); } } while (0)
#define CHECK_RT(call, want) do { cudaError_t e_ = (call); if (e_ != (want)) { \
        fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #call, (int)e_, \
                cudaGetErrorName(e_), (int)(want)); __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED); } } while (0)

struct gate { int open; int timed_out; };
static void CUDART_CB hold_until_open(void *arg)
{
    struct gate *g = arg;
    for (int i = 0; i < 3000 && !__atomic_load_n(&g->open, __ATOMIC_ACQUIRE); i++)
        usleep(1000);
    if (!__atomic_load_n(&g->open, __ATOMIC_ACQUIRE))
        g->timed_out = 1;
}
static void gate_open(struct gate *g) { __atomic_store_n(&g->open, 1, __ATOMIC_RELEASE); }

static void CUDART_CB set_flag(void *arg) { __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE); }
static void CUDART_CB sleep_20ms(void *arg) { (void)arg; usleep(20000); }

/* Waits up to 2 s for *flag. */
static int wait_flag(int *flag)
{
    for (int i = 0; i < 2000; i++) {
        if (__atomic_load_n(flag, __ATOMIC_ACQUIRE))
            return 1;
        usleep(1000);
    }
    return 0;
}

static int order[200], norder;
static void CUDART_CB append(void *arg)
{
    order[norder++] = (int)(intptr_t)arg;
}

static void test_create_and_query(void)
{
    int least = 0, greatest = 0;
    CHECK_RT(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
    cudaStream_t s;
    CHECK_RT(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest), cudaSuccess);
    int prio = 1;
    unsigned flags = 0;
    int dev = -1;
    CHECK_RT(cudaStreamGetPriority(s, &prio), cudaSuccess);
    CHECK(prio == greatest);
    CHECK_RT(cudaStreamGetFlags(s, &flags), cudaSuccess);
    CHECK(flags == cudaStreamNonBlocking);
    CHECK_RT(cudaStreamGetDevice(s, &dev), cudaSuccess);
    CHECK(dev == 0);
    CHECK_RT(cudaStreamQuery(s), cudaSuccess);
    CHECK_RT(cudaStreamDestroy(s), cudaSuccess);

    cudaStream_t b;
    CHECK_RT(cudaStreamCreate(&b), cudaSuccess);
    CHECK_RT(cudaStreamGetFlags(b, &flags), cudaSuccess);
    CHECK(flags == cudaStreamDefault);
    CHECK_RT(cudaStreamDestroy(b), cudaSuccess);
    CHECK_RT(cudaStreamCreateWithFlags(&b, 0x40), cudaErrorInvalidValue);
    CHECK_RT(cudaStreamCreate(NULL), cudaErrorInvalidValue);
    (void)cudaGetLastError();
}

static void test_fifo_and_callbacks(void)
{
    cudaStream_t s;
    CHECK_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    norder = 0;
    for (int i = 0; i < 100; i++)
        CHECK_RT(cudaLaunchHostFunc(s, append, (void *)(intptr_t)i), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    int ok = norder == 100;
    for (int i = 0; ok && i < 100; i++)
        ok = order[i] == i;
    CHECK(ok);
    CHECK_RT(cudaLaunchHostFunc(s, NULL, NULL), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    CHECK_RT(cudaStreamDestroy(s), cudaSuccess);
}

static cudaStream_t cb_stream;
static cudaError_t cb_status = (cudaError_t)-1;
static void *cb_data;
static void CUDART_CB stream_callback(cudaStream_t st, cudaError_t status, void *ud)
{
    cb_stream = st;
    cb_status = status;
    cb_data = ud;
}

static void test_add_callback(void)
{
    cudaStream_t s;
    CHECK_RT(cudaStreamCreate(&s), cudaSuccess);
    int token = 0;
    CHECK_RT(cudaStreamAddCallback(s, stream_callback, &token, 0), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(cb_status == cudaSuccess);
    CHECK(cb_data == &token);
    CHECK(cb_stream == s);
    CHECK_RT(cudaStreamAddCallback(s, stream_callback, &token, 1), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    CHECK_RT(cudaStreamDestroy(s), cudaSuccess);
}

static void test_events(void)
{
    cudaStream_t s1, s2;
    CHECK_RT(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    CHECK_RT(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
    cudaEvent_t a, b, nt;
    CHECK_RT(cudaEventCreate(&a), cudaSuccess);
    CHECK_RT(cudaEventCreateWithFlags(&b, cudaEventBlockingSync), cudaSuccess);
    CHECK_RT(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming), cudaSuccess);
    CHECK_RT(cudaEventCreateWithFlags(&nt, cudaEventInterprocess), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    /* timing */
    CHECK_RT(cudaEventRecord(a, s1), cudaSuccess);
    CHECK_RT(cudaLaunchHostFunc(s1, sleep_20ms, NULL), cudaSuccess);
    CHECK_RT(cudaEventRecord(b, s1), cudaSuccess);
    CHECK_RT(cudaEventSynchronize(b), cudaSuccess);
    CHECK_RT(cudaEventQuery(b), cudaSuccess);
    float ms = -1;
    CHECK_RT(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
    CHECK(ms >= 15.0f && ms < 2000.0f);
    CHECK_RT(cudaEventRecordWithFlags(nt, s1, cudaEventRecordDefault), cudaSuccess);
    CHECK_RT(cudaEventSynchronize(nt), cudaSuccess);
    CHECK_RT(cudaEventElapsedTime(&ms, a, nt), cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();

    /* query while pending; cross-stream wait */
    struct gate g = {0, 0};
    int first = 0, second_saw_first = -1;
    CHECK_RT(cudaLaunchHostFunc(s1, hold_until_open, &g), cudaSuccess);
    CHECK_RT(cudaLaunchHostFunc(s1, set_flag, &first), cudaSuccess);
    CHECK_RT(cudaEventRecord(a, s1), cudaSuccess);
    CHECK_RT(cudaEventQuery(a), cudaErrorNotReady);
    CHECK_RT(cudaGetLastError(), cudaSuccess);   /* not ready is not an error */
    CHECK_RT(cudaStreamWaitEvent(s2, a, 0), cudaSuccess);
    int done2 = 0;
    CHECK_RT(cudaLaunchHostFunc(s2, set_flag, &done2), cudaSuccess);
    usleep(20000);
    CHECK(!__atomic_load_n(&done2, __ATOMIC_ACQUIRE));   /* s2 waits for s1's event */
    CHECK_RT(cudaStreamQuery(s2), cudaErrorNotReady);
    gate_open(&g);
    CHECK_RT(cudaStreamSynchronize(s2), cudaSuccess);
    second_saw_first = __atomic_load_n(&first, __ATOMIC_ACQUIRE);
    CHECK(second_saw_first == 1 && done2 == 1);
    CHECK(!g.timed_out);

    CHECK_RT(cudaEventDestroy(a), cudaSuccess);
    CHECK_RT(cudaEventDestroy(b), cudaSuccess);
    CHECK_RT(cudaEventDestroy(nt), cudaSuccess);
    CHECK_RT(cudaStreamDestroy(s1), cudaSuccess);
    CHECK_RT(cudaStreamDestroy(s2), cudaSuccess);
}

static void test_legacy_stream(void)
{
    cudaStream_t blocking, nonblocking;
    CHECK_RT(cudaStreamCreate(&blocking), cudaSuccess);
    CHECK_RT(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking), cudaSuccess);

    /* Work on the legacy stream waits for a held blocking stream. */
    struct gate g = {0, 0};
    int legacy_ran = 0;
    CHECK_RT(cudaLaunchHostFunc(blocking, hold_until_open, &g), cudaSuccess);
    CHECK_RT(cudaLaunchHostFunc(0, set_flag, &legacy_ran), cudaSuccess);
    usleep(20000);
    CHECK(!__atomic_load_n(&legacy_ran, __ATOMIC_ACQUIRE));
    gate_open(&g);
    CHECK_RT(cudaStreamSynchronize(0), cudaSuccess);
    CHECK(legacy_ran == 1);

    /* A non-blocking stream runs while the legacy stream is held. */
    struct gate g2 = {0, 0};
    int nb_ran = 0;
    CHECK_RT(cudaLaunchHostFunc(cudaStreamLegacy, hold_until_open, &g2), cudaSuccess);
    CHECK_RT(cudaLaunchHostFunc(nonblocking, set_flag, &nb_ran), cudaSuccess);
    CHECK(wait_flag(&nb_ran));
    gate_open(&g2);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(!g.timed_out && !g2.timed_out);

    CHECK_RT(cudaStreamDestroy(blocking), cudaSuccess);
    CHECK_RT(cudaStreamDestroy(nonblocking), cudaSuccess);
}

/* Two threads, each holding its own per-thread default stream: neither
 * waits for the other. */
struct pt_arg { struct gate *mine; int ran; };
static void *per_thread_worker(void *p)
{
    struct pt_arg *a = p;
    CHECK_RT(cudaLaunchHostFunc(cudaStreamPerThread, hold_until_open, a->mine), cudaSuccess);
    CHECK_RT(cudaLaunchHostFunc(cudaStreamPerThread, set_flag, &a->ran), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
    return NULL;
}

static void test_per_thread_handle(void)
{
    struct gate ga = {0, 0}, gb = {0, 0};
    struct pt_arg a = {&ga, 0}, b = {&gb, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, per_thread_worker, &a);
    pthread_create(&tb, NULL, per_thread_worker, &b);
    usleep(20000);
    gate_open(&gb);                 /* b finishes although a is still held */
    CHECK(wait_flag(&b.ran));
    CHECK(!__atomic_load_n(&a.ran, __ATOMIC_ACQUIRE));
    gate_open(&ga);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.ran == 1 && b.ran == 1);
    int dev = -1;
    CHECK_RT(cudaStreamGetDevice(cudaStreamPerThread, &dev), cudaSuccess);
    CHECK(dev == 0);
}

int main(void)
{
    test_create_and_query();
    test_fifo_and_callbacks();
    test_add_callback();
    test_events();
    test_legacy_stream();
    test_per_thread_handle();
    if (failures) {
        fprintf(stderr, "test_rt_stream: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_rt_stream: ok\n");
    return 0;
}
