/* alloc_internal.h: the allocator's own structures and layers, for
 * the alloc_*.c files and the tests that check them; everything else includes
 * alloc/alloc.h.  Layers, lowest first (each calls only those below it; see
 * shim/alloc/README.md): index, blockmap, block, segment, fence, tcache,
 * stats, pool. */
#ifndef TRAINSHIM_ALLOC_INTERNAL_H
#define TRAINSHIM_ALLOC_INTERNAL_H
#include "alloc/alloc.h"

enum ts_block_state { TS_B_FREE = 1, TS_B_PENDING = 2, TS_B_LIVE = 3, TS_B_TCACHED = 4 };
/* Block kinds, each with its own arena (expandable) or segments (caching):
 * small (< TS_ALLOC_SMALL_MAX) and large; with the step plan (alloc_plan.c,
 * expandable only) the large ones over TS_PLAN_MIN are planned instead, in
 * an arena of their own (the plan must see every request: the thread
 * caches never park these). */
enum { TS_KIND_LARGE = 0, TS_KIND_SMALL = 1, TS_KIND_PLANNED = 2, TS_NKINDS = 3 };
/* With the step plan, blocks above this size are planned (2 MiB: a
 * model's mid-size weights, their gradients and optimizer state pack with
 * the activations instead of fragmenting an arena of their own); those up
 * to it stay large, in the thread caches' reach, and take the lowest free
 * range of their arena until the plan settles. */
#define TS_PLAN_MIN (2ull << 20)

struct ts_index;
struct ts_segment;
typedef struct ts_block {
    uint64_t addr, size, requested;
    struct ts_block *prev, *next;   /* address neighbours in the same segment */
    struct ts_block *fprev, *fnext; /* list of the index holding it */
    struct ts_block *qprev, *qnext; /* pending FIFO (state PENDING) */
    struct ts_index *index;         /* index holding it (FREE, or PENDING on a stream) */
    struct ts_segment *seg;
    uint64_t seq;    /* free sequence number while PENDING; growth generation while kept */
    uint64_t ord;    /* planned kind: allocation count at its allocation (step plan) */
    uint64_t stream; /* allocation stream / stream of a stream-ordered free */
    /* Parked in a thread cache: the requested bytes still counted in the
     * pool's live_bytes (0: none; alloc_tcache.c) */
    uint64_t counted;
    int state;
    int kind;
} __attribute__((aligned(64))) ts_block; /* a line of its own: thread caches flip their own blocks */

/* TLSF two-level segregated free index over sizes in 512-byte units. */
#define TS_IDX_SL_LOG 4
#define TS_IDX_SL (1 << TS_IDX_SL_LOG)
#define TS_IDX_FL 48
typedef struct ts_index {
    uint64_t fl_map;
    uint32_t sl_map[TS_IDX_FL];
    ts_block *heads[TS_IDX_FL][TS_IDX_SL];
    uint64_t count, bytes;
} ts_index;
void ts_index_init(ts_index *ix);
void ts_index_insert(ts_index *ix, ts_block *b);
void ts_index_remove(ts_index *ix, ts_block *b);
/* Best (or near-best: within 1/16) fitting block of at least size, or NULL. O(1). */
ts_block *ts_index_find(ts_index *ix, uint64_t size);
uint64_t ts_index_largest(const ts_index *ix);
void ts_index_class(uint64_t size, int *fl, int *sl);

/* Block records: slab of records, split and coalesce. */
typedef struct ts_block_slab {
    ts_block *free_list;
    void **chunks;
    size_t nchunks, cap_chunks;
    uint64_t in_use;
} ts_block_slab;
ts_block *ts_block_new(ts_block_slab *s);
void ts_block_delete(ts_block_slab *s, ts_block *b);
void ts_block_slab_destroy(ts_block_slab *s);
/* Cuts b to `size` bytes; returns the remainder (same state, not indexed), or NULL. */
ts_block *ts_block_split(ts_block_slab *s, ts_block *b, uint64_t size);
/* Merges b->next (in no index) into b. */
void ts_block_merge_next(ts_block_slab *s, ts_block *b);
/* Merges b with its FREE neighbours (removing them from ix); returns the result. */
ts_block *ts_block_coalesce(ts_block_slab *s, ts_index *ix, ts_block *b);
struct ts_pool;
/* Frees the block into its kind's main index of pool p: coalesce (and, for
 * arenas, nothing else). */
