/* alloc_stats.c: peaks, fragmentation, the largest usable free block and the
 * OOM report.  "allocated" is the bytes of live blocks (512-byte rounded);
 * blocks parked in thread caches are held by the pool but not allocated.
 * Peaks are taken on the pool's slow path, so a thread-cache hit that makes
 * a new allocated peak is seen at the next slow-path event (the cached bytes
 * were counted while held, so the peak is never under-reported by more than
 * the thread caches' contents). */
#include <string.h>
#include "alloc/alloc_internal.h"

/* Largest free block that can be handed out without new memory. */
static uint64_t largest_usable_free(ts_pool *p)
{
    if (p->cfg.mode != TS_ALLOC_EXPANDABLE)
        return ts_index_largest(&p->index[0]) > ts_index_largest(&p->index[1])
                   ? ts_index_largest(&p->index[0])
                   : ts_index_largest(&p->index[1]);
    uint64_t best = 0;
    for (int k = 0; k < TS_NKINDS; k++)
        for (int fl = TS_IDX_FL - 1; fl >= 0; fl--)
            for (int sl = TS_IDX_SL - 1; sl >= 0; sl--)
                for (ts_block *b = p->index[k].heads[fl][sl]; b; b = b->fnext) {
                    uint64_t r = ts_seg_mapped_run(p, b->addr, b->size);
                    if (r > best)
                        best = r;
                }
    return best;
}

void ts_pool_stats(ts_pool *p, ts_alloc_stats *o)
{
    memset(o, 0, sizeof *o);
    pthread_mutex_lock(&p->lock);
    uint64_t tcb = ts_tcache_bytes(p);
    o->reserved_bytes = p->reserved;
    o->allocated_bytes = p->held - tcb;
    o->thread_cached_bytes = tcb;
    o->peak_reserved_bytes = p->peak_reserved;
    o->peak_allocated_bytes = p->peak_held;
    o->allocated_at_reserved_peak = p->held_at_peak;
    o->fragmentation = p->peak_reserved ? 1.0 - (double)p->held_at_peak / (double)p->peak_reserved : 0;
    o->largest_free_block = largest_usable_free(p);
    o->pending_bytes = p->pending_bytes;
    o->live_blocks = p->live_blocks;
    o->segments = p->cfg.mode == TS_ALLOC_CACHING ? p->nsegs
                  : p->cfg.mode == TS_ALLOC_OFF   ? p->live_blocks
                                                  : 2;
    o->mapped_pages = p->mapped_count;
    o->idle_pages = p->idle_count;
    o->allocs = p->allocs;
    o->frees = p->frees;
    o->thread_cache_hits = ts_tcache_hits(p);
    o->cache_hits = p->cache_hits + o->thread_cache_hits;
    o->ooms = p->ooms;
    o->driver_calls = p->driver_calls;
    o->fence_calls = p->fence_calls;
    o->fence_records = p->fence_records;
    o->fence_waits = p->fence_waits;
    o->page_moves = p->page_moves;
    o->shadow_moves = p->shadow_moves;
    o->live_bytes = ts_tcache_live_now(p);
    o->peak_live_bytes = __atomic_load_n(&p->live_peak, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&p->lock);
}

/* What a memory pool's reserved attributes show (p->lock held): the pool's
 * reserved bytes less those of live synchronous blocks.  CUDA counts in a
 * pool only the memory behind its stream-ordered allocations, and a
 * library's cudaMalloc (cuBLAS's workspace, say) is in none; trainshim
 * serves both from the same pages, so the synchronous ones are taken out. */
static uint64_t pool_reserved_locked(ts_pool *p)
{
    uint64_t sync_live = __atomic_load_n(&p->sync_live, __ATOMIC_RELAXED);
    return p->reserved > sync_live ? p->reserved - sync_live : 0;
}

/* Where reserved changed, and at each query: a live synchronous block freed
 * raises the figure without a note until then; such memory would not be in
 * a CUDA pool at all. */
uint64_t ts_stats_note_pool(ts_pool *p)
{
    uint64_t r = pool_reserved_locked(p);
    if (r > p->pool_reserved_peak)
        p->pool_reserved_peak = r;
    p->pool_noted_reserved = p->reserved;
    ts_tcache_fit_cap(p);
    return r;
}

void ts_pool_usage_of(ts_pool *p, ts_pool_usage *o)
{
    pthread_mutex_lock(&p->lock);
    o->reserved = ts_stats_note_pool(p);
    o->peak_reserved = p->pool_reserved_peak;
    pthread_mutex_unlock(&p->lock);
    o->live = ts_tcache_live_now(p);
    o->peak_live = __atomic_load_n(&p->live_peak, __ATOMIC_RELAXED);
}

void ts_pool_reset_peaks(ts_pool *p, bool reserved, bool live)
{
    pthread_mutex_lock(&p->lock);
    /* the attributes' peaks only: the pool's own (ts_pool_stats, the
     * report's peak reserved) are the whole run's, whatever the program
     * resets (torch.cuda.reset_peak_memory_stats sets both to 0) */
    if (reserved)
        p->pool_reserved_peak = pool_reserved_locked(p);
    if (live)
        __atomic_store_n(&p->live_peak, ts_tcache_live_now(p), __ATOMIC_RELAXED);
    pthread_mutex_unlock(&p->lock);
}

void ts_stats_fill_oom(ts_pool *p, uint64_t requested)
{
    ts_oom_report *r = &p->last_oom;
    memset(r, 0, sizeof *r);
    r->requested = requested;
    r->reserved = p->reserved;
    r->allocated = p->held;
    r->memory_limit = p->cfg.memory_limit;
    r->capacity = p->cfg.capacity;
    r->largest_free_block = largest_usable_free(p);
    r->fragmentation = p->reserved ? 1.0 - (double)p->held / (double)p->reserved : 0;
    for (int i = 0; i < TS_MAP_SHARDS; i++) {
        ts_map_shard *s = &p->map.shards[i];
        ts_spin_lock(&s->lock);
        for (uint32_t k = 0; k < s->cap; k++) {
            ts_block *b = s->vals[k];
            if (!s->keys[k] || !b)
                continue;
            /* insertion into the top list, largest first */
            int pos = r->ntop;
            while (pos > 0 && r->top_size[pos - 1] < b->size)
                pos--;
            if (pos >= TS_OOM_TOP)
                continue;
            int last = r->ntop < TS_OOM_TOP ? r->ntop : TS_OOM_TOP - 1;
            for (int j = last; j > pos; j--) {
                r->top_size[j] = r->top_size[j - 1];
                r->top_ptr[j] = r->top_ptr[j - 1];
            }
            r->top_size[pos] = b->size;
            r->top_ptr[pos] = b->addr;
            if (r->ntop < TS_OOM_TOP)
                r->ntop++;
        }
        ts_spin_unlock(&s->lock);
    }
}

void ts_pool_last_oom(ts_pool *p, ts_oom_report *out)
{
    pthread_mutex_lock(&p->lock);
    *out = p->last_oom;
    pthread_mutex_unlock(&p->lock);
}
