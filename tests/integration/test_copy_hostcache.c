/* Pinned host allocations as a program sees them, checked by the program
 * itself; test_copy_hostcache.sh runs it with and without the shim (whose
 * cache serves cudaHostAlloc/cudaMallocHost/cuMemHostAlloc) and compares.
 *
 *  - a pinned block freed right after an async H2D copy from it was queued,
 *    then a same-size block allocated and overwritten: the device still gets
 *    the first data (a freed block is not reused under a queued copy);
 *  - the same for a queued D2H copy into a freed block: a new block's
 *    contents are not overwritten by it;
 *  - the same across devices: freed while device 0 is current, read by a
 *    queued copy on device 1's stream (EMU_DEVICES=2);
 *  - flags: a block allocated mapped / portable / write-combined reports its
 *    own flags (cudaHostGetFlags), never those of an earlier block of the
 *    same size; mapped blocks have a device pointer;
 *  - errors: double free, NULL, a pageable pointer; sizes 0, 1, odd;
 *  - the driver forms cuMemHostAlloc / cuMemAllocHost / cuMemFreeHost.
 * On stderr: the emulator's count of real pinned allocations (the script
 * checks the cache avoided them). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

static int failures;
#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        printf("FAIL %s:%d: %s = %d\n", __FILE__, __LINE__, #call, (int)e_); failures++; } } while (0)
#define EXPECT(cond, ...) do { if (!(cond)) { printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
        printf(__VA_ARGS__); printf("\n"); failures++; } } while (0)

enum { N = 8 << 20, ROUNDS = 6 };

static void case_free_under_h2d(cudaStream_t s)
{
    void *d;
    unsigned char *out = malloc(N);
    CHECK(cudaMalloc(&d, N));
    for (int r = 0; r < ROUNDS; r++) {
        unsigned char *a, *b;
        CHECK(cudaHostAlloc((void **)&a, N, cudaHostAllocDefault));
        memset(a, 0x10 + r, N);
        CHECK(cudaMemcpyAsync(d, a, N, cudaMemcpyHostToDevice, s));   /* reads a when it runs */
        CHECK(cudaFreeHost(a));
        CHECK(cudaHostAlloc((void **)&b, N, cudaHostAllocDefault));
        memset(b, 0xEE, N);   /* b may be a's memory: the copy must be done by now */
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemcpy(out, d, N, cudaMemcpyDeviceToHost));
        size_t bad = N;
        for (size_t i = 0; i < N; i++) if (out[i] != 0x10 + r) { bad = i; break; }
        EXPECT(bad == N, "round %d: device byte %zu = %#x", r, bad, bad < N ? out[bad] : 0);
        CHECK(cudaFreeHost(b));
    }
    CHECK(cudaFree(d));
    free(out);
    printf("free under a queued H2D copy: ok\n");
}

static void case_free_under_d2h(cudaStream_t s)
{
    void *d;
    CHECK(cudaMalloc(&d, N));
    CHECK(cudaMemset(d, 0x33, N));
    CHECK(cudaDeviceSynchronize());
    for (int r = 0; r < ROUNDS; r++) {
        unsigned char *a, *b;
        CHECK(cudaMallocHost((void **)&a, N));
        CHECK(cudaMemcpyAsync(a, d, N, cudaMemcpyDeviceToHost, s));   /* writes a when it runs */
        CHECK(cudaFreeHost(a));
        CHECK(cudaMallocHost((void **)&b, N));
        memset(b, 0x44 + r, N);
        CHECK(cudaStreamSynchronize(s));
        size_t bad = N;
        for (size_t i = 0; i < N; i++) if (b[i] != 0x44 + r) { bad = i; break; }
        EXPECT(bad == N, "round %d: new block byte %zu overwritten", r, bad);
        CHECK(cudaFreeHost(b));
    }
    CHECK(cudaFree(d));
    printf("free under a queued D2H copy: ok\n");
}

/* Two devices: a portable block is read by a queued copy on device 1's
 * stream, then freed while device 0 is current, and a same-size block is
 * allocated (the cache's candidate for the freed one) and overwritten:
 * device 1 must still get the first data.  Needs EMU_DEVICES >= 2 (the
 * script sets it); with one device it says so, identically with and
 * without the shim. */
