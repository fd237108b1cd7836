/* cuda_provider.c: the page provider over the CUDA driver's virtual memory API
 * (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap,
 * cuMemRelease), plain cuMemAlloc/cuMemFree for the caching and off modes,
 * and events as fences (kept in a free list: no cuEventCreate per fence).
 * The function table comes from the caller; nothing is resolved here.
 *
 * Contexts.  The program may act on this device while another device is
 * current (cudaMallocAsync on this device's stream, cudaFree of its pointer).
 * The calls that act in the current context get the right one:
 *   - cuMemAlloc/cuMemFree, and a fence on a default stream (0, legacy,
 *     per-thread: the current context's), run with this device's context,
 *     its primary one pushed when another device's is current;
 *   - a fence on a created stream is an event of that stream's context
 *     ("hEvent and hStream must be from the same context"), which may be
 *     another device's (a free ordered on another device's stream).
 * Each spare event remembers its context; a fence takes one of its own. */
#include "devmem/cuda_provider.h"

#include <stdlib.h>
#include <string.h>

#include "core/cuda_real.h" /* ts_stream_is_default: no entry point resolved here */

bool ts_cuda_pages_exportable;

/* A fence: an event and the context it was created in (the pool holds a
 * pointer to it). */
struct c_fence {
    CUevent ev;
    CUcontext ctx;
    struct c_fence *next; /* spare or unused list */
};
#define FENCE_SLAB 64
struct c_slab {
    struct c_slab *next;
    struct c_fence f[FENCE_SLAB];
};

struct ts_cuda_provider {
    ts_cuda_fns fn;
    ts_page_provider table;
    int device;
    CUmemAllocationProp prop; /* requestedHandleTypes: POSIX fd while the driver takes it */
    CUcontext primary;        /* the device's primary context, retained when first pushed */
    struct c_fence *spare;    /* released fences, event kept (any context) */
    struct c_fence *unused;   /* slots without an event */
    struct c_slab *slabs;
};

static int status(CUresult r)
{
    return r == CUDA_SUCCESS ? TS_PROV_OK : r == CUDA_ERROR_OUT_OF_MEMORY ? TS_PROV_OOM : TS_PROV_ERROR;
}

