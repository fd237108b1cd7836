/* rt_internal.h: what the files of the emulated CUDA runtime
 * (build/emu/libcudart.so.13) share.  Internal: the version script exports
 * only the real runtime's names.
 *
 * The runtime is a layer over the emulated driver, reached exactly like the
 * real runtime reaches the real driver: dlopen("libcuda.so.1") +
 * cuGetProcAddress, one lookup per entry point (EMU_DRV in driver_link.h).  It
 * imports no cu* symbol.  Handles are the driver's: cudaStream_t is a CUstream,
 * cudaEvent_t a CUevent, cudaGraph_t a CUgraph, cudaMemPool_t a
 * CUmemoryPool; only kernels (cudaKernel_t) are runtime records (rt_launch.c).
 *
 * Files: rt_core.c (init, per-thread state, errors, current device),
 * rt_errors.c (names and strings), rt_device.c, rt_memory.c, rt_copy.c,
 * rt_stream.c, rt_capture.c, rt_pool.c, rt_launch.c (kernel registry,
 * registration, launches), rt_func.c (function queries, occupancy),
 * rt_symbol.c (__device__/__constant__ variables),
 * rt_entry.c (driver entry points, profiler).
 */
#ifndef EMU_RT_INTERNAL_H
#define EMU_RT_INTERNAL_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include "common/driver_link.h"

/* Resolves a driver entry point by a name that cuda.h does not declare (the
 * emu* control API), with the type of a declared function. */
#define RT_DRV_AS(type_of, name_str) \
    (*({ static __typeof__(&type_of) rt_fp_; \
         __typeof__(&type_of) f_ = __atomic_load_n(&rt_fp_, __ATOMIC_ACQUIRE); \
         if (!f_) { f_ = (__typeof__(&type_of))emu_driver_proc(name_str); \
                    __atomic_store_n(&rt_fp_, f_, __ATOMIC_RELEASE); } \
         f_; }))

#define RT_MAX_DEVICES 64

/* ---- per-thread state (rt_core.c) ------------------------------------- */
struct rt_launch_config {   /* one <<<>>> configuration (rt_launch.c) */
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
};
#define RT_CONFIG_DEPTH 16
struct rt_thread {
    int device;             /* the thread's current device (cudaSetDevice) */
    unsigned ctx_gen;       /* == rt_ctx_gen: the device's primary context is
                             * current here (0: not yet; stale after a reset) */
    cudaError_t last_error; /* cudaGetLastError's answer */
    int config_depth;       /* __cudaPushCallConfiguration stack */
    struct rt_launch_config config[RT_CONFIG_DEPTH];
};
extern __thread struct rt_thread rt_tls;

/* Process-wide sticky error (a kernel or copy faulted): every call that needs
 * the device reports it until cudaDeviceReset, as on a GPU. */
extern cudaError_t rt_sticky_error;
/* Bumped by cudaDeviceReset so that every thread makes the new primary
 * context current again. */
extern unsigned rt_ctx_gen;

/* Makes the calling thread's current device usable: driver init on the first
 * call of the process, primary context retained and current on the first call
 * of the thread.  Returns the sticky error if one is set. */
cudaError_t rt_enter_slow(void);
static inline cudaError_t rt_enter(void)
{
    if (__builtin_expect(rt_tls.ctx_gen == __atomic_load_n(&rt_ctx_gen, __ATOMIC_RELAXED) &&
                         !__atomic_load_n(&rt_sticky_error, __ATOMIC_RELAXED), 1))
        return cudaSuccess;
    return rt_enter_slow();
}
/* Driver init only (no context): for device-count style queries. */
cudaError_t rt_init_driver(void);

/* Records e as the thread's last error (cudaErrorNotReady is an answer, not
 * an error, and is never recorded) and returns it. */
static inline cudaError_t rt_set(cudaError_t e)
{
    if (__builtin_expect(e != cudaSuccess, 0) && e != cudaErrorNotReady)
        rt_tls.last_error = e;
    return e;
}
/* CUresult -> cudaError_t, as the real runtime maps them. */
cudaError_t rt_map(CUresult r);
/* Maps a driver result, notes sticky errors, records the last error. */
cudaError_t rt_drv_slow(CUresult r);
static inline cudaError_t rt_drv(CUresult r)
{
    return r == CUDA_SUCCESS ? cudaSuccess : rt_drv_slow(r);
}

#define RT_ENTER() do { cudaError_t rt_e_ = rt_enter(); \
        if (rt_e_ != cudaSuccess) return rt_set(rt_e_); } while (0)

/* Device count (after rt_init_driver) and primary context of dev (retained on
 * first use; NULL with *err set on failure). */
int rt_device_count(void);
CUcontext rt_primary_ctx(int dev, cudaError_t *err);
/* cudaDeviceReset: forgets dev's primary context, clears the sticky error
 * and makes every thread re-establish its context. */
void rt_forget_primary_ctx(int dev);

/* Stream handle of a _ptsz/_ptds variant: 0 means the per-thread stream. */
static inline CUstream rt_ptsz(cudaStream_t s)
{
    return s ? (CUstream)s : CU_STREAM_PER_THREAD;
}

/* ---- kernels (rt_launch.c) ---------------------------------------------- */
/* The driver function for a host stub address or a cudaKernel_t handle;
 * NULL and *err = cudaErrorInvalidDeviceFunction if none. */
CUfunction rt_function_of(const void *func, cudaError_t *err);
/* The device-side (mangled) name a kernel was registered under, or NULL. */
const char *rt_kernel_name(const void *func);

/* ---- __device__ variables (rt_symbol.c) ---------------------------------- */
/* Forgets the variables' storage on dev (released by cudaDeviceReset). */
void rt_symbols_forget_device(int dev);

/* ---- errors (rt_errors.c) --------------------------------------------- */
/* 1 if e is a cudaError_t value the runtime knows. */
int rt_error_known(int e);

#endif
