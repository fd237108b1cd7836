/* devmem_hooks.c: the device-memory hooks: allocations and frees served by
 * trainshim's pool (shim/devmem/devmem.h), free-memory queries that count what the
 * pool holds idle, pointer queries, device reset,
 * the stream creations and captures the pool's fences must cover (runtime
 * and driver API), and peer access to pooled pages.
 *
 * Only the outermost allocation of a thread is served from the pool (a
 * nested one is a library's or the shim's own, or the runtime's driver call
 * behind a passed-through cudaMalloc); every free, nested or not, and even
 * after a fallback to passthrough, first asks the pool whether the pointer
 * is its own.  Whatever the pool does not serve is the real call, so errors
 * are the real library's own. */
#include "devmem_hooks.h"
#include "devmem/devmem.h"

/* ---- allocation --------------------------------------------------------- */

/* ok/oom: the library's success and out-of-memory codes.  rt: a runtime
 * call, which initializes the primary context itself and keeps a last
 * error (an OOM the pool answers sets it as the real call would). */
#define DM_ALLOC_BODY(ret, base, api, args, out, size, stream_id, async, ok, oom, rt)                        \
    TS_HOOK_PROLOGUE(ret, base, api, args);                                                                  \
    TS_OUTER_BEGIN(api);                                                                                     \
    uint64_t p_ = 0;                                                                                         \
    int d_ = -1;                                                                                             \
    int a_ = outer_ && (out) ? ts_dev_alloc(size, stream_id, async, rt, &p_, &d_) : TS_DEV_PASS;             \
    if (a_ == TS_DEV_NO_CONTEXT)                                                                             \
        a_ =                                                                                                 \
            (rt) && ts_rt_init_context() ? ts_dev_alloc(size, stream_id, async, rt, &p_, &d_) : TS_DEV_PASS; \
    ret r;                                                                                                   \
    if (a_ == TS_DEV_SERVED) {                                                                               \
        *(out) = (__typeof__(*(out)))(uintptr_t)p_;                                                          \
        r = ok;                                                                                              \
    } else if (a_ == TS_DEV_OOM) {                                                                           \
        r = oom;                                                                                             \
        if (rt)                                                                                              \
            ts_rt_note_error((cudaError_t)r);                                                                \
    } else {                                                                                                 \
        r = real_ args;                                                                                      \
    }                                                                                                        \
    if (outer_) {                                                                                            \
        if (r == (oom) && ts_dev_pooling())                                                                  \
            ts_dev_oom_report(d_ >= 0 ? d_ : ts_current_device(), size);                                     \
        ts_alloc_event(api, d_ >= 0 ? d_ : ts_current_device(), TS_OUT_PTR(out, r), size, stream_id,         \
                       (int)r);                                                                              \
    }                                                                                                        \
    TS_OUTER_END(api, r);                                                                                    \
    return r

/* Frees look in the pool even while the shim is inactive (fallback): its
 * pointers stay valid and must go back to it.  `invalid` is evaluated only
 * when the pool refuses the pointer (interior or already free). */
#define DM_FREE_BODY(ret, base, api, args, ptr, stream_id, async, ok, invalid)                               \
    TS_HOOK_REAL(ret, base, api);                                                                            \
    if (ts_likely(!ts_active())) {                                                                           \
        if (!ts_dev_pooling() || !(ptr))                                                                     \
            return real_ args;                                                                               \
        ts_enter();                                                                                          \
        int d_;                                                                                              \
        int f_ = ts_dev_free((uint64_t)(uintptr_t)(ptr), stream_id, async, false, &d_);                      \
        ts_leave();                                                                                          \
        return f_ == TS_DEV_FREED ? (ok) : f_ == TS_DEV_INVALID ? (invalid) : real_ args;                    \
    }                                                                                                        \
    TS_OUTER_BEGIN(api);                                                                                     \
    int d_;                                                                                                  \
    int f_ = ts_dev_free((uint64_t)(uintptr_t)(ptr), stream_id, async, true, &d_);                           \
    ret r = f_ == TS_DEV_FREED ? (ok) : f_ == TS_DEV_INVALID ? (invalid) : real_ args;                       \
    if (outer_ && (ptr))                                                                                     \
        ts_free_event(api, d_ >= 0 ? d_ : ts_current_device(), (uint64_t)(uintptr_t)(ptr), stream_id,        \
                      (int)r);                                                                               \
    TS_OUTER_END(api, r);                                                                                    \
    return r

