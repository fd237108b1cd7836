/* exec_stream.c: streams.  Each stream is a FIFO drained by its own worker
 * thread (started on first use); an op may wait for ops of other streams
 * (legacy-stream semantics, cuStreamWaitEvent), then sleeps the seeded jitter
 * and runs under the fault guard.  Stream memory is never returned to malloc
 * (destroyed streams are recycled), so a late dependency on a destroyed stream
 * or a stale handle stays safe to look at. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "exec_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct emu_devstate {
    pthread_mutex_t order_mu;      /* enqueue order of blocking streams; the list */
    struct emu_stream *streams;    /* every live stream of the device */
    struct emu_stream *legacy;
    uint64_t pending;              /* ops queued and not completed (atomic) */
};
static struct emu_devstate devs[EMU_MAX_DEVICES];
static pthread_once_t devs_once = PTHREAD_ONCE_INIT;

static pthread_mutex_t free_mu = PTHREAD_MUTEX_INITIALIZER;
static struct emu_stream *free_streams;
static uint64_t next_stream_id = 16;

static pthread_key_t per_thread_key;

/* A child forked after workers started has none of them (nor a usable copy
 * of the parent's device state): stream work fails there, as CUDA does in a
 * forked child, instead of waiting forever for threads that do not exist. */
static int workers_started;
static int forked_child;
static void after_fork_child(void)
{
    if (__atomic_load_n(&workers_started, __ATOMIC_RELAXED)) forked_child = 1;
}
static __thread struct emu_stream *per_thread[EMU_MAX_DEVICES];

__thread uint64_t emu_stream_timed_ops;

uint64_t emu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void emu_jitter_sleep(void)
{
    unsigned j = __atomic_load_n(&emu_cfg.jitter_us, __ATOMIC_RELAXED);
    if (!j) return;
    uint64_t us = emu_rand() % ((uint64_t)j + 1);
    if (!us) return;
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

static bool is_blocking(const struct emu_stream *st)
{
    return st->kind != EMU_STREAM_USER || !(st->flags & CU_STREAM_NON_BLOCKING);
}

static struct emu_stream *stream_alloc(int dev, int kind, unsigned flags, int priority)
{
    struct emu_stream *st = NULL;
    pthread_mutex_lock(&free_mu);
    if (free_streams) { st = free_streams; free_streams = st->next_free; }
    pthread_mutex_unlock(&free_mu);
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st) return NULL;
        pthread_mutex_init(&st->mu, NULL);
        pthread_cond_init(&st->work_cv, NULL);
        pthread_cond_init(&st->done_cv, NULL);
    }
    /* enq_seq/done_seq carry on from the previous life: stale dependencies
     * on this memory are already satisfied. */
    st->dev = dev;
    st->kind = kind;
    st->flags = flags;
    st->priority = priority;
    st->id = __atomic_fetch_add(&next_stream_id, 1, __ATOMIC_RELAXED);
    st->head = st->tail = NULL;
    st->destroying = false;
    st->worker_started = false;
    st->worker_idle = false;
    st->capture = NULL;
    st->next_free = NULL;
    struct emu_devstate *d = &devs[dev];
    pthread_mutex_lock(&d->order_mu);
    st->next_on_dev = d->streams;
    d->streams = st;
    __atomic_store_n(&st->magic, EMU_STREAM_MAGIC, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&d->order_mu);
    return st;
}

/* Unlinks a finished stream and recycles its memory. */
static void stream_retire(struct emu_stream *st)
{
    struct emu_devstate *d = &devs[st->dev];
    pthread_mutex_lock(&d->order_mu);
    for (struct emu_stream **pp = &d->streams; *pp; pp = &(*pp)->next_on_dev)
        if (*pp == st) { *pp = st->next_on_dev; break; }
    pthread_mutex_unlock(&d->order_mu);
    pthread_mutex_lock(&free_mu);
    st->next_free = free_streams;
    free_streams = st;
    pthread_mutex_unlock(&free_mu);
}

static void per_thread_exit(void *unused)
{
    (void)unused;
    for (int d = 0; d < EMU_MAX_DEVICES; d++) {
        struct emu_stream *st = per_thread[d];
        if (!st) continue;
        per_thread[d] = NULL;
        emu_stream_destroy_resolved(st);
    }
}

