/* test_drv_exec_copy: copies and memsets of the emulated driver: a pageable
 * source is snapshotted at the call; a pinned async source is read when the
 * copy runs; a copy into pageable memory is complete on return; bytes and
 * copies are counted by kind when the copy executes; memsets run in stream
 * order (also on pinned host memory, synchronously for the non-Async forms);
 * invalid ranges and arguments give the documented errors. */
#include "driver/exec_testutil.h"

#define N 4096

static CUcontext ctx0, ctx1;

static void sleep_30ms(void *p) { (void)p; et_sleep_ms(30); }
static int all_bytes(const void *p, int v, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) if (b[i] != (unsigned char)v) return 0;
    return 1;
}
#define DEV(d) ((void *)(uintptr_t)(d))

static void test_pageable_snapshot(CUdeviceptr d, CUstream s)
{
    char *src = malloc(N);
    memset(src, 'A', N);
    struct et_gate gate = {0};
    uint64_t bytes0 = emuGetCounter("bytes.h2d.pageable"), copies0 = emuGetCounter("copies.h2d.pageable");
    OK(cuLaunchHostFunc(s, et_gate_wait, &gate));
    OK(cuMemcpyHtoDAsync(d, src, N, s));
    memset(src, 'B', N);                                  /* reuse right after the call */
    EXPECT(emuGetCounter("bytes.h2d.pageable") == bytes0);  /* counted when it runs */
    et_gate_open(&gate);
    OK(cuStreamSynchronize(s));
    EXPECT(all_bytes(DEV(d), 'A', N));                    /* the device saw the old data */
    EXPECT(emuGetCounter("bytes.h2d.pageable") == bytes0 + N);
    EXPECT(emuGetCounter("copies.h2d.pageable") == copies0 + 1);
    /* The synchronous form behaves the same. */
    memset(src, 'C', N);
    OK(cuMemcpyHtoD(d, src, N));
    memset(src, 'D', N);
    OK(cuCtxSynchronize());
    EXPECT(all_bytes(DEV(d), 'C', N));
    free(src);
}

static void test_pinned_async(CUdeviceptr d, CUstream s)
{
    char *pinned;
    REQUIRE(cuMemHostAlloc((void **)&pinned, N, 0));
    memset(pinned, 'A', N);
    struct et_gate gate = {0};
    uint64_t bytes0 = emuGetCounter("bytes.h2d.pinned");
    OK(cuLaunchHostFunc(s, et_gate_wait, &gate));
    OK(cuMemcpyHtoDAsync(d, pinned, N, s));
    memset(pinned, 'B', N);
    et_gate_open(&gate);
    OK(cuStreamSynchronize(s));
    EXPECT(all_bytes(DEV(d), 'B', N));                    /* read when the copy ran */
    EXPECT(emuGetCounter("bytes.h2d.pinned") == bytes0 + N);

    /* Device -> pinned async: returns before the copy runs. */
    struct et_gate gate2 = {0};
    memset(pinned, 'z', N);
    OK(cuMemsetD8Async(d, 'Q', N, s));
    OK(cuLaunchHostFunc(s, et_gate_wait, &gate2));
    uint64_t d2h0 = emuGetCounter("bytes.d2h.pinned");
    OK(cuMemcpyDtoHAsync(pinned, d, N, s));
    EXPECT(all_bytes(pinned, 'z', N));
    et_gate_open(&gate2);
    OK(cuStreamSynchronize(s));
    EXPECT(all_bytes(pinned, 'Q', N));
    EXPECT(emuGetCounter("bytes.d2h.pinned") == d2h0 + N);
    OK(cuMemFreeHost(pinned));
}

