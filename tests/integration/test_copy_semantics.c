/* CUDA copy semantics a pinned copy engine must keep, checked by the program
 * itself.  Standalone it runs on the emulator; test_copy_semantics.sh runs it
 * with and without LD_PRELOAD=libtrainshim.so under jitter and several seeds
 * and requires identical output (results, error codes) and, with the shim,
 * that the emulator saw no pageable copy above the threshold.
 *
 *   test_copy_semantics            all cases; prints one line per case
 *   test_copy_semantics counters   only copies above the conversion threshold
 *                                  (pageable host side), then the emulator's
 *                                  byte counters on stderr
 *   test_copy_semantics advice     a GEMM and pageable copies above and below
 *                                  the threshold (for the report's ADVICE)
 *
 * Cases: the source overwritten right after an H2D call returns; the
 * destination read right after a D2H call returns (Async too); synchronous
 * H2D copies behind a running kernel and back to back, and behind a host
 * function that writes their source; copies
 * interleaved with kernels on one stream and across streams with events and
 * cudaStreamWaitEvent; many threads; sizes around the threshold (256 KiB),
 * the chunk size (2 MiB) and the small first piece of a synchronous copy;
 * unaligned pointers; zero bytes; 2D pitches; cudaMemcpyDefault; _ptds/
 * _ptsz twins; the driver's cuMemcpyHtoD/DtoH families, cuMemcpy/
 * cuMemcpyAsync (unified) and cuMemcpy2D/2DAsync/
 * 2DUnaligned (HOST or UNIFIED host side, offsets, pitches); invalid
 * arguments (error codes printed, so compared). */
#include <cuda.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu.h"

cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                 cudaStream_t stream);

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h);
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream h);
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *c);
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *c, CUstream h);

static int failures;
#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        printf("FAIL %s:%d: %s = %d\n", __FILE__, __LINE__, #call, (int)e_); failures++; } } while (0)
#define CHECKDRV(call) do { CUresult e_ = (call); if (e_ != CUDA_SUCCESS) { \
        printf("FAIL %s:%d: %s = %d\n", __FILE__, __LINE__, #call, (int)e_); failures++; } } while (0)
#define EXPECT(cond, ...) do { if (!(cond)) { printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
        printf(__VA_ARGS__); printf("\n"); failures++; } } while (0)

/* THRESHOLD: the default TRAINSHIM_PINNED_COPY_MIN; CHUNK: the 1 MiB largest
 * piece of test_copy_semantics.sh's "ramp" run times two, and a multiple of
 * the plan's 256 KiB first piece (test_copy_plan checks the plan alone) */
enum { KIB = 1024, MIB = 1024 * 1024, THRESHOLD = 256 * KIB, CHUNK = 2 * MIB };

/* Sizes around every boundary the engine has. */
static const size_t sizes[] = {
    1, 4095, THRESHOLD - 1, THRESHOLD, THRESHOLD + 1, CHUNK - 1, CHUNK, CHUNK + 1,
    2 * CHUNK + 17, 3 * CHUNK - 5,
};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static unsigned char pattern(size_t i, unsigned seed) { return (unsigned char)((i * 131u + seed * 7u + (i >> 12)) & 0xff); }

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = pattern(i, seed);
}

/* Index of the first byte that is not pattern(seed) + delta, or n. */
static size_t first_bad(const unsigned char *p, size_t n, unsigned seed, int delta)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(pattern(i, seed) + delta)) return i;
    return n;
}

/* ---- a CPU kernel: p[i] += delta for i < n ------------------------------ */
static char add_kernel_id;
static void add_impl(void **args, const emu_launch *l)
{
    (void)l;
    unsigned char *p = *(unsigned char **)args[0];
    size_t n = *(size_t *)args[1];
    int delta = *(int *)args[2];
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(p[i] + delta);
}

static void launch_add(void *p, size_t n, int delta, cudaStream_t s)
{
    void *args[] = {&p, &n, &delta};
    dim3 one = {1, 1, 1};
    CHECK(cudaLaunchKernel(&add_kernel_id, one, one, args, 0, s));
}

/* ---- cases ---------------------------------------------------------------- */

