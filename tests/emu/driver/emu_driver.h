/* emu_driver.h: the contract between the parts of the emulated driver
 * (build/emu/libcuda.so.1).  Internal: nothing here is exported (the version
 * script exports only the real driver's names and emu*).
 *
 * Files and owners of each concern:
 *   core.c      init, EMU_* environment, counters, fault injection, entry
 *               accounting, cuGetProcAddress, cuInit/cuDriverGetVersion,
 *               error strings, devices and their attributes, contexts
 *   exec*.c     streams and their worker threads, jitter, events, copies,
 *               memset, kernels (registry, launch, cuFuncGetParamInfo),
 *               host functions, stream capture and graphs, the fault guard
 *               that turns a SIGSEGV in device memory into a sticky error
 *   mem*.c      the device address space, cuMemAlloc/Free, VMM
 *               (reserve/create/map/access/unmap/release/export/import),
 *               pinned host registry, managed memory, pointer attributes,
 *               legacy IPC, stream-ordered allocation (cuMemAllocAsync, pools)
 */
#ifndef EMU_DRIVER_H
#define EMU_DRIVER_H

#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "emu.h"

#define EMU_MAX_DEVICES 8

/* ------------------------------------------------------------------ core.c */
struct emu_config {
    int devices;               /* EMU_DEVICES (1) */
    size_t device_memory;      /* EMU_DEVICE_MEMORY (80 GiB), bytes per device */
    unsigned jitter_us;        /* EMU_JITTER_US (0): max random delay before each stream op */
    uint64_t seed;             /* EMU_SEED (1) */
    double pinned_gbps;        /* EMU_PINNED_GBPS (0 = no bandwidth model) */
    double pageable_gbps;      /* EMU_PAGEABLE_GBPS (0) */
    double nvlink_gbps;        /* EMU_LINK_GBPS (0): NCCL/peer simulated link */
    double host_link_gbps;     /* EMU_HOST_LINK_GBPS (EMU_PINNED_GBPS): device access to host-located VMM pages */
    bool host_vmm;             /* EMU_HOST_VMM (1): host-located cuMemCreate supported */
    bool proc_internal;        /* EMU_PROC_INTERNAL (0): cuGetProcAddress hands out internal entry points */
    int link_trace_fd;         /* EMU_LINK_TRACE (-1): each host-link charge appended as a line */
    char device_name[256];     /* EMU_DEVICE_NAME ("NVIDIA H100 80GB HBM3") */
};
extern struct emu_config emu_cfg;

/* Idempotent, thread-safe; every entry point calls it (through EMU_ENTRY). */
void emu_init(void);

/* Entry accounting: counts calls.<name> and applies fault injection.  Every
 * exported driver function starts with
 *     EMU_ENTRY(cuMemAlloc_v2);
 * which returns the injected error if a fault rule fires.  The per-call-site
 * static keeps it to one per-thread add on the hot path (core.c). */
struct emu_entry_slot;
CUresult emu_entry(struct emu_entry_slot **slot, const char *name);
#define EMU_ENTRY(name) do { static struct emu_entry_slot *emu_slot_; \
        CUresult emu_rc_ = emu_entry(&emu_slot_, #name); \
        if (emu_rc_ != CUDA_SUCCESS) return emu_rc_; } while (0)

/* Entry points that need an initialized driver, and those that also need a
 * current context (memory, copies, memsets: their cuda.h return lists name
 * CUDA_ERROR_INVALID_CONTEXT), start with one of
 *     EMU_ENTRY_INIT(cuMemCreate);    CUDA_ERROR_NOT_INITIALIZED before cuInit
 *     EMU_ENTRY_CTX(cuMemAlloc_v2);   that, then CUDA_ERROR_INVALID_CONTEXT
 *                                     without a current context
 * instead of EMU_ENTRY (both count the call and apply fault injection first). */
bool emu_driver_initialized(void);   /* cuInit was called (core.c) */
CUresult emu_require_ctx(void);      /* the context check (exec_context.c) */
/* Entry points on a stream whose cuda.h return list names
 * CUDA_ERROR_INVALID_CONTEXT (synchronize, query, wait, host functions,
 * event records, launches, stream queries): an explicit stream carries its
 * own context, so a thread with no current context may use it; the handles
 * that name a stream of the current context (0, CU_STREAM_LEGACY,
 * CU_STREAM_PER_THREAD) need one.  EMU_ENTRY_STREAM(name, stream). */
