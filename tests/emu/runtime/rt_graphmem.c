/* Graph memory attributes: the driver's, by device ordinal
 * (cudaGraphMemAttributeType and CUgraphMem_attribute share their values). */
#include "rt_internal.h"

cudaError_t cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    RT_ENTER();
    if (device < 0 || device >= rt_device_count())
        return rt_set(cudaErrorInvalidDevice);
    return rt_drv(EMU_DRV(cuDeviceGetGraphMemAttribute)(device, (CUgraphMem_attribute)attr, value));
}

cudaError_t cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    RT_ENTER();
    if (device < 0 || device >= rt_device_count())
        return rt_set(cudaErrorInvalidDevice);
    return rt_drv(EMU_DRV(cuDeviceSetGraphMemAttribute)(device, (CUgraphMem_attribute)attr, value));
}

cudaError_t cudaDeviceGraphMemTrim(int device)
{
    RT_ENTER();
    if (device < 0 || device >= rt_device_count())
        return rt_set(cudaErrorInvalidDevice);
    return rt_drv(EMU_DRV(cuDeviceGraphMemTrim)(device));
}
