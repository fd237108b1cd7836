/* alloc.h: trainshim's device memory allocator (one pool per device).
 *
 * Modes:
 *   expandable  one virtual range (va_factor x capacity) reserved once; 2 MiB
 *               physical pages (one handle each) mapped only under live
 *               blocks; an idle page (no live block) stays mapped until memory
 *               is needed elsewhere, then it is unmapped and its handle mapped
 *               where it is needed (so reserved = pages under live blocks at
 *               the peak); best fit with split/coalesce in virtual space.
 *               Requests < small_max come from a separate small arena so
 *               they never pin large pages.
 *   caching     PyTorch-like: segments from the provider's seg_alloc (2 MiB for
 *               small requests, 20 MiB for 1-10 MiB, else rounded to 2 MiB),
 *               best fit with split/coalesce inside segments; fully free
 *               segments are given back on OOM or trim.
 *   off         every request is its own seg_alloc of size rounded up to 512 B
 *               and seg_free at free: reserved == allocated.
 * Every block is 512-byte aligned and a multiple of 512 bytes; size 0 gives
 * ptr 0 with TS_ALLOC_OK; freeing ptr 0 is OK.
 *
 * Stream safety.  A synchronous free (cudaFree semantics) makes a block
 * reusable only after fences recorded on every registered stream after the
 * free completed; a stream-ordered free (cudaFreeAsync) on stream S is
 * reusable at once by an allocation on S and by others after the fence.
 * Before recording fences the pool asks the provider's optional stream_idle
 * on every registered stream: all idle means every free so far is safe with
 * no fence (one cheap query per stream; the common case of synchronous
 * cudaMalloc/cudaFree pairs on an idle or synchronized device).
 * Fences are recorded lazily (one batch over all streams, only when the free
 * memory at hand would need new pages) and waited for before the pool maps
 * new pages while frees are pending (memory over latency: a real cudaFree
 * would have waited for the whole device at the free) and before reporting
 * OOM.  No fence is recorded, queried or waited on while any registered
 * stream is marked capturing (then nothing pending is reused).  Streams seen
 * by alloc/free are registered automatically; the caller must register
 * every other stream work may run on (ts_pool_stream_add: the legacy stream 0
 * and each created stream; ts_pool_stream_remove before destroying one).
 *
 * Thread safety: all functions may be called concurrently, except
 * ts_pool_destroy and ts_pool_check (no other thread inside the pool).
 * Stream-ordered frees of blocks <= 4 MiB go to a per-thread cache (no lock,
 * no atomic read-modify-write) from which allocations of the same size on
 * the same stream by that thread are served; a free finds its block through
 * a lock-free (seqlock) lookup.  When
 * the pool runs out of memory (OOM retry), on trim and on stream removal it
 * drains the calling thread's cache at once and the other threads' caches
 * at their next call (at most 32 MiB each), and at thread exit; growing
 * drains them only when it waits for pending frees anyway (up to 32 MiB per
 * thread of cached blocks is the price of the fast path).  A free with
 * TS_FF_NO_CACHE never enters a cache.
 *
 * With cfg.sync_thread_cache, synchronous frees (cudaFree) of blocks <= 4 MiB
 * go to the thread cache too, stamped with the pool's fence epoch at the
 * free; an allocation on the same `stream` argument takes such a block only
 * once a fence check that began after the free found every registered
 * stream idle or its fences done (safe_epoch > the stamp).  A miss for want
 * of such a check runs one (ts_fence_refresh, under the lock), which makes
 * every block cached so far reusable at once: one stream query per
 * registered stream for up to TC_WAYS pairs. */
#ifndef TRAINSHIM_ALLOC_H
#define TRAINSHIM_ALLOC_H
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "alloc/alloc_provider.h"

enum ts_alloc_mode { TS_ALLOC_EXPANDABLE = 0, TS_ALLOC_CACHING = 1, TS_ALLOC_OFF = 2 };
enum ts_alloc_status { TS_ALLOC_OK = 0, TS_ALLOC_OOM = 1, TS_ALLOC_ERROR = 2, TS_ALLOC_INVALID = 3 };

