/* CUDA driver hooks (libcuda.so.1) with a hand-written body: allocations
 * and frees (classic, stream-ordered, managed, pitched, pinned host, VMM
 * physical handles), the cuMemcpy* family, and cuGetProcAddress, whose
 * results are wrapped so that driver calls made through them (by the
 * runtime, NCCL, cuBLAS, XLA, CuPy's static runtime) reach our hooks.
 * The rest of the driver symbols in hooks.def are generated passthrough.
 *
 * Not only observation: device allocations and frees are served by the pool
 * (devmem_hooks.c), pinned host allocations by the host cache, and pageable
 * copies may go through pinned staging (shim/copy); the results the program
 * sees are the real library's answers for the same request. */
#include "hooks.h"
#include "copy/copy_engine.h"
#include "copy/host_cache.h"
#include "host_alloc_body.h"
#include "sync_body.h"
#include "devmem_hooks.h" /* device-memory bodies: cuMemAlloc_v2, cuMemFree_v2, ... */

/* ---- allocation --------------------------------------------------------- */

static inline CUresult ts_body_cuMemAllocFromPoolAsync(int api, CUdeviceptr *dptr, size_t bytesize,
                                                       CUmemoryPool pool, CUstream hStream)
{
    TS_ALLOC_BODY(CUresult, cuMemAllocFromPoolAsync, api, (dptr, bytesize, pool, hStream), dptr, bytesize,
                  hStream, ts_logged_stream_device(api, hStream));
}

static inline CUresult ts_body_cuMemAllocManaged(int api, CUdeviceptr *dptr, size_t bytesize,
                                                 unsigned int flags)
{
    TS_ALLOC_BODY(CUresult, cuMemAllocManaged, api, (dptr, bytesize, flags), dptr, bytesize, NULL,
                  ts_current_device());
}

static inline CUresult ts_body_cuMemAllocPitch_v2(int api, CUdeviceptr *dptr, size_t *pPitch,
                                                  size_t WidthInBytes, size_t Height,
                                                  unsigned int ElementSizeBytes)
{
    TS_PITCH_ALLOC_BODY(CUresult, cuMemAllocPitch_v2, api,
                        (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes), dptr, pPitch, WidthInBytes,
                        Height);
}

/* Pinned host allocations through the cache: hooks/host_alloc_body.h. */
#define DRV_HOST_ALLOC_BODY(...)                                                                             \
    TS_HOST_ALLOC_BODY(CUresult, CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY, __VA_ARGS__)

static inline CUresult ts_body_cuMemHostAlloc(int api, void **pp, size_t bytesize, unsigned int Flags)
{
    DRV_HOST_ALLOC_BODY(cuMemHostAlloc, api, (pp, bytesize, Flags), pp, bytesize, Flags,
                        (pp, ts_host_cache_class(bytesize), Flags));
}

static inline CUresult ts_body_cuMemAllocHost_v2(int api, void **pp, size_t bytesize)
{
    DRV_HOST_ALLOC_BODY(cuMemAllocHost_v2, api, (pp, bytesize), pp, bytesize, 0u,
                        (pp, ts_host_cache_class(bytesize)));
}

/* A VMM physical allocation: logged with the handle in the pointer field
 * (it has no address until cuMemMap) and the device of its location. */
static inline CUresult ts_body_cuMemCreate(int api, CUmemGenericAllocationHandle *handle, size_t size,
                                           const CUmemAllocationProp *prop, unsigned long long flags)
{
    TS_HOOK_PROLOGUE(CUresult, cuMemCreate, api, (handle, size, prop, flags));
    TS_OUTER_BEGIN(api);
    CUresult r = real_(handle, size, prop, flags);
    if (outer_) {
        int dev =
            prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : TS_HOST_DEVICE;
        ts_note_device(dev);
        ts_ev_alloc(api, dev, r == CUDA_SUCCESS && handle ? (uint64_t)*handle : 0, size, 0, (int)r);
    }
    TS_OUTER_END(api, r);
    return r;
}

