/* staging.c: the ring of pinned staging buffers behind the copy engine.
 *
 * Every buffer is TRAINSHIM_COPY_CHUNK bytes of portable pinned memory (any
 * context may copy through it) with one event.  A buffer goes back to the
 * ring right after the transfer using it was queued (H2D) or after its bytes
 * were copied out (D2H), and is handed out again only once that transfer's
 * event has completed, so a queued DMA never sees its bytes overwritten.
 * Buffers are allocated on demand up to TRAINSHIM_STAGING_BYTES; at the cap a
 * caller waits for the oldest in-flight buffer; when nothing can come free
 * (all held by other callers) or allocation fails, acquire answers NULL and
 * the copy falls back to the original call.
 *
 * One mutex guards the ring; it is taken once per chunk (megabytes), never
 * per byte, and no blocking driver call is made under it. */
#include <pthread.h>

#include "core/config.h"
#include "copy/copy_engine.h"
#include "core/cuda_real.h"
#include "numa/numa.h"

enum { MAX_BUFS = 1024 };

struct ts_staging_buf {
    void *ptr; /* NULL: slot being allocated or allocation failed */
    CUevent ev;
    CUcontext ctx;  /* context ev belongs to */
    bool recorded;  /* ev recorded and not yet seen complete */
    bool busy;      /* held by a caller */
    uint64_t stamp; /* release order: the oldest in-flight buffer is waited for first */
};

static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ts_staging_buf bufs[MAX_BUFS];
static int n_bufs;
static uint64_t allocated, release_stamp;
static bool alloc_failed; /* the driver refused pinned memory once: stop asking */

size_t ts_staging_chunk(void)
{
    static size_t chunk;
    size_t c = __atomic_load_n(&chunk, __ATOMIC_RELAXED);
    if (ts_likely(c))
        return c;
    uint64_t want = ts_cfg()->copy_chunk;
    if (want < TS_COPY_CHUNK_MIN)
        want = TS_COPY_CHUNK_MIN; /* smaller chunks only add overhead */
    if (want > TS_COPY_CHUNK_MAX)
        want = TS_COPY_CHUNK_MAX;
    c = (size_t)(want + 4095) & ~(size_t)4095;
    __atomic_store_n(&chunk, c, __ATOMIC_RELAXED);
    return c;
}

uint64_t ts_staging_bytes(void) { return __atomic_load_n(&allocated, __ATOMIC_RELAXED); }

void *ts_staging_ptr(const struct ts_staging_buf *b) { return b->ptr; }

/* Under ring_lock: true if b's last transfer is known complete. */
static bool idle_locked(struct ts_staging_buf *b)
{
    if (!b->recorded)
        return true;
    ts_cuda_fn_cuEventQuery query = TS_CUDA_REAL(cuEventQuery);
    if (query && query(b->ev) == CUDA_SUCCESS) {
        b->recorded = false;
        return true;
    }
    return false;
}