static void test_d2h_pageable_complete(CUdeviceptr d, CUstream s)
{
    char *dst = malloc(N);
    memset(dst, 0, N);
    uint64_t bytes0 = emuGetCounter("bytes.d2h.pageable");
    OK(cuLaunchHostFunc(s, sleep_30ms, NULL));
    OK(cuMemsetD8Async(d, 'M', N, s));
    double t0 = et_now_ms();
    OK(cuMemcpyDtoHAsync(dst, d, N, s));
    EXPECT(et_now_ms() - t0 >= 20);                       /* waited for the stream */
    EXPECT(all_bytes(dst, 'M', N));                        /* complete on return */
    EXPECT(emuGetCounter("bytes.d2h.pageable") == bytes0 + N);
    /* The sync form runs on the legacy stream, which does not order with our
     * non-blocking stream: sync it first (reading d before would race with
     * the memset, as on a GPU). */
    OK(cuMemsetD8Async(d, 'S', N, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH(dst, d, N));
    EXPECT(all_bytes(dst, 'S', N));
    free(dst);
}

static void test_kinds_and_memset(CUdeviceptr d, CUdeviceptr d2)
{
    uint64_t dd0 = emuGetCounter("bytes.d2d"), hh0 = emuGetCounter("bytes.h2h"), ddc0 = emuGetCounter("copies.d2d");
    OK(cuMemsetD32(d, 0x01020304u, N / 4));
    OK(cuMemcpyDtoD(d2, d, N));
    OK(cuCtxSynchronize());
    EXPECT(((uint32_t *)DEV(d2))[N / 4 - 1] == 0x01020304u);
    EXPECT(emuGetCounter("bytes.d2d") == dd0 + N && emuGetCounter("copies.d2d") == ddc0 + 1);
    OK(cuMemsetD16(d, 0xabcd, N / 2));
    OK(cuCtxSynchronize());
    EXPECT(((uint16_t *)DEV(d))[7] == 0xabcd);
    char a[64], b[64];
    memset(a, 'h', sizeof a);
    memset(b, 0, sizeof b);
    OK(cuMemcpy((CUdeviceptr)(uintptr_t)b, (CUdeviceptr)(uintptr_t)a, sizeof a));   /* host to host */
    EXPECT(all_bytes(b, 'h', sizeof b));
    EXPECT(emuGetCounter("bytes.h2h") == hh0 + sizeof a);
    /* Unified cuMemcpy picks the direction from the pointers. */
    uint64_t hd0 = emuGetCounter("bytes.h2d.pageable");
    OK(cuMemcpy(d, (CUdeviceptr)(uintptr_t)a, sizeof a));
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("bytes.h2d.pageable") == hd0 + sizeof a);
    /* Per-thread variant. */
    memset(a, 'p', sizeof a);
    OK(cuMemcpyHtoD_v2_ptds(d, a, sizeof a));
    OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    EXPECT(all_bytes(DEV(d), 'p', sizeof a));
    /* 2D memset with a pitch leaves the gaps alone. */
    OK(cuMemsetD8(d, 0, N));
    OK(cuMemsetD2D8(d, 64, 'x', 16, 4));
    OK(cuCtxSynchronize());
    EXPECT(all_bytes((char *)DEV(d) + 64, 'x', 16) && all_bytes((char *)DEV(d) + 80, 0, 48));
}

static void test_2d(CUdeviceptr d)
{
    char host[8][10], back[8][10];
    for (int r = 0; r < 8; r++) for (int c = 0; c < 10; c++) host[r][c] = (char)(r * 16 + c);
    memset(back, 0, sizeof back);
    CUDA_MEMCPY2D p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = CU_MEMORYTYPE_HOST; p.srcHost = host; p.srcPitch = 10;
    p.dstMemoryType = CU_MEMORYTYPE_DEVICE; p.dstDevice = d; p.dstPitch = 128;
    p.WidthInBytes = 10; p.Height = 8;
    OK(cuMemcpy2D(&p));
    memset(&p, 0, sizeof p);
    p.srcMemoryType = CU_MEMORYTYPE_DEVICE; p.srcDevice = d; p.srcPitch = 128;
    p.dstMemoryType = CU_MEMORYTYPE_HOST; p.dstHost = back; p.dstPitch = 10;
    p.WidthInBytes = 10; p.Height = 8;
    OK(cuMemcpy2DAsync(&p, NULL));
    OK(cuStreamSynchronize(NULL));
    EXPECT(memcmp(host, back, sizeof host) == 0);
    p.dstPitch = 5;                                       /* pitch smaller than the width */
    EXPECT_RC(cuMemcpy2D(&p), CUDA_ERROR_INVALID_VALUE);
}

