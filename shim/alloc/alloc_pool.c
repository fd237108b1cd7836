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
    ts_tcache_fit_cap(p);
    for (int k = 0; k < TS_NKINDS; k++) {
        ts_index_init(&p->index[k]);
        ts_index_init(&p->uindex[k]);
    }
    ts_index_init(&p->kindex);
    ts_map_init(&p->map);
    if (cfg->mode == TS_ALLOC_EXPANDABLE) {
        int rc = ts_seg_init_arenas(p);
        if (!rc && cfg->step_plan && ts_plan_init(p))
            rc = TS_PROV_ERROR;
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
        ts_plan_fini(p);
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
    ts_tcache_wait_exits(p); /* threads exiting meanwhile still lock it */
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
    bool polled, synced;
    int reclaims;      /* memory-giving steps taken after an OOM (reclaim) */
    bool from_pending; /* the block came from the stream's own pending frees */
    bool unkept;       /* expandable: old kept blocks given to the free index */
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
    bool expandable = p->cfg.mode == TS_ALLOC_EXPANDABLE;
    ts_stream_ent *e = ts_fence_stream(p, f->stream, false);
    if (e && e->pending && e->pending->count) {
        ts_block *c = ts_index_find(e->pending, f->rsize);
        /* a large freed block serves its own size only (see kindex) */
        if (c && c->kind == f->kind && (!expandable || c->size < TS_KEEP_MIN || c->size == f->rsize)) {
            ts_fence_take_pending(p, c, f->rsize);
            f->from_pending = true;
            return c;
        }
    }
    if (expandable && f->rsize >= TS_KEEP_MIN) {
        ts_block *k = ts_index_find(&p->kindex, f->rsize);
        if (k && k->size == f->rsize) {
            ts_index_remove(&p->kindex, k);
            return k;
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

/* Expandable: the pages under b (from a free block over mapped pages, or
 * from its stream's pending frees: mapped too) referenced; b is unwound on
 * failure. */
static int map_block(ts_pool *p, struct fit *f, ts_block *b)
{
    int rc = ts_seg_pages_get(p, b->addr, b->size);
    if (rc)
        unwind_block(p, b, f->from_pending, f->stream);
    return rc;
}

/* No block fits.  Both modes poll, then wait for pending frees (memory over
 * latency: a real cudaFree would have waited for the whole device), FIT_AGAIN
 * each time; then the caching mode adds a segment and the expandable one
 * maps pages for the block (*out). */
static int grow(ts_pool *p, struct fit *f, ts_block **out)
{
    if (!f->polled && frees_pending(p)) {
        f->polled = true;
        ts_fence_poll(p);
        return FIT_AGAIN;
    }
    /* expandable: blocks parked in thread caches too (growth in a steady
     * state would otherwise depend on what the caches happen to hold) */
    if (!f->synced && (frees_pending(p) || (p->cfg.mode == TS_ALLOC_EXPANDABLE && ts_tcache_bytes(p)))) {
        sync_frees(p, f);
        return FIT_AGAIN;
    }
    if (p->cfg.mode == TS_ALLOC_EXPANDABLE) {
        /* kept blocks no request took for two growths are the sizes of a
         * past pattern: free space again before growing */
        if (!f->unkept) {
            f->unkept = true;
            if (ts_block_unkeep(p, p->grow_gen >= 2 ? p->grow_gen - 1 : 0))
                return FIT_AGAIN;
        }
        p->grow_gen++;
        int rc = ts_seg_grow(p, f->kind, f->rsize, out);
        if (rc == TS_PROV_OOM && ts_block_unkeep(p, UINT64_MAX))
            return FIT_AGAIN; /* short of memory: every kept block may be cut */
        return rc;
    }
    int rc = new_segment(p, f->kind, f->rsize);
    return rc ? rc : FIT_AGAIN;
}

/* After an OOM: finish pending frees (expandable: growth may then move idle
 * pages' handles), then give idle memory back (expandable: a second step,
 * when growth still fails); false when nothing is left to try. */
static bool reclaim(ts_pool *p, struct fit *f)
{
    bool expandable = p->cfg.mode == TS_ALLOC_EXPANDABLE;
    if (f->reclaims >= (expandable ? 2 : 1))
        return false;
    if (f->reclaims++ == 0)
        sync_frees(p, f);
    if (!expandable)
        release_free_segments(p);
    else if (f->reclaims == 2)
        ts_seg_release_idle(p, UINT64_MAX);
    return true;
}

/* Expandable: pages idle longer than cfg.idle_release_ns (and safe) go back. */
static void release_long_idle(ts_pool *p)
{
    if (!p->cfg.idle_release_ns || p->idle_head < 0)
        return;
    uint64_t now = ts_seg_now_ns();
    if (p->pages[p->idle_head].idle_ns + p->cfg.idle_release_ns <= now)
        ts_seg_release_idle(p, now - p->cfg.idle_release_ns + 1);
}

/* b serves the request: live (a planned-kind one recorded); a
 * cache hit when no page or segment came with it. */
static int alloc_served(ts_pool *p, const struct fit *f, ts_block *b, uint64_t size, uint64_t mem0,
                        ts_block **out)
{
    __atomic_store_n(&b->state, TS_B_LIVE, __ATOMIC_RELAXED);
    b->stream = f->stream;
    b->requested = size;
    if (p->page_moves + p->mapped_count + p->nsegs == mem0)
        p->cache_hits++;
    if (f->kind == TS_KIND_PLANNED)
        ts_plan_on_alloc(p, b);
    *out = b;
    return TS_ALLOC_OK;
}

static int alloc_locked(ts_pool *p, uint64_t size, uint64_t rsize, uint64_t stream, ts_block **out)
{
    if (p->cfg.mode == TS_ALLOC_OFF)
        return alloc_off(p, size, rsize, stream, out);
    struct fit f = { .rsize = rsize,
                     .stream = stream,
                     .kind = rsize < TS_ALLOC_SMALL_MAX       ? TS_KIND_SMALL
                             : rsize > TS_PLAN_MIN && p->plan ? TS_KIND_PLANNED
                                                              : TS_KIND_LARGE };
    uint64_t mem0 = p->page_moves + p->mapped_count + p->nsegs;
    /* Fences are polled only when the free memory at hand does not serve the
     * request without new pages: no driver call on the common path.  The
     * caching mode polls first: its segments fragment unless recently freed
     * blocks are back in the index before the fit. */
    if (p->cfg.mode == TS_ALLOC_CACHING && frees_pending(p)) {
        f.polled = true;
        ts_fence_poll(p);
    }
    if (p->cfg.mode == TS_ALLOC_EXPANDABLE)
        release_long_idle(p);
    ts_block *planned = NULL;
    if (f.kind != TS_KIND_SMALL && ts_plan_take(p, f.kind, rsize, stream, &planned) == TS_PROV_OK)
        return alloc_served(p, &f, planned, size, mem0, out);
    for (;;) {
        bool again = false;
        ts_block *b = find_block(p, &f, &again);
        if (again)
            continue;
        int rc = TS_PROV_OK;
        if (p->cfg.mode == TS_ALLOC_EXPANDABLE && b)
            rc = map_block(p, &f, b);
        else if (!b)
            rc = grow(p, &f, &b);
        if (rc == FIT_AGAIN)
            continue;
        if (!rc)
            return alloc_served(p, &f, b, size, mem0, out);
        if (rc != TS_PROV_OOM)
            return TS_ALLOC_ERROR;
        if (!reclaim(p, &f)) {
            fail_oom(p, size);
            return TS_ALLOC_OOM;
        }
    }
}

bool ts_pool_alloc_cached(ts_pool *p, uint64_t size, uint64_t stream, uint64_t *ptr)
{
    *ptr = 0;
    if (!p || size == 0 || size > (1ull << 52) || p->cfg.no_thread_cache)
        return false;
    uint64_t rsize = ts_round_up(size, TS_ALLOC_ALIGN);
    int hit = ts_tcache_alloc(p, rsize, size, stream, ptr);
    if (hit == TS_TC_STALE) {
        pthread_mutex_lock(&p->lock);
        ts_fence_refresh(p);
        pthread_mutex_unlock(&p->lock);
        hit = ts_tcache_alloc(p, rsize, size, stream, ptr);
    }
    return hit == 1; /* a hit is counted live by the cache */
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
    int hit = tc ? ts_tcache_alloc(p, rsize, size, stream, ptr) : 0;
    if (hit == 1)
        return TS_ALLOC_OK;
    pthread_mutex_lock(&p->lock);
    if (hit == TS_TC_STALE) {
        /* cached synchronous frees of this size wait for a fence check: one
         * check makes all of them reusable (the next pairs hit again) */
        ts_fence_refresh(p);
        pthread_mutex_unlock(&p->lock);
        if (ts_tcache_alloc(p, rsize, size, stream, ptr) == 1)
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
            ts_live_add(p, b->size, b->requested, stream);
            ts_stats_note(p);
            if (p->reserved != p->pool_noted_reserved)
                ts_stats_note_pool(p);
            *ptr = b->addr;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* Thread-cache free of a block the caller took from LIVE to TCACHED;
 * `counted`: its bytes still in live_bytes, which a parked block keeps
 * there (alloc_tcache.c) and any other free takes out. */
static inline void free_to_cache(ts_pool *p, ts_block *b, uint64_t stream, bool so, uint64_t counted)
{
    if (so ? ts_tcache_free(p, b, stream, counted) : ts_tcache_free_sync(p, b, stream))
        return;
    if (counted)
        ts_live_sub(p, b->size, counted, b->stream);
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
            /* a stream-ordered block stays counted while parked */
            uint64_t counted = so && b->stream != TS_STREAM_NONE ? b->requested : 0;
            if (!counted)
                ts_live_sub(p, b->size, b->requested, b->stream);
            free_to_cache(p, b, stream, so, counted);
            return TS_ALLOC_OK;
        }
    }
    ts_map_shard *s = ts_map_lock(&p->map, ptr);
    ts_block *b = ts_map_get_locked(s, ptr);
    if (!b || __atomic_load_n(&b->state, __ATOMIC_RELAXED) != TS_B_LIVE) {
        ts_map_unlock(s);
        return TS_ALLOC_INVALID;
    }
    ts_live_sub(p, b->size, b->requested, b->stream);
    if (cached) {
        __atomic_store_n(&b->state, TS_B_TCACHED, __ATOMIC_RELAXED);
        ts_map_unlock(s);
        free_to_cache(p, b, stream, so, 0);
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
            if (TS_FCALL(p, fence_record, stream, &f) == TS_PROV_OK) {
                p->fence_waits++;
                if (TS_FCALL(p, fence_wait, f))
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

void ts_pool_plan_stats(ts_pool *p, ts_plan_stats *o)
{
    pthread_mutex_lock(&p->lock);
    ts_plan_stats_get(p, o);
    pthread_mutex_unlock(&p->lock);
}

int ts_pool_trim(ts_pool *p)
{
    pthread_mutex_lock(&p->lock);
    ts_tcache_flush_all(p);
    bool ok = ts_fence_sync(p);
    if (p->cfg.mode == TS_ALLOC_EXPANDABLE)
        ts_seg_release_idle(p, UINT64_MAX);
    else if (p->cfg.mode == TS_ALLOC_CACHING)
        release_free_segments(p);
    pthread_mutex_unlock(&p->lock);
    return ok ? TS_ALLOC_OK : TS_ALLOC_ERROR;
}
