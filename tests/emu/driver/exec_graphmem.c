/* exec_graphmem.c: the graph memory attributes (cuDeviceGetGraphMemAttribute
 * and friends), which PyTorch's cudaMallocAsync backend reads.  Emulated
 * graphs have no memory allocation nodes, so no memory is ever associated
 * with graphs: every attribute reads 0, the high watermarks may be reset
 * (to 0, the only value the driver accepts), and trimming has nothing to do. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "exec_internal.h"

CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    EMU_ENTRY(cuDeviceGetGraphMemAttribute);
    CUresult rc = emu_check_device(device);
    if (rc != CUDA_SUCCESS) return rc;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
        *(cuuint64_t *)value = 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    EMU_ENTRY(cuDeviceSetGraphMemAttribute);
    CUresult rc = emu_check_device(device);
    if (rc != CUDA_SUCCESS) return rc;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    if (attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
        return CUDA_ERROR_INVALID_VALUE;
    return *(cuuint64_t *)value == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    EMU_ENTRY(cuDeviceGraphMemTrim);
    return emu_check_device(device);
}