CUresult emu_require_stream_ctx(CUstream s);   /* exec_context.c */
#define EMU_ENTRY_STREAM(name, s) do { EMU_ENTRY(name); CUresult emu_sctx_rc_ = emu_require_stream_ctx(s); \
        if (__builtin_expect(emu_sctx_rc_ != CUDA_SUCCESS, 0)) return emu_sctx_rc_; } while (0)
#define EMU_ENTRY_INIT(name) do { EMU_ENTRY(name); \
        if (__builtin_expect(!emu_driver_initialized(), 0)) return CUDA_ERROR_NOT_INITIALIZED; } while (0)
#define EMU_ENTRY_CTX(name) do { EMU_ENTRY(name); CUresult emu_ctx_rc_ = emu_require_ctx(); \
        if (__builtin_expect(emu_ctx_rc_ != CUDA_SUCCESS, 0)) return emu_ctx_rc_; } while (0)

/* Counters (emuAddCounter is the exported form). */
void emu_counter_add(const char *name, uint64_t delta);
void emu_counter_max(const char *name, uint64_t value);   /* keeps the maximum */
/* Hot paths: a counter's value cell, resolved once (names are interned for
 * the process's lifetime, so the pointer stays valid).  Never NULL.
 * EMU_COUNTER(name) caches it in a per-call-site static (name must be the
 * same at every call of that site). */
uint64_t *emu_counter_ref(const char *name);
void emu_counter_max_ref(uint64_t *ref, uint64_t value);
static inline void emu_counter_add_ref(uint64_t *ref, uint64_t delta)
{
    __atomic_fetch_add(ref, delta, __ATOMIC_RELAXED);
}
#define EMU_COUNTER(name) __extension__({ static uint64_t *emu_cref_; \
        uint64_t *emu_r_ = __atomic_load_n(&emu_cref_, __ATOMIC_ACQUIRE); \
        if (__builtin_expect(!emu_r_, 0)) { \
            emu_r_ = emu_counter_ref(name); \
            __atomic_store_n(&emu_cref_, emu_r_, __ATOMIC_RELEASE); } \
        emu_r_; })

/* Current device of the calling thread (context current, default 0). */
int emu_current_device(void);
/* Validates an ordinal: CUDA_ERROR_INVALID_DEVICE if out of range. */
CUresult emu_check_device(int dev);

/* Sticky error (a fault in a kernel or copy): once set, every later call that
 * synchronizes reports it, as on a GPU. */
void emu_set_sticky(CUresult err);
CUresult emu_sticky(void);

/* Deterministic per-thread random numbers from EMU_SEED. */
uint64_t emu_rand(void);

/* Prints "emu: <message>" once per call site. */
#define EMU_WARN_ONCE(...) do { static int said_; \
        if (!__atomic_exchange_n(&said_, 1, __ATOMIC_RELAXED)) emu_warn(__VA_ARGS__); } while (0)
void emu_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------ exec*.c */
/* An operation queued on a stream runs later on that stream's worker thread,
 * after the jitter delay, in FIFO order, honouring legacy-stream semantics.
 * fn runs inside the fault guard: a SIGSEGV on a device address becomes the
 * sticky CUDA_ERROR_ILLEGAL_ADDRESS.  While the stream captures, the op is
 * recorded into the graph instead and runs at each launch.  `name` is for
 * diagnostics.  Returns CUDA_ERROR_INVALID_HANDLE for an unknown stream, the
 * sticky error once set, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT for the legacy
 * stream while a blocking stream captures.  On any error nothing was queued
 * and arg still belongs to the caller (free_arg is not called).  Handle 0 is
 * the legacy stream here; pass CU_STREAM_PER_THREAD for the per-thread one. */
typedef void (*emu_op_fn)(void *arg);
CUresult emu_stream_enqueue(CUstream s, emu_op_fn fn, void *arg, void (*free_arg)(void *),
                            const char *name);
/* Waits for everything queued so far on s (resolving 0 / per-thread handles). */
CUresult emu_stream_sync(CUstream s);
/* Waits for every stream of device dev (cuCtxSynchronize, cuMemFree). */
CUresult emu_device_sync(int dev);
/* Capture state of a stream: 1 if capturing, 0 if not, <0 on a bad handle. */
int emu_stream_is_capturing(CUstream s);
/* A "potentially unsafe" call (cuMemAlloc, cuMemFree, sync copies...) made
 * while some stream captures in global mode (or in this thread's mode):
 * returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture,
 * or CUDA_SUCCESS when allowed. */
CUresult emu_capture_check_unsafe(void);
/* Device that owns a stream (for stream-ordered allocation). */
int emu_stream_device(CUstream s);

