/* Handles of the emulated cuBLAS.  Like the real library, cublasCreate
 * allocates a default workspace in device memory through the driver (so a
 * preload sees that allocation as a nested driver call), cublasSetStream
 * resets the workspace to that default, and cublasDestroy frees it. */
#include "cublas_internal.h"
#include "common/driver_link.h"
#include "emu.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void cublas_count(const char *name, uint64_t delta)
{
    void (*add)(const char *, uint64_t) = EMU_DRV(emuAddCounter);
    if (add) add(name, delta);
}

cublasStatus_t cublas_check_handle(cublasHandle_t h)
{
    return h && h->magic == CUBLAS_HANDLE_MAGIC ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

/* ------------------------------------------------------------ cuBLASLt link */
static struct cublas_lt_api lt_api;
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;

static void load_lt(void)
{
    void *h = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    struct cublas_lt_api a;
    a.create = (__typeof__(a.create))dlsym(h, "cublasLtCreate");
    a.destroy = (__typeof__(a.destroy))dlsym(h, "cublasLtDestroy");
    a.matmul = (__typeof__(a.matmul))dlsym(h, "cublasLtMatmul");
    a.desc_init = (__typeof__(a.desc_init))dlsym(h, "cublasLtMatmulDescInit_internal");
    a.desc_set = (__typeof__(a.desc_set))dlsym(h, "cublasLtMatmulDescSetAttribute");
    a.layout_init = (__typeof__(a.layout_init))dlsym(h, "cublasLtMatrixLayoutInit_internal");
    a.layout_set = (__typeof__(a.layout_set))dlsym(h, "cublasLtMatrixLayoutSetAttribute");
    if (a.create && a.destroy && a.matmul && a.desc_init && a.desc_set && a.layout_init && a.layout_set) lt_api = a;
}

const struct cublas_lt_api *cublas_lt(void)
{
    pthread_once(&lt_once, load_lt);
    return lt_api.matmul ? &lt_api : NULL;
}

cublasLtHandle_t cublas_lt_handle(cublasHandle_t h)
{
    const struct cublas_lt_api *lt = cublas_lt();
    if (!lt) return NULL;
    cublasLtHandle_t cur = __atomic_load_n(&h->lt, __ATOMIC_ACQUIRE);
    if (cur) return cur;
    cublasLtHandle_t mine = NULL;
    if (lt->create(&mine) != CUBLAS_STATUS_SUCCESS) return NULL;
    if (!__atomic_compare_exchange_n(&h->lt, &cur, mine, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        lt->destroy(mine);           /* another thread won */
        return cur;
    }
    return mine;
}

/* ------------------------------------------------------------ life */
/* CUBLAS_WORKSPACE_CONFIG=":SIZE_KiB:COUNT[:SIZE_KiB:COUNT...]" as the real
 * library reads it; default 4 MiB. */
static size_t default_workspace_bytes(void)
{
    const char *e = getenv("CUBLAS_WORKSPACE_CONFIG");
    if (!e || !*e) return 4u << 20;
    size_t total = 0;
    const char *p = e;
    while (*p == ':') {
        char *end;
        unsigned long kib = strtoul(p + 1, &end, 10);
        if (*end != ':') break;
        unsigned long count = strtoul(end + 1, &end, 10);
        total += (size_t)kib * 1024u * count;
        p = end;
    }
    return total;
}

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    struct cublasContext *h = calloc(1, sizeof *h);
    if (!h) return CUBLAS_STATUS_ALLOC_FAILED;
    CUdevice dev = 0;
    if (EMU_DRV(cuCtxGetDevice)(&dev) != CUDA_SUCCESS) {
        /* No current context: the runtime would have made the primary one current. */
        CUcontext ctx = NULL;
        if (EMU_DRV(cuInit)(0) != CUDA_SUCCESS || EMU_DRV(cuDevicePrimaryCtxRetain)(&ctx, 0) != CUDA_SUCCESS ||
            EMU_DRV(cuCtxSetCurrent)(ctx) != CUDA_SUCCESS) {
            free(h);
            return CUBLAS_STATUS_NOT_INITIALIZED;
        }
        dev = 0;
    }
    h->device = (int)dev;
    h->default_workspace_size = default_workspace_bytes();
    if (h->default_workspace_size) {
        CUresult cr = EMU_DRV(cuMemAlloc_v2)(&h->default_workspace, h->default_workspace_size);
        if (cr != CUDA_SUCCESS) {
            free(h);
            return CUBLAS_STATUS_ALLOC_FAILED;
        }
    }
    h->workspace = (void *)(uintptr_t)h->default_workspace;
    h->workspace_size = h->default_workspace_size;
    h->pointer_mode = CUBLAS_POINTER_MODE_HOST;
    h->math_mode = CUBLAS_DEFAULT_MATH;
    h->magic = CUBLAS_HANDLE_MAGIC;
    *handle = h;
    cublas_count("cublas.handles", 1);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    cublasStatus_t st = cublas_check_handle(handle);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    handle->magic = 0;
    if (handle->lt) cublas_lt()->destroy(handle->lt);
    /* cuMemFree waits for the device: queued GEMMs that use the workspace finish first. */
    if (handle->default_workspace) EMU_DRV(cuMemFree_v2)(handle->default_workspace);
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
    cublasStatus_t st = cublas_check_handle(handle);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    handle->stream = (CUstream)streamId;
    handle->workspace = (void *)(uintptr_t)handle->default_workspace;
    handle->workspace_size = handle->default_workspace_size;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *streamId)
{
    cublasStatus_t st = cublas_check_handle(handle);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!streamId) return CUBLAS_STATUS_INVALID_VALUE;
    *streamId = (cudaStream_t)handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t workspaceSizeInBytes)
{
    cublasStatus_t st = cublas_check_handle(handle);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if ((!workspace && workspaceSizeInBytes) || ((uintptr_t)workspace % 256u) != 0) return CUBLAS_STATUS_INVALID_VALUE;
    handle->workspace = workspace;
    handle->workspace_size = workspace ? workspaceSizeInBytes : 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    cublasStatus_t st = cublas_check_handle(handle);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    unsigned base = (unsigned)mode & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (base > CUBLAS_FP32_EMULATED_BF16X9_MATH) return CUBLAS_STATUS_INVALID_VALUE;
    handle->math_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
    cublasStatus_t st = cublas_check_handle(handle);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->math_mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode)
{
    cublasStatus_t st = cublas_check_handle(handle);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
    handle->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t *mode)
{
    cublasStatus_t st = cublas_check_handle(handle);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->pointer_mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode)
{
    cublasStatus_t st = cublas_check_handle(handle);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (mode != CUBLAS_ATOMICS_NOT_ALLOWED && mode != CUBLAS_ATOMICS_ALLOWED) return CUBLAS_STATUS_INVALID_VALUE;
    handle->atomics_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t *mode)
{
    cublasStatus_t st = cublas_check_handle(handle);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->atomics_mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetSmCountTarget(cublasHandle_t handle, int smCountTarget)
{
    cublasStatus_t st = cublas_check_handle(handle);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (smCountTarget < 0) return CUBLAS_STATUS_INVALID_VALUE;
    handle->sm_count_target = smCountTarget;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetSmCountTarget(cublasHandle_t handle, int *smCountTarget)
{
    cublasStatus_t st = cublas_check_handle(handle);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!smCountTarget) return CUBLAS_STATUS_INVALID_VALUE;
    *smCountTarget = handle->sm_count_target;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int *version)
{
    (void)handle;                    /* the real library answers even without a handle */
    if (!version) return CUBLAS_STATUS_INVALID_VALUE;
    *version = CUBLAS_VERSION;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    if (!value) return CUBLAS_STATUS_INVALID_VALUE;
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
}

size_t cublasGetCudartVersion(void) { return 13000; }

const char *cublasGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "the functionality requested requires some license";
    default: return "unknown error";
    }
}