static int c_gran(void *ctx, uint64_t *bytes)
{
    ts_cuda_provider *c = ctx;
    size_t g = 0;
    CUresult r = c->fn.cuMemGetAllocationGranularity(&g, &c->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS && c->prop.requestedHandleTypes) {
        c->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE; /* not exportable here */
        r = c->fn.cuMemGetAllocationGranularity(&g, &c->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    }
    *bytes = g;
    return status(r);
}

static int c_reserve(void *ctx, uint64_t size, uint64_t *va)
{
    ts_cuda_provider *c = ctx;
    CUdeviceptr p = 0;
    int rc = status(c->fn.cuMemAddressReserve(&p, size, 0, 0, 0));
    *va = p;
    return rc;
}

static int c_unreserve(void *ctx, uint64_t va, uint64_t size)
{
    return status(((ts_cuda_provider *)ctx)->fn.cuMemAddressFree(va, size));
}

/* Pages are created exportable as POSIX fds (legacy IPC on pooled memory,
 * shim/devmem/devmem_ipc.c) while the driver accepts it: a driver that refuses the
 * handle type loses it for good; an out-of-memory answer is retried once
 * without it (that page cannot be exported, the allocation still succeeds,
 * as it would without the shim). */
static int c_create(void *ctx, uint64_t size, uint64_t *handle)
{
    ts_cuda_provider *c = ctx;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = c->fn.cuMemCreate(&h, size, &c->prop, 0);
    if (r != CUDA_SUCCESS && c->prop.requestedHandleTypes) {
        CUmemAllocationProp plain = c->prop;
        plain.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
        if (r != CUDA_ERROR_OUT_OF_MEMORY)
            c->prop = plain;
        h = 0;
        r = c->fn.cuMemCreate(&h, size, &plain, 0);
    }
    *handle = h;
    return status(r);
}

static int c_release(void *ctx, uint64_t handle)
{
    return status(((ts_cuda_provider *)ctx)->fn.cuMemRelease(handle));
}

static int c_map(void *ctx, uint64_t va, uint64_t size, uint64_t handle)
{
    return status(((ts_cuda_provider *)ctx)->fn.cuMemMap(va, size, 0, handle, 0));
}

static int c_unmap(void *ctx, uint64_t va, uint64_t size)
{
    return status(((ts_cuda_provider *)ctx)->fn.cuMemUnmap(va, size));
}

static int c_set_access(void *ctx, uint64_t va, uint64_t size)
{
    ts_cuda_provider *c = ctx;
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = c->device;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return status(c->fn.cuMemSetAccess(va, size, &d, 1));
}

/* This device's context current for a call that acts in the current one:
 * nothing when it is (or when the caller gave no context entry points),
 * else its primary context pushed (*pushed; device_leave pops it). */
static int device_enter(ts_cuda_provider *c, bool *pushed)
{
    *pushed = false;
    CUdevice d = -1;
    if (!c->fn.cuCtxGetDevice || !c->fn.cuCtxPushCurrent || !c->fn.cuCtxPopCurrent
        || !c->fn.cuDevicePrimaryCtxRetain)
        return TS_PROV_OK;
    if (c->fn.cuCtxGetDevice(&d) == CUDA_SUCCESS && d == c->device)
        return TS_PROV_OK;
    if (!c->primary && c->fn.cuDevicePrimaryCtxRetain(&c->primary, c->device) != CUDA_SUCCESS) {
        c->primary = NULL;
        return TS_PROV_ERROR;
    }
    if (c->fn.cuCtxPushCurrent(c->primary) != CUDA_SUCCESS)
        return TS_PROV_ERROR;
    *pushed = true;
    return TS_PROV_OK;
}

static void device_leave(ts_cuda_provider *c, bool pushed)
{
    CUcontext popped;
    if (pushed)
        c->fn.cuCtxPopCurrent(&popped);
}

static int c_seg_alloc(void *ctx, uint64_t size, uint64_t *ptr)
{
    ts_cuda_provider *c = ctx;
    CUdeviceptr p = 0;
    bool pushed;
    if (!c->fn.cuMemAlloc)
        return TS_PROV_ERROR;
    int rc = device_enter(c, &pushed);
    if (rc)
        return rc;
    rc = status(c->fn.cuMemAlloc(&p, size));
    device_leave(c, pushed);
    *ptr = p;
    return rc;
}

static int c_seg_free(void *ctx, uint64_t ptr)
{
    ts_cuda_provider *c = ctx;
    bool pushed;
    if (!c->fn.cuMemFree)
        return TS_PROV_ERROR;
    int rc = device_enter(c, &pushed);
    if (rc)
        return rc;
    rc = status(c->fn.cuMemFree(ptr));
    device_leave(c, pushed);
    return rc;
}

/* The context a fence on stream must be created and recorded in, made
 * current (*pushed when it had to be pushed); *in is that context. */
static int stream_enter(ts_cuda_provider *c, uint64_t stream, CUcontext *in, bool *pushed)
{
    *pushed = false;
    *in = NULL;
    if (ts_stream_is_default(stream) || !c->fn.cuStreamGetCtx) {
        int rc = device_enter(c, pushed);
        if (rc)
            return rc;
        if (*pushed)
            *in = c->primary;
        else if (c->fn.cuCtxGetCurrent && c->fn.cuCtxGetCurrent(in) != CUDA_SUCCESS)
            *in = NULL;
        return TS_PROV_OK;
    }
    CUcontext want = NULL, cur = NULL;
    if (c->fn.cuCtxGetCurrent && c->fn.cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
        cur = NULL;
    /* a stream the driver names no context for (a green context's, say):
     * the current one, as the record would have before */
    if (c->fn.cuStreamGetCtx((CUstream)(uintptr_t)stream, &want) != CUDA_SUCCESS || !want)
        want = cur;
    *in = want;
    if (want == cur)
        return TS_PROV_OK;
    if (!c->fn.cuCtxPushCurrent || !c->fn.cuCtxPopCurrent || c->fn.cuCtxPushCurrent(want) != CUDA_SUCCESS)
        return TS_PROV_ERROR;
    *pushed = true;
    return TS_PROV_OK;
}

/* A spare fence of context in, else a new one (its event created in the
 * current context, which is in). */
static struct c_fence *fence_take(ts_cuda_provider *c, CUcontext in)
{
    for (struct c_fence **pp = &c->spare; *pp; pp = &(*pp)->next)
        if ((*pp)->ctx == in) {
            struct c_fence *f = *pp;
            *pp = f->next;
            return f;
        }
    if (!c->unused) {
        struct c_slab *s = calloc(1, sizeof *s);
        if (!s)
            return NULL;
        s->next = c->slabs;
        c->slabs = s;
        for (int i = 0; i < FENCE_SLAB; i++) {
            s->f[i].next = c->unused;
            c->unused = &s->f[i];
        }
    }
    struct c_fence *f = c->unused;
    if (c->fn.cuEventCreate(&f->ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return NULL;
    c->unused = f->next;
    f->ctx = in;
    return f;
}

static int c_fence_record(void *ctx, uint64_t stream, uint64_t *fence)
{
    ts_cuda_provider *c = ctx;
    CUcontext in;
    bool pushed;
    int rc = stream_enter(c, stream, &in, &pushed);
    if (rc)
        return rc;
    struct c_fence *f = fence_take(c, in);
    rc = f ? status(c->fn.cuEventRecord(f->ev, (CUstream)(uintptr_t)stream)) : TS_PROV_ERROR;
    device_leave(c, pushed);
    if (rc) {
        if (f) {
            c->fn.cuEventDestroy(f->ev);
            f->next = c->unused;
            c->unused = f;
        }
        return rc;
    }
    *fence = (uint64_t)(uintptr_t)f;
    return TS_PROV_OK;
}

static int c_fence_query(void *ctx, uint64_t fence)
{
    CUevent e = ((struct c_fence *)(uintptr_t)fence)->ev;
    CUresult r = ((ts_cuda_provider *)ctx)->fn.cuEventQuery(e);
    return r == CUDA_SUCCESS ? TS_FENCE_DONE : r == CUDA_ERROR_NOT_READY ? TS_FENCE_PENDING : -1;
}

static int c_fence_wait(void *ctx, uint64_t fence)
{
    CUevent e = ((struct c_fence *)(uintptr_t)fence)->ev;
    return status(((ts_cuda_provider *)ctx)->fn.cuEventSynchronize(e));
}

static void c_fence_release(void *ctx, uint64_t fence)
{
    ts_cuda_provider *c = ctx;
    struct c_fence *f = (struct c_fence *)(uintptr_t)fence;
    f->next = c->spare;
    c->spare = f;
}

ts_cuda_provider *ts_cuda_provider_create(const ts_cuda_fns *fns, int device)
{
    if (!fns->cuMemAddressReserve || !fns->cuMemAddressFree || !fns->cuMemCreate || !fns->cuMemRelease
        || !fns->cuMemMap || !fns->cuMemUnmap || !fns->cuMemSetAccess || !fns->cuMemGetAllocationGranularity
        || !fns->cuEventCreate || !fns->cuEventRecord || !fns->cuEventQuery || !fns->cuEventSynchronize
        || !fns->cuEventDestroy)
        return NULL;
    ts_cuda_provider *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fn = *fns;
    c->device = device;
    c->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    c->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    c->prop.location.id = device;
    if (ts_cuda_pages_exportable)
        c->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    c->table = (ts_page_provider){
        .ctx = c,
        .granularity = c_gran,
        .reserve = c_reserve,
        .unreserve = c_unreserve,
        .create = c_create,
        .release = c_release,
        .map = c_map,
        .unmap = c_unmap,
        .set_access = c_set_access,
        .seg_alloc = c_seg_alloc,
        .seg_free = c_seg_free,
        .fence_record = c_fence_record,
        .fence_query = c_fence_query,
        .fence_wait = c_fence_wait,
        .fence_release = c_fence_release,
    };
    return c;
}

const ts_page_provider *ts_cuda_provider_table(ts_cuda_provider *c) { return &c->table; }

void ts_cuda_provider_destroy(ts_cuda_provider *c)
{
    if (!c)
        return;
    for (struct c_fence *f = c->spare; f; f = f->next)
        c->fn.cuEventDestroy(f->ev);
    while (c->slabs) {
        struct c_slab *s = c->slabs;
        c->slabs = s->next;
        free(s);
    }
    if (c->primary && c->fn.cuDevicePrimaryCtxRelease) {
        c->fn.cuDevicePrimaryCtxRelease(c->device);
        ts_streams_destroyed(); /* the last retain's release destroys the context */
    }
    free(c);
}
