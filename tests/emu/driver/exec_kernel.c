/* exec_kernel.c: kernels.  A registry maps a host stub and/or a device name
 * to a CPU implementation (emuRegisterKernel); CUfunction and CUkernel
 * handles are registry entries.  Modules and libraries accept any image and
 * hand out entries by device name.  A launch copies the argument values at
 * the call (by the registered parameter sizes), so the kernel sees them as
 * of the launch even though it runs later on the stream's worker.  With
 * EMU_UNKNOWN_KERNELS=skip a kernel with no implementation is launched as
 * an empty one: validated, ordered on its stream, counted under
 * "kernels.skipped" and "kernels.skipped.<device name>", reported to CUPTI,
 * and it touches no memory. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "exec_internal.h"
#include "emu_activity.h"
#include "common/skip_modes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { CUresult rc_ = (x); if (rc_ != CUDA_SUCCESS) return rc_; } while (0)
#define FUNC_MAGIC 0x46554e43u
#define MODULE_MAGIC 0x4d4f444cu
#define MAX_DYN_SHARED_OPTIN 232448
#define DEFAULT_DYN_SHARED 49152

struct emu_func {
    unsigned magic;
    const void *host_func;
    char *device_name;
    emu_kernel_fn impl;          /* atomic: may be registered after the handle exists */
    int nparams;                 /* -1: unknown */
    size_t *sizes, *offsets;
    size_t params_bytes;
    int max_dyn_shared;
    int carveout;
    uint64_t *skipped_counter;   /* "kernels.skipped.<name>", set on the first skipped launch */
    bool charges_link;           /* emuKernelChargesLink: its implementation charges the host link */
    struct emu_func *next;
};
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct emu_func *registry;

/* Modules and libraries carry nothing; their handles are recycled, never
 * freed, so a destroyed handle reads as invalid. */
struct emu_module { unsigned magic; struct emu_module *next_free; };
static struct emu_module *free_modules;

static struct emu_module *module_alloc(void)
{
    pthread_mutex_lock(&reg_mu);
    struct emu_module *m = free_modules;
    if (m) free_modules = m->next_free;
    pthread_mutex_unlock(&reg_mu);
    if (!m && !(m = malloc(sizeof *m))) return NULL;
    m->next_free = NULL;
    __atomic_store_n(&m->magic, MODULE_MAGIC, __ATOMIC_RELEASE);
    return m;
}

static void module_release(struct emu_module *m)
{
    __atomic_store_n(&m->magic, 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&reg_mu);
    m->next_free = free_modules;
    free_modules = m;
    pthread_mutex_unlock(&reg_mu);
}

static struct emu_func *func_of(const void *h)
{
    struct emu_func *f = (struct emu_func *)h;
    if ((uintptr_t)f < 4096 || __atomic_load_n(&f->magic, __ATOMIC_ACQUIRE) != FUNC_MAGIC) return NULL;
    return f;
}

/* Caller holds reg_mu. */
static struct emu_func *find_locked(const void *host_func, const char *device_name)
{
    for (struct emu_func *f = registry; f; f = f->next)
        if (host_func && f->host_func == host_func) return f;
    if (device_name)
        for (struct emu_func *f = registry; f; f = f->next)
            if (f->device_name && !strcmp(f->device_name, device_name)) return f;
    return NULL;
}

static struct emu_func *find_or_create(const void *host_func, const char *device_name)
{
    pthread_mutex_lock(&reg_mu);
    struct emu_func *f = find_locked(host_func, device_name);
    if (!f && (f = calloc(1, sizeof *f))) {
        f->nparams = -1;
        f->max_dyn_shared = DEFAULT_DYN_SHARED;
        f->carveout = -1;
        f->next = registry;
        registry = f;
        __atomic_store_n(&f->magic, FUNC_MAGIC, __ATOMIC_RELEASE);
    }
    if (f) {
        if (!f->host_func && host_func) f->host_func = host_func;
        if (!f->device_name && device_name) f->device_name = strdup(device_name);
    }
    pthread_mutex_unlock(&reg_mu);
    return f;
}

/* Alignment of a parameter of this size: its largest power-of-two divisor,
 * at most 16 (a guess where only sizes are known; exact for scalars,
 * pointers and vector types). */
static size_t param_align(size_t size)
{
    size_t a = size & (~size + 1);
    return a == 0 ? 1 : a > 16 ? 16 : a;
}

