/* Memory: device, pinned host, registered, managed allocations; pointer
 * attributes; memset; legacy IPC handles; cudaMemGetInfo. */
#include <string.h>
#include "rt_internal.h"

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    if (!devPtr)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    /* The runtime answers a 0-byte request itself (cuMemAlloc rejects 0):
     * success with NULL, which frameworks rely on for empty tensors. */
    if (size == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    CUdeviceptr p = 0;
    CUresult r = EMU_DRV(cuMemAlloc_v2)(&p, size);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *devPtr = (void *)(uintptr_t)p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr)
{
    /* cudaFree(0) is the classic "initialize the runtime now" idiom. */
    RT_ENTER();
    if (!devPtr)
        return cudaSuccess;
    /* cuMemFree waits for the device, as cudaFree is observed to do. */
    return rt_drv(EMU_DRV(cuMemFree_v2)((CUdeviceptr)(uintptr_t)devPtr));
}

cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    if (!devPtr || !pitch)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    /* Rows start on 512-byte boundaries, what the real runtime picks on
     * current GPUs (coarser than the texture pitch alignment). */
    const size_t align = 512;
    size_t p = (width + align - 1) / align * align;
    *pitch = p;
    if (p == 0 || height == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    if (height > SIZE_MAX / p)
        return rt_set(cudaErrorMemoryAllocation);
    CUdeviceptr d = 0;
    CUresult r = EMU_DRV(cuMemAlloc_v2)(&d, p * height);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *devPtr = (void *)(uintptr_t)d;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemGetInfo_v2)(free, total));
}

/* ---- pinned and registered host memory ----------------------------------- */
cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    if (!ptr)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    return rt_drv(EMU_DRV(cuMemAllocHost_v2)(ptr, size));
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    if (!pHost)
        return rt_set(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    if (size == 0) {
        *pHost = NULL;
        return cudaSuccess;
    }
    /* cudaHostAlloc* flags equal CU_MEMHOSTALLOC_* bits. */
    return rt_drv(EMU_DRV(cuMemHostAlloc)(pHost, size, flags));
}

cudaError_t cudaFreeHost(void *ptr)
{
    RT_ENTER();
    if (!ptr)
        return cudaSuccess;
    return rt_drv(EMU_DRV(cuMemFreeHost)(ptr));
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    if (!ptr || size == 0)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    /* cudaHostRegister* flags equal CU_MEMHOSTREGISTER_* bits. */
    return rt_drv(EMU_DRV(cuMemHostRegister_v2)(ptr, size, flags));
}

cudaError_t cudaHostUnregister(void *ptr)
{
    if (!ptr)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemHostUnregister)(ptr));
}

cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    if (!pDevice || flags != 0)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    CUdeviceptr d = 0;
    CUresult r = EMU_DRV(cuMemHostGetDevicePointer_v2)(&d, pHost, 0);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *pDevice = (void *)(uintptr_t)d;
    return cudaSuccess;
}

cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
    if (!pFlags)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemHostGetFlags)(pFlags, pHost));
}

/* ---- managed memory -------------------------------------------------------- */
cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    if (!devPtr || size == 0)
        return rt_set(cudaErrorInvalidValue);
    if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    CUdeviceptr p = 0;
    CUresult r = EMU_DRV(cuMemAllocManaged)(&p, size, flags);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *devPtr = (void *)(uintptr_t)p;
    return cudaSuccess;
}

static CUmemLocation rt_location(struct cudaMemLocation l)
{
    /* cudaMemLocationType and CUmemLocationType share their numbering. */
    CUmemLocation c = { .type = (CUmemLocationType)l.type, .id = l.id };
    return c;
}

static cudaError_t rt_prefetch(const void *devPtr, size_t count, struct cudaMemLocation location,
                               unsigned int flags, CUstream stream)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemPrefetchAsync_v2)((CUdeviceptr)(uintptr_t)devPtr, count,
                                                 rt_location(location), flags, stream));
}

cudaError_t cudaMemPrefetchAsync(const void *devPtr, size_t count, struct cudaMemLocation location,
                                 unsigned int flags, cudaStream_t stream)
{
    return rt_prefetch(devPtr, count, location, flags, (CUstream)stream);
}

cudaError_t cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count, struct cudaMemLocation location,
                                      unsigned int flags, cudaStream_t stream);
cudaError_t cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count, struct cudaMemLocation location,
                                      unsigned int flags, cudaStream_t stream)
{
    return rt_prefetch(devPtr, count, location, flags, rt_ptsz(stream));
}

cudaError_t cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
                          struct cudaMemLocation location)
{
    RT_ENTER();
    /* cudaMemoryAdvise and CUmem_advise share their numbering. */
    return rt_drv(EMU_DRV(cuMemAdvise_v2)((CUdeviceptr)(uintptr_t)devPtr, count,
                                          (CUmem_advise)advice, rt_location(location)));
}

