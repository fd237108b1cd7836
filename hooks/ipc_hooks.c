/* ipc_hooks.c: legacy CUDA IPC (cudaIpcGetMemHandle / OpenMemHandle /
 * CloseMemHandle) on memory served by trainshim's pool.
 *
 * A pooled block of the expandable pool is exported by trainshim itself
 * (shim/devmem/devmem.h: its pages as POSIX fds, opened by another process that
 * runs the shim); a handle without trainshim's magic, and every pointer
 * outside the pool, is the driver's.  Pooled memory stays ours even when the
 * shim has fallen back to passthrough: the pool still owns it. */
#include "devmem_hooks.h"
#include "devmem/devmem.h"

cudaError_t ts_body_cudaIpcGetMemHandle(int api, cudaIpcMemHandle_t *handle, void *devPtr)
{
    TS_HOOK_REAL(cudaError_t, cudaIpcGetMemHandle, api);
    if (ts_likely(!ts_dev_pooling()) && ts_likely(!ts_active()))
        return real_(handle, devPtr);
    TS_OUTER_BEGIN(api);
    uint64_t ptr = (uint64_t)(uintptr_t)devPtr;
    int rc = handle ? ts_ipc_export(ptr, handle) : TS_IPC_NOT_OURS;
    cudaError_t r;
    if (rc != TS_IPC_NOT_OURS) {
        r = (cudaError_t)rc;
        /* a refusal leaves the runtime's last error as the real call does:
         * the real runtime refuses VMM memory itself (the handle it might
         * write goes nowhere) */
        if (r == cudaErrorInvalidValue) {
            cudaIpcMemHandle_t scratch;
            real_(&scratch, devPtr);
        }
    }
    /* A caching-mode block is part of a cuMemAlloc segment, whose legacy
     * handle would open the whole segment, i.e. the wrong memory: refused. */
    else if (ts_dev_lookup(ptr, NULL, NULL))
        r = cudaErrorInvalidValue;
    else
        r = real_(handle, devPtr);
    TS_OUTER_END(api, r);
    return r;
}

cudaError_t ts_body_cudaIpcOpenMemHandle(int api, void **devPtr, cudaIpcMemHandle_t handle,
                                         unsigned int flags)
{
    TS_HOOK_REAL(cudaError_t, cudaIpcOpenMemHandle, api);
    bool ours = ts_ipc_handle_is_ours(&handle);
    if (!ours && ts_likely(!ts_active()))
        return real_(devPtr, handle, flags);
    TS_OUTER_BEGIN(api);
    cudaError_t r = ours ? (cudaError_t)ts_ipc_open(&handle, flags, devPtr) : real_(devPtr, handle, flags);
    TS_OUTER_END(api, r);
    return r;
}

cudaError_t ts_body_cudaIpcCloseMemHandle(int api, void *devPtr)
{
    TS_HOOK_REAL(cudaError_t, cudaIpcCloseMemHandle, api);
    TS_OUTER_BEGIN(api);
    int rc = ts_ipc_close(devPtr);
    cudaError_t r = rc != TS_IPC_NOT_OURS ? (cudaError_t)rc : real_(devPtr);
    TS_OUTER_END(api, r);
    return r;
}

/* ---- the driver's entry points: the same code, CUresult answers ----------- */
static CUresult cu_result(int rt)
{
    switch (rt) {
    case cudaSuccess: return CUDA_SUCCESS;
    case cudaErrorInvalidResourceHandle: return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorDeviceUninitialized: return CUDA_ERROR_INVALID_CONTEXT;
    case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorMapBufferObjectFailed: return CUDA_ERROR_MAP_FAILED;
    case cudaErrorNotSupported: return CUDA_ERROR_NOT_SUPPORTED;
    case cudaErrorNoDevice: return CUDA_ERROR_NO_DEVICE;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult ts_body_cuIpcGetMemHandle(int api, CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    TS_HOOK_REAL(CUresult, cuIpcGetMemHandle, api);
    if (ts_likely(!ts_dev_pooling()) && ts_likely(!ts_active()))
        return real_(pHandle, dptr);
    TS_OUTER_BEGIN(api);
    int rc = pHandle ? ts_ipc_export((uint64_t)dptr, pHandle) : TS_IPC_NOT_OURS;
    CUresult r;
    if (rc != TS_IPC_NOT_OURS)
        r = cu_result(rc);
    else if (ts_dev_lookup((uint64_t)dptr, NULL, NULL))
        r = CUDA_ERROR_INVALID_VALUE; /* a caching-mode block: see cudaIpcGetMemHandle */
    else
        r = real_(pHandle, dptr);
    TS_OUTER_END(api, r);
    return r;
}

CUresult ts_body_cuIpcOpenMemHandle_v2(int api, CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    TS_HOOK_REAL(CUresult, cuIpcOpenMemHandle_v2, api);
    bool ours = ts_ipc_handle_is_ours(&handle);
    if (!ours && ts_likely(!ts_active()))
        return real_(pdptr, handle, Flags);
    TS_OUTER_BEGIN(api);
    CUresult r;
    if (ours) {
        void *p = NULL;
        r = cu_result(ts_ipc_open(&handle, Flags, pdptr ? &p : NULL));
        if (r == CUDA_SUCCESS)
            *pdptr = (CUdeviceptr)(uintptr_t)p;
    } else {
        r = real_(pdptr, handle, Flags);
    }
    TS_OUTER_END(api, r);
    return r;
}

CUresult ts_body_cuIpcCloseMemHandle(int api, CUdeviceptr dptr)
{
    TS_HOOK_REAL(CUresult, cuIpcCloseMemHandle, api);
    TS_OUTER_BEGIN(api);
    int rc = ts_ipc_close((void *)(uintptr_t)dptr);
    CUresult r = rc != TS_IPC_NOT_OURS ? cu_result(rc) : real_(dptr);
    TS_OUTER_END(api, r);
    return r;
}
