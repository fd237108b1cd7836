/* offload.h: the door of shim/offload, cold device memory on host-backed VMM
 * pages (TRAINSHIM_OFFLOAD).
 *
 * trainshim owns the virtual ranges its pools serve, so a page's physical
 * backing can change without its address changing: a page can be a
 * host-located VMM handle (cuMemCreate on CU_MEM_LOCATION_TYPE_HOST_NUMA, or
 * HOST) mapped at the same device address, which kernels still reach, over
 * the host link.  Moving a page is quiesce-and-swap (offload_move.c): hold
 * new work at the gate, synchronize the context, create the new handle, copy,
 * unmap the old, map the new, grant access, release the old; any failure puts
 * the old mapping back, pauses offload for that pool with one warning, and
 * loses no byte.  IPC-exported and NCCL-registered ranges never move, nor
 * anything while a capture is in progress.
 *
 * Modes (TRAINSHIM_OFFLOAD): off; on (host-backed VMM where the device
 * announces it, else one "offload unavailable: <reason>" line and off);
 * managed (for devices without host-backed VMM: an allocation the pool cannot
 * serve is made with cuMemAllocManaged instead of failing).
 *
 * What it may include: shim/alloc (alloc.h: pools, pages, the provider
 * table) and shim/core; nothing above (devmem, hooks) and nothing of the
 * emulator.  Callers reach it through this header only. */
#ifndef TRAINSHIM_OFFLOAD_H
#define TRAINSHIM_OFFLOAD_H
#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_real.h"

struct ts_pool;
struct ts_page_provider;

enum ts_offload_mode { TS_OFFLOAD_OFF = 0, TS_OFFLOAD_ON = 1, TS_OFFLOAD_MANAGED = 2 };

/* The real driver entry points offload calls (filled by the pool's creator;
 * nothing is resolved here). */
typedef struct ts_offload_driver {
    ts_cuda_fn_cuMemCreate cuMemCreate;
    ts_cuda_fn_cuMemRelease cuMemRelease;
    ts_cuda_fn_cuMemMap cuMemMap;
    ts_cuda_fn_cuMemUnmap cuMemUnmap;
    ts_cuda_fn_cuMemSetAccess cuMemSetAccess;
    ts_cuda_fn_cuMemAddressReserve cuMemAddressReserve;
    ts_cuda_fn_cuMemAddressFree cuMemAddressFree;
    ts_cuda_fn_cuMemcpyDtoD_v2 cuMemcpyDtoD;
    ts_cuda_fn_cuCtxSynchronize cuCtxSynchronize;
    ts_cuda_fn_cuDeviceGetAttribute cuDeviceGetAttribute;
    ts_cuda_fn_cuMemGetInfo_v2 cuMemGetInfo;
    ts_cuda_fn_cuMemAllocManaged cuMemAllocManaged;
    ts_cuda_fn_cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRetain;
    ts_cuda_fn_cuCtxSetCurrent cuCtxSetCurrent;
    ts_cuda_fn_cuCtxGetCurrent cuCtxGetCurrent;
    /* true while a stream capture is in progress (nothing moves then) */
    bool (*capturing)(void);
} ts_offload_driver;

/* The configured mode (TRAINSHIM_OFFLOAD), after availability: ON only once
 * a device said it supports host-backed VMM. */
int ts_offload_mode(void);

/* At pool creation, before ts_pool_create: decides availability for dev (one
 * "offload unavailable: <reason>" line when ON cannot be had) and wraps
 * prov's create and release, so a page the device cannot back is backed by
 * host memory (the allocation succeeds instead of failing).  Later, with the
 * pool: ts_offload_pool_created. */
void ts_offload_attach(int dev, const ts_offload_driver *drv, struct ts_page_provider *prov);
void ts_offload_pool_created(int dev, struct ts_pool *pool);

/* The pool answered out of memory after giving back what it held idle: the
 * caller retries the allocation between ts_offload_oom_begin (true when
 * offload may back it with host pages) and ts_offload_oom_end. */
bool ts_offload_oom_begin(int dev);
void ts_offload_oom_end(void);

/* Managed fallback (mode MANAGED): an allocation the pool could not serve;
 * true with *ptr set when cuMemAllocManaged made it (the real free frees it). */
bool ts_offload_managed_alloc(int dev, uint64_t size, uint64_t *ptr);
/* Mode MANAGED: the driver table (ts_offload_attach is for mode ON). */
void ts_offload_managed_attach(const ts_offload_driver *drv);

