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

/* ---- the fake provider (tools/replay/sim_provider.c) -------------------------------
 * Host-side bookkeeping only (no memory is touched, addresses are invented),
 * strict like the driver: mapping twice, unmapping a sub-range, releasing an
 * unknown handle... are TS_PROV_ERROR and counted in `misuse`.  Fences
 * complete immediately unless manual_fences is set; then a fence completes
 * when ts_fake_complete_stream() passes its stream (or its sequence). */
typedef struct ts_fake_provider ts_fake_provider;
typedef struct ts_fake_counters {
    uint64_t creates, releases, maps, unmaps, set_access, reserves, unreserves;
    uint64_t seg_allocs, seg_frees, fence_records, fence_queries, fence_waits;
    uint64_t live_handles, mapped_pages, phys_bytes, phys_peak, seg_bytes, live_fences;
    uint64_t misuse;             /* calls real CUDA would reject */
    uint64_t fence_on_capturing; /* fence operations on a stream marked capturing */
} ts_fake_counters;

ts_fake_provider *ts_fake_create(uint64_t capacity, uint64_t granularity);
void ts_fake_destroy(ts_fake_provider *f);
/* The provider table over this fake (pointers stay valid until destroy). */
const ts_page_provider *ts_fake_provider_table(ts_fake_provider *f);
void ts_fake_counters_get(ts_fake_provider *f, ts_fake_counters *out);
/* Fence control. */
void ts_fake_set_manual_fences(ts_fake_provider *f, int manual);
void ts_fake_complete_stream(ts_fake_provider *f, uint64_t stream); /* completes all fences so far */
void ts_fake_set_capturing(ts_fake_provider *f, uint64_t stream, int capturing);
/* fence_wait in manual mode completes the fence: the "device" catches up. */
/* 1 if va lies in a mapped page with access set (usable by the device). */
int ts_fake_mapped(ts_fake_provider *f, uint64_t va);
/* Fences recorded on / completed for a stream so far. */
void ts_fake_stream_progress(ts_fake_provider *f, uint64_t stream, uint64_t *recorded, uint64_t *completed);
/* Fault injection: the Nth next call (1-based) of op fails with rc; 0 disables.
 * op is one of "create", "map", "set_access", "unmap", "reserve", "seg_alloc",
 * "fence_record".  A probability in [0,1] with a seed fails calls at random. */
void ts_fake_fail_nth(ts_fake_provider *f, const char *op, uint64_t nth, int rc);
void ts_fake_fail_random(ts_fake_provider *f, const char *op, double p, uint64_t seed, int rc);

#endif
