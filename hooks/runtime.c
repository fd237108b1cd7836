/* CUDA runtime hooks (libcudart.so.13) with a hand-written body: device
 * allocations and frees, host<->device copies, device records, and the
 * driver entry points the runtime hands out.  The other runtime symbols of
 * hooks.def are generated passthrough hooks (TS_GEN_HOOK_PASS).
 *
 * Not only observation: device allocations and frees are served by the pool
 * (devmem_hooks.c), pinned host allocations by the host cache, and pageable
 * copies may go through pinned staging (shim/copy); the results the program
 * sees are the real library's answers for the same request. */
#include "hooks.h"
#include "copy/copy_engine.h"
#include "devmem_hooks.h" /* device-memory bodies: cudaMalloc, cudaFree, ... */
#include "copy/host_cache.h"
#include "host_alloc_body.h"
#include "sync_body.h"

/* ---- events ------------------------------------------------------------- */

/* A copy of `bytes` between dst and src as the runtime's kind says.  For
 * cudaMemcpyDefault the direction comes from what the pointers are. */
static void copy_event(int api, void *dst, const void *src, uint64_t bytes, enum cudaMemcpyKind kind,
                       const void *stream, bool async, uint64_t ns, cudaError_t r)
{
    int dir = TS_DEFAULT_DIR, host = TS_HOST_UNKNOWN;
    switch (kind) {
    case cudaMemcpyHostToDevice:
        dir = TS_H2D;
        host = ts_host_kind_of(ts_classify_ptr(src));
        break;
    case cudaMemcpyDeviceToHost:
        dir = TS_D2H;
        host = ts_host_kind_of(ts_classify_ptr(dst));
        break;
    case cudaMemcpyDeviceToDevice:
        dir = TS_D2D;
        host = TS_HOST_NONE;
        break;
    case cudaMemcpyHostToHost:
        dir = TS_H2H;
        host = ts_host_kind_of(ts_classify_ptr(src));
        break;
    case cudaMemcpyDefault: {
        enum ts_ptr_kind d = ts_classify_ptr(dst), s = ts_classify_ptr(src);
        dir = ts_copy_dir_of(d, s);
        host = ts_host_kind_of(dir == TS_D2H ? d : s);
        break;
    }
    default: break; /* an invalid kind: the runtime has already said so in r */
    }
    ts_ev_copy(api, dir, bytes, host, ts_stream_id(api, stream), async, ns, (int)r);
}

/* ---- allocation --------------------------------------------------------- */

static inline cudaError_t ts_body_cudaMallocFromPoolAsync(int api, void **ptr, size_t size,
                                                          cudaMemPool_t memPool, cudaStream_t stream)
{
    TS_ALLOC_BODY(cudaError_t, cudaMallocFromPoolAsync, api, (ptr, size, memPool, stream), ptr, size, stream,
                  ts_logged_stream_device(api, stream));
}

static inline cudaError_t ts_body_cudaMallocManaged(int api, void **devPtr, size_t size, unsigned int flags)
{
    TS_ALLOC_BODY(cudaError_t, cudaMallocManaged, api, (devPtr, size, flags), devPtr, size, NULL,
                  ts_current_device());
}

static inline cudaError_t ts_body_cudaMallocPitch(int api, void **devPtr, size_t *pitch, size_t width,
                                                  size_t height)
{
    TS_PITCH_ALLOC_BODY(cudaError_t, cudaMallocPitch, api, (devPtr, pitch, width, height), devPtr, pitch,
                        width, height);
}

/* Pinned host allocations through the cache: hooks/host_alloc_body.h. */
#define RT_HOST_ALLOC_BODY(...)                                                                              \
    TS_HOST_ALLOC_BODY(cudaError_t, cudaSuccess, cudaErrorMemoryAllocation, __VA_ARGS__)