void ts_block_release(struct ts_pool *p, ts_block *b);
/* A freed block whose fences are done: kept whole (kindex) when large in
 * the expandable mode, else ts_block_release. */
#define TS_KEEP_MIN (32ull << 20)
void ts_block_release_freed(struct ts_pool *p, ts_block *b);
/* Gives kept blocks of a growth generation below max_gen to the free index;
 * returns how many. */
uint64_t ts_block_unkeep(struct ts_pool *p, uint64_t max_gen);

/* Map from a live block's address to its record: sharded so that threads on
 * the fast path rarely meet on one lock. */
#define TS_MAP_SHARDS 64
#define TS_MAP_RETIRED 40
typedef struct ts_map_shard {
    int lock;     /* spinlock, writers only */
    unsigned seq; /* odd while a writer changes the table */
    uint32_t cap, count;
    uint64_t *keys;
    ts_block **vals;
    /* arrays replaced by a resize, freed at destruction: a lock-free reader
     * may still be looking at them */
    int nretired;
    void *retired[TS_MAP_RETIRED];
} __attribute__((aligned(64))) ts_map_shard;
typedef struct ts_block_map {
    ts_map_shard shards[TS_MAP_SHARDS];
} ts_block_map;
int ts_map_init(ts_block_map *m);
void ts_map_destroy(ts_block_map *m);
int ts_map_put(ts_block_map *m, uint64_t key, ts_block *b); /* takes the shard lock */
ts_block *ts_map_take(ts_block_map *m, uint64_t key);       /* removes */
ts_block *ts_map_get(ts_block_map *m, uint64_t key);
/* Lock-free lookup (seqlock read): the record mapped to key at one instant. */
ts_block *ts_map_find(ts_block_map *m, uint64_t key);
ts_map_shard *ts_map_lock(ts_block_map *m, uint64_t key);
void ts_map_unlock(ts_map_shard *s);
ts_block *ts_map_get_locked(ts_map_shard *s, uint64_t key);
ts_block *ts_map_take_locked(ts_map_shard *s, uint64_t key);
void ts_spin_lock(int *l);
void ts_spin_unlock(int *l);

/* Segments: the expandable arenas (with a page table) or one caching/off
 * segment from seg_alloc. */
typedef struct ts_page {
    uint64_t handle;
    uint32_t refs; /* live or thread-cached blocks touching the page */
    uint8_t mapped;
    uint8_t fresh; /* mapped by the ts_seg_pages_get in progress */
    /* A page's handle may also be mapped at one other page, its shadow,
     * which the pool counts as unmapped (nothing is mapped there before the
     * shadow is unmapped): twin links the two, shadow marks the second. */
    uint8_t shadow;
    int32_t twin;
    int32_t iprev, inext; /* idle LRU (mapped, refs == 0) */
    uint64_t idle_seq;    /* free sequence at which it became idle */
    uint64_t idle_ns;     /* monotonic clock when it became idle (cfg.idle_release_ns set) */
} ts_page;
typedef struct ts_segment {
    uint64_t base, size;
    /* expandable: no page at or above this address was ever mapped (walks
     * over a free run stop there: an arena's tail is most of its range) */
    uint64_t mapped_end;
    int kind;
    struct ts_segment *sprev, *snext;
    ts_block *first;
} ts_segment;

/* Fences over the registered streams. */
#define TS_MAX_STREAMS 1024 /* registered streams per pool (PyTorch: ~100 per device) */
#define TS_MAX_BATCHES 4
typedef struct ts_stream_ent {
    uint64_t stream;
    bool capturing;
    ts_index *pending; /* stream-ordered frees reusable on this stream */
    uint64_t free_seq; /* the latest stream-ordered free on it */
} ts_stream_ent;
typedef struct ts_fence_batch {
    uint64_t seq;   /* frees up to seq are safe when all fences are done */
    uint64_t epoch; /* fence epoch begun just before its records */
    int nfences;
    uint64_t fences[TS_MAX_STREAMS];
    uint64_t streams[TS_MAX_STREAMS];
    uint8_t done[TS_MAX_STREAMS];
} ts_fence_batch;