static void test_3d(CUdeviceptr d)
{
    /* 3 slices of 4 rows of 5 bytes, into a device box with pitch 16 and
     * slice height 6, and back. */
    char host[3][4][5], back[3][4][5];
    for (int z = 0; z < 3; z++) for (int y = 0; y < 4; y++) for (int x = 0; x < 5; x++)
        host[z][y][x] = (char)(z * 64 + y * 8 + x);
    memset(back, 0, sizeof back);
    OK(cuMemsetD8(d, 0x7f, N));
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = CU_MEMORYTYPE_HOST; p.srcHost = host; p.srcPitch = 5; p.srcHeight = 4;
    p.dstMemoryType = CU_MEMORYTYPE_DEVICE; p.dstDevice = d; p.dstPitch = 16; p.dstHeight = 6;
    p.WidthInBytes = 5; p.Height = 4; p.Depth = 3;
    OK(cuMemcpy3D(&p));
    OK(cuCtxSynchronize());
    const char *dev = DEV(d);
    EXPECT(dev[2 * 96 + 3 * 16 + 4] == host[2][3][4]);     /* slice 2, row 3, byte 4 */
    EXPECT(dev[5] == 0x7f && dev[4 * 16] == 0x7f);          /* gaps untouched */
    memset(&p, 0, sizeof p);
    p.srcMemoryType = CU_MEMORYTYPE_DEVICE; p.srcDevice = d; p.srcPitch = 16; p.srcHeight = 6;
    p.dstMemoryType = CU_MEMORYTYPE_HOST; p.dstHost = back; p.dstPitch = 5; p.dstHeight = 4;
    p.WidthInBytes = 5; p.Height = 4; p.Depth = 3;
    OK(cuMemcpy3DAsync(&p, NULL));
    EXPECT(memcmp(host, back, sizeof host) == 0);           /* to pageable: done on return */
    p.srcHeight = 2;                                        /* slice shorter than the box */
    EXPECT_RC(cuMemcpy3D(&p), CUDA_ERROR_INVALID_VALUE);
}

static void test_peer(CUdeviceptr d)
{
    CUdeviceptr remote;
    REQUIRE(cuCtxSetCurrent(ctx1));
    REQUIRE(cuMemAlloc(&remote, N));
    REQUIRE(cuCtxSetCurrent(ctx0));
    uint64_t p0 = emuGetCounter("bytes.peer"), c0 = emuGetCounter("copies.peer");
    OK(cuMemsetD8(d, 'r', N));
    OK(cuMemcpyPeer(remote, ctx1, d, ctx0, N));
    OK(cuCtxSynchronize());
    EXPECT(all_bytes(DEV(remote), 'r', N));
    EXPECT(emuGetCounter("bytes.peer") == p0 + N && emuGetCounter("copies.peer") == c0 + 1);
    EXPECT_RC(cuMemcpyPeer(remote, (CUcontext)&p0, d, ctx0, N), CUDA_ERROR_INVALID_CONTEXT);
    /* 3D peer copy: a 16x4 box of device 0 into device 1 with pitch 32. */
    CUDA_MEMCPY3D_PEER q;
    memset(&q, 0, sizeof q);
    OK(cuMemsetD8(d, 'q', N));
    q.srcMemoryType = CU_MEMORYTYPE_DEVICE; q.srcDevice = d; q.srcContext = ctx0; q.srcPitch = 16; q.srcHeight = 4;
    q.dstMemoryType = CU_MEMORYTYPE_DEVICE; q.dstDevice = remote; q.dstContext = ctx1; q.dstPitch = 32; q.dstHeight = 4;
    q.WidthInBytes = 16; q.Height = 4; q.Depth = 1;
    OK(cuMemcpy3DPeer(&q));
    OK(cuCtxSynchronize());
    EXPECT(all_bytes((char *)DEV(remote) + 32 * 3, 'q', 16) && all_bytes((char *)DEV(remote) + 16, 'r', 16));
    EXPECT(emuGetCounter("copies.peer") == c0 + 2);
    q.dstContext = NULL;
    EXPECT_RC(cuMemcpy3DPeer(&q), CUDA_ERROR_INVALID_CONTEXT);
    REQUIRE(cuCtxSetCurrent(ctx1));
    OK(cuMemFree(remote));
    REQUIRE(cuCtxSetCurrent(ctx0));
}

