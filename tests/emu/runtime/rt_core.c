/* Runtime core: lazy initialization, the per-thread state (current device,
 * last error), CUresult -> cudaError_t mapping, sticky errors, versions and
 * the current device. */
#include <pthread.h>
#include "rt_internal.h"

__thread struct rt_thread rt_tls;
cudaError_t rt_sticky_error;
unsigned rt_ctx_gen = 1;

static pthread_once_t rt_driver_once = PTHREAD_ONCE_INIT;
static cudaError_t rt_driver_status;
static int rt_ndevices;

static pthread_mutex_t rt_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext rt_primary[RT_MAX_DEVICES];

cudaError_t rt_map(CUresult r)
{
    /* Since CUDA 11 every driver error has a runtime error of the same number
     * and meaning (CUDA_ERROR_OUT_OF_MEMORY 2 = cudaErrorMemoryAllocation,
     * CUDA_ERROR_INVALID_HANDLE 400 = cudaErrorInvalidResourceHandle, capture
     * errors 900-907...).  The exceptions are spelled out. */
    switch ((int)r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_CONTEXT_ALREADY_CURRENT: return cudaErrorInvalidValue;
    case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
    default: break;
    }
    return rt_error_known((int)r) ? (cudaError_t)r : cudaErrorUnknown;
}

static int rt_is_sticky(CUresult r)
{
    switch ((int)r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
        return 1;
    default:
        return 0;
    }
}