struct ts_tcache;
typedef struct ts_plan ts_plan;
struct ts_pool {
    pthread_mutex_t lock;
    ts_pool_config cfg;
    ts_page_provider prov;
    int id;
    uint64_t gran;
    /* expandable */
    uint64_t va_base, va_size;
    ts_segment arena[TS_NKINDS]; /* by kind */
    ts_page *pages;
    uint64_t npages;
    int32_t idle_head, idle_tail;
    uint64_t idle_count, mapped_count;
    bool unmapped_dirty; /* pages were unmapped under free blocks of index[]: resplit them */
    /* While a step plan is in force: the pages its slots and the blocks it
     * keeps lie on, moved elsewhere only when no other idle page can be. */
    const uint8_t *move_keep;
    /* caching / off */
    ts_segment *segs;
    uint64_t nsegs;
    /* blocks */
    ts_block_slab slab;
    /* Free blocks: index[kind] holds those whose pages are all mapped
     * (expandable) or all free blocks (caching); uindex[kind] the expandable
     * arenas' free runs of whole unmapped pages.  Adjacent free blocks of the
     * same index are always merged. */
    ts_index index[TS_NKINDS];
    ts_index uindex[TS_NKINDS];
    /* Expandable: freed blocks of TS_KEEP_MIN bytes or more, kept whole and
     * unmerged for a request of their exact size (a training step asks for
     * the same large sizes again: logits, attention scores), so that the
     * next step finds them where they were instead of a hole cut by smaller
     * requests; seq holds the growth generation they were kept at.  Those
     * unused for two growths, and all under memory pressure, go to index. */
    ts_index kindex;
    uint64_t grow_gen;    /* growths of the expandable arenas so far */
    bool grow_settled;    /* TS_GROW_STEP_PLAN: a plan was adopted, or the warm-up is over */
    uint64_t grow_budget; /* reserved bytes the growth in progress may create up to */
    ts_block_map map;
    ts_plan *plan; /* expandable with cfg.step_plan: the step plan */
    /* fences */
    ts_stream_ent streams[TS_MAX_STREAMS];
    int nstreams, ncapturing;
    uint64_t seq, safe_seq;
    /* Only the streams of the frees a fence covers get one: a stream-ordered
     * free waits for its own stream alone (as the driver's pools reuse a
     * completed free on any stream), a synchronous one for every stream.
     * sync_free_seq: the latest synchronous free; fenced_seq: the latest
     * free a recorded batch covers. */
    uint64_t sync_free_seq, fenced_seq;
    ts_block *q_head, *q_tail; /* pending FIFO, oldest first */
    ts_fence_batch *batches;   /* ring of TS_MAX_BATCHES */
    int batch_first, batch_count;
    /* Fence epochs for thread-cached synchronous frees: fence_epoch is bumped
     * (under the lock) when a fence check begins; safe_epoch is the epoch of
     * the latest check that proved every free before it safe.  Read without
     * the lock by the thread caches: a line of their own. */
    struct {
        uint64_t fence_epoch, safe_epoch;
    } __attribute__((aligned(64))) ep;
    /* thread caches; tc_exits: exiting threads that took this pool from
     * their cache and may still lock it (both under alloc_tcache.c's registry) */
    struct ts_tcache *tcaches;
    uint32_t tc_exits;
    /* bytes one thread's cache may hold parked (ts_tcache_fit_cap, under the
     * lock; read without it by the caches) */
    uint64_t tc_cap;
    /* stats (under lock) */
    uint64_t reserved, held, pending_bytes;
    uint64_t peak_reserved, peak_held, held_at_peak;
    /* what a memory pool's reserved attributes show: reserved less the
     * live synchronous blocks (alloc_stats.c), its peak, and the reserved
     * figure it was last noted at */
    uint64_t pool_reserved_peak, pool_noted_reserved;
    /* Bytes requested by live stream-ordered blocks (allocation stream not
     * TS_STREAM_NONE) and their peak, exact on every path (the thread caches'
     * hits and frees included): a default memory pool's used figures, which
     * must match the driver's to the byte (its pool holds no cudaMalloc
     * memory).  live_bytes also counts what the thread caches hold parked
     * from stream-ordered frees (their parked_live), so that a thread's
     * cached free and reuse make no locked read-modify-write: the live
     * figure is live_bytes less every cache's parked_live
     * (ts_tcache_live_now).  A line of their own: the thread caches' hits
     * read them.  sync_live: the live synchronous blocks' bytes (block
     * sizes), which its reserved figures leave out. */
    uint64_t live_bytes __attribute__((aligned(64))), live_peak, sync_live;
    uint64_t live_blocks __attribute__((aligned(64))), allocs, frees, cache_hits, ooms;
    uint64_t driver_calls, fence_calls, fence_records, fence_waits, page_moves;
    uint64_t shadow_moves; /* moves made in advance that became the page (no driver call then) */
    uint64_t idle_queries; /* stream_idle calls (provider) */
    uint64_t tc_hits_flushed;
    ts_oom_report last_oom;
};

