/* emu.h: control API of trainshim's CPU emulator of the CUDA stack.
 *
 * For tests, benchmarks and the demo workload only.  Every function here is
 * exported by the emulated driver (build/emu/libcuda.so.1); link with
 * -Lbuild/emu -lcuda.  Code that must also run on a real GPU resolves them with
 * dlsym(RTLD_DEFAULT, "emuRegisterKernel") and skips them when absent (see
 * EMU_OPTIONAL below).  Names are listed in tests/emu/symbols/emu.txt, which
 * also puts them in the driver's cuGetProcAddress table.
 */
#ifndef TRAINSHIM_EMU_H
#define TRAINSHIM_EMU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- kernels ------------------------------------------------------------
 * A kernel runs on the CPU as one call of its implementation, which loops over
 * the whole grid itself.  args[i] points at the value of parameter i, exactly
 * as in cudaLaunchKernel/cuLaunchKernel. */
typedef struct emu_dim3 { unsigned x, y, z; } emu_dim3;
typedef struct emu_launch {
    emu_dim3 grid, block;
    size_t shared_bytes;
    void *stream;          /* the CUstream the kernel was launched on */
} emu_launch;
typedef void (*emu_kernel_fn)(void **args, const emu_launch *launch);

/* Register the CPU implementation of a kernel.  host_func is the address the
 * program launches (the __global__ function's host stub, or any unique
 * address for pure-C programs using cudaLaunchKernel); device_name is the
 * (mangled) device-side name used by cuModuleGetFunction and
 * __cudaRegisterFunction.  Either may be NULL, not both.  param_sizes[nparams]
 * describes the parameters (for cudaFuncGetParamInfo); nparams may be -1 if
 * unknown.  Returns 0 on success. */
int emuRegisterKernel(const void *host_func, const char *device_name,
                      emu_kernel_fn impl, int nparams, const size_t *param_sizes);

/* Used by the emulated runtime (not by tests): the CUfunction for a kernel
 * known by host stub and/or device name (created on first use; returns a
 * CUresult).  Launching it fails with CUDA_ERROR_NOT_FOUND, which the runtime
 * turns into cudaErrorInvalidDeviceFunction, if no implementation is
 * registered by launch time. */
int emuGetFunction(void **cufunction_out, const void *host_func, const char *device_name);

/* ---- counters -----------------------------------------------------------
 * Named 64-bit counters.  Names:
 *   calls.<entry point>            calls of a driver entry point (e.g. calls.cuMemMap)
 *   bytes.h2d.pageable  bytes.h2d.pinned  bytes.d2h.pageable  bytes.d2h.pinned
 *   bytes.d2d  bytes.h2h  bytes.peer
 *   copies.h2d.pageable ... (same suffixes, number of copy operations)
 *   phys.current  phys.peak        physical device bytes (all devices)
 *   phys.current.<dev>  phys.peak.<dev>
 *   phys.host.current  phys.host.peak  host-located VMM handles (not device memory)
 *   link.host.bytes  link.host.ops  link.host.ns   device access to host-located
 *                                  pages: bytes, charges, simulated ns
 *   managed.migrations.h2d  managed.migrations.d2h   (pages)
 *   kernels.launched  kernels.completed
 *   kernels.skipped  kernels.skipped.<device name>   (EMU_UNKNOWN_KERNELS=skip)
 *   gemm.skipped  nccl.skipped  memsets.skipped  copies.skipped   (EMU_COMPUTE=skip)
 *   nccl.<op>  cublas.gemm           (counted by those libraries)
 * Unknown names read as 0. */
uint64_t emuGetCounter(const char *name);
void emuResetCounters(void);
/* Libraries of the emulator (nccl, cublas) bump their counters here. */
void emuAddCounter(const char *name, uint64_t delta);
/* The host-link model: device access to host-located VMM pages (cuMemCreate
 * with location HOST or HOST_NUMA) crosses the host link.  Charges the
 * host-located bytes of [p, p+len) (link.host.bytes, link.host.ops; sleeps
 * bytes / EMU_HOST_LINK_GBPS and counts link.host.ns when that rate is set)
 * and returns them.  The driver charges copies, memsets and kernels itself;
 * emulated libraries that touch device memory from host functions (NCCL)
 * call this. */
uint64_t emuHostLinkCharge(const void *p, size_t len);
/* A registered kernel (by host_func or device_name, as emuRegisterKernel)
 * whose CPU implementation charges the host link itself, with
 * emuHostLinkCharge over the exact bytes it reads and writes: its launches
 * are then not charged the upper bound described in emu_driver.h (the run
 * of host-located pages from each pointer argument on).  Returns 0 on
 * success, -1 for a kernel never registered. */
int emuKernelChargesLink(const void *host_func, const char *device_name);

/* ---- fault injection ----------------------------------------------------
 * spec: "entry:N:ERROR" makes the Nth call (1-based) of entry fail with ERROR
 * (a CUresult name such as CUDA_ERROR_OUT_OF_MEMORY or a number);
 * "entry:p0.25:ERROR" fails a seeded 25% of calls; several specs separated by
 * ','.  Same syntax as EMU_FAIL.  "" clears.  Returns 0, or -1 on a bad spec. */
int emuSetFault(const char *spec);

/* ---- queries ------------------------------------------------------------ */
/* 1 if p lies in the emulator's device address range (any device). */
int emuIsDevicePointer(const void *p);
/* Effective jitter in microseconds and seed (after EMU_JITTER_US / EMU_SEED). */
unsigned emuJitterUs(void);
/* Set jitter at run time (tests); returns the previous value. */
unsigned emuSetJitterUs(unsigned us);

/* For code that must also run on a real GPU: resolve an emu* function if the
 * emulator answers, NULL otherwise.  Needs <dlfcn.h>. */
#define EMU_OPTIONAL(name) ((__typeof__(&name))dlsym(RTLD_DEFAULT, #name))

#ifdef __cplusplus
}
#endif
#endif