int emuRegisterKernel(const void *host_func, const char *device_name, emu_kernel_fn impl,
                      int nparams, const size_t *param_sizes)
{
    emu_init();
    if (!host_func && !device_name) return -1;
    if (nparams > 0 && !param_sizes) return -1;
    struct emu_func *f = find_or_create(host_func, device_name);
    if (!f) return -1;
    pthread_mutex_lock(&reg_mu);
    if (nparams >= 0) {
        size_t *sizes = calloc((size_t)nparams + 1, sizeof *sizes);
        size_t *offsets = calloc((size_t)nparams + 1, sizeof *offsets);
        if (!sizes || !offsets) {
            free(sizes);
            free(offsets);
            pthread_mutex_unlock(&reg_mu);
            return -1;
        }
        size_t off = 0;
        for (int i = 0; i < nparams; i++) {
            size_t a = param_align(param_sizes[i]);
            off = (off + a - 1) & ~(a - 1);
            offsets[i] = off;
            sizes[i] = param_sizes[i];
            off += param_sizes[i];
        }
        /* Old arrays stay allocated: a launch may be reading them. */
        f->sizes = sizes;
        f->offsets = offsets;
        f->params_bytes = off;
        __atomic_store_n(&f->nparams, nparams, __ATOMIC_RELEASE);
    }
    if (impl) __atomic_store_n(&f->impl, impl, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&reg_mu);
    return 0;
}

int emuKernelChargesLink(const void *host_func, const char *device_name)
{
    emu_init();
    if (!host_func && !device_name) return -1;
    struct emu_func *f = find_or_create(host_func, device_name);
    if (!f || !__atomic_load_n(&f->impl, __ATOMIC_ACQUIRE)) return -1;
    __atomic_store_n(&f->charges_link, true, __ATOMIC_RELEASE);
    return 0;
}

int emuGetFunction(void **cufunction_out, const void *host_func, const char *device_name)
{
    emu_init();
    if (!cufunction_out || (!host_func && !device_name)) return CUDA_ERROR_INVALID_VALUE;
    struct emu_func *f = find_or_create(host_func, device_name);
    if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
    *cufunction_out = f;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- modules */
static CUresult module_new(CUmodule *m, const void *image)
{
    CHECK(emu_require_ctx());
    if (!m || !image) return CUDA_ERROR_INVALID_VALUE;
    struct emu_module *x = module_alloc();
    if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
    *m = (CUmodule)x;
    return CUDA_SUCCESS;
}

static bool module_ok(const void *m)
{
    return (uintptr_t)m >= 4096 && __atomic_load_n(&((const struct emu_module *)m)->magic, __ATOMIC_ACQUIRE) == MODULE_MAGIC;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{ EMU_ENTRY(cuModuleLoadData); return module_new(module, image); }
CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{ EMU_ENTRY(cuModuleLoadFatBinary); return module_new(module, fatCubin); }
CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                            CUjit_option *options, void **optionValues)
{
    EMU_ENTRY(cuModuleLoadDataEx);
    (void)options; (void)optionValues;
    if (numOptions && (!options || !optionValues)) return CUDA_ERROR_INVALID_VALUE;
    return module_new(module, image);
}

CUresult cuModuleUnload(CUmodule hmod)
{
    EMU_ENTRY(cuModuleUnload);
    if (!module_ok(hmod)) return CUDA_ERROR_INVALID_HANDLE;
    module_release((struct emu_module *)hmod);
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    EMU_ENTRY(cuModuleGetFunction);
    if (!hfunc || !name) return CUDA_ERROR_INVALID_VALUE;
    if (!module_ok(hmod)) return CUDA_ERROR_INVALID_HANDLE;
    struct emu_func *f = find_or_create(NULL, name);
    if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
    *hfunc = (CUfunction)f;
    return CUDA_SUCCESS;
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                           void **jitOptionsValues, unsigned int numJitOptions,
                           CUlibraryOption *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions)
{
    EMU_ENTRY(cuLibraryLoadData);
    (void)jitOptions; (void)jitOptionsValues; (void)numJitOptions;
    (void)libraryOptions; (void)libraryOptionValues; (void)numLibraryOptions;
    if (!emu_driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!library || !code) return CUDA_ERROR_INVALID_VALUE;
    struct emu_module *x = module_alloc();
    if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
    *library = (CUlibrary)x;
    return CUDA_SUCCESS;
}

CUresult cuLibraryUnload(CUlibrary library)
{
    EMU_ENTRY(cuLibraryUnload);
    if (!module_ok(library)) return CUDA_ERROR_INVALID_HANDLE;
    module_release((struct emu_module *)library);
    return CUDA_SUCCESS;
}

CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    EMU_ENTRY(cuLibraryGetKernel);
    if (!pKernel || !name) return CUDA_ERROR_INVALID_VALUE;
    if (!module_ok(library)) return CUDA_ERROR_INVALID_HANDLE;
    struct emu_func *f = find_or_create(NULL, name);
    if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
    *pKernel = (CUkernel)f;
    return CUDA_SUCCESS;
}

CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    EMU_ENTRY(cuKernelGetFunction);
    if (!pFunc) return CUDA_ERROR_INVALID_VALUE;
    if (!func_of(kernel)) return CUDA_ERROR_INVALID_HANDLE;
    *pFunc = (CUfunction)(void *)kernel;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------- parameter info */
static CUresult param_info(const void *h, size_t idx, size_t *off, size_t *size)
{
    struct emu_func *f = func_of(h);
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    int n = __atomic_load_n(&f->nparams, __ATOMIC_ACQUIRE);
    if (n < 0) return CUDA_ERROR_NOT_SUPPORTED;
    if (idx >= (size_t)n) return CUDA_ERROR_INVALID_VALUE;
    if (off) *off = f->offsets[idx];
    if (size) *size = f->sizes[idx];
    return CUDA_SUCCESS;
}
CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{ EMU_ENTRY(cuFuncGetParamInfo); return param_info(func, paramIndex, paramOffset, paramSize); }
CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{ EMU_ENTRY(cuKernelGetParamInfo); return param_info(kernel, paramIndex, paramOffset, paramSize); }

static CUresult func_get_attr(int *pi, CUfunction_attribute a, struct emu_func *f)
{
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = __atomic_load_n(&f->max_dyn_shared, __ATOMIC_RELAXED); break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *pi = __atomic_load_n(&f->carveout, __ATOMIC_RELAXED); break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *pi = 0; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult func_set_attr(struct emu_func *f, CUfunction_attribute a, int v)
{
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if (v < 0 || v > MAX_DYN_SHARED_OPTIN) return CUDA_ERROR_INVALID_VALUE;
        __atomic_store_n(&f->max_dyn_shared, v, __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        if (v < -1 || v > 100) return CUDA_ERROR_INVALID_VALUE;
        __atomic_store_n(&f->carveout, v, __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        return v < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;   /* read-only attributes */
    }
}

CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    EMU_ENTRY(cuFuncGetAttribute);
    struct emu_func *f = func_of(hfunc);
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    return func_get_attr(pi, attrib, f);
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    EMU_ENTRY(cuFuncSetAttribute);
    struct emu_func *f = func_of(hfunc);
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    return func_set_attr(f, attrib, value);
}

CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
    EMU_ENTRY(cuKernelGetAttribute);
    struct emu_func *f = func_of(kernel);
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    CHECK(emu_check_device(dev));
    return func_get_attr(pi, attrib, f);
}

CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
    EMU_ENTRY(cuKernelSetAttribute);
    struct emu_func *f = func_of(kernel);
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    CHECK(emu_check_device(dev));
    return func_set_attr(f, attrib, val);
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    EMU_ENTRY(cuFuncGetName);
    struct emu_func *f = func_of(hfunc);
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    *name = f->device_name ? f->device_name : "";
    return CUDA_SUCCESS;
}

/* ----------------------------------------------------------------- launch */
struct launch_op {
    emu_kernel_fn impl;   /* NULL: a skipped kernel (EMU_UNKNOWN_KERNELS=skip) */
    uint64_t *skipped_counter;
    bool captured;        /* counted as launched each time a graph replays it */
    emu_launch launch;
    void **args;          /* into this allocation, or the caller's array (waited launch) */
    uint64_t ptr_args;    /* bit i: parameter i is pointer-sized (may point to managed memory) */
    const char *name;     /* for activity records (the registry is never freed) */
    uint32_t stream_id, correlation_id;
    int dev;
    bool charges_link;    /* the implementation charges the host link itself */
};

static void count_skipped(uint64_t *by_name)
{
    emu_counter_add_ref(EMU_COUNTER("kernels.skipped"), 1);
    emu_counter_add_ref(by_name, 1);
}

