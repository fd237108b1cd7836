/* Kernels: the registration entry points nvcc's host code calls
 * (__cudaRegisterFatBinary, __cudaRegisterFunction, ...), the CUDA 13 <<<>>>
 * path (__cudaPushCallConfiguration/__cudaPopCallConfiguration,
 * __cudaGetKernel, __cudaLaunchKernel[_ptsz]), cudaLaunchKernel[ExC][_ptsz],
 * cudaLaunchCooperativeKernel[_ptsz].  Function queries: rt_func.c.
 *
 * A kernel is a record in a fixed open-addressing table keyed by host stub
 * address (lock-free lookup, inserts under a lock).  Its CUfunction comes
 * from the driver's emuGetFunction(host stub, device name) on first use and
 * is cached.  A cudaKernel_t is, as on CUDA 12+, the driver's CUkernel (on
 * the emulator the same handle as its CUfunction), so cuKernelGetParamInfo
 * and the other cuKernel* calls answer it; the runtime finds its record
 * through an alias record keyed by that handle. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu.h"
#include "rt_internal.h"

struct rt_kernel {
    const void *host_fun;        /* key; NULL = free slot */
    const char *device_name;     /* from __cudaRegisterFunction, or NULL */
    CUfunction fn;               /* resolved on first use */
};

/* Power of two, sized to stay sparse: libraries like libtorch_cuda register
 * tens of thousands of kernels.  Pages are touched only where records land. */
#define RT_KERNEL_SLOTS (1u << 17)
static struct rt_kernel rt_kernels[RT_KERNEL_SLOTS];
static pthread_mutex_t rt_kernel_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned rt_kernel_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (unsigned)x & (RT_KERNEL_SLOTS - 1);
}

static struct rt_kernel *rt_kernel_lookup(const void *host_fun)
{
    unsigned i = rt_kernel_hash(host_fun);
    for (unsigned n = 0; n < RT_KERNEL_SLOTS; n++, i = (i + 1) & (RT_KERNEL_SLOTS - 1)) {
        const void *k = __atomic_load_n(&rt_kernels[i].host_fun, __ATOMIC_ACQUIRE);
        if (k == host_fun)
            return &rt_kernels[i];
        if (!k)
            return NULL;
    }
    return NULL;
}

