/* test_drv_mem_alloc: cuMemAlloc/cuMemFree/cuMemGetInfo/cuMemGetAddressRange
 * and cuMemAllocPitch on the emulated driver: alignment, accounting, errors,
 * capacity, oversubscription of host RAM by untouched device memory, thread
 * safety and cost of an alloc/free pair. */
#include "driver/mem_testutil.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * 4096;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void test_argument_errors(void)
{
    CUdeviceptr p;
    EXPECT_RC(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);        /* size 0 is rejected */
    EXPECT_RC(cuMemAlloc(NULL, 256), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemFree(0), CUDA_SUCCESS);                         /* freeing NULL is a no-op */
}

static void test_alignment_and_disjointness(void)
{
    static const size_t sizes[] = { 1, 3, 255, 256, 257, 1000, 4096, 4097, 100000,
                                    1 << 20, (1 << 20) + 1, 3 << 20, 5000000 };
    enum { N = sizeof sizes / sizeof sizes[0] };
    CUdeviceptr p[N];
    for (int i = 0; i < N; i++) {
        OK(cuMemAlloc(&p[i], sizes[i]));
        EXPECT(p[i] % 256 == 0);
        EXPECT(emuIsDevicePointer((void *)(uintptr_t)p[i]));
        memset((void *)(uintptr_t)p[i], 'a' + i, sizes[i]);   /* device memory is host-addressable here */
    }
    for (int i = 0; i < N; i++) {
        const unsigned char *b = (const unsigned char *)(uintptr_t)p[i];
        size_t bad = 0;
        for (size_t k = 0; k < sizes[i]; k++) bad += b[k] != (unsigned char)('a' + i);
        EXPECT(bad == 0);                                         /* no two allocations overlap */
        CUdeviceptr base = 0;
        size_t size = 0;
        OK(cuMemGetAddressRange(&base, &size, p[i] + sizes[i] - 1));
        EXPECT(base == p[i] && size == sizes[i]);
    }
    for (int i = 0; i < N; i++) OK(cuMemFree(p[i]));
    CUdeviceptr base;
    size_t size;
    EXPECT_RC(cuMemGetAddressRange(&base, &size, p[0]), CUDA_ERROR_NOT_FOUND);
    EXPECT(!emuIsDevicePointer(&base));
}

static void test_free_errors(void)
{
    CUdeviceptr small, large;
    OK(cuMemAlloc(&small, 4096));
    OK(cuMemAlloc(&large, 8 << 20));
    EXPECT_RC(cuMemFree(small + 256), CUDA_ERROR_INVALID_VALUE);       /* interior pointer */
    EXPECT_RC(cuMemFree(large + (2 << 20)), CUDA_ERROR_INVALID_VALUE); /* interior, chunk-aligned */
    int host_var;
    EXPECT_RC(cuMemFree((CUdeviceptr)(uintptr_t)&host_var), CUDA_ERROR_INVALID_VALUE); /* not device memory */
    OK(cuMemFree(small));
    OK(cuMemFree(large));
    EXPECT_RC(cuMemFree(small), CUDA_ERROR_INVALID_VALUE);             /* double free */
    EXPECT_RC(cuMemFree(large), CUDA_ERROR_INVALID_VALUE);
}

static void test_accounting(void)
{
    size_t free0, total0, free1, total1, free2, total2;
    OK(cuMemGetInfo(&free0, &total0));
    uint64_t cur0 = emuGetCounter("phys.current"), cur0_dev = emuGetCounter("phys.current.0");
    CUdeviceptr a, b;
    OK(cuMemAlloc(&a, 1000));          /* accounted rounded to 256 */
    OK(cuMemAlloc(&b, 3 << 20));
    OK(cuMemGetInfo(&free1, &total1));
    EXPECT(total1 == total0);
    EXPECT(free0 - free1 == 1024 + (3 << 20));
    EXPECT(emuGetCounter("phys.current") - cur0 == 1024 + (3 << 20));
    EXPECT(emuGetCounter("phys.current.0") - cur0_dev == 1024 + (3 << 20));
    EXPECT(emuGetCounter("phys.peak") >= emuGetCounter("phys.current"));
    OK(cuMemFree(a));
    OK(cuMemFree(b));
    OK(cuMemGetInfo(&free2, &total2));
    EXPECT(free2 == free0 && total2 == total0);
    EXPECT(emuGetCounter("phys.current") == cur0);
}

/* Device memory far beyond this machine's RAM, never touched: allowed, and
 * the whole capacity is usable, no more. */
static void test_capacity(void)
{
    size_t free0, total;
    OK(cuMemGetInfo(&free0, &total));
    EXPECT(free0 == total);
    enum { MAXA = 64 };
    CUdeviceptr p[MAXA];
    int n = 0;
    size_t left = total, piece = 8ULL << 30;
    size_t rss0 = rss_bytes();
    while (left && n < MAXA) {
        size_t s = left < piece ? left : piece;
        CUresult rc = cuMemAlloc(&p[n], s);
        EXPECT(rc == CUDA_SUCCESS);
        if (rc != CUDA_SUCCESS) break;
        left -= s;
        n++;
    }
    size_t freeN, totalN;
    OK(cuMemGetInfo(&freeN, &totalN));
    EXPECT(freeN == 0);
    CUdeviceptr extra;
    EXPECT_RC(cuMemAlloc(&extra, 1), CUDA_ERROR_OUT_OF_MEMORY);       /* nothing beyond capacity */
    EXPECT(rss_bytes() - rss0 < (256u << 20));                         /* untouched pages cost no RAM */
    EXPECT(emuGetCounter("phys.peak.0") >= total);
    OK(cuMemFree(p[n - 1]));
    OK(cuMemAlloc(&extra, 1));                                          /* room again after a free */
    OK(cuMemFree(extra));
    for (int i = 0; i < n - 1; i++) OK(cuMemFree(p[i]));
    OK(cuMemGetInfo(&freeN, &totalN));
    EXPECT(freeN == total);
    CUdeviceptr huge;
    EXPECT_RC(cuMemAlloc(&huge, total + 1), CUDA_ERROR_OUT_OF_MEMORY);
}

