/* cupti_activity.c: the emulated CUPTI activity API (libcupti.so.13):
 * kernel (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL / KERNEL, as
 * CUpti_ActivityKernel10), copy (CUPTI_ACTIVITY_KIND_MEMCPY, as
 * CUpti_ActivityMemcpy6) and memset (CUPTI_ACTIVITY_KIND_MEMSET, as
 * CUpti_ActivityMemset4) records of the emulated driver's executor, which
 * reports each kernel, copy and memset it ran through the activity hook
 * (driver/emu_activity.h, resolved with cuGetProcAddress like every driver
 * entry point).  Records are kept until cuptiActivityFlushAll, which hands
 * them out in buffers the client supplies (one buffer-requested / buffer-
 * completed callback pair per buffer filled), as real CUPTI does at a flush.
 * Asynchronous delivery of full buffers before a flush is not emulated. */
#include <cupti.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/driver_link.h"
#include "driver/emu_activity.h"

/* Records waiting for a flush: both kinds kept in their CUPTI layout. */
union pending_record {
    CUpti_Activity header;
    CUpti_ActivityKernel10 kernel;
    CUpti_ActivityMemcpy6 memcpy;
    CUpti_ActivityMemset4 memset;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static union pending_record *pending;
static size_t npending, pending_cap;
static uint64_t dropped;
static CUpti_BuffersCallbackRequestFunc buffer_requested;
static CUpti_BuffersCallbackCompleteFunc buffer_completed;
static int kernel_enabled, memcpy_enabled, memset_enabled;   /* atomic */
static int hook_installed;                   /* under mu */

#define PENDING_MAX (1u << 20)   /* beyond this, records are dropped (and counted) */

static size_t record_size(CUpti_ActivityKind kind)
{
    size_t sz = kind == CUPTI_ACTIVITY_KIND_MEMCPY   ? sizeof(CUpti_ActivityMemcpy6)
                : kind == CUPTI_ACTIVITY_KIND_MEMSET ? sizeof(CUpti_ActivityMemset4)
                                                     : sizeof(CUpti_ActivityKernel10);
    return (sz + 7) & ~(size_t)7;   /* records are 8-byte aligned in a buffer */
}

static void push(const union pending_record *r)
{
    pthread_mutex_lock(&mu);
    if (npending == pending_cap && pending_cap < PENDING_MAX) {
        size_t cap = pending_cap ? 2 * pending_cap : 1024;
        union pending_record *p = realloc(pending, cap * sizeof *p);
        if (p) { pending = p; pending_cap = cap; }
    }
    if (npending < pending_cap) pending[npending++] = *r;
    else dropped++;
    pthread_mutex_unlock(&mu);
}

/* Called on the driver's worker threads after each kernel or copy. */
static void on_activity(const struct emu_activity *a)
{
    union pending_record r;
    memset(&r, 0, sizeof r);
    if (a->kind == EMU_ACTIVITY_KERNEL) {
        int k = __atomic_load_n(&kernel_enabled, __ATOMIC_RELAXED);
        if (!k) return;
        CUpti_ActivityKernel10 *kr = &r.kernel;
        kr->kind = (CUpti_ActivityKind)k;
        kr->start = a->start_ns;
        kr->end = a->end_ns;
        kr->completed = a->end_ns;
        kr->queued = kr->submitted = CUPTI_TIMESTAMP_UNKNOWN;
        kr->deviceId = (uint32_t)a->device;
        kr->contextId = (uint32_t)a->device + 1;
        kr->streamId = a->stream_id;
        kr->gridX = (int32_t)a->grid[0];
        kr->gridY = (int32_t)a->grid[1];
        kr->gridZ = (int32_t)a->grid[2];
        kr->blockX = (int32_t)a->block[0];
        kr->blockY = (int32_t)a->block[1];
        kr->blockZ = (int32_t)a->block[2];
        kr->dynamicSharedMemory = (int32_t)a->shared_bytes;
        kr->correlationId = a->correlation_id;
        kr->gridId = a->correlation_id;
        kr->name = a->name;
    } else if (a->kind == EMU_ACTIVITY_MEMCPY) {
        if (!__atomic_load_n(&memcpy_enabled, __ATOMIC_RELAXED)) return;
        CUpti_ActivityMemcpy6 *mr = &r.memcpy;
        mr->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        mr->copyKind = (uint8_t)a->copy_kind;
        mr->srcKind = (uint8_t)a->src_kind;
        mr->dstKind = (uint8_t)a->dst_kind;
        mr->bytes = a->bytes;
        mr->start = a->start_ns;
        mr->end = a->end_ns;
        mr->deviceId = (uint32_t)a->device;
        mr->contextId = (uint32_t)a->device + 1;
        mr->streamId = a->stream_id;
        mr->correlationId = a->correlation_id;
        mr->copyCount = 1;
    } else if (a->kind == EMU_ACTIVITY_MEMSET) {
        if (!__atomic_load_n(&memset_enabled, __ATOMIC_RELAXED)) return;
        CUpti_ActivityMemset4 *sr = &r.memset;
        sr->kind = CUPTI_ACTIVITY_KIND_MEMSET;
        sr->value = a->value;
        sr->bytes = a->bytes;
        sr->start = a->start_ns;
        sr->end = a->end_ns;
        sr->deviceId = (uint32_t)a->device;
        sr->contextId = (uint32_t)a->device + 1;
        sr->streamId = a->stream_id;
        sr->correlationId = a->correlation_id;
        sr->memoryKind = (uint16_t)a->memory_kind;
    } else {
        return;
    }
    push(&r);
}

/* Installs the hook once; CUPTI_ERROR_NOT_INITIALIZED if the driver has none. */
static CUptiResult install_hook(void)
{
    CUptiResult rc = CUPTI_SUCCESS;
    pthread_mutex_lock(&mu);
    if (!hook_installed) {
        emu_activity_fn (*set)(emu_activity_fn) =
            (emu_activity_fn (*)(emu_activity_fn))emu_driver_proc("emuSetActivityHook");
        if (set) { set(on_activity); hook_installed = 1; }
        else rc = CUPTI_ERROR_NOT_INITIALIZED;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                                           CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
    if (!funcBufferRequested || !funcBufferCompleted) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&mu);
    buffer_requested = funcBufferRequested;
    buffer_completed = funcBufferCompleted;
    pthread_mutex_unlock(&mu);
    return CUPTI_SUCCESS;
}

static CUptiResult set_kind(CUpti_ActivityKind kind, int on)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        /* the record carries the kind that was enabled */
        __atomic_store_n(&kernel_enabled, on ? (int)kind : 0, __ATOMIC_RELAXED);
        break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        __atomic_store_n(&memcpy_enabled, on, __ATOMIC_RELAXED);
        break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
        __atomic_store_n(&memset_enabled, on, __ATOMIC_RELAXED);
        break;
    default:
        return CUPTI_ERROR_NOT_SUPPORTED;
    }
    return on ? install_hook() : CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) { return set_kind(kind, 1); }
CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) { return set_kind(kind, 0); }

/* Delivers every pending record: buffer after buffer, each filled as far as
 * it goes.  Without registered callbacks the records stay pending. */
CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    pthread_mutex_lock(&mu);
    CUpti_BuffersCallbackRequestFunc req = buffer_requested;
    CUpti_BuffersCallbackCompleteFunc done = buffer_completed;
    union pending_record *recs = pending;
    size_t n = npending;
    pending = NULL;
    npending = pending_cap = 0;
    if (!req || !done) { pending = recs; npending = pending_cap = n; n = 0; recs = NULL; }
    pthread_mutex_unlock(&mu);
    size_t i = 0;
    CUptiResult rc = CUPTI_SUCCESS;
    while (i < n) {
        uint8_t *buf = NULL;
        size_t size = 0, max_records = 0;
        req(&buf, &size, &max_records);
        if (!buf || size < record_size(recs[i].header.kind)) {
            /* the client gave no room: the rest is dropped, as CUPTI does */
            pthread_mutex_lock(&mu);
            dropped += n - i;
            pthread_mutex_unlock(&mu);
            if (buf) done(NULL, 0, buf, size, 0);
            rc = CUPTI_ERROR_OUT_OF_MEMORY;
            break;
        }
        size_t used = 0, count = 0;
        while (i < n && (max_records == 0 || count < max_records)) {
            size_t rs = record_size(recs[i].header.kind);
            if (used + rs > size) break;
            memset(buf + used, 0, rs);
            CUpti_ActivityKind k = recs[i].header.kind;
            memcpy(buf + used, &recs[i],
                   k == CUPTI_ACTIVITY_KIND_MEMCPY   ? sizeof(CUpti_ActivityMemcpy6)
                   : k == CUPTI_ACTIVITY_KIND_MEMSET ? sizeof(CUpti_ActivityMemset4)
                                                     : sizeof(CUpti_ActivityKernel10));
            used += rs;
            count++;
            i++;
        }
        done(NULL, 0, buf, size, used);
    }
    free(recs);
    return rc;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes, CUpti_Activity **record)
{
    if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
    size_t off = 0;
    if (*record) {
        uint8_t *cur = (uint8_t *)*record;
        if (cur < buffer || cur >= buffer + validBufferSizeBytes) return CUPTI_ERROR_INVALID_PARAMETER;
        off = (size_t)(cur - buffer) + record_size((*record)->kind);
    }
    if (off >= validBufferSizeBytes || validBufferSizeBytes - off < sizeof(CUpti_Activity)) {
        *record = NULL;
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    }
    CUpti_Activity *next = (CUpti_Activity *)(buffer + off);
    if (validBufferSizeBytes - off < record_size(next->kind)) {
        *record = NULL;
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    }
    *record = next;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId, size_t *dropped_out)
{
    (void)context;
    (void)streamId;
    if (!dropped_out) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&mu);
    *dropped_out = (size_t)dropped;
    dropped = 0;
    pthread_mutex_unlock(&mu);
    return CUPTI_SUCCESS;
}

/* Same clock as the driver's activity times (CLOCK_MONOTONIC ns). */
CUptiResult cuptiGetTimestamp(uint64_t *timestamp)
{
    if (!timestamp) return CUPTI_ERROR_INVALID_PARAMETER;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *timestamp = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    return CUPTI_SUCCESS;
}