/* alloc_segment.c: the virtual range and its pages (expandable mode). */
int ts_seg_init_arenas(ts_pool *p);
void ts_seg_fini_arenas(ts_pool *p);
/* Takes a reference on every page under [addr, addr+size) and maps the
 * missing ones (new handles, or idle pages' handles moved when the memory
 * limit or the device is reached).  On failure nothing changed and the
 * status is TS_PROV_OOM or TS_PROV_ERROR. */
int ts_seg_pages_get(ts_pool *p, uint64_t addr, uint64_t size);
/* Drops the references; pages left without one become idle at seq. */
void ts_seg_pages_put(ts_pool *p, uint64_t addr, uint64_t size, uint64_t seq);
/* Unmaps and releases idle pages whose fences are done and that became idle
 * before the monotonic time idle_before_ns (UINT64_MAX: all); returns the
 * pages freed. */
uint64_t ts_seg_release_idle(ts_pool *p, uint64_t idle_before_ns);
/* Largest run of mapped pages inside [addr, addr+size). */
uint64_t ts_seg_mapped_run(ts_pool *p, uint64_t addr, uint64_t size);
/* A block of rsize bytes for a request that no free block over mapped pages
 * holds: placed where it maps the fewest new pages (next to mapped free
 * space), its pages mapped.  TS_PROV_OK with *out detached from every index,
 * else TS_PROV_OOM (no room or memory) or TS_PROV_ERROR. */
int ts_seg_grow(ts_pool *p, int kind, uint64_t rsize, ts_block **out);
/* The block of kind's arena that holds addr, or NULL: a walk of the arena
 * from `near` (any block record, NULL: the first), for the step plan's
 * placements. */
ts_block *ts_seg_block_at(ts_pool *p, int kind, ts_block *near, uint64_t addr);
/* Exactly [addr, addr+size) as one block, its pages referenced and mapped:
 * first and the blocks after it up to the one holding the range's last byte
 * are out of every index (free ones, or pending ones an allocation on their
 * stream claimed), those outside the range being free; the parts outside
 * are filed free.  *out is the block, also on failure (TS_PROV_OOM or
 * TS_PROV_ERROR: nothing referenced, the caller files it back). */
int ts_seg_take_run(ts_pool *p, ts_block *first, uint64_t addr, uint64_t size, ts_block **out);
/* Before a step plan's first request: the unmapped pages of arena `kind`
 * it asks for (first_use, by page from the arena's first: the request of
 * its first period that first needs it, UINT64_MAX for none) under free
 * blocks, earliest first, each with an idle page the plan does not need
 * (p->move_keep), moved; while idle pages last.  Those left get the
 * handles of pages the plan does not need that turn idle before they are
 * asked for (death: the request before which every block over the page is
 * freed, UINT64_MAX when unknown) mapped as shadows (ts_seg_shadow_map):
 * moves made now, taken up without a driver call.  They stay idle.
 * Returns how many were moved or shadowed. */
uint64_t ts_seg_move_in(ts_pool *p, int kind, const uint64_t *first_use, const uint64_t *death);
/* Maps the handle of mapped page o at the unmapped page i too (its shadow,
 * access set): when o turns idle and safe, a request for page i takes the
 * handle there with no driver call (a move made in advance).  False when
 * the driver refused. */
