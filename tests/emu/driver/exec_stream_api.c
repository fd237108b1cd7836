/* exec_stream_api.c: the cuStream* entry points, host functions and
 * cuCtxSynchronize, over the engine of exec_stream.c.  Each _ptsz variant
 * resolves handle 0 to the calling thread's per-thread stream. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "exec_internal.h"

#include <stdlib.h>

#define CHECK(x) do { CUresult rc_ = (x); if (rc_ != CUDA_SUCCESS) return rc_; } while (0)

static CUresult stream_create(CUstream *phStream, unsigned flags, int priority)
{
    CHECK(emu_require_ctx());
    if (!phStream) return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
    /* Out-of-range priorities are clamped, as documented. */
    if (priority > 0) priority = 0;
    if (priority < -5) priority = -5;
    struct emu_stream *st;
    CHECK(emu_stream_create(&st, flags, priority));
    *phStream = (CUstream)st;
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    EMU_ENTRY(cuStreamCreate);
    return stream_create(phStream, Flags, 0);
}

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    EMU_ENTRY(cuStreamCreateWithPriority);
    return stream_create(phStream, flags, priority);
}

static CUresult stream_destroy(CUstream hStream)
{
    if (!hStream || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD)
        return CUDA_ERROR_INVALID_HANDLE;
    struct emu_stream *st = emu_stream_resolve(hStream, false);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    emu_stream_destroy_resolved(st);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------- sync and query */
static CUresult stream_sync(CUstream h, bool pt)
{
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    return emu_stream_sync_resolved(st);
}
CUresult cuStreamSynchronize(CUstream hStream)
{ EMU_ENTRY_STREAM(cuStreamSynchronize, hStream); return stream_sync(hStream, false); }
CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{ EMU_ENTRY_STREAM(cuStreamSynchronize_ptsz, hStream); return stream_sync(hStream, true); }

static CUresult stream_query(CUstream h, bool pt)
{
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    struct emu_capture *c = __atomic_load_n(&st->capture, __ATOMIC_ACQUIRE);
    if (c) { emu_capture_invalidate(c); return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; }
    if (st->kind == EMU_STREAM_LEGACY) CHECK(emu_capture_check_legacy(st->dev));
    CHECK(emu_sticky());
    return __atomic_load_n(&st->done_seq, __ATOMIC_ACQUIRE) >= __atomic_load_n(&st->enq_seq, __ATOMIC_ACQUIRE)
               ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult cuStreamQuery(CUstream hStream)
{ EMU_ENTRY_STREAM(cuStreamQuery, hStream); return stream_query(hStream, false); }
CUresult cuStreamQuery_ptsz(CUstream hStream)
{ EMU_ENTRY_STREAM(cuStreamQuery_ptsz, hStream); return stream_query(hStream, true); }

CUresult cuCtxSynchronize(void)
{
    EMU_ENTRY(cuCtxSynchronize);
    CHECK(emu_require_ctx());
    int dev = emu_current_device();
    /* A device-wide sync would wait on a capturing stream: illegal. */
    if (emu_capture_active_on(dev)) {
        emu_capture_invalidate_dev(dev);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return emu_device_sync(dev);
}

/* ---------------------------------------------------------------- getters */
static CUresult get_priority(CUstream h, int *p, bool pt)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    *p = st->priority;
    return CUDA_SUCCESS;
}
CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{ EMU_ENTRY_STREAM(cuStreamGetPriority, hStream); return get_priority(hStream, priority, false); }
CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority)
{ EMU_ENTRY_STREAM(cuStreamGetPriority_ptsz, hStream); return get_priority(hStream, priority, true); }

static CUresult get_flags(CUstream h, unsigned *f, bool pt)
{
    if (!f) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    *f = st->flags;
    return CUDA_SUCCESS;
}
CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{ EMU_ENTRY_STREAM(cuStreamGetFlags, hStream); return get_flags(hStream, flags, false); }
CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{ EMU_ENTRY_STREAM(cuStreamGetFlags_ptsz, hStream); return get_flags(hStream, flags, true); }

static CUresult get_device(CUstream h, CUdevice *d, bool pt)
{
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    *d = st->dev;
    return CUDA_SUCCESS;
}
CUresult cuStreamGetDevice(CUstream hStream, CUdevice *device)
{ EMU_ENTRY_STREAM(cuStreamGetDevice, hStream); return get_device(hStream, device, false); }
CUresult cuStreamGetDevice_ptsz(CUstream hStream, CUdevice *device)
{ EMU_ENTRY_STREAM(cuStreamGetDevice_ptsz, hStream); return get_device(hStream, device, true); }

static CUresult get_ctx(CUstream h, CUcontext *c, bool pt)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    *c = emu_primary_ctx(st->dev);
    return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{ EMU_ENTRY_STREAM(cuStreamGetCtx, hStream); return get_ctx(hStream, pctx, false); }
CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{ EMU_ENTRY_STREAM(cuStreamGetCtx_ptsz, hStream); return get_ctx(hStream, pctx, true); }

static CUresult get_id(CUstream h, unsigned long long *id, bool pt)
{
    if (!id) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    *id = st->kind == EMU_STREAM_LEGACY ? 1 : st->id;
    return CUDA_SUCCESS;
}
CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{ EMU_ENTRY_INIT(cuStreamGetId); return get_id(hStream, streamId, false); }
CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId)
{ EMU_ENTRY_INIT(cuStreamGetId_ptsz); return get_id(hStream, streamId, true); }

