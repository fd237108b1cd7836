/* How the emulated runtime, NCCL, cuBLAS and CUPTI reach the emulated driver:
 * exactly like the real libraries, dlopen("libcuda.so.1") + dlsym of
 * cuGetProcAddress_v2, then one cuGetProcAddress lookup per entry point.  They
 * import no cu* symbol, so a preload sees their driver calls only by wrapping
 * what cuGetProcAddress returns (as on a real system). */
#ifndef EMU_DRIVER_LINK_H
#define EMU_DRIVER_LINK_H
#include <cuda.h>

/* Address of driver export `name` (its full name: "cuMemAlloc_v2",
 * "cuMemcpyAsync_ptsz"), looked up as a base name and version, or NULL.  Thread-safe; aborts
 * with a clear message if libcuda.so.1 cannot be loaded at all. */
void *emu_driver_proc(const char *name);

/* Declares a static function pointer `drv_NAME` of the right type, resolved
 * on first use.  Usage:  EMU_DRV(cuMemAlloc_v2)(&p, n);  uses the typedefs of
 * <cudaTypedefs.h> (PFN_cuMemAlloc_v3020 etc.) through __typeof__. */
#define EMU_DRV(name) \
    (*({ static __typeof__(&name) emu_drv_fp_; \
         __typeof__(&name) f_ = __atomic_load_n(&emu_drv_fp_, __ATOMIC_ACQUIRE); \
         if (!f_) { f_ = (__typeof__(&name))emu_driver_proc(#name); \
                    __atomic_store_n(&emu_drv_fp_, f_, __ATOMIC_RELEASE); } \
         f_; }))
#endif