static void devs_init(void)
{
    pthread_key_create(&per_thread_key, per_thread_exit);
    pthread_atfork(NULL, NULL, after_fork_child);
    for (int d = 0; d < EMU_MAX_DEVICES; d++) pthread_mutex_init(&devs[d].order_mu, NULL);
}

static struct emu_stream *legacy_of(int dev)
{
    struct emu_devstate *d = &devs[dev];
    struct emu_stream *st = __atomic_load_n(&d->legacy, __ATOMIC_ACQUIRE);
    if (st) return st;
    static pthread_mutex_t legacy_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&legacy_mu);
    if (!(st = d->legacy)) {
        st = stream_alloc(dev, EMU_STREAM_LEGACY, 0, 0);
        __atomic_store_n(&d->legacy, st, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&legacy_mu);
    return st;
}

static struct emu_stream *per_thread_of(int dev)
{
    struct emu_stream *st = per_thread[dev];
    if (st) return st;
    st = stream_alloc(dev, EMU_STREAM_PER_THREAD, 0, 0);
    per_thread[dev] = st;
    pthread_setspecific(per_thread_key, (void *)1);   /* arms the exit destructor */
    return st;
}

struct emu_stream *emu_stream_resolve(CUstream s, bool per_thread_default)
{
    emu_init();
    pthread_once(&devs_once, devs_init);
    if ((uintptr_t)s <= (uintptr_t)CU_STREAM_PER_THREAD) {   /* the current device's */
        int dev = emu_current_device();
        if (s == NULL) return per_thread_default ? per_thread_of(dev) : legacy_of(dev);
        return s == CU_STREAM_LEGACY ? legacy_of(dev) : per_thread_of(dev);
    }
    if ((uintptr_t)s < 4096) return NULL;   /* small integers are never handles */
    struct emu_stream *st = (struct emu_stream *)s;
    if (__atomic_load_n(&st->magic, __ATOMIC_ACQUIRE) != EMU_STREAM_MAGIC) return NULL;
    return st;
}

struct emu_stream *emu_stream_legacy(int dev)
{
    emu_init();
    pthread_once(&devs_once, devs_init);
    return legacy_of(dev);
}

/* ------------------------------------------------------------------ worker */
void emu_stream_wait_seq(struct emu_stream *st, uint64_t seq)
{
    if (__atomic_load_n(&st->done_seq, __ATOMIC_ACQUIRE) >= seq) return;
    pthread_mutex_lock(&st->mu);
    while (st->done_seq < seq) pthread_cond_wait(&st->done_cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
}

static void *stream_worker(void *p)
{
    struct emu_stream *st = p;
    emu_fault_thread_init();
    struct emu_devstate *d = &devs[st->dev];
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (!st->head && !st->destroying) {
            st->worker_idle = true;
            pthread_cond_wait(&st->work_cv, &st->mu);
            st->worker_idle = false;
        }
        struct emu_op *op = st->head;
        if (!op) break;
        pthread_mutex_unlock(&st->mu);
        for (int i = 0; i < op->ndeps; i++) emu_stream_wait_seq(op->deps[i].on, op->deps[i].seq);
        emu_jitter_sleep();
        if (op->fn && strcmp(op->name, "event_record") != 0) emu_stream_timed_ops++;
        if (op->fn) emu_guarded_run(op->fn, op->arg);
        if (op->free_arg) op->free_arg(op->arg);
        pthread_mutex_lock(&st->mu);
        st->head = op->next;
        if (!st->head) st->tail = NULL;
        __atomic_store_n(&st->done_seq, op->seq, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&st->done_cv);
        __atomic_fetch_sub(&d->pending, 1, __ATOMIC_ACQ_REL);
        if (op->deps != op->inline_deps) free(op->deps);
        free(op);
    }
    st->worker_started = false;
    pthread_mutex_unlock(&st->mu);
    emu_fault_thread_exit();
    stream_retire(st);
    return NULL;
}

static bool add_dep(struct emu_op *op, int *cap, struct emu_stream *on, uint64_t seq)
{
    if (op->ndeps == *cap) {
        int ncap = *cap * 2;
        struct emu_dep *nd = malloc(sizeof *nd * (size_t)ncap);
        if (!nd) return false;
        memcpy(nd, op->deps, sizeof *nd * (size_t)op->ndeps);
        if (op->deps != op->inline_deps) free(op->deps);
        op->deps = nd;
        *cap = ncap;
    }
    op->deps[op->ndeps++] = (struct emu_dep){on, seq};
    return true;
}