cudaError_t ts_body_cudaMalloc(int api, void **devPtr, size_t size)
{
    DM_ALLOC_BODY(cudaError_t, cudaMalloc, api, (devPtr, size), devPtr, size, 0, false, cudaSuccess,
                  cudaErrorMemoryAllocation, true);
}

cudaError_t ts_body_cudaMallocAsync(int api, void **devPtr, size_t size, cudaStream_t hStream)
{
    DM_ALLOC_BODY(cudaError_t, cudaMallocAsync, api, (devPtr, size, hStream), devPtr, size,
                  ts_stream_id(api, hStream), true, cudaSuccess, cudaErrorMemoryAllocation, true);
}

/* A runtime free the pool refuses must leave the runtime's per-thread last
 * error as the real call would (cudaGetLastError after it).  Only the
 * runtime can set it: the real call gets the pointer with its low bit set,
 * which no allocation starts at (they are 256-byte aligned) and which lies in
 * memory the pool reserved (no cuMemAlloc allocation there), so it fails with
 * the real error and frees nothing; never cudaSuccess. */
#define DM_RT_INVALID(call)                                                                                  \
    __extension__({                                                                                          \
        cudaError_t e_ = (call);                                                                             \
        e_ == cudaSuccess ? cudaErrorInvalidValue : e_;                                                      \
    })
#define DM_ODD(ptr) ((void *)((uintptr_t)(ptr) | 1u))

cudaError_t ts_body_cudaFree(int api, void *devPtr)
{
    DM_FREE_BODY(cudaError_t, cudaFree, api, (devPtr), devPtr, 0, false, cudaSuccess,
                 DM_RT_INVALID(real_(DM_ODD(devPtr))));
}

cudaError_t ts_body_cudaFreeAsync(int api, void *devPtr, cudaStream_t hStream)
{
    DM_FREE_BODY(cudaError_t, cudaFreeAsync, api, (devPtr, hStream), devPtr, ts_stream_id(api, hStream), true,
                 cudaSuccess, DM_RT_INVALID(real_(DM_ODD(devPtr), hStream)));
}

CUresult ts_body_cuMemAlloc_v2(int api, CUdeviceptr *dptr, size_t bytesize)
{
    DM_ALLOC_BODY(CUresult, cuMemAlloc_v2, api, (dptr, bytesize), dptr, bytesize, 0, false, CUDA_SUCCESS,
                  CUDA_ERROR_OUT_OF_MEMORY, false);
}

CUresult ts_body_cuMemAllocAsync(int api, CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    DM_ALLOC_BODY(CUresult, cuMemAllocAsync, api, (dptr, bytesize, hStream), dptr, bytesize,
                  ts_stream_id(api, hStream), true, CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY, false);
}

CUresult ts_body_cuMemFree_v2(int api, CUdeviceptr dptr)
{
    DM_FREE_BODY(CUresult, cuMemFree_v2, api, (dptr), dptr, 0, false, CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE);
}

CUresult ts_body_cuMemFreeAsync(int api, CUdeviceptr dptr, CUstream hStream)
{
    DM_FREE_BODY(CUresult, cuMemFreeAsync, api, (dptr, hStream), dptr, ts_stream_id(api, hStream), true,
                 CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE);
}

/* ---- queries ------------------------------------------------------------ */

/* Free memory as the program would see it without the shim: what the pool
 * holds idle would be free.  Only the outermost call adjusts (the runtime's
 * cudaMemGetInfo calls cuMemGetInfo_v2). */
static void add_idle(size_t *free, const size_t *total)
{
    if (!free || !total)
        return;
    uint64_t f = (uint64_t)*free + ts_dev_idle_bytes(ts_current_device());
    *free = f > *total ? *total : (size_t)f;
}

#define DM_MEM_GET_INFO(ret, base, api, free, total, ok)                                                     \
    TS_OBSERVE_BODY(ret, base, api, (free, total), if (outer_ && r == (ok)) add_idle(free, total))

cudaError_t ts_body_cudaMemGetInfo(int api, size_t *free, size_t *total)
{
    DM_MEM_GET_INFO(cudaError_t, cudaMemGetInfo, api, free, total, cudaSuccess);
}