/* ---------------------------------------------------------- host functions */
struct host_fn_op { CUhostFn fn; void *user; };
static void run_host_fn(void *p) { struct host_fn_op *h = p; h->fn(h->user); }

static CUresult launch_host_func(CUstream h, CUhostFn fn, void *user, bool pt)
{
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    struct host_fn_op *op = malloc(sizeof *op);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    *op = (struct host_fn_op){fn, user};
    CUresult rc = emu_stream_enqueue_on(st, run_host_fn, op, free, "host_fn", NULL, NULL);
    if (rc != CUDA_SUCCESS) free(op);
    return rc;
}
CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{ EMU_ENTRY_STREAM(cuLaunchHostFunc, hStream); return launch_host_func(hStream, fn, userData, false); }
CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{ EMU_ENTRY_STREAM(cuLaunchHostFunc_ptsz, hStream); return launch_host_func(hStream, fn, userData, true); }

struct callback_op { CUstreamCallback cb; CUstream handle; void *user; };
static void run_callback(void *p)
{
    struct callback_op *c = p;
    c->cb(c->handle, emu_sticky(), c->user);
}

static CUresult add_callback(CUstream h, CUstreamCallback cb, void *user, unsigned flags, bool pt)
{
    if (!cb || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    /* Callbacks are not allowed in graphs (cuLaunchHostFunc is). */
    if (__atomic_load_n(&st->capture, __ATOMIC_ACQUIRE)) {
        emu_capture_invalidate(st->capture);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    struct callback_op *op = malloc(sizeof *op);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    *op = (struct callback_op){cb, h, user};
    CUresult rc = emu_stream_enqueue_on(st, run_callback, op, free, "callback", NULL, NULL);
    if (rc != CUDA_SUCCESS) free(op);
    return rc;
}
CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{ EMU_ENTRY_STREAM(cuStreamAddCallback, hStream); return add_callback(hStream, callback, userData, flags, false); }
CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{ EMU_ENTRY_STREAM(cuStreamAddCallback_ptsz, hStream); return add_callback(hStream, callback, userData, flags, true); }

/* ------------------------------------------- older and context-taking forms */
CUresult cuStreamDestroy(CUstream hStream)
{ EMU_ENTRY_STREAM(cuStreamDestroy, hStream); return stream_destroy(hStream); }

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    EMU_ENTRY(cuCtxSynchronize_v2);
    if (!emu_driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    int dev = ctx ? emu_ctx_device(ctx) : (emu_require_ctx() == CUDA_SUCCESS ? emu_current_device() : -1);
    if (dev < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (emu_capture_active_on(dev)) {
        emu_capture_invalidate_dev(dev);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return emu_device_sync(dev);
}

static CUresult get_ctx_v2(CUstream h, CUcontext *c, CUgreenCtx *g, bool pt)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    *c = emu_primary_ctx(st->dev);
    if (g) *g = NULL;   /* green contexts are not emulated */
    return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{ EMU_ENTRY_STREAM(cuStreamGetCtx_v2, hStream); return get_ctx_v2(hStream, pCtx, pGreenCtx, false); }
CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{ EMU_ENTRY_STREAM(cuStreamGetCtx_v2_ptsz, hStream); return get_ctx_v2(hStream, pCtx, pGreenCtx, true); }

CUresult cuStreamDestroy_v2(CUstream hStream)
{ EMU_ENTRY_STREAM(cuStreamDestroy_v2, hStream); return stream_destroy(hStream); }