static uint64_t *skipped_counter_of(struct emu_func *f)
{
    uint64_t *c = __atomic_load_n(&f->skipped_counter, __ATOMIC_ACQUIRE);
    if (c) return c;
    char name[512];
    snprintf(name, sizeof name, "kernels.skipped.%s", f->device_name ? f->device_name : "(unnamed kernel)");
    c = emu_counter_ref(name);
    __atomic_store_n(&f->skipped_counter, c, __ATOMIC_RELEASE);
    return c;
}

static void run_kernel(void *p)
{
    struct launch_op *l = p;
    if (l->captured) {
        emu_counter_add_ref(EMU_COUNTER("kernels.launched"), 1);
        if (!l->impl) count_skipped(l->skipped_counter);
    }
    emu_activity_fn hook = emu_activity_hook();
    uint64_t start = hook ? emu_now_ns() : 0;
    /* What the kernel touches is estimated from its pointer-sized arguments
     * (the memory each points at): one the device may not access (VMM memory
     * without its cuMemSetAccess grant, another device's cuMemAlloc memory
     * without peer access) faults the kernel before it runs. */
    for (uint64_t m = l->ptr_args; m; m &= m - 1) {
        uintptr_t v;
        memcpy(&v, l->args[__builtin_ctzll(m)], sizeof v);
        if (!emu_kernel_arg_access_ok(l->dev, v, !l->charges_link)) emu_fault_access();
    }
    for (uint64_t m = l->ptr_args; m; m &= m - 1) {
        uintptr_t v;
        memcpy(&v, l->args[__builtin_ctzll(m)], sizeof v);
        emu_managed_kernel_arg(v);
    }
    if (l->impl) l->impl(l->args, &l->launch);
    emu_counter_add_ref(EMU_COUNTER("kernels.completed"), 1);
    if (hook) {
        struct emu_activity rec = {
            .kind = EMU_ACTIVITY_KERNEL, .start_ns = start, .end_ns = emu_now_ns(),
            .stream_id = l->stream_id, .correlation_id = l->correlation_id, .device = l->dev,
            .name = l->name,
            .grid = {l->launch.grid.x, l->launch.grid.y, l->launch.grid.z},
            .block = {l->launch.block.x, l->launch.block.y, l->launch.block.z},
            .shared_bytes = l->launch.shared_bytes };
        hook(&rec);
    }
}

static const void *extra_buffer(void **extra, size_t *size)
{
    const void *buf = NULL;
    *size = 0;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) *size = *(size_t *)extra[i + 1];
        else return NULL;
    }
    return buf;
}

