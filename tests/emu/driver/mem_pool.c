/* mem_pool.c: stream-ordered allocation (cuMemAllocAsync, cuMemFreeAsync,
 * cuMemAllocFromPoolAsync) and memory pools (default/current/created pools,
 * attributes, cuMemPoolTrimTo).
 *
 * A pool owns blocks carved from the device arena (so pool memory is device
 * memory for every lookup and counts as physical memory).  Block capacities
 * are rounded to one of ~220 size bins (256-byte steps to 4 KiB, then four
 * per doubling); a request takes a free block of its own bin:
 *   - freed on the same stream: at once, even before the free has executed
 *     (stream order makes it safe);
 *   - freed on another stream: once that free has executed on its stream and
 *     REUSE_ALLOW_OPPORTUNISTIC is set.  (The emulator does not track event
 *     dependencies, so it never reuses across streams before the free ran.)
 * When a free executes and the pool holds more than RELEASE_THRESHOLD, the
 * block goes back to the device (the real driver does this at the next
 * synchronization; releasing at the free is earlier but equally valid).
 *
 * During stream capture cuMemAllocAsync makes a graph allocation: allocated
 * at capture time, outside the pool, valid for every replay.  A captured
 * cuMemFreeAsync of it records nothing; the memory is returned by a
 * cuMemFreeAsync/cuMemFree outside capture, else at process exit (graph
 * destruction does not free it). */
#include "mem_space.h"

#include <stdlib.h>
#include <string.h>

#define POOL_MAGIC 0x4c4f4f50u   /* "POOL" */
#define NBINS 224
#define HASH_BUCKETS 4096
#define HASH_STRIPES 64

enum block_state { BLOCK_LIVE = 1, BLOCK_FREE_PENDING = 2, BLOCK_FREE_READY = 3 };

struct emu_pool;

struct pool_block {
    uintptr_t p;
    size_t cap;                 /* arena allocation size */
    size_t used;                /* the requested size while live (USED_MEM_* count exact bytes, as the driver's do) */
    struct emu_pool *pool;      /* NULL for a graph allocation */
    int state;                  /* enum block_state */
    unsigned pending_frees;     /* queued free ops not yet executed */
    CUstream freed_on;
    unsigned bin;
    struct pool_block *hnext;   /* address hash chain */
    struct pool_block *fnext, *fprev;   /* bin free list */
};

struct emu_pool {
    unsigned magic;
    int dev;
    bool is_default, destroyed;
    CUmemPoolProps props;
    pthread_mutex_t lock;
    int reuse_follow_events, reuse_opportunistic, reuse_internal_deps;
    uint64_t release_threshold;
    uint64_t reserved, reserved_high, used, used_high;
    size_t live;                /* live allocations (a destroyed pool lingers while > 0) */
    struct pool_block *bins[NBINS];
    struct emu_pool *next_created;
    uint8_t access[EMU_MAX_DEVICES];   /* CUmemAccess_flags per device */
};

static struct emu_pool default_pools[EMU_MAX_DEVICES];
static struct emu_pool *created_pools;     /* list through next_created, under current_lock */
static struct emu_pool *current_pool[EMU_MAX_DEVICES];   /* NULL = the default pool */
static pthread_mutex_t current_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;

static struct pool_block *hash_buckets[HASH_BUCKETS];
static pthread_mutex_t hash_locks[HASH_STRIPES];

static void pool_init_fields(struct emu_pool *pool, int dev)
{
    pool->magic = POOL_MAGIC;
    pool->dev = dev;
    pthread_mutex_init(&pool->lock, NULL);
    pool->reuse_follow_events = pool->reuse_opportunistic = pool->reuse_internal_deps = 1;
    pool->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pool->props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pool->props.location.id = dev;
    pool->access[dev] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;   /* its own device, always */
}

static void pools_setup(void)
{
    for (int i = 0; i < HASH_STRIPES; i++) pthread_mutex_init(&hash_locks[i], NULL);
    for (int d = 0; d < EMU_MAX_DEVICES; d++) {
        pool_init_fields(&default_pools[d], d);
        default_pools[d].is_default = true;
    }
}