cudaError_t rt_drv_slow(CUresult r)
{
    cudaError_t e = rt_map(r);
    if (rt_is_sticky(r)) {
        cudaError_t none = cudaSuccess;
        __atomic_compare_exchange_n(&rt_sticky_error, &none, e, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    }
    return rt_set(e);
}

static void rt_driver_init(void)
{
    CUresult r = EMU_DRV(cuInit)(0);
    if (r == CUDA_SUCCESS)
        r = EMU_DRV(cuDeviceGetCount)(&rt_ndevices);
    if (r != CUDA_SUCCESS) {
        /* NO_DEVICE, STUB_LIBRARY, INSUFFICIENT_DRIVER... keep their meaning */
        rt_driver_status = rt_map(r);
        rt_ndevices = 0;
        return;
    }
    if (rt_ndevices > RT_MAX_DEVICES)
        rt_ndevices = RT_MAX_DEVICES;
    rt_driver_status = rt_ndevices > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t rt_init_driver(void)
{
    pthread_once(&rt_driver_once, rt_driver_init);
    return rt_driver_status;
}

int rt_device_count(void)
{
    return rt_init_driver() == cudaSuccess ? rt_ndevices : 0;
}

CUcontext rt_primary_ctx(int dev, cudaError_t *err)
{
    cudaError_t e = rt_init_driver();
    if (e != cudaSuccess) {
        *err = e;
        return NULL;
    }
    if (dev < 0 || dev >= rt_ndevices) {
        *err = cudaErrorInvalidDevice;
        return NULL;
    }
    CUcontext c = __atomic_load_n(&rt_primary[dev], __ATOMIC_ACQUIRE);
    if (c)
        return c;
    pthread_mutex_lock(&rt_ctx_lock);
    c = rt_primary[dev];
    CUresult r = CUDA_SUCCESS;
    if (!c) {
        r = EMU_DRV(cuDevicePrimaryCtxRetain)(&c, dev);
        if (r == CUDA_SUCCESS)
            __atomic_store_n(&rt_primary[dev], c, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&rt_ctx_lock);
    if (r != CUDA_SUCCESS) {
        *err = rt_map(r);
        return NULL;
    }
    return c;
}

void rt_forget_primary_ctx(int dev)
{
    if (dev < 0 || dev >= RT_MAX_DEVICES)
        return;
    pthread_mutex_lock(&rt_ctx_lock);
    rt_primary[dev] = NULL;
    pthread_mutex_unlock(&rt_ctx_lock);
    rt_symbols_forget_device(dev);
    __atomic_store_n(&rt_sticky_error, cudaSuccess, __ATOMIC_RELEASE);
    rt_tls.last_error = cudaSuccess;
    unsigned g = __atomic_add_fetch(&rt_ctx_gen, 1, __ATOMIC_ACQ_REL);
    if (g == 0)   /* 0 means "never made current" */
        __atomic_store_n(&rt_ctx_gen, 1, __ATOMIC_RELEASE);
}

/* Makes the primary context of dev current on this thread. */
static cudaError_t rt_make_current(int dev)
{
    cudaError_t e = cudaSuccess;
    CUcontext c = rt_primary_ctx(dev, &e);
    if (!c)
        return e;
    CUresult r = EMU_DRV(cuCtxSetCurrent)(c);
    if (r != CUDA_SUCCESS)
        return rt_map(r);
    rt_tls.device = dev;
    rt_tls.ctx_gen = __atomic_load_n(&rt_ctx_gen, __ATOMIC_ACQUIRE);
    return cudaSuccess;
}

cudaError_t rt_enter_slow(void)
{
    if (rt_tls.ctx_gen != __atomic_load_n(&rt_ctx_gen, __ATOMIC_ACQUIRE)) {
        cudaError_t e = rt_make_current(rt_tls.device);
        if (e != cudaSuccess)
            return e;
    }
    return __atomic_load_n(&rt_sticky_error, __ATOMIC_ACQUIRE);
}

/* ---- last error --------------------------------------------------------- */
cudaError_t cudaGetLastError(void)
{
    cudaError_t e = rt_tls.last_error;
    rt_tls.last_error = cudaSuccess;
    cudaError_t sticky = __atomic_load_n(&rt_sticky_error, __ATOMIC_ACQUIRE);
    /* A sticky error is never cleared by reading it. */
    return sticky != cudaSuccess ? sticky : e;
}

cudaError_t cudaPeekAtLastError(void)
{
    cudaError_t sticky = __atomic_load_n(&rt_sticky_error, __ATOMIC_ACQUIRE);
    return sticky != cudaSuccess ? sticky : rt_tls.last_error;
}

/* ---- versions ------------------------------------------------------------ */
cudaError_t cudaDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return rt_set(cudaErrorInvalidValue);
    CUresult r = EMU_DRV(cuDriverGetVersion)(driverVersion);
    return rt_drv(r);
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return rt_set(cudaErrorInvalidValue);
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
}

/* ---- current device ------------------------------------------------------ */
cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return rt_set(cudaErrorInvalidValue);
    cudaError_t e = rt_init_driver();
    *count = e == cudaSuccess ? rt_ndevices : 0;
    return rt_set(e);
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return rt_set(cudaErrorInvalidValue);
    cudaError_t e = rt_init_driver();
    if (e != cudaSuccess)
        return rt_set(e);
    *device = rt_tls.device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    cudaError_t e = rt_init_driver();
    if (e != cudaSuccess)
        return rt_set(e);
    if (device < 0 || device >= rt_ndevices)
        return rt_set(cudaErrorInvalidDevice);
    if (rt_tls.ctx_gen == __atomic_load_n(&rt_ctx_gen, __ATOMIC_ACQUIRE) && rt_tls.device == device)
        return cudaSuccess;
    return rt_set(rt_make_current(device));
}

cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags)
{
    cudaError_t e = rt_init_driver();
    if (e != cudaSuccess)
        return rt_set(e);
    if (device < 0 || device >= rt_ndevices)
        return rt_set(cudaErrorInvalidDevice);
    /* flags: only cudaInitDeviceFlagsAreValid (1) exists. */
    if (flags & ~1u)
        return rt_set(cudaErrorInvalidValue);
    if (flags & 1u) {
        CUresult r = EMU_DRV(cuDevicePrimaryCtxSetFlags_v2)(device, deviceFlags);
        if (r != CUDA_SUCCESS)
            return rt_drv(r);
    }
    cudaError_t err = cudaSuccess;
    return rt_primary_ctx(device, &err) ? cudaSuccess : rt_set(err);
}

