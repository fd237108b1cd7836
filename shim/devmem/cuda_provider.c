/* cuda_provider.c: the page provider over the CUDA driver's virtual memory API
 * (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap,
 * cuMemRelease), plain cuMemAlloc/cuMemFree for the caching and off modes,
 * and events as fences (kept in a free list: no cuEventCreate per fence).
 * The function table comes from the caller; nothing is resolved here. */
#include "devmem/cuda_provider.h"

#include <stdlib.h>
#include <string.h>

bool ts_cuda_pages_exportable;

struct ts_cuda_provider {
    ts_cuda_fns fn;
    ts_page_provider table;
    int device;
    CUmemAllocationProp prop; /* requestedHandleTypes: POSIX fd while the driver takes it */
    CUevent *spare;           /* released events, reused by fence_record */
    size_t nspare, capspare;
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

static int c_seg_alloc(void *ctx, uint64_t size, uint64_t *ptr)
{
    ts_cuda_provider *c = ctx;
    CUdeviceptr p = 0;
    if (!c->fn.cuMemAlloc)
        return TS_PROV_ERROR;
    int rc = status(c->fn.cuMemAlloc(&p, size));
    *ptr = p;
    return rc;
}

static int c_seg_free(void *ctx, uint64_t ptr)
{
    ts_cuda_provider *c = ctx;
    return c->fn.cuMemFree ? status(c->fn.cuMemFree(ptr)) : TS_PROV_ERROR;
}

static int c_fence_record(void *ctx, uint64_t stream, uint64_t *fence)
{
    ts_cuda_provider *c = ctx;
    CUevent e = NULL;
    if (c->nspare)
        e = c->spare[--c->nspare];
    else if (c->fn.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return TS_PROV_ERROR;
    CUresult r = c->fn.cuEventRecord(e, (CUstream)(uintptr_t)stream);
    if (r != CUDA_SUCCESS) {
        c->fn.cuEventDestroy(e);
        return status(r);
    }
    *fence = (uint64_t)(uintptr_t)e;
    return TS_PROV_OK;
}

static int c_fence_query(void *ctx, uint64_t fence)
{
    CUresult r = ((ts_cuda_provider *)ctx)->fn.cuEventQuery((CUevent)(uintptr_t)fence);
    return r == CUDA_SUCCESS ? TS_FENCE_DONE : r == CUDA_ERROR_NOT_READY ? TS_FENCE_PENDING : -1;
}

static int c_fence_wait(void *ctx, uint64_t fence)
{
    return status(((ts_cuda_provider *)ctx)->fn.cuEventSynchronize((CUevent)(uintptr_t)fence));
}

static void c_fence_release(void *ctx, uint64_t fence)
{
    ts_cuda_provider *c = ctx;
    CUevent e = (CUevent)(uintptr_t)fence;
    if (c->nspare == c->capspare) {
        size_t n = c->capspare ? c->capspare * 2 : 64;
        CUevent *s = realloc(c->spare, n * sizeof *s);
        if (!s) {
            c->fn.cuEventDestroy(e);
            return;
        }
        c->spare = s;
        c->capspare = n;
    }
    c->spare[c->nspare++] = e;
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
    for (size_t i = 0; i < c->nspare; i++)
        c->fn.cuEventDestroy(c->spare[i]);
    free(c->spare);
    free(c);
}
