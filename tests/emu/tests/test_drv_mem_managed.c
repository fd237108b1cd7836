/* test_drv_mem_managed: managed memory: allocation rules, pointer attributes,
 * stream-ordered prefetch and its migration counters, advice and range
 * attributes, migrations caused by copies and kernels, free. */
#include "driver/mem_testutil.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

#define MB (1u << 20)
#define PAGES_PER_MB 16   /* 64 KiB managed pages */

static volatile int gate_open;
static void gate_wait(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&gate_open, __ATOMIC_ACQUIRE)) {
        struct timespec ts = { 0, 200000 };
        nanosleep(&ts, NULL);
    }
}

static uint64_t h2d(void) { return emuGetCounter("managed.migrations.h2d"); }
static uint64_t d2h(void) { return emuGetCounter("managed.migrations.d2h"); }

static CUmemLocation dev_loc(int d) { CUmemLocation l = { CU_MEM_LOCATION_TYPE_DEVICE, d }; return l; }
static CUmemLocation host_loc(void) { CUmemLocation l = { CU_MEM_LOCATION_TYPE_HOST, 0 }; return l; }

static int range_int(CUdeviceptr p, size_t n, CUmem_range_attribute a)
{
    int v = 12345;
    OK(cuMemRangeGetAttribute(&v, sizeof v, a, p, n));
    return v;
}

static void test_alloc_rules(void)
{
    CUdeviceptr p;
    EXPECT_RC(cuMemAllocManaged(&p, MB, 0), CUDA_ERROR_INVALID_VALUE);                 /* GLOBAL or HOST */
    EXPECT_RC(cuMemAllocManaged(&p, MB, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAllocManaged(&p, 3 * MB + 5, CU_MEM_ATTACH_GLOBAL));
    unsigned managed = 0, type = 0;
    void *host = NULL;
    OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p + 100));
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
    OK(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, p));
    EXPECT(managed == 1 && type == CU_MEMORYTYPE_DEVICE && host == (void *)(uintptr_t)p);
    CUdeviceptr base;
    size_t size;
    OK(cuMemGetAddressRange(&base, &size, p + 3 * MB));
    EXPECT(base == p && size == 3 * MB + 5);
    memset((void *)(uintptr_t)p, 1, 3 * MB + 5);                                      /* host-accessible */
    size_t f0, t0, f1, t1;
    OK(cuMemGetInfo(&f0, &t0));
    CUdeviceptr q;
    OK(cuMemAllocManaged(&q, 64 * MB, CU_MEM_ATTACH_HOST));
    OK(cuMemGetInfo(&f1, &t1));
    EXPECT(f1 == f0);                                                                 /* not device memory */
    OK(cuMemFree(q));
    OK(cuMemFree(p));
    EXPECT_RC(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);                                /* double free */
}