/* H2D then overwrite the source at once; D2H then read at once. */
static void case_overwrite_and_read(const char *name, cudaStream_t s, bool async, size_t off)
{
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k];
        unsigned char *h = malloc(n + off), *out = malloc(n + off);
        void *d = NULL;
        CHECK(cudaMalloc(&d, n + off));
        fill(h + off, n, (unsigned)k);
        if (async) CHECK(cudaMemcpyAsync((char *)d + off, h + off, n, cudaMemcpyHostToDevice, s));
        else CHECK(cudaMemcpy((char *)d + off, h + off, n, cudaMemcpyHostToDevice));
        memset(h, 0xEE, n + off);   /* the caller may reuse its buffer now */
        memset(out, 0x11, n + off);
        if (async) CHECK(cudaMemcpyAsync(out + off, (char *)d + off, n, cudaMemcpyDeviceToHost, s));
        else CHECK(cudaMemcpy(out + off, (char *)d + off, n, cudaMemcpyDeviceToHost));
        size_t bad = first_bad(out + off, n, (unsigned)k, 0);   /* read right away, no sync */
        EXPECT(bad == n, "%s size %zu off %zu: byte %zu wrong", name, n, off, bad);
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaFree(d));
        free(h);
        free(out);
    }
    printf("%s off=%zu: ok\n", name, off);
}

/* Synchronous H2D copies right behind a kernel on the legacy stream (still
 * running when the call starts: the engine drains the stream first), from
 * one source rewritten after each call: each lands after the kernel before
 * it, with the bytes the source held at its call. */
static void case_sync_behind_work(void)
{
    size_t n = 3 * CHUNK + 123;
    unsigned char *h = malloc(n), *out = malloc(n);
    void *d, *d2;
    CHECK(cudaMalloc(&d, n));
    CHECK(cudaMalloc(&d2, n));
    for (int round = 0; round < 3; round++) {
        fill(h, n, 60 + round);
        launch_add(d, n, 1, 0);
        CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
        fill(h, n, 70 + round);
        launch_add(d2, n, 1, 0);
        CHECK(cudaMemcpy(d2, h, n, cudaMemcpyHostToDevice));
        fill(h, n, 99);
        launch_add(d, n, 2, 0);
        CHECK(cudaMemcpy(out, d, n, cudaMemcpyDeviceToHost));
        size_t bad = first_bad(out, n, 60 + round, 2);
        EXPECT(bad == n, "behind a kernel, round %d: byte %zu wrong", round, bad);
        CHECK(cudaMemcpy(out, d2, n, cudaMemcpyDeviceToHost));
        bad = first_bad(out, n, 70 + round, 0);
        EXPECT(bad == n, "back to back, round %d: byte %zu wrong", round, bad);
    }
    CHECK(cudaFree(d));
    CHECK(cudaFree(d2));
    free(h);
    free(out);
    printf("sync behind work: ok\n");
}

/* Host functions queued before a synchronous H2D write its source: the
 * copy reads what they wrote ("a stream sync is performed before the copy
 * starts"), on the legacy stream and behind a blocking stream's work. */
struct src_write {
    unsigned char *p;
    size_t n;
    unsigned seed;
};
static void CUDART_CB write_source(void *arg)
{
    struct src_write *w = arg;
    struct timespec ts = { 0, 5000000 }; /* the call has long started */
    nanosleep(&ts, NULL);
    fill(w->p, w->n, w->seed);
}

static void case_sync_after_host_fn(void)
{
    size_t n = 3 * CHUNK + 123;
    unsigned char *h = malloc(n), *out = malloc(n);
    void *d;
    cudaStream_t blocking;
    CHECK(cudaMalloc(&d, n));
    CHECK(cudaStreamCreate(&blocking));
    for (int round = 0; round < 2; round++) {
        cudaStream_t on = round ? blocking : 0;
        struct src_write w = { h, n, 80u + (unsigned)round };
        fill(h, n, 90);
        CHECK(cudaLaunchHostFunc(on, write_source, &w));
        CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(out, d, n, cudaMemcpyDeviceToHost));
        size_t bad = first_bad(out, n, 80u + (unsigned)round, 0);
        EXPECT(bad == n, "source written by a host function (%s), byte %zu wrong", round ? "blocking stream" : "legacy",
               bad);
    }
    CHECK(cudaStreamDestroy(blocking));
    CHECK(cudaFree(d));
    free(h);
    free(out);
    printf("sync after a host function: ok\n");
}

