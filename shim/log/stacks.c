/* stacks.c: capture and deduplication of allocation call stacks.
 *
 * Capture is libunwind's unw_backtrace (the fast frame-walking path) with
 * per-thread caching of unwind info, so a stack costs a few hundred ns.
 * Distinct stacks are found by a 64-bit hash of their addresses in a
 * lock-free open-addressing table: a stack's id is its slot, so any thread
 * knows the id of a stack another thread inserted without waiting for it,
 * and only the inserting thread logs the TS_REC_STACK.  The shim's own
 * frames (hook, event, capture) are left out by address range.  Built
 * without libunwind (TS_NO_LIBUNWIND, a machine without its headers), the
 * capture is glibc's backtrace(): slower, same records. */
#ifdef TS_NO_LIBUNWIND
#include <execinfo.h>
#define unw_backtrace(buf, n) backtrace(buf, n)
#else
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "log/log.h"
#include "log/modules.h"
#include "log/stacks.h"

enum {
    MAX_DEPTH = TS_STACKS_MAX,
    SHIM_FRAMES_MAX = 24, /* frames of the shim itself allowed above the caller */
    TABLE_SIZE = 1 << 16,
    MAX_PROBES = 64,
};

int ts_stacks_depth = -1;

static _Atomic uint64_t *g_table; /* stack hash per slot; 0 = empty */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static uint64_t g_shim_lo, g_shim_hi; /* the shim's text when it is its own module */
static _Atomic uint64_t g_distinct, g_dropped;
static pthread_mutex_t g_cfg_mu = PTHREAD_MUTEX_INITIALIZER;

static void init_once(void)
{
    g_table = calloc(TABLE_SIZE, sizeof *g_table);
#ifndef TS_NO_LIBUNWIND
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
#endif
    uint64_t lo, hi;
    int is_main = 0;
    /* linked into a program (libtscore.a in tests and benchmarks) the shim
     * shares the executable's range: then only the capture frame is skipped */
    if (ts_modules_range_of((const void *)&ts_stack_capture_slow, &lo, &hi, &is_main) && !is_main) {
        g_shim_lo = lo;
        g_shim_hi = hi;
    }
}

int ts_stacks_configure(int depth)
{
    if (depth < 0)
        depth = 0;
    if (depth > MAX_DEPTH)
        depth = MAX_DEPTH;
    if (depth)
        pthread_once(&g_once, init_once);
    if (depth && !g_table)
        depth = 0;
    __atomic_store_n(&ts_stacks_depth, depth, __ATOMIC_RELEASE);
    return depth;
}

static int configured_depth(void)
{
    int d = __atomic_load_n(&ts_stacks_depth, __ATOMIC_ACQUIRE);
    if (d >= 0)
        return d;
    pthread_mutex_lock(&g_cfg_mu);
    d = __atomic_load_n(&ts_stacks_depth, __ATOMIC_ACQUIRE);
    if (d < 0) {
        uint64_t want = ts_cfg()->stacks;
        d = ts_stacks_configure(want > MAX_DEPTH ? MAX_DEPTH : (int)want);
    }
    pthread_mutex_unlock(&g_cfg_mu);
    return d;
}

static uint64_t hash_frames(void *const *f, int n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++)
        h = ts_rec_mix64(h ^ (uint64_t)(uintptr_t)f[i]) + 0x632be59bd9b4e019ull;
    return h | 1; /* 0 marks an empty slot */
}

static void log_stack(uint32_t id, void *const *frames, int n)
{
    uint32_t gen = ts_modules_current();
    struct {
        struct ts_rec_stack r;
        uint64_t frames[MAX_DEPTH];
    } rec;
    uint32_t len = (uint32_t)(sizeof rec.r + (size_t)n * sizeof(uint64_t));
    memset(&rec.r, 0, sizeof rec.r);
    rec.r.h.len = len;
    rec.r.h.type = TS_REC_STACK;
    rec.r.stack_id = id;
    rec.r.n_frames = (uint32_t)n;
    rec.r.modules_gen = gen;
    for (int i = 0; i < n; i++)
        rec.frames[i] = (uint64_t)(uintptr_t)frames[i];
    ts_log_write_record(&rec.r.h);
}

__attribute__((noinline)) uint32_t ts_stack_capture_slow(void)
{
    int depth = configured_depth();
    if (depth <= 0)
        return 0;
    void *buf[MAX_DEPTH + SHIM_FRAMES_MAX];
    int n = unw_backtrace(buf, depth + SHIM_FRAMES_MAX);
    int skip = 1; /* this function */
    if (g_shim_hi)
        for (skip = 0; skip < n && (uint64_t)(uintptr_t)buf[skip] >= g_shim_lo
                       && (uint64_t)(uintptr_t)buf[skip] < g_shim_hi;
             skip++)
            ;
    if (skip >= n)
        return 0;
    void **frames = buf + skip;
    n -= skip;
    if (n > depth)
        n = depth;
    uint64_t h = hash_frames(frames, n);
    for (uint32_t p = 0; p < MAX_PROBES; p++) {
        uint32_t slot = (uint32_t)(h + p) & (TABLE_SIZE - 1);
        uint64_t v = atomic_load_explicit(&g_table[slot], memory_order_relaxed);
        if (v == 0) {
            if (atomic_compare_exchange_strong(&g_table[slot], &v, h)) {
                atomic_fetch_add_explicit(&g_distinct, 1, memory_order_relaxed);
                log_stack(slot + 1, frames, n);
                return slot + 1;
            }
            /* another thread took the slot: v now holds its hash */
        }
        if (v == h)
            return slot + 1;
    }
    atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
    return 0;
}

void ts_ev_alloc_stack(uint32_t stack_id, uint64_t ptr, uint64_t alloc_time_ns, int device)
{
    struct ts_rec_alloc_stack *r = (struct ts_rec_alloc_stack *)ts_log_reserve(sizeof *r, TS_REC_ALLOC_STACK);
    if (!r)
        return;
    r->ptr = ptr;
    r->alloc_time_ns = alloc_time_ns;
    r->stack_id = stack_id;
    r->device = device;
    ts_log_commit(&r->h);
}

void ts_stacks_counts(uint64_t *distinct, uint64_t *dropped)
{
    *distinct = atomic_load(&g_distinct);
    *dropped = atomic_load(&g_dropped);
}
