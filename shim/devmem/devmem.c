/* devmem.c: one trainshim pool (shim/alloc/alloc.h) per device, over the real
 * driver's VMM API (cuda_provider.c with the real entry points from
 * core/cuda_real.h), serving the program's device allocations; see devmem.h for the
 * contract with the hooks.
 *
 * Streams.  A synchronous allocation or free (cudaMalloc, cudaFree,
 * cuMemAlloc, cuMemFree) uses the pseudo stream TS_DEV_NO_STREAM: its fence is
 * "done" at once, so a block freed by cudaFree is reusable only after fences
 * on every real stream the pool knows (the legacy stream, every stream
 * created through the hooks, every stream seen by cudaMallocAsync /
 * cudaFreeAsync), and a cudaMalloc never takes a block that a cudaFreeAsync
 * left pending on one stream.  Before recording a fence on a stream the
 * provider asks cuStreamIsCapturing: a capturing stream (or the legacy stream
 * during a global capture) gets no event, the batch fails, and nothing
 * pending is reused until the capture is over.  Before any fence, the pool
 * asks cuStreamQuery on its streams (stream_idle): all idle makes every free
 * so far reusable with no event at all.
 *
 * Fast path.  Pools turn on the thread caches' synchronous path
 * (cfg.sync_thread_cache): a cudaFree'd block waits in the freeing thread's
 * cache, stamped with the pool's fence epoch, and the same thread's
 * cudaMalloc of that size takes it once a fence check begun after the free
 * found every stream idle (one check per full set of ways, see alloc.h).
 * The device is asked once per allocation (the current one, or for a
 * stream-ordered one its stream's: ts_stream_device) and handed to the hook's
 * event; a free's event takes the device of the pool that owned the block.
 * A synchronous allocation tries the thread cache before asking
 * cuStreamIsCapturing: a cache hit makes no driver call that a capture could
 * object to. 
 *
 * Peers.  A pool grants every device that can reach its device peer to
 * peer (cuDeviceCanAccessPeer) access to each page it maps, in the same
 * cuMemSetAccess call pattern as the owner's: cross-device copies of pooled
 * memory work as they do for cudaMalloc memory.  cudaDeviceEnablePeerAccess
 * (hooks) calls ts_dev_peer_enabled, which grants a device missing from that
 * set on the mapped pages, and the set_access wrapper on later ones. */
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc/alloc.h"
#include "devmem/cuda_provider.h"
#include "core/config.h"
#include "core/core.h"
#include "devmem/devmem.h"
#include "core/cuda_real.h"
#include "log/logfmt.h"
#include "offload/offload.h"

#define TS_DEV_MAX 64
/* An impossible stream handle: synchronous allocations and frees. */
#define TS_DEV_NO_STREAM TS_STREAM_NONE
#define TS_DEV_MAX_STREAMS 1024

/* The provider a pool sees: the driver provider's table with devmem's own
 * steps around its fences (capture checks, the pseudo stream's fence 0), its
 * set_access (peers) and stream_idle; ctx is this struct. */
struct devprov {
    ts_page_provider inner; /* the driver provider's own table and ctx */
    int dev;
};

struct devpool {
    ts_pool *pool;
    ts_cuda_provider *cp;
    struct devprov prov;
    bool limited; /* TRAINSHIM_MEMORY_LIMIT caps it */
    /* The device's default memory pool (the driver's handle): its used and
     * reserved attributes are answered from this pool, which serves what the
     * program would have had from it. 0: unknown. */
    uint64_t default_mempool;
};

static struct devpool *pools[TS_DEV_MAX]; /* published with release stores */
static bool pool_failed[TS_DEV_MAX];      /* creation failed: pass through */
/* The pool the program made current (cudaDeviceSetMemPool), 0 while the
 * default is: a stream-ordered allocation is then its pool's, not ours. */
static uint64_t own_current_pool[TS_DEV_MAX];

/* The pool's key for a stream-ordered call's stream.  The per-thread
 * default stream (cudaStreamPerThread, or 0 through a _ptsz entry point) is
 * one handle for every thread but a different stream in each: its key is the
 * thread's own, so its frees are reused at once only by the same thread's
 * stream, and by others after a fence.  Such keys end in binary 011, which no
 * stream handle (a pointer) does; the fence paths below answer them with a
 * fence on the legacy stream, which covers every per-thread stream (they
 * are blocking streams).  A thread's key goes out of
 * the pools when it exits (numbered, never reused). */
#define THREAD_KEY_TAG 3u
static pid_t pools_owner_pid; /* the process that made the first pool */
static __thread uint64_t tls_thread_key;
static uint64_t thread_keys;
static pthread_key_t thread_key_exit;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;

static bool is_thread_key(uint64_t key) { return (key & 7) == THREAD_KEY_TAG; }

static void thread_key_gone(void *arg)
{
    uint64_t key = (uint64_t)(uintptr_t)arg;
    if (getpid() != pools_owner_pid)
        return; /* a fork child: a pool lock may have been copied held */
    for (int dev = 0; dev < TS_DEV_MAX; dev++) {
        struct devpool *d = __atomic_load_n(&pools[dev], __ATOMIC_ACQUIRE);
        if (d)
            ts_pool_stream_remove(d->pool, key);
    }
}

