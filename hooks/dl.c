/* Driver-level interposition: the dlsym hook and the wrapping of pointers
 * handed out by cuGetProcAddress / cudaGetDriverEntryPoint[ByVersion].
 *
 * Why: NCCL, cuBLAS, the runtime itself, XLA and CuPy's static runtime reach
 * the driver with dlopen("libcuda.so.1") + dlsym(handle, ...) +
 * cuGetProcAddress, never through a symbol a preload can interpose.
 *
 * dlsym(handle, name) for a library handle: when name is a hooked symbol and
 * the real dlsym's answer lies in that symbol's own library (libcuda.so*,
 * libcudart.so*, ...), the answer is recorded as the real function and our
 * hook is returned instead; anything else passes through untouched.
 * RTLD_NEXT and RTLD_DEFAULT depend on who calls (glibc looks at the return
 * address), so they are tail-jumped to glibc's dlsym from a few lines of
 * assembly that leave the caller's return address in place -- except
 * RTLD_DEFAULT for a hooked name whose library is loaded, which answers our
 * hook: that is the global definition (trainshim is first in the global
 * scope), and a library linked -Bsymbolic that looks up its own public entry
 * point this way (the emulated ncclBcast -> ncclBroadcast) would otherwise
 * get its own copy first and hide the nested call.  dlvsym is never hooked:
 * it is how glibc's dlsym is found without recursion.
 *
 * Before trainshim's own initializer has run, dlsym is a pure passthrough
 * decided in assembly: the libraries we depend on initialize before us and
 * may call dlsym from their setup (sanitizer runtimes resolve their
 * interceptors' targets before their shadow memory or thread state exists;
 * a program's own early dlsym interposer can do the same), and no C of ours
 * may run then -- under a sanitizer, every instrumented load would touch
 * state the runtime has not built yet.  RTLD_DEFAULT answers the same early
 * (trainshim's exports come first in the global scope); only a library-handle
 * lookup made before us goes unobserved, and its hooks still resolve their
 * real functions lazily.
 *
 * Wrapping a proc address: the driver returns the address of one variant of
 * the base name asked for ("cuMemAlloc" -> cuMemAlloc_v2; "cuMemcpyHtoD" ->
 * cuMemcpyHtoD_v2 or _v2_ptds by flags).  We never guess which: the pointer
 * is compared with the real address of each hooked variant of that base
 * name, and replaced by our hook only on equality; otherwise it is returned
 * unchanged.  This assumes the driver hands out its exported addresses.  The
 * emulator does (it links with -Bsymbolic, so its internal and exported
 * addresses are equal); a real driver that hands out internal addresses
 * simply goes unobserved on that path, never broken. */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "hooks.h"

/* Entered from the assembly below for real library handles. */
TS_HIDDEN void *ts_dlsym_handle(void *handle, const char *name);
/* Entered for RTLD_DEFAULT: our hook if name is hooked and its library is
 * loaded, else NULL (then glibc answers for the caller). */
TS_HIDDEN void *ts_dlsym_default_hook(const char *name);
/* Nonzero once our initializer has run: only then does dlsym enter C. */
TS_HIDDEN unsigned char ts_dlsym_open;
/* glibc's dlsym, found by the assembly itself (dlvsym, no C involved). */
TS_HIDDEN void *ts_glibc_dlsym;

__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    cmpb $0, ts_dlsym_open(%rip)\n" /* before our initializer: */
        "    je 1f\n"                        /* glibc only, no C */
        "    cmpq $-1, %rdi\n"               /* RTLD_NEXT: straight to glibc */
        "    je 1f\n"
        "    testq %rdi, %rdi\n" /* a library handle: C */
        "    jne ts_dlsym_handle\n"
        "    pushq %rdi\n" /* RTLD_DEFAULT: ask C first, */
        "    pushq %rsi\n" /* keeping the stack aligned */
        "    subq $8, %rsp\n"
        "    movq %rsi, %rdi\n"
        "    call ts_dlsym_default_hook\n"
        "    addq $8, %rsp\n"
        "    popq %rsi\n"
        "    popq %rdi\n"
        "    testq %rax, %rax\n"
        "    je 1f\n"
        "    ret\n"
        "1:  movq ts_glibc_dlsym(%rip), %rax\n" /* tail jump: the caller's */
        "    testq %rax, %rax\n"                /* return address stays, */
        "    je 2f\n"                           /* glibc sees the caller */
        "    jmp *%rax\n"
        /* First use: dlvsym(RTLD_NEXT, "dlsym", version) -- the next dlsym
         * after trainshim, glibc's.  GLIBC_2.2.5 is dlsym's x86-64 base
         * version (libdl before glibc 2.34, kept as a compat version in
         * libc since); GLIBC_2.34 its newer name.  Racing first calls store
         * the same address. */
        "2:  pushq %rdi\n"
        "    pushq %rsi\n"
        "    subq $8, %rsp\n"
        "    movq $-1, %rdi\n"
        "    leaq .Lts_name_dlsym(%rip), %rsi\n"
        "    leaq .Lts_glibc_2_2_5(%rip), %rdx\n"
        "    call dlvsym@PLT\n"
        "    testq %rax, %rax\n"
        "    jne 3f\n"
        "    movq $-1, %rdi\n"
        "    leaq .Lts_name_dlsym(%rip), %rsi\n"
        "    leaq .Lts_glibc_2_34(%rip), %rdx\n"
        "    call dlvsym@PLT\n"
        "3:  addq $8, %rsp\n"
        "    popq %rsi\n"
        "    popq %rdi\n"
        "    testq %rax, %rax\n"
        "    je 4f\n"                           /* no glibc dlsym: NULL, and */
        "    movq %rax, ts_glibc_dlsym(%rip)\n" /* dlvsym's dlerror() stands */
        "    jmp *%rax\n"
        "4:  ret\n"
        ".size dlsym, .-dlsym\n"
        ".section .rodata.str1.1,\"aMS\",@progbits,1\n"
        ".Lts_name_dlsym: .string \"dlsym\"\n"
        ".Lts_glibc_2_2_5: .string \"GLIBC_2.2.5\"\n"
        ".Lts_glibc_2_34: .string \"GLIBC_2.34\"\n"
        ".text\n");

