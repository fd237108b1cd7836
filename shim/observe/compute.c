/* compute.c: the sampled GPU timer of GEMM and NCCL calls (compute.h).
 *
 * A fixed table of slots, each owning a start/end event pair created once
 * and reused, so a sample costs two cuEventRecord and no allocation.  The
 * table's mutex is taken only by sampled calls (one in TRAINSHIM_FLOP_SAMPLE)
 * and by polls, never by the unsampled hot path.  A sample whose events have
 * not completed when the process ends is simply not logged: FLOP and call
 * counts never depend on it, only the measured time does. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "observe/compute.h"
#include "core/config.h"
#include "core/cuda_real.h"
#include "log/log.h"

#define SAMPLE_SLOTS 64
#define ELAPSED_RETRIES 8

enum slot_state { SLOT_FREE, SLOT_ARMED, SLOT_PENDING };

struct sample_slot {
    CUevent start, end;
    CUcontext ctx; /* the context the events belong to */
    uint64_t id;
    int kind;
    int state;
    int retries; /* polls that found the end complete but no time */
};

static struct sample_slot slots[SAMPLE_SLOTS];
static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_id = 1;
static int pending; /* slots in SLOT_PENDING (under slots_mu) */

static __thread uint64_t tls_calls __attribute__((tls_model("initial-exec")));

/* Under slots_mu.  Logs every completed sample and frees its slot. */
static void poll_locked(void)
{
    ts_cuda_fn_cuEventQuery query = TS_CUDA_REAL(cuEventQuery);
    ts_cuda_fn_cuEventElapsedTime_v2 elapsed = TS_CUDA_REAL(cuEventElapsedTime_v2);
    if (!query || !elapsed)
        return;
    for (int i = 0; i < SAMPLE_SLOTS && __atomic_load_n(&pending, __ATOMIC_RELAXED); i++) {
        struct sample_slot *s = &slots[i];
        if (s->state != SLOT_PENDING)
            continue;
        CUresult r = query(s->end);
        if (r == CUDA_ERROR_NOT_READY)
            continue;
        float ms = 0;
        CUresult e = r == CUDA_SUCCESS ? elapsed(&ms, s->start, s->end) : r;
        /* Defensive: should a driver publish the time a little after the
         * query reports completion, a few more polls before giving up. */
        if (e != CUDA_SUCCESS && r == CUDA_SUCCESS && ++s->retries < ELAPSED_RETRIES)
            continue;
        if (e == CUDA_SUCCESS && ms >= 0)
            ts_ev_gpu_time(s->id, (uint64_t)((double)ms * 1e6 + 0.5), s->kind);
        s->state = SLOT_FREE;
        __atomic_fetch_sub(&pending, 1, __ATOMIC_RELAXED);
    }
}

void ts_sample_poll(void)
{
    if (!__atomic_load_n(&pending, __ATOMIC_RELAXED))
        return;
    if (pthread_mutex_trylock(&slots_mu) != 0)
        return;
    ts_enter();
    poll_locked();
    ts_leave();
    pthread_mutex_unlock(&slots_mu);
}

/* At exit, the samples still in flight get a short, bounded wait (queries
 * only, never a synchronization that could hang the exit).  Registered at
 * the first sample, after the log's own exit flush, so it runs before it. */
static void at_exit_poll(void)
{
    for (int i = 0; i < 100 && __atomic_load_n(&pending, __ATOMIC_RELAXED); i++) {
        pthread_mutex_lock(&slots_mu);
        ts_enter();
        poll_locked();
        ts_leave();
        pthread_mutex_unlock(&slots_mu);
        if (__atomic_load_n(&pending, __ATOMIC_RELAXED))
            nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
    }
}

static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static void register_exit_poll(void) { atexit(at_exit_poll); }

/* Under slots_mu: a free slot whose events belong to ctx (the current
 * context, where new events are created). */
