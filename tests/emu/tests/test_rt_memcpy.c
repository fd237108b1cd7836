/* Emulated runtime copies: every cudaMemcpyKind against the pointers it is
 * given, invalid directions, cudaMemcpyDefault classification, pageable H2D
 * snapshot semantics of cudaMemcpyAsync, pageable D2H complete at return,
 * pinned copies asynchronous, 2D copies, memsets, peer copies. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "emu.h"

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)
#define CHECK_RT(call, want) do { cudaError_t e_ = (call); if (e_ != (want)) { \
        fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #call, (int)e_, \
                cudaGetErrorName(e_), (int)(want)); failures++; } } while (0)

#define N (256 * 1024)

static int all_bytes(const void *p, int v, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != (unsigned char)v)
            return 0;
    return 1;
}

/* A host function that holds its stream until the gate opens (bounded, so a
 * runtime that wrongly waits for the stream fails instead of hanging). */
struct gate { int open; int timed_out; };
static void CUDART_CB hold_until_open(void *arg)
{
    struct gate *g = arg;
    for (int i = 0; i < 3000 && !__atomic_load_n(&g->open, __ATOMIC_ACQUIRE); i++)
        usleep(1000);
    if (!__atomic_load_n(&g->open, __ATOMIC_ACQUIRE))
        g->timed_out = 1;
}
static void CUDART_CB sleep_30ms(void *arg)
{
    (void)arg;
    usleep(30000);
}

