/* host_cache.c: pinned host allocations (cudaHostAlloc, cudaMallocHost,
 * cuMemHostAlloc, cuMemAllocHost) served from a size-classed cache, because
 * pinning and unpinning memory is slow (mmap, page locking, IOMMU mapping)
 * and input pipelines do it per batch.
 *
 * Rules:
 *  - a block is reused only for a request of the same size class and the same
 *    flags (portable / mapped / write-combined change what the memory is);
 *  - a freed block is not reused while a queued asynchronous copy may still
 *    read or write it: the free synchronizes the current context and every
 *    active primary context (a block is portable memory any device's stream
 *    may be copying), as the real cuMemFreeHost / cudaFreeHost waits for the
 *    devices (the program pays the same wait).  Contexts the program created
 *    itself (cuCtxCreate) and that are not current are not seen: the one
 *    case where a block could be reused early, documented as a limit;
 *  - at most HOST_CACHE_MAX_FREE bytes stay cached; beyond that, and when an
 *    allocation fails, free blocks are really freed.
 * Blocks are registered with hostclass.c as pinned, so the copy engine never
 * classifies them with a driver query.  Only outermost calls go through the
 * cache (the hooks decide); a pointer the cache does not know passes through. */
#include <pthread.h>
#include <stdlib.h>

#include "core/config.h"
#include "copy/copy_engine.h"
#include "copy/host_cache.h"
#include "core/cuda_real.h"
#include "log/log.h"
#include "log/logfmt.h"

enum { VALID_FLAGS = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED };
#define HOST_CACHE_MAX_FREE (1ull << 30)

struct block {
    struct block *next;
    void *ptr;
    size_t size; /* class size, what was really allocated */
    unsigned flags;
    bool free; /* in the cache, not owned by the program */
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct block *blocks; /* every block the cache owns, in use or free */
static uint64_t free_bytes, hits, misses;

bool ts_host_cache_wanted(size_t size, unsigned flags)
{
    return size > 0 && (flags & ~(unsigned)VALID_FLAGS) == 0 && ts_cfg()->host_cache;
}

/* Four classes per power of two above 4 KiB: at most 25% slack. */
size_t ts_host_cache_class(size_t size)
{
    if (size <= 4096)
        return 4096;
    unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)size);
    size_t step = (size_t)1 << (lg - 2);
    return (size + step - 1) & ~(step - 1);
}

/* Forgets the block at p without freeing its (already gone) memory. */
static void drop_block(void *p)
{
    pthread_mutex_lock(&cache_lock);
    for (struct block **pp = &blocks; *pp; pp = &(*pp)->next)
        if ((*pp)->ptr == p) {
            struct block *b = *pp;
            *pp = b->next;
            free(b);
            break;
        }
    pthread_mutex_unlock(&cache_lock);
    ts_hostclass_remove(p);
}

void *ts_host_cache_get(size_t size, unsigned flags)
{
    size_t cls = ts_host_cache_class(size);
    void *p = NULL;
    pthread_mutex_lock(&cache_lock);
    for (struct block *b = blocks; b; b = b->next)
        if (b->free && b->size == cls && b->flags == flags) {
            b->free = false;
            free_bytes -= b->size;
            p = b->ptr;
            break;
        }
    if (p)
        hits++;
    else
        misses++;
    pthread_mutex_unlock(&cache_lock);
    /* A cached block dies with its context (cudaDeviceReset): forget it. */
    if (p && !ts_hostclass_driver_pinned(p)) {
        drop_block(p);
        return ts_host_cache_get(size, flags);
    }
    return p;
}

void ts_host_cache_adopt(void *p, size_t size, unsigned flags)
{
    struct block *b = malloc(sizeof *b);
    if (!b)
        return; /* unknown to the cache: its free passes through */
    *b = (struct block){ .ptr = p, .size = ts_host_cache_class(size), .flags = flags };
    ts_hostclass_add(p, b->size);
    pthread_mutex_lock(&cache_lock);
    b->next = blocks;
    blocks = b;
    pthread_mutex_unlock(&cache_lock);
}

/* Unlinks and returns the free blocks to release so that at most `keep`
 * free bytes remain (under cache_lock). */
static struct block *take_excess_locked(uint64_t keep)
{
    struct block *out = NULL, **pp = &blocks;
    while (*pp && free_bytes > keep) {
        struct block *b = *pp;
        if (b->free) {
            *pp = b->next;
            free_bytes -= b->size;
            b->next = out;
            out = b;
        } else {
            pp = &b->next;
        }
    }
    return out;
}

static void release_blocks(struct block *list)
{
    ts_cuda_fn_cuMemFreeHost real_free = TS_CUDA_REAL(cuMemFreeHost);
    while (list) {
        struct block *next = list->next;
        ts_hostclass_remove(list->ptr);
        if (real_free)
            real_free(list->ptr);
        free(list);
        list = next;
    }
}