CUresult emu_stream_enqueue_on(struct emu_stream *st, emu_op_fn fn, void *arg,
                               void (*free_arg)(void *), const char *name,
                               const struct emu_dep *extra_dep, uint64_t *seq_out)
{
    if (forked_child) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult sticky = emu_sticky();
    if (sticky != CUDA_SUCCESS) return sticky;
    if (__atomic_load_n(&st->capture, __ATOMIC_ACQUIRE)) {
        bool recorded;
        CUresult rc = emu_capture_record(st, fn, arg, free_arg, name, &recorded);
        if (rc != CUDA_SUCCESS || recorded) return rc;
    }
    if (st->kind == EMU_STREAM_LEGACY) {
        CUresult rc = emu_capture_check_legacy(st->dev);
        if (rc != CUDA_SUCCESS) return rc;
    }
    struct emu_op *op = malloc(sizeof *op);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    op->next = NULL;
    op->fn = fn;
    op->arg = arg;
    op->free_arg = free_arg;
    op->name = name;
    op->ndeps = 0;
    op->deps = op->inline_deps;
    int cap = EMU_MAX_OP_DEPS;
    if (extra_dep && extra_dep->on != st) add_dep(op, &cap, extra_dep->on, extra_dep->seq);

    struct emu_devstate *d = &devs[st->dev];
    bool blocking = is_blocking(st);
    /* Blocking streams and the legacy stream order their enqueues under one
     * device lock, so "prior work" is well defined in both directions and
     * dependencies always point backwards (no cycles). */
    if (blocking) {
        pthread_mutex_lock(&d->order_mu);
        if (st->kind == EMU_STREAM_LEGACY) {
            for (struct emu_stream *o = d->streams; o; o = o->next_on_dev) {
                if (o == st || !is_blocking(o)) continue;
                uint64_t e = __atomic_load_n(&o->enq_seq, __ATOMIC_ACQUIRE);
                if (e > __atomic_load_n(&o->done_seq, __ATOMIC_ACQUIRE)) add_dep(op, &cap, o, e);
            }
        } else if (__atomic_load_n(&d->legacy, __ATOMIC_ACQUIRE)) {
            struct emu_stream *l = d->legacy;
            uint64_t e = __atomic_load_n(&l->enq_seq, __ATOMIC_ACQUIRE);
            if (e > __atomic_load_n(&l->done_seq, __ATOMIC_ACQUIRE)) add_dep(op, &cap, l, e);
        }
    }
    __atomic_fetch_add(&d->pending, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&st->mu);
    if (!st->worker_started) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int err = pthread_create(&st->worker, &attr, stream_worker, st);
        pthread_attr_destroy(&attr);
        if (err) {
            pthread_mutex_unlock(&st->mu);
            if (blocking) pthread_mutex_unlock(&d->order_mu);
            __atomic_fetch_sub(&d->pending, 1, __ATOMIC_ACQ_REL);
            if (op->deps != op->inline_deps) free(op->deps);
            free(op);
            EMU_WARN_ONCE("cannot start a stream worker thread: %s", strerror(err));
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        st->worker_started = true;
        __atomic_store_n(&workers_started, 1, __ATOMIC_RELAXED);
    }
    uint64_t seq = __atomic_load_n(&st->enq_seq, __ATOMIC_RELAXED) + 1;
    op->seq = seq;   /* op belongs to the worker once unlocked: use `seq` after */
    __atomic_store_n(&st->enq_seq, seq, __ATOMIC_RELEASE);
    if (st->tail) st->tail->next = op; else st->head = op;
    st->tail = op;
    if (st->worker_idle) pthread_cond_signal(&st->work_cv);   /* a busy worker will see it */
    pthread_mutex_unlock(&st->mu);
    if (blocking) pthread_mutex_unlock(&d->order_mu);
    if (seq_out) *seq_out = seq;
    return CUDA_SUCCESS;
}

CUresult emu_stream_enqueue(CUstream s, emu_op_fn fn, void *arg, void (*free_arg)(void *),
                            const char *name)
{
    struct emu_stream *st = emu_stream_resolve(s, false);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    return emu_stream_enqueue_on(st, fn, arg, free_arg, name, NULL, NULL);
}

/* ------------------------------------------------------------- synchronize */
/* Waits for every stream of dev; blocking_only: only those the legacy
 * stream synchronizes with. */