/* One stream: H2D, kernel, H2D over half, kernel, D2H (no sync before the read). */
static void case_kernels_one_stream(cudaStream_t s)
{
    size_t n = 3 * CHUNK + 123;
    unsigned char *h = malloc(n), *out = malloc(n);
    void *d;
    CHECK(cudaMalloc(&d, n));
    for (int round = 0; round < 3; round++) {
        fill(h, n, 40 + round);
        CHECK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
        launch_add(d, n, 3, s);
        fill(h, n / 2, 50 + round);
        CHECK(cudaMemcpyAsync(d, h, n / 2, cudaMemcpyHostToDevice, s));   /* after the kernel, in order */
        memset(h, 0, n);
        launch_add(d, n, 1, s);
        CHECK(cudaMemcpyAsync(out, d, n, cudaMemcpyDeviceToHost, s));
        size_t bad1 = first_bad(out, n / 2, 50 + round, 1);
        /* second half: the first copy, +3 by the first kernel, +1 by the second */
        size_t bad2b = n - n / 2;
        for (size_t i = n / 2; i < n; i++)
            if (out[i] != (unsigned char)(pattern(i, 40 + round) + 4)) { bad2b = i - n / 2; break; }
        EXPECT(bad1 == n / 2 && bad2b == n - n / 2, "round %d: first half bad at %zu, second at %zu", round, bad1, bad2b);
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFree(d));
    free(h);
    free(out);
    printf("kernels on one stream: ok\n");
}

/* Stream A copies in; B waits on A's event, transforms, copies out. */
static void case_across_streams(void)
{
    cudaStream_t a, b;
    cudaEvent_t ev;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    size_t n = 2 * CHUNK + 999;
    unsigned char *h = malloc(n), *out = malloc(n);
    void *d;
    CHECK(cudaMalloc(&d, n));
    for (int round = 0; round < 4; round++) {
        fill(h, n, 60 + round);
        launch_add(d, 16, 1, a);   /* work queued ahead of the copy */
        CHECK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, a));
        memset(h, 0x5A, n);
        CHECK(cudaEventRecord(ev, a));
        CHECK(cudaStreamWaitEvent(b, ev, 0));
        launch_add(d, n, 7, b);
        CHECK(cudaMemcpyAsync(out, d, n, cudaMemcpyDeviceToHost, b));
        size_t bad = first_bad(out, n, 60 + round, 7);
        EXPECT(bad == n, "round %d: byte %zu wrong", round, bad);
    }
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(d));
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaStreamDestroy(a));
    CHECK(cudaStreamDestroy(b));
    free(h);
    free(out);
    printf("across streams with events: ok\n");
}

/* Legacy cudaMemcpy after a kernel on a blocking stream: ordered after it. */
static void case_legacy_sync(void)
{
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));   /* blocking: the legacy stream waits for it */
    size_t n = CHUNK + 77;
    unsigned char *h = malloc(n), *out = malloc(n);
    void *d;
    CHECK(cudaMalloc(&d, n));
    fill(h, n, 9);
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    launch_add(d, n, 2, s);
    CHECK(cudaMemcpy(out, d, n, cudaMemcpyDeviceToHost));
    size_t bad = first_bad(out, n, 9, 2);
    EXPECT(bad == n, "legacy D2H after kernel: byte %zu wrong", bad);
    /* H2D over the buffer while a kernel on s still uses it must wait for it */
    launch_add(d, n, 1, s);
    fill(h, n, 10);
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(out, d, n, cudaMemcpyDeviceToHost));
    bad = first_bad(out, n, 10, 0);
    EXPECT(bad == n, "legacy H2D after kernel: byte %zu wrong", bad);
    CHECK(cudaFree(d));
    CHECK(cudaStreamDestroy(s));
    free(h);
    free(out);
    printf("legacy stream ordering: ok\n");
}

static void case_twins_default_driver(void)
{
    size_t n = CHUNK + 4097;
    unsigned char *h = malloc(n), *out = malloc(n);
    void *d;
    CHECK(cudaMalloc(&d, n));
    fill(h, n, 21);
    CHECK(cudaMemcpy_ptds(d, h, n, cudaMemcpyHostToDevice));
    memset(h, 0, n);
    CHECK(cudaMemcpyAsync_ptsz(out, d, n, cudaMemcpyDeviceToHost, 0));
    EXPECT(first_bad(out, n, 21, 0) == n, "ptds/ptsz");
    fill(h, n, 22);
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyDefault));
    memset(h, 0, n);
    memset(out, 0, n);
    CHECK(cudaMemcpyAsync(out, d, n, cudaMemcpyDefault, 0));
    EXPECT(first_bad(out, n, 22, 0) == n, "cudaMemcpyDefault");
    /* driver API, sync and async */
    fill(h, n, 23);
    CHECKDRV(cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)d, h, n));
    memset(h, 0, n);
    memset(out, 0, n);
    CHECKDRV(cuMemcpyDtoH_v2(out, (CUdeviceptr)(uintptr_t)d, n));
    EXPECT(first_bad(out, n, 23, 0) == n, "cuMemcpyHtoD/DtoH");
    fill(h, n, 24);
    CHECKDRV(cuMemcpyHtoDAsync_v2((CUdeviceptr)(uintptr_t)d, h, n, 0));
    memset(h, 0, n);
    memset(out, 0, n);
    CHECKDRV(cuMemcpyDtoHAsync_v2(out, (CUdeviceptr)(uintptr_t)d, n, 0));
    EXPECT(first_bad(out, n, 24, 0) == n, "cuMemcpyHtoDAsync/DtoHAsync");
    CHECK(cudaFree(d));
    free(h);
    free(out);
    printf("ptds/ptsz, cudaMemcpyDefault, driver copies: ok\n");
}

