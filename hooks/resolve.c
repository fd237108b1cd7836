/* Real-function resolution (see resolve.h). */
#include "resolve.h"

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "core/cuda_real.h"
#include "hooks.h"

void *ts_real_slots[TS_API_COUNT];

const char *const ts_api_names[TS_API_COUNT] = {
#define TS_SYM(lib, ret, sym, base, params, args, body) #sym,
#include "hooks.def"
#undef TS_SYM
};
static const unsigned char api_libs[TS_API_COUNT] = {
#define TS_SYM(lib, ret, sym, base, params, args, body) TS_LIB_##lib,
#include "hooks.def"
#undef TS_SYM
};
static const char *const lib_sonames[TS_LIB_COUNT] = {
    [TS_LIB_cudart] = "libcudart.so.13",     [TS_LIB_cuda] = "libcuda.so.1",
    [TS_LIB_nccl] = "libnccl.so.2",          [TS_LIB_cublas] = "libcublas.so.13",
    [TS_LIB_cublasLt] = "libcublasLt.so.13",
};
/* Prefixes are distinct: "libcuda.so" does not prefix "libcudart.so", nor
 * "libcublas.so" "libcublasLt.so". */
static const char *const lib_prefixes[TS_LIB_COUNT] = {
    [TS_LIB_cudart] = "libcudart.so", [TS_LIB_cuda] = "libcuda.so",         [TS_LIB_nccl] = "libnccl.so",
    [TS_LIB_cublas] = "libcublas.so", [TS_LIB_cublasLt] = "libcublasLt.so",
};

int ts_api_count(void) { return TS_API_COUNT; }
const char *ts_api_name(int api) { return api >= 0 && api < TS_API_COUNT ? ts_api_names[api] : "?"; }
int ts_api_lib(int api) { return api >= 0 && api < TS_API_COUNT ? api_libs[api] : -1; }
const char *ts_lib_soname(int lib) { return lib >= 0 && lib < TS_LIB_COUNT ? lib_sonames[lib] : "?"; }
const char *ts_lib_file_prefix(int lib) { return lib >= 0 && lib < TS_LIB_COUNT ? lib_prefixes[lib] : "?"; }

static void *(*ts_real_dlsym_fp)(void *, const char *);

static void *(*load_real_dlsym(void))(void *, const char *)
{
    void *(*fp)(void *, const char *) = __atomic_load_n(&ts_real_dlsym_fp, __ATOMIC_ACQUIRE);
    if (ts_likely(fp != NULL))
        return fp;
    /* dlvsym is not hooked, so this reaches glibc.  GLIBC_2.2.5 is dlsym's
     * x86-64 base version; GLIBC_2.34 (libdl merged into libc) is the same
     * function under its newer name. */
    fp = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (!fp)
        fp = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (fp)
        __atomic_store_n(&ts_real_dlsym_fp, fp, __ATOMIC_RELEASE);
    return fp;
}

/* The shim's real-CUDA ids (core/cuda_real.def) as API ids: every function
 * the shim calls is resolved like the hooks' own, in the same slot. */
static const unsigned short cuda_apis[TS_CUDA_COUNT] = {
#define TS_CUDA_FN(sym, proto) [TS_CUDA_##sym] = TS_API_##sym,
#include "core/cuda_real.def"
#undef TS_CUDA_FN
};

static void *resolve_for_shim(int id) { return ts_real(cuda_apis[id]); }

/* Early: trainshim's own lookups find glibc's dlsym before other libraries'
 * constructors run (hooks/dl.c finds its own early target by itself), and
 * the shim can reach real CUDA before process.c's constructor turns it on. */
__attribute__((constructor(101))) static void resolve_init(void)
{
    (void)load_real_dlsym();
    ts_cuda_set_resolver(resolve_for_shim);
}

void *ts_real_dlsym(void *handle, const char *name)
{
    void *(*fp)(void *, const char *) = load_real_dlsym();
    return fp ? fp(handle, name) : NULL;
}

bool ts_addr_is_ours(const void *p)
{
    static void *our_base;
    void *base = __atomic_load_n(&our_base, __ATOMIC_RELAXED);
    if (!base) {
        Dl_info self;
        if (!dladdr((void *)&ts_addr_is_ours, &self))
            return false;
        base = self.dli_fbase;
        __atomic_store_n(&our_base, base, __ATOMIC_RELAXED);
    }
    Dl_info info;
    return p && dladdr(p, &info) && info.dli_fbase == base;
}

static void offer(int api, void *p)
{
    if (!p || ts_addr_is_ours(p))
        return;
    void *expected = NULL;
    /* First answer wins; racing resolvers find the same address anyway. */
    __atomic_compare_exchange_n(&ts_real_slots[api], &expected, p, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void ts_real_offer(int api, void *p)
{
    if (api >= 0 && api < TS_API_COUNT)
        offer(api, p);
}

void *ts_real_resolve(int api)
{
    if (api < 0 || api >= TS_API_COUNT)
        return NULL;
    const char *name = ts_api_names[api];
    bool failed = false; /* one of our dl* lookups failed and left a dlerror() message */
    void *p = ts_real_dlsym(RTLD_NEXT, name);
    if (p && !ts_addr_is_ours(p)) {
        offer(api, p);
    } else {
        failed = !p;
        void *h = dlopen(lib_sonames[api_libs[api]], RTLD_NOLOAD | RTLD_LAZY);
        if (h) {
            void *q = ts_real_dlsym(h, name);
            failed |= !q;
            offer(api, q);
            dlclose(h);
        } else {
            failed = true;
        }
    }
    /* The program made no failing dl* call: a message left by ours would
     * make its own "dlerror() after a successful dlsym" check fail. */
    if (failed)
        (void)dlerror();
    return __atomic_load_n(&ts_real_slots[api], __ATOMIC_ACQUIRE);
}