static void wait_device_streams(int dev, bool blocking_only)
{
    struct emu_devstate *d = &devs[dev];
    struct emu_dep snap[64];
    int n;
    do {
        n = 0;
        bool more = false;
        pthread_mutex_lock(&d->order_mu);
        for (struct emu_stream *o = d->streams; o; o = o->next_on_dev) {
            if (blocking_only && !is_blocking(o)) continue;
            uint64_t e = __atomic_load_n(&o->enq_seq, __ATOMIC_ACQUIRE);
            if (e <= __atomic_load_n(&o->done_seq, __ATOMIC_ACQUIRE)) continue;
            if (n == 64) { more = true; break; }
            snap[n++] = (struct emu_dep){o, e};
        }
        pthread_mutex_unlock(&d->order_mu);
        for (int i = 0; i < n; i++) emu_stream_wait_seq(snap[i].on, snap[i].seq);
        if (!more) break;
    } while (n);
}

CUresult emu_stream_sync_resolved(struct emu_stream *st)
{
    if (forked_child) return CUDA_ERROR_NOT_INITIALIZED;
    struct emu_capture *c = __atomic_load_n(&st->capture, __ATOMIC_ACQUIRE);
    if (c) {
        emu_capture_invalidate(c);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (st->kind == EMU_STREAM_LEGACY) {
        CUresult rc = emu_capture_check_legacy(st->dev);
        if (rc != CUDA_SUCCESS) return rc;
        wait_device_streams(st->dev, true);
    }
    emu_stream_wait_seq(st, __atomic_load_n(&st->enq_seq, __ATOMIC_ACQUIRE));
    return emu_sticky();
}

CUresult emu_stream_sync(CUstream s)
{
    struct emu_stream *st = emu_stream_resolve(s, false);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    return emu_stream_sync_resolved(st);
}

CUresult emu_device_sync(int dev)
{
    CUresult rc = emu_check_device(dev);
    if (rc != CUDA_SUCCESS) return rc;
    pthread_once(&devs_once, devs_init);
    if (forked_child) return CUDA_ERROR_NOT_INITIALIZED;
    if (__atomic_load_n(&devs[dev].pending, __ATOMIC_ACQUIRE) == 0) return emu_sticky();
    wait_device_streams(dev, false);
    return emu_sticky();
}

int emu_stream_is_capturing(CUstream s)
{
    struct emu_stream *st = emu_stream_resolve(s, false);
    if (!st) return -1;
    return __atomic_load_n(&st->capture, __ATOMIC_ACQUIRE) != NULL;
}

int emu_stream_device(CUstream s)
{
    struct emu_stream *st = emu_stream_resolve(s, false);
    return st ? st->dev : -1;
}

void emu_stream_destroy_resolved(struct emu_stream *st)
{
    struct emu_capture *c = __atomic_exchange_n(&st->capture, NULL, __ATOMIC_ACQ_REL);
    if (c) emu_capture_invalidate(c);
    __atomic_store_n(&st->magic, 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&st->mu);
    st->destroying = true;
    bool worker = st->worker_started;
    pthread_cond_signal(&st->work_cv);
    pthread_mutex_unlock(&st->mu);
    /* Pending work still completes: the worker drains the queue, then
     * retires the stream itself. */
    if (!worker) stream_retire(st);
}

/* A primary context's reset destroys the streams created in it ("destroys
 * all allocations and resets all state"): their handles die, and the next
 * streams may be given them.  Their queued work still completes. */
void emu_stream_destroy_device(int dev)
{
    pthread_once(&devs_once, devs_init);
    struct emu_devstate *d = &devs[dev];
    for (;;) {
        struct emu_stream *victim = NULL;
        pthread_mutex_lock(&d->order_mu);
        for (struct emu_stream *st = d->streams; st && !victim; st = st->next_on_dev)
            if (st->kind == EMU_STREAM_USER && __atomic_load_n(&st->magic, __ATOMIC_ACQUIRE) == EMU_STREAM_MAGIC)
                victim = st;
        pthread_mutex_unlock(&d->order_mu);
        if (!victim) return;
        emu_stream_destroy_resolved(victim);
    }
}

CUresult emu_stream_create(struct emu_stream **out, unsigned flags, int priority)
{
    pthread_once(&devs_once, devs_init);
    struct emu_stream *st = stream_alloc(emu_current_device(), EMU_STREAM_USER, flags, priority);
    if (!st) return CUDA_ERROR_OUT_OF_MEMORY;
    *out = st;
    return CUDA_SUCCESS;
}
