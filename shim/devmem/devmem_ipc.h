/* devmem_ipc.h: legacy CUDA IPC (cudaIpcGetMemHandle / OpenMemHandle /
 * CloseMemHandle) on device memory served by trainshim's expandable pool,
 * between processes that both run the shim (shim/devmem/devmem_ipc.c).
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
#ifndef TRAINSHIM_DEVMEM_IPC_H
#define TRAINSHIM_DEVMEM_IPC_H
#include <stdbool.h>
#include <stdint.h>

#include "alloc/alloc.h"

/* ts_ipc_export / ts_ipc_close answer for memory that is not theirs. */
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
