/* Emulated runtime: initialization, versions, devices and their properties,
 * last-error rules, error names/strings, cudaMalloc(0)/cudaFree(NULL),
 * cudaGetDriverEntryPoint.  Linked against the real toolkit libcudart (so the
 * libcudart.so.13 version node is exercised), run on the emulator. */
#include <cuda.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)
#define CHECK_RT(call, want) do { cudaError_t e_ = (call); if (e_ != (want)) { \
        fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #call, (int)e_, \
                cudaGetErrorName(e_), (int)(want)); failures++; } } while (0)

static void test_versions(void)
{
    int v = 0;
    CHECK_RT(cudaRuntimeGetVersion(&v), cudaSuccess);
    CHECK(v == 13000);
    v = 0;
    CHECK_RT(cudaDriverGetVersion(&v), cudaSuccess);
    CHECK(v >= 13000);
    CHECK_RT(cudaRuntimeGetVersion(NULL), cudaErrorInvalidValue);
    (void)cudaGetLastError();
}

static void test_devices(void)
{
    int n = 0;
    CHECK_RT(cudaGetDeviceCount(&n), cudaSuccess);
    CHECK(n == 2);
    int d = -1;
    CHECK_RT(cudaGetDevice(&d), cudaSuccess);
    CHECK(d == 0);
    CHECK_RT(cudaSetDevice(n), cudaErrorInvalidDevice);
    CHECK_RT(cudaGetLastError(), cudaErrorInvalidDevice);
    CHECK_RT(cudaSetDevice(1), cudaSuccess);
    CHECK_RT(cudaGetDevice(&d), cudaSuccess);
    CHECK(d == 1);
    CHECK_RT(cudaSetDevice(0), cudaSuccess);

    struct cudaDeviceProp p;
    memset(&p, 0xab, sizeof p);
    CHECK_RT(cudaGetDeviceProperties(&p, 0), cudaSuccess);
    CHECK(strcmp(p.name, "Emulated Test GPU 7") == 0);
    CHECK(p.major == 9 && p.minor == 0);
    CHECK(p.totalGlobalMem == (size_t)3 << 30);
    CHECK(p.warpSize == 32);
    CHECK(p.maxThreadsPerBlock == 1024);
    CHECK(p.multiProcessorCount > 0);
    CHECK(p.unifiedAddressing == 1);
    CHECK(p.managedMemory == 1);
    CHECK(p.reserved[0] == 0);   /* the struct is cleared, not left as garbage */
    CHECK_RT(cudaGetDeviceProperties(&p, 5), cudaErrorInvalidDevice);
    CHECK_RT(cudaGetDeviceProperties(NULL, 0), cudaErrorInvalidValue);

    int v = 0;
    CHECK_RT(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 1), cudaSuccess);
    CHECK(v == 9);
    CHECK_RT(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 0), cudaSuccess);
    CHECK(v == 32);
    CHECK_RT(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 9), cudaErrorInvalidDevice);

    char bus[32] = {0};
    CHECK_RT(cudaDeviceGetPCIBusId(bus, sizeof bus, 1), cudaSuccess);
    CHECK(strlen(bus) > 0);
    int back = -1;
    CHECK_RT(cudaDeviceGetByPCIBusId(&back, bus), cudaSuccess);
    CHECK(back == 1);

    int least = 99, greatest = 99;
    CHECK_RT(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
    CHECK(least == 0 && greatest < 0);

    int can = -1;
    CHECK_RT(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
    CHECK(can == 0 || can == 1);

    size_t lim = 0;
    CHECK_RT(cudaDeviceGetLimit(&lim, cudaLimitStackSize), cudaSuccess);
    CHECK_RT(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 16 << 20), cudaSuccess);
    CHECK_RT(cudaDeviceGetLimit(&lim, cudaLimitMallocHeapSize), cudaSuccess);
    CHECK(lim == 16 << 20);
    CHECK_RT(cudaInitDevice(1, 0, 0), cudaSuccess);
    CHECK_RT(cudaInitDevice(9, 0, 0), cudaErrorInvalidDevice);
    CHECK_RT(cudaInitDevice(0, 0, 0x10), cudaErrorInvalidValue);
    CHECK_RT(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync), cudaSuccess);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
    unsigned flags = 0;
    CHECK_RT(cudaGetDeviceFlags(&flags), cudaSuccess);
    CHECK(flags & cudaDeviceMapHost);
    CHECK((flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync);
    CHECK_RT(cudaSetDeviceFlags(0x1000), cudaErrorInvalidValue);
    (void)cudaGetLastError();
}