static struct sample_slot *take_slot(CUcontext ctx)
{
    ts_cuda_fn_cuEventCreate create = TS_CUDA_REAL(cuEventCreate);
    ts_cuda_fn_cuEventDestroy_v2 destroy = TS_CUDA_REAL(cuEventDestroy_v2);
    struct sample_slot *spare = NULL;
    for (int i = 0; i < SAMPLE_SLOTS; i++) {
        struct sample_slot *s = &slots[i];
        if (s->state != SLOT_FREE)
            continue;
        if (s->start && s->ctx == ctx)
            return s;
        if (!spare || (spare->start && !s->start))
            spare = s; /* prefer a slot that has no events yet */
    }
    if (!spare || !create)
        return NULL;
    if (spare->start && destroy) { /* events of another context: replace them */
        destroy(spare->start);
        destroy(spare->end);
    }
    spare->start = spare->end = NULL;
    if (create(&spare->start, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
        spare->start = NULL;
        return NULL;
    }
    if (create(&spare->end, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
        if (destroy)
            destroy(spare->start);
        spare->start = spare->end = NULL;
        return NULL;
    }
    spare->ctx = ctx;
    return spare;
}

/* The context a sample on stream belongs in: a created stream's own (one
 * thread may launch on every device's streams, as NCCL's single-process
 * groups do), else the current one; made current for the events'
 * creation (*pushed: to be popped). */
static CUcontext sample_context(uint64_t stream, bool *pushed)
{
    ts_cuda_fn_cuCtxGetCurrent current = TS_CUDA_REAL(cuCtxGetCurrent);
    ts_cuda_fn_cuCtxPushCurrent_v2 push = TS_CUDA_REAL(cuCtxPushCurrent_v2);
    CUcontext cur = NULL, want = ts_stream_context(stream);
    *pushed = false;
    if (!current || current(&cur) != CUDA_SUCCESS)
        cur = NULL;
    if (!want || want == cur)
        return cur;
    if (!push || push(want) != CUDA_SUCCESS)
        return NULL;
    *pushed = true;
    return want;
}

void ts_sample_begin(struct ts_gpu_sample *smp, uint64_t stream)
{
    smp->id = 0;
    smp->slot = -1;
    uint64_t every = ts_cfg()->flop_sample;
    if (ts_likely(!every || ++tls_calls < every))
        return;
    tls_calls = 0;
    pthread_once(&exit_once, register_exit_poll);
    ts_cuda_fn_cuStreamIsCapturing capturing = TS_CUDA_REAL(cuStreamIsCapturing);
    ts_cuda_fn_cuEventRecord record = TS_CUDA_REAL(cuEventRecord);
    ts_cuda_fn_cuCtxPopCurrent_v2 pop = TS_CUDA_REAL(cuCtxPopCurrent_v2);
    if (!capturing || !record)
        return;
    ts_enter();
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    /* An event recorded on a capturing stream becomes a graph node, not a
     * time: never touch a stream that captures (or whose state is unknown). */
    if (capturing((CUstream)(uintptr_t)stream, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE) {
        ts_leave();
        return;
    }
    bool pushed;
    CUcontext ctx = sample_context(stream, &pushed);
    if (!ctx) {
        ts_leave();
        return;
    }
    pthread_mutex_lock(&slots_mu);
    poll_locked();
    struct sample_slot *s = take_slot(ctx);
    if (s && record(s->start, (CUstream)(uintptr_t)stream) == CUDA_SUCCESS) {
        s->state = SLOT_ARMED;
        s->id = next_id++;
        smp->id = s->id;
        smp->slot = (int)(s - slots);
    }
    pthread_mutex_unlock(&slots_mu);
    CUcontext popped;
    if (pushed && pop)
        pop(&popped);
    ts_leave();
}

void ts_sample_end(struct ts_gpu_sample *smp, uint64_t stream, int kind, bool ok)
{
    if (ts_likely(smp->slot < 0))
        return;
    struct sample_slot *s = &slots[smp->slot];
    ts_cuda_fn_cuEventRecord record = TS_CUDA_REAL(cuEventRecord);
    ts_enter();
    bool recorded = ok && record && record(s->end, (CUstream)(uintptr_t)stream) == CUDA_SUCCESS;
    ts_leave();
    pthread_mutex_lock(&slots_mu);
    if (recorded) {
        s->kind = kind;
        s->state = SLOT_PENDING;
        s->retries = 0;
        __atomic_fetch_add(&pending, 1, __ATOMIC_RELAXED);
    } else {
        s->state = SLOT_FREE;
        smp->id = 0;
    }
    pthread_mutex_unlock(&slots_mu);
    smp->slot = -1;
}
