/* alloc_tcache.c: per-thread caches of stream-ordered frees.  A thread's free
 * of a block <= 4 MiB with cudaFreeAsync semantics parks the block in the
 * thread's cache (keyed by exact size and stream); an allocation of the same
 * size on the same stream by that thread takes it back without the pool's
 * lock and without any atomic read-modify-write: only the owner thread
 * touches its slots.  Stream order makes this safe without a fence.  Parked
 * blocks stay "held" in the pool (their pages stay mapped).  When the pool
 * needs memory (before growing, on OOM, on trim) it drains the calling
 * thread's cache at once and asks every other cache to drain itself at its
 * owner's next allocator call (flush_req); a thread's cache is drained at
 * thread exit.  So at most 32 MiB per other thread can lag behind an OOM.
 *
 * A cache holds at most 1/256 of the pool's reserved bytes (4 to 32 MiB):
 * parked blocks are held, so the pool's reserved peak covers them, and they
 * are often sizes a later phase of the step does not ask for.  A full
 * 32 MiB cost a small model several percent (a 4-layer GPT of 0.55 GB
 * reserved 1.096x its allocated peak with it, 1.049x with 4 MiB); in a
 * GPT-2-small's 18 GB it is lost in the noise.  A stream-ordered free that
 * would pass the cap empties the cache into the pool first (one lock for
 * the lot), so the cache holds the latest frees: refusing the new block
 * instead kept blocks parked long ago, and the pool's free ranges drifted
 * from step to step until a request found no hole, late in an otherwise
 * settled run.  A synchronous free is refused instead: the full cache of
 * stale synchronous frees is what asks for the fence check that makes them
 * reusable (TS_TC_STALE).
 *
 * Synchronous frees (cfg.sync_thread_cache) park here too, stamped with the
 * pool's fence epoch (alloc_fence.c): they serve an allocation only once
 * safe_epoch has passed the stamp.  Each cache is a line-aligned allocation
 * of its own and each block record a line of its own, so two threads' fast
 * paths never write the same cache line. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "alloc/alloc_internal.h"

#define TC_SLOTS 64
#define TC_WAYS 8
#define TC_MAX_BLOCK (4ull << 20)
#define TC_MAX_BYTES (32ull << 20)
#define TC_MIN_BYTES (4ull << 20)
#define TC_CAP_SHARE 256 /* of the pool's reserved bytes */
#define TC_MAX_POOLS 64

typedef struct ts_tcache {
    int lock;                      /* thread exit vs pool destroy only */
    int flush_req;                 /* set by the pool, read by the owner */
    ts_pool *pool;                 /* NULL once the pool is gone */
    struct ts_tcache *next, *prev; /* the pool's list (under registry) */
    uint64_t bytes, hits;          /* written by the owner, read by stats */
    uint64_t parked_live;          /* parked blocks' bytes still in the pool's live_bytes (owner) */
    /* A slot's keys on lines of their own: a lookup reads one line of sizes
     * and touches no block record until it has found its block. */
    struct tc_slot {
        uint64_t size[TC_WAYS]; /* 0: empty way */
        uint64_t stream[TC_WAYS];
        uint64_t epoch[TC_WAYS]; /* TC_ASYNC, or a synchronous free's stamp */
        ts_block *block[TC_WAYS];
    } slot[TC_SLOTS];
} __attribute__((aligned(64))) ts_tcache;
#define TC_ASYNC UINT64_MAX

static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;
/* initial-exec: no __tls_get_addr call on the fast path (the shim is preloaded,
 * so its TLS is in the static block) */
static __thread ts_tcache *tls_tc[TC_MAX_POOLS] __attribute__((tls_model("initial-exec")));

static inline bool ts_unlikely_flush(ts_tcache *tc)
{
    return __builtin_expect(__atomic_load_n(&tc->flush_req, __ATOMIC_RELAXED), 0);
}

static inline unsigned slot_of(uint64_t size, uint64_t stream)
{
    uint64_t h = (size >> 9) * 0x9e3779b97f4a7c15ull ^ stream * 0xc2b2ae3d27d4eb4full;
    return (unsigned)(h >> 58) & (TC_SLOTS - 1);
}

/* Empties a cache into its pool; pool lock held, and the caller is the owner
 * or the owner is gone (thread exit, pool destruction). */
