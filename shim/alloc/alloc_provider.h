/* alloc_provider.h: what the device allocator needs from below, as function
 * pointers, so the same pool runs over the CUDA driver's VMM API
 * (shim/devmem/cuda_provider.c), over a fake in host memory (tools/replay/sim_provider.c, for
 * unit tests, replay without the emulator and the benchmark), or over anything
 * else.  Every operation returns TS_PROV_OK, TS_PROV_OOM (physical memory
 * exhausted: the pool may release idle memory and retry) or TS_PROV_ERROR.
 *
 * Addresses and handles are uint64_t (CUdeviceptr, CUmemGenericAllocationHandle,
 * CUevent cast to an integer).  A provider is not required to be thread-safe:
 * the pool calls it under its own lock. */
#ifndef TRAINSHIM_ALLOC_PROVIDER_H
#define TRAINSHIM_ALLOC_PROVIDER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { TS_PROV_OK = 0, TS_PROV_OOM = 1, TS_PROV_ERROR = 2 };
/* fence_query answers */
enum { TS_FENCE_DONE = 0, TS_FENCE_PENDING = 1 };

typedef struct ts_page_provider {
    void *ctx;
    /* Page size for map/unmap and physical handles (cuMemGetAllocationGranularity). */
    int (*granularity)(void *ctx, uint64_t *bytes);
    /* Virtual range: reserve once, free at pool destruction. */
    int (*reserve)(void *ctx, uint64_t size, uint64_t *va);
    int (*unreserve)(void *ctx, uint64_t va, uint64_t size);
    /* Physical memory: one handle per page of `size` bytes (a multiple of the
     * granularity).  release may be called while still mapped (CUDA allows it);
     * the pool always unmaps first. */
    int (*create)(void *ctx, uint64_t size, uint64_t *handle);
    int (*release)(void *ctx, uint64_t handle);
    /* map/unmap one whole handle at va; set_access makes [va, va+size) (any
     * number of adjacent mappings) readable and writable by the device. */
    int (*map)(void *ctx, uint64_t va, uint64_t size, uint64_t handle);
    int (*unmap)(void *ctx, uint64_t va, uint64_t size);
    int (*set_access)(void *ctx, uint64_t va, uint64_t size);
    /* Plain device allocation (cuMemAlloc / cuMemFree) for the caching and off
     * modes.  May be NULL when only the expandable mode is used. */
    int (*seg_alloc)(void *ctx, uint64_t size, uint64_t *ptr);
    int (*seg_free)(void *ctx, uint64_t ptr);
    /* Fences: record a point on a stream (cuEventRecord), ask whether the work
     * before it finished (returns TS_FENCE_DONE, TS_FENCE_PENDING or a
     * negative error), wait for it, and give it back.  The pool never calls
     * them for a stream it was told is capturing. */
    int (*fence_record)(void *ctx, uint64_t stream, uint64_t *fence);
    int (*fence_query)(void *ctx, uint64_t fence);
    int (*fence_wait)(void *ctx, uint64_t fence);
    void (*fence_release)(void *ctx, uint64_t fence);
    /* Optional (may be NULL): TS_FENCE_DONE when no work queued on the
     * stream so far is unfinished (cuStreamQuery), TS_FENCE_PENDING or a
     * negative error otherwise.  When every registered stream answers DONE
     * the pool declares all frees so far safe without recording a fence:
     * one query per stream instead of record + query (+ wait). */
    int (*stream_idle)(void *ctx, uint64_t stream);
} ts_page_provider;

#endif
