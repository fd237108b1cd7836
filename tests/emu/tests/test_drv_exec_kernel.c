/* test_drv_exec_kernel: kernels on the emulated driver: a registered CPU
 * implementation runs later on the stream with the argument values of the
 * launch; modules, libraries and emuGetFunction resolve to the same handle;
 * unregistered kernels fail with CUDA_ERROR_NOT_FOUND; parameter info and
 * function attributes; launch argument validation; counters.  Prints the
 * cost of an empty launch and of a launch + synchronize round trip. */
#include "driver/exec_testutil.h"

static void set_flag(void *p) { __atomic_store_n((int *)p, 1, __ATOMIC_RELEASE); }

struct saxpy_seen { float a; int n; emu_launch launch; int calls; };
static struct saxpy_seen seen;

/* saxpy(float a, const float *x, float *y, int n): y = a*x + y */
static void saxpy_impl(void **args, const emu_launch *l)
{
    float a = *(float *)args[0];
    const float *x = *(const float **)args[1];
    float *y = *(float **)args[2];
    int n = *(int *)args[3];
    for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
    seen.a = a;
    seen.n = n;
    seen.launch = *l;
    seen.calls++;
}
static const char saxpy_stub = 0;   /* the "host function" address of the kernel */

static void empty_impl(void **args, const emu_launch *l) { (void)args; (void)l; }
static void slow_impl(void **args, const emu_launch *l) { (void)args; (void)l; et_sleep_ms(30); }

static int unknown_seen;
static void unknown_impl(void **args, const emu_launch *l) { (void)l; unknown_seen = *(int *)args[0]; }

static void test_launch_and_args(CUstream s)
{
    size_t sizes[4] = {sizeof(float), sizeof(void *), sizeof(void *), sizeof(int)};
    EXPECT(emuRegisterKernel(&saxpy_stub, "_Z5saxpyfPKfPfi", saxpy_impl, 4, sizes) == 0);
    void *f1 = NULL;
    EXPECT(emuGetFunction(&f1, &saxpy_stub, NULL) == CUDA_SUCCESS);
    CUmodule mod;
    CUfunction f2;
    OK(cuModuleLoadData(&mod, "any image"));
    OK(cuModuleGetFunction(&f2, mod, "_Z5saxpyfPKfPfi"));
    EXPECT(f1 == (void *)f2);                              /* one kernel, one handle */
    CUdeviceptr x, y;
    REQUIRE(cuMemAlloc(&x, 64 * sizeof(float)));
    REQUIRE(cuMemAlloc(&y, 64 * sizeof(float)));
    float *hx = (float *)(uintptr_t)x, *hy = (float *)(uintptr_t)y;
    for (int i = 0; i < 64; i++) { hx[i] = (float)i; hy[i] = 1.0f; }
    float a = 2.0f;
    int n = 64;
    void *params[] = {&a, &x, &y, &n};
    struct et_gate gate = {0};
    uint64_t launched0 = emuGetCounter("kernels.launched"), done0 = emuGetCounter("kernels.completed");
    OK(cuLaunchHostFunc(s, et_gate_wait, &gate));
    OK(cuLaunchKernel(f2, 2, 1, 1, 32, 1, 1, 0, s, params, NULL));
    a = 100.0f;                                            /* changed after the launch */
    n = 1;
    EXPECT(seen.calls == 0);                               /* not run at the call */
    EXPECT(emuGetCounter("kernels.launched") == launched0 + 1);
    EXPECT(emuGetCounter("kernels.completed") == done0);
    et_gate_open(&gate);
    OK(cuStreamSynchronize(s));
    EXPECT(seen.calls == 1 && seen.a == 2.0f && seen.n == 64);   /* values as of the launch */
    EXPECT(hy[10] == 21.0f && hy[63] == 127.0f);
    EXPECT(seen.launch.grid.x == 2 && seen.launch.block.x == 32 && seen.launch.stream == (void *)s);
    EXPECT(emuGetCounter("kernels.completed") == done0 + 1);

    /* Arguments packed in an extra buffer, and cuLaunchKernelEx. */
    struct { float a; int pad; CUdeviceptr x, y; int n; } packed = {1.0f, 0, x, y, 4};
    size_t psize = sizeof packed;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &psize, CU_LAUNCH_PARAM_END};
    OK(cuLaunchKernel(f2, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra));
    OK(cuStreamSynchronize(s));
    EXPECT(seen.calls == 2 && seen.n == 4 && hy[3] == 3.0f + 7.0f);
    CUlaunchConfig cfg = {.gridDimX = 3, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 8, .blockDimY = 2,
                          .blockDimZ = 1, .sharedMemBytes = 0, .hStream = s, .attrs = NULL, .numAttrs = 0};
    a = 0.0f;
    n = 2;
    OK(cuLaunchKernelEx(&cfg, f2, params, NULL));
    OK(cuStreamSynchronize(s));
    EXPECT(seen.calls == 3 && seen.launch.grid.x == 3 && seen.launch.block.y == 2 && seen.n == 2);

    /* Parameter info: CUDA layout (float at 0, pointers 8-aligned, int after). */
    size_t off = 99, size = 99;
    OK(cuFuncGetParamInfo(f2, 0, &off, &size));
    EXPECT(off == 0 && size == 4);
    OK(cuFuncGetParamInfo(f2, 1, &off, &size));
    EXPECT(off == 8 && size == 8);
    OK(cuFuncGetParamInfo(f2, 3, &off, &size));
    EXPECT(off == 24 && size == 4);
    EXPECT_RC(cuFuncGetParamInfo(f2, 4, &off, &size), CUDA_ERROR_INVALID_VALUE);   /* past the last */

    /* Library API resolves to the same kernel. */
    CUlibrary lib;
    CUkernel k;
    CUfunction f3;
    OK(cuLibraryLoadData(&lib, "any", NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "_Z5saxpyfPKfPfi"));
    OK(cuKernelGetFunction(&f3, k));
    EXPECT(f3 == f2);
    OK(cuLibraryUnload(lib));
    OK(cuModuleUnload(mod));
    EXPECT_RC(cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE);
    OK(cuMemFree(x));
    OK(cuMemFree(y));
}

