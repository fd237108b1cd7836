/* exec_event.c: events.  A record is an op on the stream that stamps the time
 * when it runs; the event remembers (stream, op number) of its latest record,
 * which is what queries, syncs and cuStreamWaitEvent look at.  A record on a
 * capturing stream only ties the event to the capture.  Event memory is
 * recycled, never freed, so a pending record of a destroyed event is safe.
 * Every event ever made is on one list, so that a primary context's reset
 * destroys the events made in it, as the driver does (their handles are
 * invalid afterwards). */
#define __CUDA_API_VERSION_INTERNAL 1
#include "exec_internal.h"

#include <stdlib.h>

#define EMU_EVENT_MAGIC 0x45564e54u   /* "EVNT"; cleared when destroyed */
#define CHECK(x) do { CUresult rc_ = (x); if (rc_ != CUDA_SUCCESS) return rc_; } while (0)

struct emu_event {
    unsigned magic;
    unsigned flags;
    int dev;                      /* the device of the context it was created in */
    pthread_mutex_t mu;
    uint64_t gen;                 /* bumped by every record */
    struct emu_stream *st;        /* latest record (NULL: never recorded) */
    uint64_t seq;
    uint64_t time_ns;             /* set when the record op runs */
    struct emu_capture *capture;  /* recorded inside this capture */
    struct emu_event *next_free;
    struct emu_event *next_made;  /* every event ever made (under free_mu) */
};

static pthread_mutex_t free_mu = PTHREAD_MUTEX_INITIALIZER;
static struct emu_event *free_events, *made_events;