bool ts_seg_shadow_map(ts_pool *p, uint64_t i, uint64_t o);
/* Unmaps every shadow (before the pages are re-backed elsewhere). */
void ts_seg_shadows_drop(ts_pool *p);
/* Files a free block that is in no index (index or uindex by its pages). */
void ts_seg_file_free(ts_pool *p, ts_block *b);
/* Monotonic clock, nanoseconds. */
uint64_t ts_seg_now_ns(void);

/* alloc_fence.c */
ts_stream_ent *ts_fence_stream(ts_pool *p, uint64_t stream, bool create);
void ts_fence_pend(ts_pool *p, ts_block *b, uint64_t stream, bool stream_ordered);
/* Takes a PENDING block out of its stream's index for reuse on that stream,
 * cut to size (the remainder stays pending in its place). */
void ts_fence_take_pending(ts_pool *p, ts_block *b, uint64_t size);
/* Cuts a PENDING block to size bytes; the remainder (returned, or NULL when
 * it cannot be cut) stays pending in its place. */
ts_block *ts_fence_split_pending(ts_pool *p, ts_block *b, uint64_t size);
/* Takes a PENDING block whole out of its stream's index and the FIFO, for
 * an allocation on that stream (stream order protects it). */
void ts_fence_claim(ts_pool *p, ts_block *b);
/* b is a stream-ordered free on `stream` that an allocation there may take. */
bool ts_fence_pending_on(ts_pool *p, const ts_block *b, uint64_t stream);
/* Queries completed batches (never blocks) and moves safe blocks to the index. */
void ts_fence_poll(ts_pool *p);
/* Records a batch if frees are pending and none covers them; waits for all
 * batches; drains.  Returns false if fences cannot be used now (capture). */
bool ts_fence_sync(ts_pool *p);
/* A fence check for thread-cached synchronous frees even when the FIFO is
 * empty: completed batches, else every stream idle (advances safe_epoch),
 * else a batch recorded for a later check.  Never blocks. */
void ts_fence_refresh(ts_pool *p);
void ts_fence_fini(ts_pool *p);
/* A live block b, already out of the map, is freed (p->lock held): counted,
 * then pending behind fences (given back at once in the off mode), its pages
 * released to idle in the expandable mode. */
void ts_fence_free_locked(ts_pool *p, ts_block *b, uint64_t stream, bool stream_ordered);
/* Slow-path free of a block taken off a thread cache (state TCACHED), p->lock
 * held: sync for a synchronous free (pending on every stream), else
 * stream-ordered on b->stream. */
void ts_fence_free_cached_locked(ts_pool *p, ts_block *b, bool sync);

/* alloc_plan.c: the step plan (expandable mode, cfg.step_plan). */
int ts_plan_init(ts_pool *p);
void ts_plan_fini(ts_pool *p);
/* A planned-kind block went live / its program freed it. */
void ts_plan_on_alloc(ts_pool *p, ts_block *b);
void ts_plan_on_free(ts_pool *p, const ts_block *b);
/* The next planned-kind request placed where the plan says (before a plan:
 * at the lowest free range): TS_PROV_OK with *out
 * (its pages mapped), else TS_PROV_OOM (no plan, another request than the
 * plan's, or its range not free: best fit serves it) or TS_PROV_ERROR. */
int ts_plan_take(ts_pool *p, int kind, uint64_t rsize, uint64_t stream, ts_block **out);
void ts_plan_stats_get(const ts_pool *p, ts_plan_stats *o);

/* alloc_tcache.c */
/* 1: served; 0: miss; TS_TC_STALE (below). */
/* A hit is counted live here (ts_live_add's work, done without a locked
 * operation when the block was parked still counted). */
int ts_tcache_alloc(ts_pool *p, uint64_t size, uint64_t requested, uint64_t stream, uint64_t *ptr);
/* Parks a stream-ordered free; `counted`: the block's requested bytes that
 * are still in live_bytes (0 when the caller took them out).  False: not
 * parked, and the caller takes `counted` out itself. */
bool ts_tcache_free(ts_pool *p, ts_block *b, uint64_t stream, uint64_t counted);
/* A synchronous free (cfg.sync_thread_cache): stamped with the fence epoch. */
bool ts_tcache_free_sync(ts_pool *p, ts_block *b, uint64_t stream);
/* ts_tcache_alloc's answer when it missed only because cached synchronous
 * frees of that size wait for a fence check. */
