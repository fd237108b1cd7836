/* test_drv_mem_pool: stream-ordered allocation and memory pools: reuse rules
 * (same stream at once, other streams only after the free has run and only
 * with opportunistic reuse), release threshold and trimming, pool attributes
 * (High reset by setting 0), created pools, errors, graph allocations. */
#include "driver/mem_testutil.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

/* A host function that holds its stream until the test opens the gate:
 * proves that later work on that stream has not run yet. */
static volatile int gate_open;
static void gate_wait(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&gate_open, __ATOMIC_ACQUIRE)) {
        struct timespec ts = { 0, 200000 };
        nanosleep(&ts, NULL);
    }
}

static cuuint64_t attr64(CUmemoryPool pool, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    OK(cuMemPoolGetAttribute(pool, a, &v));
    return v;
}

static void set64(CUmemoryPool pool, CUmemPool_attribute a, cuuint64_t v)
{
    OK(cuMemPoolSetAttribute(pool, a, &v));
}

static void test_defaults_and_attributes(CUmemoryPool pool)
{
    CUmemoryPool cur = NULL, dflt = NULL;
    OK(cuDeviceGetMemPool(&cur, 0));
    EXPECT(cur == pool);                                                              /* current = default at start */
    EXPECT_RC(cuDeviceGetDefaultMemPool(&dflt, 9), CUDA_ERROR_INVALID_DEVICE);
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    OK(cuMemGetDefaultMemPool(&dflt, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
    EXPECT(dflt == pool);
    int v = 0;
    OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, &v));
    EXPECT(v == 1);
    OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &v));
    EXPECT(v == 1);
    OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &v));
    EXPECT(v == 1);
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == 0);
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
    cuuint64_t one = 1;
    EXPECT_RC(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &one), CUDA_ERROR_INVALID_VALUE); /* read-only */
    EXPECT_RC(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);        /* only 0 */
    EXPECT_RC(cuMemPoolGetAttribute(NULL, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
}

static void test_accounting(CUmemoryPool pool, CUstream s)
{
    set64(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 0);
    size_t f0, total, f1;
    OK(cuMemGetInfo(&f0, &total));
    CUdeviceptr a, b;
    OK(cuMemAllocAsync(&a, 1000, s));
    OK(cuMemAllocAsync(&b, 3 << 20, s));
    /* used counts the bytes asked for, unrounded (an H200's driver: torch's
     * max_memory_allocated under cudaMallocAsync read 1161840652) */
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 1000 + (3 << 20));
    cuuint64_t reserved = attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
    EXPECT(reserved >= 1024 + (3 << 20));
    OK(cuMemGetInfo(&f1, &total));
    EXPECT(f0 - f1 == reserved);                                                      /* pool memory is device memory */
    unsigned type = 0;
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, b + 5));
    EXPECT(type == CU_MEMORYTYPE_DEVICE);
    CUmemoryPool owner = NULL;
    OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
    EXPECT(owner == pool);
    OK(cuMemFreeAsync(b, s));
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 1000);
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 1000 + (3 << 20));
    set64(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0);                                    /* 0 resets High to current */
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 1000);
    EXPECT_RC(cuMemFreeAsync(b, s), CUDA_ERROR_INVALID_VALUE);                        /* double free */
    OK(cuMemFreeAsync(a, s));
    OK(cuStreamSynchronize(s));
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);                  /* threshold 0: all returned */
    set64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0);
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) == 0);
    OK(cuMemGetInfo(&f1, &total));
    EXPECT(f1 == f0);

    int host;
    EXPECT_RC(cuMemFreeAsync((CUdeviceptr)(uintptr_t)&host, s), CUDA_ERROR_INVALID_VALUE); /* not pool memory */
    CUdeviceptr legacy;
    OK(cuMemAlloc(&legacy, 4096));
    EXPECT_RC(cuMemFreeAsync(legacy, s), CUDA_ERROR_INVALID_VALUE);                   /* cuMemAlloc memory */
    OK(cuMemFree(legacy));
    EXPECT_RC(cuMemAllocAsync(&a, 0, s), CUDA_ERROR_INVALID_VALUE);
}

static void test_reuse_rules(CUmemoryPool pool, CUstream s, CUstream t)
{
    set64(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, UINT64_MAX);                       /* keep freed blocks */
    CUdeviceptr a, b, c;

    /* same stream: reusable at once, before the free has executed */
    gate_open = 0;
    OK(cuLaunchHostFunc(s, gate_wait, NULL));
    OK(cuMemAllocAsync(&a, 1 << 20, s));
    OK(cuMemFreeAsync(a, s));
    OK(cuMemAllocAsync(&b, 1 << 20, s));
    EXPECT(b == a);
    /* other stream: not while the free is still queued */
    OK(cuMemFreeAsync(b, s));
    OK(cuMemAllocAsync(&c, 1 << 20, t));
    EXPECT(c != a);
    __atomic_store_n(&gate_open, 1, __ATOMIC_RELEASE);
    OK(cuStreamSynchronize(s));
    /* ...and once it has run, with opportunistic reuse (the default) */
    CUdeviceptr d;
    OK(cuMemAllocAsync(&d, 1 << 20, t));
    EXPECT(d == a);
    OK(cuMemFreeAsync(c, t));
    OK(cuMemFreeAsync(d, t));
    OK(cuStreamSynchronize(t));

    /* without opportunistic reuse, a completed free on another stream is not reused */
    int off = 0;
    OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &off));
    CUdeviceptr e, f;
    OK(cuMemAllocAsync(&e, 64 << 10, s));
    OK(cuMemFreeAsync(e, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemAllocAsync(&f, 64 << 10, t));
    EXPECT(f != e);
    OK(cuMemFreeAsync(f, t));
    int on = 1;
    OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &on));
    OK(cuStreamSynchronize(t));

    /* trimming gives back what is free */
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) > 0);
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
    OK(cuMemPoolTrimTo(pool, 0));
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);

    /* cuMemFree of stream-ordered memory: no sync, memory back in the pool */
    OK(cuMemAllocAsync(&a, 4096, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemFree(a));
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
    EXPECT_RC(cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemPoolTrimTo(pool, 0));
    set64(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 0);
}