static void drain_locked(ts_pool *p, ts_tcache *tc)
{
    if (!__atomic_load_n(&tc->bytes, __ATOMIC_RELAXED))
        return;
    uint64_t counted = 0;
    for (int i = 0; i < TC_SLOTS; i++)
        for (int w = 0; w < TC_WAYS; w++)
            if (tc->slot[i].size[w]) {
                ts_block *b = tc->slot[i].block[w];
                counted += b->counted;
                b->counted = 0;
                ts_fence_free_cached_locked(p, b, tc->slot[i].epoch[w] != TC_ASYNC);
                tc->slot[i].size[w] = 0;
                tc->slot[i].block[w] = NULL;
            }
    /* live_bytes first: a reader between the two sees a figure too low for
     * a moment, never a peak that was not */
    __atomic_sub_fetch(&p->live_bytes, counted, __ATOMIC_RELAXED);
    __atomic_store_n(&tc->parked_live, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&tc->bytes, 0, __ATOMIC_RELAXED);
}

static void unlink_tc(ts_pool *p, ts_tcache *tc)
{
    TS_LIST_UNLINK(&p->tcaches, tc, prev, next);
    tc->next = tc->prev = NULL;
}

static void thread_exit(void *arg)
{
    (void)arg;
    for (int i = 0; i < TC_MAX_POOLS; i++) {
        ts_tcache *tc = tls_tc[i];
        if (!tc)
            continue;
        tls_tc[i] = NULL;
        /* the pool may be destroyed meanwhile (a device reset): counted in
         * tc_exits, its memory stays until this thread is done with it */
        pthread_mutex_lock(&registry);
        ts_pool *p = tc->pool;
        if (p)
            p->tc_exits++;
        pthread_mutex_unlock(&registry);
        if (p) {
            /* drained while still listed, both locks held: the parked bytes
             * leave live_bytes before the cache leaves the walk of
             * ts_tcache_live_now (else the live figure reads high between) */
            pthread_mutex_lock(&p->lock);
            pthread_mutex_lock(&registry);
            if (tc->pool == p) { /* not detached by the pool's destruction meanwhile */
                ts_spin_lock(&tc->lock);
                drain_locked(p, tc);
                p->tc_hits_flushed += tc->hits;
                ts_spin_unlock(&tc->lock);
                unlink_tc(p, tc);
                tc->pool = NULL;
            }
            pthread_mutex_unlock(&registry);
            pthread_mutex_unlock(&p->lock);
            pthread_mutex_lock(&registry);
            p->tc_exits--; /* the last touch of p */
            pthread_mutex_unlock(&registry);
        }
        free(tc);
    }
}

static void make_key(void) { pthread_key_create(&tc_key, thread_exit); }

/* The thread's first cache for p: registered with the pool, freed at
 * thread exit. */
static __attribute__((noinline)) ts_tcache *new_tc(ts_pool *p)
{
    pthread_once(&tc_once, make_key);
    ts_tcache *tc = aligned_alloc(_Alignof(ts_tcache), sizeof *tc);
    if (!tc)
        return NULL;
    memset(tc, 0, sizeof *tc);
    tc->pool = p;
    pthread_mutex_lock(&registry);
    tc->next = p->tcaches;
    if (p->tcaches)
        p->tcaches->prev = tc;
    p->tcaches = tc;
    pthread_mutex_unlock(&registry);
    tls_tc[p->id] = tc;
    pthread_setspecific(tc_key, tc); /* any non-NULL value runs thread_exit */
    return tc;
}

/* Inline: both fast paths (a hit, a park) start here. */
static inline ts_tcache *get_tc(ts_pool *p, bool create)
{
    if (p->id >= TC_MAX_POOLS)
        return NULL;
    ts_tcache *tc = tls_tc[p->id];
    return __builtin_expect(tc != NULL, 1) || !create ? tc : new_tc(p);
}

/* Bytes a cache may hold parked now (ts_tcache_fit_cap). */
static inline uint64_t cap_of(const ts_pool *p) { return __atomic_load_n(&p->tc_cap, __ATOMIC_RELAXED); }