static CUresult launch(struct emu_func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shmem, CUstream h, void **params,
                       void **extra, bool pt)
{
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if (!gx || !gy || !gz || !bx || !by || !bz || gy > 65535 || gz > 65535 || gx > 2147483647u)
        return CUDA_ERROR_INVALID_VALUE;
    if (bx > 1024 || by > 1024 || bz > 64 || (uint64_t)bx * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
    if (shmem > (unsigned)__atomic_load_n(&f->max_dyn_shared, __ATOMIC_RELAXED)) return CUDA_ERROR_INVALID_VALUE;
    if (params && extra) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    emu_kernel_fn impl = __atomic_load_n(&f->impl, __ATOMIC_ACQUIRE);
    if (!impl && !emu_unknown_kernels_skipped()) {
        EMU_WARN_ONCE("kernel %s has no CPU function (emuRegisterKernel); EMU_UNKNOWN_KERNELS=skip launches "
                      "such kernels as empty ones", f->device_name ? f->device_name : "(unnamed)");
        return CUDA_ERROR_NOT_FOUND;
    }
    int n = __atomic_load_n(&f->nparams, __ATOMIC_ACQUIRE);
    if (n > 0 && !params && !extra) return CUDA_ERROR_INVALID_VALUE;
    size_t ebytes = 0;
    const void *ebuf = extra ? extra_buffer(extra, &ebytes) : NULL;
    if (extra && !ebuf) return CUDA_ERROR_INVALID_VALUE;
    /* A skipped kernel reads no argument: none is copied or waited for. */
    if (!impl) n = 0;
    bool known = n >= 0;
    size_t nargs = known ? (size_t)n : 0;
    size_t blob = known && impl ? (ebuf ? ebytes : f->params_bytes) : 0;
    if (known && impl && ebuf && ebytes < f->params_bytes) return CUDA_ERROR_INVALID_VALUE;
    struct launch_op *l = malloc(sizeof *l + nargs * sizeof(void *) + blob + 16);
    if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
    l->impl = impl;
    l->charges_link = impl && __atomic_load_n(&f->charges_link, __ATOMIC_ACQUIRE);
    l->skipped_counter = impl ? NULL : skipped_counter_of(f);
    l->captured = __atomic_load_n(&st->capture, __ATOMIC_ACQUIRE) != NULL;
    l->launch = (emu_launch){{gx, gy, gz}, {bx, by, bz}, shmem, (void *)h};
    l->name = f->device_name ? f->device_name : "(unnamed kernel)";
    l->stream_id = (uint32_t)st->id;
    l->dev = st->dev;
    l->correlation_id = emu_activity_next_correlation();
    l->ptr_args = 0;
    for (size_t i = 0; known && i < nargs && i < 64; i++)
        if (f->sizes[i] == sizeof(void *)) l->ptr_args |= (uint64_t)1 << i;
    bool wait = false;
    if (known) {
        l->args = (void **)(l + 1);
        char *data = (char *)(l->args + nargs);
        data = (char *)(((uintptr_t)data + 15) & ~(uintptr_t)15);
        if (ebuf) memcpy(data, ebuf, blob);
        for (size_t i = 0; i < nargs; i++) {
            if (!ebuf) memcpy(data + f->offsets[i], params[i], f->sizes[i]);
            l->args[i] = data + f->offsets[i];
        }
    } else {
        /* Sizes unknown: the values cannot be copied, so the launch waits
         * for the kernel to have run (correct, but not asynchronous). */
        if (__atomic_load_n(&st->capture, __ATOMIC_ACQUIRE)) {
            free(l);
            EMU_WARN_ONCE("capturing a kernel whose parameter sizes are not registered is not supported");
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        if (ebuf) {
            free(l);
            EMU_WARN_ONCE("a packed argument buffer needs the kernel's parameter sizes (emuRegisterKernel)");
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        l->args = params;
        wait = true;
    }
    uint64_t seq;
    bool l_captured = l->captured;   /* l belongs to the stream once queued */
    uint64_t *skipped = l->skipped_counter;
    CUresult rc = emu_stream_enqueue_on(st, run_kernel, l, free, "kernel", NULL, &seq);
    if (rc != CUDA_SUCCESS) { free(l); return rc; }
    if (!l_captured) emu_counter_add_ref(EMU_COUNTER("kernels.launched"), 1);
    if (!l_captured && !impl) count_skipped(skipped);
    if (wait) emu_stream_wait_seq(st, seq);
    return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shmem, CUstream h, void **params, void **extra)
{ EMU_ENTRY_STREAM(cuLaunchKernel, h); return launch(func_of(f), gx, gy, gz, bx, by, bz, shmem, h, params, extra, false); }
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shmem, CUstream h, void **params, void **extra)
{ EMU_ENTRY_STREAM(cuLaunchKernel_ptsz, h); return launch(func_of(f), gx, gy, gz, bx, by, bz, shmem, h, params, extra, true); }

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned shmem, CUstream h, void **params)
{ EMU_ENTRY_STREAM(cuLaunchCooperativeKernel, h); return launch(func_of(f), gx, gy, gz, bx, by, bz, shmem, h, params, NULL, false); }
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                        unsigned by, unsigned bz, unsigned shmem, CUstream h, void **params)
{ EMU_ENTRY_STREAM(cuLaunchCooperativeKernel_ptsz, h); return launch(func_of(f), gx, gy, gz, bx, by, bz, shmem, h, params, NULL, true); }

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra, bool pt)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    if (c->numAttrs && !c->attrs) return CUDA_ERROR_INVALID_VALUE;
    return launch(func_of(f), c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                  c->blockDimZ, c->sharedMemBytes, c->hStream, params, extra, pt);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{ EMU_ENTRY_STREAM(cuLaunchKernelEx, config ? config->hStream : CU_STREAM_PER_THREAD); return launch_ex(config, f, kernelParams, extra, false); }
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{ EMU_ENTRY_STREAM(cuLaunchKernelEx_ptsz, config ? config->hStream : CU_STREAM_PER_THREAD); return launch_ex(config, f, kernelParams, extra, true); }

