/* sim_provider.h: the page provider of `trainshim replay` and of the
 * allocator's unit tests, over invented addresses (sim_provider.c). */
#ifndef TRAINSHIM_SIM_PROVIDER_H
#define TRAINSHIM_SIM_PROVIDER_H
#include <stdint.h>

#include "alloc/alloc_provider.h"

/* ---- the fake provider --------------------------------------------------------
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
