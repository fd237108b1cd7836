/* test_drv_link_windows.c: the emulated link's windows with EMU_PINNED_GBPS
 * set (1 GB/s: a 1 MiB copy holds the link 1048576 ns).  A DMA engine starts
 * a queued copy as the one before it leaves the link, so copies enqueued
 * together on one stream get back-to-back windows: each starts exactly where
 * the one before ended, whatever the worker thread's wake-up costs.  A copy
 * enqueued after the link went idle starts when it runs (the link waited for
 * the program), and one queued behind a host function that takes 3 ms starts
 * after that function (its time is not link time), while an event recorded
 * between two copies (as the shim's copy engine records one after each
 * piece) takes no time: they stay back to back.  Windows are read from
 * the activity records the emulated CUPTI gets (start_ns). */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "driver/emu_activity.h"

static int failures;
#define EXPECT(c) do { if (!(c)) { fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)
#define REQUIRE(x) do { int rc_ = (int)(x); if (rc_) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, rc_); exit(1); } } while (0)

enum { MIB = 1 << 20, WINDOW_NS = MIB, MAX_RECS = 32 };

static uint64_t starts[MAX_RECS];
static int nrecs;

static void on_activity(const struct emu_activity *rec)
{
    if (rec->kind == EMU_ACTIVITY_MEMCPY && nrecs < MAX_RECS)
        starts[__atomic_fetch_add(&nrecs, 1, __ATOMIC_RELAXED)] = rec->start_ns;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { 0, ms * 1000000L };
    nanosleep(&ts, NULL);
}

static void CUDA_CB host_3ms(void *arg)
{
    (void)arg;
    sleep_ms(3);
}

int main(void)
{
    setenv("EMU_PINNED_GBPS", "1", 1);
    setenv("EMU_JITTER_US", "0", 1);
    REQUIRE(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    REQUIRE(cuDeviceGet(&dev, 0));
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, dev));
    REQUIRE(cuCtxSetCurrent(ctx));
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    void *host;
    CUdeviceptr d;
    REQUIRE(cuMemAllocHost(&host, 8 * MIB));
    REQUIRE(cuMemAlloc(&d, 8 * MIB));
    emuSetActivityHook(on_activity);

    /* four copies queued together: contiguous windows */
    for (int i = 0; i < 4; i++)
        REQUIRE(cuMemcpyHtoDAsync(d + (CUdeviceptr)i * MIB, (char *)host + i * MIB, MIB, s));
    REQUIRE(cuStreamSynchronize(s));
    EXPECT(nrecs == 4);
    for (int i = 1; i < 4 && i < nrecs; i++)
        EXPECT(starts[i] == starts[i - 1] + WINDOW_NS);

    /* the link idle for 5 ms, then one more: it starts when it runs */
    sleep_ms(5);
    REQUIRE(cuMemcpyHtoDAsync(d, host, MIB, s));
    REQUIRE(cuStreamSynchronize(s));
    EXPECT(nrecs == 5);
    if (nrecs == 5)
        EXPECT(starts[4] >= starts[3] + WINDOW_NS + 4000000);

    /* a timed op between two queued copies: the second starts after it */
    REQUIRE(cuMemcpyHtoDAsync(d, host, MIB, s));
    REQUIRE(cuLaunchHostFunc(s, host_3ms, NULL));
    REQUIRE(cuMemcpyHtoDAsync(d + MIB, (char *)host + MIB, MIB, s));
    REQUIRE(cuStreamSynchronize(s));
    EXPECT(nrecs == 7);
    if (nrecs == 7)
        EXPECT(starts[6] >= starts[5] + WINDOW_NS + 3000000);

    /* an event recorded between two queued copies: still back to back */
    CUevent ev;
    REQUIRE(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    REQUIRE(cuMemcpyHtoDAsync(d, host, MIB, s));
    REQUIRE(cuEventRecord(ev, s));
    REQUIRE(cuMemcpyHtoDAsync(d + MIB, (char *)host + MIB, MIB, s));
    REQUIRE(cuStreamSynchronize(s));
    EXPECT(nrecs == 9);
    if (nrecs == 9)
        EXPECT(starts[8] == starts[7] + WINDOW_NS);
    REQUIRE(cuEventDestroy(ev));

    emuSetActivityHook(NULL);
    REQUIRE(cuMemFree(d));
    REQUIRE(cuMemFreeHost(host));
    REQUIRE(cuStreamDestroy(s));
    if (failures)
        return 1;
    printf("ok: back-to-back link windows for queued copies (an event between them too), none across idle "
           "time or a host function\n");
    return 0;
}
