/* test_drv_core_init: the emulated driver's core: EMU_* configuration,
 * cuInit and versions, devices and their attributes, primary contexts and
 * the context stack, peer access, error names, counters, fault injection
 * (EMU_FAIL and emuSetFault) and cuGetProcAddress resolution. */
#include "driver/exec_testutil.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>

static void test_before_init(void)
{
    int n = -1, v = 0;
    /* Only version queries and the proc table work before cuInit. */
    EXPECT_RC(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    OK(cuDriverGetVersion(&v));
    EXPECT(v == 13000);
    EXPECT_RC(cuInit(1), CUDA_ERROR_INVALID_VALUE);   /* flags must be 0 */
    OK(cuInit(0));
}

static void test_config(void)
{
    int n = 0;
    OK(cuDeviceGetCount(&n));
    EXPECT(n == 2);                                  /* EMU_DEVICES=2 */
    size_t mem = 0;
    OK(cuDeviceTotalMem(&mem, 1));
    EXPECT(mem == (size_t)3 << 29);                  /* EMU_DEVICE_MEMORY=1.5G */
    char name[64];
    OK(cuDeviceGetName(name, sizeof name, 0));
    EXPECT(!strcmp(name, "Emulated H100"));          /* EMU_DEVICE_NAME */
    EXPECT(emuJitterUs() == 7);                      /* EMU_JITTER_US=7 */
    EXPECT(emuSetJitterUs(0) == 7 && emuJitterUs() == 0);
    CUdevice d;
    EXPECT_RC(cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuDeviceTotalMem(&mem, -1), CUDA_ERROR_INVALID_DEVICE);
}

static void test_attributes(void)
{
    struct { CUdevice_attribute a; int want; } table[] = {
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
        {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
        {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
        {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1},
        {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1},
        {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
        {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
        {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120},
        {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 50 << 20},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        int v = -1;
        OK(cuDeviceGetAttribute(&v, table[i].a, 0));
        if (v != table[i].want) {
            fprintf(stderr, "attribute %d = %d, want %d\n", (int)table[i].a, v, table[i].want);
            et_failures++;
        }
    }
    int clock = 0, bus0 = -1, bus1 = -1;
    OK(cuDeviceGetAttribute(&clock, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0));
    EXPECT(clock > 1000000);
    OK(cuDeviceGetAttribute(&bus0, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0));
    OK(cuDeviceGetAttribute(&bus1, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1));
    EXPECT(bus0 != bus1);
    /* Every attribute of the enum answers; past the enum is an error. */
    for (int a = 1; a <= CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED; a++) {
        int v;
        OK(cuDeviceGetAttribute(&v, (CUdevice_attribute)a, 0));
    }
    int v;
    EXPECT_RC(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_ERROR_INVALID_VALUE);

    char bus[32];
    OK(cuDeviceGetPCIBusId(bus, sizeof bus, 1));
    CUdevice back = -1;
    OK(cuDeviceGetByPCIBusId(&back, bus));
    EXPECT(back == 1);
    EXPECT_RC(cuDeviceGetByPCIBusId(&back, "0000:ff:00.0"), CUDA_ERROR_INVALID_DEVICE);
    CUuuid u0, u1;
    OK(cuDeviceGetUuid(&u0, 0));
    OK(cuDeviceGetUuid(&u1, 1));
    EXPECT(memcmp(u0.bytes, u1.bytes, 16) != 0);
    int can = -1;
    OK(cuDeviceCanAccessPeer(&can, 0, 1));
    EXPECT(can == 1);
    OK(cuDeviceCanAccessPeer(&can, 0, 0));
    EXPECT(can == 0);
}

static void test_contexts(void)
{
    CUcontext cur = (CUcontext)1, c0, c1, popped;
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == NULL);                                   /* nothing current yet */
    CUdevice d;
    EXPECT_RC(cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    unsigned flags = 99;
    int active = 1;
    OK(cuDevicePrimaryCtxGetState(1, &flags, &active));
    EXPECT(active == 0);
    OK(cuDevicePrimaryCtxRetain(&c0, 0));
    OK(cuDevicePrimaryCtxRetain(&c1, 1));
    EXPECT(c0 != c1);
    OK(cuDevicePrimaryCtxGetState(1, &flags, &active));
    EXPECT(active == 1);
    OK(cuDevicePrimaryCtxSetFlags(1, CU_CTX_SCHED_BLOCKING_SYNC));
    OK(cuDevicePrimaryCtxGetState(1, &flags, &active));
    EXPECT(flags == CU_CTX_SCHED_BLOCKING_SYNC);
    EXPECT_RC(cuDevicePrimaryCtxSetFlags(1, 0x80000), CUDA_ERROR_INVALID_VALUE);
    OK(cuCtxSetCurrent(c0));
    OK(cuCtxGetDevice(&d));
    EXPECT(d == 0);
    OK(cuCtxPushCurrent(c1));
    OK(cuCtxGetDevice(&d));
    EXPECT(d == 1);
    OK(cuCtxPopCurrent(&popped));
    EXPECT(popped == c1);
    OK(cuCtxGetDevice(&d));
    EXPECT(d == 0);
    EXPECT_RC(cuCtxSetCurrent((CUcontext)&d), CUDA_ERROR_INVALID_CONTEXT);
    int least = 1, greatest = 1;
    OK(cuCtxGetStreamPriorityRange(&least, &greatest));
    EXPECT(least == 0 && greatest == -5);
    unsigned api = 0;
    OK(cuCtxGetApiVersion(c0, &api));
    EXPECT(api == 3020);
    OK(cuCtxSynchronize());
    /* Peer access from device 0 to 1. */
    OK(cuCtxEnablePeerAccess(c1, 0));
    EXPECT_RC(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    EXPECT_RC(cuCtxEnablePeerAccess(c0, 0), CUDA_ERROR_INVALID_DEVICE);
    OK(cuCtxDisablePeerAccess(c1));
    EXPECT_RC(cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    OK(cuDevicePrimaryCtxRelease(1));
    EXPECT_RC(cuDevicePrimaryCtxRelease(1), CUDA_ERROR_INVALID_CONTEXT);   /* released more than retained */
}

static void test_errors(void)
{
    const char *s = NULL;
    OK(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
    EXPECT(s && !strcmp(s, "CUDA_ERROR_ILLEGAL_ADDRESS"));
    OK(cuGetErrorName(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, &s));
    EXPECT(s && !strcmp(s, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"));
    OK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    EXPECT(s && !strcmp(s, "out of memory"));
    OK(cuGetErrorString(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, &s));
    EXPECT(s && strlen(s) > 10);
    EXPECT_RC(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    EXPECT(s == NULL);
    EXPECT_RC(cuGetErrorString(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
}

static void test_counters(void)
{
    emuResetCounters();
    EXPECT(emuGetCounter("test.never") == 0);
    emuAddCounter("test.a", 5);
    emuAddCounter("test.a", 7);
    EXPECT(emuGetCounter("test.a") == 12);
    int n;
    uint64_t before = emuGetCounter("calls.cuDeviceGetCount");
    OK(cuDeviceGetCount(&n));
    OK(cuDeviceGetCount(&n));
    EXPECT(emuGetCounter("calls.cuDeviceGetCount") == before + 2);
    emuResetCounters();
    EXPECT(emuGetCounter("test.a") == 0);
}

static void test_fault_injection(void)
{
    int n;
    /* EMU_FAIL=cuDeviceGetAttribute:3:CUDA_ERROR_UNKNOWN was armed at init,
     * and the attribute loop consumed it: set new rules here. */
    EXPECT(emuSetFault("cuDeviceGetCount:2:CUDA_ERROR_OUT_OF_MEMORY") == 0);
    OK(cuDeviceGetCount(&n));
    EXPECT_RC(cuDeviceGetCount(&n), CUDA_ERROR_OUT_OF_MEMORY);   /* the 2nd call only */
    OK(cuDeviceGetCount(&n));
    /* Numeric error, base name matching the _v2 entry point, two rules. */
    EXPECT(emuSetFault("cuDeviceTotalMem:1:2, cuDeviceGetName:1:CUDA_ERROR_INVALID_DEVICE") == 0);
    size_t mem;
    char name[32];
    EXPECT_RC(cuDeviceTotalMem(&mem, 0), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_RC(cuDeviceGetName(name, sizeof name, 0), CUDA_ERROR_INVALID_DEVICE);
    OK(cuDeviceTotalMem(&mem, 0));
    /* Probability: a seeded fraction of calls fails. */
    EXPECT(emuSetFault("cuDeviceGetCount:p0.5:CUDA_ERROR_UNKNOWN") == 0);
    int fails = 0;
    for (int i = 0; i < 400; i++) fails += cuDeviceGetCount(&n) == CUDA_ERROR_UNKNOWN;
    EXPECT(fails > 120 && fails < 280);
    /* Bad specs are rejected and leave the rules alone. */
    EXPECT(emuSetFault("cuDeviceGetCount") == -1);
    EXPECT(emuSetFault("cuDeviceGetCount:0:CUDA_ERROR_UNKNOWN") == -1);
    EXPECT(emuSetFault("cuDeviceGetCount:1:NOT_AN_ERROR") == -1);
    EXPECT(emuSetFault("cuDeviceGetCount:p1.5:1") == -1);
    EXPECT(emuSetFault("") == 0);
    for (int i = 0; i < 50; i++) OK(cuDeviceGetCount(&n));
}

/* An export's address (variants cuda.h declares only internally). */
static void *sym(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

/* cuGetProcAddress is a versioned lookup: the variant that was the default
 * at the caller's CUDA version (dates from cudaTypedefs.h). */
static void test_proc_address(void)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = 99;
    OK(cuGetProcAddress("cuMemAlloc", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
    EXPECT(fn == (void *)&cuMemAlloc_v2 && st == CU_GET_PROC_ADDRESS_SUCCESS);
    OK(cuGetProcAddress("cuMemAlloc", &fn, 3020, 0, &st));
    EXPECT(fn == (void *)&cuMemAlloc_v2);
    OK(cuGetProcAddress("cuMemAlloc", &fn, 3010, 0, &st));    /* the 32-bit original */
    EXPECT(fn != NULL && fn != (void *)&cuMemAlloc_v2 && st == CU_GET_PROC_ADDRESS_SUCCESS);
    /* cuStreamGetCaptureInfo: 10010 -> base, 11030 -> _v2 (6 args), 12030 -> _v3 (7 args). */
    OK(cuGetProcAddress("cuStreamGetCaptureInfo", &fn, 13000, 0, &st));
    EXPECT(fn == (void *)&cuStreamGetCaptureInfo_v3);
    OK(cuGetProcAddress("cuStreamGetCaptureInfo", &fn, 12000, 0, &st));
    EXPECT(fn == sym("cuStreamGetCaptureInfo_v2") && st == CU_GET_PROC_ADDRESS_SUCCESS);
    OK(cuGetProcAddress("cuStreamGetCaptureInfo", &fn, 12030, 0, &st));
    EXPECT(fn == (void *)&cuStreamGetCaptureInfo_v3);
    void *ptsz = NULL;
    OK(cuGetProcAddress("cuStreamGetCaptureInfo", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    OK(cuGetProcAddress("cuStreamGetCaptureInfo_v2_ptsz", &ptsz, 13000, 0, &st));
    EXPECT(fn != NULL && fn == ptsz);
    /* Older than the symbol: a NULL pointer, CUDA_SUCCESS, the reason in the status. */
    fn = (void *)1;
    OK(cuGetProcAddress("cuStreamGetCaptureInfo", &fn, 10000, 0, &st));
    EXPECT(fn == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    /* cuCtxSynchronize_v2 (a context argument) is another API that cuda.h
     * does not map the base name to: asked for by its own name. */
    OK(cuGetProcAddress("cuCtxSynchronize", &fn, 13000, 0, &st));
    EXPECT(fn == (void *)&cuCtxSynchronize);
    OK(cuGetProcAddress("cuCtxSynchronize_v2", &fn, 13000, 0, &st));
    EXPECT(fn == (void *)&cuCtxSynchronize_v2);
    OK(cuGetProcAddress("cuCtxSynchronize_v2", &fn, 12090, 0, &st));
    EXPECT(fn == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    OK(cuGetProcAddress("cuStreamGetCtx", &fn, 13000, 0, &st));
    EXPECT(fn == (void *)&cuStreamGetCtx);
    /* Renamed by cuda.h in 12.0. */
    OK(cuGetProcAddress("cuGraphInstantiate", &fn, 12000, 0, &st));
    EXPECT(fn == (void *)&cuGraphInstantiateWithFlags);
    OK(cuGetProcAddress("cuGraphInstantiate", &fn, 11000, 0, &st));
    EXPECT(fn == sym("cuGraphInstantiate_v2"));
    /* Per-thread forms: the _ptds/_ptsz of the selected variant, if it has one. */
    OK(cuGetProcAddress("cuMemcpyHtoD", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    void *ptds = NULL;
    OK(cuGetProcAddress("cuMemcpyHtoD_v2_ptds", &ptds, 13000, 0, &st));
    EXPECT(fn != NULL && fn == ptds && fn != (void *)&cuMemcpyHtoD_v2);
    OK(cuGetProcAddress("cuMemcpyHtoD", &fn, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st));
    EXPECT(fn == (void *)&cuMemcpyHtoD_v2);
    OK(cuGetProcAddress("cuMemcpyHtoD", &fn, 6050, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    EXPECT(fn == (void *)&cuMemcpyHtoD_v2);              /* _ptds dates from 7000 */
    OK(cuGetProcAddress("cuLaunchKernel", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    OK(cuGetProcAddress("cuLaunchKernel_ptsz", &ptsz, 13000, 0, &st));
    EXPECT(fn == ptsz && fn != (void *)&cuLaunchKernel);
    OK(cuGetProcAddress("cuInit", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    EXPECT(fn == (void *)&cuInit);                      /* no variant: the plain one */
    OK(cuGetProcAddress("emuGetCounter", &fn, 13000, 0, &st));
    EXPECT(fn == (void *)&emuGetCounter);
    fn = (void *)1;
    OK(cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0, &st));
    EXPECT(fn == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    EXPECT_RC(cuGetProcAddress("cuInit", NULL, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuGetProcAddress("cuInit", &fn, 13010, 0, &st), CUDA_ERROR_INVALID_VALUE);  /* newer than the driver */
    EXPECT_RC(cuGetProcAddress("cuInit", &fn, 13000, 4, &st), CUDA_ERROR_INVALID_VALUE);
    /* The 11.3 entry point (no status): CUDA_ERROR_NOT_FOUND instead. */
    CUresult (*old)(const char *, void **, int, cuuint64_t) = NULL;
    OK(cuGetProcAddress("cuGetProcAddress", (void **)&old, 11030, 0, &st));
    EXPECT(old != NULL && (void *)old == sym("cuGetProcAddress"));
    OK(cuGetProcAddress("cuGetProcAddress", &fn, 13000, 0, &st));
    EXPECT(fn == (void *)&cuGetProcAddress_v2);
    if (old) {
        fn = (void *)1;
        EXPECT_RC(old("cuNoSuchThing", &fn, 13000, 0), CUDA_ERROR_NOT_FOUND);
        EXPECT(fn == NULL);
        EXPECT_RC(old("cuStreamGetCaptureInfo", &fn, 10000, 0), CUDA_ERROR_NOT_FOUND);
        OK(old("cuStreamGetCaptureInfo", &fn, 11030, 0));
        EXPECT(fn == sym("cuStreamGetCaptureInfo_v2"));
    }
    /* A resolved pointer works. */
    PFN_cuDeviceGetCount_v2000 count = NULL;
    OK(cuGetProcAddress("cuDeviceGetCount", (void **)&count, 13000, 0, &st));
    int n = 0;
    if (count) OK(count(&n));
    EXPECT(n == 2);
}

int main(void)
{
    setenv("EMU_DEVICES", "2", 1);
    setenv("EMU_DEVICE_MEMORY", "1.5G", 1);
    setenv("EMU_DEVICE_NAME", "Emulated H100", 1);
    setenv("EMU_JITTER_US", "7", 1);
    setenv("EMU_FAIL", "cuDeviceGetAttribute:3:CUDA_ERROR_UNKNOWN", 1);
    test_before_init();
    /* The EMU_FAIL rule: 3rd cuDeviceGetAttribute fails, others pass. */
    int v;
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
    EXPECT_RC(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_ERROR_UNKNOWN);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
    test_config();
    test_attributes();
    test_contexts();
    test_errors();
    test_counters();
    test_fault_injection();
    test_proc_address();
    return et_finish("test_drv_core_init");
}
