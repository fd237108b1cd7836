/* Streams, events, host functions and stream callbacks, with their
 * per-thread-default-stream (_ptsz) variants. */
#include <stdlib.h>
#include "rt_internal.h"

/* ---- streams ------------------------------------------------------------- */
cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    if (!pStream)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuStreamCreate)((CUstream *)pStream, CU_STREAM_DEFAULT));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking))
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    /* cudaStreamNonBlocking == CU_STREAM_NON_BLOCKING */
    return rt_drv(EMU_DRV(cuStreamCreate)((CUstream *)pStream, flags));
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking))
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuStreamCreateWithPriority)((CUstream *)pStream, flags, priority));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuStreamDestroy_v2)((CUstream)stream));
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuStreamSynchronize)((CUstream)stream));
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuStreamQuery)((CUstream)stream));
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuStreamWaitEvent)((CUstream)stream, (CUevent)event, flags));
}

cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
    if (!priority)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuStreamGetPriority)((CUstream)hStream, priority));
}

cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
    if (!flags)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuStreamGetFlags)((CUstream)hStream, flags));
}

cudaError_t cudaStreamGetId(cudaStream_t hStream, unsigned long long *streamId)
{
    if (!streamId)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuStreamGetId)((CUstream)hStream, streamId));
}

cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int *device)
{
    if (!device)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    CUdevice d = 0;
    CUresult r = EMU_DRV(cuStreamGetDevice)((CUstream)hStream, &d);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *device = d;
    return cudaSuccess;
}

/* cudaStreamAddCallback hands the callback a cudaError_t: a trampoline maps
 * the driver's CUresult.  One small record per callback (not a hot path). */
struct rt_callback {
    cudaStreamCallback_t fn;
    void *user_data;
    cudaStream_t stream;    /* the handle the caller passed */
};

static void CUDA_CB rt_callback_trampoline(CUstream s, CUresult status, void *arg)
{
    (void)s;
    struct rt_callback cb = *(struct rt_callback *)arg;
    free(arg);
    cb.fn(cb.stream, rt_map(status), cb.user_data);
}

cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void *userData,
                                  unsigned int flags)
{
    if (!callback || flags != 0)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    struct rt_callback *cb = malloc(sizeof *cb);
    if (!cb)
        return rt_set(cudaErrorMemoryAllocation);
    *cb = (struct rt_callback){ callback, userData, stream };
    CUresult r = EMU_DRV(cuStreamAddCallback)((CUstream)stream, rt_callback_trampoline, cb, 0);
    if (r != CUDA_SUCCESS)
        free(cb);
    return rt_drv(r);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    if (!fn)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuLaunchHostFunc)((CUstream)stream, fn, userData));
}

/* ---- events -------------------------------------------------------------- */
cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    if (!event)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuEventCreate)((CUevent *)event, CU_EVENT_DEFAULT));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    if (!event || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess)))
        return rt_set(cudaErrorInvalidValue);
    /* An interprocess event must not time (as documented). */
    if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming))
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    /* cudaEvent* flags equal CU_EVENT_* bits. */
    return rt_drv(EMU_DRV(cuEventCreate)((CUevent *)event, flags));
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuEventRecord)((CUevent)event, (CUstream)stream));
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuEventRecordWithFlags)((CUevent)event, (CUstream)stream, flags));
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuEventQuery)((CUevent)event));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuEventSynchronize)((CUevent)event));
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!ms)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuEventElapsedTime_v2)(ms, (CUevent)start, (CUevent)end));
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuEventDestroy_v2)((CUevent)event));
}

/* ---- per-thread default stream variants ---------------------------------- */
#define RT_PTSZ_DECL(ret, name, params) ret name##_ptsz params; ret name##_ptsz params

RT_PTSZ_DECL(cudaError_t, cudaStreamSynchronize, (cudaStream_t s)) { return cudaStreamSynchronize(rt_ptsz(s)); }
RT_PTSZ_DECL(cudaError_t, cudaStreamQuery, (cudaStream_t s)) { return cudaStreamQuery(rt_ptsz(s)); }
RT_PTSZ_DECL(cudaError_t, cudaStreamWaitEvent, (cudaStream_t s, cudaEvent_t e, unsigned int flags))
{
    return cudaStreamWaitEvent(rt_ptsz(s), e, flags);
}
RT_PTSZ_DECL(cudaError_t, cudaStreamGetPriority, (cudaStream_t s, int *priority))
{
    return cudaStreamGetPriority(rt_ptsz(s), priority);
}
RT_PTSZ_DECL(cudaError_t, cudaStreamGetFlags, (cudaStream_t s, unsigned int *flags))
{
    return cudaStreamGetFlags(rt_ptsz(s), flags);
}
RT_PTSZ_DECL(cudaError_t, cudaStreamGetId, (cudaStream_t s, unsigned long long *id))
{
    return cudaStreamGetId(rt_ptsz(s), id);
}
RT_PTSZ_DECL(cudaError_t, cudaStreamGetDevice, (cudaStream_t s, int *device))
{
    return cudaStreamGetDevice(rt_ptsz(s), device);
}
RT_PTSZ_DECL(cudaError_t, cudaStreamAddCallback,
             (cudaStream_t s, cudaStreamCallback_t cb, void *ud, unsigned int flags))
{
    return cudaStreamAddCallback(rt_ptsz(s), cb, ud, flags);
}
RT_PTSZ_DECL(cudaError_t, cudaLaunchHostFunc, (cudaStream_t s, cudaHostFn_t fn, void *ud))
{
    return cudaLaunchHostFunc(rt_ptsz(s), fn, ud);
}
RT_PTSZ_DECL(cudaError_t, cudaEventRecord, (cudaEvent_t e, cudaStream_t s))
{
    return cudaEventRecord(e, rt_ptsz(s));
}
RT_PTSZ_DECL(cudaError_t, cudaEventRecordWithFlags, (cudaEvent_t e, cudaStream_t s, unsigned int flags))
{
    return cudaEventRecordWithFlags(e, rt_ptsz(s), flags);
}
