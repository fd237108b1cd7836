/* alloc_pool.c: the per-device pool tying segments, blocks, the free index,
 * fences and thread caches together: allocation and free slow paths, the
 * caching and off modes, the OOM path (sync fences, give back idle memory,
 * retry once) and trim. */
#include <stdlib.h>
#include <string.h>
#include "alloc/alloc_internal.h"

#define MiB (1ull << 20)
static int pool_ids;

int ts_pool_mode(const ts_pool *p) { return p->cfg.mode; }

const char *ts_alloc_mode_name(int mode)
{
    return mode == TS_ALLOC_EXPANDABLE ? "expandable"
           : mode == TS_ALLOC_CACHING  ? "caching"
           : mode == TS_ALLOC_OFF      ? "off"
                                       : "?";
}

ts_pool *ts_pool_create(const ts_pool_config *cfg, const ts_page_provider *prov, int *status)
{
    int st = TS_ALLOC_INVALID;
    ts_pool *p = NULL;
    if (!cfg || !prov || cfg->mode < 0 || cfg->mode > TS_ALLOC_OFF || !cfg->capacity)
        goto out;
    if (cfg->mode == TS_ALLOC_EXPANDABLE
            ? !(prov->granularity && prov->reserve && prov->unreserve && prov->create && prov->release
                && prov->map && prov->unmap && prov->set_access)
            : !(prov->seg_alloc && prov->seg_free))
        goto out;
    if (!prov->fence_record || !prov->fence_query || !prov->fence_wait || !prov->fence_release)
        goto out;
    st = TS_ALLOC_ERROR;
    p = aligned_alloc(_Alignof(ts_pool), sizeof *p); /* its shards and epochs are line-aligned */
    if (p)
        memset(p, 0, sizeof *p);
    if (!p || !(p->batches = calloc(TS_MAX_BATCHES, sizeof *p->batches)))
        goto out;
    pthread_mutex_init(&p->lock, NULL);
    p->cfg = *cfg;
    p->prov = *prov;
    p->id = __atomic_fetch_add(&pool_ids, 1, __ATOMIC_RELAXED);
    p->idle_head = p->idle_tail = -1;
    ts_index_init(&p->index[0]);
    ts_index_init(&p->index[1]);
    ts_map_init(&p->map);
    if (cfg->mode == TS_ALLOC_EXPANDABLE) {
        int rc = ts_seg_init_arenas(p);
        if (rc) {
            st = rc == TS_PROV_OOM ? TS_ALLOC_OOM : TS_ALLOC_ERROR;
            ts_pool_destroy(p);
            p = NULL;
            goto out;
        }
    }
    st = TS_ALLOC_OK;
out:
    if (st && p && st != TS_ALLOC_OOM && !p->batches) {
        free(p);
        p = NULL;
    }
    if (status)
        *status = st;
    return p;
}

static void free_segment(ts_pool *p, ts_segment *s)
{
    TS_PCALL(p, seg_free, s->base);
    p->reserved -= s->size;
    TS_LIST_UNLINK(&p->segs, s, sprev, snext);
    p->nsegs--;
    free(s);
}

void ts_pool_destroy(ts_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    ts_tcache_detach_all(p);
    ts_fence_fini(p);
    if (p->cfg.mode == TS_ALLOC_EXPANDABLE) {
        ts_seg_fini_arenas(p);
    } else if (p->cfg.mode == TS_ALLOC_CACHING) {
        while (p->segs)
            free_segment(p, p->segs);
    } else {
        for (int i = 0; i < TS_MAP_SHARDS; i++) {
            ts_map_shard *s = &p->map.shards[i];
            for (uint32_t k = 0; k < s->cap; k++)
                if (s->keys[k])
                    TS_PCALL(p, seg_free, s->keys[k]);
        }
    }
    ts_block_slab_destroy(&p->slab);
    ts_map_destroy(&p->map);
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_destroy(&p->lock);
    free(p->batches);
    free(p);
}