static inline CUresult ts_body_cuMemRelease(int api, CUmemGenericAllocationHandle handle)
{
    TS_FREE_BODY(CUresult, cuMemRelease, api, (handle), handle, NULL, TS_HOST_DEVICE);
}

static inline CUresult ts_body_cuMemFreeHost(int api, void *p)
{
    TS_HOST_FREE_BODY(CUresult, CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, (void)0, cuMemFreeHost, api, p);
}

/* ---- copies ------------------------------------------------------------- */

/* dir is known from the entry point; `host` is the host-side pointer to
 * classify (NULL when none). */
static void copy_event(int api, int dir, const void *host, uint64_t bytes, CUstream stream, bool async,
                       uint64_t ns, CUresult r)
{
    int host_kind = host ? ts_host_kind_of(ts_classify_ptr(host)) : TS_HOST_NONE;
    ts_ev_copy(api, dir, bytes, host_kind, ts_stream_id(api, stream), async, ns, (int)r);
}

/* Unified copies (cuMemcpy/cuMemcpyAsync): both sides from the pointers. */
static void unified_copy_event(int api, CUdeviceptr dst, CUdeviceptr src, uint64_t bytes, CUstream stream,
                               bool async, uint64_t ns, CUresult r)
{
    enum ts_ptr_kind d = ts_classify_ptr((void *)(uintptr_t)dst), s = ts_classify_ptr((void *)(uintptr_t)src);
    int dir = ts_copy_dir_of(d, s);
    ts_ev_copy(api, dir, bytes, ts_host_kind_of(dir == TS_D2H ? d : s), ts_stream_id(api, stream), async, ns,
               (int)r);
}

/* One side of a CUDA_MEMCPY2D. */
static enum ts_ptr_kind side_kind(CUmemorytype type, const void *host, CUdeviceptr dev)
{
    switch (type) {
    case CU_MEMORYTYPE_HOST: return ts_classify_ptr(host) == TS_PTR_PINNED ? TS_PTR_PINNED : TS_PTR_PAGEABLE;
    case CU_MEMORYTYPE_UNIFIED: return ts_classify_ptr((void *)(uintptr_t)dev);
    default: return TS_PTR_DEVICE; /* device memory or a CUDA array */
    }
}

static void copy2d_event(int api, const CUDA_MEMCPY2D *c, CUstream stream, bool async, uint64_t ns,
                         CUresult r)
{
    if (!c) {
        ts_ev_copy(api, TS_DEFAULT_DIR, 0, TS_HOST_UNKNOWN, ts_stream_id(api, stream), async, ns, (int)r);
        return;
    }
    enum ts_ptr_kind d = side_kind(c->dstMemoryType, c->dstHost, c->dstDevice);
    enum ts_ptr_kind s = side_kind(c->srcMemoryType, c->srcHost, c->srcDevice);
    int dir = ts_copy_dir_of(d, s);
    ts_ev_copy(api, dir, (uint64_t)c->WidthInBytes * c->Height, ts_host_kind_of(dir == TS_D2H ? d : s),
               ts_stream_id(api, stream), async, ns, (int)r);
}

/* `event` is the statement that reports the copy, run after the real call
 * with r and ns_ (its duration) in scope. */
#define DRV_COPY_BODY(base, api, args, event)                                                                \
    TS_HOOK_PROLOGUE(CUresult, base, api, args);                                                             \
    TS_OUTER_BEGIN(api);                                                                                     \
    uint64_t t0_ = outer_ ? ts_now_ns() : 0;                                                                 \
    CUresult r = real_ args;                                                                                 \
    if (outer_) {                                                                                            \
        uint64_t ns_ = ts_now_ns() - t0_;                                                                    \
        event;                                                                                               \
    }                                                                                                        \
    TS_OUTER_END(api, r);                                                                                    \
    return r

/* Host<->device copies the pinned copy engine may convert (shim/copy/copy_engine.h):
 * the engine reports the leading bytes it carried out; the rest (all of it
 * when it declines) is the original call with `rest_args`, on the same stream
 * and after the engine's work.  dir TS_CE_NONE (cuMemcpy, cuMemcpyAsync:
 * unified addressing) takes the direction from what the pointers are. */