/* b is held by the caller and idle: give it an event of ctx. */
static bool bind_context(struct ts_staging_buf *b, CUcontext ctx)
{
    if (b->ev && b->ctx == ctx)
        return true;
    ts_cuda_fn_cuEventCreate create = TS_CUDA_REAL(cuEventCreate);
    ts_cuda_fn_cuEventDestroy_v2 destroy = TS_CUDA_REAL(cuEventDestroy_v2);
    if (!create || !destroy)
        return false;
    if (b->ev)
        destroy(b->ev);
    b->ev = NULL;
    if (create(&b->ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        b->ev = NULL;
        return false;
    }
    b->ctx = ctx;
    return true;
}

/* A buffer whose memory died with its context (cudaDeviceReset destroys
 * the context's pinned allocations): its slot is retired, never handed out. */
static void retire(struct ts_staging_buf *b)
{
    ts_hostclass_remove(b->ptr);
    pthread_mutex_lock(&ring_lock);
    b->ptr = NULL; /* stays busy: the slot is dead */
    __atomic_fetch_sub(&allocated, ts_staging_chunk(), __ATOMIC_RELAXED);
    pthread_mutex_unlock(&ring_lock);
}

static struct ts_staging_buf *hand_out(struct ts_staging_buf *b, CUcontext ctx)
{
    if (!ts_hostclass_driver_pinned(b->ptr)) {
        retire(b);
        return NULL;
    }
    if (bind_context(b, ctx))
        return b;
    ts_staging_release(b);
    return NULL;
}

/* Allocates the pinned memory of a reserved slot (busy, ptr NULL). */
static struct ts_staging_buf *fill_slot(struct ts_staging_buf *b, CUcontext ctx)
{
    ts_cuda_fn_cuMemHostAlloc alloc = TS_CUDA_REAL(cuMemHostAlloc);
    void *p = NULL;
    struct ts_numa_place pl; /* on the GPU's node with TRAINSHIM_NUMA=bind */
    ts_numa_place_begin(&pl);
    CUresult r = alloc ? alloc(&p, ts_staging_chunk(), CU_MEMHOSTALLOC_PORTABLE) : CUDA_ERROR_NOT_SUPPORTED;
    ts_numa_place_end(&pl, r == CUDA_SUCCESS ? p : NULL, ts_staging_chunk());
    if (r == CUDA_SUCCESS && p) {
        b->ptr = p;
        ts_hostclass_add(p, ts_staging_chunk());
        return hand_out(b, ctx);
    }
    pthread_mutex_lock(&ring_lock);
    alloc_failed = true;
    __atomic_fetch_sub(&allocated, ts_staging_chunk(), __ATOMIC_RELAXED);
    pthread_mutex_unlock(&ring_lock); /* the slot stays busy with no memory: never handed out */
    return NULL;
}

struct ts_staging_buf *ts_staging_acquire(CUcontext ctx, uint64_t *wait_ns)
{
    size_t chunk = ts_staging_chunk();
    uint64_t cap = ts_cfg()->staging_bytes;
    pthread_mutex_lock(&ring_lock);
    struct ts_staging_buf *oldest = NULL;
    for (int i = 0; i < n_bufs; i++) {
        struct ts_staging_buf *b = &bufs[i];
        if (b->busy || !b->ptr)
            continue;
        if (idle_locked(b)) {
            b->busy = true;
            pthread_mutex_unlock(&ring_lock);
            return hand_out(b, ctx);
        }
        if (!oldest || b->stamp < oldest->stamp)
            oldest = b;
    }
    if (!alloc_failed && n_bufs < MAX_BUFS && allocated + chunk <= cap) {
        struct ts_staging_buf *b = &bufs[n_bufs++];
        *b = (struct ts_staging_buf){ .busy = true };
        __atomic_fetch_add(&allocated, chunk, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&ring_lock);
        return fill_slot(b, ctx);
    }
    if (!oldest) { /* every buffer is held by another caller */
        pthread_mutex_unlock(&ring_lock);
        return NULL;
    }
    oldest->busy = true;
    pthread_mutex_unlock(&ring_lock);
    uint64_t t0 = ts_now_ns();
    CUresult r = ts_staging_wait(oldest);
    if (wait_ns)
        *wait_ns += ts_now_ns() - t0;
    if (r != CUDA_SUCCESS) { /* a failed device: let the original call report it */
        ts_staging_release(oldest);
        return NULL;
    }
    return hand_out(oldest, ctx);
}

CUresult ts_staging_record(struct ts_staging_buf *b, CUstream stream)
{
    ts_cuda_fn_cuEventRecord record = TS_CUDA_REAL(cuEventRecord);
    CUresult r = record ? record(b->ev, stream) : CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS)
        b->recorded = true;
    return r;
}

CUresult ts_staging_wait(struct ts_staging_buf *b)
{
    if (!b->recorded)
        return CUDA_SUCCESS;
    ts_cuda_fn_cuEventSynchronize sync = TS_CUDA_REAL(cuEventSynchronize);
    CUresult r = sync ? sync(b->ev) : CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS)
        b->recorded = false;
    return r;
}

void ts_staging_release(struct ts_staging_buf *b)
{
    pthread_mutex_lock(&ring_lock);
    b->busy = false;
    b->stamp = ++release_stamp;
    pthread_mutex_unlock(&ring_lock);
}