/* alloc flags */
#define TS_AF_CAPTURING 0x1u /* the stream is capturing: no fence work, no thread cache */
/* free flags */
#define TS_FF_STREAM_ORDERED 0x1u /* cudaFreeAsync semantics on `stream` */
#define TS_FF_NO_CACHE 0x2u       /* never into a thread cache (the pool will not allocate again) */

#define TS_ALLOC_ALIGN 512u
#define TS_ALLOC_SMALL_MAX (1u << 20)

typedef struct ts_pool_config {
    int mode; /* enum ts_alloc_mode */
    int device;
    uint64_t capacity;      /* device memory, bytes (sizes the virtual range) */
    uint64_t memory_limit;  /* cap on reserved bytes; 0 = none */
    unsigned va_factor;     /* virtual range = va_factor * capacity; 0 = 4 */
    bool no_thread_cache;   /* serve stream-ordered frees only through the pool */
    bool sync_thread_cache; /* synchronous frees too go to the thread cache (see below) */
} ts_pool_config;

typedef struct ts_alloc_stats {
    uint64_t reserved_bytes, allocated_bytes;
    uint64_t peak_reserved_bytes, peak_allocated_bytes;
    uint64_t allocated_at_reserved_peak; /* allocated bytes while reserved was at its peak */
    double fragmentation;                /* 1 - allocated/reserved at the reserved peak */
    uint64_t largest_free_block;         /* largest free block usable without new memory */
    uint64_t thread_cached_bytes;        /* freed blocks held by per-thread caches */
    uint64_t pending_bytes;              /* freed blocks waiting for a fence */
    uint64_t live_blocks, segments, mapped_pages, idle_pages;
    uint64_t allocs, frees, cache_hits, thread_cache_hits, ooms;
    uint64_t driver_calls, fence_records, fence_waits, page_moves;
} ts_alloc_stats;

#define TS_OOM_TOP 8
typedef struct ts_oom_report {
    uint64_t requested, reserved, allocated, memory_limit, capacity;
    uint64_t largest_free_block;
    double fragmentation; /* 1 - allocated/reserved now */
    int ntop;
    uint64_t top_ptr[TS_OOM_TOP], top_size[TS_OOM_TOP]; /* largest live blocks */
} ts_oom_report;

typedef struct ts_pool ts_pool;

/* Creates a pool over prov (copied).  *status gets TS_ALLOC_OK or the error. */
ts_pool *ts_pool_create(const ts_pool_config *cfg, const ts_page_provider *prov, int *status);
/* Releases every mapping, handle, segment and the virtual range. */
void ts_pool_destroy(ts_pool *p);
int ts_pool_alloc(ts_pool *p, uint64_t size, uint64_t stream, unsigned flags, uint64_t *ptr);
/* The thread cache alone (no lock, no driver call): true if it served. */
bool ts_pool_alloc_cached(ts_pool *p, uint64_t size, uint64_t stream, uint64_t *ptr);
/* Frees a pointer from ts_pool_alloc; unknown or already free -> TS_ALLOC_INVALID. */
int ts_pool_free(ts_pool *p, uint64_t ptr, uint64_t stream, unsigned flags);
/* Base and size of the live block holding ptr (cuMemGetAddressRange); 0 if none. */
int ts_pool_lookup(ts_pool *p, uint64_t ptr, uint64_t *base, uint64_t *size);
int ts_pool_stream_add(ts_pool *p, uint64_t stream);
/* Before the stream is destroyed: waits for a fence on it (unless capturing). */
int ts_pool_stream_remove(ts_pool *p, uint64_t stream);
int ts_pool_stream_set_capturing(ts_pool *p, uint64_t stream, bool capturing);
/* Gives back every idle page / fully free segment and thread-cached block,
 * after their fences. */
