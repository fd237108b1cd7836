/* alloc.h: trainshim's device memory allocator (one pool per device).
 *
 * Modes:
 *   expandable  one virtual range (va_factor x capacity) reserved once; 2 MiB
 *               physical pages (one handle each) mapped under live blocks.
 *               A freed page stays mapped where it is (idle), so that a
 *               training loop's steady state makes no driver call: a request
 *               is served by best fit among free blocks whose pages are all
 *               mapped; only when none holds it does it grow, placed where it
 *               maps the fewest new pages (next to mapped free space).  An
 *               idle page is unmapped only under pressure (past the growth
 *               budget cfg.grow_slack_pct, at the memory limit or when the
 *               device refuses a page, its handle moves to where it is
 *               needed; released on OOM), on trim, or once idle longer than
 *               cfg.idle_release_ns.  Requests < small_max come
 *               from a separate small arena so they never pin large pages.
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
 * drains them only when it waits for pending frees anyway (cached blocks,
 * up to 1/256 of the pool's reserved bytes per thread, 4 to 32 MiB, are the
 * price of the fast path).  A free with
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
/* The stream of synchronous allocations and frees (cudaMalloc, cudaFree):
 * a live block's stream is its allocation's (thread caches reuse a block only
 * on the stream it was freed on, or synchronously after a synchronous free). */
#define TS_STREAM_NONE UINT64_MAX
#define TS_AF_CAPTURING 0x1u /* the stream is capturing: no fence work, no thread cache */
/* free flags */
#define TS_FF_STREAM_ORDERED 0x1u /* cudaFreeAsync semantics on `stream` */
#define TS_FF_NO_CACHE 0x2u       /* never into a thread cache (the pool will not allocate again) */

#define TS_ALLOC_ALIGN 512u
#define TS_ALLOC_SMALL_MAX (1u << 20)
/* x rounded up to a multiple of a (a block is ts_round_up(size, TS_ALLOC_ALIGN)). */
static inline uint64_t ts_round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

typedef struct ts_pool_config {
    int mode; /* enum ts_alloc_mode */
    int device;
    uint64_t capacity;      /* device memory, bytes (sizes the virtual range) */
    uint64_t memory_limit;  /* cap on reserved bytes; 0 = none */
    unsigned va_factor;     /* virtual range = va_factor * capacity; 0 = 4 */
    bool no_thread_cache;   /* serve stream-ordered frees only through the pool */
    bool sync_thread_cache; /* synchronous frees too go to the thread cache (see below) */
    bool step_plan; /* expandable: blocks over 4 MiB in an arena of their own, placed by the step plan */
    uint64_t idle_release_ns; /* expandable: unmap pages idle this long (0: never) */
    /* Expandable: growth creates pages while reserved stays under the
     * allocated peak plus this percentage, then moves idle pages' handles
     * (VMM calls, fewer reserved bytes); 0: moves whenever an idle page is
     * safe to take; TS_GROW_UNBOUNDED: moves only at the memory limit. */
    uint32_t grow_slack_pct;
} ts_pool_config;
#define TS_GROW_UNBOUNDED UINT32_MAX
/* With the step plan: planned blocks' pages move whenever an idle page is
 * safe to take until the plan has settled (or none was found in the first
 * allocations), then growth is unbounded: the first steps stay within the
 * allocated peak, and the plan's pages, once mapped, serve every later step
 * without a driver call.  Other blocks: unbounded. */
#define TS_GROW_STEP_PLAN (UINT32_MAX - 1)

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
    uint64_t driver_calls; /* memory calls: VMM (create, map, unmap, release, access) and segments */
    uint64_t fence_calls;  /* event record/query/sync and stream queries, to know freed memory idle */
    uint64_t fence_records, fence_waits, page_moves;
    uint64_t shadow_moves; /* page moves made in advance and taken up with no driver call */
    /* bytes requested by live stream-ordered blocks, peak exact on every path */
    uint64_t live_bytes, peak_live_bytes;
} ts_alloc_stats;

/* The step plan of the expandable mode (alloc_plan.c). */
typedef struct ts_plan_stats {
    uint64_t adopted, drops, failed; /* plans made, dropped, that could not be made */
    uint64_t period, footprint;      /* of the latest plan: requests, bytes from its window's start */
    uint64_t hits, misses;           /* placements at the plan's address, or not */
    uint64_t suspends, resumes;      /* the program left the plan's pattern for a while, came back */
    /* The pool's driver calls when the plan in force settled (settled: it
     * is past its transition): the report's "driver calls since" */
    uint64_t settled_calls;
    bool enabled, active, settled; /* enabled: the pool plans (cfg.step_plan) */
} ts_plan_stats;

#define TS_OOM_TOP 8
typedef struct ts_oom_report {
    uint64_t requested, reserved, allocated, memory_limit, capacity;
    uint64_t largest_free_block;
    double fragmentation; /* 1 - allocated/reserved now */
    int ntop;
    uint64_t top_ptr[TS_OOM_TOP], top_size[TS_OOM_TOP]; /* largest live blocks */
} ts_oom_report;

typedef struct ts_pool ts_pool;
void ts_pool_plan_stats(ts_pool *p, ts_plan_stats *o);