static size_t drv_convert(int api, enum ts_copy_engine_dir dir, bool sync, CUstream stream, const void *dst,
                          const void *src, size_t bytes, struct ts_copy_stats *st)
{
    if (!ts_copy_wanted(bytes))
        return 0;
    struct ts_copy_req q = {
        .dst = (char *)dst,
        .src = src,
        .width = bytes,
        .height = 1,
        .dpitch = bytes,
        .spitch = bytes,
        .stream = stream == NULL && ts_api_per_thread(api) ? CU_STREAM_PER_THREAD : stream,
        .sync = sync,
    };
    enum ts_copy_engine_dir got = ts_copy_classify(&q, dir);
    if (got == TS_CE_NONE || (dir != TS_CE_NONE && got != dir))
        return 0;
    size_t rows, done = 0;
    ts_copy_run(&q, got, &rows, &done, st);
    return done;
}

/* The end of a converted copy: its record (`event`, which may use ns_, the
 * copy's time), then the engine's statistics. */
#define DRV_COPY_DONE(api, t0, st, event)                                                                    \
    do {                                                                                                     \
        uint64_t ns_ = ts_now_ns() - (t0);                                                                   \
        event;                                                                                               \
        if ((st).chunks)                                                                                     \
            ts_copy_note(api, &(st), ns_);                                                                   \
    } while (0)

#define DRV_CONVERTED_BODY(base, api, dir, sync, stream, dst, src, bytes, rest_args, event)                  \
    size_t done = 0; /* rest_args with done = 0 are the original arguments */                                \
    TS_HOOK_PROLOGUE(CUresult, base, api, rest_args);                                                        \
    TS_OUTER_BEGIN(api);                                                                                     \
    uint64_t t0_ = outer_ ? ts_now_ns() : 0;                                                                 \
    struct ts_copy_stats st_ = { 0 };                                                                        \
    done = outer_ ? drv_convert(api, dir, sync, stream, (const void *)(uintptr_t)(dst),                      \
                                (const void *)(uintptr_t)(src), bytes, &st_)                                 \
                  : 0;                                                                                       \
    CUresult r = done && done == (bytes) ? CUDA_SUCCESS : real_ rest_args;                                   \
    if (outer_)                                                                                              \
        DRV_COPY_DONE(api, t0_, st_, event);                                                                 \
    TS_OUTER_END(api, r);                                                                                    \
    return r

static inline CUresult ts_body_cuMemcpy(int api, CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    DRV_CONVERTED_BODY(cuMemcpy, api, TS_CE_NONE, true, NULL, dst, src, ByteCount,
                       (dst + done, src + done, ByteCount - done),
                       unified_copy_event(api, dst, src, ByteCount, NULL, false, ns_, r));
}

static inline CUresult ts_body_cuMemcpyAsync(int api, CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                             CUstream hStream)
{
    DRV_CONVERTED_BODY(cuMemcpyAsync, api, TS_CE_NONE, false, hStream, dst, src, ByteCount,
                       (dst + done, src + done, ByteCount - done, hStream),
                       unified_copy_event(api, dst, src, ByteCount, hStream, true, ns_, r));
}

static inline CUresult ts_body_cuMemcpyHtoD_v2(int api, CUdeviceptr dstDevice, const void *srcHost,
                                               size_t ByteCount)
{
    DRV_CONVERTED_BODY(cuMemcpyHtoD_v2, api, TS_CE_H2D, true, NULL, dstDevice, srcHost, ByteCount,
                       (dstDevice + done, (const char *)srcHost + done, ByteCount - done),
                       copy_event(api, TS_H2D, srcHost, ByteCount, NULL, false, ns_, r));
}

static inline CUresult ts_body_cuMemcpyDtoH_v2(int api, void *dstHost, CUdeviceptr srcDevice,
                                               size_t ByteCount)
{
    DRV_CONVERTED_BODY(cuMemcpyDtoH_v2, api, TS_CE_D2H, true, NULL, dstHost, srcDevice, ByteCount,
                       ((char *)dstHost + done, srcDevice + done, ByteCount - done),
                       copy_event(api, TS_D2H, dstHost, ByteCount, NULL, false, ns_, r));
}