int ts_pool_trim(ts_pool *p);
void ts_pool_stats(ts_pool *p, ts_alloc_stats *out);
/* The report of the last TS_ALLOC_OOM (zeroed if none). */
void ts_pool_last_oom(ts_pool *p, ts_oom_report *out);
/* A mapped page of an expandable pool as ts_pool_pages_walk shows it. */
typedef struct ts_page_view {
    uint64_t va, size; /* the page */
    uint64_t handle;   /* its physical handle: the callback may put another one mapped at va */
    bool live;         /* a live or thread-cached block touches it */
    bool exported;     /* under an IPC-exported block: must not move */
} ts_page_view;
/* Calls fn for every mapped page of p's expandable arenas in address order,
 * under p's lock (so nothing maps, unmaps or moves pages meanwhile); fn may
 * swap the page's handle by setting v->handle.  A nonzero answer stops the
 * walk and is returned; 0 for caching and off pools. */
int ts_pool_pages_walk(ts_pool *p, int (*fn)(void *arg, ts_page_view *v), void *arg);
/* Full consistency check (tests): 0, or -1 with a message in err. */
int ts_pool_check(ts_pool *p, char *err, size_t errlen);
const char *ts_alloc_mode_name(int mode);

/* ======================= internals (shim/alloc_*.c and tests) ============= */
enum ts_block_state { TS_B_FREE = 1, TS_B_PENDING = 2, TS_B_LIVE = 3, TS_B_TCACHED = 4 };
enum { TS_KIND_LARGE = 0, TS_KIND_SMALL = 1 };