static unsigned bin_of(size_t size, size_t *cap)
{
    if (size <= 4096) {
        unsigned idx = (unsigned)((size + 255) / 256) - 1;
        *cap = (size_t)(idx + 1) * 256;
        return idx;
    }
    unsigned p = 63 - (unsigned)__builtin_clzll(size - 1);
    size_t step = (size_t)1 << (p - 2);
    *cap = emu_round_up(size, step);
    return 16 + (p - 12) * 4 + (unsigned)(*cap / step - 5);
}

/* ---- address hash: every block a pool (or a graph) holds ---- */

static unsigned hash_of(uintptr_t p) { return (unsigned)((p >> 8) * 0x9E3779B97F4A7C15ull >> 52) % HASH_BUCKETS; }

static void hash_add(struct pool_block *b)
{
    unsigned h = hash_of(b->p);
    pthread_mutex_lock(&hash_locks[h % HASH_STRIPES]);
    b->hnext = hash_buckets[h];
    hash_buckets[h] = b;
    pthread_mutex_unlock(&hash_locks[h % HASH_STRIPES]);
}

static void hash_remove(struct pool_block *b)
{
    unsigned h = hash_of(b->p);
    pthread_mutex_lock(&hash_locks[h % HASH_STRIPES]);
    for (struct pool_block **pp = &hash_buckets[h]; *pp; pp = &(*pp)->hnext) {
        if (*pp == b) { *pp = b->hnext; break; }
    }
    pthread_mutex_unlock(&hash_locks[h % HASH_STRIPES]);
}

static struct pool_block *hash_find(uintptr_t p)
{
    unsigned h = hash_of(p);
    pthread_mutex_lock(&hash_locks[h % HASH_STRIPES]);
    struct pool_block *b = hash_buckets[h];
    while (b && b->p != p) b = b->hnext;
    pthread_mutex_unlock(&hash_locks[h % HASH_STRIPES]);
    return b;
}

/* ---- blocks (caller holds pool->lock) ---- */

static void bin_push(struct emu_pool *pool, struct pool_block *b)
{
    b->fprev = NULL;
    b->fnext = pool->bins[b->bin];
    if (b->fnext) b->fnext->fprev = b;
    pool->bins[b->bin] = b;
}

static void bin_unlink(struct emu_pool *pool, struct pool_block *b)
{
    if (b->fprev) b->fprev->fnext = b->fnext; else pool->bins[b->bin] = b->fnext;
    if (b->fnext) b->fnext->fprev = b->fprev;
    b->fnext = b->fprev = NULL;
}

/* Gives a free block's memory back to the device. */
static void block_release(struct emu_pool *pool, struct pool_block *b)
{
    bin_unlink(pool, b);
    hash_remove(b);
    pool->reserved -= b->cap;
    emu_arena_free(b->p, EMU_OWN_POOL);
    free(b);
}

static void pool_trim(struct emu_pool *pool, uint64_t keep)
{
    for (unsigned i = 0; i < NBINS && pool->reserved > keep; i++) {
        struct pool_block *b = pool->bins[i], *next;
        for (; b && pool->reserved > keep; b = next) {
            next = b->fnext;
            if (b->state == BLOCK_FREE_READY) block_release(pool, b);
        }
    }
}

static void pool_maybe_free_struct(struct emu_pool *pool)
{
    if (pool->destroyed && pool->live == 0 && !pool->is_default) {
        pool_trim(pool, 0);
        if (pool->reserved == 0) {
            /* Nothing refers to it any more but the list of created pools
             * (current_lock is taken before pool locks, never after). */
            pthread_mutex_unlock(&pool->lock);
            pthread_mutex_lock(&current_lock);
            for (struct emu_pool **pp = &created_pools; *pp; pp = &(*pp)->next_created)
                if (*pp == pool) { *pp = pool->next_created; break; }
            pthread_mutex_unlock(&current_lock);
            pthread_mutex_destroy(&pool->lock);
            pool->magic = 0;
            free(pool);
            return;
        }
    }
    pthread_mutex_unlock(&pool->lock);
}