#define DP(p) ((CUdeviceptr)(uintptr_t)(p))

/* The driver's unified copies (cuMemcpy, cuMemcpyAsync and their per-thread
 * twins): the direction comes from the pointers; the source overwritten and
 * the destination read right after each call. */
static void case_driver_unified(CUstream s)
{
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k] + (k & 1);   /* odd sizes too */
        unsigned char *h = malloc(n), *out = malloc(n);
        void *d;
        CHECK(cudaMalloc(&d, n));
        /* each pair on one stream (or streams that order with each other) */
        int variant = (int)(k % 4);
        fill(h, n, 80 + (unsigned)k);
        if (variant == 0) CHECKDRV(cuMemcpy(DP(d), DP(h), n));
        else if (variant == 1) CHECKDRV(cuMemcpyAsync(DP(d), DP(h), n, s));
        else if (variant == 2) CHECKDRV(cuMemcpy_ptds(DP(d), DP(h), n));
        else CHECKDRV(cuMemcpyAsync(DP(d), DP(h), n, 0));
        memset(h, 0xEE, n);
        memset(out, 0x11, n);
        if (variant == 0) CHECKDRV(cuMemcpyAsync(DP(out), DP(d), n, 0));
        else if (variant == 1) CHECKDRV(cuMemcpyAsync(DP(out), DP(d), n, s));
        else if (variant == 2) CHECKDRV(cuMemcpyAsync_ptsz(DP(out), DP(d), n, 0));
        else CHECKDRV(cuMemcpy(DP(out), DP(d), n));
        size_t bad = first_bad(out, n, 80 + (unsigned)k, 0);
        EXPECT(bad == n, "cuMemcpy variant %d size %zu: byte %zu wrong", variant, n, bad);
        /* per-thread twins of the HtoD/DtoH family */
        fill(h, n, 90 + (unsigned)k);
        CHECKDRV(cuMemcpyHtoD_v2_ptds(DP(d), h, n));
        memset(h, 0xEE, n);
        memset(out, 0x11, n);
        CHECKDRV(cuMemcpyDtoHAsync_v2_ptsz(out, DP(d), n, 0));
        bad = first_bad(out, n, 90 + (unsigned)k, 0);
        EXPECT(bad == n, "HtoD_ptds/DtoHAsync_ptsz size %zu: byte %zu wrong", n, bad);
        CHECK(cudaStreamSynchronize((cudaStream_t)s));
        CHECK(cudaFree(d));
        free(h);
        free(out);
    }
    printf("driver cuMemcpy/cuMemcpyAsync and per-thread twins: ok\n");
}

/* One side of a CUDA_MEMCPY2D: host (HOST or UNIFIED) or device memory at
 * (x, y) of a pitched buffer. */
static void set_side(CUDA_MEMCPY2D *c, bool src, CUmemorytype type, void *base, size_t x, size_t y, size_t pitch)
{
    if (src) {
        c->srcMemoryType = type, c->srcXInBytes = x, c->srcY = y, c->srcPitch = pitch;
        if (type == CU_MEMORYTYPE_HOST) c->srcHost = base;
        else c->srcDevice = DP(base);
    } else {
        c->dstMemoryType = type, c->dstXInBytes = x, c->dstY = y, c->dstPitch = pitch;
        if (type == CU_MEMORYTYPE_HOST) c->dstHost = base;
        else c->dstDevice = DP(base);
    }
}

/* The driver's 2D copies: host side HOST or UNIFIED, X/Y offsets, pitches,
 * sync, Async and Unaligned; host rows overwritten / read at once. */
