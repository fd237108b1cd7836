/* numa_cuda.c: the CUDA facts NUMA placement needs, asked of the real
 * driver (the core's real-function access; never a hook).  The one file of
 * shim/numa/ that knows the driver API. */
#include "hooks.h"
#include "numa/numa_cuda.h"

int ts_numa_cuda_current_device(void)
{
    ts_fn_cuCtxGetDevice get = (ts_fn_cuCtxGetDevice)ts_real(TS_API_cuCtxGetDevice);
    CUdevice d = -1;
    if (!get || get(&d) != CUDA_SUCCESS)
        return -1;
    return (int)d;
}

int ts_numa_cuda_device_count(void)
{
    ts_fn_cuDeviceGetCount count = (ts_fn_cuDeviceGetCount)ts_real(TS_API_cuDeviceGetCount);
    int n = 0;
    if (!count || count(&n) != CUDA_SUCCESS)
        return 0;
    return n;
}

int ts_numa_cuda_bus_id(int device, char *buf, int len)
{
    ts_fn_cuDeviceGetPCIBusId get = (ts_fn_cuDeviceGetPCIBusId)ts_real(TS_API_cuDeviceGetPCIBusId);
    if (!get || get(buf, len, (CUdevice)device) != CUDA_SUCCESS) {
        buf[0] = 0;
        return -1;
    }
    return 0;
}