static void test_prefetch(CUstream s)
{
    CUdeviceptr p;
    OK(cuMemAllocManaged(&p, 2 * MB, CU_MEM_ATTACH_GLOBAL));
    memset((void *)(uintptr_t)p, 7, MB);                                              /* CPU populates the first MB */
    EXPECT(range_int(p, 2 * MB, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION) == CU_DEVICE_INVALID);
    uint64_t h0 = h2d(), d0 = d2h();
    gate_open = 0;
    OK(cuLaunchHostFunc(s, gate_wait, NULL));
    OK(cuMemPrefetchAsync(p, 2 * MB, dev_loc(0), 0, s));
    EXPECT(h2d() == h0);                                                              /* stream-ordered: not yet */
    __atomic_store_n(&gate_open, 1, __ATOMIC_RELEASE);
    OK(cuStreamSynchronize(s));
    EXPECT(h2d() - h0 == PAGES_PER_MB);                                               /* only populated pages move */
    EXPECT(range_int(p, 2 * MB, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION) == 0);
    EXPECT(range_int(p, 2 * MB, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE) == CU_MEM_LOCATION_TYPE_DEVICE);
    OK(cuMemPrefetchAsync(p, 2 * MB, dev_loc(0), 0, s));
    OK(cuStreamSynchronize(s));
    EXPECT(h2d() - h0 == PAGES_PER_MB);                                               /* already there */
    OK(cuMemPrefetchAsync(p + MB, MB, host_loc(), 0, s));
    OK(cuStreamSynchronize(s));
    EXPECT(d2h() - d0 == PAGES_PER_MB);
    EXPECT(range_int(p + MB, MB, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION) == CU_DEVICE_CPU);
    EXPECT(range_int(p, 2 * MB, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION) == CU_DEVICE_INVALID); /* mixed */
    /* a copy reading device-resident pages to the host migrates them */
    static char buf[128 << 10];
    uint64_t d1 = d2h();
    OK(cuMemcpyDtoH(buf, p, sizeof buf));
    EXPECT(d2h() - d1 == 2);
    EXPECT(buf[0] == 7 && buf[sizeof buf - 1] == 7);
    /* and a copy writing them from the host moves them to the device */
    uint64_t h1 = h2d();
    OK(cuMemcpyHtoD(p, buf, sizeof buf));
    OK(cuStreamSynchronize(s));
    OK(cuCtxSynchronize());
    EXPECT(h2d() - h1 == 2);

    EXPECT_RC(cuMemPrefetchAsync(p, MB, dev_loc(0), 1, s), CUDA_ERROR_INVALID_VALUE);  /* flags must be 0 */
    EXPECT_RC(cuMemPrefetchAsync(p, MB, dev_loc(9), 0, s), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(cuMemPrefetchAsync(p, 3 * MB, dev_loc(0), 0, s), CUDA_ERROR_INVALID_VALUE); /* past the allocation */
    CUdeviceptr d;
    OK(cuMemAlloc(&d, MB));
    EXPECT_RC(cuMemPrefetchAsync(d, MB, dev_loc(0), 0, s), CUDA_ERROR_INVALID_VALUE);  /* not managed */
    OK(cuMemFree(d));
    OK(cuMemFree(p));
}

static void test_advise(void)
{
    CUdeviceptr p;
    OK(cuMemAllocManaged(&p, 2 * MB, CU_MEM_ATTACH_GLOBAL));
    EXPECT(range_int(p, 2 * MB, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION) == CU_DEVICE_INVALID);
    OK(cuMemAdvise(p, 2 * MB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host_loc()));
    EXPECT(range_int(p, 2 * MB, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION) == CU_DEVICE_CPU);
    EXPECT(range_int(p, 2 * MB, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE) == CU_MEM_LOCATION_TYPE_HOST);
    OK(cuMemAdvise(p, MB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev_loc(0)));
    EXPECT(range_int(p, MB, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION) == 0);
    EXPECT(range_int(p, MB, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID) == 0);
    EXPECT(range_int(p, 2 * MB, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION) == CU_DEVICE_INVALID); /* not uniform */
    OK(cuMemAdvise(p, 2 * MB, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, dev_loc(0)));
    EXPECT(range_int(p, 2 * MB, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION) == CU_DEVICE_INVALID);

    OK(cuMemAdvise(p, 2 * MB, CU_MEM_ADVISE_SET_ACCESSED_BY, dev_loc(0)));
    int acc[3] = { 9, 9, 9 };
    OK(cuMemRangeGetAttribute(acc, sizeof acc, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, 2 * MB));
    EXPECT(acc[0] == 0 && acc[1] == CU_DEVICE_INVALID && acc[2] == CU_DEVICE_INVALID);
    OK(cuMemAdvise(p, 2 * MB, CU_MEM_ADVISE_UNSET_ACCESSED_BY, dev_loc(0)));
    OK(cuMemRangeGetAttribute(acc, sizeof acc, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, 2 * MB));
    EXPECT(acc[0] == CU_DEVICE_INVALID);

    OK(cuMemAdvise(p, 2 * MB, CU_MEM_ADVISE_SET_READ_MOSTLY, dev_loc(0)));
    EXPECT(range_int(p, 2 * MB, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY) == 1);
    OK(cuMemAdvise(p + MB, MB, CU_MEM_ADVISE_UNSET_READ_MOSTLY, dev_loc(0)));
    EXPECT(range_int(p, 2 * MB, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY) == 0);

    int pref = 0, rm = 0;
    void *data[2] = { &pref, &rm };
    size_t sizes[2] = { 4, 4 };
    CUmem_range_attribute attrs[2] = { CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY };
    OK(cuMemRangeGetAttributes(data, sizes, attrs, 2, p, MB));
    EXPECT(pref == CU_DEVICE_INVALID && rm == 1);

    int v;
    EXPECT_RC(cuMemRangeGetAttribute(&v, 8, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, MB), CUDA_ERROR_INVALID_VALUE); /* size 4 */
    EXPECT_RC(cuMemAdvise(p, MB, (CUmem_advise)42, dev_loc(0)), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemAdvise(p, MB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev_loc(8)), CUDA_ERROR_INVALID_DEVICE);
    int local;
    EXPECT_RC(cuMemAdvise((CUdeviceptr)(uintptr_t)&local, 4, CU_MEM_ADVISE_SET_READ_MOSTLY, dev_loc(0)),
              CUDA_ERROR_INVALID_VALUE);                                              /* not managed memory */
    OK(cuMemFree(p));
}

/* A kernel reads and writes through its pointer arguments on the device:
 * the managed pages from each pointer to the end of its allocation migrate
 * when the kernel runs (not at the launch), once. */
static char scale_stub;
static void scale_impl(void **args, const emu_launch *l)
{
    (void)l;
    float *x = *(float **)args[0];
    int n = *(int *)args[1];
    for (int i = 0; i < n; i++) x[i] *= 2.0f;
}

static void test_kernel_touch(CUstream s)
{
    size_t sizes[] = { sizeof(float *), sizeof(int) };
    EXPECT(emuRegisterKernel(&scale_stub, "_Z5scalePfi", scale_impl, 2, sizes) == 0);
    void *fv = NULL;
    EXPECT(emuGetFunction(&fv, &scale_stub, NULL) == CUDA_SUCCESS);
    CUfunction f = (CUfunction)fv;
    CUdeviceptr m;
    OK(cuMemAllocManaged(&m, 4 * 65536, CU_MEM_ATTACH_GLOBAL));
    float *x = (float *)(uintptr_t)m;
    for (size_t i = 0; i < 4 * 65536 / sizeof(float); i++) x[i] = 1.0f;   /* CPU-populated */
    CUdeviceptr from_page1 = m + 65536;
    int n = 16;
    void *params[] = { &from_page1, &n };
    gate_open = 0;
    OK(cuLaunchHostFunc(s, gate_wait, NULL));
    uint64_t before = h2d();
    OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
    EXPECT(h2d() == before);                        /* nothing moves before the kernel runs */
    __atomic_store_n(&gate_open, 1, __ATOMIC_RELEASE);
    OK(cuStreamSynchronize(s));
    EXPECT(h2d() == before + 3);                    /* pages 1..3: from the argument to the end */
    EXPECT(x[65536 / sizeof(float)] == 2.0f && x[0] == 1.0f);
    OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
    OK(cuStreamSynchronize(s));
    EXPECT(h2d() == before + 3);                    /* already on the device */
    CUdeviceptr whole = m;
    void *params0[] = { &whole, &n };
    OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params0, NULL));
    OK(cuStreamSynchronize(s));
    EXPECT(h2d() == before + 4);                    /* page 0 joins */
    OK(cuMemFree(m));
}

int main(void)
{
    mt_setup(0);
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    test_alloc_rules();
    test_prefetch(s);
    test_advise();
    test_kernel_touch(s);
    OK(cuStreamDestroy(s));
    return mt_finish("test_drv_mem_managed");
}