static void case_free_other_device(void)
{
    int n = 0;
    CHECK(cudaGetDeviceCount(&n));
    if (n < 2) {
        printf("free under another device's copy: needs 2 devices, have %d\n", n);
        return;
    }
    void *d1;
    cudaStream_t s1;
    unsigned char *out = malloc(N);
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&d1, N));
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    for (int r = 0; r < ROUNDS; r++) {
        unsigned char *a, *b;
        CHECK(cudaSetDevice(1));
        CHECK(cudaHostAlloc((void **)&a, N, cudaHostAllocPortable));
        memset(a, 0x60 + r, N);
        CHECK(cudaMemcpyAsync(d1, a, N, cudaMemcpyHostToDevice, s1));   /* reads a when it runs */
        CHECK(cudaSetDevice(0));
        CHECK(cudaFreeHost(a));
        CHECK(cudaHostAlloc((void **)&b, N, cudaHostAllocPortable));
        memset(b, 0xEE, N);   /* b may be a's memory: device 1's copy must be done by now */
        CHECK(cudaSetDevice(1));
        CHECK(cudaStreamSynchronize(s1));
        CHECK(cudaMemcpy(out, d1, N, cudaMemcpyDeviceToHost));
        size_t bad = N;
        for (size_t i = 0; i < N; i++) if (out[i] != 0x60 + r) { bad = i; break; }
        EXPECT(bad == N, "round %d: device 1 byte %zu = %#x", r, bad, bad < N ? out[bad] : 0);
        CHECK(cudaFreeHost(b));
    }
    CHECK(cudaStreamDestroy(s1));
    CHECK(cudaFree(d1));
    CHECK(cudaSetDevice(0));
    free(out);
    printf("free under another device's queued copy: ok\n");
}

static void case_flags(void)
{
    static const unsigned flags[] = {
        cudaHostAllocDefault, cudaHostAllocMapped, cudaHostAllocPortable, cudaHostAllocWriteCombined,
        cudaHostAllocMapped | cudaHostAllocPortable, cudaHostAllocDefault, cudaHostAllocMapped,
    };
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        void *p = NULL, *dp = NULL;
        unsigned got = 0;
        CHECK(cudaHostAlloc(&p, 1 << 20, flags[k]));
        CHECK(cudaHostGetFlags(&got, p));
        cudaError_t e = cudaHostGetDevicePointer(&dp, p, 0);
        printf("flags %#x: got %#x, device pointer %s (%d)\n", flags[k], got,
               e == cudaSuccess && dp ? "yes" : "no", (int)e);
        (void)cudaGetLastError();
        memset(p, 1, 1 << 20);
        CHECK(cudaFreeHost(p));
    }
}

static void case_errors_and_sizes(void)
{
    void *p = NULL, *q = NULL;
    cudaError_t e[10];
    e[0] = cudaHostAlloc(&p, 0, 0);
    e[1] = p == NULL ? cudaSuccess : cudaErrorUnknown;
    e[2] = cudaHostAlloc(&p, 12345, 0);
    memset(p, 7, 12345);
    e[3] = cudaFreeHost(p);
    e[4] = cudaFreeHost(p);                       /* double free */
    (void)cudaGetLastError();
    e[5] = cudaFreeHost(NULL);
    char pageable[64];
    e[6] = cudaFreeHost(pageable);
    (void)cudaGetLastError();
    e[7] = cudaHostAlloc(&q, 1, 0x80);            /* unknown flag */
    (void)cudaGetLastError();
    e[8] = cudaMallocHost(&q, 1);
    ((volatile char *)q)[0] = 1;
    e[9] = cudaFreeHost(q);
    printf("errors:");
    for (int i = 0; i < 10; i++) printf(" %d", (int)e[i]);
    printf("\n");
}

static void case_driver(void)
{
    void *p = NULL, *q = NULL;
    CUresult r[6];
    r[0] = cuMemHostAlloc(&p, 3 << 20, CU_MEMHOSTALLOC_PORTABLE);
    memset(p, 2, 3 << 20);
    r[1] = cuMemFreeHost(p);
    r[2] = cuMemAllocHost_v2(&q, 3 << 20);
    memset(q, 3, 3 << 20);
    unsigned f = 99;
    r[3] = cuMemHostGetFlags(&f, q);
    r[4] = cuMemFreeHost(q);
    r[5] = cuMemFreeHost(q);
    printf("driver: %d %d %d %d(flags %u) %d %d\n", r[0], r[1], r[2], r[3], f, r[4], r[5]);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    emuResetCounters();
    case_free_under_h2d(s);
    case_free_under_d2h(s);
    case_free_other_device();
    case_flags();
    case_errors_and_sizes();
    case_driver();
    CHECK(cudaStreamDestroy(s));
    fprintf(stderr, "real pinned allocations: %llu\n",
            (unsigned long long)(emuGetCounter("calls.cuMemHostAlloc") + emuGetCounter("calls.cuMemAllocHost_v2")));
    printf("%s\n", failures ? "FAILED" : "all ok");
    return failures ? 1 : 0;
}