/* Priority 101: the first of our initializers, so that the others (which may
 * dlopen and look up CUDA libraries) are already observed. */
__attribute__((constructor(101))) static void dlsym_open(void)
{
    __atomic_store_n(&ts_dlsym_open, 1, __ATOMIC_RELEASE);
}

void *ts_dlsym_default_hook(const char *name)
{
    int api = ts_hook_by_name(name);
    if (api < 0 || !ts_real(api))
        return NULL;
    return ts_hook_addr[api];
}

/* True if p is defined in an object whose file name starts with lib's prefix. */
static bool defined_in_lib(const void *p, int lib)
{
    Dl_info info;
    if (!dladdr(p, &info) || !info.dli_fname)
        return false;
    const char *file = strrchr(info.dli_fname, '/');
    file = file ? file + 1 : info.dli_fname;
    const char *prefix = ts_lib_file_prefix(lib);
    return strncmp(file, prefix, strlen(prefix)) == 0;
}

void *ts_dlsym_handle(void *handle, const char *name)
{
    void *p = ts_real_dlsym(handle, name);
    if (!p)
        return p;
    int api = ts_hook_by_name(name);
    if (api < 0 || !defined_in_lib(p, ts_api_lib(api)))
        return p;
    ts_real_offer(api, p);
    /* A second copy of the library (another path, another version): our hook
     * would forward to the first copy, so leave this one alone. */
    if (ts_real(api) != p)
        return p;
    return ts_hook_addr[api];
}

/* ---- proc address wrapping ---------------------------------------------- */

/* "cuMemcpyHtoDAsync_v2_ptsz" -> "cuMemcpyHtoDAsync": drop _ptds/_ptsz, then
 * a _v<digits> suffix.  Returns the length of the base. */
static size_t base_len(const char *s)
{
    size_t n = strlen(s);
    if (n > 5 && (strcmp(s + n - 5, "_ptds") == 0 || strcmp(s + n - 5, "_ptsz") == 0))
        n -= 5;
    size_t d = n;
    while (d > 0 && s[d - 1] >= '0' && s[d - 1] <= '9')
        d--;
    if (d < n && d >= 2 && s[d - 1] == 'v' && s[d - 2] == '_')
        n = d - 2;
    return n;
}

/* The hooked driver symbols, with their base-name lengths. */
static int drv_ids[TS_API_COUNT];
static size_t drv_base_len[TS_API_COUNT];
static int drv_count;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void build_driver_list(void)
{
    for (int i = 0; i < TS_API_COUNT; i++) {
        if (ts_api_lib(i) != TS_LIB_cuda || !ts_hook_addr[i])
            continue;
        drv_ids[drv_count] = i;
        drv_base_len[drv_count] = base_len(ts_api_name(i));
        drv_count++;
    }
}

/* The base names of the entry points that change which context is current,
 * or destroy one: a pointer to one of them handed out unwrapped makes calls
 * no hook sees, and the current device kept per thread is given up for good
 * (core/cuda_real.h ts_current_device_kept). */
static const char *const context_switches[] = {
    "cuCtxSetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent",           "cuCtxCreate",
    "cuCtxDestroy",    "cuCtxDetach",      "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset",
};

static void *unwrapped(const char *symbol, size_t n, void *p)
{
    for (size_t i = 0; i < sizeof context_switches / sizeof *context_switches; i++)
        if (strlen(context_switches[i]) == n && strncmp(context_switches[i], symbol, n) == 0)
            ts_current_device_unkept();
    return p;
}

void *ts_wrap_driver_proc(const char *symbol, void *p)
{
    if (!p || !symbol)
        return p;
    size_t n = base_len(symbol);
    if (!ts_active())
        return unwrapped(symbol, n, p);
    pthread_once(&drv_once, build_driver_list);
    for (int k = 0; k < drv_count; k++) {
        int api = drv_ids[k];
        if (drv_base_len[k] != n || strncmp(ts_api_name(api), symbol, n) != 0)
            continue;
        if (p == ts_hook_addr[api])
            return p; /* already ours */
        if (ts_real(api) == p)
            return ts_hook_addr[api];
    }
    return unwrapped(symbol, n, p);
}
