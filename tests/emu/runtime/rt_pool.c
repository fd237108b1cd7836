/* Stream-ordered allocation over the driver's memory pools: cudaMallocAsync,
 * cudaFreeAsync, cudaMallocFromPoolAsync, cudaMemPool*, and the device's
 * default/current pool.  Pool attributes, properties and access descriptors
 * share numbering and layout with the driver's. */
#include "rt_internal.h"

_Static_assert(sizeof(struct cudaMemPoolProps) == sizeof(CUmemPoolProps), "pool props layouts differ");
_Static_assert(sizeof(struct cudaMemAccessDesc) == sizeof(CUmemAccessDesc), "access desc layouts differ");
_Static_assert(sizeof(struct cudaMemLocation) == sizeof(CUmemLocation), "location layouts differ");

#define DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    if (!devPtr)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    /* As cudaMalloc: a 0-byte request is answered with NULL. */
    if (size == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    CUdeviceptr p = 0;
    CUresult r = EMU_DRV(cuMemAllocAsync)(&p, size, (CUstream)hStream);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *devPtr = (void *)(uintptr_t)p;
    return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    RT_ENTER();
    if (!devPtr)
        return cudaSuccess;
    return rt_drv(EMU_DRV(cuMemFreeAsync)(DPTR(devPtr), (CUstream)hStream));
}

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{
    if (!ptr)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    CUdeviceptr p = 0;
    CUresult r = EMU_DRV(cuMemAllocFromPoolAsync)(&p, size, (CUmemoryPool)memPool, (CUstream)stream);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *ptr = (void *)(uintptr_t)p;
    return cudaSuccess;
}

cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t s);
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t s)
{
    return cudaMallocAsync(devPtr, size, rt_ptsz(s));
}

cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t s);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t s)
{
    return cudaFreeAsync(devPtr, rt_ptsz(s));
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t s);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t s)
{
    return cudaMallocFromPoolAsync(ptr, size, pool, rt_ptsz(s));
}

/* ---- pools ------------------------------------------------------------------ */
cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *poolProps)
{
    if (!memPool || !poolProps)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemPoolCreate)((CUmemoryPool *)memPool, (const CUmemPoolProps *)poolProps));
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemPoolDestroy)((CUmemoryPool)memPool));
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    if (!value)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemPoolSetAttribute)((CUmemoryPool)memPool, (CUmemPool_attribute)attr, value));
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    if (!value)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemPoolGetAttribute)((CUmemoryPool)memPool, (CUmemPool_attribute)attr, value));
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemPoolTrimTo)((CUmemoryPool)memPool, minBytesToKeep));
}

cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, const struct cudaMemAccessDesc *descList, size_t count)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemPoolSetAccess)((CUmemoryPool)memPool, (const CUmemAccessDesc *)descList, count));
}

cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags *flags, cudaMemPool_t memPool,
                                 struct cudaMemLocation *location)
{
    if (!flags || !location)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CUresult r = EMU_DRV(cuMemPoolGetAccess)(&f, (CUmemoryPool)memPool, (CUmemLocation *)location);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *flags = (enum cudaMemAccessFlags)f;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    if (!memPool)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    if (device < 0 || device >= rt_device_count())
        return rt_set(cudaErrorInvalidDevice);
    return rt_drv(EMU_DRV(cuDeviceGetDefaultMemPool)((CUmemoryPool *)memPool, device));
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)
{
    if (!memPool)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    if (device < 0 || device >= rt_device_count())
        return rt_set(cudaErrorInvalidDevice);
    return rt_drv(EMU_DRV(cuDeviceGetMemPool)((CUmemoryPool *)memPool, device));
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)
{
    RT_ENTER();
    if (device < 0 || device >= rt_device_count())
        return rt_set(cudaErrorInvalidDevice);
    return rt_drv(EMU_DRV(cuDeviceSetMemPool)(device, (CUmemoryPool)memPool));
}

/* CUDA 13 location-based pool queries (a device or host location). */
cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t *memPool, struct cudaMemLocation *location,
                                     enum cudaMemAllocationType type)
{
    if (!memPool || !location)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemGetDefaultMemPool)((CUmemoryPool *)memPool, (CUmemLocation *)location,
                                                  (CUmemAllocationType)type));
}

cudaError_t cudaMemGetMemPool(cudaMemPool_t *memPool, struct cudaMemLocation *location,
                              enum cudaMemAllocationType type)
{
    if (!memPool || !location)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemGetMemPool)((CUmemoryPool *)memPool, (CUmemLocation *)location,
                                           (CUmemAllocationType)type));
}

cudaError_t cudaMemSetMemPool(struct cudaMemLocation *location, enum cudaMemAllocationType type,
                              cudaMemPool_t memPool)
{
    if (!location)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuMemSetMemPool)((CUmemLocation *)location, (CUmemAllocationType)type,
                                           (CUmemoryPool)memPool));
}
