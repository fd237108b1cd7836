/* ipc_hooks.c: legacy CUDA IPC (cudaIpcGetMemHandle / OpenMemHandle /
 * CloseMemHandle) on memory served by trainshim's pool. */
#include "devmem_hooks.h"
#include "devmem.h"

/* A legacy IPC handle names a cudaMalloc allocation; a pooled block is not
 * one (the handle would open the whole page or segment, i.e. the wrong
 * memory), so it is refused, as the driver refuses VMM memory.  Documented in
 * the README: run with TRAINSHIM_ALLOC=off to share cudaMalloc memory by IPC. */
cudaError_t ts_body_cudaIpcGetMemHandle(int api, cudaIpcMemHandle_t *handle, void *devPtr)
{
    TS_HOOK_PROLOGUE(cudaError_t, cudaIpcGetMemHandle, api, (handle, devPtr));
    TS_OUTER_BEGIN(api);
    cudaError_t r = ts_dev_lookup((uint64_t)(uintptr_t)devPtr, NULL, NULL) ? cudaErrorInvalidValue
                                                                          : real_(handle, devPtr);
    TS_OUTER_END(api, r);
    return r;
}