CUresult ts_body_cuMemGetInfo_v2(int api, size_t *free, size_t *total)
{
    DM_MEM_GET_INFO(CUresult, cuMemGetInfo_v2, api, free, total, CUDA_SUCCESS);
}

/* ---- the default memory pool ------------------------------------------- */

/* The program reads the default pool's used / reserved figures (torch's
 * cudaMallocAsync backend: memory_allocated, memory_reserved, their peaks)
 * and resets its peaks and trims it (reset_peak_memory_stats, empty_cache).
 * The allocations it would hold are trainshim's pool's: the driver's pool
 * answers first (validation, errors, allocations that passed through) and
 * trainshim's figures are added to its own. */
#define DM_POOL_GET_BODY(ret, base, api, args, pool, attr, value, ok)                                        \
    TS_HOOK_PROLOGUE(ret, base, api, args);                                                                  \
    TS_OUTER_BEGIN(api);                                                                                     \
    ret r = real_ args;                                                                                      \
    uint64_t v_;                                                                                             \
    if (outer_ && r == (ok) && (value)                                                                       \
        && ts_dev_mempool_attr((uint64_t)(uintptr_t)(pool), (int)(attr), &v_))                               \
        *(uint64_t *)(value) += v_;                                                                          \
    TS_OUTER_END(api, r);                                                                                    \
    return r

#define DM_POOL_SET_BODY(ret, base, api, args, pool, attr, ok)                                               \
    TS_HOOK_PROLOGUE(ret, base, api, args);                                                                  \
    TS_OUTER_BEGIN(api);                                                                                     \
    ret r = real_ args;                                                                                      \
    if (outer_ && r == (ok))                                                                                 \
        ts_dev_mempool_attr_set((uint64_t)(uintptr_t)(pool), (int)(attr));                                   \
    TS_OUTER_END(api, r);                                                                                    \
    return r

#define DM_POOL_TRIM_BODY(ret, base, api, args, pool, keep, ok)                                              \
    TS_HOOK_PROLOGUE(ret, base, api, args);                                                                  \
    TS_OUTER_BEGIN(api);                                                                                     \
    ret r = real_ args;                                                                                      \
    if (outer_ && r == (ok))                                                                                 \
        ts_dev_mempool_trim((uint64_t)(uintptr_t)(pool), keep);                                              \
    TS_OUTER_END(api, r);                                                                                    \
    return r

cudaError_t ts_body_cudaMemPoolGetAttribute(int api, cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                            void *value)
{
    DM_POOL_GET_BODY(cudaError_t, cudaMemPoolGetAttribute, api, (memPool, attr, value), memPool, attr, value,
                     cudaSuccess);
}

cudaError_t ts_body_cudaMemPoolSetAttribute(int api, cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                            void *value)
{
    DM_POOL_SET_BODY(cudaError_t, cudaMemPoolSetAttribute, api, (memPool, attr, value), memPool, attr,
                     cudaSuccess);
}

cudaError_t ts_body_cudaMemPoolTrimTo(int api, cudaMemPool_t memPool, size_t minBytesToKeep)
{
    DM_POOL_TRIM_BODY(cudaError_t, cudaMemPoolTrimTo, api, (memPool, minBytesToKeep), memPool, minBytesToKeep,
                      cudaSuccess);
}

CUresult ts_body_cuMemPoolGetAttribute(int api, CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    DM_POOL_GET_BODY(CUresult, cuMemPoolGetAttribute, api, (pool, attr, value), pool, attr, value,
                     CUDA_SUCCESS);
}

CUresult ts_body_cuMemPoolSetAttribute(int api, CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    DM_POOL_SET_BODY(CUresult, cuMemPoolSetAttribute, api, (pool, attr, value), pool, attr, CUDA_SUCCESS);
}

CUresult ts_body_cuMemPoolTrimTo(int api, CUmemoryPool pool, size_t minBytesToKeep)
{
    DM_POOL_TRIM_BODY(CUresult, cuMemPoolTrimTo, api, (pool, minBytesToKeep), pool, minBytesToKeep,
                      CUDA_SUCCESS);
}

/* A device's current pool: stream-ordered allocations come from the pool the
 * program made current (cudaDeviceSetMemPool), not trainshim's, until the
 * default is current again (set back, or that pool destroyed). */
