/* test_drv_mem_multidev: with two emulated devices, memory belongs to the
 * device current at allocation: separate capacities and counters, separate
 * address ranges, the right ordinal in pointer attributes (also for VMM
 * memory of one device mapped in a reservation made while the other was
 * current), per-device default pools (a stream-ordered allocation from its
 * stream's device), and events recorded only on their own device's streams. */
#include "driver/mem_testutil.h"

#include <stdint.h>
#include <string.h>

#define G (2ULL << 20)

static int ordinal_of(CUdeviceptr p)
{
    int d = -9;
    OK(cuPointerGetAttribute(&d, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
    return d;
}

int main(void)
{
    setenv("EMU_DEVICES", "2", 1);
    CUcontext c0 = mt_setup(0);
    CUdevice dev1;
    CUcontext c1;
    REQUIRE(cuDeviceGet(&dev1, 1));
    REQUIRE(cuDevicePrimaryCtxRetain(&c1, dev1));

    CUdeviceptr a0, a1;
    size_t f0_before, t0, f1_before, t1, f, t;
    OK(cuMemGetInfo(&f0_before, &t0));
    OK(cuMemAlloc(&a0, 10 << 20));
    OK(cuCtxSetCurrent(c1));
    OK(cuMemGetInfo(&f1_before, &t1));
    EXPECT(f1_before == t1);                                                          /* device 1 untouched */
    OK(cuMemAlloc(&a1, 4 << 20));
    OK(cuMemGetInfo(&f, &t));
    EXPECT(t1 - f == (4 << 20));
    EXPECT(emuGetCounter("phys.current.1") == (4 << 20));
    EXPECT(emuGetCounter("phys.current.0") == (10 << 20));
    EXPECT(emuGetCounter("phys.current") == (14 << 20));
    EXPECT(ordinal_of(a0) == 0 && ordinal_of(a1) == 1);
    EXPECT(emuIsDevicePointer((void *)(uintptr_t)a1));
    EXPECT(a1 / (4ULL << 40) != a0 / (4ULL << 40) || a1 > a0 + (1ULL << 40));        /* separate ranges */

    /* VMM: a device-1 handle mapped in a reservation made while device 0 was current */
    OK(cuCtxSetCurrent(c0));
    CUdeviceptr r;
    OK(cuMemAddressReserve(&r, 2 * G, 0, 0, 0));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 1;
    CUmemGenericAllocationHandle h;
    OK(cuMemCreate(&h, G, &prop, 0));
    EXPECT(emuGetCounter("phys.current.1") == (4 << 20) + G);
    OK(cuMemMap(r, G, 0, h, 0));
    EXPECT(ordinal_of(r) == 1);
    CUmemAccessDesc d[2] = { { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READ },
                             { { CU_MEM_LOCATION_TYPE_DEVICE, 1 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE } };
    OK(cuMemSetAccess(r, G, d, 2));
    CUmemLocation l0 = { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, l1 = { CU_MEM_LOCATION_TYPE_DEVICE, 1 };
    unsigned long long flags = 0;
    OK(cuMemGetAccess(&flags, &l0, r));
    EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READ);                                   /* per device */
    OK(cuMemGetAccess(&flags, &l1, r));
    EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    OK(cuMemUnmap(r, G));
    OK(cuMemRelease(h));
    OK(cuMemAddressFree(r, 2 * G));
    EXPECT(emuGetCounter("phys.current.1") == (4 << 20));

    /* pools: one default pool per device; a stream's device picks it */
    CUmemoryPool p0, p1;
    OK(cuDeviceGetDefaultMemPool(&p0, 0));
    OK(cuDeviceGetDefaultMemPool(&p1, 1));
    EXPECT(p0 != p1);
    EXPECT_RC(cuDeviceSetMemPool(1, p0), CUDA_ERROR_INVALID_VALUE);                   /* a pool of another device */
    OK(cuCtxSetCurrent(c1));
    CUstream s1;
    OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CUdeviceptr pa;
    OK(cuMemAllocAsync(&pa, 1 << 20, s1));
    EXPECT(ordinal_of(pa) == 1);
    cuuint64_t used = 0;
    OK(cuMemPoolGetAttribute(p1, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
    EXPECT(used == (1 << 20));
    OK(cuMemFreeAsync(pa, s1));
    OK(cuStreamSynchronize(s1));
    /* the stream's device, not the current one: device 0 current */
    OK(cuCtxSetCurrent(c0));
    OK(cuMemAllocAsync(&pa, 1 << 20, s1));
    EXPECT(ordinal_of(pa) == 1);
    OK(cuMemPoolGetAttribute(p0, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
    EXPECT(used == 0);
    OK(cuMemFreeAsync(pa, s1));

    /* events: recorded only on a stream of their own context's device;
     * waited on from any device */
    CUevent e0, e1;
    CUstream s0;
    OK(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
    OK(cuEventCreate(&e0, CU_EVENT_DISABLE_TIMING));
    EXPECT_RC(cuEventRecord(e0, s1), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuEventRecordWithFlags(e0, s1, 0), CUDA_ERROR_INVALID_HANDLE);
    OK(cuEventRecord(e0, s0));
    OK(cuEventRecord(e0, NULL));
    OK(cuCtxSetCurrent(c1));
    EXPECT_RC(cuEventRecord(e0, NULL), CUDA_ERROR_INVALID_HANDLE);   /* device 1's legacy stream */
    OK(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    OK(cuCtxSetCurrent(c0));
    OK(cuEventRecord(e1, s1));                                         /* e1's device, another current */
    OK(cuStreamWaitEvent(s0, e1, 0));
    OK(cuEventSynchronize(e1));
    OK(cuEventDestroy(e0));
    OK(cuEventDestroy(e1));
    OK(cuStreamSynchronize(s0));
    OK(cuStreamDestroy(s0));
    OK(cuCtxSetCurrent(c1));
    OK(cuStreamSynchronize(s1));
    OK(cuStreamDestroy(s1));

    OK(cuMemFree(a1));
    OK(cuCtxSetCurrent(c0));
    OK(cuMemFree(a0));
    EXPECT(emuGetCounter("phys.current") == 0);
    return mt_finish("test_drv_mem_multidev");
}