void ts_tcache_fit_cap(ts_pool *p)
{
    uint64_t cap = p->reserved / TC_CAP_SHARE;
    cap = cap < TC_MIN_BYTES ? TC_MIN_BYTES : cap > TC_MAX_BYTES ? TC_MAX_BYTES : cap;
    __atomic_store_n(&p->tc_cap, cap, __ATOMIC_RELAXED);
}

/* The owner drains its cache when the pool asked for it. */
static void honour_flush(ts_pool *p, ts_tcache *tc)
{
    pthread_mutex_lock(&p->lock);
    ts_spin_lock(&tc->lock);
    drain_locked(p, tc);
    __atomic_store_n(&tc->flush_req, 0, __ATOMIC_RELAXED);
    ts_spin_unlock(&tc->lock);
    pthread_mutex_unlock(&p->lock);
}

/* A hit on a stream-ordered allocation goes live.  Parked still counted
 * (`old` bytes), the block is live again by taking it out of parked_live:
 * no locked operation when the request is the same size.  The live figure
 * rose; live_bytes less this cache's parked bytes bounds it from above, so
 * the exact figure is computed only when that bound passes the peak (a
 * single thread's bound is the exact figure). */
static inline void live_hit(ts_pool *p, ts_tcache *tc, uint64_t requested, uint64_t old)
{
    uint64_t g = requested != old ? __atomic_add_fetch(&p->live_bytes, requested - old, __ATOMIC_RELAXED)
                                  : __atomic_load_n(&p->live_bytes, __ATOMIC_RELAXED);
    uint64_t mine = tc->parked_live - old;
    __atomic_store_n(&tc->parked_live, mine, __ATOMIC_RELAXED);
    if (g > mine && g - mine > __atomic_load_n(&p->live_peak, __ATOMIC_RELAXED))
        ts_tcache_note_live_peak(p);
}

int ts_tcache_alloc(ts_pool *p, uint64_t size, uint64_t requested, uint64_t stream, uint64_t *ptr)
{
    ts_tcache *tc = get_tc(p, false);
    if (!tc || size > TC_MAX_BLOCK)
        return 0;
    if (ts_unlikely_flush(tc)) {
        honour_flush(p, tc);
        return 0;
    }
    struct tc_slot *sl = &tc->slot[slot_of(size, stream)];
    int stale = 0, empty = 0;
    for (int w = 0; w < TC_WAYS; w++) {
        if (sl->size[w] != size || sl->stream[w] != stream) {
            empty += !sl->size[w];
            continue;
        }
        /* acquire: the check that proved a synchronous free safe happened
         * before this reuse */
        if (sl->epoch[w] != TC_ASYNC
            && sl->epoch[w] >= __atomic_load_n(&p->ep.safe_epoch, __ATOMIC_ACQUIRE)) {
            stale++;
            continue;
        }
        ts_block *b = sl->block[w];
        sl->size[w] = 0;
        sl->block[w] = NULL;
        __atomic_store_n(&b->state, TS_B_LIVE, __ATOMIC_RELAXED);
        b->requested = requested;
        uint64_t old = b->counted;
        b->counted = 0;
        __atomic_store_n(&tc->bytes, tc->bytes - size, __ATOMIC_RELAXED);
        __atomic_store_n(&tc->hits, tc->hits + 1, __ATOMIC_RELAXED);
        if (stream == TS_STREAM_NONE)
            ts_live_add(p, size, requested, stream); /* parked by a synchronous free: never counted */
        else
            live_hit(p, tc, requested, old);
        *ptr = b->addr;
        return 1;
    }
    /* A fence check is worth its driver calls once it frees a full set of
     * ways (the slot, or the cache, cannot take another block); until then
     * the pool serves fresh blocks, which their frees add to the set. */
    return stale && (!empty || tc->bytes + size > cap_of(p)) ? TS_TC_STALE : 0;
}