static void thread_key_setup(void)
{
    if (pthread_key_create(&thread_key_exit, thread_key_gone))
        thread_key_exit = (pthread_key_t)-1;
}

static uint64_t pool_stream(uint64_t stream)
{
    if (ts_likely(stream != (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD))
        return stream;
    if (ts_unlikely(!tls_thread_key)) {
        tls_thread_key = (__atomic_add_fetch(&thread_keys, 1, __ATOMIC_RELAXED) << 8) | THREAD_KEY_TAG;
        pthread_once(&thread_key_once, thread_key_setup);
        if (thread_key_exit != (pthread_key_t)-1)
            pthread_setspecific(thread_key_exit, (void *)(uintptr_t)tls_thread_key);
    }
    return tls_thread_key;
}
static bool any_pool;
static int captures;             /* captures in progress, begun through the hooks */
static uint64_t capture_changes; /* counted begins and ends so far */
static bool capture_unseen;      /* proof of a capture begun elsewhere: always ask */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

/* Streams created through the hooks, with their device, for pools created
 * later (stream creation is rare: a plain locked array). */
static struct {
    uint64_t stream;
    int dev;
} known_streams[TS_DEV_MAX_STREAMS];
static int nknown;

/* Peers granted access to each device's pool (bit = accessing device). */
static uint64_t peer_mask[TS_DEV_MAX];

/* A capture the hooks did not count is going on (its begin went through an
 * entry point the shim cannot see, e.g. a driver proc address the shim could
 * not wrap): from now on the allocation paths ask the driver every time. */
static void note_capture_unseen(const char *how)
{
    if (!__atomic_exchange_n(&capture_unseen, true, __ATOMIC_ACQ_REL))
        ts_warn("a CUDA stream capture began where trainshim could not see it (%s); "
                "stream-ordered allocations now ask the driver about captures every time",
                how);
}

/* True when work cannot be enqueued on `stream` without joining a capture. */
static bool stream_capturing(uint64_t stream)
{
    ts_cuda_fn_cuStreamIsCapturing is = TS_CUDA_REAL(cuStreamIsCapturing);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!is)
        return false;
    uint64_t changes = __atomic_load_n(&capture_changes, __ATOMIC_SEQ_CST);
    int counted = __atomic_load_n(&captures, __ATOMIC_SEQ_CST);
    CUresult r = is((CUstream)(uintptr_t)stream, &st);
    bool capturing =
        r != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE; /* error: e.g. implicit capture */
    /* The count rises before a hooked begin reaches the driver and falls
     * after its end: a capture seen while none was counted, with no begin
     * or end counted meanwhile, was begun elsewhere. */
    bool seen = r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT || (r == CUDA_SUCCESS && capturing);
    if (seen && counted == 0 && __atomic_load_n(&capture_changes, __ATOMIC_SEQ_CST) == changes && ts_active())
        note_capture_unseen("found capturing with none counted");
    return capturing;
}

/* stream_capturing on the allocation and free paths, which may skip the
 * driver call while no capture is in progress anywhere in the process:
 * every begin goes through the hooks (hooks/devmem_hooks.c), which count it
 * before it starts.  Not while the hooks pass through (they count nothing
 * then), nor once a capture was found that they did not count.  The fence
 * paths (fence_record, stream_idle) keep asking: they are rare, they touch
 * every stream the pool knows, and what they would do to a capturing stream
 * (record an event, query it) would break a capture the count missed; a
 * question skipped here matters only to an allocation or free on the
 * capturing stream itself.  `active`: ts_active() as the caller found it
 * (an allocation's or a free's hook has just asked). */
static bool stream_capturing_if_any(uint64_t stream, bool active)
{
    if (ts_likely(__atomic_load_n(&captures, __ATOMIC_ACQUIRE) == 0)
        && !__atomic_load_n(&capture_unseen, __ATOMIC_RELAXED) && active)
        return false;
    return stream_capturing(stream);
}

/* The driver provider's table behind a pool's ctx (struct devprov). */
static inline const ts_page_provider *inner(void *ctx) { return &((struct devprov *)ctx)->inner; }

/* Steps devmem passes straight to the driver provider. */
static int fwd_granularity(void *ctx, uint64_t *bytes)
{
    return inner(ctx)->granularity(inner(ctx)->ctx, bytes);
}
static int fwd_reserve(void *ctx, uint64_t size, uint64_t *va)
{
    return inner(ctx)->reserve(inner(ctx)->ctx, size, va);
}
static int fwd_unreserve(void *ctx, uint64_t va, uint64_t size)
{
    return inner(ctx)->unreserve(inner(ctx)->ctx, va, size);
}
static int fwd_create(void *ctx, uint64_t size, uint64_t *handle)
{
    return inner(ctx)->create(inner(ctx)->ctx, size, handle);
}
static int fwd_release(void *ctx, uint64_t handle) { return inner(ctx)->release(inner(ctx)->ctx, handle); }
static int fwd_map(void *ctx, uint64_t va, uint64_t size, uint64_t handle)
{
    return inner(ctx)->map(inner(ctx)->ctx, va, size, handle);
}
static int fwd_unmap(void *ctx, uint64_t va, uint64_t size)
{
    return inner(ctx)->unmap(inner(ctx)->ctx, va, size);
}
static int fwd_seg_alloc(void *ctx, uint64_t size, uint64_t *ptr)
{
    return inner(ctx)->seg_alloc(inner(ctx)->ctx, size, ptr);
}
static int fwd_seg_free(void *ctx, uint64_t ptr) { return inner(ctx)->seg_free(inner(ctx)->ctx, ptr); }