/* Finds or adds the record of host_fun; a known device name is kept. */
static struct rt_kernel *rt_kernel_insert(const void *host_fun, const char *device_name)
{
    pthread_mutex_lock(&rt_kernel_lock);
    unsigned i = rt_kernel_hash(host_fun);
    struct rt_kernel *k = NULL;
    for (unsigned n = 0; n < RT_KERNEL_SLOTS; n++, i = (i + 1) & (RT_KERNEL_SLOTS - 1)) {
        if (rt_kernels[i].host_fun == host_fun || !rt_kernels[i].host_fun) {
            k = &rt_kernels[i];
            break;
        }
    }
    if (!k) {
        static int said;
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            fprintf(stderr, "emu: libcudart.so.13: kernel table full (%u kernels); later kernels are "
                    "invalid device functions\n", RT_KERNEL_SLOTS);
    } else {
        if (device_name && !k->device_name)
            k->device_name = device_name;
        if (!k->host_fun)
            __atomic_store_n(&k->host_fun, host_fun, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&rt_kernel_lock);
    return k;
}

/* The record behind a kernel argument: a cudaKernel_t handle (its alias
 * record, see rt_kernel_alias) or a host stub address (looked up, added if
 * new so that pure-C programs can launch anything emuRegisterKernel knows). */
static struct rt_kernel *rt_kernel_of(const void *func)
{
    if (!func)
        return NULL;
    struct rt_kernel *k = rt_kernel_lookup(func);
    return k ? k : rt_kernel_insert(func, NULL);
}

/* The record keyed by a cudaKernel_t (the driver handle f): its function is
 * set before the key is published, so a lock-free lookup never sees the
 * alias without it. */
static void rt_kernel_alias(CUfunction f, const char *device_name)
{
    pthread_mutex_lock(&rt_kernel_lock);
    unsigned i = rt_kernel_hash(f);
    for (unsigned n = 0; n < RT_KERNEL_SLOTS; n++, i = (i + 1) & (RT_KERNEL_SLOTS - 1)) {
        struct rt_kernel *k = &rt_kernels[i];
        if (k->host_fun == (const void *)f)
            break;
        if (!k->host_fun) {
            k->device_name = device_name;
            __atomic_store_n(&k->fn, f, __ATOMIC_RELEASE);
            __atomic_store_n(&k->host_fun, (const void *)f, __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&rt_kernel_lock);
}

static CUfunction rt_kernel_function(struct rt_kernel *k, cudaError_t *err)
{
    CUfunction f = __atomic_load_n(&k->fn, __ATOMIC_ACQUIRE);
    if (f)
        return f;
    void *out = NULL;
    int r = RT_DRV_AS(emuGetFunction, "emuGetFunction")(&out, k->host_fun, k->device_name);
    if (r != CUDA_SUCCESS || !out) {
        *err = r == CUDA_ERROR_NOT_FOUND || r == CUDA_SUCCESS ? cudaErrorInvalidDeviceFunction : rt_map((CUresult)r);
        return NULL;
    }
    f = (CUfunction)out;
    __atomic_store_n(&k->fn, f, __ATOMIC_RELEASE);
    return f;
}

CUfunction rt_function_of(const void *func, cudaError_t *err)
{
    struct rt_kernel *k = rt_kernel_of(func);
    if (!k) {
        *err = cudaErrorInvalidDeviceFunction;
        return NULL;
    }
    return rt_kernel_function(k, err);
}

/* A launch's failure in runtime terms: a function without an implementation
 * is an invalid device function, not a missing symbol. */
static cudaError_t rt_launch_result(CUresult r)
{
    if (r == CUDA_ERROR_NOT_FOUND)
        return rt_set(cudaErrorInvalidDeviceFunction);
    return rt_drv(r);
}

static int rt_config_valid(dim3 g, dim3 b)
{
    if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z)
        return 0;
    if ((uint64_t)b.x * b.y * b.z > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64)
        return 0;
    return g.y <= 65535 && g.z <= 65535 && g.x <= 0x7fffffffu;
}

static cudaError_t rt_launch(struct rt_kernel *k, dim3 g, dim3 b, void **args, size_t shared, CUstream s)
{
    RT_ENTER();
    if (!k)
        return rt_set(cudaErrorInvalidDeviceFunction);
    if (!rt_config_valid(g, b))
        return rt_set(cudaErrorInvalidConfiguration);
    cudaError_t e = cudaSuccess;
    CUfunction f = rt_kernel_function(k, &e);
    if (!f)
        return rt_set(e);
    CUresult r = EMU_DRV(cuLaunchKernel)(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)shared, s, args, NULL);
    return r == CUDA_SUCCESS ? cudaSuccess : rt_launch_result(r);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                             cudaStream_t stream)
{
    return rt_launch(rt_kernel_of(func), gridDim, blockDim, args, sharedMem, (CUstream)stream);
}

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                  cudaStream_t stream);
cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                  cudaStream_t stream)
{
    return rt_launch(rt_kernel_of(func), gridDim, blockDim, args, sharedMem, rt_ptsz(stream));
}

/* A cooperative launch: on the emulator every block of the grid runs in one
 * CPU call, so grid-wide synchronization inside the kernel is trivially
 * satisfied; the driver checks the grid fits the device. */