/* Caching mode: a new segment sized like PyTorch's (2 MiB small, 20 MiB for
 * 1-10 MiB, else rounded to 2 MiB). */
static int new_segment(ts_pool *p, int kind, uint64_t size)
{
    uint64_t ss = kind == TS_KIND_SMALL ? 2 * MiB : size < 10 * MiB ? 20 * MiB : ts_round_up(size, 2 * MiB);
    if (p->cfg.memory_limit && p->reserved + ss > p->cfg.memory_limit)
        return TS_PROV_OOM;
    ts_segment *s = calloc(1, sizeof *s);
    ts_block *b = ts_block_new(&p->slab);
    if (!s || !b) {
        free(s);
        if (b)
            ts_block_delete(&p->slab, b);
        return TS_PROV_ERROR;
    }
    uint64_t base = 0;
    int rc = TS_PCALL(p, seg_alloc, ss, &base);
    if (rc) {
        free(s);
        ts_block_delete(&p->slab, b);
        return rc == TS_PROV_OOM ? TS_PROV_OOM : TS_PROV_ERROR;
    }
    s->base = base;
    s->size = ss;
    s->kind = kind;
    s->first = b;
    s->snext = p->segs;
    if (p->segs)
        p->segs->sprev = s;
    p->segs = s;
    p->nsegs++;
    b->addr = base;
    b->size = ss;
    b->seg = s;
    b->kind = kind;
    p->reserved += ss;
    ts_stats_note(p);
    ts_block_release(p, b);
    return TS_PROV_OK;
}

static uint64_t release_free_segments(ts_pool *p)
{
    uint64_t n = 0;
    for (ts_segment *s = p->segs, *nx; s; s = nx) {
        nx = s->snext;
        ts_block *b = s->first;
        if (__atomic_load_n(&b->state, __ATOMIC_RELAXED) == TS_B_FREE && !b->next && b->size == s->size) {
            ts_index_remove(b->index, b);
            ts_block_delete(&p->slab, b);
            free_segment(p, s);
            n++;
        }
    }
    return n;
}

/* Idle pages whose fence is done, up to `want`, not counting the pages of
 * [addr, addr+size) itself (the allocation will use those, not move them).
 * The LRU is in free order, so the first unsafe page ends the count. */
static uint64_t safe_idle_pages(ts_pool *p, uint64_t want, uint64_t addr, uint64_t size)
{
    uint64_t n = 0;
    int64_t f = (int64_t)((addr - p->va_base) / p->gran),
            l = (int64_t)((addr + size - 1 - p->va_base) / p->gran);
    for (int32_t i = p->idle_head; i >= 0 && n < want && p->pages[i].idle_seq <= p->safe_seq;
         i = p->pages[i].inext)
        n += i < f || i > l;
    return n;
}

static uint64_t unmapped_pages(ts_pool *p, uint64_t addr, uint64_t size)
{
    uint64_t g = p->gran, n = 0;
    uint64_t f = (addr - p->va_base) / g, l = (addr + size - 1 - p->va_base) / g;
    for (uint64_t i = f; i <= l; i++)
        n += !p->pages[i].mapped;
    return n;
}

/* Puts a block taken for an allocation that then failed back: free, or
 * pending again if it came from its stream's pending frees. */
static void unwind_block(ts_pool *p, ts_block *b, bool from_pending, uint64_t stream)
{
    if (from_pending)
        ts_fence_pend(p, b, stream, true);
    else
        ts_block_release(p, b);
}

static void fail_oom(ts_pool *p, uint64_t size)
{
    p->ooms++;
    ts_stats_fill_oom(p, size);
}

