/* Driver entry points through the runtime (cudaGetDriverEntryPoint[ByVersion]
 * and their _ptsz forms): the driver's own cuGetProcAddress answer, so a
 * preload that wraps cuGetProcAddress sees what frameworks resolve this way
 * (PyTorch's cuMem* for expandable segments).  Also the profiler no-ops. */
#include "rt_internal.h"

static cudaError_t rt_entry_point(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                  unsigned long long flags, enum cudaDriverEntryPointQueryResult *status,
                                  int ptsz)
{
    if (!symbol || !funcPtr)
        return rt_set(cudaErrorInvalidValue);
    if (flags & ~(unsigned long long)(cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream))
        return rt_set(cudaErrorInvalidValue);
    cudaError_t e = rt_init_driver();
    if (e != cudaSuccess)
        return rt_set(e);
    /* cudaEnableDefault means the caller's compilation mode; cudaEnable*
     * flags equal CU_GET_PROC_ADDRESS_* bits. */
    if (flags == cudaEnableDefault)
        flags = ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    *funcPtr = NULL;
    CUresult r = EMU_DRV(cuGetProcAddress_v2)(symbol, funcPtr, (int)cudaVersion, flags, &st);
    if (status)
        *status = (enum cudaDriverEntryPointQueryResult)st;
    if (r == CUDA_ERROR_NOT_FOUND) {
        /* Documented: success with a NULL pointer, the reason in the status. */
        *funcPtr = NULL;
        return cudaSuccess;
    }
    return rt_drv(r);
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return rt_entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, 0);
}

cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *driverStatus);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return rt_entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, 1);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return rt_entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, 0);
}

cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                                  unsigned long long flags,
                                                  enum cudaDriverEntryPointQueryResult *driverStatus);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                                  unsigned long long flags,
                                                  enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return rt_entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, 1);
}

/* No profiler is attached to the emulator: start/stop succeed and do
 * nothing, as they do on a GPU without a profiler. */
cudaError_t cudaProfilerStart(void)
{
    return cudaSuccess;
}

cudaError_t cudaProfilerStop(void)
{
    return cudaSuccess;
}