static inline CUresult ts_body_cuMemcpyDtoD_v2(int api, CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                               size_t ByteCount)
{
    DRV_COPY_BODY(cuMemcpyDtoD_v2, api, (dstDevice, srcDevice, ByteCount),
                  copy_event(api, TS_D2D, NULL, ByteCount, NULL, false, ns_, r));
}

static inline CUresult ts_body_cuMemcpyHtoDAsync_v2(int api, CUdeviceptr dstDevice, const void *srcHost,
                                                    size_t ByteCount, CUstream hStream)
{
    DRV_CONVERTED_BODY(cuMemcpyHtoDAsync_v2, api, TS_CE_H2D, false, hStream, dstDevice, srcHost, ByteCount,
                       (dstDevice + done, (const char *)srcHost + done, ByteCount - done, hStream),
                       copy_event(api, TS_H2D, srcHost, ByteCount, hStream, true, ns_, r));
}

static inline CUresult ts_body_cuMemcpyDtoHAsync_v2(int api, void *dstHost, CUdeviceptr srcDevice,
                                                    size_t ByteCount, CUstream hStream)
{
    DRV_CONVERTED_BODY(cuMemcpyDtoHAsync_v2, api, TS_CE_D2H, false, hStream, dstHost, srcDevice, ByteCount,
                       ((char *)dstHost + done, srcDevice + done, ByteCount - done, hStream),
                       copy_event(api, TS_D2H, dstHost, ByteCount, hStream, true, ns_, r));
}

static inline CUresult ts_body_cuMemcpyDtoDAsync_v2(int api, CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                                    size_t ByteCount, CUstream hStream)
{
    DRV_COPY_BODY(cuMemcpyDtoDAsync_v2, api, (dstDevice, srcDevice, ByteCount, hStream),
                  copy_event(api, TS_D2D, NULL, ByteCount, hStream, true, ns_, r));
}

/* A CUDA_MEMCPY2D side as an address: HOST uses the host pointer, DEVICE and
 * UNIFIED the device one (UNIFIED may be host memory: the engine classifies
 * it); arrays are never converted. */
static const char *side_addr(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x, size_t y,
                             size_t pitch)
{
    const char *base = type == CU_MEMORYTYPE_HOST ? (const char *)host
                       : type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED
                           ? (const char *)(uintptr_t)dev
                           : NULL;
    return base ? base + y * pitch + x : NULL;
}

/* Whether a side's declared memory type allows the engine's direction: a
 * HOST side must be the host side, a DEVICE side the device side. */
