/* exec_testutil.h: helpers shared by the emulated driver's core and
 * execution tests (tests/emu/tests/test_drv_core_*.c, test_drv_exec_*.c). */
#ifndef EMU_EXEC_TESTUTIL_H
#define EMU_EXEC_TESTUTIL_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "emu.h"

/* Per-thread-default-stream variants (cuda.h declares them only when built
 * with CUDA_API_PER_THREAD_DEFAULT_STREAM). */
CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData);
CUresult cuStreamSynchronize_ptsz(CUstream hStream);
CUresult cuStreamQuery_ptsz(CUstream hStream);
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount);
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shmem, CUstream h, void **params, void **extra);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);

static int et_failures;

/* One rule per check: the call must return exactly `want`. */
#define EXPECT_RC(call, want) do { CUresult rc_ = (call); \
        if (rc_ != (want)) { fprintf(stderr, "%s:%d: %s returned %d, expected %s (%d)\n", \
                                     __FILE__, __LINE__, #call, (int)rc_, #want, (int)(want)); \
                             et_failures++; } } while (0)
#define OK(call) EXPECT_RC(call, CUDA_SUCCESS)
#define EXPECT(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
                                         et_failures++; } } while (0)
/* Preconditions without which the rest of the test is meaningless. */
#define REQUIRE(call) do { CUresult rc_ = (call); if (rc_ != CUDA_SUCCESS) { \
        fprintf(stderr, "%s:%d: %s failed with %d\n", __FILE__, __LINE__, #call, (int)rc_); exit(1); } } while (0)

static inline CUcontext et_setup(int ordinal)
{
    CUdevice dev;
    CUcontext ctx;
    REQUIRE(cuInit(0));
    REQUIRE(cuDeviceGet(&dev, ordinal));
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, dev));
    REQUIRE(cuCtxSetCurrent(ctx));
    return ctx;
}

static inline int et_finish(const char *name)
{
    if (et_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, et_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

static inline double et_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline void et_sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (time_t)(ms / 1000) * 1000) * 1e6)};
    nanosleep(&ts, NULL);
}

/* A host function that blocks its stream until the test opens the gate:
 * proves that later work on the stream has not run at call time. */
struct et_gate { volatile int open; };
static inline void et_gate_wait(void *p)
{
    struct et_gate *g = p;
    while (!__atomic_load_n(&g->open, __ATOMIC_ACQUIRE)) et_sleep_ms(0.2);
}
static inline void et_gate_open(struct et_gate *g) { __atomic_store_n(&g->open, 1, __ATOMIC_RELEASE); }

#endif