static void test_touched_pages_returned(void)
{
    /* Large frees give host pages back: touching and freeing 40 MiB three
     * times (different sizes, so nothing is recycled) must not keep them. */
    size_t rss0 = rss_bytes();
    for (int i = 0; i < 3; i++) {
        CUdeviceptr p;
        size_t sz = (40u << 20) + ((size_t)i << 21);
        OK(cuMemAlloc(&p, sz));
        memset((void *)(uintptr_t)p, 1, sz);
        OK(cuMemFree(p));
    }
    EXPECT(rss_bytes() < rss0 + (32u << 20));
}

static void test_pitch(void)
{
    CUdeviceptr p;
    size_t pitch = 0;
    OK(cuMemAllocPitch(&p, &pitch, 1000, 10, 4));
    EXPECT(pitch >= 1000 && pitch % 512 == 0);
    CUdeviceptr base;
    size_t size;
    OK(cuMemGetAddressRange(&base, &size, p));
    EXPECT(base == p && size == pitch * 10);
    OK(cuMemFree(p));
    EXPECT_RC(cuMemAllocPitch(&p, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE); /* element size 4, 8 or 16 */
    EXPECT_RC(cuMemAllocPitch(&p, &pitch, 0, 10, 4), CUDA_ERROR_INVALID_VALUE);
}

/* Concurrent alloc/free from several threads: every live allocation keeps
 * its own bytes. */
static int thread_errors;
static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    enum { LIVE = 32 };
    CUdeviceptr live[LIVE] = { 0 };
    size_t sz[LIVE] = { 0 };
    CUcontext ctx;
    cuDevicePrimaryCtxRetain(&ctx, 0);
    cuCtxSetCurrent(ctx);
    for (int it = 0; it < 4000; it++) {
        int k = rand_r(&seed) % LIVE;
        if (live[k]) {
            const unsigned char *b = (const unsigned char *)(uintptr_t)live[k];
            if (b[0] != (unsigned char)k || b[sz[k] - 1] != (unsigned char)k) __atomic_add_fetch(&thread_errors, 1, __ATOMIC_RELAXED);
            if (cuMemFree(live[k]) != CUDA_SUCCESS) __atomic_add_fetch(&thread_errors, 1, __ATOMIC_RELAXED);
            live[k] = 0;
        } else {
            sz[k] = (rand_r(&seed) % 4 == 0) ? (size_t)(rand_r(&seed) % (4 << 20)) + 1 : (size_t)(rand_r(&seed) % 8192) + 1;
            if (cuMemAlloc(&live[k], sz[k]) != CUDA_SUCCESS) { __atomic_add_fetch(&thread_errors, 1, __ATOMIC_RELAXED); live[k] = 0; continue; }
            unsigned char *b = (unsigned char *)(uintptr_t)live[k];
            b[0] = b[sz[k] - 1] = (unsigned char)k;
        }
    }
    for (int k = 0; k < LIVE; k++) if (live[k]) cuMemFree(live[k]);
    return NULL;
}

static void test_threads(void)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    EXPECT(thread_errors == 0);
}

/* Resetting the primary context frees its device memory. */
static void test_reset(void)
{
    size_t f0, total, f1;
    OK(cuMemGetInfo(&f0, &total));
    CUdeviceptr small, large;
    OK(cuMemAlloc(&small, 1000));
    OK(cuMemAlloc(&large, 64 << 20));
    OK(cuDevicePrimaryCtxReset(0));
    mt_setup(0);
    OK(cuMemGetInfo(&f1, &total));
    EXPECT(f1 == total);
    EXPECT_RC(cuMemFree(small), CUDA_ERROR_INVALID_VALUE);                            /* gone with the context */
    EXPECT_RC(cuMemFree(large), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr again;
    OK(cuMemAlloc(&again, 1000));                                                     /* the device works after */
    OK(cuMemFree(again));
}

static void test_cost(void)
{
    static const size_t sizes[] = { 4096, 1 << 20, 16 << 20 };
    for (int s = 0; s < 3; s++) {
        enum { ITER = 20000 };
        CUdeviceptr p;
        double t0 = now_ns();
        for (int i = 0; i < ITER; i++) {
            if (cuMemAlloc(&p, sizes[s]) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS) { EXPECT(0); break; }
        }
        double ns = (now_ns() - t0) / ITER;
        printf("cuMemAlloc+cuMemFree of %zu bytes: %.0f ns per pair\n", sizes[s], ns);
        /* printed, not asserted: speed belongs to benchmarks, not timed tests */
    }
}

int main(void)
{
    mt_setup(0);
    test_argument_errors();
    test_alignment_and_disjointness();
    test_free_errors();
    test_accounting();
    test_capacity();
    test_touched_pages_returned();
    test_pitch();
    test_threads();
    test_reset();
    test_cost();
    return mt_finish("test_drv_mem_alloc");
}