static void test_last_error(void)
{
    CHECK_RT(cudaGetLastError(), cudaSuccess);
    CHECK_RT(cudaMalloc(NULL, 16), cudaErrorInvalidValue);
    CHECK_RT(cudaPeekAtLastError(), cudaErrorInvalidValue);
    CHECK_RT(cudaPeekAtLastError(), cudaErrorInvalidValue);   /* peek does not reset */
    void *p = NULL;
    CHECK_RT(cudaMalloc(&p, 64), cudaSuccess);                /* success keeps the error */
    CHECK_RT(cudaPeekAtLastError(), cudaErrorInvalidValue);
    CHECK_RT(cudaGetLastError(), cudaErrorInvalidValue);
    CHECK_RT(cudaGetLastError(), cudaSuccess);                /* get resets */
    CHECK_RT(cudaFree(p), cudaSuccess);
    /* A later error replaces an earlier one. */
    CHECK_RT(cudaMemcpy(NULL, NULL, 4, (enum cudaMemcpyKind)9), cudaErrorInvalidMemcpyDirection);
    CHECK_RT(cudaSetDevice(77), cudaErrorInvalidDevice);
    CHECK_RT(cudaGetLastError(), cudaErrorInvalidDevice);
}

/* The last error belongs to the thread that caused it. */
static void *other_thread_errors(void *arg)
{
    (void)arg;
    CHECK_RT(cudaGetLastError(), cudaSuccess);           /* not the main thread's */
    CHECK_RT(cudaSetDevice(-1), cudaErrorInvalidDevice);
    int d = -1;
    CHECK_RT(cudaGetDevice(&d), cudaSuccess);
    CHECK(d == 0);                                       /* a new thread starts on device 0 */
    return NULL;
}

static void test_per_thread_last_error(void)
{
    CHECK_RT(cudaSetDevice(1), cudaSuccess);
    CHECK_RT(cudaMalloc(NULL, 1), cudaErrorInvalidValue);
    pthread_t t;
    pthread_create(&t, NULL, other_thread_errors, NULL);
    pthread_join(t, NULL);
    CHECK_RT(cudaGetLastError(), cudaErrorInvalidValue); /* not the other thread's */
    int d = -1;
    CHECK_RT(cudaGetDevice(&d), cudaSuccess);
    CHECK(d == 1);
    CHECK_RT(cudaSetDevice(0), cudaSuccess);
}

static void test_malloc_free(void)
{
    void *p = (void *)0x1234;
    CHECK_RT(cudaMalloc(&p, 0), cudaSuccess);
    CHECK(p == NULL);
    CHECK_RT(cudaFree(NULL), cudaSuccess);
    CHECK_RT(cudaFree(0), cudaSuccess);
    CHECK_RT(cudaGetLastError(), cudaSuccess);

    size_t free0 = 0, total = 0;
    CHECK_RT(cudaMemGetInfo(&free0, &total), cudaSuccess);
    CHECK(total == (size_t)3 << 30);
    void *a = NULL;
    CHECK_RT(cudaMalloc(&a, 64 << 20), cudaSuccess);
    CHECK(a != NULL);
    size_t free1 = 0;
    CHECK_RT(cudaMemGetInfo(&free1, &total), cudaSuccess);
    CHECK(free1 + (64 << 20) <= free0);
    CHECK_RT(cudaFree(a), cudaSuccess);
    /* freeing twice is an error */
    CHECK_RT(cudaFree(a), cudaErrorInvalidValue);
    /* more than the device has */
    CHECK_RT(cudaMalloc(&a, (size_t)8 << 30), cudaErrorMemoryAllocation);
    CHECK_RT(cudaGetLastError(), cudaErrorMemoryAllocation);

    void *pitched = NULL;
    size_t pitch = 0;
    CHECK_RT(cudaMallocPitch(&pitched, &pitch, 100, 10), cudaSuccess);
    CHECK(pitch >= 100 && pitch % 256 == 0);
    CHECK_RT(cudaMemset2D(pitched, pitch, 7, 100, 10), cudaSuccess);
    CHECK_RT(cudaFree(pitched), cudaSuccess);
}

