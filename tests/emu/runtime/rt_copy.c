/* Copies: cudaMemcpy[Async], cudaMemcpy2D[Async], cudaMemcpyPeer[Async] and
 * their per-thread variants, mapped to the driver's cuMemcpy*_v2.  The kind
 * selects the driver entry point, which checks the pointers (a "device" side
 * that is not device memory is cudaErrorInvalidValue); cudaMemcpyDefault
 * classifies both pointers by unified addressing.  Pageable/pinned host
 * semantics (staging, synchronization) are the driver's. */
#include "rt_internal.h"

static int rt_kind_valid(enum cudaMemcpyKind kind)
{
    return (unsigned)kind <= (unsigned)cudaMemcpyDefault;
}

/* 1 if p is device-side memory (device, managed, VMM): pinned and pageable
 * host memory are host-side. */
static int rt_is_device_side(const void *p)
{
    unsigned int type = 0;
    if (EMU_DRV(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                       (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
        return 0;   /* unknown to the driver: pageable host memory */
    return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED;
}

/* Resolves cudaMemcpyDefault to the direction the pointers imply. */
static enum cudaMemcpyKind rt_resolve_kind(void *dst, const void *src, enum cudaMemcpyKind kind)
{
    if (kind != cudaMemcpyDefault)
        return kind;
    int d = rt_is_device_side(dst), s = rt_is_device_side(src);
    if (d && s)
        return cudaMemcpyDeviceToDevice;
    if (d)
        return cudaMemcpyHostToDevice;
    if (s)
        return cudaMemcpyDeviceToHost;
    return cudaMemcpyHostToHost;
}

#define DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

static CUresult rt_copy_sync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    switch (kind) {
    case cudaMemcpyHostToDevice: return EMU_DRV(cuMemcpyHtoD_v2)(DPTR(dst), src, count);
    case cudaMemcpyDeviceToHost: return EMU_DRV(cuMemcpyDtoH_v2)(dst, DPTR(src), count);
    case cudaMemcpyDeviceToDevice: return EMU_DRV(cuMemcpyDtoD_v2)(DPTR(dst), DPTR(src), count);
    default: return EMU_DRV(cuMemcpy)(DPTR(dst), DPTR(src), count);
    }
}

static CUresult rt_copy_async(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, CUstream s)
{
    switch (kind) {
    case cudaMemcpyHostToDevice: return EMU_DRV(cuMemcpyHtoDAsync_v2)(DPTR(dst), src, count, s);
    case cudaMemcpyDeviceToHost: return EMU_DRV(cuMemcpyDtoHAsync_v2)(dst, DPTR(src), count, s);
    case cudaMemcpyDeviceToDevice: return EMU_DRV(cuMemcpyDtoDAsync_v2)(DPTR(dst), DPTR(src), count, s);
    default: return EMU_DRV(cuMemcpyAsync)(DPTR(dst), DPTR(src), count, s);
    }
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    if (!rt_kind_valid(kind))
        return rt_set(cudaErrorInvalidMemcpyDirection);
    RT_ENTER();
    if (count == 0)
        return cudaSuccess;
    return rt_drv(rt_copy_sync(dst, src, count, rt_resolve_kind(dst, src, kind)));
}

/* Synchronous copy ordered on the per-thread stream: enqueue there, then wait
 * (at least as synchronous as cudaMemcpy for every direction). */
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    if (!rt_kind_valid(kind))
        return rt_set(cudaErrorInvalidMemcpyDirection);
    RT_ENTER();
    if (count == 0)
        return cudaSuccess;
    CUresult r = rt_copy_async(dst, src, count, rt_resolve_kind(dst, src, kind), CU_STREAM_PER_THREAD);
    if (r == CUDA_SUCCESS)
        r = EMU_DRV(cuStreamSynchronize)(CU_STREAM_PER_THREAD);
    return rt_drv(r);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    if (!rt_kind_valid(kind))
        return rt_set(cudaErrorInvalidMemcpyDirection);
    RT_ENTER();
    if (count == 0)
        return cudaSuccess;
    return rt_drv(rt_copy_async(dst, src, count, rt_resolve_kind(dst, src, kind), (CUstream)stream));
}

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                 cudaStream_t stream);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                 cudaStream_t stream)
{
    return cudaMemcpyAsync(dst, src, count, kind, rt_ptsz(stream));
}