static void case_driver_2d(CUstream s)
{
    static const size_t shapes[][6] = {   /* width, height, host pitch extra, device pitch extra, x, y */
        {1000, 700, 24, 0, 5, 3}, {4096, 300, 0, 512, 0, 0}, {333, 4000, 3, 61, 7, 1},
        {CHUNK / 2 + 1, 5, 1, 0, 0, 2}, {256 * KIB, 3, 64, 64, 1, 1},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        size_t w = shapes[k][0], hgt = shapes[k][1], x = shapes[k][4], y = shapes[k][5];
        size_t hp = w + x + shapes[k][2], dp = w + x + shapes[k][3], hn = hp * (hgt + y), dn = dp * (hgt + y);
        unsigned char *h = malloc(hn), *out = malloc(hn);
        void *d;
        CHECK(cudaMalloc(&d, dn));
        fill(h, hn, 100 + (unsigned)k);
        CUmemorytype ht = k % 2 ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_HOST;
        CUmemorytype dt = k % 3 == 2 ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_DEVICE;
        CUDA_MEMCPY2D c;
        memset(&c, 0, sizeof c);
        c.WidthInBytes = w, c.Height = hgt;
        set_side(&c, true, ht, h, x, y, hp);
        set_side(&c, false, dt, d, x, y, dp);
        /* each pair ordered: same stream, or the legacy and per-thread
         * default streams (which synchronize with each other) */
        int variant = (int)(k % 4);
        if (variant == 0) CHECKDRV(cuMemcpy2D_v2(&c));
        else if (variant == 1) CHECKDRV(cuMemcpy2DAsync_v2(&c, s));
        else if (variant == 2) CHECKDRV(cuMemcpy2DUnaligned_v2(&c));
        else CHECKDRV(cuMemcpy2D_v2_ptds(&c));
        memset(h, 0, hn);   /* the source may be reused at once */
        memset(out, 0x77, hn);
        memset(&c, 0, sizeof c);
        c.WidthInBytes = w, c.Height = hgt;
        set_side(&c, true, dt, d, x, y, dp);
        set_side(&c, false, ht, out, x, y, hp);
        if (variant == 0) CHECKDRV(cuMemcpy2DAsync_v2(&c, 0));
        else if (variant == 1) CHECKDRV(cuMemcpy2DAsync_v2(&c, s));
        else if (variant == 2) CHECKDRV(cuMemcpy2DAsync_v2_ptsz(&c, 0));
        else CHECKDRV(cuMemcpy2DUnaligned_v2(&c));
        size_t bad = SIZE_MAX;
        for (size_t i = 0; i < hn && bad == SIZE_MAX; i++) {
            size_t r = i / hp, col = i % hp;
            bool in = r >= y && r < y + hgt && col >= x && col < x + w;
            if (out[i] != (in ? pattern(i, 100 + (unsigned)k) : 0x77)) bad = i;
        }
        EXPECT(bad == SIZE_MAX, "driver 2D shape %zu variant %d: byte %zu wrong", k, variant, bad);
        CHECK(cudaStreamSynchronize((cudaStream_t)s));
        CHECK(cudaFree(d));
        free(h);
        free(out);
    }
    printf("driver 2D copies (HOST/UNIFIED, offsets, pitches, Async, Unaligned, twins): ok\n");
}

/* Zero bytes and invalid arguments of the driver's families: the codes are
 * printed (and compared by the script). */