/* ---- pointer attributes ---------------------------------------------------- */
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
    if (!attributes)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    CUpointer_attribute which[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER,
        CU_POINTER_ATTRIBUTE_IS_MANAGED,
    };
    unsigned int mem_type = 0;
    int ordinal = -2;
    CUdeviceptr dptr = 0;
    void *hptr = NULL;
    unsigned int managed = 0;   /* the driver writes a bool-sized value: zeroed first */
    void *data[] = { &mem_type, &ordinal, &dptr, &hptr, &managed };
    /* Unlike cuPointerGetAttribute, the plural form succeeds on unknown
     * pointers and leaves the defaults: what CUDA 11+ reports as
     * cudaMemoryTypeUnregistered. */
    CUresult r = EMU_DRV(cuPointerGetAttributes)(5, which, data, (CUdeviceptr)(uintptr_t)ptr);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    memset(attributes, 0, sizeof *attributes);
    switch (mem_type) {
    case CU_MEMORYTYPE_DEVICE:
        attributes->type = (managed & 0xff) ? cudaMemoryTypeManaged : cudaMemoryTypeDevice;
        attributes->device = ordinal;
        attributes->devicePointer = (void *)(uintptr_t)dptr;
        attributes->hostPointer = (managed & 0xff) ? hptr : NULL;
        break;
    case CU_MEMORYTYPE_HOST:
        attributes->type = cudaMemoryTypeHost;
        attributes->device = ordinal;
        attributes->devicePointer = (void *)(uintptr_t)dptr;
        attributes->hostPointer = hptr;
        break;
    default:
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->device = -2;
        attributes->devicePointer = NULL;
        attributes->hostPointer = (void *)ptr;
        break;
    }
    return cudaSuccess;
}

/* ---- memset ---------------------------------------------------------------- */
cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemsetD8_v2)((CUdeviceptr)(uintptr_t)devPtr, (unsigned char)value, count));
}

/* The driver's per-thread forms (cuda.h declares them only for
 * --default-stream per-thread builds). */
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N);
CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                              size_t Height);

cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count);
cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    RT_ENTER();
    /* Like cudaMemset (asynchronous except on pinned host memory), ordered on
     * the per-thread stream. */
    return rt_drv(EMU_DRV(cuMemsetD8_v2_ptds)((CUdeviceptr)(uintptr_t)devPtr, (unsigned char)value, count));
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemsetD8Async)((CUdeviceptr)(uintptr_t)devPtr, (unsigned char)value, count,
                                           (CUstream)stream));
}

cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream);
cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return cudaMemsetAsync(devPtr, value, count, rt_ptsz(stream));
}

cudaError_t cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width, size_t height)
{
    RT_ENTER();
    if (height > 1 && pitch < width)
        return rt_set(cudaErrorInvalidPitchValue);
    return rt_drv(EMU_DRV(cuMemsetD2D8_v2)((CUdeviceptr)(uintptr_t)devPtr, pitch, (unsigned char)value,
                                           width, height));
}

cudaError_t cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t stream)
{
    RT_ENTER();
    if (height > 1 && pitch < width)
        return rt_set(cudaErrorInvalidPitchValue);
    return rt_drv(EMU_DRV(cuMemsetD2D8Async)((CUdeviceptr)(uintptr_t)devPtr, pitch, (unsigned char)value,
                                             width, height, (CUstream)stream));
}

cudaError_t cudaMemset2D_ptds(void *devPtr, size_t pitch, int value, size_t width, size_t height);
cudaError_t cudaMemset2D_ptds(void *devPtr, size_t pitch, int value, size_t width, size_t height)
{
    RT_ENTER();
    if (height > 1 && pitch < width)
        return rt_set(cudaErrorInvalidPitchValue);
    return rt_drv(EMU_DRV(cuMemsetD2D8_v2_ptds)((CUdeviceptr)(uintptr_t)devPtr, pitch, (unsigned char)value,
                                                width, height));
}

cudaError_t cudaMemset2DAsync_ptsz(void *devPtr, size_t pitch, int value, size_t width, size_t height,
                                   cudaStream_t stream);
cudaError_t cudaMemset2DAsync_ptsz(void *devPtr, size_t pitch, int value, size_t width, size_t height,
                                   cudaStream_t stream)
{
    return cudaMemset2DAsync(devPtr, pitch, value, width, height, rt_ptsz(stream));
}

/* ---- legacy IPC ------------------------------------------------------------ */
_Static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(CUipcMemHandle), "IPC handle layouts differ");

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    if (!handle)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    CUipcMemHandle h;
    CUresult r = EMU_DRV(cuIpcGetMemHandle)(&h, (CUdeviceptr)(uintptr_t)devPtr);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    memcpy(handle, &h, sizeof h);
    return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags)
{
    if (!devPtr)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    CUipcMemHandle h;
    memcpy(&h, &handle, sizeof h);
    CUdeviceptr d = 0;
    /* cudaIpcMemLazyEnablePeerAccess == CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS. */
    CUresult r = EMU_DRV(cuIpcOpenMemHandle_v2)(&d, h, flags);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *devPtr = (void *)(uintptr_t)d;
    return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuIpcCloseMemHandle)((CUdeviceptr)(uintptr_t)devPtr));
}