#define TS_TC_STALE 2
void ts_tcache_flush_all(ts_pool *p); /* with p->lock held */
/* After reserved changed (p->lock held): the bytes each cache may hold
 * parked follow the pool's size. */
void ts_tcache_fit_cap(ts_pool *p);
uint64_t ts_tcache_bytes(ts_pool *p);
uint64_t ts_tcache_hits(ts_pool *p);
void ts_tcache_detach_all(ts_pool *p); /* with p->lock held */
/* After detach_all and p->lock released: until no exiting thread can still
 * lock the pool (its memory may go then). */
void ts_tcache_wait_exits(ts_pool *p);
/* The pool's live bytes: live_bytes less what every cache holds parked. */
uint64_t ts_tcache_live_now(ts_pool *p);
/* Raises live_peak to the live bytes now, when they are above it. */
void ts_tcache_note_live_peak(ts_pool *p);

/* alloc_stats.c */
/* Fills p->last_oom for a failed request of `requested` bytes (p->lock held). */
void ts_stats_fill_oom(ts_pool *p, uint64_t requested);
/* The pool-reserved figure (what a memory pool's reserved attributes show)
 * noted in its peak, after an allocation changed reserved or at a query
 * (p->lock held); returns it. */
uint64_t ts_stats_note_pool(ts_pool *p);
/* Peaks after reserved or held bytes grew (p->lock held). */
static inline void ts_stats_note(ts_pool *p)
{
    if (p->reserved > p->peak_reserved) {
        p->peak_reserved = p->reserved;
        p->held_at_peak = p->held;
    } else if (p->reserved == p->peak_reserved && p->held > p->held_at_peak) {
        p->held_at_peak = p->held;
    }
    if (p->held > p->peak_held)
        p->peak_held = p->held;
}

/* Unlinks node from a doubly linked list through its prev/next fields;
 * *headp is the list's first node. */
#define TS_LIST_UNLINK(headp, node, prev, next)                                                              \
    do {                                                                                                     \
        if ((node)->prev)                                                                                    \
            (node)->prev->next = (node)->next;                                                               \
        else                                                                                                 \
            *(headp) = (node)->next;                                                                         \
        if ((node)->next)                                                                                    \
            (node)->next->prev = (node)->prev;                                                               \
    } while (0)
/* A block of `size` bytes allocated on `stream` for `requested` bytes went
 * live / stopped being live (any thread, no lock).  A stream-ordered one
 * counts the bytes asked for, not its rounded size: a pool's used-memory
 * attributes (torch's memory_allocated under cudaMallocAsync) count exactly
 * those on the driver; a synchronous one counts its size in sync_live. */
static inline void ts_live_add(ts_pool *p, uint64_t size, uint64_t requested, uint64_t stream)
{
    if (stream == TS_STREAM_NONE) {
        __atomic_add_fetch(&p->sync_live, size, __ATOMIC_RELAXED);
        return;
    }
    /* now is at least the live figure (parked bytes are in it): only above
     * the peak is the exact figure worth its walk over the caches */
    uint64_t now = __atomic_add_fetch(&p->live_bytes, requested, __ATOMIC_RELAXED);
    if (now > __atomic_load_n(&p->live_peak, __ATOMIC_RELAXED))
        ts_tcache_note_live_peak(p);
}
static inline void ts_live_sub(ts_pool *p, uint64_t size, uint64_t requested, uint64_t stream)
{
    if (stream == TS_STREAM_NONE)
        __atomic_sub_fetch(&p->sync_live, size, __ATOMIC_RELAXED);
    else
        __atomic_sub_fetch(&p->live_bytes, requested, __ATOMIC_RELAXED);
}

/* provider calls, counted: memory (VMM, segments) and fence checks apart,
 * since only the first change the device's mappings */
#define TS_PCALL(p, fn, ...) ((p)->driver_calls++, (p)->prov.fn((p)->prov.ctx, __VA_ARGS__))
#define TS_FCALL(p, fn, ...) ((p)->fence_calls++, (p)->prov.fn((p)->prov.ctx, __VA_ARGS__))

#endif
