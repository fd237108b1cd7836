/* test_drv_mem_host: the pinned host registry (cuMemHostAlloc, cuMemAllocHost,
 * cuMemHostRegister/Unregister, cuMemHostGetDevicePointer/GetFlags) and how
 * pointers are classified (cuPointerGetAttribute(s)), one rule per check. */
#include "driver/mem_testutil.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

static unsigned mem_type(const void *p, CUresult *rc)
{
    unsigned t = 0;
    *rc = cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p);
    return t;
}

static void test_host_alloc(void)
{
    void *p = NULL, *q = NULL;
    EXPECT_RC(cuMemHostAlloc(&p, 4096, 0x80), CUDA_ERROR_INVALID_VALUE);              /* unknown flag */
    EXPECT_RC(cuMemHostAlloc(&p, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemHostAlloc(NULL, 4096, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemHostAlloc(&p, 10000, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    EXPECT(p != NULL && !emuIsDevicePointer(p));
    memset(p, 7, 10000);                                                              /* host-accessible */
    unsigned flags = 0;
    OK(cuMemHostGetFlags(&flags, (char *)p + 9999));                                  /* any address inside */
    EXPECT(flags == (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    CUdeviceptr d = 0;
    OK(cuMemHostGetDevicePointer(&d, (char *)p + 100, 0));
    EXPECT(d == (CUdeviceptr)(uintptr_t)((char *)p + 100));                           /* unified addressing */
    EXPECT_RC(cuMemHostGetDevicePointer(&d, p, 1), CUDA_ERROR_INVALID_VALUE);         /* flags must be 0 */
    CUresult rc;
    EXPECT(mem_type((char *)p + 5000, &rc) == CU_MEMORYTYPE_HOST && rc == CUDA_SUCCESS);
    OK(cuMemAllocHost(&q, 100));
    OK(cuMemHostGetFlags(&flags, q));
    EXPECT(flags == 0);
    EXPECT_RC(cuMemFreeHost((char *)p + 16), CUDA_ERROR_INVALID_VALUE);                /* interior pointer */
    OK(cuMemFreeHost(p));
    EXPECT_RC(cuMemFreeHost(p), CUDA_ERROR_INVALID_VALUE);                            /* double free */
    EXPECT_RC(cuMemHostGetFlags(&flags, p), CUDA_ERROR_INVALID_VALUE);                /* no longer pinned */
    OK(cuMemFreeHost(q));
}

static void test_register(void)
{
    size_t len = 1 << 20;
    char *buf = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CUresult rc;
    (void)mem_type(buf, &rc);
    EXPECT(rc == CUDA_ERROR_INVALID_VALUE);                                           /* pageable: unknown to the driver */
    EXPECT_RC(cuMemHostRegister(buf, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemHostRegister(NULL, len, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemHostRegister(buf, len, 0x100), CUDA_ERROR_INVALID_VALUE);          /* unknown flag */
    OK(cuMemHostRegister(buf + 100, len, CU_MEMHOSTREGISTER_DEVICEMAP));              /* need not be page aligned */
    EXPECT(mem_type(buf + 100, &rc) == CU_MEMORYTYPE_HOST && rc == CUDA_SUCCESS);
    EXPECT(mem_type(buf + 100 + len - 1, &rc) == CU_MEMORYTYPE_HOST && rc == CUDA_SUCCESS);
    (void)mem_type(buf + 100 + len, &rc);
    EXPECT(rc == CUDA_ERROR_INVALID_VALUE);                                           /* one past the end */
    (void)mem_type(buf + 99, &rc);
    EXPECT(rc == CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemHostRegister(buf + 100, len, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    EXPECT_RC(cuMemHostRegister(buf, 200, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);      /* overlaps the start */
    EXPECT_RC(cuMemHostRegister(buf + len, len, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED); /* overlaps the end */
    OK(cuMemHostRegister(buf + 100 + len, 4096, 0));                                  /* adjacent is fine */
    unsigned flags = 0;
    OK(cuMemHostGetFlags(&flags, buf + 200));
    EXPECT(flags == CU_MEMHOSTREGISTER_DEVICEMAP);
    EXPECT_RC(cuMemHostUnregister(buf + 200), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED); /* not the registered base */
    EXPECT_RC(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    OK(cuMemHostUnregister(buf + 100));
    EXPECT_RC(cuMemHostUnregister(buf + 100), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED); /* twice */
    OK(cuMemHostUnregister(buf + 100 + len));
    (void)mem_type(buf + 100, &rc);
    EXPECT(rc == CUDA_ERROR_INVALID_VALUE);                                           /* pageable again */
    munmap(buf, 2 * len);
    EXPECT_RC(cuMemHostRegister(buf, len, 0), CUDA_ERROR_INVALID_VALUE);              /* unmapped memory */
    void *pinned;
    OK(cuMemHostAlloc(&pinned, 4096, 0));
    EXPECT_RC(cuMemHostRegister(pinned, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    EXPECT_RC(cuMemHostUnregister(pinned), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);    /* allocated, not registered */
    OK(cuMemFreeHost(pinned));
    CUdeviceptr dev;
    OK(cuMemAlloc(&dev, 4096));
    EXPECT_RC(cuMemHostRegister((void *)(uintptr_t)dev, 4096, 0), CUDA_ERROR_INVALID_VALUE); /* device memory */
    OK(cuMemFree(dev));
}

static void test_attributes(void)
{
    CUdeviceptr d;
    OK(cuMemAlloc(&d, 5000));
    unsigned type = 0, managed = 9, mapped = 0, ipc = 0;
    int ordinal = -1;
    CUdeviceptr start = 0, dptr = 0;
    size_t size = 0;
    void *host = (void *)1;
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 10));
    EXPECT(type == CU_MEMORYTYPE_DEVICE);
    OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d));
    EXPECT(ordinal == 0);
    OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
    EXPECT(managed == 0);
    OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 4999));
    OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 4999));
    EXPECT(start == d && size == 5000);
    OK(cuPointerGetAttribute(&dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, d + 8));
    EXPECT(dptr == d + 8);
    EXPECT_RC(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, d), CUDA_ERROR_INVALID_VALUE); /* device only */
    OK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, d));
    EXPECT(mapped == 1);
    OK(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, d));
    EXPECT(ipc == 1);
    unsigned long long id1 = 0, id2 = 0;
    OK(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, d));
    OK(cuMemFree(d));
    EXPECT_RC(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d), CUDA_ERROR_INVALID_VALUE); /* freed */
    OK(cuMemAlloc(&d, 5000));
    OK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, d));
    EXPECT(id1 != id2);                                                               /* IDs are never reused */
    OK(cuMemFree(d));

    /* the plural form: defaults, not an error, for unknown memory */
    int local = 0;
    CUpointer_attribute attrs[3] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                     CU_POINTER_ATTRIBUTE_IS_MANAGED };
    type = 77;
    ordinal = 77;
    managed = 77;
    void *data[3] = { &type, &ordinal, &managed };
    OK(cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)&local));
    EXPECT(type == 0 && managed == 0 && ordinal == -2);
    void *pinned;
    OK(cuMemHostAlloc(&pinned, 64, 0));
    OK(cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)pinned));
    EXPECT(type == CU_MEMORYTYPE_HOST && ordinal == 0 && managed == 0);
    OK(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)(uintptr_t)pinned));
    EXPECT(host == pinned);
    OK(cuMemFreeHost(pinned));
    EXPECT_RC(cuPointerGetAttributes(0, attrs, data, 0), CUDA_ERROR_INVALID_VALUE);

    /* VMM memory: device type, NULL context, the reservation as range */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemGenericAllocationHandle h;
    CUdeviceptr r;
    OK(cuMemCreate(&h, 2 << 20, &prop, 0));
    OK(cuMemAddressReserve(&r, 8 << 20, 0, 0, 0));
    OK(cuMemMap(r + (2 << 20), 2 << 20, 0, h, 0));
    CUcontext ctx = (CUcontext)1;
    OK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, r + (3 << 20)));
    EXPECT(ctx == NULL);
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, r + (3 << 20)));
    EXPECT(type == CU_MEMORYTYPE_DEVICE);
    OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, r + (3 << 20)));
    OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, r + (3 << 20)));
    EXPECT(start == r && size == (8 << 20));
    CUdeviceptr mbase = 0;
    OK(cuPointerGetAttribute(&mbase, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, r + (3 << 20)));
    OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, r + (3 << 20)));
    EXPECT(mbase == r + (2 << 20) && size == (2 << 20));
    unsigned long long types = 0;
    OK(cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, r + (2 << 20)));
    EXPECT(types == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    unsigned access = 9;
    OK(cuPointerGetAttribute(&access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, r + (2 << 20)));
    EXPECT(access == CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE);                          /* before cuMemSetAccess */
    OK(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, r + (2 << 20)));
    EXPECT(ipc == 0);
    EXPECT_RC(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, r), CUDA_ERROR_INVALID_VALUE); /* reserved, unmapped */
    EXPECT(emuIsDevicePointer((void *)(uintptr_t)r));
    OK(cuMemUnmap(r + (2 << 20), 2 << 20));
    OK(cuMemRelease(h));
    OK(cuMemAddressFree(r, 8 << 20));
}

int main(void)
{
    mt_setup(0);
    test_host_alloc();
    test_register();
    test_attributes();
    return mt_finish("test_drv_mem_host");
}
