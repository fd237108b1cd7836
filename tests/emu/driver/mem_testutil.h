/* mem_testutil.h: helpers shared by the emulated driver's memory tests
 * (tests/emu/tests/test_drv_mem_*.c). */
#ifndef EMU_MEM_TESTUTIL_H
#define EMU_MEM_TESTUTIL_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include "emu.h"

static int mt_failures;

/* One rule per check: the call must return exactly `want`. */
#define EXPECT_RC(call, want) do { CUresult rc_ = (call); \
        if (rc_ != (want)) { fprintf(stderr, "%s:%d: %s returned %d, expected %s (%d)\n", \
                                     __FILE__, __LINE__, #call, (int)rc_, #want, (int)(want)); \
                             mt_failures++; } } while (0)
#define OK(call) EXPECT_RC(call, CUDA_SUCCESS)
#define EXPECT(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
                                         mt_failures++; } } while (0)
/* For preconditions without which the rest of the test is meaningless. */
#define REQUIRE(call) do { CUresult rc_ = (call); if (rc_ != CUDA_SUCCESS) { \
        fprintf(stderr, "%s:%d: %s failed with %d\n", __FILE__, __LINE__, #call, (int)rc_); exit(1); } } while (0)

static inline CUcontext mt_setup(int ordinal)
{
    CUdevice dev;
    CUcontext ctx;
    REQUIRE(cuInit(0));
    REQUIRE(cuDeviceGet(&dev, ordinal));
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, dev));
    REQUIRE(cuCtxSetCurrent(ctx));
    return ctx;
}

static inline int mt_finish(const char *name)
{
    if (mt_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, mt_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}
#endif