static CUresult pool_alloc(struct emu_pool *pool, size_t size, CUstream stream, uintptr_t *out)
{
    size_t cap;
    unsigned bin = bin_of(size, &cap);
    size_t used = size;
    pthread_mutex_lock(&pool->lock);
    struct pool_block *b;
    for (b = pool->bins[bin]; b; b = b->fnext) {
        if (b->freed_on == stream) break;                                   /* stream order */
        if (b->state == BLOCK_FREE_READY && pool->reuse_opportunistic) break; /* free has run */
    }
    if (b) {
        bin_unlink(pool, b);
    } else {
        uintptr_t p = emu_arena_alloc(pool->dev, cap, EMU_OWN_POOL);
        if (!p) {                       /* give back what is safely free, then retry */
            pool_trim(pool, 0);
            p = emu_arena_alloc(pool->dev, cap, EMU_OWN_POOL);
        }
        b = p ? calloc(1, sizeof *b) : NULL;
        if (!b) {
            if (p) emu_arena_free(p, EMU_OWN_POOL);
            pthread_mutex_unlock(&pool->lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *b = (struct pool_block){ .p = p, .cap = cap, .pool = pool, .bin = bin };
        hash_add(b);
        pool->reserved += cap;
        if (pool->reserved > pool->reserved_high) pool->reserved_high = pool->reserved;
    }
    b->state = BLOCK_LIVE;
    b->used = used;
    pool->used += used;
    if (pool->used > pool->used_high) pool->used_high = pool->used;
    pool->live++;
    *out = b->p;
    pthread_mutex_unlock(&pool->lock);
    return CUDA_SUCCESS;
}

/* A free has executed in stream order: the block may now serve any stream. */
static void free_op(void *arg)
{
    struct pool_block *b = arg;
    struct emu_pool *pool = b->pool;
    pthread_mutex_lock(&pool->lock);
    if (--b->pending_frees == 0 && b->state == BLOCK_FREE_PENDING) {
        b->state = BLOCK_FREE_READY;
        if (pool->reserved > pool->release_threshold || pool->destroyed) block_release(pool, b);
    }
    pool_maybe_free_struct(pool);
}

/* Marks a live block free (caller holds pool->lock). */
static void block_mark_free(struct emu_pool *pool, struct pool_block *b, CUstream stream, int state)
{
    b->state = state;
    b->freed_on = stream;
    pool->used -= b->used;
    pool->live--;
    bin_push(pool, b);
}

/* ---- graph allocations ---- */

static CUresult graph_alloc(int dev, size_t size, uintptr_t *out)
{
    size_t cap;
    unsigned bin = bin_of(size, &cap);
    uintptr_t p = emu_arena_alloc(dev, size, EMU_OWN_POOL);
    struct pool_block *b = p ? calloc(1, sizeof *b) : NULL;
    if (!b) {
        if (p) emu_arena_free(p, EMU_OWN_POOL);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *b = (struct pool_block){ .p = p, .cap = size, .used = size, .pool = NULL, .state = BLOCK_LIVE, .bin = bin };
    hash_add(b);
    *out = p;
    return CUDA_SUCCESS;
}

static void graph_free_op(void *arg)
{
    struct pool_block *b = arg;
    hash_remove(b);
    emu_arena_free(b->p, EMU_OWN_POOL);
    free(b);
}

/* ---- entry points ---- */

static struct emu_pool *pool_get(CUmemoryPool h)
{
    struct emu_pool *pool = (struct emu_pool *)h;
    if (!pool) return NULL;
    for (int d = 0; d < EMU_MAX_DEVICES; d++)
        if (pool == &default_pools[d]) return pool;
    /* Created pools: validated by magic (the emulator never frees a pool
     * whose handle the program may still use, except after its destroy). */
    return pool->magic == POOL_MAGIC && !pool->destroyed ? pool : NULL;
}

static struct emu_pool *device_pool(int dev)
{
    pthread_mutex_lock(&current_lock);
    struct emu_pool *pool = current_pool[dev] ? current_pool[dev] : &default_pools[dev];
    pthread_mutex_unlock(&current_lock);
    return pool;
}

/* The identity of a stream for same-stream reuse: 0 and CU_STREAM_LEGACY are
 * one stream; CU_STREAM_PER_THREAD is a different stream in each thread. */
static __thread char per_thread_stream_key;
static CUstream stream_key(CUstream s)
{
    if (s == CU_STREAM_LEGACY) return NULL;
    if (s == CU_STREAM_PER_THREAD) return (CUstream)&per_thread_stream_key;
    return s;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, struct emu_pool *pool, CUstream stream)
{
    emu_mem_init();
    pthread_once(&pools_once, pools_setup);
    if (!dptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
    int capturing = emu_stream_is_capturing(stream);
    if (capturing < 0) return CUDA_ERROR_INVALID_HANDLE;
    int dev = emu_stream_device(stream);
    if (dev < 0 || dev >= emu_space.devices) return CUDA_ERROR_INVALID_HANDLE;
    if (!pool) pool = device_pool(dev);
    uintptr_t p;
    CUresult rc = capturing ? graph_alloc(pool->dev, size, &p) : pool_alloc(pool, size, stream_key(stream), &p);
    if (rc == CUDA_SUCCESS) *dptr = (CUdeviceptr)p;
    return rc;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    EMU_ENTRY_CTX(cuMemAllocAsync);
    return alloc_async(dptr, bytesize, NULL, hStream);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    EMU_ENTRY_CTX(cuMemAllocAsync_ptsz);
    return alloc_async(dptr, bytesize, NULL, hStream ? hStream : CU_STREAM_PER_THREAD);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    EMU_ENTRY_CTX(cuMemAllocFromPoolAsync);
    pthread_once(&pools_once, pools_setup);
    struct emu_pool *p = pool_get(pool);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, p, hStream);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    EMU_ENTRY_CTX(cuMemAllocFromPoolAsync_ptsz);
    pthread_once(&pools_once, pools_setup);
    struct emu_pool *p = pool_get(pool);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, p, hStream ? hStream : CU_STREAM_PER_THREAD);
}

static CUresult free_async(CUdeviceptr dptr, CUstream stream)
{
    pthread_once(&pools_once, pools_setup);
    int capturing = emu_stream_is_capturing(stream);
    if (capturing < 0) return CUDA_ERROR_INVALID_HANDLE;
    struct pool_block *b = dptr ? hash_find((uintptr_t)dptr) : NULL;
    if (!b) return CUDA_ERROR_INVALID_VALUE;
    if (!b->pool) {                      /* graph allocation */
        if (capturing) return CUDA_SUCCESS;   /* the free node: memory stays valid for replays */
        return emu_stream_enqueue(stream, graph_free_op, b, NULL, "cuMemFreeAsync(graph)");
    }
    if (capturing) return CUDA_ERROR_INVALID_VALUE;   /* must be a graph allocation */
    struct emu_pool *pool = b->pool;
    pthread_mutex_lock(&pool->lock);
    if (b->state != BLOCK_LIVE) {
        pthread_mutex_unlock(&pool->lock);
        return CUDA_ERROR_INVALID_VALUE;   /* double free */
    }
    block_mark_free(pool, b, stream_key(stream), BLOCK_FREE_PENDING);
    b->pending_frees++;
    pthread_mutex_unlock(&pool->lock);
    CUresult rc = emu_stream_enqueue(stream, free_op, b, NULL, "cuMemFreeAsync");
    if (rc != CUDA_SUCCESS) {            /* not queued: complete it now */
        free_op(b);
    }
    return rc;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    EMU_ENTRY_CTX(cuMemFreeAsync);
    return free_async(dptr, hStream);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    EMU_ENTRY_CTX(cuMemFreeAsync_ptsz);
    return free_async(dptr, hStream ? hStream : CU_STREAM_PER_THREAD);
}

static char free_sync_key;   /* "freed by cuMemFree": no stream */

bool emu_pool_free_sync(uintptr_t p)
{
    pthread_once(&pools_once, pools_setup);
    struct pool_block *b = hash_find(p);
    if (!b) return false;
    if (!b->pool) {
        graph_free_op(b);
        return true;
    }
    struct emu_pool *pool = b->pool;
    pthread_mutex_lock(&pool->lock);
    if (b->state != BLOCK_LIVE) {
        pthread_mutex_unlock(&pool->lock);
        return false;
    }
    block_mark_free(pool, b, (CUstream)&free_sync_key, BLOCK_FREE_READY);
    if (pool->reserved > pool->release_threshold && b->pending_frees == 0) block_release(pool, b);
    pool_maybe_free_struct(pool);
    return true;
}

CUmemoryPool emu_pool_of(uintptr_t p)
{
    pthread_once(&pools_once, pools_setup);
    struct pool_block *b = hash_find(p);
    return b && b->state == BLOCK_LIVE ? (CUmemoryPool)b->pool : NULL;
}

unsigned emu_pool_access(uintptr_t start, int dev)
{
    pthread_once(&pools_once, pools_setup);
    unsigned a = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (dev < 0 || dev >= EMU_MAX_DEVICES) return a;
    /* Under the stripe lock: a released block is freed under it.  Pools
     * themselves are never freed. */
    unsigned h = hash_of(start);
    pthread_mutex_lock(&hash_locks[h % HASH_STRIPES]);
    struct pool_block *b = hash_buckets[h];
    while (b && b->p != start) b = b->hnext;
    if (b && b->pool) a = __atomic_load_n(&b->pool->access[dev], __ATOMIC_RELAXED);
    pthread_mutex_unlock(&hash_locks[h % HASH_STRIPES]);
    return a;
}

static CUresult get_default_pool(CUmemoryPool *pool_out, int dev)
{
    pthread_once(&pools_once, pools_setup);
    if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = emu_check_device(dev);
    if (rc != CUDA_SUCCESS) return rc;
    *pool_out = (CUmemoryPool)&default_pools[dev];
    return CUDA_SUCCESS;
}

static CUresult get_current_pool(CUmemoryPool *pool, int dev)
{
    pthread_once(&pools_once, pools_setup);
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = emu_check_device(dev);
    if (rc != CUDA_SUCCESS) return rc;
    *pool = (CUmemoryPool)device_pool(dev);
    return CUDA_SUCCESS;
}

static CUresult set_current_pool(int dev, CUmemoryPool pool)
{
    pthread_once(&pools_once, pools_setup);
    CUresult rc = emu_check_device(dev);
    if (rc != CUDA_SUCCESS) return rc;
    struct emu_pool *p = pool_get(pool);
    if (!p || p->dev != dev) return CUDA_ERROR_INVALID_VALUE;   /* a pool of that device */
    pthread_mutex_lock(&current_lock);
    current_pool[dev] = p->is_default ? NULL : p;
    pthread_mutex_unlock(&current_lock);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    EMU_ENTRY_INIT(cuDeviceGetDefaultMemPool);
    return get_default_pool(pool_out, dev);
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    EMU_ENTRY_INIT(cuDeviceGetMemPool);
    return get_current_pool(pool, dev);
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    EMU_ENTRY_INIT(cuDeviceSetMemPool);
    return set_current_pool(dev, pool);
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    EMU_ENTRY_INIT(cuMemPoolCreate);
    pthread_once(&pools_once, pools_setup);
    emu_mem_init();
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
        if (props->location.type == CU_MEM_LOCATION_TYPE_HOST || props->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
            return CUDA_ERROR_NOT_SUPPORTED;
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (emu_check_device(props->location.id) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    if (props->handleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    struct emu_pool *p = calloc(1, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    pool_init_fields(p, props->location.id);
    p->props = *props;
    pthread_mutex_lock(&current_lock);
    p->next_created = created_pools;
    created_pools = p;
    pthread_mutex_unlock(&current_lock);
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    EMU_ENTRY_INIT(cuMemPoolDestroy);
    pthread_once(&pools_once, pools_setup);
    struct emu_pool *p = pool_get(pool);
    if (!p || p->is_default) return CUDA_ERROR_INVALID_VALUE;   /* the default pool cannot be destroyed */
    pthread_mutex_lock(&current_lock);
    if (current_pool[p->dev] == p) current_pool[p->dev] = NULL;
    pthread_mutex_unlock(&current_lock);
    pthread_mutex_lock(&p->lock);
    p->destroyed = true;                 /* freed once its last allocation is */
    pool_trim(p, 0);
    pool_maybe_free_struct(p);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    EMU_ENTRY_INIT(cuMemPoolTrimTo);
    pthread_once(&pools_once, pools_setup);
    struct emu_pool *p = pool_get(pool);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&p->lock);
    pool_trim(p, minBytesToKeep);
    pthread_mutex_unlock(&p->lock);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    EMU_ENTRY_INIT(cuMemPoolSetAttribute);
    pthread_once(&pools_once, pools_setup);
    struct emu_pool *p = pool_get(pool);
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&p->lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: p->reuse_follow_events = *(int *)value != 0; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: p->reuse_opportunistic = *(int *)value != 0; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: p->reuse_internal_deps = *(int *)value != 0; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->release_threshold = *(cuuint64_t *)value; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:    /* "can only be reset to zero": resets to current */
        if (*(cuuint64_t *)value != 0) rc = CUDA_ERROR_INVALID_VALUE; else p->reserved_high = p->reserved;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0) rc = CUDA_ERROR_INVALID_VALUE; else p->used_high = p->used;
        break;
    default:                                   /* the *_CURRENT values are read-only */
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    EMU_ENTRY_INIT(cuMemPoolGetAttribute);
    pthread_once(&pools_once, pools_setup);
    struct emu_pool *p = pool_get(pool);
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&p->lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: *(int *)value = p->reuse_follow_events; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: *(int *)value = p->reuse_opportunistic; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *(int *)value = p->reuse_internal_deps; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->release_threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; break;
    default: rc = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* CUDA 13's location-based pool queries; device locations only. */
static CUresult location_device(const CUmemLocation *location, CUmemAllocationType type, int *dev)
{
    if (!location || type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE) {
        EMU_WARN_ONCE("host-located memory pools are not emulated");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    *dev = location->id;
    return emu_check_device(*dev);
}

CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location, CUmemAllocationType type)
{
    EMU_ENTRY_INIT(cuMemGetDefaultMemPool);
    int dev;
    CUresult rc = location_device(location, type, &dev);
    return rc != CUDA_SUCCESS ? rc : get_default_pool(pool_out, dev);
}

CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
    EMU_ENTRY_INIT(cuMemGetMemPool);
    int dev;
    CUresult rc = location_device(location, type, &dev);
    return rc != CUDA_SUCCESS ? rc : get_current_pool(pool, dev);
}

CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
    EMU_ENTRY_INIT(cuMemSetMemPool);
    int dev;
    CUresult rc = location_device(location, type, &dev);
    return rc != CUDA_SUCCESS ? rc : set_current_pool(dev, pool);
}

static void reset_pool_stats(struct emu_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    memset(pool->bins, 0, sizeof pool->bins);
    pool->reserved = pool->reserved_high = pool->used = pool->used_high = 0;
    pool->live = 0;
    pthread_mutex_unlock(&pool->lock);
}

void emu_pool_reset_device(int dev)
{
    pthread_once(&pools_once, pools_setup);
    /* Every block of the device, live or free, is in the address hash. */
    struct pool_block *doomed = NULL;
    for (unsigned h = 0; h < HASH_BUCKETS; h++) {
        pthread_mutex_lock(&hash_locks[h % HASH_STRIPES]);
        for (struct pool_block **pp = &hash_buckets[h]; *pp;) {
            struct pool_block *b = *pp;
            int bdev = b->pool ? b->pool->dev : emu_range_device(b->p);
            if (bdev == dev) {
                *pp = b->hnext;
                b->hnext = doomed;
                doomed = b;
            } else {
                pp = &b->hnext;
            }
        }
        pthread_mutex_unlock(&hash_locks[h % HASH_STRIPES]);
    }
    while (doomed) {
        struct pool_block *b = doomed;
        doomed = b->hnext;
        emu_arena_free(b->p, EMU_OWN_POOL);
        free(b);
    }
    reset_pool_stats(&default_pools[dev]);
    pthread_mutex_lock(&current_lock);
    for (struct emu_pool *p = created_pools; p; p = p->next_created)
        if (p->dev == dev) reset_pool_stats(p);
    pthread_mutex_unlock(&current_lock);
}

CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
    EMU_ENTRY_INIT(cuMemPoolSetAccess);
    pthread_once(&pools_once, pools_setup);
    struct emu_pool *p = pool_get(pool);
    if (!p || (!map && count)) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
        if (emu_check_device(map[i].location.id) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
        unsigned f = map[i].flags;
        if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
        if (map[i].location.id == p->dev && f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;   /* the pool's device keeps full access */
    }
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < count; i++)
        __atomic_store_n(&p->access[map[i].location.id], (uint8_t)map[i].flags, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&p->lock);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
    EMU_ENTRY_INIT(cuMemPoolGetAccess);
    pthread_once(&pools_once, pools_setup);
    struct emu_pool *p = pool_get(memPool);
    if (!p || !flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (emu_check_device(location->id) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&p->lock);
    *flags = (CUmemAccess_flags)p->access[location->id];
    pthread_mutex_unlock(&p->lock);
    return CUDA_SUCCESS;
}