/* ------------------------------------------------------------------ mem*.c */
/* The device address space: one reserved host range per device; a device
 * pointer is a host address inside it, dereferenceable where mapped and
 * accessible. */
bool emu_is_device_addr(uintptr_t p);
int emu_addr_device(uintptr_t p);            /* owning device or -1 */

enum emu_mem_kind {
    EMU_MEM_PAGEABLE = 1,   /* ordinary host memory */
    EMU_MEM_PINNED = 2,     /* cuMemHostAlloc / cuMemHostRegister */
    EMU_MEM_DEVICE = 3,
    EMU_MEM_MANAGED = 5,    /* numbering as CUPTI's memory kinds */
    EMU_MEM_INVALID = 0     /* inside the device range but not allocated */
};
/* Classifies p (and checks [p, p+len) lies in one allocation for device and
 * pinned kinds; len 0 skips the extent check). */
enum emu_mem_kind emu_classify(const void *p, size_t len);

/* For copies and memsets at enqueue time: CUDA_SUCCESS if [p, p+len) is
 * allocated device (or managed) memory, CUDA_ERROR_INVALID_VALUE otherwise.
 * Access rights are not checked here: touching a mapping without access
 * faults when the op runs (sticky illegal address), as on a GPU. */
CUresult emu_check_device_range(uintptr_t p, size_t len);

/* Managed memory: called by copies and kernels that touch [p, p+len) on the
 * device (to_device=1) or host; counts page migrations. No-op elsewhere. */
void emu_managed_touch(uintptr_t p, size_t len, int to_device);
/* A kernel's pointer-sized argument p, when the kernel runs: if p points
 * into managed memory, the pages from p to the end of that allocation move
 * to the device (the emulator cannot see which ones a CPU kernel reads). */
void emu_managed_kernel_arg(uintptr_t p);

/* Access of one device, for ops the executor runs on behalf of device dev
 * (the stream's device; for cuMemcpyPeer the source's and destination's
 * devices), checked when the op runs.  The host cannot give a page one
 * protection per device, so these checks tell what that device was granted;
 * a refused access is the same fault as an unmapped one (emu_fault_access in
 * exec_fault.c).
 * emu_mem_access_ok: copies and memsets.  [p, p+len) where it is cuMemMap'ed
 * memory needs cuMemSetAccess for dev, and pool memory of another device
 * cuMemPoolSetAccess for dev: read, or read-write if write (peer access
 * covers neither).  cuMemAlloc memory, host, managed and unallocated
 * addresses pass (copies between devices need no peer access).
 * emu_kernel_arg_access_ok: a kernel's pointer-sized argument p (the
 * emulator cannot see what a CPU kernel touches: it is taken to touch the
 * memory p points at, as for managed memory): VMM and pool memory need at
 * least read access for dev as above; cuMemAlloc memory of another device
 * needs peer access (cuCtxEnablePeerAccess) from dev. */
bool emu_mem_access_ok(int dev, uintptr_t p, size_t len, bool write);
/* charge: false when the kernel charges the link itself (emuKernelChargesLink) */
bool emu_kernel_arg_access_ok(int dev, uintptr_t p, bool charge);
/* The host-link model (mem_vmm.c): device access to host-located VMM pages
 * crosses the host link.  Both checks above, when they grant an access,
 * charge it: emu_mem_access_ok the bytes of [p, p+len) that are
 * host-located; emu_kernel_arg_access_ok, which cannot see how far a kernel
 * reads, the run of host-located mappings from p to the first page that is
 * not one (an upper bound of what the argument's tensor can occupy there).
 * A charge counts link.host.bytes and link.host.ops, and when
 * emu_cfg.host_link_gbps > 0 sleeps bytes / rate on the calling worker and
 * counts the simulated nanoseconds in link.host.ns.  Nearly free while no
 * host-located page is mapped. */
void emu_host_link_charge_range(uintptr_t p, size_t len);
void emu_host_link_charge_run(uintptr_t p);
/* Peer access enabled from dev to peer's cuMemAlloc memory (exec_context.c;
 * true for dev == peer). */
bool emu_peer_enabled(int dev, int peer);

/* Primary context reset (cuDevicePrimaryCtxReset_v2, after the device's work
 * has drained): releases every allocation of device dev, as destroying the
 * context does on a GPU. */
void emu_mem_reset_device(int dev);

/* emuResetCounters: phys.peak* restart from the memory still allocated. */
void emu_phys_reset_peaks(void);

#endif