static struct emu_event *event_of(CUevent h)
{
    struct emu_event *e = (struct emu_event *)h;
    if ((uintptr_t)e < 4096 || __atomic_load_n(&e->magic, __ATOMIC_ACQUIRE) != EMU_EVENT_MAGIC) return NULL;
    return e;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    EMU_ENTRY(cuEventCreate);
    CHECK(emu_require_ctx());
    if (!phEvent) return CUDA_ERROR_INVALID_VALUE;
    unsigned all = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (Flags & ~all) return CUDA_ERROR_INVALID_VALUE;
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    struct emu_event *e = NULL;
    pthread_mutex_lock(&free_mu);
    if (free_events) { e = free_events; free_events = e->next_free; }
    pthread_mutex_unlock(&free_mu);
    if (!e) {
        if (!(e = calloc(1, sizeof *e))) return CUDA_ERROR_OUT_OF_MEMORY;
        pthread_mutex_init(&e->mu, NULL);
        pthread_mutex_lock(&free_mu);
        e->next_made = made_events;
        made_events = e;
        pthread_mutex_unlock(&free_mu);
    }
    pthread_mutex_lock(&e->mu);
    e->flags = Flags;
    e->dev = emu_current_device();
    e->gen++;          /* orphans any record still pending from a previous life */
    e->st = NULL;
    e->seq = 0;
    e->time_ns = 0;
    e->capture = NULL;
    e->next_free = NULL;
    pthread_mutex_unlock(&e->mu);
    __atomic_store_n(&e->magic, EMU_EVENT_MAGIC, __ATOMIC_RELEASE);
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

/* free_mu held: e (live) becomes invalid and reusable; false when another
 * thread destroyed it first. */
static bool event_retire_locked(struct emu_event *e)
{
    unsigned m = EMU_EVENT_MAGIC;
    if (!__atomic_compare_exchange_n(&e->magic, &m, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return false;
    e->next_free = free_events;
    free_events = e;
    return true;
}

static CUresult event_destroy(CUevent hEvent)
{
    struct emu_event *e = event_of(hEvent);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&free_mu);
    bool mine = event_retire_locked(e);
    pthread_mutex_unlock(&free_mu);
    return mine ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

void emu_event_destroy_device(int dev)
{
    pthread_mutex_lock(&free_mu);
    for (struct emu_event *e = made_events; e; e = e->next_made)
        if (e->dev == dev) event_retire_locked(e); /* a free one is refused by its magic */
    pthread_mutex_unlock(&free_mu);
}

struct record_op { struct emu_event *e; uint64_t gen; };
static void run_record(void *p)
{
    struct record_op *r = p;
    uint64_t now = emu_now_ns();
    pthread_mutex_lock(&r->e->mu);
    if (r->e->gen == r->gen) r->e->time_ns = now;
    pthread_mutex_unlock(&r->e->mu);
}

static CUresult event_record(CUevent hEvent, CUstream h, unsigned flags, bool pt)
{
    struct emu_event *e = event_of(hEvent);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    /* "hEvent and hStream must be from the same context otherwise
     * CUDA_ERROR_INVALID_HANDLE is returned" (cuEventRecord) */
    if (st->dev != e->dev) return CUDA_ERROR_INVALID_HANDLE;
    struct emu_capture *c = __atomic_load_n(&st->capture, __ATOMIC_ACQUIRE);
    if (c) {
        /* In a capture a record is a dependency, not a time. */
        pthread_mutex_lock(&e->mu);
        e->gen++;
        e->capture = c;
        e->st = NULL;
        pthread_mutex_unlock(&e->mu);
        return CUDA_SUCCESS;
    }
    struct record_op *op = malloc(sizeof *op);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&e->mu);
    op->e = e;
    uint64_t gen = op->gen = ++e->gen;
    pthread_mutex_unlock(&e->mu);
    uint64_t seq;
    /* op belongs to the worker once queued (it may already be freed): use gen */
    CUresult rc = emu_stream_enqueue_on(st, run_record, op, free, "event_record", NULL, &seq);
    if (rc != CUDA_SUCCESS) { free(op); return rc; }
    pthread_mutex_lock(&e->mu);
    if (e->gen == gen) {
        e->st = st;
        e->seq = seq;
        e->capture = NULL;
    }
    pthread_mutex_unlock(&e->mu);
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{ EMU_ENTRY_STREAM(cuEventRecord, hStream); return event_record(hEvent, hStream, 0, false); }
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{ EMU_ENTRY_STREAM(cuEventRecord_ptsz, hStream); return event_record(hEvent, hStream, 0, true); }
CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{ EMU_ENTRY_STREAM(cuEventRecordWithFlags, hStream); return event_record(hEvent, hStream, flags, false); }
CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{ EMU_ENTRY_STREAM(cuEventRecordWithFlags_ptsz, hStream); return event_record(hEvent, hStream, flags, true); }

/* Snapshot of the latest record. */
struct record_state { struct emu_stream *st; uint64_t seq; struct emu_capture *capture; };
static struct record_state latest(struct emu_event *e)
{
    pthread_mutex_lock(&e->mu);
    struct record_state r = {e->st, e->seq, e->capture};
    pthread_mutex_unlock(&e->mu);
    return r;
}

static bool in_live_capture(const struct record_state *r)
{
    return r->capture && emu_capture_id(r->capture) != 0;
}

CUresult cuEventQuery(CUevent hEvent)
{
    EMU_ENTRY_INIT(cuEventQuery);
    struct emu_event *e = event_of(hEvent);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    struct record_state r = latest(e);
    if (in_live_capture(&r)) return CUDA_ERROR_CAPTURED_EVENT;
    CHECK(emu_sticky());
    if (!r.st) return CUDA_SUCCESS;
    return __atomic_load_n(&r.st->done_seq, __ATOMIC_ACQUIRE) >= r.seq ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    EMU_ENTRY_INIT(cuEventSynchronize);
    struct emu_event *e = event_of(hEvent);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    struct record_state r = latest(e);
    if (in_live_capture(&r)) return CUDA_ERROR_CAPTURED_EVENT;
    if (r.st) emu_stream_wait_seq(r.st, r.seq);
    return emu_sticky();
}

static CUresult elapsed(float *ms, CUevent hStart, CUevent hEnd)
{
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    struct emu_event *a = event_of(hStart), *b = event_of(hEnd);
    if (!a || !b) return CUDA_ERROR_INVALID_HANDLE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    struct record_state ra = latest(a), rb = latest(b);
    if (in_live_capture(&ra) || in_live_capture(&rb)) return CUDA_ERROR_CAPTURED_EVENT;
    if (!ra.st || !rb.st) return CUDA_ERROR_INVALID_HANDLE;
    if (__atomic_load_n(&ra.st->done_seq, __ATOMIC_ACQUIRE) < ra.seq ||
        __atomic_load_n(&rb.st->done_seq, __ATOMIC_ACQUIRE) < rb.seq)
        return CUDA_ERROR_NOT_READY;
    CHECK(emu_sticky());
    pthread_mutex_lock(&a->mu);
    uint64_t ta = a->time_ns;
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_lock(&b->mu);
    uint64_t tb = b->time_ns;
    pthread_mutex_unlock(&b->mu);
    *ms = (float)(((double)tb - (double)ta) / 1e6);
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{ EMU_ENTRY_INIT(cuEventElapsedTime); return elapsed(pMilliseconds, hStart, hEnd); }
CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{ EMU_ENTRY_INIT(cuEventElapsedTime_v2); return elapsed(pMilliseconds, hStart, hEnd); }

/* ------------------------------------------------------- cuStreamWaitEvent */
static CUresult wait_event(CUstream h, CUevent hEvent, unsigned flags, bool pt)
{
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    struct emu_event *e = event_of(hEvent);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    struct record_state r = latest(e);
    if (in_live_capture(&r)) {
        /* Waiting on an event of a capture pulls the stream into it (fork);
         * graphs replay in one order, which keeps every captured edge. */
        return emu_capture_join(st, r.capture);
    }
    if (__atomic_load_n(&st->capture, __ATOMIC_ACQUIRE)) {
        /* Ordering on work outside the graph cannot be expressed in it: the
         * captured op would depend on nothing.  Recorded as a no-op. */
        bool recorded;
        CUresult rc = emu_capture_record(st, NULL, NULL, NULL, "event_wait", &recorded);
        if (rc != CUDA_SUCCESS || recorded) return rc;
    }
    if (!r.st) return CUDA_SUCCESS;     /* never recorded: nothing to wait for */
    struct emu_dep dep = {r.st, r.seq};
    return emu_stream_enqueue_on(st, NULL, NULL, NULL, "event_wait", &dep, NULL);
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{ EMU_ENTRY_STREAM(cuStreamWaitEvent, hStream); return wait_event(hStream, hEvent, Flags, false); }
CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{ EMU_ENTRY_STREAM(cuStreamWaitEvent_ptsz, hStream); return wait_event(hStream, hEvent, Flags, true); }

CUresult cuEventDestroy(CUevent hEvent)
{ EMU_ENTRY_INIT(cuEventDestroy); return event_destroy(hEvent); }

CUresult cuEventDestroy_v2(CUevent hEvent)
{ EMU_ENTRY_INIT(cuEventDestroy_v2); return event_destroy(hEvent); }