static inline cudaError_t ts_body_cudaMallocHost(int api, void **ptr, size_t size)
{
    RT_HOST_ALLOC_BODY(cudaMallocHost, api, (ptr, size), ptr, size, 0u, (ptr, ts_host_cache_class(size)));
}

static inline cudaError_t ts_body_cudaHostAlloc(int api, void **pHost, size_t size, unsigned int flags)
{
    RT_HOST_ALLOC_BODY(cudaHostAlloc, api, (pHost, size, flags), pHost, size, flags,
                       (pHost, ts_host_cache_class(size), flags));
}

static inline cudaError_t ts_body_cudaFreeHost(int api, void *ptr)
{
    TS_HOST_FREE_BODY(cudaError_t, cudaSuccess, cudaErrorInvalidValue, ts_rt_note_error(r), cudaFreeHost, api,
                      ptr);
}

/* Pinned copy engine (shim/copy/copy_engine.h): a pageable host<->device copy of
 * at least TRAINSHIM_PINNED_COPY_MIN goes through pinned staging.  The engine
 * says how many rows (2D) or bytes (1D) it carried out; the rest, everything
 * it declines (small, pinned, invalid, capturing) included, is the original
 * call on the same stream, so errors are the real function's own. */
static enum ts_copy_engine_dir rt_engine_dir(enum cudaMemcpyKind kind)
{
    switch (kind) {
    case cudaMemcpyHostToDevice: return TS_CE_H2D;
    case cudaMemcpyDeviceToHost: return TS_CE_D2H;
    default: return TS_CE_NONE; /* cudaMemcpyDefault: from the pointers */
    }
}

/* Returns rows done (2D) and sets *bytes_done (1D); 0 and 0 when declined. */
static size_t rt_convert(int api, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind, cudaStream_t stream, bool sync,
                         size_t *bytes_done, struct ts_copy_stats *st)
{
    *bytes_done = 0;
    if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDefault)
        return 0;
    if (!ts_copy_wanted((uint64_t)width * height))
        return 0;
    struct ts_copy_req q = {
        .dst = dst,
        .src = src,
        .width = width,
        .height = height,
        .dpitch = dpitch,
        .spitch = spitch,
        .stream = stream == NULL && ts_api_per_thread(api) ? CU_STREAM_PER_THREAD : (CUstream)stream,
        .sync = sync,
    };
    enum ts_copy_engine_dir dir = ts_copy_classify(&q, rt_engine_dir(kind));
    if (dir == TS_CE_NONE)
        return 0;
    size_t rows = 0;
    ts_copy_run(&q, dir, &rows, bytes_done, st);
    return rows;
}

/* The end of every converted copy: the copy record (its time from t0_) and
 * the engine's statistics. */
static void rt_copy_done(int api, void *dst, const void *src, uint64_t bytes, enum cudaMemcpyKind kind,
                         cudaStream_t stream, bool async, uint64_t t0, const struct ts_copy_stats *st,
                         cudaError_t r)
{
    uint64_t ns = ts_now_ns() - t0;
    ts_offload_touch(dst, bytes, TS_TOUCH_COPY);
    ts_offload_touch(src, bytes, TS_TOUCH_COPY);
    copy_event(api, dst, src, bytes, kind, stream, async, ns, r);
    if (st->chunks)
        ts_copy_note(api, st, ns);
}

/* 1D copy, synchronous (stream NULL, no trailing argument) or async (the
 * stream as the real call's last argument, `...`): the engine carries what it
 * can, the real call the rest. */
