/* test_drv_exec_thread_exit.c: a stream worker's alternate signal stack (for
 * the fault guard) is its own page-aligned mapping, and it is disabled and
 * unmapped when the worker exits (a malloc'd one made ASan's thread teardown
 * fail with "unable to unmap").  Many workers start and exit in a row. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include "driver/exec_testutil.h"

struct seen { stack_t ss; int rc; };

static void record_altstack(void *p)
{
    struct seen *s = p;
    s->rc = sigaltstack(NULL, &s->ss);
}

static int page_mapped(uintptr_t addr)
{
    long pg = sysconf(_SC_PAGESIZE);
    void *page = (void *)(addr & ~(uintptr_t)(pg - 1));
    return !(msync(page, (size_t)pg, MS_ASYNC) != 0 && errno == ENOMEM);
}

int main(void)
{
    et_setup(0);
    long pg = sysconf(_SC_PAGESIZE);
    for (int round = 0; round < 40; round++) {
        CUstream s;
        REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        struct seen seen = { .rc = -1 };
        OK(cuLaunchHostFunc(s, record_altstack, &seen));
        OK(cuStreamSynchronize(s));
        OK(cuStreamDestroy(s));
        EXPECT(seen.rc == 0);
        EXPECT(!(seen.ss.ss_flags & SS_DISABLE));   /* the worker has an alternate stack */
        EXPECT(seen.ss.ss_size >= 16384);
        uintptr_t sp = (uintptr_t)seen.ss.ss_sp;
        EXPECT(sp % (uintptr_t)pg == 0);             /* a mapping of its own, not heap memory */
        /* The worker exits after the destroy: its stack goes with it. */
        int unmapped = 0;
        for (int i = 0; i < 2000 && !unmapped; i++) {
            if (!page_mapped(sp) && !page_mapped(sp + seen.ss.ss_size - 1)) unmapped = 1;
            else usleep(1000);
        }
        EXPECT(unmapped);
        if (et_failures) break;
    }
    /* Faults are still caught on a fresh worker after all that. */
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    struct seen seen = { .rc = -1 };
    OK(cuLaunchHostFunc(s, record_altstack, &seen));
    OK(cuStreamSynchronize(s));
    EXPECT(seen.rc == 0);
    OK(cuStreamDestroy(s));
    if (et_failures) { fprintf(stderr, "test_drv_exec_thread_exit: %d check(s) failed\n", et_failures); return 1; }
    printf("test_drv_exec_thread_exit: ok\n");
    return 0;
}