static bool park(ts_pool *p, ts_block *b, uint64_t stream, uint64_t epoch, uint64_t counted)
{
    if (b->size > TC_MAX_BLOCK || b->kind == TS_KIND_PLANNED)
        return false;
    ts_tcache *tc = get_tc(p, true);
    if (!tc)
        return false;
    if (ts_unlikely_flush(tc)) {
        honour_flush(p, tc);
        return false;
    }
    if (tc->bytes + b->size > cap_of(p)) {
        /* a synchronous free waits for a fence check, which a full cache
         * asks for (TS_TC_STALE): it keeps what it holds */
        if (epoch != TC_ASYNC)
            return false;
        honour_flush(p, tc);
        if (b->size > cap_of(p))
            return false;
    }
    struct tc_slot *sl = &tc->slot[slot_of(b->size, stream)];
    for (int w = 0; w < TC_WAYS; w++)
        if (!sl->size[w]) {
            b->stream = stream;
            sl->size[w] = b->size;
            sl->stream[w] = stream;
            sl->epoch[w] = epoch;
            sl->block[w] = b;
            b->counted = counted;
            __atomic_store_n(&tc->parked_live, tc->parked_live + counted, __ATOMIC_RELAXED);
            __atomic_store_n(&tc->bytes, tc->bytes + b->size, __ATOMIC_RELAXED);
            return true;
        }
    return false;
}

bool ts_tcache_free(ts_pool *p, ts_block *b, uint64_t stream, uint64_t counted)
{
    return park(p, b, stream, TC_ASYNC, counted);
}

bool ts_tcache_free_sync(ts_pool *p, ts_block *b, uint64_t stream)
{
    /* seq_cst: the program's work queued before this free is ordered before
     * the stamp, so a check that bumped the epoch past it sees that work */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    uint64_t e = __atomic_load_n(&p->ep.fence_epoch, __ATOMIC_RELAXED);
    return park(p, b, stream, e, 0);
}

/* p->lock held: drain this thread's cache now, ask the others. */
void ts_tcache_flush_all(ts_pool *p)
{
    ts_tcache *mine = get_tc(p, false);
    if (mine)
        drain_locked(p, mine);
    pthread_mutex_lock(&registry);
    for (ts_tcache *tc = p->tcaches; tc; tc = tc->next)
        if (tc != mine && __atomic_load_n(&tc->bytes, __ATOMIC_RELAXED))
            __atomic_store_n(&tc->flush_req, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&registry);
}

void ts_tcache_wait_exits(ts_pool *p)
{
    for (;;) {
        pthread_mutex_lock(&registry);
        uint32_t n = p->tc_exits;
        pthread_mutex_unlock(&registry);
        if (!n)
            return;
        sched_yield();
    }
}

/* Pool destruction: no other thread may be using the pool any more. */
void ts_tcache_detach_all(ts_pool *p)
{
    pthread_mutex_lock(&registry);
    while (p->tcaches) {
        ts_tcache *tc = p->tcaches;
        ts_spin_lock(&tc->lock);
        drain_locked(p, tc);
        unlink_tc(p, tc);
        tc->pool = NULL;
        ts_spin_unlock(&tc->lock);
    }
    pthread_mutex_unlock(&registry);
}

uint64_t ts_tcache_bytes(ts_pool *p)
{
    uint64_t n = 0;
    pthread_mutex_lock(&registry);
    for (ts_tcache *tc = p->tcaches; tc; tc = tc->next)
        n += __atomic_load_n(&tc->bytes, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&registry);
    return n;
}

uint64_t ts_tcache_hits(ts_pool *p)
{
    uint64_t n = p->tc_hits_flushed;
    pthread_mutex_lock(&registry);
    for (ts_tcache *tc = p->tcaches; tc; tc = tc->next)
        n += __atomic_load_n(&tc->hits, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&registry);
    return n;
}

uint64_t ts_tcache_live_now(ts_pool *p)
{
    pthread_mutex_lock(&registry);
    uint64_t g = __atomic_load_n(&p->live_bytes, __ATOMIC_RELAXED), parked = 0;
    for (ts_tcache *tc = p->tcaches; tc; tc = tc->next)
        parked += __atomic_load_n(&tc->parked_live, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&registry);
    return g > parked ? g - parked : 0;
}

void ts_tcache_note_live_peak(ts_pool *p)
{
    uint64_t now = ts_tcache_live_now(p);
    uint64_t peak = __atomic_load_n(&p->live_peak, __ATOMIC_RELAXED);
    while (now > peak
           && !__atomic_compare_exchange_n(&p->live_peak, &peak, now, true, __ATOMIC_RELAXED,
                                           __ATOMIC_RELAXED)) {
    }
}