/* Allocation bookkeeping for tags: every live pooled allocation made while a
 * nonzero tag is in effect on the calling thread (ts_offload_note_free when it
 * is freed). */
extern __thread unsigned ts_offload_thread_tag __attribute__((tls_model("initial-exec")));
void ts_offload_note_tagged_alloc(uint64_t ptr, uint64_t size);
/* On every served allocation: inline, one thread-local load when no tag is set. */
static inline void ts_offload_note_alloc(int dev, uint64_t ptr, uint64_t size)
{
    (void)dev;
    if (__builtin_expect(ts_offload_thread_tag != 0, 0) && ptr)
        ts_offload_note_tagged_alloc(ptr, size);
}
void ts_offload_note_free(uint64_t ptr);

/* Ranges that must never move (NCCL-registered buffers): pinned by start,
 * then known by a key (the registration handle) until unpinned. */
void ts_offload_pin(uint64_t ptr, uint64_t size);
void ts_offload_unpin(uint64_t ptr);
void ts_offload_pin_key(uint64_t ptr, uint64_t key);
void ts_offload_unpin_key(uint64_t key);

/* The gate: the hooks hold it shared around every outermost hooked call
 * (launches, copies, collectives, graph launches...), a page move holds it
 * exclusively, so no work is enqueued between the move's synchronization and
 * its remapping.  enter returns whether it was taken (only once offload is
 * available); leave takes that answer. */
/* True once offload is available: until then a hook's gate is this one
 * load, inline (no call on the hot path). */
extern bool ts_offload_gating;
bool ts_offload_gate_enter(void);
void ts_offload_gate_leave(bool held);

/* Pause and resume (exported as trainshim_pause/trainshim_resume/trainshim_tag
 * by the hooks).  Return 0 on success, -1 when offload is unavailable or a
 * move failed (then nothing was lost: the pages not moved stay where they
 * were). */
int ts_offload_pause(unsigned tag);
int ts_offload_resume(unsigned tag);
/* Sets the calling thread's tag (0: none); returns the previous one. */
unsigned ts_offload_set_tag(unsigned tag);

/* Step-order placement (offload_step.c).  The hooks report what the job's
 * work reaches, in order: ts_offload_touch for a copy's or GEMM's operand
 * ([ptr, ptr+len); len 0: to the end of ptr's block), ts_offload_touch_args
 * for a kernel's parameters (each pointer-sized one that falls in a pooled
 * block counts as that block from the pointer on; param_info answers a
 * parameter's offset and size, nonzero past the last), and
 * ts_offload_sync_seen for a stream or device synchronization the program
 * made, where a step may end.  Each is one load while offload is
 * unavailable; none may be called with the gate held exclusively. */
enum ts_offload_touch_kind { TS_TOUCH_COPY = 1, TS_TOUCH_GEMM = 2, TS_TOUCH_KERNEL = 3, TS_TOUCH_COLL = 4 };
void ts_offload_touch_range(uint64_t ptr, uint64_t len, unsigned kind);
void ts_offload_touch_args_slow(const void *func, void **args,
                                int (*param_info)(const void *func, size_t i, size_t *off, size_t *size));
void ts_offload_sync_seen_slow(void);
static inline void ts_offload_touch(const void *ptr, uint64_t len, unsigned kind)
{
    if (__builtin_expect(__atomic_load_n(&ts_offload_gating, __ATOMIC_RELAXED), 0) && ptr)
        ts_offload_touch_range((uint64_t)(uintptr_t)ptr, len, kind);
}
static inline void ts_offload_touch_args(const void *func, void **args,
                                         int (*param_info)(const void *func, size_t i, size_t *off,
                                                           size_t *size))
{
    if (__builtin_expect(__atomic_load_n(&ts_offload_gating, __ATOMIC_RELAXED), 0) && args)
        ts_offload_touch_args_slow(func, args, param_info);
}
static inline void ts_offload_sync_seen(void)
{
    if (__builtin_expect(__atomic_load_n(&ts_offload_gating, __ATOMIC_RELAXED), 0))
        ts_offload_sync_seen_slow();
}

/* Figures for the report and tests. */
typedef struct ts_offload_stats {
    uint64_t host_bytes, peak_host_bytes; /* host-backed pages now / at most */
    uint64_t oom_host_pages;              /* pages backed by host memory at an OOM */
    uint64_t demoted_pages, promoted_pages;
    uint64_t pauses, resumes, paused_bytes;
    uint64_t failed_moves, managed_allocs;
} ts_offload_stats;
void ts_offload_stats_get(ts_offload_stats *out);
#endif