cudaError_t ts_body_cudaDeviceSetMemPool(int api, int device, cudaMemPool_t memPool)
{
    TS_OBSERVE_BODY(cudaError_t, cudaDeviceSetMemPool, api, (device, memPool),
                    if (r == cudaSuccess) ts_dev_current_pool_set(device, (uint64_t)(uintptr_t)memPool));
}

cudaError_t ts_body_cudaMemPoolDestroy(int api, cudaMemPool_t memPool)
{
    TS_OBSERVE_BODY(cudaError_t, cudaMemPoolDestroy, api, (memPool),
                    if (r == cudaSuccess) ts_dev_mempool_destroyed((uint64_t)(uintptr_t)memPool));
}

CUresult ts_body_cuDeviceSetMemPool(int api, CUdevice dev, CUmemoryPool pool)
{
    TS_OBSERVE_BODY(CUresult, cuDeviceSetMemPool, api, (dev, pool),
                    if (r == CUDA_SUCCESS) ts_dev_current_pool_set(dev, (uint64_t)(uintptr_t)pool));
}

CUresult ts_body_cuMemPoolDestroy(int api, CUmemoryPool pool)
{
    TS_OBSERVE_BODY(CUresult, cuMemPoolDestroy, api, (pool),
                    if (r == CUDA_SUCCESS) ts_dev_mempool_destroyed((uint64_t)(uintptr_t)pool));
}

/* A pooled block is an allocation of its own, found from any address in it
 * (the driver would name the whole page mapping or segment). */
CUresult ts_body_cuMemGetAddressRange_v2(int api, CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    TS_HOOK_PROLOGUE(CUresult, cuMemGetAddressRange_v2, api, (pbase, psize, dptr));
    TS_OUTER_BEGIN(api);
    uint64_t base = 0, size = 0;
    CUresult r;
    if (ts_dev_range(dptr, &base, &size)) {
        if (pbase)
            *pbase = base;
        if (psize)
            *psize = size;
        r = CUDA_SUCCESS;
    } else {
        r = real_(pbase, psize, dptr);
    }
    TS_OUTER_END(api, r);
    return r;
}

/* The range attributes of a pooled pointer name its block, as
 * cuMemGetAddressRange does (the driver's answer is the pool's mapping). */