/* -------------------------------------------------------------- occupancy */
/* From the emulated H100's limits (cuDeviceGetAttribute's answers): 2048
 * threads, 32 blocks and 233472 bytes of shared memory per SM, 1024 bytes
 * reserved per block, warps of 32.  A kernel has the footprint
 * cuFuncGetAttribute reports (32 registers, no static shared memory), so
 * threads, blocks and dynamic shared memory are the limits. */
#define SM_THREADS 2048
#define SM_BLOCKS 32
#define SM_SHARED 233472
#define BLOCK_RESERVED_SHARED 1024
#define SM_COUNT 132

static int blocks_per_sm(int block_size, size_t dyn_shared)
{
    if (block_size <= 0 || block_size > 1024) return 0;
    int threads = (block_size + 31) / 32 * 32;
    int n = SM_THREADS / threads;
    if (n > SM_BLOCKS) n = SM_BLOCKS;
    if (dyn_shared > MAX_DYN_SHARED_OPTIN) return 0;
    int by_shared = (int)(SM_SHARED / (dyn_shared + BLOCK_RESERVED_SHARED));
    return n < by_shared ? n : by_shared;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func, int blockSize,
                                                             size_t dynamicSMemSize, unsigned int flags)
{
    EMU_ENTRY(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
    if (!func_of(func)) return CUDA_ERROR_INVALID_HANDLE;
    if (!numBlocks || blockSize <= 0 || (flags & ~1u)) return CUDA_ERROR_INVALID_VALUE;
    *numBlocks = blocks_per_sm(blockSize, dynamicSMemSize);
    return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                                     size_t dynamicSMemSize)
{
    EMU_ENTRY(cuOccupancyMaxActiveBlocksPerMultiprocessor);
    if (!func_of(func)) return CUDA_ERROR_INVALID_HANDLE;
    if (!numBlocks || blockSize <= 0) return CUDA_ERROR_INVALID_VALUE;
    *numBlocks = blocks_per_sm(blockSize, dynamicSMemSize);
    return CUDA_SUCCESS;
}

/* The block size (a multiple of the warp) that keeps the most threads
 * resident, the largest such on a tie (as cuda_runtime.h's
 * cudaOccupancyMaxPotentialBlockSize searches), and the grid that fills the
 * device. */
static CUresult potential_block_size(int *min_grid, int *block, CUfunction func, CUoccupancyB2DSize b2d,
                                     size_t dyn, int limit)
{
    if (!func_of(func)) return CUDA_ERROR_INVALID_HANDLE;
    if (!min_grid || !block) return CUDA_ERROR_INVALID_VALUE;
    if (limit <= 0 || limit > 1024) limit = 1024;
    int best = 0, best_threads = 0;
    for (int b = limit / 32 * 32; b >= 32; b -= 32) {
        int n = blocks_per_sm(b, b2d ? b2d(b) : dyn);
        if (n * b > best_threads) { best_threads = n * b; best = b; }
    }
    if (!best) { *min_grid = 0; *block = 0; return CUDA_SUCCESS; }
    *block = best;
    *min_grid = best_threads / best * SM_COUNT;
    return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                          CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize,
                                          int blockSizeLimit)
{
    EMU_ENTRY(cuOccupancyMaxPotentialBlockSize);
    return potential_block_size(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                                blockSizeLimit);
}

CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func,
                                                   CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                   size_t dynamicSMemSize, int blockSizeLimit, unsigned int flags)
{
    EMU_ENTRY(cuOccupancyMaxPotentialBlockSizeWithFlags);
    if (flags & ~1u) return CUDA_ERROR_INVALID_VALUE;
    return potential_block_size(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                                blockSizeLimit);
}

CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func, int numBlocks,
                                                 int blockSize)
{
    EMU_ENTRY(cuOccupancyAvailableDynamicSMemPerBlock);
    if (!func_of(func)) return CUDA_ERROR_INVALID_HANDLE;
    if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (blocks_per_sm(blockSize, 0) < numBlocks) { *dynamicSmemSize = 0; return CUDA_SUCCESS; }
    size_t per = SM_SHARED / (size_t)numBlocks;
    per = per > BLOCK_RESERVED_SHARED ? per - BLOCK_RESERVED_SHARED : 0;
    *dynamicSmemSize = per < MAX_DYN_SHARED_OPTIN ? per : MAX_DYN_SHARED_OPTIN;
    return CUDA_SUCCESS;
}