static int alloc_off(ts_pool *p, uint64_t size, uint64_t rsize, uint64_t stream, ts_block **out)
{
    if (p->cfg.memory_limit && p->reserved + rsize > p->cfg.memory_limit) {
        fail_oom(p, size);
        return TS_ALLOC_OOM;
    }
    ts_block *b = ts_block_new(&p->slab);
    if (!b)
        return TS_ALLOC_ERROR;
    uint64_t ptr = 0;
    int rc = TS_PCALL(p, seg_alloc, rsize, &ptr);
    if (rc) {
        ts_block_delete(&p->slab, b);
        if (rc == TS_PROV_OOM) {
            fail_oom(p, size);
            return TS_ALLOC_OOM;
        }
        return TS_ALLOC_ERROR;
    }
    b->addr = ptr;
    b->size = rsize;
    __atomic_store_n(&b->state, TS_B_LIVE, __ATOMIC_RELAXED);
    b->stream = stream;
    b->requested = size;
    p->reserved += rsize;
    *out = b;
    return TS_ALLOC_OK;
}

/* One allocation's way through the slow path: what it asks and which of the
 * costlier steps (poll fences, wait for them, give memory back) it took. */
struct fit {
    uint64_t rsize, stream; /* rsize: the request rounded to the block size */
    int kind;
    bool polled, synced, retried;
    bool from_pending; /* the block came from the stream's own pending frees */
};

/* An outcome of the steps below besides the provider's TS_PROV_*: the state
 * changed (fences polled or waited for, a segment added), fit again. */
enum { FIT_AGAIN = -1 };

static bool frees_pending(const ts_pool *p) { return p->q_head || p->batch_count; }

/* Every pending free waited for and back in the index. */
static void sync_frees(ts_pool *p, struct fit *f)
{
    f->synced = true;
    ts_tcache_flush_all(p);
    ts_fence_sync(p);
}

/* A stream-ordered free on this very stream, else the best fit of the free
 * index (cut to size); NULL if neither, FIT_AGAIN in *again when the caching
 * mode waited for pending frees rather than cut a much larger block. */
static ts_block *find_block(ts_pool *p, struct fit *f, bool *again)
{
    f->from_pending = false;
    ts_stream_ent *e = ts_fence_stream(p, f->stream, false);
    if (e && e->pending && e->pending->count) {
        ts_block *c = ts_index_find(e->pending, f->rsize);
        if (c && c->kind == f->kind) {
            ts_fence_take_pending(p, c, f->rsize);
            f->from_pending = true;
            return c;
        }
    }
    ts_block *b = ts_index_find(&p->index[f->kind], f->rsize);
    if (!b)
        return NULL;
    /* caching: cutting a much larger block fragments the segments; when
     * frees are pending, let them finish and fit again */
    if (p->cfg.mode == TS_ALLOC_CACHING && !f->synced && p->q_head && b->size >= 2 * f->rsize) {
        sync_frees(p, f);
        *again = true;
        return NULL;
    }
    ts_index_remove(&p->index[f->kind], b);
    ts_block *r = ts_block_split(&p->slab, b, f->rsize);
    if (r)
        ts_block_release(p, r);
    return b;
}

/* Expandable: the pages under b, mapped (TS_PROV_OK) or not (b is unwound);
 * FIT_AGAIN after polling or waiting for fences first. */
static int map_block(ts_pool *p, struct fit *f, ts_block *b)
{
    uint64_t need = unmapped_pages(p, b->addr, b->size);
    if (need && !f->polled && frees_pending(p)) {
        unwind_block(p, b, f->from_pending, f->stream);
        f->polled = true;
        ts_fence_poll(p);
        return FIT_AGAIN;
    }
    uint64_t safe = need ? safe_idle_pages(p, need, b->addr, b->size) : 0;
    /* growing the reserved memory: first let pending frees finish
     * (thread-cached blocks stay: at most TC_MAX_BYTES a thread,
     * given back on OOM, trim and thread exit) */
    if (need && !f->synced && (p->q_head || (safe < need && safe < p->idle_count))) {
        unwind_block(p, b, f->from_pending, f->stream);
        sync_frees(p, f);
        return FIT_AGAIN;
    }
    int rc = ts_seg_pages_get(p, b->addr, b->size);
    if (rc)
        unwind_block(p, b, f->from_pending, f->stream);
    return rc;
}

