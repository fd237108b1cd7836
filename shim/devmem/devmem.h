/* devmem.h: the program's device allocations served from trainshim's
 * allocator (shim/alloc/alloc.h), one pool per device created lazily on the first
 * allocation made with the device's context current.
 *
 * The hooks (hooks/devmem_hooks.c) call these inside ts_enter()/ts_leave().
 * The contract that keeps the promise ("never change what the program
 * computes, never take the job down"):
 *   - ts_dev_alloc answers TS_DEV_SERVED (pointer from the pool) or
 *     TS_DEV_PASS: the hook then makes the real call, which gives the program
 *     exactly the real answer (size 0, no context, capture, pool OOM, shim
 *     failure, TRAINSHIM_ALLOC=off ...).  Only when TRAINSHIM_MEMORY_LIMIT
 *     caps the pool is a pool OOM answered TS_DEV_OOM (the hook returns the
 *     real OOM code without asking the driver).
 *   - ts_dev_free answers TS_DEV_FREED when the pointer was the pool's,
 *     TS_DEV_NOT_OURS when the hook must pass it to the real free (pointers
 *     from before the shim, from other paths: the real answer), and
 *     TS_DEV_INVALID for a pointer into the pool that is no live block.
 *   - Pools survive ts_fallback_passthrough: frees of pooled pointers keep
 *     reaching the pool (ts_dev_pooling()). */
#ifndef TRAINSHIM_DEVMEM_H
#define TRAINSHIM_DEVMEM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* TS_DEV_NO_CONTEXT: no context is current.  A runtime allocation creates
 * the primary context itself, so its hook does that first and asks again
 * (the pool, and TRAINSHIM_MEMORY_LIMIT, then cover the first allocation
 * too); a driver allocation passes (the real call refuses it). */
enum ts_dev_answer { TS_DEV_PASS = 0, TS_DEV_SERVED = 1, TS_DEV_OOM = 2, TS_DEV_NO_CONTEXT = 3 };

/* async: cudaMallocAsync semantics (the block may come from a stream-ordered
 * free on the same stream).  stream: the real stream handle (0 legacy,
 * 0x2 per-thread). */
/* *dev: the device of the calling thread's context, asked once here so that
 * the hook's event need not ask again (-1 when not asked or none).  Only
 * the hooks' active path calls it (ts_active() was just true).  runtime: a
 * runtime API call of the program, whose current device may be the answer
 * kept per thread (ts_current_device_kept); the driver API's always asks. */
int ts_dev_alloc(uint64_t size, uint64_t stream, bool async, bool runtime, uint64_t *ptr, int *dev);
/* async: cudaFreeAsync on `stream` (reusable at once on that stream, on others
 * after a fence); otherwise cudaFree semantics (reusable after fences on every
 * stream the process uses).  TS_DEV_INVALID: inside the pool's memory but not
 * a live block (double free, interior pointer): the hook answers the real
 * "invalid value" code itself. */
enum ts_dev_free_answer { TS_DEV_NOT_OURS = 0, TS_DEV_FREED = 1, TS_DEV_INVALID = 2 };
/* *dev: the device of the pool that owns ptr (FREED, INVALID), else -1.
 * active: ts_active() as the hook found it (a free hook asks once). */
int ts_dev_free(uint64_t ptr, uint64_t stream, bool async, bool active, int *dev);
/* The program made pool the current pool of dev (cudaDeviceSetMemPool
 * succeeded): while it is not the default one, dev's stream-ordered
 * allocations pass through to it.  A destroyed pool that was current leaves
 * the default current, as the driver does. */
void ts_dev_current_pool_set(int dev, uint64_t pool);
void ts_dev_mempool_destroyed(uint64_t pool);
/* True once any pool exists (free hooks must look even when inactive). */
bool ts_dev_pooling(void);
/* The live pooled block starting at ptr: its base and size. */
bool ts_dev_lookup(uint64_t ptr, uint64_t *base, uint64_t *size);
/* The live pooled block holding ptr anywhere inside it, as the driver
 * answers for an allocation of its own (cuMemGetAddressRange, the pointer
 * range attributes): its base and the bytes asked for. */
bool ts_dev_range(uint64_t ptr, uint64_t *base, uint64_t *size);
/* Bytes the pools of dev hold without a live block under them (mapped idle
 * pages, cached segments' free space): added to the driver's free memory. */
uint64_t ts_dev_idle_bytes(int dev);
/* Stream bookkeeping for the cudaFree fences. */
void ts_dev_stream_created(uint64_t stream);
/* Device `accessor` may now access device `owner`'s memory (cudaDeviceEnablePeerAccess
 * succeeded): the owner's pool grants it access on its mapped pages and on
 * every page it maps from now on (VMM pages need cuMemSetAccess per device). */
void ts_dev_peer_enabled(int owner, int accessor);
void ts_dev_stream_destroying(uint64_t stream);
/* Captures begun and ended through the runtime (cudaStreamBeginCapture /
 * EndCapture): while any is in progress synchronous allocations pass through. */
