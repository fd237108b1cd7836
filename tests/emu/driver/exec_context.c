/* exec_context.c: devices (H100-like attributes), primary contexts, the
 * calling thread's context stack, peer access. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "exec_internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define EMU_CTX_MAGIC 0x43545821u

struct emu_ctx {
    unsigned magic;
    int dev;
    int retain;
    unsigned flags;
};
static struct emu_ctx primary[EMU_MAX_DEVICES];
static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned peer_enabled[EMU_MAX_DEVICES];   /* bit p: dev can access p */

#define CTX_STACK_MAX 32
static __thread struct emu_ctx *ctx_stack[CTX_STACK_MAX];
static __thread int ctx_depth;

static struct emu_ctx *current_ctx(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL; }

int emu_current_device(void)
{
    struct emu_ctx *c = current_ctx();
    return c ? c->dev : 0;
}

CUresult emu_check_device(int dev)
{
    emu_init();
    return dev >= 0 && dev < emu_cfg.devices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult need_init(void)
{
    return emu_driver_initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult emu_require_ctx(void)
{
    if (!emu_driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    return current_ctx() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult emu_require_stream_ctx(CUstream s)
{
    if (!emu_driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) return CUDA_SUCCESS;
    return current_ctx() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static struct emu_ctx *ctx_of(CUcontext c)
{
    for (int i = 0; i < EMU_MAX_DEVICES; i++)
        if ((void *)c == (void *)&primary[i] && primary[i].magic == EMU_CTX_MAGIC) return &primary[i];
    return NULL;
}

bool emu_peer_enabled(int dev, int peer)
{
    if (dev == peer) return true;
    if (dev < 0 || dev >= EMU_MAX_DEVICES || peer < 0 || peer >= EMU_MAX_DEVICES) return false;
    return __atomic_load_n(&peer_enabled[dev], __ATOMIC_ACQUIRE) & (1u << peer);
}

/* ---------------------------------------------------------------- devices */
#define CHECK(x) do { CUresult rc_ = (x); if (rc_ != CUDA_SUCCESS) return rc_; } while (0)

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    EMU_ENTRY(cuDeviceGet);
    CHECK(need_init());
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    CHECK(emu_check_device(ordinal));
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    EMU_ENTRY(cuDeviceGetCount);
    CHECK(need_init());
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = emu_cfg.devices;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    EMU_ENTRY(cuDeviceGetName);
    CHECK(need_init());
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    CHECK(emu_check_device(dev));
    snprintf(name, (size_t)len, "%s", emu_cfg.device_name);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    EMU_ENTRY(cuDeviceTotalMem_v2);
    CHECK(need_init());
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    CHECK(emu_check_device(dev));
    *bytes = emu_cfg.device_memory;
    return CUDA_SUCCESS;
}

static void fill_uuid(CUuuid *u, int dev)
{
    /* Stable and distinct per device, shaped like a version-4 UUID. */
    static const unsigned char base[16] = {0x6a, 0x1e, 0x50, 0x2b, 0x93, 0x0c, 0x4f, 0x71,
                                           0x8d, 0x22, 0x15, 0xc3, 0x7e, 0x40, 0x00, 0x00};
    memcpy(u->bytes, base, 16);
    u->bytes[15] = (char)dev;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    EMU_ENTRY(cuDeviceGetUuid);
    CHECK(need_init());
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    CHECK(emu_check_device(dev));
    fill_uuid(uuid, dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    EMU_ENTRY(cuDeviceGetUuid_v2);
    CHECK(need_init());
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    CHECK(emu_check_device(dev));
    fill_uuid(uuid, dev);
    return CUDA_SUCCESS;
}

/* Bus ids as on an 8-GPU HGX board: distinct per device. */
static int pci_bus(int dev) { return 0x18 + 0x10 * dev; }

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    EMU_ENTRY(cuDeviceGetPCIBusId);
    CHECK(need_init());
    if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    CHECK(emu_check_device(dev));
    snprintf(pciBusId, (size_t)len, "00000000:%02X:00.0", pci_bus(dev));
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
    EMU_ENTRY(cuDeviceGetByPCIBusId);
    CHECK(need_init());
    if (!dev || !pciBusId) return CUDA_ERROR_INVALID_VALUE;
    unsigned domain = 0, bus, device, func = 0;
    if (sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &device, &func) < 3) {
        domain = 0;
        if (sscanf(pciBusId, "%x:%x.%x", &bus, &device, &func) < 2) return CUDA_ERROR_INVALID_VALUE;
    }
    for (int d = 0; d < emu_cfg.devices; d++)
        if (domain == 0 && (int)bus == pci_bus(d) && device == 0 && func == 0) { *dev = d; return CUDA_SUCCESS; }
    return CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    EMU_ENTRY(cuDeviceCanAccessPeer);
    CHECK(need_init());
    if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
    CHECK(emu_check_device(dev));
    CHECK(emu_check_device(peerDev));
    *canAccessPeer = dev != peerDev;
    return CUDA_SUCCESS;
}

static int attribute_value(CUdevice_attribute a, int dev, bool *known)
{
    *known = true;
    switch ((int)a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;          /* kHz */
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: return 0;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH: return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH: return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT: return 65536;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH: return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT: return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH: return 16384;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return pci_bus(dev);
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: return 0;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;    /* kHz */
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 50 << 20;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return 32;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: return 0;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: return dev;
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: return 2;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: return 0;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
    case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES: return 0;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES: return 0;
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST: return 0;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return 32505856;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR: return 1;
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return 4;
    case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS: return 1;
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG: return 0;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID: return -1;
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED: return 0;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: return 0;
    /* host-located cuMemCreate (mem_vmm_handle.c); not for pools */
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return emu_cfg.host_vmm;
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID: return 0x233010de;
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID: return 0x16c110de;
    default: break;
    }
    /* Texture/surface limits and the remaining capability flags: 0 is a
     * legal answer ("not supported"); values past the enum are errors. */
    *known = (int)a > 0 && (int)a <= CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED;
    return 0;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    EMU_ENTRY(cuDeviceGetAttribute);
    CHECK(need_init());
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    CHECK(emu_check_device(dev));
    bool known;
    int v = attribute_value(attrib, dev, &known);
    if (!known) return CUDA_ERROR_INVALID_VALUE;
    *pi = v;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------- primary contexts */
static struct emu_ctx *primary_of(int dev)
{
    struct emu_ctx *c = &primary[dev];
    if (__atomic_load_n(&c->magic, __ATOMIC_ACQUIRE) != EMU_CTX_MAGIC) {
        pthread_mutex_lock(&ctx_mu);
        if (c->magic != EMU_CTX_MAGIC) {
            c->dev = dev;
            __atomic_store_n(&c->magic, EMU_CTX_MAGIC, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&ctx_mu);
    }
    return c;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    EMU_ENTRY(cuDevicePrimaryCtxRetain);
    CHECK(need_init());
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    CHECK(emu_check_device(dev));
    struct emu_ctx *c = primary_of(dev);
    __atomic_fetch_add(&c->retain, 1, __ATOMIC_ACQ_REL);
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev)
{
    CHECK(need_init());
    CHECK(emu_check_device(dev));
    struct emu_ctx *c = primary_of(dev);
    int r = __atomic_load_n(&c->retain, __ATOMIC_ACQUIRE);
    do {
        if (r <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    } while (!__atomic_compare_exchange_n(&c->retain, &r, r - 1, true, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    EMU_ENTRY(cuDevicePrimaryCtxGetState);
    CHECK(need_init());
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    CHECK(emu_check_device(dev));
    struct emu_ctx *c = primary_of(dev);
    *flags = __atomic_load_n(&c->flags, __ATOMIC_RELAXED);
    *active = __atomic_load_n(&c->retain, __ATOMIC_ACQUIRE) > 0;
    return CUDA_SUCCESS;
}

static CUresult primary_set_flags(CUdevice dev, unsigned int flags)
{
    CHECK(need_init());
    CHECK(emu_check_device(dev));
    /* Valid: a scheduling mode, CU_CTX_MAP_HOST, CU_CTX_LMEM_RESIZE_TO_MAX,
     * CU_CTX_COREDUMP_ENABLE, CU_CTX_USER_COREDUMP_ENABLE, CU_CTX_SYNC_MEMOPS. */
    unsigned allowed = CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX |
                       CU_CTX_COREDUMP_ENABLE | CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS;
    if ((flags & ~allowed) || (flags & CU_CTX_SCHED_MASK) == 3 || (flags & CU_CTX_SCHED_MASK) > 4)
        return CUDA_ERROR_INVALID_VALUE;
    __atomic_store_n(&primary_of(dev)->flags, flags, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

static CUresult primary_reset(CUdevice dev)
{
    CHECK(need_init());
    CHECK(emu_check_device(dev));
    /* Outstanding work finishes; the sticky error of a faulted context is
     * what a reset recovers from. */
    emu_device_sync(dev);
    emu_stream_destroy_device(dev);
    emu_event_destroy_device(dev);
    emu_mem_reset_device(dev);
    emu_clear_sticky();
    struct emu_ctx *c = primary_of(dev);
    __atomic_store_n(&c->flags, 0, __ATOMIC_RELAXED);
    pthread_mutex_lock(&ctx_mu);
    for (int p = 0; p < EMU_MAX_DEVICES; p++) {
        __atomic_and_fetch(&peer_enabled[dev], 0, __ATOMIC_RELEASE);
        __atomic_and_fetch(&peer_enabled[p], ~(1u << dev), __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ctx_mu);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------- context stack */
CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    EMU_ENTRY(cuCtxGetCurrent);
    CHECK(need_init());
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)current_ctx();
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    EMU_ENTRY(cuCtxSetCurrent);
    CHECK(need_init());
    struct emu_ctx *c = NULL;
    if (ctx && !(c = ctx_of(ctx))) return CUDA_ERROR_INVALID_CONTEXT;
    if (!c) { if (ctx_depth) ctx_depth--; return CUDA_SUCCESS; }
    if (ctx_depth == 0) ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = c;
    return CUDA_SUCCESS;
}

static CUresult ctx_push(CUcontext ctx)
{
    CHECK(need_init());
    struct emu_ctx *c = ctx_of(ctx);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == CTX_STACK_MAX) return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

static CUresult ctx_pop(CUcontext *pctx)
{
    CHECK(need_init());
    if (ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    struct emu_ctx *c = ctx_stack[--ctx_depth];
    if (pctx) *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    EMU_ENTRY(cuCtxGetDevice);
    CHECK(emu_require_ctx());
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = current_ctx()->dev;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned int *flags)
{
    EMU_ENTRY(cuCtxGetFlags);
    CHECK(emu_require_ctx());
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    *flags = __atomic_load_n(&current_ctx()->flags, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    EMU_ENTRY(cuCtxGetApiVersion);
    CHECK(need_init());
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    if (ctx ? !ctx_of(ctx) : !current_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
    *version = 3020;   /* the context API version every current driver reports */
    return CUDA_SUCCESS;
}

CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    EMU_ENTRY(cuCtxGetStreamPriorityRange);
    CHECK(emu_require_ctx());
    if (leastPriority) *leastPriority = 0;
    if (greatestPriority) *greatestPriority = -5;
    return CUDA_SUCCESS;
}

static size_t limits[16] = {
    [CU_LIMIT_STACK_SIZE] = 1024, [CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20, [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048, [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
    [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
};

CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    EMU_ENTRY(cuCtxGetLimit);
    CHECK(emu_require_ctx());
    if (!pvalue || (unsigned)limit > CU_LIMIT_PERSISTING_L2_CACHE_SIZE) return CUDA_ERROR_INVALID_VALUE;
    *pvalue = __atomic_load_n(&limits[limit], __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    EMU_ENTRY(cuCtxSetLimit);
    CHECK(emu_require_ctx());
    if ((unsigned)limit > CU_LIMIT_PERSISTING_L2_CACHE_SIZE) return CUDA_ERROR_UNSUPPORTED_LIMIT;
    __atomic_store_n(&limits[limit], value, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    EMU_ENTRY(cuCtxEnablePeerAccess);
    CHECK(emu_require_ctx());
    if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    struct emu_ctx *peer = ctx_of(peerContext);
    if (!peer) return CUDA_ERROR_INVALID_CONTEXT;
    int dev = current_ctx()->dev;
    if (peer->dev == dev) return CUDA_ERROR_INVALID_DEVICE;
    unsigned bit = 1u << peer->dev;
    if (__atomic_fetch_or(&peer_enabled[dev], bit, __ATOMIC_ACQ_REL) & bit)
        return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    return CUDA_SUCCESS;
}

CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
    EMU_ENTRY(cuCtxDisablePeerAccess);
    CHECK(emu_require_ctx());
    struct emu_ctx *peer = ctx_of(peerContext);
    if (!peer) return CUDA_ERROR_INVALID_CONTEXT;
    int dev = current_ctx()->dev;
    unsigned bit = 1u << peer->dev;
    if (!(__atomic_fetch_and(&peer_enabled[dev], ~bit, __ATOMIC_ACQ_REL) & bit))
        return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    return CUDA_SUCCESS;
}

int emu_ctx_device(CUcontext c)
{
    struct emu_ctx *x = ctx_of(c);
    return x ? x->dev : -1;
}

CUcontext emu_primary_ctx(int dev)
{
    return (CUcontext)primary_of(dev);
}

/* ------------------------------------------- older and context-taking forms */
CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{ EMU_ENTRY(cuDevicePrimaryCtxRelease); return primary_release(dev); }
CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{ EMU_ENTRY(cuDevicePrimaryCtxReset); return primary_reset(dev); }
CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{ EMU_ENTRY(cuDevicePrimaryCtxSetFlags); return primary_set_flags(dev, flags); }
CUresult cuCtxPushCurrent(CUcontext ctx)
{ EMU_ENTRY(cuCtxPushCurrent); return ctx_push(ctx); }
CUresult cuCtxPopCurrent(CUcontext *pctx)
{ EMU_ENTRY(cuCtxPopCurrent); return ctx_pop(pctx); }

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    EMU_ENTRY(cuDeviceComputeCapability);
    CHECK(need_init());
    if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
    CHECK(emu_check_device(dev));
    *major = 9;
    *minor = 0;
    return CUDA_SUCCESS;
}

/* ctx NULL: the current context. */
static CUresult ctx_or_current(CUcontext ctx, struct emu_ctx **out)
{
    CHECK(need_init());
    *out = ctx ? ctx_of(ctx) : current_ctx();
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    EMU_ENTRY(cuCtxGetDevice_v2);
    struct emu_ctx *c;
    CHECK(ctx_or_current(ctx, &c));
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    EMU_ENTRY(cuCtxGetId);
    struct emu_ctx *c;
    CHECK(ctx_or_current(ctx, &c));
    if (!ctxId) return CUDA_ERROR_INVALID_VALUE;
    *ctxId = (unsigned long long)c->dev + 1;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{ EMU_ENTRY(cuDevicePrimaryCtxRelease_v2); return primary_release(dev); }

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{ EMU_ENTRY(cuDevicePrimaryCtxReset_v2); return primary_reset(dev); }

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{ EMU_ENTRY(cuDevicePrimaryCtxSetFlags_v2); return primary_set_flags(dev, flags); }

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{ EMU_ENTRY(cuCtxPushCurrent_v2); return ctx_push(ctx); }

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{ EMU_ENTRY(cuCtxPopCurrent_v2); return ctx_pop(pctx); }