static void block_range_attribute(CUpointer_attribute attribute, void *data, CUdeviceptr ptr)
{
    uint64_t base = 0, size = 0;
    if (!data
        || (attribute != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR
            && attribute != CU_POINTER_ATTRIBUTE_RANGE_SIZE)
        || !ts_dev_range(ptr, &base, &size))
        return;
    if (attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
        *(CUdeviceptr *)data = base;
    else
        *(size_t *)data = size;
}

CUresult ts_body_cuPointerGetAttribute(int api, void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    TS_HOOK_PROLOGUE(CUresult, cuPointerGetAttribute, api, (data, attribute, ptr));
    TS_OUTER_BEGIN(api);
    CUresult r = real_(data, attribute, ptr);
    if (r == CUDA_SUCCESS)
        block_range_attribute(attribute, data, ptr);
    TS_OUTER_END(api, r);
    return r;
}

CUresult ts_body_cuPointerGetAttributes(int api, unsigned int numAttributes, CUpointer_attribute *attributes,
                                        void **data, CUdeviceptr ptr)
{
    TS_HOOK_PROLOGUE(CUresult, cuPointerGetAttributes, api, (numAttributes, attributes, data, ptr));
    TS_OUTER_BEGIN(api);
    CUresult r = real_(numAttributes, attributes, data, ptr);
    for (unsigned i = 0; r == CUDA_SUCCESS && attributes && data && i < numAttributes; i++)
        block_range_attribute(attributes[i], data[i], ptr);
    TS_OUTER_END(api, r);
    return r;
}

cudaError_t ts_dm_cudaDeviceReset(int api)
{
    TS_HOOK_PROLOGUE(cudaError_t, cudaDeviceReset, api, ());
    TS_OUTER_BEGIN(api);
    int dev = -1;
    ts_fn_cudaGetDevice get = TS_REAL(cudaGetDevice);
    if (get && get(&dev) == cudaSuccess)
        ts_dev_reset(dev);
    cudaError_t r = real_();
    ts_streams_destroyed();
    TS_OUTER_END(api, r);
    return r;
}

/* ---- streams ------------------------------------------------------------ */
/* Runtime and driver alike: only the outermost call counts (the runtime's
 * own cudaStreamCreate or cudaStreamBeginCapture reaches the driver's
 * through the hooks when the shim handed the runtime its proc addresses). */

#define DM_STREAM_CREATE(ret, base, api, args, out, ok)                                                      \
    TS_OBSERVE_BODY(ret, base, api, args,                                                                    \
                    if (outer_ && r == (ok) && (out)) ts_dev_stream_created((uint64_t)(uintptr_t) * (out)))

/* A hook whose `always` statement follows the real call whether the shim is
 * active or not, outermost or nested, failed or not; `before` precedes the
 * call of an outermost or nested active one. */
#define DM_THEN_ALWAYS(ret, base, api, args, before, always)                                                 \
    TS_HOOK_REAL(ret, base, api);                                                                            \
    if (ts_likely(!ts_active())) {                                                                           \
        ret r0_ = real_ args;                                                                                \
        always;                                                                                              \
        return r0_;                                                                                          \
    }                                                                                                        \
    TS_OUTER_BEGIN(api);                                                                                     \
    before;                                                                                                  \
    ret r = real_ args;                                                                                      \
    always;                                                                                                  \
    TS_OUTER_END(api, r);                                                                                    \
    return r

/* Whatever destroys streams (a stream, a context, active or not) ends the
 * answers kept for their handles, which the driver may give out again
 * (ts_streams_destroyed). */
#define DM_DESTROYS_STREAMS(ret, base, api, args, before)                                                    \
    DM_THEN_ALWAYS(ret, base, api, args, before, ts_streams_destroyed())

#define DM_STREAM_DESTROY(ret, base, api, stream)                                                            \
    DM_DESTROYS_STREAMS(ret, base, api, (stream),                                                            \
                        if (outer_ && (stream)) ts_dev_stream_destroying((uint64_t)(uintptr_t)(stream)))

/* Captures in progress.  A synchronous allocation then goes to the real
 * call, which allows or refuses it as the thread's capture mode says (a
 * global-mode capture refuses it and is invalidated, which the pool cannot
 * imitate); and only then does the pool ask cuStreamIsCapturing (devmem.c),
 * so every entry point that begins a capture is hooked, runtime and driver,
 * plain and ToGraph.  A begin counts before the real call, so the count
 * never lags a capture that has started; a failed begin takes it back.  An
 * end counts when the capture is over (ok, invalidated or unjoined); an end
 * that fails otherwise (wrong thread, not capturing) leaves the capture, and
 * the count, as they were. */
#define DM_CAPTURE_BEGIN(ret, base, api, args, ok)                                                           \
    TS_HOOK_PROLOGUE(ret, base, api, args);                                                                  \
    TS_OUTER_BEGIN(api);                                                                                     \
    if (outer_)                                                                                              \
        ts_dev_capture_begin();                                                                              \
    ret r = real_ args;                                                                                      \
    if (outer_ && r != (ok))                                                                                 \
        ts_dev_capture_end();                                                                                \
    TS_OUTER_END(api, r);                                                                                    \
    return r

#define DM_CAPTURE_END(ret, base, api, args, ok, invalidated, unjoined)                                      \
    TS_OBSERVE_BODY(ret, base, api, args,                                                                    \
                    if (outer_ && (r == (ok) || r == (invalidated) || r == (unjoined)))                      \
                        ts_dev_capture_end())

cudaError_t ts_body_cudaStreamCreate(int api, cudaStream_t *pStream)
{
    DM_STREAM_CREATE(cudaError_t, cudaStreamCreate, api, (pStream), pStream, cudaSuccess);
}

cudaError_t ts_body_cudaStreamCreateWithFlags(int api, cudaStream_t *pStream, unsigned int flags)
{
    DM_STREAM_CREATE(cudaError_t, cudaStreamCreateWithFlags, api, (pStream, flags), pStream, cudaSuccess);
}

cudaError_t ts_body_cudaStreamCreateWithPriority(int api, cudaStream_t *pStream, unsigned int flags,
                                                 int priority)
{
    DM_STREAM_CREATE(cudaError_t, cudaStreamCreateWithPriority, api, (pStream, flags, priority), pStream,
                     cudaSuccess);
}

cudaError_t ts_body_cudaStreamDestroy(int api, cudaStream_t stream)
{
    DM_STREAM_DESTROY(cudaError_t, cudaStreamDestroy, api, stream);
}

cudaError_t ts_body_cudaStreamBeginCapture(int api, cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    DM_CAPTURE_BEGIN(cudaError_t, cudaStreamBeginCapture, api, (stream, mode), cudaSuccess);
}

cudaError_t ts_body_cudaStreamBeginCaptureToGraph(int api, cudaStream_t stream, cudaGraph_t graph,
                                                  const cudaGraphNode_t *dependencies,
                                                  const cudaGraphEdgeData *dependencyData,
                                                  size_t numDependencies, enum cudaStreamCaptureMode mode)
{
    DM_CAPTURE_BEGIN(cudaError_t, cudaStreamBeginCaptureToGraph, api,
                     (stream, graph, dependencies, dependencyData, numDependencies, mode), cudaSuccess);
}

cudaError_t ts_body_cudaStreamEndCapture(int api, cudaStream_t stream, cudaGraph_t *pGraph)
{
    DM_CAPTURE_END(cudaError_t, cudaStreamEndCapture, api, (stream, pGraph), cudaSuccess,
                   cudaErrorStreamCaptureInvalidated, cudaErrorStreamCaptureUnjoined);
}

CUresult ts_body_cuStreamCreate(int api, CUstream *phStream, unsigned int Flags)
{
    DM_STREAM_CREATE(CUresult, cuStreamCreate, api, (phStream, Flags), phStream, CUDA_SUCCESS);
}

CUresult ts_body_cuStreamCreateWithPriority(int api, CUstream *phStream, unsigned int flags, int priority)
{
    DM_STREAM_CREATE(CUresult, cuStreamCreateWithPriority, api, (phStream, flags, priority), phStream,
                     CUDA_SUCCESS);
}

CUresult ts_body_cuStreamDestroy_v2(int api, CUstream hStream)
{
    DM_STREAM_DESTROY(CUresult, cuStreamDestroy_v2, api, hStream);
}

CUresult ts_body_cuCtxDestroy_v2(int api, CUcontext ctx)
{
    DM_DESTROYS_STREAMS(CUresult, cuCtxDestroy_v2, api, (ctx), (void)0);
}

/* A reset through the driver destroys every allocation, the pool's pages
 * too: the pool is given up first, as at cudaDeviceReset (whose own driver
 * call is nested, not outermost). */
CUresult ts_body_cuDevicePrimaryCtxReset_v2(int api, CUdevice dev)
{
    DM_DESTROYS_STREAMS(CUresult, cuDevicePrimaryCtxReset_v2, api, (dev), if (outer_) ts_dev_reset((int)dev));
}

/* The last release destroys the primary context, with its streams. */
CUresult ts_body_cuDevicePrimaryCtxRelease_v2(int api, CUdevice dev)
{
    DM_DESTROYS_STREAMS(CUresult, cuDevicePrimaryCtxRelease_v2, api, (dev), (void)0);
}

/* The CUDA 10 names, which binaries built against older headers call: the
 * same as their _v2. */
CUresult ts_body_cuDevicePrimaryCtxReset(int api, CUdevice dev)
{
    DM_DESTROYS_STREAMS(CUresult, cuDevicePrimaryCtxReset, api, (dev), if (outer_) ts_dev_reset((int)dev));
}

CUresult ts_body_cuDevicePrimaryCtxRelease(int api, CUdevice dev)
{
    DM_DESTROYS_STREAMS(CUresult, cuDevicePrimaryCtxRelease, api, (dev), (void)0);
}

CUresult ts_body_cuStreamDestroy(int api, CUstream hStream)
{
    DM_STREAM_DESTROY(CUresult, cuStreamDestroy, api, hStream);
}

CUresult ts_body_cuCtxDestroy(int api, CUcontext ctx)
{
    DM_DESTROYS_STREAMS(CUresult, cuCtxDestroy, api, (ctx), (void)0);
}

CUresult ts_body_cuCtxDetach(int api, CUcontext ctx)
{
    DM_DESTROYS_STREAMS(CUresult, cuCtxDetach, api, (ctx), (void)0);
}

/* ---- the current context ------------------------------------------------ */
/* Whatever may change the calling thread's current context ends the current
 * device kept for it (ts_current_device_kept): failed or not, nested or not
 * (the runtime's cudaSetDevice reaches cuCtxSetCurrent through the hooks
 * when the shim handed it its proc addresses), in passthrough too. */
#define DM_SWITCHES_CONTEXT(ret, base, api, args)                                                            \
    DM_THEN_ALWAYS(ret, base, api, args, (void)0, ts_current_context_changed())

CUresult ts_body_cuCtxSetCurrent(int api, CUcontext ctx)
{
    DM_SWITCHES_CONTEXT(CUresult, cuCtxSetCurrent, api, (ctx));
}

CUresult ts_body_cuCtxPushCurrent_v2(int api, CUcontext ctx)
{
    DM_SWITCHES_CONTEXT(CUresult, cuCtxPushCurrent_v2, api, (ctx));
}

CUresult ts_body_cuCtxPopCurrent_v2(int api, CUcontext *pctx)
{
    DM_SWITCHES_CONTEXT(CUresult, cuCtxPopCurrent_v2, api, (pctx));
}

CUresult ts_body_cuCtxPushCurrent(int api, CUcontext ctx)
{
    DM_SWITCHES_CONTEXT(CUresult, cuCtxPushCurrent, api, (ctx));
}

CUresult ts_body_cuCtxPopCurrent(int api, CUcontext *pctx)
{
    DM_SWITCHES_CONTEXT(CUresult, cuCtxPopCurrent, api, (pctx));
}

CUresult ts_body_cuCtxCreate(int api, CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    DM_SWITCHES_CONTEXT(CUresult, cuCtxCreate, api, (pctx, flags, dev));
}

CUresult ts_body_cuCtxCreate_v2(int api, CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    DM_SWITCHES_CONTEXT(CUresult, cuCtxCreate_v2, api, (pctx, flags, dev));
}

CUresult ts_body_cuCtxCreate_v3(int api, CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                unsigned int flags, CUdevice dev)
{
    DM_SWITCHES_CONTEXT(CUresult, cuCtxCreate_v3, api, (pctx, paramsArray, numParams, flags, dev));
}

CUresult ts_body_cuCtxCreate_v4(int api, CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                unsigned int flags, CUdevice dev)
{
    DM_SWITCHES_CONTEXT(CUresult, cuCtxCreate_v4, api, (pctx, ctxCreateParams, flags, dev));
}

CUresult ts_body_cuStreamBeginCapture_v2(int api, CUstream hStream, CUstreamCaptureMode mode)
{
    DM_CAPTURE_BEGIN(CUresult, cuStreamBeginCapture_v2, api, (hStream, mode), CUDA_SUCCESS);
}

CUresult ts_body_cuStreamBeginCaptureToGraph(int api, CUstream hStream, CUgraph hGraph,
                                             const CUgraphNode *dependencies,
                                             const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                             CUstreamCaptureMode mode)
{
    DM_CAPTURE_BEGIN(CUresult, cuStreamBeginCaptureToGraph, api,
                     (hStream, hGraph, dependencies, dependencyData, numDependencies, mode), CUDA_SUCCESS);
}

CUresult ts_body_cuStreamEndCapture(int api, CUstream hStream, CUgraph *phGraph)
{
    DM_CAPTURE_END(CUresult, cuStreamEndCapture, api, (hStream, phGraph), CUDA_SUCCESS,
                   CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
}

/* Peer access to pooled memory needs cuMemSetAccess for the peer on the
 * owner's pages (VMM memory is not covered by the context-level peer
 * mapping): the current device may now read and write peerDevice's memory. */
cudaError_t ts_body_cudaDeviceEnablePeerAccess(int api, int peerDevice, unsigned int flags)
{
    TS_HOOK_PROLOGUE(cudaError_t, cudaDeviceEnablePeerAccess, api, (peerDevice, flags));
    TS_OUTER_BEGIN(api);
    cudaError_t r = real_(peerDevice, flags);
    if (r == cudaSuccess || r == cudaErrorPeerAccessAlreadyEnabled)
        ts_dev_peer_enabled(peerDevice, ts_current_device());
    TS_OUTER_END(api, r);
    return r;
}