static cudaError_t rt_launch_cooperative(const void *func, dim3 g, dim3 b, void **args, size_t shared, CUstream s)
{
    RT_ENTER();
    struct rt_kernel *k = rt_kernel_of(func);
    if (!k)
        return rt_set(cudaErrorInvalidDeviceFunction);
    if (!rt_config_valid(g, b))
        return rt_set(cudaErrorInvalidConfiguration);
    cudaError_t e = cudaSuccess;
    CUfunction f = rt_kernel_function(k, &e);
    if (!f)
        return rt_set(e);
    CUresult r = EMU_DRV(cuLaunchCooperativeKernel)(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)shared, s, args);
    return r == CUDA_SUCCESS ? cudaSuccess : rt_launch_result(r);
}

cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                        size_t sharedMem, cudaStream_t stream)
{
    return rt_launch_cooperative(func, gridDim, blockDim, args, sharedMem, (CUstream)stream);
}

cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                             size_t sharedMem, cudaStream_t stream);
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                             size_t sharedMem, cudaStream_t stream)
{
    return rt_launch_cooperative(func, gridDim, blockDim, args, sharedMem, rt_ptsz(stream));
}

/* ---- the CUDA 13 <<<>>> path ------------------------------------------------ */
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream)
{
    struct rt_thread *t = &rt_tls;
    if (t->config_depth >= RT_CONFIG_DEPTH)
        return 1;
    t->config[t->config_depth++] = (struct rt_launch_config){ gridDim, blockDim, sharedMem, stream };
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
    struct rt_thread *t = &rt_tls;
    if (t->config_depth <= 0)
        return rt_set(cudaErrorMissingConfiguration);
    struct rt_launch_config c = t->config[--t->config_depth];
    *gridDim = c.grid;
    *blockDim = c.block;
    *sharedMem = c.shared;
    *(cudaStream_t *)stream = c.stream;
    return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun)
{
    if (!kernel || !hostFun)
        return rt_set(cudaErrorInvalidValue);
    struct rt_kernel *k = rt_kernel_of(hostFun);
    if (!k)
        return rt_set(cudaErrorInvalidDeviceFunction);
    cudaError_t e = cudaSuccess;
    CUfunction f = rt_kernel_function(k, &e);
    if (!f)
        return rt_set(e);
    rt_kernel_alias(f, k->device_name);
    *kernel = (cudaKernel_t)f;
    return cudaSuccess;
}

cudaError_t cudaGetKernel(cudaKernel_t *kernelPtr, const void *entryFuncAddr)
{
    return __cudaGetKernel(kernelPtr, entryFuncAddr);
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                               cudaStream_t stream);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                               cudaStream_t stream)
{
    /* A failed __cudaGetKernel leaves the stub's handle NULL. */
    return rt_launch(kernel ? rt_kernel_of(kernel) : NULL, gridDim, blockDim, args, sharedMem, (CUstream)stream);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream)
{
    return rt_launch(kernel ? rt_kernel_of(kernel) : NULL, gridDim, blockDim, args, sharedMem, rt_ptsz(stream));
}

_Static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute), "launch attribute layouts differ");

static cudaError_t rt_launch_ex(const cudaLaunchConfig_t *config, const void *func, void **args, int ptsz)
{
    if (!config)
        return rt_set(cudaErrorInvalidValue);
    CUstream s = ptsz ? rt_ptsz(config->stream) : (CUstream)config->stream;
    struct rt_kernel *k = rt_kernel_of(func);
    if (config->numAttrs == 0)
        return rt_launch(k, config->gridDim, config->blockDim, args, config->dynamicSmemBytes, s);
    RT_ENTER();
    if (!k)
        return rt_set(cudaErrorInvalidDeviceFunction);
    if (!rt_config_valid(config->gridDim, config->blockDim))
        return rt_set(cudaErrorInvalidConfiguration);
    cudaError_t e = cudaSuccess;
    CUfunction f = rt_kernel_function(k, &e);
    if (!f)
        return rt_set(e);
    CUlaunchConfig c = {
        .gridDimX = config->gridDim.x, .gridDimY = config->gridDim.y, .gridDimZ = config->gridDim.z,
        .blockDimX = config->blockDim.x, .blockDimY = config->blockDim.y, .blockDimZ = config->blockDim.z,
        .sharedMemBytes = (unsigned)config->dynamicSmemBytes, .hStream = s,
        /* cudaLaunchAttribute and CUlaunchAttribute share ids and layout. */
        .attrs = (CUlaunchAttribute *)config->attrs, .numAttrs = config->numAttrs,
    };
    CUresult r = EMU_DRV(cuLaunchKernelEx)(&c, f, args, NULL);
    return r == CUDA_SUCCESS ? cudaSuccess : rt_launch_result(r);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    return rt_launch_ex(config, func, args, 0);
}

cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func, void **args);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    return rt_launch_ex(config, func, args, 1);
}

/* ---- registration (called from constructors before main) ---------------------- */
struct rt_managed_var {
    struct rt_managed_var *next;
    void **host_ptr_slot;        /* where host code reads the variable's address */
    size_t size;
};
struct rt_module {
    void *fatbin;                /* first member: the handle is a void ** */
    struct rt_managed_var *managed;
    pthread_mutex_t lock;
};

void **__cudaRegisterFatBinary(void *fatCubin);
void **__cudaRegisterFatBinary(void *fatCubin)
{
    struct rt_module *m = calloc(1, sizeof *m);
    if (!m)
        abort();   /* in a constructor, before main: nothing can report it */
    m->fatbin = fatCubin;
    pthread_mutex_init(&m->lock, NULL);
    return (void **)m;
}

void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    (void)fatCubinHandle;
}

void __cudaUnregisterFatBinary(void **fatCubinHandle);
void __cudaUnregisterFatBinary(void **fatCubinHandle)
{
    /* Runs from atexit: kernel records stay (other exit handlers may still
     * launch); the module's own bookkeeping goes. */
    struct rt_module *m = (struct rt_module *)fatCubinHandle;
    if (!m)
        return;
    for (struct rt_managed_var *v = m->managed, *n; v; v = n) {
        n = v->next;
        free(v);
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
}

void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)fatCubinHandle; (void)thread_limit; (void)tid; (void)bid; (void)bDim; (void)gDim; (void)wSize;
    rt_kernel_insert(hostFun, deviceName ? deviceName : deviceFun);
}

void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant, int global);
void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant, int global)
{
    (void)deviceAddress; (void)deviceName; (void)ext; (void)constant; (void)global;
    struct rt_module *m = (struct rt_module *)fatCubinHandle;
    struct rt_managed_var *v = calloc(1, sizeof *v);
    if (!m || !v)
        abort();
    v->host_ptr_slot = hostVarPtrAddress;
    v->size = size;
    pthread_mutex_lock(&m->lock);
    v->next = m->managed;
    m->managed = v;
    pthread_mutex_unlock(&m->lock);
}

/* Host code touching a __managed__ variable first calls this: give every
 * managed variable of the module its managed allocation.  Returns nonzero
 * once done so the generated code stops calling. */
char __cudaInitModule(void **fatCubinHandle);
char __cudaInitModule(void **fatCubinHandle)
{
    struct rt_module *m = (struct rt_module *)fatCubinHandle;
    if (!m || rt_enter() != cudaSuccess)
        return 0;
    char ok = 1;
    pthread_mutex_lock(&m->lock);
    for (struct rt_managed_var *v = m->managed; v; v = v->next) {
        if (*v->host_ptr_slot)
            continue;
        CUdeviceptr p = 0;
        if (EMU_DRV(cuMemAllocManaged)(&p, v->size ? v->size : 1, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS) {
            ok = 0;
            continue;
        }
        memset((void *)(uintptr_t)p, 0, v->size);
        *v->host_ptr_slot = (void *)(uintptr_t)p;
    }
    pthread_mutex_unlock(&m->lock);
    return ok;
}

/* ---- names ------------------------------------------------------------------- */
const char *rt_kernel_name(const void *func)
{
    struct rt_kernel *k = func ? rt_kernel_lookup(func) : NULL;
    return k ? k->device_name : NULL;
}