static void case_driver_invalid(void)
{
    size_t n = 2 * THRESHOLD, w = 4096, hgt = 2 * THRESHOLD / 4096;
    unsigned char *h = malloc(n);
    void *d;
    CHECK(cudaMalloc(&d, n));
    memset(h, 1, n);
    CUDA_MEMCPY2D c;
    CUresult e[12];
    e[0] = cuMemcpy(DP(d), DP(h), 0);
    e[1] = cuMemcpyAsync(DP(h), DP(d), 0, 0);
    e[2] = cuMemcpy(0, DP(h), n);                            /* NULL destination */
    e[3] = cuMemcpyHtoD_v2(0, h, n);
    e[4] = cuMemcpy2D_v2(NULL);
    memset(&c, 0, sizeof c);
    c.WidthInBytes = w, c.Height = hgt;
    set_side(&c, true, CU_MEMORYTYPE_HOST, h, 0, 0, w / 2);   /* pitch < width */
    set_side(&c, false, CU_MEMORYTYPE_DEVICE, d, 0, 0, w);
    e[5] = cuMemcpy2D_v2(&c);
    set_side(&c, true, CU_MEMORYTYPE_HOST, d, 0, 0, w);       /* HOST type, device pointer */
    e[6] = cuMemcpy2DAsync_v2(&c, 0);
    set_side(&c, true, CU_MEMORYTYPE_HOST, h, 0, 0, w);
    set_side(&c, false, CU_MEMORYTYPE_DEVICE, h, 0, 0, w);    /* DEVICE type, host pointer */
    e[7] = cuMemcpy2DUnaligned_v2(&c);
    set_side(&c, false, CU_MEMORYTYPE_DEVICE, d, 0, 0, w);
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY;                    /* an array side (NULL): never converted */
    e[8] = cuMemcpy2D_v2(&c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    /* (A range past the end of an allocation is left out, as above.) */
    c.Height = 0;
    e[9] = cuMemcpy2D_v2(&c);
    c.Height = hgt;
    c.WidthInBytes = 0;
    e[10] = cuMemcpy2DAsync_v2(&c, 0);
    e[11] = cuCtxSynchronize();
    printf("driver errors:");
    for (int i = 0; i < 12; i++) printf(" %d", (int)e[i]);
    printf("\n");
    CHECK(cudaFree(d));
    free(h);
}

/* 2D: host rows with a pitch, device rows with another. */
static void case_2d(cudaStream_t s)
{
    static const size_t shapes[][4] = {   /* width, height, spitch extra, dpitch extra */
        {1000, 700, 24, 0}, {4096, 300, 0, 512}, {333, 4000, 3, 61}, {CHUNK / 2 + 1, 5, 1, 0}, {64, 3, 0, 0},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        size_t w = shapes[k][0], hgt = shapes[k][1], sp = w + shapes[k][2], dp = w + shapes[k][3];
        unsigned char *h = malloc(sp * hgt), *out = malloc(sp * hgt);
        void *d;
        CHECK(cudaMalloc(&d, dp * hgt));
        fill(h, sp * hgt, 30 + (unsigned)k);
        bool async = k % 2;
        if (async) CHECK(cudaMemcpy2DAsync(d, dp, h, sp, w, hgt, cudaMemcpyHostToDevice, s));
        else CHECK(cudaMemcpy2D(d, dp, h, sp, w, hgt, cudaMemcpyHostToDevice));
        memset(h, 0, sp * hgt);
        memset(out, 0x77, sp * hgt);
        if (async) CHECK(cudaMemcpy2DAsync(out, sp, d, dp, w, hgt, cudaMemcpyDeviceToHost, s));
        else CHECK(cudaMemcpy2D(out, sp, d, dp, w, hgt, cudaMemcpyDeviceToHost));
        size_t bad = SIZE_MAX;
        for (size_t r = 0; r < hgt && bad == SIZE_MAX; r++)
            for (size_t c = 0; c < sp; c++) {
                size_t i = r * sp + c;
                unsigned char want = c < w ? pattern(i, 30 + (unsigned)k) : 0x77;   /* pitch gaps untouched */
                if (out[i] != want) { bad = i; break; }
            }
        EXPECT(bad == SIZE_MAX, "2D shape %zu: byte %zu wrong", k, bad);
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaFree(d));
        free(h);
        free(out);
    }
    printf("2D pitches: ok\n");
}

static void case_zero_and_invalid(void)
{
    size_t n = 2 * THRESHOLD;
    unsigned char *h = malloc(n);
    void *d;
    CHECK(cudaMalloc(&d, n));
    memset(h, 1, n);
    /* (Copies past the end of an allocation are left out: under a caching
     * device allocator the range beyond may be valid memory, so they would
     * compare allocators, not copy paths.) */
    cudaError_t e[10];
    e[0] = cudaMemcpy(d, h, 0, cudaMemcpyHostToDevice);
    e[1] = cudaMemcpyAsync(h, d, 0, cudaMemcpyDeviceToHost, 0);
    e[2] = cudaMemcpy(d, h, n, (enum cudaMemcpyKind)7);               /* invalid kind */
    e[3] = cudaMemcpyAsync(d, h, n, (enum cudaMemcpyKind)9, 0);       /* invalid kind, async */
    e[4] = cudaMemcpy(NULL, h, n, cudaMemcpyHostToDevice);
    e[5] = cudaMemcpy(h, NULL, n, cudaMemcpyDeviceToHost);
    e[6] = cudaMemcpy(h, h + 1, n / 2, cudaMemcpyHostToDevice);       /* "device" side is host memory */
    e[7] = cudaGetLastError();
    e[8] = cudaMemcpy2D(d, 100, h, 100, 200, 2000, cudaMemcpyHostToDevice);   /* pitch < width */
    e[9] = cudaGetLastError();
    printf("errors:");
    for (int i = 0; i < 10; i++) printf(" %d", (int)e[i]);
    printf("\n");
    CHECK(cudaFree(d));
    free(h);
}