/* ---- 2D ------------------------------------------------------------------ */
static cudaError_t rt_fill_2d(CUDA_MEMCPY2D *m, void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind)
{
    if (!rt_kind_valid(kind))
        return cudaErrorInvalidMemcpyDirection;
    if (height > 1 && (dpitch < width || spitch < width))
        return cudaErrorInvalidPitchValue;
    kind = rt_resolve_kind(dst, src, kind);
    int src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    int dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    *m = (CUDA_MEMCPY2D){0};
    m->srcMemoryType = src_dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (src_dev)
        m->srcDevice = DPTR(src);
    else
        m->srcHost = src;
    m->srcPitch = spitch;
    m->dstMemoryType = dst_dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (dst_dev)
        m->dstDevice = DPTR(dst);
    else
        m->dstHost = dst;
    m->dstPitch = dpitch;
    m->WidthInBytes = width;
    m->Height = height;
    return cudaSuccess;
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind)
{
    RT_ENTER();
    CUDA_MEMCPY2D m;
    cudaError_t e = rt_fill_2d(&m, dst, dpitch, src, spitch, width, height, kind);
    if (e != cudaSuccess)
        return rt_set(e);
    if (width == 0 || height == 0)
        return cudaSuccess;
    return rt_drv(EMU_DRV(cuMemcpy2D_v2)(&m));
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_ENTER();
    CUDA_MEMCPY2D m;
    cudaError_t e = rt_fill_2d(&m, dst, dpitch, src, spitch, width, height, kind);
    if (e != cudaSuccess)
        return rt_set(e);
    if (width == 0 || height == 0)
        return cudaSuccess;
    return rt_drv(EMU_DRV(cuMemcpy2DAsync_v2)(&m, (CUstream)stream));
}

cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height, enum cudaMemcpyKind kind)
{
    cudaError_t e = cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, CU_STREAM_PER_THREAD);
    if (e != cudaSuccess)
        return e;
    return rt_drv(EMU_DRV(cuStreamSynchronize)(CU_STREAM_PER_THREAD));
}

cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                   size_t height, enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                   size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, rt_ptsz(stream));
}

/* ---- peer ---------------------------------------------------------------- */
static cudaError_t rt_peer_ctxs(int dstDevice, int srcDevice, CUcontext *dc, CUcontext *sc)
{
    cudaError_t e = cudaSuccess;
    *dc = rt_primary_ctx(dstDevice, &e);
    if (!*dc)
        return e;
    *sc = rt_primary_ctx(srcDevice, &e);
    return *sc ? cudaSuccess : e;
}

cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
    RT_ENTER();
    CUcontext dc, sc;
    cudaError_t e = rt_peer_ctxs(dstDevice, srcDevice, &dc, &sc);
    if (e != cudaSuccess)
        return rt_set(e);
    if (count == 0)
        return cudaSuccess;
    return rt_drv(EMU_DRV(cuMemcpyPeer)(DPTR(dst), dc, DPTR(src), sc, count));
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
                                cudaStream_t stream)
{
    RT_ENTER();
    CUcontext dc, sc;
    cudaError_t e = rt_peer_ctxs(dstDevice, srcDevice, &dc, &sc);
    if (e != cudaSuccess)
        return rt_set(e);
    if (count == 0)
        return cudaSuccess;
    return rt_drv(EMU_DRV(cuMemcpyPeerAsync)(DPTR(dst), dc, DPTR(src), sc, count, (CUstream)stream));
}
