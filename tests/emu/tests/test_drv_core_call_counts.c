/* test_drv_core_call_counts: the calls.<entry point> counters stay exact
 * although each thread counts its calls apart (core.c's call shards):
 * concurrent threads, threads that exit and threads that take over their
 * shards, resets with calls counted on other threads, emuAddCounter on a
 * calls counter, and a fork child (which sees the parent's counts at the
 * fork and counts its own calls without changing the parent's). */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver/exec_testutil.h"

#define THREADS 8
#define CALLS 20000

static CUcontext ctx;

static void *make_calls(void *arg)
{
    long n = (long)arg;
    CUdevice d;
    if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return (void *)1;
    for (long i = 0; i < n; i++)
        if (cuCtxGetDevice(&d) != CUDA_SUCCESS)
            return (void *)1;
    return NULL;
}

/* THREADS threads making `calls` cuCtxGetDevice calls each, all joined. */
static void run_threads(long calls)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, make_calls, (void *)calls) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(1);
        }
    for (int i = 0; i < THREADS; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        EXPECT(r == NULL);
    }
}

static uint64_t calls_now(void) { return emuGetCounter("calls.cuCtxGetDevice"); }

int main(void)
{
    ctx = et_setup(0);
    CUdevice d;
    uint64_t c0 = calls_now();
    OK(cuCtxGetDevice(&d));
    EXPECT(calls_now() == c0 + 1);

    /* concurrent threads: every call of every thread, none twice */
    run_threads(CALLS);
    EXPECT(calls_now() == c0 + 1 + (uint64_t)THREADS * CALLS);

    /* new threads take over the exited threads' shards and keep counting */
    run_threads(CALLS / 4);
    uint64_t c1 = c0 + 1 + (uint64_t)THREADS * CALLS + (uint64_t)THREADS * (CALLS / 4);
    EXPECT(calls_now() == c1);

    /* a reset counts from zero, whichever threads made the earlier calls */
    emuResetCounters();
    EXPECT(calls_now() == 0);
    OK(cuCtxGetDevice(&d));
    run_threads(100);
    EXPECT(calls_now() == 1 + (uint64_t)THREADS * 100);
    emuAddCounter("calls.cuCtxGetDevice", 5);
    EXPECT(calls_now() == 6 + (uint64_t)THREADS * 100);

    /* a fork child inherits the counts and counts its own calls alone */
    uint64_t at_fork = calls_now();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        int bad = calls_now() != at_fork;
        /* the child has no usable CUDA state, but its calls still count */
        for (int i = 0; i < 10; i++)
            bad |= cuCtxGetDevice(&d) != CUDA_ERROR_NOT_INITIALIZED;
        bad |= calls_now() != at_fork + 10;
        _exit(bad);
    }
    int status = 0;
    EXPECT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT(calls_now() == at_fork);
    OK(cuCtxGetDevice(&d));
    EXPECT(calls_now() == at_fork + 1);

    /* other entry points are counted apart */
    uint64_t g0 = emuGetCounter("calls.cuCtxGetCurrent");
    CUcontext cur;
    OK(cuCtxGetCurrent(&cur));
    EXPECT(emuGetCounter("calls.cuCtxGetCurrent") == g0 + 1);
    EXPECT(calls_now() == at_fork + 1);
    return et_finish("test_drv_core_call_counts");
}