/* Stream capture: a pageable copy passes through to whatever CUDA says. */
static void case_capture(void)
{
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    size_t n = CHUNK;
    unsigned char *h = malloc(n);
    void *d;
    CHECK(cudaMalloc(&d, n));
    memset(h, 3, n);
    cudaGraph_t g = NULL;
    cudaError_t b = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    cudaError_t c = cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s);
    cudaError_t e = cudaStreamEndCapture(s, &g);
    printf("capture: begin %d copy %d end %d graph %s\n", (int)b, (int)c, (int)e, g ? "yes" : "no");
    if (g) CHECK(cudaGraphDestroy(g));
    (void)cudaGetLastError();
    /* A synchronous copy while this thread captures (global mode) elsewhere. */
    g = NULL;
    b = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    c = cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);
    cudaError_t c2 = cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, 0);
    e = cudaStreamEndCapture(s, &g);
    printf("capture elsewhere: begin %d sync copy %d legacy async copy %d end %d graph %s\n", (int)b, (int)c,
           (int)c2, (int)e, g ? "yes" : "no");
    if (g) CHECK(cudaGraphDestroy(g));
    (void)cudaGetLastError();
    CHECK(cudaFree(d));
    CHECK(cudaStreamDestroy(s));
    free(h);
}

/* Many threads copying at once, each on its own stream and on the legacy one. */
enum { THREADS = 6, ROUNDS = 3 };
static void *thread_main(void *arg)
{
    uintptr_t id = (uintptr_t)arg, bad = 0;
    if (cudaSetDevice(0) != cudaSuccess) return (void *)1;
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return (void *)1;
    for (int r = 0; r < ROUNDS; r++) {
        size_t n = sizes[(id + (size_t)r) % NSIZES] + id;
        unsigned char *h = malloc(n), *out = malloc(n);
        void *d = NULL;
        bad += cudaMalloc(&d, n) != cudaSuccess;
        unsigned seed = (unsigned)(id * 100 + (uintptr_t)r);
        fill(h, n, seed);
        bad += cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, r % 2 ? s : 0) != cudaSuccess;
        memset(h, 0, n);
        /* s is non-blocking: a copy on the legacy stream must be waited for */
        bad += (r % 2 ? cudaSuccess : cudaStreamSynchronize(0)) != cudaSuccess;
        launch_add(d, n, (int)id, s);
        bad += cudaMemcpyAsync(out, d, n, cudaMemcpyDeviceToHost, s) != cudaSuccess;
        bad += first_bad(out, n, seed, (int)id) != n;
        bad += cudaFree(d) != cudaSuccess;
        free(h);
        free(out);
    }
    cudaStreamDestroy(s);
    return (void *)bad;
}

static void case_threads(void)
{
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, thread_main, (void *)i);
    uintptr_t bad = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += (uintptr_t)r;
    }
    EXPECT(bad == 0, "%zu bad results in threads", (size_t)bad);
    printf("threads: ok\n");
}

/* After cudaDeviceReset the staging ring's events (and, on a real GPU, its
 * memory) belong to a destroyed context: copies must still be right. */
static void case_after_reset(void)
{
    CHECK(cudaDeviceReset());
    CHECK(cudaSetDevice(0));
    size_t n = 2 * CHUNK + 5;
    unsigned char *h = malloc(n), *out = malloc(n);
    void *d;
    CHECK(cudaMalloc(&d, n));
    fill(h, n, 77);
    CHECK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, 0));
    memset(h, 0, n);
    CHECK(cudaMemcpyAsync(out, d, n, cudaMemcpyDeviceToHost, 0));
    EXPECT(first_bad(out, n, 77, 0) == n, "after cudaDeviceReset");
    CHECK(cudaFree(d));
    free(h);
    free(out);
    printf("after cudaDeviceReset: ok\n");
}

