/* numa_cuda.c: the CUDA facts NUMA placement needs, asked of the real
 * driver through core's door (never a hook).  The one file of shim/numa/
 * that knows the driver API. */
#include "core/cuda_real.h"
#include "numa/numa_cuda.h"

int ts_numa_cuda_device_count(void)
{
    ts_cuda_fn_cuDeviceGetCount count = TS_CUDA_REAL(cuDeviceGetCount);
    int n = 0;
    if (!count || count(&n) != CUDA_SUCCESS)
        return 0;
    return n;
}

int ts_numa_cuda_bus_id(int device, char *buf, int len)
{
    ts_cuda_fn_cuDeviceGetPCIBusId get = TS_CUDA_REAL(cuDeviceGetPCIBusId);
    if (!get || get(buf, len, (CUdevice)device) != CUDA_SUCCESS) {
        buf[0] = 0;
        return -1;
    }
    return 0;
}