/* EMU_PINNED_GBPS=1 (set in main): 1 byte per ns for pinned copies. */
static void test_bandwidth_model(void)
{
    size_t big = 8u << 20;
    CUdeviceptr d;
    char *pinned;
    REQUIRE(cuMemAlloc(&d, big));
    REQUIRE(cuMemAllocHost((void **)&pinned, big));
    memset(pinned, 1, big);
    double t0 = et_now_ms();
    OK(cuMemcpyHtoD(d, pinned, big));          /* pinned sync copy: returns when done */
    double ms = et_now_ms() - t0;
    EXPECT(ms >= 8.0);                          /* 8 MiB at 1 GB/s >= 8.4 ms */
    EXPECT(ms < 2000);
    OK(cuMemFreeHost(pinned));
    OK(cuMemFree(d));
}

/* The driver's staging for a synchronous pageable copy is finite: a copy
 * larger than it returns only once all but the last staging buffer (2 MiB)
 * has crossed the link, so under the bandwidth model pageable is never
 * faster than the link (EMU_PAGEABLE_GBPS=1: 16 MiB takes >= 14 MiB / 1 GB/s
 * = 14.7 ms of the call).  The data arrives whole. */
static void test_pageable_staging(void)
{
    size_t big = 16u << 20;
    CUdeviceptr d;
    char *src = malloc(big), *back = malloc(big);
    REQUIRE(cuMemAlloc(&d, big));
    for (size_t i = 0; i < big; i++)
        src[i] = (char)(i * 7 + 3);
    double t0 = et_now_ms();
    OK(cuMemcpyHtoD(d, src, big));
    double ms = et_now_ms() - t0;
    EXPECT(ms >= 14.0);
    memset(src, 0, big); /* reusable on return: the rest was staged */
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH(back, d, big));
    int same = 1;
    for (size_t i = 0; i < big; i++)
        same &= back[i] == (char)(i * 7 + 3);
    EXPECT(same);
    OK(cuMemFree(d));
    free(src);
    free(back);
}

/* Memsets may target pinned host memory (unified addressing: its device
 * pointer is its host address).  The non-Async forms are then synchronous
 * with the host; the Async forms stay stream-ordered. */
