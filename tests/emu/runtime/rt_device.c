/* Devices: properties and attributes, PCI ids, stream priorities, device-wide
 * synchronization and reset, peer access, device flags and limits. */
#include <string.h>
#include "rt_internal.h"

static cudaError_t rt_check_device(int dev)
{
    cudaError_t e = rt_init_driver();
    if (e != cudaSuccess)
        return e;
    return dev >= 0 && dev < rt_device_count() ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (!value)
        return rt_set(cudaErrorInvalidValue);
    cudaError_t e = rt_check_device(device);
    if (e != cudaSuccess)
        return rt_set(e);
    /* cudaDeviceAttr and CUdevice_attribute share their numbering. */
    return rt_drv(EMU_DRV(cuDeviceGetAttribute)(value, (CUdevice_attribute)attr, device));
}

/* An attribute for the properties struct: 0 when the driver does not know it
 * (a device that lacks a feature answers 0 too). */
static int rt_attr(int dev, CUdevice_attribute a)
{
    int v = 0;
    if (EMU_DRV(cuDeviceGetAttribute)(&v, a, dev) != CUDA_SUCCESS)
        return 0;
    return v;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    if (!p)
        return rt_set(cudaErrorInvalidValue);
    cudaError_t e = rt_check_device(device);
    if (e != cudaSuccess)
        return rt_set(e);
    memset(p, 0, sizeof *p);
    CUresult r = EMU_DRV(cuDeviceGetName)(p->name, (int)sizeof p->name, device);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    size_t total = 0;
    r = EMU_DRV(cuDeviceTotalMem_v2)(&total, device);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    p->totalGlobalMem = total;
    CUuuid uuid;
    if (EMU_DRV(cuDeviceGetUuid_v2)(&uuid, device) == CUDA_SUCCESS)
        memcpy(&p->uuid, &uuid, sizeof p->uuid);
    int d = device;
#define A(x) rt_attr(d, CU_DEVICE_ATTRIBUTE_##x)
    p->sharedMemPerBlock = (size_t)A(MAX_SHARED_MEMORY_PER_BLOCK);
    p->regsPerBlock = A(MAX_REGISTERS_PER_BLOCK);
    p->warpSize = A(WARP_SIZE);
    p->memPitch = (size_t)A(MAX_PITCH);
    p->maxThreadsPerBlock = A(MAX_THREADS_PER_BLOCK);
    p->maxThreadsDim[0] = A(MAX_BLOCK_DIM_X);
    p->maxThreadsDim[1] = A(MAX_BLOCK_DIM_Y);
    p->maxThreadsDim[2] = A(MAX_BLOCK_DIM_Z);
    p->maxGridSize[0] = A(MAX_GRID_DIM_X);
    p->maxGridSize[1] = A(MAX_GRID_DIM_Y);
    p->maxGridSize[2] = A(MAX_GRID_DIM_Z);
    p->totalConstMem = (size_t)A(TOTAL_CONSTANT_MEMORY);
    p->major = A(COMPUTE_CAPABILITY_MAJOR);
    p->minor = A(COMPUTE_CAPABILITY_MINOR);
    p->textureAlignment = (size_t)A(TEXTURE_ALIGNMENT);
    p->texturePitchAlignment = (size_t)A(TEXTURE_PITCH_ALIGNMENT);
    p->multiProcessorCount = A(MULTIPROCESSOR_COUNT);
    p->integrated = A(INTEGRATED);
    p->canMapHostMemory = A(CAN_MAP_HOST_MEMORY);
    p->maxTexture1D = A(MAXIMUM_TEXTURE1D_WIDTH);
    p->maxTexture2D[0] = A(MAXIMUM_TEXTURE2D_WIDTH);
    p->maxTexture2D[1] = A(MAXIMUM_TEXTURE2D_HEIGHT);
    p->maxTexture3D[0] = A(MAXIMUM_TEXTURE3D_WIDTH);
    p->maxTexture3D[1] = A(MAXIMUM_TEXTURE3D_HEIGHT);
    p->maxTexture3D[2] = A(MAXIMUM_TEXTURE3D_DEPTH);
    p->surfaceAlignment = (size_t)A(SURFACE_ALIGNMENT);
    p->concurrentKernels = A(CONCURRENT_KERNELS);
    p->ECCEnabled = A(ECC_ENABLED);
    p->pciBusID = A(PCI_BUS_ID);
    p->pciDeviceID = A(PCI_DEVICE_ID);
    p->pciDomainID = A(PCI_DOMAIN_ID);
    p->tccDriver = A(TCC_DRIVER);
    p->asyncEngineCount = A(ASYNC_ENGINE_COUNT);
    p->unifiedAddressing = A(UNIFIED_ADDRESSING);
    p->memoryBusWidth = A(GLOBAL_MEMORY_BUS_WIDTH);
    p->l2CacheSize = A(L2_CACHE_SIZE);
    p->persistingL2CacheMaxSize = A(MAX_PERSISTING_L2_CACHE_SIZE);
    p->maxThreadsPerMultiProcessor = A(MAX_THREADS_PER_MULTIPROCESSOR);
    p->streamPrioritiesSupported = A(STREAM_PRIORITIES_SUPPORTED);
    p->globalL1CacheSupported = A(GLOBAL_L1_CACHE_SUPPORTED);
    p->localL1CacheSupported = A(LOCAL_L1_CACHE_SUPPORTED);
    p->sharedMemPerMultiprocessor = (size_t)A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    p->regsPerMultiprocessor = A(MAX_REGISTERS_PER_MULTIPROCESSOR);
    p->managedMemory = A(MANAGED_MEMORY);
    p->isMultiGpuBoard = A(MULTI_GPU_BOARD);
    p->multiGpuBoardGroupID = A(MULTI_GPU_BOARD_GROUP_ID);
    p->hostNativeAtomicSupported = A(HOST_NATIVE_ATOMIC_SUPPORTED);
    p->pageableMemoryAccess = A(PAGEABLE_MEMORY_ACCESS);
    p->concurrentManagedAccess = A(CONCURRENT_MANAGED_ACCESS);
    p->computePreemptionSupported = A(COMPUTE_PREEMPTION_SUPPORTED);
    p->canUseHostPointerForRegisteredMem = A(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM);
    p->cooperativeLaunch = A(COOPERATIVE_LAUNCH);
    p->sharedMemPerBlockOptin = (size_t)A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    p->pageableMemoryAccessUsesHostPageTables = A(PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES);
    p->directManagedMemAccessFromHost = A(DIRECT_MANAGED_MEM_ACCESS_FROM_HOST);
    p->maxBlocksPerMultiProcessor = A(MAX_BLOCKS_PER_MULTIPROCESSOR);
    p->accessPolicyMaxWindowSize = A(MAX_ACCESS_POLICY_WINDOW_SIZE);
    p->reservedSharedMemPerBlock = (size_t)A(RESERVED_SHARED_MEMORY_PER_BLOCK);
    p->hostRegisterSupported = A(HOST_REGISTER_SUPPORTED);
    p->sparseCudaArraySupported = A(SPARSE_CUDA_ARRAY_SUPPORTED);
    p->hostRegisterReadOnlySupported = A(READ_ONLY_HOST_REGISTER_SUPPORTED);
    p->timelineSemaphoreInteropSupported = A(TIMELINE_SEMAPHORE_INTEROP_SUPPORTED);
    p->memoryPoolsSupported = A(MEMORY_POOLS_SUPPORTED);
    p->gpuDirectRDMASupported = A(GPU_DIRECT_RDMA_SUPPORTED);
    p->gpuDirectRDMAFlushWritesOptions = (unsigned)A(GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS);
    p->gpuDirectRDMAWritesOrdering = A(GPU_DIRECT_RDMA_WRITES_ORDERING);
    p->memoryPoolSupportedHandleTypes = (unsigned)A(MEMPOOL_SUPPORTED_HANDLE_TYPES);
    p->deferredMappingCudaArraySupported = A(DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED);
    p->ipcEventSupported = A(IPC_EVENT_SUPPORTED);
    p->clusterLaunch = A(CLUSTER_LAUNCH);
    p->unifiedFunctionPointers = A(UNIFIED_FUNCTION_POINTERS);
    p->deviceNumaConfig = A(NUMA_CONFIG);
    p->deviceNumaId = A(NUMA_ID);
    p->mpsEnabled = A(MPS_ENABLED);
    p->hostNumaId = A(HOST_NUMA_ID);
    p->hostNumaMultinodeIpcSupported = A(HOST_NUMA_MULTINODE_IPC_SUPPORTED);
#undef A
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    if (!pciBusId || len <= 0)
        return rt_set(cudaErrorInvalidValue);
    cudaError_t e = rt_check_device(device);
    if (e != cudaSuccess)
        return rt_set(e);
    return rt_drv(EMU_DRV(cuDeviceGetPCIBusId)(pciBusId, len, device));
}

cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *pciBusId)
{
    if (!device || !pciBusId)
        return rt_set(cudaErrorInvalidValue);
    cudaError_t e = rt_init_driver();
    if (e != cudaSuccess)
        return rt_set(e);
    CUdevice d = 0;
    CUresult r = EMU_DRV(cuDeviceGetByPCIBusId)(&d, pciBusId);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *device = d;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuCtxGetStreamPriorityRange)(leastPriority, greatestPriority));
}

cudaError_t cudaDeviceSynchronize(void)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuCtxSynchronize)());
}

cudaError_t cudaDeviceReset(void)
{
    cudaError_t e = rt_init_driver();
    if (e != cudaSuccess)
        return rt_set(e);
    int dev = rt_tls.device;
    cudaError_t err = cudaSuccess;
    CUcontext c = rt_primary_ctx(dev, &err);
    if (!c)
        return rt_set(err);
    /* Reset destroys the primary context and with it every allocation of the
     * device; the runtime's own retain goes first. */
    EMU_DRV(cuDevicePrimaryCtxRelease_v2)(dev);
    CUresult r = EMU_DRV(cuDevicePrimaryCtxReset_v2)(dev);
    rt_forget_primary_ctx(dev);
    return r == CUDA_SUCCESS ? cudaSuccess : rt_set(rt_map(r));
}

cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    if (!canAccessPeer)
        return rt_set(cudaErrorInvalidValue);
    cudaError_t e = rt_check_device(device);
    if (e == cudaSuccess)
        e = rt_check_device(peerDevice);
    if (e != cudaSuccess)
        return rt_set(e);
    return rt_drv(EMU_DRV(cuDeviceCanAccessPeer)(canAccessPeer, device, peerDevice));
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    RT_ENTER();
    cudaError_t e = cudaSuccess;
    CUcontext peer = rt_primary_ctx(peerDevice, &e);
    if (!peer)
        return rt_set(e);
    return rt_drv(EMU_DRV(cuCtxEnablePeerAccess)(peer, flags));
}

cudaError_t cudaDeviceDisablePeerAccess(int peerDevice)
{
    RT_ENTER();
    cudaError_t e = cudaSuccess;
    CUcontext peer = rt_primary_ctx(peerDevice, &e);
    if (!peer)
        return rt_set(e);
    return rt_drv(EMU_DRV(cuCtxDisablePeerAccess)(peer));
}

cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
    cudaError_t e = rt_init_driver();
    if (e != cudaSuccess)
        return rt_set(e);
    /* Schedule bits (0x7), MapHost (0x8, always on), LmemResizeToMax (0x10),
     * SyncMemops (0x80). */
    if (flags & ~(unsigned)(cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax | cudaDeviceSyncMemops))
        return rt_set(cudaErrorInvalidValue);
    unsigned drv = flags & ~(unsigned)cudaDeviceMapHost;
    return rt_drv(EMU_DRV(cuDevicePrimaryCtxSetFlags_v2)(rt_tls.device, drv));
}

cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
    if (!flags)
        return rt_set(cudaErrorInvalidValue);
    cudaError_t e = rt_init_driver();
    if (e != cudaSuccess)
        return rt_set(e);
    unsigned f = 0;
    int active = 0;
    CUresult r = EMU_DRV(cuDevicePrimaryCtxGetState)(rt_tls.device, &f, &active);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *flags = f | cudaDeviceMapHost;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetLimit(size_t *pValue, enum cudaLimit limit)
{
    if (!pValue)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    /* cudaLimit and CUlimit share their numbering. */
    return rt_drv(EMU_DRV(cuCtxGetLimit)(pValue, (CUlimit)limit));
}

cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuCtxSetLimit)((CUlimit)limit, value));
}