#define RT_COPY_BODY(base, api, dst, src, count, kind, stream, async, ...)                                   \
    TS_HOOK_PROLOGUE(cudaError_t, base, api, (dst, src, count, kind, ##__VA_ARGS__));                        \
    TS_OUTER_BEGIN(api);                                                                                     \
    uint64_t t0_ = outer_ ? ts_now_ns() : 0;                                                                 \
    size_t done = 0;                                                                                         \
    struct ts_copy_stats st_ = { 0 };                                                                        \
    if (outer_)                                                                                              \
        rt_convert(api, dst, count, src, count, count, 1, kind, stream, !(async), &done, &st_);              \
    cudaError_t r = done && done == count ? cudaSuccess                                                      \
                                          : real_((char *)dst + done, (const char *)src + done,              \
                                                  count - done, kind, ##__VA_ARGS__);                        \
    if (outer_)                                                                                              \
        rt_copy_done(api, dst, src, count, kind, stream, async, t0_, &st_, r);                               \
    TS_OUTER_END(api, r);                                                                                    \
    return r

/* A 2D copy through the engine: leading rows, or for one row
 * (cublasSetVector/GetVector's form) leading bytes of it; a row wider than
 * a pitch is the real call's to refuse. */
static void rt_convert_2d(int api, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                          size_t height, enum cudaMemcpyKind kind, cudaStream_t stream, bool sync,
                          size_t *rows, size_t *bytes, struct ts_copy_stats *st)
{
    *rows = *bytes = 0;
    if (height > 1)
        *rows = rt_convert(api, dst, dpitch, src, spitch, width, height, kind, stream, sync, bytes, st);
    else if (height == 1 && dpitch >= width && spitch >= width)
        rt_convert(api, dst, width, src, width, width, 1, kind, stream, sync, bytes, st);
}

static bool rt_2d_all_done(size_t height, size_t width, size_t rows, size_t bytes)
{
    return height == 1 ? bytes && bytes == width : rows && rows == height;
}

/* 2D copy: the engine carries whole rows, the real call the rows left. */
#define RT_COPY2D_BODY(base, api, dst, dpitch, src, spitch, width, height, kind, stream, async, ...)         \
    TS_HOOK_PROLOGUE(cudaError_t, base, api,                                                                 \
                     (dst, dpitch, src, spitch, width, height, kind, ##__VA_ARGS__));                        \
    TS_OUTER_BEGIN(api);                                                                                     \
    uint64_t t0_ = outer_ ? ts_now_ns() : 0;                                                                 \
    size_t rows = 0, bytes = 0;                                                                              \
    struct ts_copy_stats st_ = { 0 };                                                                        \
    if (outer_)                                                                                              \
        rt_convert_2d(api, dst, dpitch, src, spitch, width, height, kind, stream, !(async), &rows, &bytes,   \
                      &st_);                                                                                 \
    cudaError_t r =                                                                                          \
        rt_2d_all_done(height, width, rows, bytes)                                                           \
            ? cudaSuccess                                                                                    \
            : real_((char *)dst + rows * dpitch + bytes, dpitch, (const char *)src + rows * spitch + bytes,  \
                    spitch, width - bytes, height - rows, kind, ##__VA_ARGS__);                              \
    if (outer_)                                                                                              \
        rt_copy_done(api, dst, src, (uint64_t)width *height, kind, stream, async, t0_, &st_, r);             \
    TS_OUTER_END(api, r);                                                                                    \
    return r

static inline cudaError_t ts_body_cudaMemcpy(int api, void *dst, const void *src, size_t count,
                                             enum cudaMemcpyKind kind)
{
    RT_COPY_BODY(cudaMemcpy, api, dst, src, count, kind, NULL, false);
}

static inline cudaError_t ts_body_cudaMemcpyAsync(int api, void *dst, const void *src, size_t count,
                                                  enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_COPY_BODY(cudaMemcpyAsync, api, dst, src, count, kind, stream, true, stream);
}

static inline cudaError_t ts_body_cudaMemcpy2D(int api, void *dst, size_t dpitch, const void *src,
                                               size_t spitch, size_t width, size_t height,
                                               enum cudaMemcpyKind kind)
{
    RT_COPY2D_BODY(cudaMemcpy2D, api, dst, dpitch, src, spitch, width, height, kind, NULL, false);
}

static inline cudaError_t ts_body_cudaMemcpy2DAsync(int api, void *dst, size_t dpitch, const void *src,
                                                    size_t spitch, size_t width, size_t height,
                                                    enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_COPY2D_BODY(cudaMemcpy2DAsync, api, dst, dpitch, src, spitch, width, height, kind, stream, true,
                   stream);
}

/* Peer copies never touch host memory. */
static inline cudaError_t ts_body_cudaMemcpyPeer(int api, void *dst, int dstDevice, const void *src,
                                                 int srcDevice, size_t count)
{
    TS_HOOK_PROLOGUE(cudaError_t, cudaMemcpyPeer, api, (dst, dstDevice, src, srcDevice, count));
    TS_OUTER_BEGIN(api);
    uint64_t t0 = outer_ ? ts_now_ns() : 0;
    cudaError_t r = real_(dst, dstDevice, src, srcDevice, count);
    if (outer_)
        ts_ev_copy(api, TS_PEER, count, TS_HOST_NONE, 0, false, ts_now_ns() - t0, (int)r);
    TS_OUTER_END(api, r);
    return r;
}

static inline cudaError_t ts_body_cudaMemcpyPeerAsync(int api, void *dst, int dstDevice, const void *src,
                                                      int srcDevice, size_t count, cudaStream_t stream)
{
    TS_HOOK_PROLOGUE(cudaError_t, cudaMemcpyPeerAsync, api, (dst, dstDevice, src, srcDevice, count, stream));
    TS_OUTER_BEGIN(api);
    uint64_t t0 = outer_ ? ts_now_ns() : 0;
    cudaError_t r = real_(dst, dstDevice, src, srcDevice, count, stream);
    if (outer_)
        ts_ev_copy(api, TS_PEER, count, TS_HOST_NONE, ts_stream_id(api, stream), true, ts_now_ns() - t0,
                   (int)r);
    TS_OUTER_END(api, r);
    return r;
}

/* ---- devices ------------------------------------------------------------ */

static inline cudaError_t ts_body_cudaGetDeviceProperties(int api, struct cudaDeviceProp *prop, int device)
{
    TS_HOOK_PROLOGUE(cudaError_t, cudaGetDeviceProperties, api, (prop, device));
    TS_OUTER_BEGIN(api);
    cudaError_t r = real_(prop, device);
    if (outer_ && r == cudaSuccess)
        ts_note_device(device);
    TS_OUTER_END(api, r);
    return r;
}

/* It ends the current device kept for the thread (ts_current_device_kept),
 * in passthrough too: the runtime may switch the context without a driver
 * call the hooks see. */
static inline cudaError_t ts_body_cudaSetDevice(int api, int device)
{
    TS_HOOK_REAL(cudaError_t, cudaSetDevice, api);
    if (ts_unlikely(!ts_active())) {
        cudaError_t r0 = real_(device);
        ts_current_context_changed();
        return r0;
    }
    TS_OUTER_BEGIN(api);
    cudaError_t r = real_(device);
    ts_current_context_changed();
    if (outer_ && r == cudaSuccess)
        ts_note_device(device);
    TS_OUTER_END(api, r);
    return r;
}

/* ---- launches and synchronizations: what offload's step order sees ------- */

/* A kernel's parameters are counted by asking past the last one, which
 * leaves that error as the runtime's last error: it is taken back, and an
 * error the program had not read yet is put back (ts_rt_note_error). */
static int rt_param_info(const void *func, size_t i, size_t *off, size_t *size)
{
    static __thread cudaError_t unread;
    ts_fn_cudaFuncGetParamInfo info = TS_REAL(cudaFuncGetParamInfo);
    ts_fn_cudaPeekAtLastError peek = TS_REAL(cudaPeekAtLastError);
    ts_fn_cudaGetLastError take = TS_REAL(cudaGetLastError);
    if (!info || !peek || !take)
        return -1;
    if (i == 0)
        unread = peek();
    cudaError_t e = info(func, i, off, size);
    if (e != cudaSuccess) {
        take();
        if (unread != cudaSuccess)
            ts_rt_note_error(unread);
    }
    return (int)e;
}

static inline cudaError_t ts_body_cudaLaunchKernel(int api, const void *func, dim3 gridDim, dim3 blockDim,
                                                   void **args, size_t sharedMem, cudaStream_t stream)
{
    TS_OBSERVE_BODY(cudaError_t, cudaLaunchKernel, api, (func, gridDim, blockDim, args, sharedMem, stream),
                    if (outer_ && r == cudaSuccess) ts_offload_touch_args(func, args, rt_param_info));
}

/* cudaKernel_t is a CUkernel (cuda_runtime_api.h) */
static int rt_kernel_param_info(const void *kernel, size_t i, size_t *off, size_t *size)
{
    ts_fn_cuKernelGetParamInfo info = TS_REAL(cuKernelGetParamInfo);
    return info ? (int)info((CUkernel)kernel, i, off, size) : -1;
}

static inline cudaError_t ts_body___cudaLaunchKernel(int api, cudaKernel_t kernel, dim3 gridDim,
                                                     dim3 blockDim, void **args, size_t sharedMem,
                                                     cudaStream_t stream)
{
    TS_OBSERVE_BODY(cudaError_t, __cudaLaunchKernel, api,
                    (kernel, gridDim, blockDim, args, sharedMem, stream),
                    if (outer_ && r == cudaSuccess)
                        ts_offload_touch_args((const void *)kernel, args, rt_kernel_param_info));
}

/* ---- host synchronizations ---------------------------------------------- */

static inline cudaError_t ts_body_cudaStreamSynchronize(int api, cudaStream_t stream)
{
    TS_SYNC_BODY_THEN(cudaError_t, cudaStreamSynchronize, api, (stream), TS_SYNC_STREAM,
                      ts_stream_id(api, stream), ts_sync_stream_pending(ts_stream_id(api, stream)),
                      if (r == cudaSuccess) ts_offload_sync_seen());
}

static inline cudaError_t device_sync_body(int api)
{
    TS_SYNC_BODY_THEN(cudaError_t, cudaDeviceSynchronize, api, (), TS_SYNC_DEVICE, 0, TS_SYNC_UNKNOWN,
                      if (r == cudaSuccess) ts_offload_sync_seen());
}
/* The generated OWN hook passes its (empty) argument list after the id. */
#define ts_body_cudaDeviceSynchronize(api, ...) device_sync_body(api)

static inline cudaError_t ts_body_cudaEventSynchronize(int api, cudaEvent_t event)
{
    TS_SYNC_BODY(cudaError_t, cudaEventSynchronize, api, (event), TS_SYNC_EVENT, (uint64_t)(uintptr_t)event,
                 ts_sync_event_pending(event));
}

/* ---- driver entry points ------------------------------------------------ */
/* PyTorch's expandable segments reach cuMem* this way: wrap what the runtime
 * returns so those driver calls reach our driver hooks. */

static inline cudaError_t ts_body_cudaGetDriverEntryPoint(int api, const char *symbol, void **funcPtr,
                                                          unsigned long long flags,
                                                          enum cudaDriverEntryPointQueryResult *driverStatus)
{
    TS_PROC_ADDRESS_BODY(cudaError_t, cudaGetDriverEntryPoint, api, (symbol, funcPtr, flags, driverStatus),
                         symbol, funcPtr);
}

static inline cudaError_t
ts_body_cudaGetDriverEntryPointByVersion(int api, const char *symbol, void **funcPtr,
                                         unsigned int cudaVersion, unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *driverStatus)
{
    TS_PROC_ADDRESS_BODY(cudaError_t, cudaGetDriverEntryPointByVersion, api,
                         (symbol, funcPtr, cudaVersion, flags, driverStatus), symbol, funcPtr);
}

#define TS_GEN_LIB_cudart(...) TS_GEN_HOOK(__VA_ARGS__)
#include "hooks_gen.h"
