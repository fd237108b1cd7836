/* Function queries: parameter info, attributes, names, cudaGetFuncBySymbol,
 * and occupancy computed from the device's limits (a CPU-implemented kernel
 * has no register or shared-memory footprint of its own). */
#include <string.h>
#include "rt_internal.h"

cudaError_t cudaFuncGetParamInfo(const void *func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    RT_ENTER();
    cudaError_t e = cudaSuccess;
    CUfunction f = rt_function_of(func, &e);
    if (!f)
        return rt_set(e);
    return rt_drv(EMU_DRV(cuFuncGetParamInfo)(f, paramIndex, paramOffset, paramSize));
}

cudaError_t cudaGetFuncBySymbol(cudaFunction_t *functionPtr, const void *symbolPtr)
{
    if (!functionPtr)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    cudaError_t e = cudaSuccess;
    CUfunction f = rt_function_of(symbolPtr, &e);
    if (!f)
        return rt_set(e);
    *functionPtr = (cudaFunction_t)f;
    return cudaSuccess;
}

cudaError_t cudaFuncGetName(const char **name, const void *func)
{
    if (!name)
        return rt_set(cudaErrorInvalidValue);
    const char *n = rt_kernel_name(func);
    if (!n)
        return rt_set(cudaErrorInvalidDeviceFunction);
    *name = n;
    return cudaSuccess;
}

static int rt_dev_attr(CUdevice_attribute a, int fallback)
{
    int v = 0;
    if (EMU_DRV(cuDeviceGetAttribute)(&v, a, rt_tls.device) != CUDA_SUCCESS || v <= 0)
        return fallback;
    return v;
}

static int rt_func_attr(CUfunction f, CUfunction_attribute a, int fallback)
{
    int v = 0;
    if (EMU_DRV(cuFuncGetAttribute)(&v, a, f) != CUDA_SUCCESS)
        return fallback;
    return v;
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    if (!attr)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    cudaError_t e = cudaSuccess;
    CUfunction f = rt_function_of(func, &e);
    if (!f)
        return rt_set(e);
    /* A CPU-implemented kernel has no binary: where the driver has no answer,
     * report what a simple compiled sm_90 kernel would. */
    memset(attr, 0, sizeof *attr);
    attr->sharedSizeBytes = (size_t)rt_func_attr(f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, 0);
    attr->constSizeBytes = (size_t)rt_func_attr(f, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, 0);
    attr->localSizeBytes = (size_t)rt_func_attr(f, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, 0);
    attr->maxThreadsPerBlock = rt_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                            rt_dev_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024));
    attr->numRegs = rt_func_attr(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 32);
    int cc = rt_dev_attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9) * 10 +
             rt_dev_attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0);
    attr->ptxVersion = rt_func_attr(f, CU_FUNC_ATTRIBUTE_PTX_VERSION, cc);
    attr->binaryVersion = rt_func_attr(f, CU_FUNC_ATTRIBUTE_BINARY_VERSION, cc);
    attr->cacheModeCA = rt_func_attr(f, CU_FUNC_ATTRIBUTE_CACHE_MODE_CA, 0);
    attr->maxDynamicSharedSizeBytes = rt_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 48 * 1024);
    attr->preferredShmemCarveout = rt_func_attr(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, -1);
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    RT_ENTER();
    cudaError_t e = cudaSuccess;
    CUfunction f = rt_function_of(func, &e);
    if (!f)
        return rt_set(e);
    /* cudaFuncAttribute and CUfunction_attribute share their numbering
     * (cudaFuncAttributeMaxDynamicSharedMemorySize = 8 = CU_FUNC_ATTRIBUTE_
     * MAX_DYNAMIC_SHARED_SIZE_BYTES). */
    return rt_drv(EMU_DRV(cuFuncSetAttribute)(f, (CUfunction_attribute)attr, value));
}

/* ---- occupancy ------------------------------------------------------------------- */
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, const void *func, int blockSize,
                                                                   size_t dynamicSMemSize, unsigned int flags)
{
    if (!numBlocks || blockSize <= 0 || (flags & ~1u))
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    cudaError_t e = cudaSuccess;
    if (!rt_function_of(func, &e))
        return rt_set(e);
    int max_threads_sm = rt_dev_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048);
    int max_blocks_sm = rt_dev_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32);
    int max_block = rt_dev_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024);
    int warp = rt_dev_attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32);
    size_t smem_sm = (size_t)rt_dev_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 228 * 1024);
    size_t reserved = (size_t)rt_dev_attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 1024);
    if (blockSize > max_block) {
        *numBlocks = 0;
        return cudaSuccess;
    }
    int threads = (blockSize + warp - 1) / warp * warp;
    int n = max_threads_sm / threads;
    if (n > max_blocks_sm)
        n = max_blocks_sm;
    if (dynamicSMemSize > 0) {
        size_t by_smem = smem_sm / (dynamicSMemSize + reserved);
        if ((size_t)n > by_smem)
            n = (int)by_smem;
    }
    *numBlocks = n;
    return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func, int blockSize,
                                                          size_t dynamicSMemSize)
{
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize, dynamicSMemSize, 0);
}

cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, const void *func, int numBlocks,
                                                      int blockSize)
{
    if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    cudaError_t e = cudaSuccess;
    if (!rt_function_of(func, &e))
        return rt_set(e);
    int fit = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&fit, func, blockSize, 0, 0);
    if (fit < numBlocks) {
        *dynamicSmemSize = 0;
        return cudaSuccess;
    }
    size_t smem_sm = (size_t)rt_dev_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 228 * 1024);
    size_t reserved = (size_t)rt_dev_attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 1024);
    size_t optin = (size_t)rt_dev_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 227 * 1024);
    size_t per = smem_sm / (size_t)numBlocks;
    per = per > reserved ? per - reserved : 0;
    *dynamicSmemSize = per < optin ? per : optin;
    return cudaSuccess;
}