static void test_memset_pinned(CUstream s)
{
    unsigned char *pinned = NULL, *reg = malloc(N);
    REQUIRE(cuMemHostAlloc((void **)&pinned, N, 0));
    CUdeviceptr dp = (CUdeviceptr)(uintptr_t)pinned;
    memset(pinned, 0, N);
    OK(cuLaunchHostFunc(0, sleep_30ms, NULL));               /* earlier work on the legacy stream */
    OK(cuMemsetD32(dp, 0x01020304u, N / 4));
    int ok32 = 1;
    for (size_t i = 0; i < N / 4; i++) ok32 &= ((uint32_t *)(void *)pinned)[i] == 0x01020304u;
    EXPECT(ok32);                                             /* done when the call returned */
    OK(cuMemsetD2D8(dp, 64, 'q', 16, 8));                    /* 2D: rows of 16 every 64 bytes */
    EXPECT(all_bytes(pinned, 'q', 16) && all_bytes(pinned + 7 * 64, 'q', 16) && pinned[16] == 0x04);
    OK(cuLaunchHostFunc(s, sleep_30ms, NULL));
    OK(cuMemsetD8Async(dp, 'a', N, s));
    EXPECT(pinned[0] == 'q');                                 /* async: not before the sleep ran */
    OK(cuStreamSynchronize(s));
    EXPECT(all_bytes(pinned, 'a', N));
    EXPECT_RC(cuMemsetD8(dp, 0, N + 1), CUDA_ERROR_INVALID_VALUE);            /* past the allocation */
    EXPECT_RC(cuMemsetD32(dp + 2, 0, 4), CUDA_ERROR_INVALID_VALUE);           /* misaligned */
    EXPECT_RC(cuMemsetD8((CUdeviceptr)(uintptr_t)reg, 0, 16), CUDA_ERROR_INVALID_VALUE); /* pageable */
    REQUIRE(cuMemHostRegister(reg, N, 0));                    /* registered memory is pinned too */
    OK(cuMemsetD16((CUdeviceptr)(uintptr_t)reg, 0x7a7a, N / 2));
    EXPECT(all_bytes(reg, 0x7a, N));
    OK(cuMemHostUnregister(reg));
    OK(cuMemFreeHost(pinned));
    free(reg);
}

static void test_errors(CUdeviceptr d, CUstream s)
{
    char host[64];
    char *heap = malloc(N);
    CUdeviceptr freed;
    REQUIRE(cuMemAlloc(&freed, 256));
    REQUIRE(cuMemFree(freed));
    EXPECT_RC(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)heap, host, 64), CUDA_ERROR_INVALID_VALUE);  /* not device */
    EXPECT_RC(cuMemcpyHtoD(d, heap, N + 1), CUDA_ERROR_INVALID_VALUE);       /* past the allocation */
    EXPECT_RC(cuMemcpyHtoDAsync(d + 1, heap, N, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemcpyDtoH(host, freed, 64), CUDA_ERROR_INVALID_VALUE);       /* freed */
    EXPECT_RC(cuMemcpyHtoD(d, NULL, 64), CUDA_ERROR_INVALID_VALUE);
    static unsigned bogus[64];
    EXPECT_RC(cuMemcpyHtoDAsync(d, host, 64, (CUstream)bogus), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemsetD32(d + 2, 0, 4), CUDA_ERROR_INVALID_VALUE);           /* misaligned */
    EXPECT_RC(cuMemsetD16(d + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemsetD8(d, 0, N + 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemsetD2D8(d, 8, 0, 16, 2), CUDA_ERROR_INVALID_VALUE);       /* pitch < width */
    EXPECT_RC(cuMemsetD8Async(freed, 0, 16, s), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemcpyHtoD(d, host, 0));                                             /* 0 bytes: nothing */
    free(heap);
}

int main(void)
{
    setenv("EMU_DEVICES", "2", 1);
    setenv("EMU_PINNED_GBPS", "1", 1);
    setenv("EMU_PAGEABLE_GBPS", "1", 1);
    ctx0 = et_setup(0);
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx1, 1));
    CUdeviceptr d, d2;
    CUstream s;
    REQUIRE(cuMemAlloc(&d, N));
    REQUIRE(cuMemAlloc(&d2, N));
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    test_pageable_snapshot(d, s);
    test_pinned_async(d, s);
    test_d2h_pageable_complete(d, s);
    test_kinds_and_memset(d, d2);
    test_2d(d);
    test_3d(d);
    test_peer(d);
    test_errors(d, s);
    test_memset_pinned(s);
    test_bandwidth_model();
    test_pageable_staging();
    OK(cuStreamDestroy(s));
    OK(cuMemFree(d));
    OK(cuMemFree(d2));
    return et_finish("test_drv_exec_copy");
}
