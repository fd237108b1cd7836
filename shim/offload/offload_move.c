/* offload_move.c: quiesce-and-swap.  A page keeps its address and changes its
 * physical backing: create the new handle, copy the page into it through a
 * scratch mapping, unmap the old handle, map the new one at the same address,
 * grant access, release the old handle.  Every step that fails undoes the
 * ones before it, so the page ends where it was, with its bytes, and the pool
 * stops moving pages (one warning): the job goes on. */
#include <string.h>

#include "core/core.h"
#include "log/logfmt.h"
#include "offload/offload_internal.h"

static bool scratch_access(struct ts_off_dev *d)
{
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = d->device;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return ts_off.drv.cuMemSetAccess(d->scratch, d->gran, &a, 1) == CUDA_SUCCESS;
}

/* Copies the page at va into handle nh through the scratch mapping. */
static bool copy_into(struct ts_off_dev *d, uint64_t va, uint64_t nh)
{
    const ts_offload_driver *f = &ts_off.drv;
    if (f->cuMemMap(d->scratch, d->gran, 0, nh, 0) != CUDA_SUCCESS)
        return false;
    bool ok = scratch_access(d) && f->cuMemcpyDtoD(d->scratch, va, d->gran) == CUDA_SUCCESS
              && f->cuCtxSynchronize() == CUDA_SUCCESS;
    /* once more if the unmap fails: a scratch range left mapped would keep
     * nh's memory and refuse every later move */
    if (f->cuMemUnmap(d->scratch, d->gran) != CUDA_SUCCESS
        && f->cuMemUnmap(d->scratch, d->gran) != CUDA_SUCCESS) {
        ok = false;
        d->scratch_stuck = true;
    }
    return ok;
}

/* Unmaps the old handle at va and maps nh there; on failure the old one is
 * mapped back.  *lost: even that failed (the page is unmapped). */
static bool swap_at(struct ts_off_dev *d, uint64_t va, uint64_t old, uint64_t nh, bool *lost)
{
    const ts_offload_driver *f = &ts_off.drv;
    *lost = false;
    if (f->cuMemUnmap(va, d->gran) != CUDA_SUCCESS)
        return false;
    if (f->cuMemMap(va, d->gran, 0, nh, 0) == CUDA_SUCCESS) {
        if (d->set_access(d->prov_ctx, va, d->gran) == TS_PROV_OK)
            return true;
        f->cuMemUnmap(va, d->gran);
    }
    /* back to the old handle, which still holds every byte */
    *lost = f->cuMemMap(va, d->gran, 0, old, 0) != CUDA_SUCCESS
            || d->set_access(d->prov_ctx, va, d->gran) != TS_PROV_OK;
    return false;
}

static void release_new(struct ts_off_dev *d, uint64_t nh)
{
    ts_off_host_remove(nh, d->gran);
    ts_off.drv.cuMemRelease(nh);
}

static int failed(struct ts_off_dev *d, const char *step)
{
    __atomic_fetch_add(&ts_off.failed_moves, 1, __ATOMIC_RELAXED);
    if (!d->stopped)
        ts_warn("offload: moving a page of device %d failed (%s); it stays where it was and this device's "
                "pages move no more",
                d->device, step);
    d->stopped = true;
    ts_off_log(TS_OFFLOAD_FAILED, 0, 0, 0);
    return TS_PROV_ERROR;
}

int ts_off_move_page(struct ts_off_dev *d, ts_page_view *v, bool to_host)
{
    if (d->scratch_stuck)
        return failed(d, "the copy range is still mapped");
    uint64_t nh = 0;
    int rc = to_host ? ts_off_host_create(d, v->size, &nh) : d->inner_create(d->prov_ctx, v->size, &nh);
    if (rc == TS_PROV_OOM)
        return TS_PROV_OOM; /* no room there: nothing changed, not a failure */
    if (rc)
        return failed(d, "creating the new backing");
    if (!copy_into(d, v->va, nh)) {
        release_new(d, nh);
        return failed(d, "copying the page");
    }
    bool lost = false;
    if (!swap_at(d, v->va, v->handle, nh, &lost)) {
        release_new(d, nh);
        if (lost)
            ts_fallback_passthrough("offload: a page of device %d could not be mapped back", d->device);
        return failed(d, "remapping the page");
    }
    bool was_host = ts_off_host_remove(v->handle, v->size);
    ts_off.drv.cuMemRelease(v->handle);
    (void)was_host;
    v->handle = nh;
    __atomic_fetch_add(to_host ? &ts_off.demoted_pages : &ts_off.promoted_pages, 1, __ATOMIC_RELAXED);
    return TS_PROV_OK;
}

struct walk_ctx {
    struct ts_off_dev *d;
    int (*fn)(void *arg, struct ts_off_dev *d, ts_page_view *v);
    void *arg;
};

static int walk_one(void *arg, ts_page_view *v)
{
    struct walk_ctx *w = arg;
    return w->fn(w->arg, w->d, v);
}

int ts_off_walk_all(int (*fn)(void *arg, struct ts_off_dev *d, ts_page_view *v), void *arg, bool even_stopped)
{
    const ts_offload_driver *f = &ts_off.drv;
    if (f->capturing && f->capturing())
        return -1; /* memory of a live capture never moves */
    ts_off_gate_close();
    CUcontext saved = NULL;
    if (f->cuCtxGetCurrent)
        f->cuCtxGetCurrent(&saved);
    int rc = 0;
    for (int i = 0; i < TS_OFF_MAX_DEV && !rc; i++) {
        struct ts_off_dev *d = &ts_off.dev[i];
        if (!d->pool || (d->stopped && !even_stopped))
            continue;
        if (!d->ctx && f->cuDevicePrimaryCtxRetain
            && f->cuDevicePrimaryCtxRetain(&d->ctx, d->device) != CUDA_SUCCESS)
            d->ctx = NULL;
        if (d->ctx && f->cuCtxSetCurrent)
            f->cuCtxSetCurrent(d->ctx);
        /* quiesce: no queued work may touch a page while it moves */
        if (f->cuCtxSynchronize() != CUDA_SUCCESS) {
            rc = -1;
            break;
        }
        struct walk_ctx w = { d, fn, arg };
        rc = ts_pool_pages_walk(d->pool, walk_one, &w);
    }
    if (f->cuCtxSetCurrent)
        f->cuCtxSetCurrent(saved);
    ts_off_gate_open();
    return rc;
}