/* No block fits: the caching mode polls, then waits for pending frees, then
 * adds a segment (FIT_AGAIN each time); the expandable range is exhausted. */
static int grow(ts_pool *p, struct fit *f)
{
    if (p->cfg.mode != TS_ALLOC_CACHING)
        return TS_PROV_OOM; /* virtual range exhausted */
    if (!f->polled && frees_pending(p)) {
        f->polled = true;
        ts_fence_poll(p);
        return FIT_AGAIN;
    }
    if (!f->synced && frees_pending(p)) {
        sync_frees(p, f);
        return FIT_AGAIN;
    }
    int rc = new_segment(p, f->kind, f->rsize);
    return rc ? rc : FIT_AGAIN;
}

/* OOM once: finish pending frees, give idle memory back, then retry. */
static void reclaim(ts_pool *p, struct fit *f)
{
    f->retried = true;
    sync_frees(p, f);
    if (p->cfg.mode == TS_ALLOC_EXPANDABLE)
        ts_seg_release_idle(p);
    else
        release_free_segments(p);
}

static int alloc_locked(ts_pool *p, uint64_t size, uint64_t rsize, uint64_t stream, ts_block **out)
{
    if (p->cfg.mode == TS_ALLOC_OFF)
        return alloc_off(p, size, rsize, stream, out);
    struct fit f = { .rsize = rsize,
                     .stream = stream,
                     .kind = rsize < TS_ALLOC_SMALL_MAX ? TS_KIND_SMALL : TS_KIND_LARGE };
    uint64_t mem0 = p->page_moves + p->mapped_count + p->nsegs;
    /* Fences are polled only when the free memory at hand does not serve the
     * request without new pages: no driver call on the common path.  The
     * caching mode polls first: its segments fragment unless recently freed
     * blocks are back in the index before the fit. */
    if (p->cfg.mode == TS_ALLOC_CACHING && frees_pending(p)) {
        f.polled = true;
        ts_fence_poll(p);
    }
    for (;;) {
        bool again = false;
        ts_block *b = find_block(p, &f, &again);
        if (again)
            continue;
        int rc = TS_PROV_OK;
        if (p->cfg.mode == TS_ALLOC_EXPANDABLE && b)
            rc = map_block(p, &f, b);
        else if (!b)
            rc = grow(p, &f);
        if (rc == FIT_AGAIN)
            continue;
        if (!rc) {
            __atomic_store_n(&b->state, TS_B_LIVE, __ATOMIC_RELAXED);
            b->stream = stream;
            b->requested = size;
            if (p->page_moves + p->mapped_count + p->nsegs == mem0)
                p->cache_hits++;
            *out = b;
            return TS_ALLOC_OK;
        }
        if (rc != TS_PROV_OOM)
            return TS_ALLOC_ERROR;
        if (f.retried) {
            fail_oom(p, size);
            return TS_ALLOC_OOM;
        }
        reclaim(p, &f);
    }
}

bool ts_pool_alloc_cached(ts_pool *p, uint64_t size, uint64_t stream, uint64_t *ptr)
{
    *ptr = 0;
    if (!p || size == 0 || size > (1ull << 52) || p->cfg.no_thread_cache)
        return false;
    uint64_t rsize = ts_round_up(size, TS_ALLOC_ALIGN);
    int hit = ts_tcache_alloc(p, rsize, stream, ptr);
    if (hit != TS_TC_STALE)
        return hit == 1;
    pthread_mutex_lock(&p->lock);
    ts_fence_refresh(p);
    pthread_mutex_unlock(&p->lock);
    return ts_tcache_alloc(p, rsize, stream, ptr) == 1;
}