static void test_created_pool(CUmemoryPool dflt, CUstream s)
{
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool;
    CUmemPoolProps bad = props;
    bad.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
    EXPECT_RC(cuMemPoolCreate(&pool, &bad), CUDA_ERROR_INVALID_VALUE);
    bad = props;
    bad.location.id = 5;
    EXPECT_RC(cuMemPoolCreate(&pool, &bad), CUDA_ERROR_INVALID_DEVICE);
    OK(cuMemPoolCreate(&pool, &props));
    EXPECT(pool != dflt);
    CUdeviceptr a, b;
    OK(cuMemAllocFromPoolAsync(&a, 8192, pool, s));
    CUmemoryPool owner = NULL;
    OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
    EXPECT(owner == pool);
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 8192);
    EXPECT(attr64(dflt, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
    OK(cuDeviceSetMemPool(0, pool));
    CUmemoryPool cur;
    OK(cuDeviceGetMemPool(&cur, 0));
    EXPECT(cur == pool);
    OK(cuMemAllocAsync(&b, 100, s));                                                  /* from the current pool */
    OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, b));
    EXPECT(owner == pool);
    EXPECT_RC(cuMemPoolDestroy(dflt), CUDA_ERROR_INVALID_VALUE);                      /* the default pool stays */
    OK(cuMemFreeAsync(a, s));
    OK(cuMemFreeAsync(b, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemPoolDestroy(pool));
    OK(cuDeviceGetMemPool(&cur, 0));
    EXPECT(cur == dflt);                                                              /* back to the default */
}

static void test_access(CUmemoryPool pool)
{
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    OK(cuMemPoolGetAccess(&f, pool, &loc));
    EXPECT(f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);                                  /* its own device */
    CUmemAccessDesc d = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_NONE };
    EXPECT_RC(cuMemPoolSetAccess(pool, &d, 1), CUDA_ERROR_INVALID_VALUE);             /* cannot lose it */
    d.location.id = 6;
    EXPECT_RC(cuMemPoolSetAccess(pool, &d, 1), CUDA_ERROR_INVALID_DEVICE);
    loc.id = 6;
    EXPECT_RC(cuMemPoolGetAccess(&f, pool, &loc), CUDA_ERROR_INVALID_DEVICE);
}

/* Resetting the primary context frees the device's stream-ordered memory. */
static void test_reset(CUmemoryPool pool, CUstream s)
{
    CUdeviceptr a;
    size_t f0, t0, f1, t1;
    OK(cuMemGetInfo(&f0, &t0));
    OK(cuMemAllocAsync(&a, 8 << 20, s));
    OK(cuStreamSynchronize(s));
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == (8 << 20));
    OK(cuDevicePrimaryCtxReset(0));
    mt_setup(0);
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
    EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
    OK(cuMemGetInfo(&f1, &t1));
    EXPECT(f1 == t1);
    unsigned type;
    EXPECT_RC(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a), CUDA_ERROR_INVALID_VALUE);
    (void)f0;
}

static void test_graph_allocation(CUstream s)
{
    CUdeviceptr g = 0;
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(cuMemAllocAsync(&g, 4096, s));                                                 /* a graph allocation node */
    CUdeviceptr legacy_pool;
    EXPECT(g != 0);
    OK(cuMemFreeAsync(g, s));                                                         /* a free node */
    CUgraph graph;
    OK(cuStreamEndCapture(s, &graph));
    unsigned type = 0;
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, g));
    EXPECT(type == CU_MEMORYTYPE_DEVICE);                                             /* valid for replays */
    OK(cuGraphDestroy(graph));
    OK(cuMemAllocAsync(&legacy_pool, 64, s));
    OK(cuMemFreeAsync(legacy_pool, s));
    OK(cuMemFreeAsync(g, s));                                                         /* freed outside capture */
    OK(cuStreamSynchronize(s));
    EXPECT_RC(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, g), CUDA_ERROR_INVALID_VALUE);
}

int main(void)
{
    mt_setup(0);
    CUmemoryPool pool;
    OK(cuDeviceGetDefaultMemPool(&pool, 0));
    CUstream s, t;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
    test_defaults_and_attributes(pool);
    test_accounting(pool, s);
    test_reuse_rules(pool, s, t);
    test_created_pool(pool, s);
    test_graph_allocation(s);
    test_access(pool);
    OK(cuStreamDestroy(s));
    OK(cuStreamDestroy(t));
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    test_reset(pool, s);
    return mt_finish("test_drv_mem_pool");
}