struct ts_index;
struct ts_segment;
typedef struct ts_block {
    uint64_t addr, size, requested;
    struct ts_block *prev, *next;   /* address neighbours in the same segment */
    struct ts_block *fprev, *fnext; /* list of the index holding it */
    struct ts_block *qprev, *qnext; /* pending FIFO (state PENDING) */
    struct ts_index *index;         /* index holding it (FREE, or PENDING on a stream) */
    struct ts_segment *seg;
    uint64_t seq;    /* free sequence number while PENDING */
    uint64_t stream; /* allocation stream / stream of a stream-ordered free */
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
/* Merges b with its FREE neighbours (removing them from ix); returns the result. */
ts_block *ts_block_coalesce(ts_block_slab *s, ts_index *ix, ts_block *b);

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
    uint8_t fresh;        /* mapped by the ts_seg_pages_get in progress */
    int32_t iprev, inext; /* idle LRU (mapped, refs == 0) */
    uint64_t idle_seq;    /* free sequence at which it became idle */
} ts_page;
typedef struct ts_segment {
    uint64_t base, size;
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
struct ts_pool {
    pthread_mutex_t lock;
    ts_pool_config cfg;
    ts_page_provider prov;
    int id;
    uint64_t gran;
    /* expandable */
    uint64_t va_base, va_size;
    ts_segment arena[2]; /* [TS_KIND_LARGE], [TS_KIND_SMALL] */
    ts_page *pages;
    uint64_t npages;
    int32_t idle_head, idle_tail;
    uint64_t idle_count, mapped_count;
    /* caching / off */
    ts_segment *segs;
    uint64_t nsegs;
    /* blocks */
    ts_block_slab slab;
    ts_index index[2];
    ts_block_map map;
    /* fences */
    ts_stream_ent streams[TS_MAX_STREAMS];
    int nstreams, ncapturing;
    uint64_t seq, safe_seq;
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
    /* thread caches */
    struct ts_tcache *tcaches;
    /* stats (under lock) */
    uint64_t reserved, held, pending_bytes;
    uint64_t peak_reserved, peak_held, held_at_peak;
    uint64_t live_blocks, allocs, frees, cache_hits, ooms;
    uint64_t driver_calls, fence_records, fence_waits, page_moves;
    uint64_t idle_queries; /* stream_idle calls (provider) */
    uint64_t tc_hits_flushed;
    ts_oom_report last_oom;
};

/* alloc_segment.c: the virtual range and its pages (expandable mode). */
int ts_seg_init_arenas(ts_pool *p);
void ts_seg_fini_arenas(ts_pool *p);
/* Takes a reference on every page under [addr, addr+size) and maps the
 * missing ones (moving idle pages or creating handles).  On failure nothing
 * changed and the status is TS_PROV_OOM or TS_PROV_ERROR. */
int ts_seg_pages_get(ts_pool *p, uint64_t addr, uint64_t size);
/* Drops the references; pages left without one become idle at seq. */
void ts_seg_pages_put(ts_pool *p, uint64_t addr, uint64_t size, uint64_t seq);
/* Unmaps and releases idle pages whose fences are done; returns pages freed. */
uint64_t ts_seg_release_idle(ts_pool *p);
/* Largest run of mapped pages inside [addr, addr+size). */
uint64_t ts_seg_mapped_run(ts_pool *p, uint64_t addr, uint64_t size);

/* alloc_fence.c */
ts_stream_ent *ts_fence_stream(ts_pool *p, uint64_t stream, bool create);
void ts_fence_pend(ts_pool *p, ts_block *b, uint64_t stream, bool stream_ordered);
/* Takes a PENDING block out of its stream's index for reuse on that stream,
 * cut to size (the remainder stays pending in its place). */
void ts_fence_take_pending(ts_pool *p, ts_block *b, uint64_t size);
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
/* Frees the block into the main index: coalesce (and, for arenas, nothing else). */
void ts_pool_release_block(ts_pool *p, ts_block *b);

/* alloc_tcache.c */
/* 1: served; 0: miss; TS_TC_STALE (below). */
int ts_tcache_alloc(ts_pool *p, uint64_t size, uint64_t stream, uint64_t *ptr);
bool ts_tcache_free(ts_pool *p, ts_block *b, uint64_t stream);
/* A synchronous free (cfg.sync_thread_cache): stamped with the fence epoch. */
bool ts_tcache_free_sync(ts_pool *p, ts_block *b, uint64_t stream);
/* ts_tcache_alloc's answer when it missed only because cached synchronous
 * frees of that size wait for a fence check. */
#define TS_TC_STALE 2
void ts_tcache_flush_all(ts_pool *p); /* with p->lock held */
uint64_t ts_tcache_bytes(ts_pool *p);
uint64_t ts_tcache_hits(ts_pool *p);
void ts_tcache_detach_all(ts_pool *p);
/* Slow-path free of a block taken off a thread cache (state TCACHED), p->lock
 * held: sync for a synchronous free (pending on every stream), else
 * stream-ordered on b->stream. */
void ts_pool_free_cached_locked(ts_pool *p, ts_block *b, bool sync);

/* provider calls, counted */
#define TS_PCALL(p, fn, ...) ((p)->driver_calls++, (p)->prov.fn((p)->prov.ctx, __VA_ARGS__))

static inline uint64_t ts_round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
/* ---- IPC exports of expandable-pool blocks (alloc_segment.c, used by
 * shim/devmem/devmem_ipc.c) ---------------------------------------------------- */
/* A live block of an expandable pool and the pages under it, seen under the
 * pool's lock. */
typedef struct ts_seg_block_view {
    uint64_t base, size; /* the block */
    uint64_t stream;     /* its allocation stream (devmem.c: UINT64_MAX = synchronous) */
    uint64_t first_page_va, gran;
    uint64_t npages;
    int device;
    const ts_page *pages; /* npages entries, all mapped */
} ts_seg_block_view;
/* Finds the expandable pool whose virtual range holds ptr and, under its
 * lock, the live block holding ptr; calls fn (still under the lock) and
 * returns its answer.  TS_IPC_NOT_OURS if no pool holds ptr; no_block if a
 * pool holds it but no live block does. */
int ts_seg_with_live_block(uint64_t ptr, int no_block,
                           int (*fn)(void *arg, ts_pool *p, const ts_seg_block_view *v), void *arg);
/* Called under the pool's lock when [addr, addr+size) stops being live
 * memory (a block freed, the pool destroyed) while ts_seg_live_exports > 0. */
extern void (*ts_seg_export_gone)(ts_pool *p, uint64_t addr, uint64_t size);
extern unsigned ts_seg_live_exports; /* atomic: exports alive in the process */
/* True if the block at addr is exported: its free must reach
 * ts_seg_pages_put (not a thread cache, which would hand the same address to
 * the next allocation of that size while the handle still opens it).  One
 * atomic load when nothing is exported.  Any thread, with or without
 * p->lock. */
bool ts_seg_block_exported(ts_pool *p, uint64_t addr);
extern bool (*ts_seg_export_has)(ts_pool *p, uint64_t addr);
#endif