int ts_pool_alloc(ts_pool *p, uint64_t size, uint64_t stream, unsigned flags, uint64_t *ptr)
{
    if (!ptr)
        return TS_ALLOC_INVALID;
    *ptr = 0;
    if (!p)
        return TS_ALLOC_INVALID;
    if (size == 0)
        return TS_ALLOC_OK;
    if (size > (1ull << 52))
        return TS_ALLOC_OOM;
    uint64_t rsize = ts_round_up(size, TS_ALLOC_ALIGN);
    bool tc = !(flags & TS_AF_CAPTURING) && !p->cfg.no_thread_cache;
    int hit = tc ? ts_tcache_alloc(p, rsize, stream, ptr) : 0;
    if (hit == 1)
        return TS_ALLOC_OK;
    pthread_mutex_lock(&p->lock);
    if (hit == TS_TC_STALE) {
        /* cached synchronous frees of this size wait for a fence check: one
         * check makes all of them reusable (the next pairs hit again) */
        ts_fence_refresh(p);
        pthread_mutex_unlock(&p->lock);
        if (ts_tcache_alloc(p, rsize, stream, ptr) == 1)
            return TS_ALLOC_OK;
        pthread_mutex_lock(&p->lock);
    }
    ts_stream_ent *e = ts_fence_stream(p, stream, true);
    /* a capturing caller: no fence work anywhere for the duration */
    bool mark = (flags & TS_AF_CAPTURING) && e && !e->capturing;
    if (mark) {
        e->capturing = true;
        p->ncapturing++;
    }
    ts_block *b = NULL;
    int rc = alloc_locked(p, size, rsize, stream, &b);
    if (mark) {
        e = ts_fence_stream(p, stream, false);
        e->capturing = false;
        p->ncapturing--;
    }
    if (rc == TS_ALLOC_OK) {
        /* counted live first, so that giving it back below balances */
        p->held += b->size;
        p->live_blocks++;
        p->allocs++;
        if (ts_map_put(&p->map, b->addr, b)) {
            /* cannot track it: give it back rather than hand out an untracked pointer */
            ts_fence_free_locked(p, b, stream, false);
            p->frees--;
            p->allocs--;
            rc = TS_ALLOC_ERROR;
        } else {
            ts_stats_note(p);
            *ptr = b->addr;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* Thread-cache free of a block the caller took from LIVE to TCACHED. */
static inline void free_to_cache(ts_pool *p, ts_block *b, uint64_t stream, bool so)
{
    if (so ? ts_tcache_free(p, b, stream) : ts_tcache_free_sync(p, b, stream))
        return;
    pthread_mutex_lock(&p->lock);
    b->stream = stream;
    ts_fence_free_cached_locked(p, b, !so);
    pthread_mutex_unlock(&p->lock);
}

int ts_pool_free(ts_pool *p, uint64_t ptr, uint64_t stream, unsigned flags)
{
    if (!ptr)
        return TS_ALLOC_OK;
    if (!p)
        return TS_ALLOC_INVALID;
    bool so = flags & TS_FF_STREAM_ORDERED;
    /* an exported block's free must reach ts_seg_pages_put, which kills the
     * export: a thread cache would hand the same address to the next
     * allocation of its size while the old handle still opens it */
    bool cached = p->cfg.mode != TS_ALLOC_OFF && !p->cfg.no_thread_cache && !(flags & TS_FF_NO_CACHE)
                  && (so || p->cfg.sync_thread_cache) && !ts_seg_block_exported(p, ptr);
    if (cached) {
        /* fast path: lock-free lookup; only the owner of a live block frees
         * it (a plain store, no locked exchange: two threads freeing one
         * pointer at once is a double free the pool does not arbitrate) */
        ts_block *b = ts_map_find(&p->map, ptr);
        if (b && __atomic_load_n(&b->state, __ATOMIC_RELAXED) == TS_B_LIVE) {
            __atomic_store_n(&b->state, TS_B_TCACHED, __ATOMIC_RELAXED);
            free_to_cache(p, b, stream, so);
            return TS_ALLOC_OK;
        }
    }
    ts_map_shard *s = ts_map_lock(&p->map, ptr);
    ts_block *b = ts_map_get_locked(s, ptr);
    if (!b || __atomic_load_n(&b->state, __ATOMIC_RELAXED) != TS_B_LIVE) {
        ts_map_unlock(s);
        return TS_ALLOC_INVALID;
    }
    if (cached) {
        __atomic_store_n(&b->state, TS_B_TCACHED, __ATOMIC_RELAXED);
        ts_map_unlock(s);
        free_to_cache(p, b, stream, so);
        return TS_ALLOC_OK;
    }
    ts_map_take_locked(s, ptr);
    ts_map_unlock(s);
    pthread_mutex_lock(&p->lock);
    ts_fence_free_locked(p, b, stream, so);
    pthread_mutex_unlock(&p->lock);
    return TS_ALLOC_OK;
}

int ts_pool_lookup(ts_pool *p, uint64_t ptr, uint64_t *base, uint64_t *size)
{
    ts_block *b = p ? ts_map_get(&p->map, ptr) : NULL;
    if (!b)
        return TS_ALLOC_INVALID;
    if (base)
        *base = b->addr;
    if (size)
        *size = b->size;
    return TS_ALLOC_OK;
}

int ts_pool_stream_add(ts_pool *p, uint64_t stream)
{
    pthread_mutex_lock(&p->lock);
    ts_stream_ent *e = ts_fence_stream(p, stream, true);
    pthread_mutex_unlock(&p->lock);
    return e ? TS_ALLOC_OK : TS_ALLOC_ERROR;
}

int ts_pool_stream_set_capturing(ts_pool *p, uint64_t stream, bool capturing)
{
    pthread_mutex_lock(&p->lock);
    ts_stream_ent *e = ts_fence_stream(p, stream, true);
    if (e && e->capturing != capturing) {
        e->capturing = capturing;
        p->ncapturing += capturing ? 1 : -1;
    }
    pthread_mutex_unlock(&p->lock);
    return e ? TS_ALLOC_OK : TS_ALLOC_ERROR;
}

int ts_pool_stream_remove(ts_pool *p, uint64_t stream)
{
    int rc = TS_ALLOC_OK;
    pthread_mutex_lock(&p->lock);
    ts_tcache_flush_all(p);
    ts_stream_ent *e = ts_fence_stream(p, stream, false);
    if (e) {
        /* its queued work must be over before frees can be judged without it */
        if (!e->capturing) {
            uint64_t f = 0;
            p->fence_records++;
            if (TS_PCALL(p, fence_record, stream, &f) == TS_PROV_OK) {
                p->fence_waits++;
                if (TS_PCALL(p, fence_wait, f))
                    rc = TS_ALLOC_ERROR;
                p->prov.fence_release(p->prov.ctx, f);
            } else {
                rc = TS_ALLOC_ERROR;
            }
        }
        if (e->pending) {
            /* its stream-ordered frees stay pending for the other streams */
            for (int fl = 0; fl < TS_IDX_FL; fl++)
                for (int sl = 0; sl < TS_IDX_SL; sl++)
                    while (e->pending->heads[fl][sl])
                        ts_index_remove(e->pending, e->pending->heads[fl][sl]);
            free(e->pending);
        }
        if (e->capturing)
            p->ncapturing--;
        *e = p->streams[--p->nstreams];
        /* a batch may still name it: its fence was recorded before removal */
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int ts_pool_trim(ts_pool *p)
{
    pthread_mutex_lock(&p->lock);
    ts_tcache_flush_all(p);
    bool ok = ts_fence_sync(p);
    if (p->cfg.mode == TS_ALLOC_EXPANDABLE)
        ts_seg_release_idle(p);
    else if (p->cfg.mode == TS_ALLOC_CACHING)
        release_free_segments(p);
    pthread_mutex_unlock(&p->lock);
    return ok ? TS_ALLOC_OK : TS_ALLOC_ERROR;
}
