/* replay_offload.c: the device memory limit and host backing of
 * `trainshim replay --device-memory SIZE --offload` (see replay_offload.h). */
#include "replay/replay_offload.h"

#include <stdlib.h>
#include <string.h>

static size_t home(const rp_offload *w, uint64_t h)
{
    return (size_t)(h * 0x9e3779b97f4a7c15ull) & (w->hcap - 1);
}

static size_t slot(const rp_offload *w, uint64_t h)
{
    size_t j = home(w, h);
    while (w->host[j] && w->host[j] != h)
        j = (j + 1) & (w->hcap - 1);
    return j;
}

static bool host_add(rp_offload *w, uint64_t h)
{
    if ((w->hcount + 1) * 2 > w->hcap) {
        size_t cap = w->hcap ? 2 * w->hcap : 1024;
        uint64_t *old = w->host;
        size_t ocap = w->hcap;
        w->host = calloc(cap, sizeof *w->host);
        if (!w->host) {
            w->host = old;
            return false;
        }
        w->hcap = cap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i])
                w->host[slot(w, old[i])] = old[i];
        free(old);
    }
    w->host[slot(w, h)] = h;
    w->hcount++;
    return true;
}

/* Removes h; true if it was host-backed (backward-shift deletion). */
static bool host_remove(rp_offload *w, uint64_t h)
{
    if (!w->hcap || w->host[slot(w, h)] != h)
        return false;
    size_t i = slot(w, h), j = i;
    w->host[i] = 0;
    for (;;) {
        j = (j + 1) & (w->hcap - 1);
        uint64_t k = w->host[j];
        if (!k)
            break;
        if (((j - home(w, k)) & (w->hcap - 1)) >= ((j - i) & (w->hcap - 1))) {
            w->host[i] = k;
            w->host[j] = 0;
            i = j;
        }
    }
    w->hcount--;
    return true;
}

static int w_create(void *ctx, uint64_t size, uint64_t *handle)
{
    rp_offload *w = ctx;
    bool fits = w->device_bytes + size <= w->device_memory;
    if (!fits && !w->offload)
        return TS_PROV_OOM;
    int rc = w->inner.create(w->inner.ctx, size, handle);
    if (rc)
        return rc;
    if (fits) {
        w->device_bytes += size;
        return TS_PROV_OK;
    }
    if (!host_add(w, *handle)) {
        w->inner.release(w->inner.ctx, *handle);
        return TS_PROV_OOM;
    }
    w->host_bytes += size;
    w->host_pages++;
    if (w->host_bytes > w->peak_host_bytes)
        w->peak_host_bytes = w->host_bytes;
    return TS_PROV_OK;
}

static int w_release(void *ctx, uint64_t handle)
{
    rp_offload *w = ctx;
    uint64_t g = 0;
    w->inner.granularity(w->inner.ctx, &g);
    if (host_remove(w, handle))
        w->host_bytes -= g;
    else
        w->device_bytes -= g;
    return w->inner.release(w->inner.ctx, handle);
}

/* The other steps pass through to the inner provider. */
#define FWD(name, sig, args)                                                                                 \
    static int w_##name sig                                                                                  \
    {                                                                                                        \
        rp_offload *w = ctx;                                                                                 \
        return w->inner.name args;                                                                           \
    }
FWD(granularity, (void *ctx, uint64_t *b), (w->inner.ctx, b))
FWD(reserve, (void *ctx, uint64_t s, uint64_t *va), (w->inner.ctx, s, va))
FWD(unreserve, (void *ctx, uint64_t va, uint64_t s), (w->inner.ctx, va, s))
FWD(map, (void *ctx, uint64_t va, uint64_t s, uint64_t h), (w->inner.ctx, va, s, h))
FWD(unmap, (void *ctx, uint64_t va, uint64_t s), (w->inner.ctx, va, s))
FWD(set_access, (void *ctx, uint64_t va, uint64_t s), (w->inner.ctx, va, s))
FWD(seg_alloc, (void *ctx, uint64_t s, uint64_t *p), (w->inner.ctx, s, p))
FWD(seg_free, (void *ctx, uint64_t p), (w->inner.ctx, p))
FWD(fence_record, (void *ctx, uint64_t s, uint64_t *f), (w->inner.ctx, s, f))
FWD(fence_query, (void *ctx, uint64_t f), (w->inner.ctx, f))
FWD(fence_wait, (void *ctx, uint64_t f), (w->inner.ctx, f))
FWD(stream_idle, (void *ctx, uint64_t s), (w->inner.ctx, s))
#undef FWD

static void w_fence_release(void *ctx, uint64_t f)
{
    rp_offload *w = ctx;
    w->inner.fence_release(w->inner.ctx, f);
}

const ts_page_provider *rp_offload_wrap(rp_offload *w, const ts_page_provider *inner, uint64_t device_memory,
                                        bool offload)
{
    memset(w, 0, sizeof *w);
    w->inner = *inner;
    w->device_memory = device_memory;
    w->offload = offload;
#define STEP(name) .name = inner->name ? w_##name : NULL
    w->table = (ts_page_provider){ .ctx = w,
                                   STEP(granularity),
                                   STEP(reserve),
                                   STEP(unreserve),
                                   STEP(create),
                                   STEP(release),
                                   STEP(map),
                                   STEP(unmap),
                                   STEP(set_access),
                                   STEP(seg_alloc),
                                   STEP(seg_free),
                                   STEP(fence_record),
                                   STEP(fence_query),
                                   STEP(fence_wait),
                                   STEP(fence_release),
                                   STEP(stream_idle) };
#undef STEP
    return &w->table;
}

void rp_offload_free(rp_offload *w)
{
    free(w->host);
    w->host = NULL;
}