void ts_dev_capture_begin(void);
void ts_dev_capture_end(void);
/* cudaDeviceReset or cuDevicePrimaryCtxReset: the pool of dev releases
 * everything (its pointers die with the context, as without the shim). */
void ts_dev_reset(int dev);
/* The pool's OOM report (shim/devmem/devmem_oom.c): one report on stderr per
 * allocation the program sees fail. */
void ts_dev_oom_report(int dev, uint64_t requested);
/* Stats of dev's pool; false if none. */
struct ts_alloc_stats;
bool ts_dev_stats(int dev, struct ts_alloc_stats *out);
/* enum ts_alloc_mode of dev's pool; -1 if none. */
int ts_dev_pool_mode(int dev);
/* The device's default memory pool (the driver's handle, which the program
 * gets from cudaDeviceGetDefaultMemPool and the like): what it would hold
 * without the shim is what trainshim's pool holds for the device.  Pools the
 * program creates itself are the driver's alone (no answer here).
 *   ts_dev_mempool_attr: the used / reserved current and high attributes
 *     (CUmemPool_attribute values) of a default pool trainshim serves: true
 *     and *value, else false (the driver's answer stands);
 *   ts_dev_mempool_attr_set: after the driver accepted a set: a *_HIGH
 *     attribute set (to 0) restarts trainshim's peak from the current value;
 *   ts_dev_mempool_trim: after the driver's cudaMemPoolTrimTo: trainshim's
 *     pool gives its idle pages back when it holds more than `keep`. */
bool ts_dev_mempool_attr(uint64_t mempool, int attr, uint64_t *value);
void ts_dev_mempool_attr_set(uint64_t mempool, int attr);
void ts_dev_mempool_trim(uint64_t mempool, uint64_t keep);
/* Logs how PyTorch's allocator backend was found and left at load time
 * (devmem_torch.c); when the log opens (log/log.c). */
void ts_dev_log_torch_backend(void);
/* The pool's record of its last OOM; false if none. */
struct ts_oom_report;
bool ts_dev_last_oom(int dev, struct ts_oom_report *out);

/* ---- legacy CUDA IPC (cudaIpcGetMemHandle / OpenMemHandle /
 * CloseMemHandle) on device memory served by trainshim's expandable pool,
 * between processes that both run the shim (devmem_ipc.c).
 *
 * A pooled block lives in 2 MiB VMM pages, which the driver's legacy IPC
 * refuses (and which would name the wrong memory anyway).  The exporter hands
 * out a 64-byte handle of its own (magic, its pid, the number of a small memfd
 * listing the block's pages as exported POSIX fds, an export id); the
 * importer takes those fds with pidfd_getfd, imports the pages, maps them and
 * returns the block's first byte.  A handle without trainshim's magic is the
 * driver's and passes through both ways.
 *
 * Semantics (the README's text is in the IPC section of the report):
 *   - export: a live block allocated by cudaMalloc/cuMemAlloc (any pointer
 *     inside it names the whole block, as for cudaMalloc memory); blocks from
 *     cudaMallocAsync are refused with cudaErrorInvalidValue, as the driver
 *     refuses stream-ordered memory; so is everything when the pages were
 *     created without the POSIX handle type (driver without it).
 *   - the handle is valid while the block lives: once the exporter frees it,
 *     opening fails with cudaErrorInvalidResourceHandle; a pointer opened
 *     before the free must not be used after it (CUDA: undefined behaviour).
 *   - open: flags must be cudaIpcMemLazyEnablePeerAccess (else
 *     cudaErrorInvalidValue); in the exporting process itself it fails with
 *     cudaErrorDeviceUninitialized; opening the same handle again returns the
 *     same pointer and counts a reference; the mapping is given read-write
 *     access for the calling thread's current device.
 *   - close: the last reference waits for the device (cuCtxSynchronize: the
 *     unmap must not pull pages from under queued work), unmaps and releases. */
/* ts_ipc_export / ts_ipc_close answer for memory that is not theirs (the
 * allocator's TS_SEG_NOT_OURS). */
#define TS_IPC_NOT_OURS (-1)

/* Exports the pooled block holding ptr into handle (64 bytes, a
 * cudaIpcMemHandle_t).  Returns TS_IPC_NOT_OURS when ptr is outside every
 * expandable pool, else a cudaError_t (cudaSuccess or the refusal). */
int ts_ipc_export(uint64_t ptr, void *handle);
/* True if handle (64 bytes) carries trainshim's magic. */
bool ts_ipc_handle_is_ours(const void *handle);
/* Opens one of our handles; returns a cudaError_t. */
int ts_ipc_open(const void *handle, unsigned flags, void **ptr);
/* Closes a pointer from ts_ipc_open: a cudaError_t, or TS_IPC_NOT_OURS. */
int ts_ipc_close(void *ptr);
#endif