/* Synchronizes the current context and every active primary context (a
 * copy on device 1's stream may read a block freed while device 0 is
 * current).  Inactive devices have no queued work; retaining an active
 * primary context only takes a reference.  False if a synchronization failed. */
static bool contexts_idle(void)
{
    ts_cuda_fn_cuCtxGetCurrent get_ctx = TS_CUDA_REAL(cuCtxGetCurrent);
    ts_cuda_fn_cuCtxSynchronize sync_cur = TS_CUDA_REAL(cuCtxSynchronize);
    ts_cuda_fn_cuDeviceGetCount count = TS_CUDA_REAL(cuDeviceGetCount);
    ts_cuda_fn_cuDeviceGet get_dev = TS_CUDA_REAL(cuDeviceGet);
    ts_cuda_fn_cuDevicePrimaryCtxGetState state = TS_CUDA_REAL(cuDevicePrimaryCtxGetState);
    ts_cuda_fn_cuDevicePrimaryCtxRetain retain = TS_CUDA_REAL(cuDevicePrimaryCtxRetain);
    ts_cuda_fn_cuDevicePrimaryCtxRelease_v2 release = TS_CUDA_REAL(cuDevicePrimaryCtxRelease_v2);
    ts_cuda_fn_cuCtxSynchronize_v2 sync_ctx = TS_CUDA_REAL(cuCtxSynchronize_v2);
    if (!get_ctx || !sync_cur || !count || !get_dev || !state || !retain || !release || !sync_ctx)
        return false;
    CUcontext cur = NULL;
    if (get_ctx(&cur) != CUDA_SUCCESS)
        cur = NULL;
    if (cur && sync_cur() != CUDA_SUCCESS)
        return false;
    int n = 0;
    if (count(&n) != CUDA_SUCCESS)
        return false;
    for (int i = 0; i < n; i++) {
        CUdevice dev;
        unsigned flags = 0;
        int active = 0;
        if (get_dev(&dev, i) != CUDA_SUCCESS || state(dev, &flags, &active) != CUDA_SUCCESS)
            return false;
        if (!active)
            continue;
        CUcontext primary = NULL;
        if (retain(&primary, dev) != CUDA_SUCCESS)
            return false;
        CUresult r = primary == cur ? CUDA_SUCCESS : sync_ctx(primary);
        release(dev);
        if (r != CUDA_SUCCESS)
            return false;
    }
    return true;
}

enum ts_host_cache_put ts_host_cache_put(void *p)
{
    pthread_mutex_lock(&cache_lock);
    struct block **pp = &blocks, *b = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->ptr == p) {
            b = *pp;
            break;
        }
    if (!b) {
        pthread_mutex_unlock(&cache_lock);
        return TS_HC_PUT_UNKNOWN;
    }
    if (b->free) {
        pthread_mutex_unlock(&cache_lock);
        return TS_HC_PUT_DOUBLE_FREE;
    }
    pthread_mutex_unlock(&cache_lock);
    /* Queued work may still read or write the block: wait for it, as the
     * real free would.  If that fails (a failed device) the block leaves the
     * cache and the real free reports what CUDA reports. */
    bool idle = contexts_idle();
    pthread_mutex_lock(&cache_lock);
    if (!idle) {
        for (pp = &blocks; *pp; pp = &(*pp)->next)
            if (*pp == b) {
                *pp = b->next;
                break;
            }
        pthread_mutex_unlock(&cache_lock);
        ts_hostclass_remove(b->ptr);
        free(b);
        return TS_HC_PUT_RELEASE;
    }
    b->free = true;
    free_bytes += b->size;
    struct block *excess = take_excess_locked(HOST_CACHE_MAX_FREE);
    pthread_mutex_unlock(&cache_lock);
    release_blocks(excess);
    return TS_HC_PUT_CACHED;
}

void ts_host_cache_trim(void)
{
    pthread_mutex_lock(&cache_lock);
    struct block *all = take_excess_locked(0);
    pthread_mutex_unlock(&cache_lock);
    release_blocks(all);
}

void ts_host_cache_stats(uint64_t *hit, uint64_t *miss, uint64_t *cached_free)
{
    pthread_mutex_lock(&cache_lock);
    if (hit)
        *hit = hits;
    if (miss)
        *miss = misses;
    if (cached_free)
        *cached_free = free_bytes;
    pthread_mutex_unlock(&cache_lock);
}

void ts_host_cache_note(int api, void *p, size_t size, unsigned flags, bool hit)
{
    struct ts_rec_pinned_alloc *r =
        (struct ts_rec_pinned_alloc *)ts_log_reserve(sizeof *r, TS_REC_PINNED_ALLOC);
    if (!r)
        return;
    r->api = api;
    r->flags = flags;
    r->ptr = (uint64_t)(uintptr_t)p;
    r->size = size;
    r->class_size = ts_host_cache_class(size);
    r->cache_hit = hit;
    r->reserved = 0;
    ts_log_commit(&r->h);
}
