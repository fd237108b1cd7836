/* cuda_provider.h: the page provider over the CUDA driver (cuda_provider.c):
 * virtual memory (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess)
 * for the expandable mode, plain cuMemAlloc/cuMemFree for the caching and off
 * modes, events as fences.  The caller fills the table with the real driver
 * entry points (devmem.c from core/cuda_real.h, replay through
 * cuGetProcAddress); this file resolves nothing.  With the context entry
 * points given, any context may be current (cuda_provider.c says how the
 * calls that act in the current one get the device's); without them the
 * calling thread must have the device's context current. */
#ifndef TRAINSHIM_CUDA_PROVIDER_H
#define TRAINSHIM_CUDA_PROVIDER_H
#include <cuda.h>
#include <stdbool.h>

#include "alloc/alloc_provider.h"

typedef struct ts_cuda_fns {
    CUresult (*cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*cuMemAddressFree)(CUdeviceptr, size_t);
    CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                            unsigned long long);
    CUresult (*cuMemRelease)(CUmemGenericAllocationHandle);
    CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*cuMemUnmap)(CUdeviceptr, size_t);
    CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*cuMemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *,
                                              CUmemAllocationGranularity_flags);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t); /* cuMemAlloc_v2 */
    CUresult (*cuMemFree)(CUdeviceptr);            /* cuMemFree_v2 */
    CUresult (*cuEventCreate)(CUevent *, unsigned int);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventQuery)(CUevent);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventDestroy)(CUevent); /* cuEventDestroy_v2 */
    /* Contexts (all may be NULL: the caller keeps the device's context
     * current, as the replay tool does). */
    CUresult (*cuCtxGetDevice)(CUdevice *);
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuCtxPushCurrent)(CUcontext);  /* cuCtxPushCurrent_v2 */
    CUresult (*cuCtxPopCurrent)(CUcontext *); /* cuCtxPopCurrent_v2 */
    CUresult (*cuStreamGetCtx)(CUstream, CUcontext *);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice); /* cuDevicePrimaryCtxRelease_v2 */
} ts_cuda_fns;
typedef struct ts_cuda_provider ts_cuda_provider;
/* NULL if a needed entry point is missing (cuMemAlloc/cuMemFree may be NULL
 * for the expandable mode alone). */
ts_cuda_provider *ts_cuda_provider_create(const ts_cuda_fns *fns, int device);
const ts_page_provider *ts_cuda_provider_table(ts_cuda_provider *c);
void ts_cuda_provider_destroy(ts_cuda_provider *c);

/* Create pages with requestedHandleTypes = POSIX fd (set before the provider
 * is created; devmem_ipc.c sets it when the shim loads). */
extern bool ts_cuda_pages_exportable;
#endif