static void test_kinds(void)
{
    char *h = malloc(N), *h2 = malloc(N);
    void *d = NULL, *d2 = NULL;
    CHECK_RT(cudaMalloc(&d, N), cudaSuccess);
    CHECK_RT(cudaMalloc(&d2, N), cudaSuccess);
    memset(h, 0x11, N);
    CHECK_RT(cudaMemcpy(d, h, N, cudaMemcpyHostToDevice), cudaSuccess);
    CHECK_RT(cudaMemcpy(d2, d, N, cudaMemcpyDeviceToDevice), cudaSuccess);
    memset(h2, 0, N);
    CHECK_RT(cudaMemcpy(h2, d2, N, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(all_bytes(h2, 0x11, N));
    memset(h, 0x22, N);
    CHECK_RT(cudaMemcpy(h2, h, N, cudaMemcpyHostToHost), cudaSuccess);
    CHECK(all_bytes(h2, 0x22, N));

    /* the kind names the side that must be device memory */
    CHECK_RT(cudaMemcpy(h2, h, N, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    CHECK_RT(cudaMemcpy(h2, h, N, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    CHECK_RT(cudaMemcpy(h2, d, N, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
    /* invalid direction, checked before anything else */
    CHECK_RT(cudaMemcpy(d, h, N, (enum cudaMemcpyKind)5), cudaErrorInvalidMemcpyDirection);
    CHECK_RT(cudaMemcpyAsync(d, h, N, (enum cudaMemcpyKind)-1, 0), cudaErrorInvalidMemcpyDirection);
    CHECK_RT(cudaMemcpy2D(d, 64, h, 64, 64, 4, (enum cudaMemcpyKind)17), cudaErrorInvalidMemcpyDirection);
    CHECK_RT(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);
    /* a 0-byte copy succeeds whatever the pointers */
    CHECK_RT(cudaMemcpy(NULL, NULL, 0, cudaMemcpyHostToDevice), cudaSuccess);

    /* cudaMemcpyDefault: the direction comes from unified addressing */
    emuResetCounters();
    memset(h, 0x33, N);
    /* (counters move when a copy runs: synchronous copies to the device
     * may return before that) */
    CHECK_RT(cudaMemcpy(d, h, N, cudaMemcpyDefault), cudaSuccess);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(emuGetCounter("bytes.h2d.pageable") == N);
    CHECK_RT(cudaMemcpy(d2, d, N, cudaMemcpyDefault), cudaSuccess);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(emuGetCounter("bytes.d2d") == N);
    memset(h2, 0, N);
    CHECK_RT(cudaMemcpy(h2, d2, N, cudaMemcpyDefault), cudaSuccess);
    CHECK(emuGetCounter("bytes.d2h.pageable") == N);
    CHECK(all_bytes(h2, 0x33, N));
    memset(h, 0x44, N);
    CHECK_RT(cudaMemcpy(h2, h, N, cudaMemcpyDefault), cudaSuccess);
    CHECK(all_bytes(h2, 0x44, N));
    void *pinned = NULL;
    CHECK_RT(cudaMallocHost(&pinned, N), cudaSuccess);
    memset(pinned, 0x55, N);
    CHECK_RT(cudaMemcpy(d, pinned, N, cudaMemcpyDefault), cudaSuccess);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(emuGetCounter("bytes.h2d.pinned") == N);
    CHECK_RT(cudaMemcpy(h2, d, N, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(all_bytes(h2, 0x55, N));
    CHECK_RT(cudaFreeHost(pinned), cudaSuccess);

    CHECK_RT(cudaFree(d), cudaSuccess);
    CHECK_RT(cudaFree(d2), cudaSuccess);
    free(h);
    free(h2);
}

static void test_async_semantics(void)
{
    cudaStream_t s;
    CHECK_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    char *h = malloc(N), *out = malloc(N);
    void *d = NULL, *pinned = NULL;
    CHECK_RT(cudaMalloc(&d, N), cudaSuccess);
    CHECK_RT(cudaMallocHost(&pinned, N), cudaSuccess);
    CHECK_RT(cudaMemset(d, 0, N), cudaSuccess);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);

    /* Pageable H2D: the source is captured when the call returns, although
     * the copy runs later (the stream is held). */
    struct gate g = {0, 0};
    CHECK_RT(cudaLaunchHostFunc(s, hold_until_open, &g), cudaSuccess);
    memset(h, 'A', N);
    CHECK_RT(cudaMemcpyAsync(d, h, N, cudaMemcpyHostToDevice, s), cudaSuccess);
    memset(h, 'B', N);
    __atomic_store_n(&g.open, 1, __ATOMIC_RELEASE);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(!g.timed_out);
    CHECK_RT(cudaMemcpy(out, d, N, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(all_bytes(out, 'A', N));

    /* Pageable D2H: complete when the call returns, after the work queued
     * before it (a slow host function, then a memset). */
    memset(out, 0, N);
    CHECK_RT(cudaLaunchHostFunc(s, sleep_30ms, NULL), cudaSuccess);
    CHECK_RT(cudaMemsetAsync(d, 0x5a, N, s), cudaSuccess);
    CHECK_RT(cudaMemcpyAsync(out, d, N, cudaMemcpyDeviceToHost, s), cudaSuccess);
    CHECK(all_bytes(out, 0x5a, N));
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);

    /* Pinned D2H: asynchronous; the destination changes only when the held
     * stream runs. */
    struct gate g2 = {0, 0};
    memset(pinned, 0, N);
    CHECK_RT(cudaLaunchHostFunc(s, hold_until_open, &g2), cudaSuccess);
    CHECK_RT(cudaMemcpyAsync(pinned, d, N, cudaMemcpyDeviceToHost, s), cudaSuccess);
    CHECK(all_bytes(pinned, 0, N));
    CHECK_RT(cudaStreamQuery(s), cudaErrorNotReady);
    __atomic_store_n(&g2.open, 1, __ATOMIC_RELEASE);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(!g2.timed_out);
    CHECK(all_bytes(pinned, 0x5a, N));
    /* cudaErrorNotReady is an answer, not an error */
    CHECK_RT(cudaGetLastError(), cudaSuccess);

    /* per-thread and legacy handles work with the plain symbols */
    memset(h, 0x66, N);
    CHECK_RT(cudaMemcpyAsync(d, h, N, cudaMemcpyHostToDevice, cudaStreamPerThread), cudaSuccess);
    CHECK_RT(cudaMemcpyAsync(out, d, N, cudaMemcpyDeviceToHost, cudaStreamPerThread), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
    CHECK(all_bytes(out, 0x66, N));
    CHECK_RT(cudaMemsetAsync(d, 0x67, N, cudaStreamLegacy), cudaSuccess);
    CHECK_RT(cudaMemcpyAsync(out, d, N, cudaMemcpyDeviceToHost, cudaStreamLegacy), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
    CHECK(all_bytes(out, 0x67, N));

    CHECK_RT(cudaStreamDestroy(s), cudaSuccess);
    CHECK_RT(cudaFree(d), cudaSuccess);
    CHECK_RT(cudaFreeHost(pinned), cudaSuccess);
    free(h);
    free(out);
}

static void test_2d_and_memset(void)
{
    const size_t w = 100, hgt = 8, hp = 128;
    unsigned char *h = malloc(hp * hgt), *out = malloc(4096);   /* also used for a 4 KiB copy */
    for (size_t i = 0; i < hp * hgt; i++)
        h[i] = (unsigned char)i;
    void *d = NULL;
    size_t dp = 0;
    CHECK_RT(cudaMallocPitch(&d, &dp, w, hgt), cudaSuccess);
    CHECK_RT(cudaMemset2D(d, dp, 0xee, w, hgt), cudaSuccess);
    CHECK_RT(cudaMemcpy2D(d, dp, h, hp, w, hgt, cudaMemcpyHostToDevice), cudaSuccess);
    memset(out, 0, hp * hgt);
    CHECK_RT(cudaMemcpy2D(out, hp, d, dp, w, hgt, cudaMemcpyDeviceToHost), cudaSuccess);
    int ok = 1;
    for (size_t r = 0; r < hgt; r++)
        for (size_t c = 0; c < hp; c++)
            if (out[r * hp + c] != (c < w ? h[r * hp + c] : 0))
                ok = 0;
    CHECK(ok);
    /* pitch narrower than the width */
    CHECK_RT(cudaMemcpy2D(d, dp, h, 50, w, hgt, cudaMemcpyHostToDevice), cudaErrorInvalidPitchValue);
    memset(out, 0, hp * hgt);
    CHECK_RT(cudaMemcpy2DAsync(out, hp, d, dp, w, hgt, cudaMemcpyDefault, 0), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(0), cudaSuccess);
    CHECK(out[hp + 3] == h[hp + 3] && out[(hgt - 1) * hp + w - 1] == h[(hgt - 1) * hp + w - 1]);

    void *d1 = NULL;
    CHECK_RT(cudaMalloc(&d1, 4096), cudaSuccess);
    CHECK_RT(cudaMemset(d1, 0x7f, 4096), cudaSuccess);
    CHECK_RT(cudaMemcpy(out, d1, 4096, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(all_bytes(out, 0x7f, 4096));
    CHECK_RT(cudaMemset(h, 0, 16), cudaErrorInvalidValue);   /* not device memory */
    (void)cudaGetLastError();
    CHECK_RT(cudaFree(d1), cudaSuccess);
    CHECK_RT(cudaFree(d), cudaSuccess);
    free(h);
    free(out);
}

/* cudaMemset on pinned host memory: accepted (unified addressing) and, in
 * the non-Async forms, complete when the call returns. */
cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count);
static void test_memset_pinned(void)
{
    unsigned char *p = NULL;
    CHECK_RT(cudaHostAlloc((void **)&p, 4096, cudaHostAllocDefault), cudaSuccess);
    if (!p) return;
    memset(p, 0, 4096);
    CHECK_RT(cudaLaunchHostFunc(0, sleep_30ms, NULL), cudaSuccess);
    CHECK_RT(cudaMemset(p, 0x3c, 4096), cudaSuccess);
    CHECK(all_bytes(p, 0x3c, 4096));
    CHECK_RT(cudaLaunchHostFunc(cudaStreamPerThread, sleep_30ms, NULL), cudaSuccess);
    CHECK_RT(cudaMemset_ptds(p, 0x4d, 4096), cudaSuccess);
    CHECK(all_bytes(p, 0x4d, 4096));
    CHECK_RT(cudaMemset2D(p, 64, 0x5e, 16, 4), cudaSuccess);
    CHECK(all_bytes(p, 0x5e, 16) && all_bytes(p + 3 * 64, 0x5e, 16) && p[16] == 0x4d);
    CHECK_RT(cudaMemset(p, 0, 4097), cudaErrorInvalidValue);   /* past the allocation */
    (void)cudaGetLastError();
    CHECK_RT(cudaFreeHost(p), cudaSuccess);
}

static void test_peer(void)
{
    int n = 0;
    CHECK_RT(cudaGetDeviceCount(&n), cudaSuccess);
    if (n < 2) {
        fprintf(stderr, "FAIL: EMU_DEVICES=2 not honoured (%d devices)\n", n);
        failures++;
        return;
    }
    char *h = malloc(N), *out = malloc(N);
    void *a0 = NULL, *b1 = NULL;
    CHECK_RT(cudaSetDevice(1), cudaSuccess);
    CHECK_RT(cudaMalloc(&b1, N), cudaSuccess);
    CHECK_RT(cudaSetDevice(0), cudaSuccess);
    CHECK_RT(cudaMalloc(&a0, N), cudaSuccess);
    memset(h, 0x3c, N);
    CHECK_RT(cudaMemcpy(a0, h, N, cudaMemcpyHostToDevice), cudaSuccess);
    CHECK_RT(cudaMemcpyPeer(b1, 1, a0, 0, N), cudaSuccess);
    struct cudaPointerAttributes at;
    CHECK_RT(cudaPointerGetAttributes(&at, b1), cudaSuccess);
    CHECK(at.type == cudaMemoryTypeDevice && at.device == 1);
    memset(out, 0, N);
    CHECK_RT(cudaMemcpy(out, b1, N, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(all_bytes(out, 0x3c, N));
    CHECK_RT(cudaMemsetAsync(a0, 0x3d, N, 0), cudaSuccess);
    CHECK_RT(cudaMemcpyPeerAsync(b1, 1, a0, 0, N, 0), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(0), cudaSuccess);
    CHECK_RT(cudaMemcpy(out, b1, N, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(all_bytes(out, 0x3d, N));
    CHECK_RT(cudaMemcpyPeer(b1, 7, a0, 0, N), cudaErrorInvalidDevice);
    int can = 0;
    CHECK_RT(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
    if (can) {
        CHECK_RT(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
        CHECK_RT(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
        CHECK_RT(cudaDeviceDisablePeerAccess(1), cudaSuccess);
        CHECK_RT(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    }
    CHECK_RT(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice);   /* itself */
    (void)cudaGetLastError();
    CHECK_RT(cudaFree(a0), cudaSuccess);
    CHECK_RT(cudaFree(b1), cudaSuccess);
    free(h);
    free(out);
}

int main(void)
{
    setenv("EMU_DEVICES", "2", 1);
    test_kinds();
    test_async_semantics();
    test_2d_and_memset();
    test_memset_pinned();
    test_peer();
    if (failures) {
        fprintf(stderr, "test_rt_memcpy: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_rt_memcpy: ok\n");
    return 0;
}