static bool side_fits(CUmemorytype type, bool is_host_side)
{
    return type == CU_MEMORYTYPE_UNIFIED
           || type == (is_host_side ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
}

/* How much of a 2D copy the engine carried out: leading rows, or for one
 * row (cublasSetVector/GetVector's form), leading bytes of it. */
struct drv_progress {
    size_t rows, bytes;
};

/* A side's pitch as the driver reads it (0: the width); false when the
 * row does not fit it, which the real call must refuse itself. */
static bool pitch_fits(size_t pitch, size_t width) { return pitch == 0 || pitch >= width; }

/* cuMemcpy2D*: the engine carries out the leading rows (one row: bytes)
 * when one side is pageable host memory and the other device memory.
 * Several rows with a zero pitch pass through whole. */
static struct drv_progress drv_convert_2d(int api, const CUDA_MEMCPY2D *c, bool sync, CUstream stream,
                                          struct ts_copy_stats *st)
{
    struct drv_progress done = { 0, 0 };
    bool one_row = c && c->Height == 1;
    if (!c || !c->Height
        || (one_row ? !pitch_fits(c->srcPitch, c->WidthInBytes) || !pitch_fits(c->dstPitch, c->WidthInBytes)
                    : !c->srcPitch || !c->dstPitch))
        return done;
    if (!ts_copy_wanted((uint64_t)c->WidthInBytes * c->Height))
        return done;
    if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return done;
    size_t dpitch = one_row ? c->WidthInBytes : c->dstPitch, spitch = one_row ? c->WidthInBytes : c->srcPitch;
    struct ts_copy_req q = {
        .dst = (char *)side_addr(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY,
                                 c->dstPitch ? c->dstPitch : c->WidthInBytes),
        .src = side_addr(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY,
                         c->srcPitch ? c->srcPitch : c->WidthInBytes),
        .width = c->WidthInBytes,
        .height = c->Height,
        .dpitch = dpitch,
        .spitch = spitch,
        .stream = stream == NULL && ts_api_per_thread(api) ? CU_STREAM_PER_THREAD : stream,
        .sync = sync,
    };
    if (!q.dst || !q.src)
        return done;
    enum ts_copy_engine_dir dir = TS_CE_NONE;
    if (c->srcMemoryType == CU_MEMORYTYPE_HOST || c->dstMemoryType == CU_MEMORYTYPE_DEVICE)
        dir = TS_CE_H2D;
    if (c->srcMemoryType == CU_MEMORYTYPE_DEVICE || c->dstMemoryType == CU_MEMORYTYPE_HOST)
        dir = dir == TS_CE_H2D ? TS_CE_NONE : TS_CE_D2H;
    if (dir == TS_CE_NONE && c->srcMemoryType != CU_MEMORYTYPE_UNIFIED)
        return done; /* host->host, device->device */
    enum ts_copy_engine_dir got = ts_copy_classify(&q, dir);
    if (got == TS_CE_NONE || !side_fits(c->srcMemoryType, got == TS_CE_H2D)
        || !side_fits(c->dstMemoryType, got == TS_CE_D2H))
        return done;
    ts_copy_run(&q, got, &done.rows, &done.bytes, st);
    return done;
}

static bool drv_all_done(const CUDA_MEMCPY2D *c, struct drv_progress done)
{
    if (!c)
        return false;
    return c->Height == 1 ? done.bytes && done.bytes == c->WidthInBytes : done.rows && done.rows == c->Height;
}

/* What the engine did not carry out, as a copy of the descriptor. */
static const CUDA_MEMCPY2D *rest_2d(const CUDA_MEMCPY2D *c, struct drv_progress done, CUDA_MEMCPY2D *rest)
{
    if (!done.rows && !done.bytes)
        return c; /* the original descriptor, exactly */
    *rest = *c;
    rest->srcY += done.rows;
    rest->dstY += done.rows;
    rest->Height -= done.rows;
    rest->srcXInBytes += done.bytes;
    rest->dstXInBytes += done.bytes;
    rest->WidthInBytes -= done.bytes;
    return rest;
}

#define DRV_CONVERTED_2D_BODY(base, api, sync, stream, pCopy, rest_args, event)                              \
    struct drv_progress done = { 0, 0 };                                                                     \
    CUDA_MEMCPY2D rest_;                                                                                     \
    TS_HOOK_PROLOGUE(CUresult, base, api, rest_args);                                                        \
    TS_OUTER_BEGIN(api);                                                                                     \
    uint64_t t0_ = outer_ ? ts_now_ns() : 0;                                                                 \
    struct ts_copy_stats st_ = { 0 };                                                                        \
    if (outer_)                                                                                              \
        done = drv_convert_2d(api, pCopy, sync, stream, &st_);                                               \
    CUresult r = outer_ && drv_all_done(pCopy, done) ? CUDA_SUCCESS : real_ rest_args;                       \
    if (outer_)                                                                                              \
        DRV_COPY_DONE(api, t0_, st_, event);                                                                 \
    TS_OUTER_END(api, r);                                                                                    \
    return r

static inline CUresult ts_body_cuMemcpy2D_v2(int api, const CUDA_MEMCPY2D *pCopy)
{
    DRV_CONVERTED_2D_BODY(cuMemcpy2D_v2, api, true, NULL, pCopy, (rest_2d(pCopy, done, &rest_)),
                          copy2d_event(api, pCopy, NULL, false, ns_, r));
}

static inline CUresult ts_body_cuMemcpy2DUnaligned_v2(int api, const CUDA_MEMCPY2D *pCopy)
{
    DRV_CONVERTED_2D_BODY(cuMemcpy2DUnaligned_v2, api, true, NULL, pCopy, (rest_2d(pCopy, done, &rest_)),
                          copy2d_event(api, pCopy, NULL, false, ns_, r));
}

static inline CUresult ts_body_cuMemcpy2DAsync_v2(int api, const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    DRV_CONVERTED_2D_BODY(cuMemcpy2DAsync_v2, api, false, hStream, pCopy,
                          (rest_2d(pCopy, done, &rest_), hStream),
                          copy2d_event(api, pCopy, hStream, true, ns_, r));
}

static inline CUresult ts_body_cuMemcpyPeer(int api, CUdeviceptr dstDevice, CUcontext dstContext,
                                            CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount)
{
    DRV_COPY_BODY(cuMemcpyPeer, api, (dstDevice, dstContext, srcDevice, srcContext, ByteCount),
                  copy_event(api, TS_PEER, NULL, ByteCount, NULL, false, ns_, r));
}

static inline CUresult ts_body_cuMemcpyPeerAsync(int api, CUdeviceptr dstDevice, CUcontext dstContext,
                                                 CUdeviceptr srcDevice, CUcontext srcContext,
                                                 size_t ByteCount, CUstream hStream)
{
    DRV_COPY_BODY(cuMemcpyPeerAsync, api, (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream),
                  copy_event(api, TS_PEER, NULL, ByteCount, hStream, true, ns_, r));
}

/* ---- host synchronizations ---------------------------------------------- */

static inline CUresult ts_body_cuStreamSynchronize(int api, CUstream hStream)
{
    TS_SYNC_BODY(CUresult, cuStreamSynchronize, api, (hStream), TS_SYNC_STREAM, ts_stream_id(api, hStream),
                 ts_sync_stream_pending(ts_stream_id(api, hStream)));
}

static inline CUresult ctx_sync_body(int api)
{
    TS_SYNC_BODY(CUresult, cuCtxSynchronize, api, (), TS_SYNC_DEVICE, 0, TS_SYNC_UNKNOWN);
}
/* The generated OWN hook passes its (empty) argument list after the id. */
#define ts_body_cuCtxSynchronize(api, ...) ctx_sync_body(api)

static inline CUresult ts_body_cuCtxSynchronize_v2(int api, CUcontext ctx)
{
    TS_SYNC_BODY(CUresult, cuCtxSynchronize_v2, api, (ctx), TS_SYNC_DEVICE, 0, TS_SYNC_UNKNOWN);
}

static inline CUresult ts_body_cuEventSynchronize(int api, CUevent hEvent)
{
    TS_SYNC_BODY(CUresult, cuEventSynchronize, api, (hEvent), TS_SYNC_EVENT, (uint64_t)(uintptr_t)hEvent,
                 ts_sync_event_pending(hEvent));
}

/* ---- cuGetProcAddress --------------------------------------------------- */
/* Wrapped even when nested: the pointer escapes to whoever asked. */

static inline CUresult ts_body_cuGetProcAddress_v2(int api, const char *symbol, void **pfn, int cudaVersion,
                                                   cuuint64_t flags,
                                                   CUdriverProcAddressQueryResult *symbolStatus)
{
    TS_PROC_ADDRESS_BODY(CUresult, cuGetProcAddress_v2, api, (symbol, pfn, cudaVersion, flags, symbolStatus),
                         symbol, pfn);
}

static inline CUresult ts_body_cuGetProcAddress(int api, const char *symbol, void **pfn, int cudaVersion,
                                                cuuint64_t flags)
{
    TS_PROC_ADDRESS_BODY(CUresult, cuGetProcAddress, api, (symbol, pfn, cudaVersion, flags), symbol, pfn);
}

#define TS_GEN_LIB_cuda(...) TS_GEN_HOOK(__VA_ARGS__)
#include "hooks_gen.h"