static void test_errors_and_attributes(CUstream s)
{
    CUmodule mod;
    CUfunction missing, f;
    OK(cuModuleLoadData(&mod, "img"));
    OK(cuModuleGetFunction(&missing, mod, "not_registered"));
    EXPECT_RC(cuLaunchKernel(missing, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_NOT_FOUND);
    static const char empty_stub = 0;
    EXPECT(emuRegisterKernel(&empty_stub, "empty", empty_impl, 0, NULL) == 0);
    OK(cuModuleGetFunction(&f, mod, "empty"));
    EXPECT_RC(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuLaunchKernel(f, 1, 1, 1, 32, 32, 2, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuLaunchKernel(f, 1, 70000, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
    static unsigned bogus[64];
    EXPECT_RC(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)bogus, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
    void *params[1] = {NULL}, *extra[] = {CU_LAUNCH_PARAM_END};
    EXPECT_RC(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, extra), CUDA_ERROR_INVALID_VALUE);
    /* Dynamic shared memory beyond 48 KiB needs the attribute. */
    EXPECT_RC(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 64 << 10, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 << 10));
    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 64 << 10, s, NULL, NULL));
    EXPECT_RC(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1 << 20), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 8), CUDA_ERROR_INVALID_VALUE);   /* read-only */
    int v = 0;
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    EXPECT(v == 64 << 10);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    EXPECT(v == 1024);
    EXPECT_RC(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX, f), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamSynchronize(s));

    /* A slow kernel: the stream reports not ready until it finished. */
    static const char slow_stub = 0;
    void *slow;
    EXPECT(emuRegisterKernel(&slow_stub, NULL, slow_impl, 0, NULL) == 0);
    EXPECT(emuGetFunction(&slow, &slow_stub, NULL) == CUDA_SUCCESS);
    OK(cuLaunchKernel((CUfunction)slow, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    EXPECT_RC(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    OK(cuStreamSynchronize(s));
    OK(cuStreamQuery(s));

    /* Unknown parameter sizes: values cannot be copied, so the launch
     * returns only after the kernel ran with them. */
    static const char unknown_stub = 0;
    void *uf;
    EXPECT(emuRegisterKernel(&unknown_stub, NULL, unknown_impl, -1, NULL) == 0);
    EXPECT(emuGetFunction(&uf, &unknown_stub, NULL) == CUDA_SUCCESS);
    int value = 42;
    void *uparams[] = {&value};
    size_t o, sz;
    EXPECT_RC(cuFuncGetParamInfo((CUfunction)uf, 0, &o, &sz), CUDA_ERROR_NOT_SUPPORTED);
    OK(cuLaunchKernel((CUfunction)uf, 1, 1, 1, 1, 1, 1, 0, s, uparams, NULL));
    EXPECT(unknown_seen == 42);
    OK(cuModuleUnload(mod));
}

static void bench(CUstream s)
{
    static const char stub = 0;
    void *f;
    emuRegisterKernel(&stub, NULL, empty_impl, 0, NULL);
    emuGetFunction(&f, &stub, NULL);
    unsigned old = emuSetJitterUs(0);
    enum { LAUNCHES = 20000, TRIPS = 2000 };
    double t0 = et_now_ms();
    for (int i = 0; i < LAUNCHES; i++) cuLaunchKernel((CUfunction)f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
    OK(cuStreamSynchronize(s));
    double per_launch = (et_now_ms() - t0) * 1e6 / LAUNCHES;
    t0 = et_now_ms();
    for (int i = 0; i < TRIPS; i++) {
        cuLaunchKernel((CUfunction)f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
        cuStreamSynchronize(s);
    }
    double per_trip = (et_now_ms() - t0) * 1e6 / TRIPS;
    emuSetJitterUs(old);
    printf("empty cuLaunchKernel: %.0f ns/launch (queued, throughput); launch+sync round trip: %.0f ns\n",
           per_launch, per_trip);
}

int main(void)
{
    et_setup(0);
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    test_launch_and_args(s);
    test_errors_and_attributes(s);
    bench(s);
    int done = 0;
    OK(cuLaunchHostFunc(s, set_flag, &done));
    OK(cuStreamSynchronize(s));
    EXPECT(done);
    OK(cuStreamDestroy(s));
    return et_finish("test_drv_exec_kernel");
}