static void test_error_names(void)
{
    CHECK(strcmp(cudaGetErrorName(cudaSuccess), "cudaSuccess") == 0);
    CHECK(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0);
    CHECK(strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory") == 0);
    CHECK(strcmp(cudaGetErrorName(cudaErrorIllegalAddress), "cudaErrorIllegalAddress") == 0);
    CHECK(strcmp(cudaGetErrorName(cudaErrorStreamCaptureUnsupported), "cudaErrorStreamCaptureUnsupported") == 0);
    CHECK(strcmp(cudaGetErrorName(cudaErrorUnknown), "cudaErrorUnknown") == 0);
    CHECK(strcmp(cudaGetErrorName((cudaError_t)12345), "unrecognized error code") == 0);
    /* Every value of the enum has a name of its own and a message. */
    static const cudaError_t all[] = {
        cudaErrorInvalidValue, cudaErrorMemoryAllocation, cudaErrorInitializationError, cudaErrorCudartUnloading,
        cudaErrorInvalidConfiguration, cudaErrorInvalidPitchValue, cudaErrorInvalidSymbol,
        cudaErrorInvalidDevicePointer, cudaErrorInvalidMemcpyDirection, cudaErrorInvalidDeviceFunction,
        cudaErrorNoDevice, cudaErrorInvalidDevice, cudaErrorInvalidResourceHandle, cudaErrorSymbolNotFound,
        cudaErrorNotReady, cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorNotSupported,
        cudaErrorStreamCaptureInvalidated, cudaErrorCapturedEvent, cudaErrorStreamCaptureWrongThread,
        cudaErrorTimeout, cudaErrorGraphExecUpdateFailure, cudaErrorHostMemoryAlreadyRegistered,
        cudaErrorHostMemoryNotRegistered, cudaErrorPeerAccessAlreadyEnabled, cudaErrorMissingConfiguration,
        cudaErrorDeviceUninitialized, cudaErrorAssert, cudaErrorNotPermitted, cudaErrorApiFailureBase,
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *n = cudaGetErrorName(all[i]), *s = cudaGetErrorString(all[i]);
        if (strncmp(n, "cudaError", 9) != 0 || strcmp(s, "unrecognized error code") == 0 || !*s) {
            fprintf(stderr, "FAIL: error %d: name '%s' string '%s'\n", (int)all[i], n, s);
            failures++;
        }
    }
}

static void test_entry_points(void)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
    CHECK_RT(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &st), cudaSuccess);
    CHECK(st == cudaDriverEntryPointSuccess);
    CHECK(fn != NULL);
    if (fn) {
        /* the pointer is the driver's cuMemAlloc_v2: it allocates */
        CUdeviceptr d = 0;
        CHECK(((CUresult (*)(CUdeviceptr *, size_t))fn)(&d, 4096) == CUDA_SUCCESS);
        CHECK(d != 0);
        CHECK_RT(cudaFree((void *)(uintptr_t)d), cudaSuccess);
    }
    fn = (void *)1;
    CHECK_RT(cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, 13000, cudaEnableDefault, &st), cudaSuccess);
    CHECK(fn == NULL);
    CHECK(st == cudaDriverEntryPointSymbolNotFound);
    CHECK_RT(cudaGetDriverEntryPointByVersion(NULL, &fn, 13000, 0, &st), cudaErrorInvalidValue);
    /* the deprecated unversioned form resolves for the runtime's version */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    fn = NULL;
    CHECK_RT(cudaGetDriverEntryPoint("cuStreamSynchronize", &fn, cudaEnableLegacyStream, &st), cudaSuccess);
#pragma GCC diagnostic pop
    CHECK(st == cudaDriverEntryPointSuccess && fn != NULL);
    if (fn)
        CHECK(((CUresult (*)(CUstream))fn)(0) == CUDA_SUCCESS);
    (void)cudaGetLastError();
}

int main(void)
{
    /* The emulator reads its configuration at first use. */
    setenv("EMU_DEVICE_NAME", "Emulated Test GPU 7", 1);
    setenv("EMU_DEVICES", "2", 1);
    setenv("EMU_DEVICE_MEMORY", "3221225472", 1);
    /* cudaFree(0): the classic way to initialize the runtime. */
    CHECK_RT(cudaFree(0), cudaSuccess);
    test_versions();
    test_devices();
    test_last_error();
    test_per_thread_last_error();
    test_malloc_free();
    test_error_names();
    test_entry_points();
    CHECK_RT(cudaProfilerStart(), cudaSuccess);
    CHECK_RT(cudaProfilerStop(), cudaSuccess);
    if (failures) {
        fprintf(stderr, "test_rt_basic: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_rt_basic: ok\n");
    return 0;
}