/* Creates a pool over prov (copied).  *status gets TS_ALLOC_OK or the error. */
ts_pool *ts_pool_create(const ts_pool_config *cfg, const ts_page_provider *prov, int *status);
/* Releases every mapping, handle, segment and the virtual range. */
void ts_pool_destroy(ts_pool *p);
int ts_pool_alloc(ts_pool *p, uint64_t size, uint64_t stream, unsigned flags, uint64_t *ptr);
/* The thread cache alone (no lock, no driver call): true if it served. */
bool ts_pool_alloc_cached(ts_pool *p, uint64_t size, uint64_t stream, uint64_t *ptr);
/* Frees a pointer from ts_pool_alloc; unknown or already free -> TS_ALLOC_INVALID. */
int ts_pool_free(ts_pool *p, uint64_t ptr, uint64_t stream, unsigned flags);
/* Base and size of the live block starting at ptr; 0 if none.  Lock-free. */
int ts_pool_lookup(ts_pool *p, uint64_t ptr, uint64_t *base, uint64_t *size);
/* The live block holding ptr, anywhere inside it: its base and the bytes
 * its allocation asked for (cuMemGetAddressRange); 0 if none.  Takes the
 * pool's lock and walks the block's segment. */
int ts_pool_range(ts_pool *p, uint64_t ptr, uint64_t *base, uint64_t *size);
int ts_pool_stream_add(ts_pool *p, uint64_t stream);
/* Before the stream is destroyed: waits for a fence on it (unless capturing). */
int ts_pool_stream_remove(ts_pool *p, uint64_t stream);
int ts_pool_stream_set_capturing(ts_pool *p, uint64_t stream, bool capturing);
/* Gives back every idle page / fully free segment and thread-cached block,
 * after their fences. */
int ts_pool_trim(ts_pool *p);
void ts_pool_stats(ts_pool *p, ts_alloc_stats *out);
/* Restarts the usage attributes' peaks (ts_pool_usage_of) from now: peak
 * reserved = reserved, peak live = live (a memory pool's *_HIGH attributes
 * set to 0).  ts_pool_stats' peaks stay the whole run's. */
void ts_pool_reset_peaks(ts_pool *p, bool reserved, bool live);
/* The four figures of a memory pool's usage attributes, cheaply (no walk
 * of the free blocks as ts_pool_stats makes): reserved and its peak (both
 * without the live synchronous blocks, which no CUDA pool holds), live
 * stream-ordered bytes and their peak. */
typedef struct ts_pool_usage {
    uint64_t reserved, peak_reserved, live, peak_live;
} ts_pool_usage;
void ts_pool_usage_of(ts_pool *p, ts_pool_usage *out);
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
/* The size of one page of p (its provider's granularity); 0 before pages exist. */
uint64_t ts_pool_page_size(const ts_pool *p);
/* Full consistency check (tests): 0, or -1 with a message in err. */
int ts_pool_check(ts_pool *p, char *err, size_t errlen);
const char *ts_alloc_mode_name(int mode);

/* Pool operations for the device front (shim/devmem): */
/* The mode the pool runs in (enum ts_alloc_mode). */
int ts_pool_mode(const ts_pool *p);
/* True if ptr lies in memory the pool reserved (its virtual range or one of
 * its segments), live block or not. */
bool ts_pool_owns(ts_pool *p, uint64_t ptr);
/* Calls fn for every run of adjacent mapped pages of an expandable pool (none
 * in the other modes), under the pool's lock: a page mapped meanwhile waits,
 * and the provider's set_access sees whatever fn changed before it. */
void ts_pool_for_each_mapped(ts_pool *p, void (*fn)(void *arg, uint64_t va, uint64_t size), void *arg);

/* ---- IPC exports of expandable-pool blocks (alloc_segment.c, used by
 * shim/devmem/devmem_ipc.c) ---------------------------------------------------- */
/* A live block of an expandable pool and the pages under it, seen under the
 * pool's lock. */
#define TS_SEG_NOT_OURS (-1)
typedef struct ts_seg_block_view {
    uint64_t base, size; /* the block */
    uint64_t stream;     /* its allocation stream (devmem.c: UINT64_MAX = synchronous) */
    uint64_t first_page_va, gran;
    uint64_t npages;
    int device;
    const struct ts_page *pages; /* npages entries, all mapped: ts_seg_view_handle */
} ts_seg_block_view;
/* The allocation handle of the view's i-th page (i < npages). */
uint64_t ts_seg_view_handle(const ts_seg_block_view *v, uint64_t i);
/* Finds the expandable pool whose virtual range holds ptr and, under its
 * lock, the live block holding ptr; calls fn (still under the lock) and
 * returns its answer.  TS_SEG_NOT_OURS if no pool holds ptr; no_block if a
 * pool holds it but no live block does. */
int ts_seg_with_live_block(uint64_t ptr, int no_block,
                           int (*fn)(void *arg, ts_pool *p, const ts_seg_block_view *v), void *arg);
/* Called under the pool's lock when [addr, addr+size) stops being live
 * memory (a block freed, the pool destroyed) while ts_seg_live_exports > 0. */
extern void (*ts_seg_export_gone)(ts_pool *p, uint64_t addr, uint64_t size);
extern unsigned ts_seg_live_exports; /* atomic: exports alive in the process */
extern bool (*ts_seg_export_has)(ts_pool *p, uint64_t addr);
/* True if the block at addr is exported: its free must reach
 * ts_seg_pages_put (not a thread cache, which would hand the same address to
 * the next allocation of that size while the handle still opens it).  One
 * atomic load when nothing is exported (inline: every free asks).  Any
 * thread, with or without p->lock. */
static inline bool ts_seg_block_exported(ts_pool *p, uint64_t addr)
{
    return __atomic_load_n(&ts_seg_live_exports, __ATOMIC_ACQUIRE) && ts_seg_export_has
           && ts_seg_export_has(p, addr);
}
#endif
