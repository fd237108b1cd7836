/* The shim's real-CUDA table (see cuda_real.h). */
#include "core/cuda_real.h"

#include <stddef.h>

void *ts_cuda_slots[TS_CUDA_COUNT];

static ts_cuda_resolver resolver;

void ts_cuda_set_resolver(ts_cuda_resolver resolve)
{
    __atomic_store_n(&resolver, resolve, __ATOMIC_RELEASE);
}

void *ts_cuda_resolve(int id)
{
    ts_cuda_resolver resolve = __atomic_load_n(&resolver, __ATOMIC_ACQUIRE);
    if (id < 0 || id >= TS_CUDA_COUNT || !resolve)
        return NULL;
    void *p = resolve(id);
    if (!p)
        return NULL;
    void *expected = NULL;
    /* First answer wins; the resolver answers the same address every time. */
    __atomic_compare_exchange_n(&ts_cuda_slots[id], &expected, p, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&ts_cuda_slots[id], __ATOMIC_ACQUIRE);
}

int ts_current_device(void)
{
    ts_cuda_fn_cuCtxGetDevice get = TS_CUDA_REAL(cuCtxGetDevice);
    CUdevice d = -1;
    if (!get || get(&d) != CUDA_SUCCESS)
        return -1;
    return (int)d;
}

int ts_stream_device(uint64_t stream)
{
    if (ts_stream_is_default(stream))
        return ts_current_device();
    ts_cuda_fn_cuStreamGetDevice get = TS_CUDA_REAL(cuStreamGetDevice);
    CUdevice d = -1;
    if (!get) /* a driver before 12.8: the current device, as before */
        return ts_current_device();
    if (get((CUstream)(uintptr_t)stream, &d) != CUDA_SUCCESS)
        return -1;
    return (int)d;
}

CUcontext ts_stream_context(uint64_t stream)
{
    ts_cuda_fn_cuStreamGetCtx get = TS_CUDA_REAL(cuStreamGetCtx);
    CUcontext ctx = NULL;
    if (ts_stream_is_default(stream) || !get || get((CUstream)(uintptr_t)stream, &ctx) != CUDA_SUCCESS)
        return NULL;
    return ctx;
}
