/* test_cupti_timeline.c: a program with known GPU work for
 * test_cupti_timeline.sh, run under the shim with TRAINSHIM_CUPTI=1.
 *
 * Kernels (each sleeps a known time on the emulator's worker, so each has a
 * known minimum duration): _Z6kAlphav x3 (8 ms), _Z5kBetav x2 (3 ms).
 * Copies: H2D from pageable memory (64 KiB, below the pinned copy engine's
 * threshold, so the driver sees it pageable), H2D from pinned memory
 * (1 MiB), D2H to pageable (32 KiB), D2D (128 KiB).  Two idle gaps: the
 * stream is synchronized, then the host sleeps GAP_MS (no GPU work).
 * Then it forks; the child exits at once (it must not crash nor write to
 * the parent's log).  With the argument "term" it raises SIGTERM right
 * after the first phase instead: the shim's signal flush must still get
 * that phase's kernels and copies into the log.  The last line of stdout states the facts the script
 * checks: "facts kernels=5 alpha=3 beta=2 h2d=... d2h=... d2d=...
 * h2d_pageable=... h2d_pinned=... gaps=2 gap_ms=...". */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"

#define GAP_MS 60

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ;
}

static void k_alpha(void **args, const emu_launch *l)
{
    (void)args;
    (void)l;
    sleep_ms(8);
}

static void k_beta(void **args, const emu_launch *l)
{
    (void)args;
    (void)l;
    sleep_ms(3);
}

#define CHECK(call)                                                                         \
    do {                                                                                    \
        CUresult r_ = (call);                                                               \
        if (r_ != CUDA_SUCCESS) {                                                           \
            fprintf(stderr, "%s:%d: %s failed with %d\n", __FILE__, __LINE__, #call, (int)r_); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static char alpha_stub, beta_stub;

int main(int argc, char **argv)
{
    int term = argc > 1 && !strcmp(argv[1], "term");
    CHECK(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    if (emuRegisterKernel(&alpha_stub, "_Z6kAlphav", k_alpha, 0, NULL) ||
        emuRegisterKernel(&beta_stub, "_Z5kBetav", k_beta, 0, NULL)) {
        fprintf(stderr, "emuRegisterKernel failed\n");
        return 1;
    }
    CUfunction fa, fb;
    CHECK((CUresult)emuGetFunction((void **)&fa, &alpha_stub, NULL));
    CHECK((CUresult)emuGetFunction((void **)&fb, &beta_stub, NULL));
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    enum { H2D_PAGEABLE = 64 << 10, H2D_PINNED = 1 << 20, D2H_PAGEABLE = 32 << 10, D2D = 128 << 10 };
    char *pageable = calloc(1, H2D_PINNED);
    void *pinned;
    CHECK(cuMemHostAlloc(&pinned, H2D_PINNED, 0));
    memset(pinned, 1, H2D_PINNED);
    CUdeviceptr d1, d2;
    CHECK(cuMemAlloc(&d1, H2D_PINNED));
    CHECK(cuMemAlloc(&d2, H2D_PINNED));

    /* phase 1: copies in, two alpha kernels */
    CHECK(cuMemcpyHtoDAsync(d1, pageable, H2D_PAGEABLE, s));
    CHECK(cuMemcpyHtoDAsync(d2, pinned, H2D_PINNED, s));
    CHECK(cuLaunchKernel(fa, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    CHECK(cuLaunchKernel(fa, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    CHECK(cuStreamSynchronize(s));
    if (term)
        raise(SIGTERM); /* dies of it (the shim re-raises after flushing) */
    sleep_ms(GAP_MS); /* idle gap 1 */

    /* phase 2: a beta kernel, a device copy */
    CHECK(cuLaunchKernel(fb, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    CHECK(cuMemcpyDtoDAsync(d2, d1, D2D, s));
    CHECK(cuStreamSynchronize(s));
    sleep_ms(GAP_MS); /* idle gap 2 */

    /* phase 3: alpha, beta, a copy out */
    CHECK(cuLaunchKernel(fa, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    CHECK(cuLaunchKernel(fb, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    CHECK(cuMemcpyDtoHAsync(pageable, d1, D2H_PAGEABLE, s)); /* pageable: the call returns after the copy */
    CHECK(cuStreamSynchronize(s));

    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        exit(0); /* atexit handlers run in the child: they must do nothing */
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "fork child failed (status %d)\n", status);
        return 1;
    }

    CHECK(cuMemFree(d1));
    CHECK(cuMemFree(d2));
    CHECK(cuMemFreeHost(pinned));
    CHECK(cuStreamDestroy(s));
    free(pageable);
    printf("facts kernels=5 alpha=3 beta=2 alpha_ms=8 beta_ms=3 h2d=%d d2h=%d d2d=%d h2d_pageable=%d h2d_pinned=%d "
           "d2h_pageable=%d gaps=2 gap_ms=%d\n",
           H2D_PAGEABLE + H2D_PINNED, D2H_PAGEABLE, D2D, H2D_PAGEABLE, H2D_PINNED, D2H_PAGEABLE, GAP_MS);
    return 0;
}