/* Only copies over the threshold with a pageable host side. */
static void run_counters(void)
{
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    emuResetCounters();
    uint64_t total = 0;
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k];
        if (n < THRESHOLD) continue;
        unsigned char *h = malloc(n), *out = malloc(n);
        void *d;
        CHECK(cudaMalloc(&d, n));
        fill(h, n, (unsigned)k);
        CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
        /* s is non-blocking: the legacy stream's copy below does not wait for it */
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemcpy(out, d, n, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpyAsync(out, d, n, cudaMemcpyDeviceToHost, s));
        EXPECT(first_bad(out, n, (unsigned)k, 0) == n, "counters size %zu", n);
        total += 2 * n;
        /* the driver's families: unified, per-thread twins, 2D (HOST and UNIFIED host side) */
        CHECKDRV(cuMemcpy(DP(d), DP(h), n));
        CHECKDRV(cuMemcpyAsync_ptsz(DP(out), DP(d), n, 0));   /* ordered after the legacy stream */
        CHECKDRV(cuMemcpyHtoDAsync_v2(DP(d), h, n, (CUstream)s));
        CHECK(cudaStreamSynchronize(s));
        CHECKDRV(cuMemcpyDtoH_v2_ptds(out, DP(d), n));
        size_t w = 4096, rows = n / w;
        CUDA_MEMCPY2D c;
        memset(&c, 0, sizeof c);
        c.WidthInBytes = w, c.Height = rows;
        set_side(&c, true, CU_MEMORYTYPE_HOST, h, 0, 0, w);
        set_side(&c, false, CU_MEMORYTYPE_DEVICE, d, 0, 0, w);
        CHECKDRV(cuMemcpy2DAsync_v2(&c, (CUstream)s));
        CHECK(cudaStreamSynchronize(s));
        set_side(&c, true, CU_MEMORYTYPE_DEVICE, d, 0, 0, w);
        set_side(&c, false, CU_MEMORYTYPE_UNIFIED, out, 0, 0, w);
        CHECKDRV(cuMemcpy2D_v2(&c));
        EXPECT(first_bad(out, n, (unsigned)k, 0) == n, "driver counters size %zu", n);
        total += 2 * n + w * rows;
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaFree(d));
        free(h);
        free(out);
    }
    CHECK(cudaDeviceSynchronize());
    fprintf(stderr, "total %llu h2d.pageable %llu h2d.pinned %llu d2h.pageable %llu d2h.pinned %llu\n",
            (unsigned long long)total, (unsigned long long)emuGetCounter("bytes.h2d.pageable"),
            (unsigned long long)emuGetCounter("bytes.h2d.pinned"),
            (unsigned long long)emuGetCounter("bytes.d2h.pageable"),
            (unsigned long long)emuGetCounter("bytes.d2h.pinned"));
    CHECK(cudaStreamDestroy(s));
}

/* For the report's ADVICE line (test_copy_report.sh): one GEMM (the report
 * shows ADVICE only for runs with GEMM or NCCL records), 8 pageable copies
 * of 1 MiB (converted) and 10 of 64 KiB (below the threshold). */
static void run_advice(void)
{
    size_t big = MIB, small = 64 * KIB;
    unsigned char *h = malloc(big);
    void *d;
    float *m;
    CHECK(cudaMalloc(&d, big));
    CHECK(cudaMalloc((void **)&m, 3 * 16 * sizeof(float)));
    CHECK(cudaMemset(m, 0, 3 * 16 * sizeof(float)));
    cublasHandle_t hd;
    if (cublasCreate(&hd) != CUBLAS_STATUS_SUCCESS) {
        printf("FAIL: cublasCreate\n");
        failures++;
        return;
    }
    float one = 1, zero = 0;
    if (cublasSgemm(hd, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, m, 4, m + 16, 4, &zero, m + 32, 4) !=
        CUBLAS_STATUS_SUCCESS) {
        printf("FAIL: cublasSgemm\n");
        failures++;
    }
    fill(h, big, 5);
    for (int i = 0; i < 4; i++) {
        CHECK(cudaMemcpy(d, h, big, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(h, d, big, cudaMemcpyDeviceToHost));
    }
    for (int i = 0; i < 10; i++) CHECK(cudaMemcpy(d, h, small, cudaMemcpyHostToDevice));
    EXPECT(first_bad(h, big, 5, 0) == big, "advice copies");
    CHECK(cudaDeviceSynchronize());
    cublasDestroy(hd);
    CHECK(cudaFree(m));
    CHECK(cudaFree(d));
    free(h);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    size_t sizes3[] = {sizeof(void *), sizeof(size_t), sizeof(int)};
    if (emuRegisterKernel(&add_kernel_id, NULL, add_impl, 3, sizes3) != 0) {
        printf("FAIL: emuRegisterKernel\n");
        return 1;
    }
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    if (argc > 1 && strcmp(argv[1], "advice") == 0) {
        run_advice();
        return failures ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "counters") == 0) {
        run_counters();
        return failures ? 1 : 0;
    }
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    case_overwrite_and_read("sync", 0, false, 0);
    case_overwrite_and_read("async legacy", 0, true, 0);
    case_overwrite_and_read("async stream", s, true, 3);
    case_kernels_one_stream(s);
    case_sync_behind_work();
    case_sync_after_host_fn();
    case_across_streams();
    case_legacy_sync();
    case_twins_default_driver();
    case_2d(s);
    case_zero_and_invalid();
    case_driver_unified((CUstream)s);
    case_driver_2d((CUstream)s);
    case_driver_invalid();
    case_capture();
    case_threads();
    CHECK(cudaStreamDestroy(s));
    case_after_reset();
    printf("%s\n", failures ? "FAILED" : "all ok");
    return failures ? 1 : 0;
}