/* Fence 0 is the pseudo stream's: complete from the start.  A per-thread
 * stream's is the legacy stream's, which waits for every blocking stream
 * (the pool fences only the streams its frees were on: a per-thread
 * stream has no handle another thread could record on). */
static int fence_record(void *ctx, uint64_t stream, uint64_t *fence)
{
    if (stream == TS_DEV_NO_STREAM) {
        *fence = 0;
        return TS_PROV_OK;
    }
    if (is_thread_key(stream))
        stream = 0;
    if (stream_capturing(stream))
        return TS_PROV_ERROR;
    return inner(ctx)->fence_record(inner(ctx)->ctx, stream, fence);
}
static int fence_query(void *ctx, uint64_t f)
{
    return f ? inner(ctx)->fence_query(inner(ctx)->ctx, f) : TS_FENCE_DONE;
}
static int fence_wait(void *ctx, uint64_t f)
{
    return f ? inner(ctx)->fence_wait(inner(ctx)->ctx, f) : TS_PROV_OK;
}
static void fence_release(void *ctx, uint64_t f)
{
    if (f)
        inner(ctx)->fence_release(inner(ctx)->ctx, f);
}
/* One cuMemSetAccess for every device in mask. */
static int grant_peers(uint64_t mask, uint64_t va, uint64_t size)
{
    ts_cuda_fn_cuMemSetAccess set = TS_CUDA_REAL(cuMemSetAccess);
    if (!set)
        return TS_PROV_ERROR;
    CUmemAccessDesc d[64];
    size_t n = 0;
    for (int peer = 0; mask && peer < 64; peer++, mask >>= 1) {
        if (!(mask & 1))
            continue;
        memset(&d[n], 0, sizeof d[n]);
        d[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        d[n].location.id = peer;
        d[n].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        n++;
    }
    return !n || set((CUdeviceptr)va, (size_t)size, d, n) == CUDA_SUCCESS ? TS_PROV_OK : TS_PROV_ERROR;
}

/* The devices that can reach dev's memory peer to peer.  They get access to
 * every page the pool maps, without waiting for cudaDeviceEnablePeerAccess:
 * a plain cudaMemcpy between two devices' cudaMalloc memory works without
 * it, and the device that performs such a copy touches the other device's
 * memory, which VMM pages allow only after cuMemSetAccess for that device. */
static uint64_t peer_capable(int dev)
{
    ts_cuda_fn_cuDeviceGetCount count = TS_CUDA_REAL(cuDeviceGetCount);
    ts_cuda_fn_cuDeviceCanAccessPeer can = TS_CUDA_REAL(cuDeviceCanAccessPeer);
    int n = 0;
    uint64_t mask = 0;
    if (!count || !can || count(&n) != CUDA_SUCCESS)
        return 0;
    for (int peer = 0; peer < n && peer < 64; peer++) {
        int ok = 0;
        if (peer != dev && can(&ok, peer, dev) == CUDA_SUCCESS && ok)
            mask |= 1ull << peer;
    }
    return mask;
}

/* Newly mapped pages: the owner's access, then every enabled peer's. */
static int set_access(void *ctx, uint64_t va, uint64_t size)
{
    int rc = inner(ctx)->set_access(inner(ctx)->ctx, va, size);
    if (rc)
        return rc;
    uint64_t mask = __atomic_load_n(&peer_mask[((struct devprov *)ctx)->dev], __ATOMIC_ACQUIRE);
    return mask ? grant_peers(mask, va, size) : TS_PROV_OK;
}

struct peer_grant {
    int owner, accessor;
};

static void grant_mapped_run(void *arg, uint64_t va, uint64_t size)
{
    const struct peer_grant *g = arg;
    if (grant_peers(1ull << g->accessor, va, size))
        ts_warn("device %d: cannot grant device %d access to pooled memory", g->owner, g->accessor);
}

void ts_dev_peer_enabled(int owner, int accessor)
{
    if (owner < 0 || owner >= TS_DEV_MAX || accessor < 0 || accessor >= 64 || owner == accessor)
        return;
    /* set first: a page mapped after this sees the bit (set_access runs
     * under the pool lock, which the walk below takes) */
    __atomic_fetch_or(&peer_mask[owner], 1ull << accessor, __ATOMIC_ACQ_REL);
    struct devpool *d = __atomic_load_n(&pools[owner], __ATOMIC_ACQUIRE);
    if (!d)
        return;
    /* existing mappings, in runs of adjacent mapped pages */
    struct peer_grant g = { owner, accessor };
    ts_pool_for_each_mapped(d->pool, grant_mapped_run, &g);
}

/* cuStreamQuery: one driver call per stream, where a fence costs a record,
 * a query and usually a wait (the event is rarely complete right after its
 * record).  A capturing stream is never queried (that would invalidate its
 * capture): it counts as busy.  So does a default stream while another
 * device is current: the query would ask that device's (the fence, recorded
 * in this device's context, answers instead). */
static int stream_idle(void *ctx, uint64_t stream)
{
    if (stream == TS_DEV_NO_STREAM)
        return TS_FENCE_DONE;
    if (is_thread_key(stream))
        return TS_FENCE_PENDING; /* another thread's stream: no handle to ask */
    ts_cuda_fn_cuStreamQuery query = TS_CUDA_REAL(cuStreamQuery);
    if (!query || stream_capturing(stream))
        return TS_FENCE_PENDING;
    if (ts_stream_is_default(stream) && ts_current_device() != ((struct devprov *)ctx)->dev)
        return TS_FENCE_PENDING;
    CUresult r = query((CUstream)(uintptr_t)stream);
    return r == CUDA_SUCCESS ? TS_FENCE_DONE : r == CUDA_ERROR_NOT_READY ? TS_FENCE_PENDING : -1;
}

static ts_cuda_provider *make_provider(int dev)
{
    ts_cuda_fns f = {
        .cuMemAddressReserve = TS_CUDA_REAL(cuMemAddressReserve),
        .cuMemAddressFree = TS_CUDA_REAL(cuMemAddressFree),
        .cuMemCreate = TS_CUDA_REAL(cuMemCreate),
        .cuMemRelease = TS_CUDA_REAL(cuMemRelease),
        .cuMemMap = TS_CUDA_REAL(cuMemMap),
        .cuMemUnmap = TS_CUDA_REAL(cuMemUnmap),
        .cuMemSetAccess = TS_CUDA_REAL(cuMemSetAccess),
        .cuMemGetAllocationGranularity = TS_CUDA_REAL(cuMemGetAllocationGranularity),
        .cuMemAlloc = TS_CUDA_REAL(cuMemAlloc_v2),
        .cuMemFree = TS_CUDA_REAL(cuMemFree_v2),
        .cuEventCreate = TS_CUDA_REAL(cuEventCreate),
        .cuEventRecord = TS_CUDA_REAL(cuEventRecord),
        .cuEventQuery = TS_CUDA_REAL(cuEventQuery),
        .cuEventSynchronize = TS_CUDA_REAL(cuEventSynchronize),
        .cuEventDestroy = TS_CUDA_REAL(cuEventDestroy_v2),
        .cuCtxGetDevice = TS_CUDA_REAL(cuCtxGetDevice),
        .cuCtxGetCurrent = TS_CUDA_REAL(cuCtxGetCurrent),
        .cuCtxPushCurrent = TS_CUDA_REAL(cuCtxPushCurrent_v2),
        .cuCtxPopCurrent = TS_CUDA_REAL(cuCtxPopCurrent_v2),
        .cuStreamGetCtx = TS_CUDA_REAL(cuStreamGetCtx),
        .cuDevicePrimaryCtxRetain = TS_CUDA_REAL(cuDevicePrimaryCtxRetain),
        .cuDevicePrimaryCtxRelease = TS_CUDA_REAL(cuDevicePrimaryCtxRelease_v2),
    };
    return ts_cuda_provider_create(&f, dev);
}

static int chosen_mode(int dev)
{
    int mode = ts_cfg()->alloc;
    if (mode != TS_ALLOC_EXPANDABLE)
        return mode;
    ts_cuda_fn_cuDeviceGetAttribute attr = TS_CUDA_REAL(cuDeviceGetAttribute);
    int vmm = 0;
    if (!attr || attr(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS)
        vmm = 0;
    return vmm ? TS_ALLOC_EXPANDABLE : TS_ALLOC_CACHING;
}

/* The table a pool gets: devmem's steps over the driver provider's, with
 * w (per pool) as ctx.  Optional steps the driver provider lacks stay NULL. */
static ts_page_provider wrap_provider(struct devprov *w, const ts_page_provider *in, int dev)
{
    w->inner = *in;
    w->dev = dev;
#define STEP(name, fn) .name = in->name ? fn : NULL
    return (ts_page_provider){
        .ctx = w,
        STEP(granularity, fwd_granularity),
        STEP(reserve, fwd_reserve),
        STEP(unreserve, fwd_unreserve),
        STEP(create, fwd_create),
        STEP(release, fwd_release),
        STEP(map, fwd_map),
        STEP(unmap, fwd_unmap),
        STEP(set_access, set_access),
        STEP(seg_alloc, fwd_seg_alloc),
        STEP(seg_free, fwd_seg_free),
        STEP(fence_record, fence_record),
        STEP(fence_query, fence_query),
        STEP(fence_wait, fence_wait),
        STEP(fence_release, fence_release),
        .stream_idle = stream_idle,
    };
#undef STEP
}

static bool capture_in_progress(void) { return __atomic_load_n(&captures, __ATOMIC_ACQUIRE) > 0; }

/* TRAINSHIM_OFFLOAD: the real entry points it needs, and its provider wrap. */
static void offload_attach(int dev, ts_page_provider *prov)
{
#define REAL(name) TS_CUDA_REAL(name)
    ts_offload_driver f = {
        .cuMemCreate = REAL(cuMemCreate),
        .cuMemRelease = REAL(cuMemRelease),
        .cuMemMap = REAL(cuMemMap),
        .cuMemUnmap = REAL(cuMemUnmap),
        .cuMemSetAccess = REAL(cuMemSetAccess),
        .cuMemAddressReserve = REAL(cuMemAddressReserve),
        .cuMemAddressFree = REAL(cuMemAddressFree),
        .cuMemcpyDtoD = REAL(cuMemcpyDtoD_v2),
        .cuCtxSynchronize = REAL(cuCtxSynchronize),
        .cuDeviceGetAttribute = REAL(cuDeviceGetAttribute),
        .cuMemGetInfo = REAL(cuMemGetInfo_v2),
        .cuMemAllocManaged = REAL(cuMemAllocManaged),
        .cuDevicePrimaryCtxRetain = REAL(cuDevicePrimaryCtxRetain),
        .cuCtxSetCurrent = REAL(cuCtxSetCurrent),
        .cuCtxGetCurrent = REAL(cuCtxGetCurrent),
        .capturing = capture_in_progress,
    };
#undef REAL
    ts_offload_managed_attach(&f);
    ts_offload_attach(dev, &f, prov);
}

static struct devpool *create_pool(int dev)
{
    ts_cuda_fn_cuDeviceTotalMem_v2 total_mem = TS_CUDA_REAL(cuDeviceTotalMem_v2);
    size_t total = 0;
    if (!total_mem || total_mem(&total, dev) != CUDA_SUCCESS || !total)
        return NULL;
    struct devpool *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->cp = make_provider(dev);
    if (!d->cp) {
        free(d);
        return NULL;
    }
    ts_page_provider prov = wrap_provider(&d->prov, ts_cuda_provider_table(d->cp), dev);
    __atomic_fetch_or(&peer_mask[dev], peer_capable(dev), __ATOMIC_ACQ_REL);
    offload_attach(dev, &prov);

    const struct ts_fraction_or_size *lim = &ts_cfg()->memory_limit;
    uint64_t limit = lim->bytes                               ? lim->bytes
                     : lim->fraction > 0 && lim->fraction < 1 ? (uint64_t)(lim->fraction * total)
                                                              : 0;
    if (limit >= total)
        limit = 0;
    ts_pool_config cfg = { .mode = chosen_mode(dev),
                           .device = dev,
                           .capacity = total,
                           .memory_limit = limit,
                           .sync_thread_cache = true,
                           .idle_release_ns = ts_cfg()->alloc_idle_ms * 1000000ull,
                           .grow_slack_pct =
                               ts_cfg()->alloc_slack_pct && ts_cfg()->alloc_slack_pct < TS_GROW_UNBOUNDED
                                   ? (uint32_t)ts_cfg()->alloc_slack_pct
                               : ts_cfg()->alloc_step_plan ? TS_GROW_STEP_PLAN
                                                           : TS_GROW_UNBOUNDED,
                           .step_plan = ts_cfg()->alloc_step_plan };
    int status = 0;
    d->pool = ts_pool_create(&cfg, &prov, &status);
    if (!d->pool && cfg.mode == TS_ALLOC_EXPANDABLE) {
        cfg.mode = TS_ALLOC_CACHING; /* VMM refused (old driver, MIG...): plain segments */
        d->pool = ts_pool_create(&cfg, &prov, &status);
    }
    if (!d->pool) {
        ts_cuda_provider_destroy(d->cp);
        free(d);
        return NULL;
    }
    d->limited = limit != 0;
    ts_cuda_fn_cuDeviceGetDefaultMemPool get_default = TS_CUDA_REAL(cuDeviceGetDefaultMemPool);
    CUmemoryPool mp = NULL;
    if (get_default && get_default(&mp, dev) == CUDA_SUCCESS)
        d->default_mempool = (uint64_t)(uintptr_t)mp;
    ts_offload_pool_created(dev, d->pool);
    ts_pool_stream_add(d->pool, 0);
    for (int i = 0; i < nknown; i++)
        if (known_streams[i].dev == dev)
            ts_pool_stream_add(d->pool, known_streams[i].stream);
    return d;
}

/* ---- log records ------------------------------------------------------------ */
/* One TS_REC_POOL_STATS with the pool's counters (the report's DEVICE MEMORY
 * figures).  ts_log_reserve drops it when the log is off, closed or in a fork
 * child. */
static void log_pool_stats(int dev, struct devpool *d, uint32_t reason)
{
    ts_alloc_stats st;
    memset(&st, 0, sizeof st);
    ts_pool_stats(d->pool, &st);
    struct ts_rec_pool_stats r;
    memset(&r, 0, sizeof r);
    r.device = dev;
    r.mode = ts_pool_mode(d->pool);
    r.reason = reason;
    r.peak_reserved_bytes = st.peak_reserved_bytes;
    r.peak_allocated_bytes = st.peak_allocated_bytes;
    r.allocated_at_reserved_peak = st.allocated_at_reserved_peak;
    r.reserved_bytes = st.reserved_bytes;
    r.allocated_bytes = st.allocated_bytes;
    r.driver_calls = st.driver_calls;
    r.fence_calls = st.fence_calls;
    r.cache_hits = st.cache_hits;
    r.ooms = st.ooms;
    r.allocs = st.allocs;
    r.frees = st.frees;
    r.segments = st.segments;
    r.mapped_pages = st.mapped_pages;
    r.page_moves = st.page_moves;
    ts_plan_stats ps;
    ts_pool_plan_stats(d->pool, &ps);
    r.plan_adopted = ps.adopted;
    r.plan_period = ps.period;
    r.plan_hits = ps.hits;
    r.plan_misses = ps.misses;
    r.plan_state = !ps.enabled  ? TS_POOL_PLAN_OFF
                   : !ps.active ? TS_POOL_PLAN_NONE
                   : ps.settled ? TS_POOL_PLAN_SETTLED
                                : TS_POOL_PLAN_SETTLING;
    r.plan_calls_since_settled = ps.settled ? st.driver_calls - ps.settled_calls : 0;
    ts_ev_pool_stats(&r);
}

/* Registered when the first pool is created, i.e. after process.c's exit
 * flush (registered at the first hook): atexit runs handlers in reverse, so
 * these records reach the log before its end record.  A fork child exiting
 * skips it: a pool lock may have been copied held by a thread that does not
 * exist there (and the child logs nothing anyway). */
static void log_pools_at_exit(void)
{
    if (getpid() != pools_owner_pid)
        return;
    for (int dev = 0; dev < TS_DEV_MAX; dev++) {
        struct devpool *d = __atomic_load_n(&pools[dev], __ATOMIC_ACQUIRE);
        if (d)
            log_pool_stats(dev, d, TS_POOL_REASON_SHUTDOWN);
    }
}
static bool exit_logging_registered;

/* dev's pool if one was created (never creates one), else NULL. */
static ts_pool *existing_pool(int dev)
{
    if (dev < 0 || dev >= TS_DEV_MAX)
        return NULL;
    struct devpool *d = __atomic_load_n(&pools[dev], __ATOMIC_ACQUIRE);
    return d ? d->pool : NULL;
}

int ts_dev_pool_mode(int dev)
{
    ts_pool *p = existing_pool(dev);
    return p ? ts_pool_mode(p) : -1;
}

static struct devpool *pool_of(int dev)
{
    struct devpool *d = __atomic_load_n(&pools[dev], __ATOMIC_ACQUIRE);
    if (ts_likely(d != NULL) || __atomic_load_n(&pool_failed[dev], __ATOMIC_RELAXED))
        return d;
    pthread_mutex_lock(&create_lock);
    d = pools[dev];
    if (!d && !pool_failed[dev]) {
        d = create_pool(dev);
        if (d) {
            __atomic_store_n(&any_pool, true, __ATOMIC_RELEASE);
            __atomic_store_n(&pools[dev], d, __ATOMIC_RELEASE);
            if (!exit_logging_registered) {
                exit_logging_registered = true;
                pools_owner_pid = getpid();
                atexit(log_pools_at_exit);
            }
        } else {
            pool_failed[dev] = true;
            ts_warn("device %d: cannot create the device allocator; its allocations pass through", dev);
        }
    }
    pthread_mutex_unlock(&create_lock);
    return d;
}

/* TRAINSHIM_ALLOC=off, read once: the option table does not change after
 * it is loaded, and ts_cfg() is a pthread_once call per allocation. */
static bool alloc_off(void)
{
    static int off = -1;
    int v = __atomic_load_n(&off, __ATOMIC_RELAXED);
    if (ts_unlikely(v < 0)) {
        v = ts_cfg()->alloc == TS_ALLOC_OFF;
        __atomic_store_n(&off, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* The device an allocation is for. */
static int alloc_device(uint64_t stream, bool async, bool runtime)
{
    if (async && !ts_stream_is_default(stream))
        return ts_stream_device(stream);
    return runtime ? ts_current_device_kept() : ts_current_device();
}

int ts_dev_alloc(uint64_t size, uint64_t stream, bool async, bool runtime, uint64_t *ptr, int *devp)
{
    *ptr = 0;
    *devp = -1;
    if (size == 0 || alloc_off())
        return TS_DEV_PASS;
    /* cudaMallocAsync: "the memory pool associated with the stream's device",
     * whichever device is current */
    int dev = alloc_device(stream, async, runtime);
    *devp = dev;
    if (dev < 0)
        return TS_DEV_NO_CONTEXT;
    if (dev >= TS_DEV_MAX)
        return TS_DEV_PASS;
    if (async && __atomic_load_n(&own_current_pool[dev], __ATOMIC_RELAXED))
        return TS_DEV_PASS; /* the program's own pool is current */
    struct devpool *d = pool_of(dev);
    if (!d)
        return TS_DEV_PASS;
    /* While any capture is in progress every allocation is the real call's:
     * on the capturing stream it is graph-owned; a synchronous one is the
     * real call's to allow or refuse as the thread's capture mode says; and
     * growing the pool (cuMemAlloc, cuMemCreate...) could invalidate a
     * global-mode capture that the program's own call would not. */
    if (__atomic_load_n(&captures, __ATOMIC_ACQUIRE) > 0)
        return TS_DEV_PASS;
    /* A synchronous allocation served by the thread cache makes no driver
     * call, so a capture begun where the hooks did not see it (the legacy
     * stream's cuStreamIsCapturing below) has nothing to be invalidated by:
     * the driver is asked only before the pool's own path. */
    if (!async && ts_pool_alloc_cached(d->pool, size, TS_DEV_NO_STREAM, ptr))
        return TS_DEV_SERVED;
    /* only the hooks' active path allocates (devmem.h) */
    if (stream_capturing_if_any(async ? stream : 0, true))
        return TS_DEV_PASS;
    uint64_t key = async ? pool_stream(stream) : TS_DEV_NO_STREAM;
    int rc = ts_pool_alloc(d->pool, size, key, 0, ptr);
    if (rc == TS_ALLOC_OOM && ts_offload_oom_begin(dev)) {
        /* what the pool held idle went back: host pages may back it now */
        rc = ts_pool_alloc(d->pool, size, key, 0, ptr);
        ts_offload_oom_end();
    }
    if (rc == TS_ALLOC_OK) {
        ts_offload_note_alloc(dev, *ptr, size);
        return TS_DEV_SERVED;
    }
    *ptr = 0;
    if (rc == TS_ALLOC_OOM && ts_offload_managed_alloc(dev, size, ptr))
        return TS_DEV_SERVED;
    if (rc == TS_ALLOC_OOM)
        return d->limited ? TS_DEV_OOM : TS_DEV_PASS;
    if (rc == TS_ALLOC_ERROR) {
        /* passthrough from now on: what the pool holds idle (its thread
         * caches included) goes back, so the real calls find that memory */
        ts_pool_trim(d->pool);
        ts_fallback_passthrough("device allocator failed on a %llu-byte request (device %d)",
                                (unsigned long long)size, dev);
    }
    return TS_DEV_PASS;
}

bool ts_dev_pooling(void) { return __atomic_load_n(&any_pool, __ATOMIC_ACQUIRE); }

int ts_dev_free(uint64_t ptr, uint64_t stream, bool async, bool active, int *devp)
{
    *devp = -1;
    if (!ptr || !ts_dev_pooling())
        return TS_DEV_NOT_OURS;
    unsigned flags = 0;
    if (async && stream_capturing_if_any(stream, active)) {
        /* Only graph allocations (the real call's) may be freed in capture:
         * a pooled block is refused as the driver refuses its own pool's. */
        return ts_dev_lookup(ptr, NULL, NULL) ? TS_DEV_INVALID : TS_DEV_NOT_OURS;
    }
    if (async) {
        flags = TS_FF_STREAM_ORDERED;
        stream = pool_stream(stream);
    } else
        stream = TS_DEV_NO_STREAM; /* reused after fences on every stream, none while one captures */
    /* passthrough (the pool serves no more allocations): no thread cache
     * holds the block for a reuse that will not come */
    if (!active)
        flags |= TS_FF_NO_CACHE;
    /* one lookup per pool: the block's own pool frees it (the usual single
     * device answers at the first) */
    for (int dev = 0; dev < TS_DEV_MAX; dev++) {
        struct devpool *d = __atomic_load_n(&pools[dev], __ATOMIC_ACQUIRE);
        if (d && ts_pool_free(d->pool, ptr, stream, flags) == TS_ALLOC_OK) {
            ts_offload_note_free(ptr);
            *devp = dev;
            return TS_DEV_FREED;
        }
    }
    for (int dev = 0; dev < TS_DEV_MAX; dev++) {
        struct devpool *d = __atomic_load_n(&pools[dev], __ATOMIC_ACQUIRE);
        if (d && ts_pool_owns(d->pool, ptr)) {
            *devp = dev;
            return TS_DEV_INVALID;
        }
    }
    return TS_DEV_NOT_OURS;
}

bool ts_dev_lookup(uint64_t ptr, uint64_t *base, uint64_t *size)
{
    if (!ptr || !ts_dev_pooling())
        return false;
    for (int dev = 0; dev < TS_DEV_MAX; dev++) {
        struct devpool *d = __atomic_load_n(&pools[dev], __ATOMIC_ACQUIRE);
        if (d && ts_pool_lookup(d->pool, ptr, base, size) == TS_ALLOC_OK)
            return true;
    }
    return false;
}

void ts_dev_current_pool_set(int dev, uint64_t pool)
{
    if (dev < 0 || dev >= TS_DEV_MAX)
        return;
    ts_cuda_fn_cuDeviceGetDefaultMemPool get_default = TS_CUDA_REAL(cuDeviceGetDefaultMemPool);
    CUmemoryPool def = NULL;
    bool is_default =
        get_default && get_default(&def, dev) == CUDA_SUCCESS && (uint64_t)(uintptr_t)def == pool;
    __atomic_store_n(&own_current_pool[dev], is_default ? 0 : pool, __ATOMIC_RELEASE);
}

void ts_dev_mempool_destroyed(uint64_t pool)
{
    for (int dev = 0; dev < TS_DEV_MAX; dev++) {
        uint64_t cur = pool;
        __atomic_compare_exchange_n(&own_current_pool[dev], &cur, 0, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED);
    }
}

bool ts_dev_range(uint64_t ptr, uint64_t *base, uint64_t *size)
{
    if (!ptr || !ts_dev_pooling())
        return false;
    for (int dev = 0; dev < TS_DEV_MAX; dev++) {
        struct devpool *d = __atomic_load_n(&pools[dev], __ATOMIC_ACQUIRE);
        if (d && ts_pool_range(d->pool, ptr, base, size) == TS_ALLOC_OK)
            return true;
    }
    return false;
}

bool ts_dev_stats(int dev, ts_alloc_stats *out)
{
    ts_pool *p = existing_pool(dev);
    if (p)
        ts_pool_stats(p, out);
    return p != NULL;
}

uint64_t ts_dev_idle_bytes(int dev)
{
    ts_alloc_stats st;
    if (!ts_dev_stats(dev, &st))
        return 0;
    return st.reserved_bytes > st.allocated_bytes ? st.reserved_bytes - st.allocated_bytes : 0;
}

void ts_dev_stream_created(uint64_t stream)
{
    int dev = ts_current_device();
    if (dev < 0 || dev >= TS_DEV_MAX)
        return;
    pthread_mutex_lock(&create_lock);
    if (nknown < TS_DEV_MAX_STREAMS)
        known_streams[nknown++] = (__typeof__(known_streams[0])){ stream, dev };
    struct devpool *d = pools[dev];
    pthread_mutex_unlock(&create_lock);
    if (d)
        ts_pool_stream_add(d->pool, stream);
}

void ts_dev_stream_destroying(uint64_t stream)
{
    int dev = -1;
    pthread_mutex_lock(&create_lock);
    for (int i = 0; i < nknown; i++)
        if (known_streams[i].stream == stream) {
            dev = known_streams[i].dev;
            known_streams[i] = known_streams[--nknown];
            break;
        }
    pthread_mutex_unlock(&create_lock);
    /* Streams seen only by cudaMallocAsync/cudaFreeAsync are in a pool too. */
    for (int i = 0; i < TS_DEV_MAX; i++) {
        struct devpool *d = __atomic_load_n(&pools[i], __ATOMIC_ACQUIRE);
        if (d && (dev < 0 || dev == i))
            ts_pool_stream_remove(d->pool, stream);
    }
}

void ts_dev_reset(int dev)
{
    if (dev < 0 || dev >= TS_DEV_MAX)
        return;
    __atomic_store_n(&own_current_pool[dev], 0, __ATOMIC_RELEASE); /* the reset makes the default current */
    pthread_mutex_lock(&create_lock);
    struct devpool *d = pools[dev];
    __atomic_store_n(&pools[dev], NULL, __ATOMIC_RELEASE);
    pool_failed[dev] = false;
    pthread_mutex_unlock(&create_lock);
    if (!d)
        return;
    log_pool_stats(dev, d, TS_POOL_REASON_RESET);
    /* The reset destroys the context's work and memory anyway; the pool's
     * pages go back first so that nothing of ours outlives it. */
    ts_pool_destroy(d->pool);
    ts_cuda_provider_destroy(d->cp);
    free(d);
}

bool ts_dev_last_oom(int dev, ts_oom_report *out)
{
    ts_pool *p = existing_pool(dev);
    if (!p)
        return false;
    ts_pool_last_oom(p, out);
    return out->requested != 0;
}

void ts_dev_capture_begin(void)
{
    __atomic_fetch_add(&capture_changes, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&captures, 1, __ATOMIC_SEQ_CST);
}

void ts_dev_capture_end(void)
{
    /* never below 0: an end with nothing counted ends a capture begun where
     * the hooks did not see it (before the shim was active, or elsewhere) */
    __atomic_fetch_add(&capture_changes, 1, __ATOMIC_SEQ_CST);
    int c = __atomic_load_n(&captures, __ATOMIC_ACQUIRE);
    if (c == 0)
        note_capture_unseen("ended with none counted");
    while (c > 0
           && !__atomic_compare_exchange_n(&captures, &c, c - 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
}

/* ---- the default memory pool's attributes ------------------------------- */

static struct devpool *pool_of_mempool(uint64_t mempool)
{
    if (!mempool || !ts_dev_pooling())
        return NULL;
    for (int dev = 0; dev < TS_DEV_MAX; dev++) {
        struct devpool *d = __atomic_load_n(&pools[dev], __ATOMIC_ACQUIRE);
        if (d && d->default_mempool == mempool)
            return d;
    }
    return NULL;
}

bool ts_dev_mempool_attr(uint64_t mempool, int attr, uint64_t *value)
{
    struct devpool *d = pool_of_mempool(mempool);
    if (!d)
        return false;
    ts_pool_usage u;
    ts_pool_usage_of(d->pool, &u);
    switch (attr) {
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *value = u.reserved; return true;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *value = u.peak_reserved; return true;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *value = u.live; return true;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *value = u.peak_live; return true;
    default: return false;
    }
}

void ts_dev_mempool_attr_set(uint64_t mempool, int attr)
{
    struct devpool *d = pool_of_mempool(mempool);
    if (!d)
        return;
    if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
        ts_pool_reset_peaks(d->pool, true, false);
    else if (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH)
        ts_pool_reset_peaks(d->pool, false, true);
}

void ts_dev_mempool_trim(uint64_t mempool, uint64_t keep)
{
    struct devpool *d = pool_of_mempool(mempool);
    if (!d)
        return;
    ts_pool_usage u;
    ts_pool_usage_of(d->pool, &u);
    /* The pool gives back all it holds idle or none of it: trimming is
     * worth it only when it holds more than the program keeps. */
    if (u.reserved > keep)
        ts_pool_trim(d->pool);
}
