/* cupti.c: GPU kernel and copy activity through CUPTI (cupti.h).
 *
 * CUPTI is loaded with dlopen at the first CUDA call, never linked: a
 * machine without it (or with TRAINSHIM_CUPTI off) runs exactly as before.
 * It asks for activity buffers through a callback; they come from a pool
 * mapped once at start (no malloc per buffer or record), and a full buffer
 * is turned into compact log records (TS_REC_GPU_*, shim/log/logfmt.h) on the
 * thread that completes it, then returned to the pool.  When the pool is
 * empty CUPTI gets no buffer and drops the records itself: it counts them,
 * and so do we.
 *
 * One flusher thread calls cuptiActivityFlushAll every FLUSH_PERIOD_MS, and
 * does the forced flushes asked for at exit and on fatal signals: CUPTI is
 * never called from a signal handler (its locks may be held by the thread
 * the signal interrupted), and every wait for the flusher is bounded, so a
 * CUPTI that hangs cannot hang the job.
 *
 * fork: the child passes through (process.c) and must not touch the
 * parent's CUPTI state (its locks may have been copied held, its threads are
 * gone): our child handler turns everything here off. */
#include "observe/cupti.h"

#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "core/config.h"
#include "core/core.h"
#include "log/log.h"

#define POOL_BUFS 8          /* activity buffers; a bit each in pool_free */
#define BUF_BYTES (1u << 20) /* CUPTI's own default size; 8-byte aligned by mmap */
#define FLUSH_PERIOD_MS 500
#define NAME_SLOTS 4096      /* distinct kernel names; beyond, names are not logged */
#define NAME_MAX_LOGGED 1024 /* longer kernel names are cut */
#define SIGNAL_WAIT_MS 300   /* how long a signal handler waits for the flush */
#define EXIT_WAIT_MS 3000    /* how long exit waits for the final flush */

enum { CS_OFF, CS_ON, CS_FAILED, CS_STOPPED, CS_CHILD };

static struct {
    __typeof__(&cuptiActivityRegisterCallbacks) register_callbacks;
    __typeof__(&cuptiActivityEnable) enable;
    __typeof__(&cuptiActivityDisable) disable;
    __typeof__(&cuptiActivityFlushAll) flush_all;
    __typeof__(&cuptiActivityGetNextRecord) next_record;
    __typeof__(&cuptiActivityGetNumDroppedRecords) num_dropped;
    __typeof__(&cuptiGetTimestamp) timestamp;
    __typeof__(&cuptiGetResultString) result_string; /* optional */
} api;

static _Atomic int started; /* ts_cupti_start ran (once per process image) */
static _Atomic int cstate = CS_OFF;
static unsigned char *pool;
static _Atomic uint32_t pool_free; /* bit i: buffer i is free */

/* counters written in the status records */
static _Atomic uint64_t n_kernels, n_memcpys, n_buffers, n_dropped;

/* the flusher thread */
static pthread_t flusher;
static sem_t flusher_wake;
static _Atomic int flush_forced_req;  /* requests of a forced flush */
static _Atomic int flush_forced_done; /* forced flushes done (== req: nothing pending) */
static _Atomic int flusher_final;     /* the next forced flush is the last one */
static _Atomic int flusher_exited;

/* kernel name ids, keyed by a hash of the name (under names_mu; taken only by
 * the thread completing a buffer, never by the program's threads) */
static pthread_mutex_t names_mu = PTHREAD_MUTEX_INITIALIZER;
static struct name_slot {
    uint64_t hash;
    uint32_t id;
} names[NAME_SLOTS];
static uint32_t next_name_id = 1;
static struct {
    struct ts_rec_gpu_name r;
    char text[NAME_MAX_LOGGED + 8];
} name_rec; /* under names_mu */

/* ------------------------------------------------------------ records */
static void log_status(uint32_t state, const char *detail)
{
    struct {
        struct ts_rec_gpu_status s;
        char text[512];
    } rec;
    memset(&rec, 0, sizeof rec);
    size_t n = detail ? strnlen(detail, sizeof rec.text - 1) : 0;
    memcpy(rec.text, detail ? detail : "", n);
    rec.s.h.len = ts_rec_align((uint32_t)(sizeof rec.s + n));
    rec.s.h.type = TS_REC_GPU_STATUS;
    rec.s.state = state;
    rec.s.detail_len = (uint32_t)n;
    rec.s.kernels = atomic_load(&n_kernels);
    rec.s.memcpys = atomic_load(&n_memcpys);
    rec.s.dropped = atomic_load(&n_dropped);
    rec.s.buffers = atomic_load(&n_buffers);
    ts_log_write_record(&rec.s.h);
}

/* Pairs a CUPTI timestamp with CLOCK_MONOTONIC (the midpoint of two reads
 * around it), so the report can put GPU times on the log's axis. */
static void log_clock(void)
{
    uint64_t g = 0, a = ts_now_ns();
    if (api.timestamp(&g) != CUPTI_SUCCESS)
        return;
    uint64_t b = ts_now_ns();
    struct ts_rec_gpu_clock *c = (struct ts_rec_gpu_clock *)ts_log_reserve(sizeof *c, TS_REC_GPU_CLOCK);
    if (!c)
        return;
    c->cupti_ns = g;
    c->mono_ns = a + (b - a) / 2;
    ts_log_commit(&c->h);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h ? h : 1;
}

/* The id of a kernel name, logging a TS_REC_GPU_NAME the first time; 0 when
 * the table is full or the name unknown. */
static uint32_t name_id(const char *name)
{
    if (!name || !*name)
        return 0;
    uint64_t h = name_hash(name);
    uint32_t id = 0;
    pthread_mutex_lock(&names_mu);
    for (uint32_t i = 0, s = (uint32_t)h & (NAME_SLOTS - 1); i < NAME_SLOTS;
         i++, s = (s + 1) & (NAME_SLOTS - 1)) {
        if (names[s].hash == h) {
            id = names[s].id;
            break;
        }
        if (names[s].hash)
            continue;
        if (next_name_id >= NAME_SLOTS * 3 / 4)
            break; /* keep probes short: the rest stay unnamed */
        size_t n = strnlen(name, NAME_MAX_LOGGED);
        memset(&name_rec, 0, sizeof name_rec);
        name_rec.r.h.len = ts_rec_align((uint32_t)(sizeof name_rec.r + n));
        name_rec.r.h.type = TS_REC_GPU_NAME;
        name_rec.r.name_id = next_name_id;
        name_rec.r.len = (uint32_t)n;
        memcpy(name_rec.text, name, n);
        if (ts_log_write_record(&name_rec.r.h) == 0) {
            names[s].hash = h;
            names[s].id = id = next_name_id++;
        }
        break;
    }
    pthread_mutex_unlock(&names_mu);
    return id;
}

static void log_kernel(const CUpti_ActivityKernel10 *k)
{
    uint32_t id = name_id(k->name);
    struct ts_rec_gpu_kernel *r = (struct ts_rec_gpu_kernel *)ts_log_reserve(sizeof *r, TS_REC_GPU_KERNEL);
    if (!r)
        return;
    r->start_ns = k->start;
    r->end_ns = k->end;
    r->stream_id = k->streamId;
    r->device = k->deviceId;
    r->name_id = id;
    r->correlation_id = k->correlationId;
    ts_log_commit(&r->h);
    atomic_fetch_add_explicit(&n_kernels, 1, memory_order_relaxed);
}

static void log_memcpy(const CUpti_ActivityMemcpy6 *m)
{
    struct ts_rec_gpu_memcpy *r = (struct ts_rec_gpu_memcpy *)ts_log_reserve(sizeof *r, TS_REC_GPU_MEMCPY);
    if (!r)
        return;
    r->start_ns = m->start;
    r->end_ns = m->end;
    r->bytes = m->bytes;
    r->stream_id = m->streamId;
    r->device = m->deviceId;
    r->copy_kind = m->copyKind;
    r->src_kind = m->srcKind;
    r->dst_kind = m->dstKind;
    r->reserved0 = 0;
    r->correlation_id = m->correlationId;
    ts_log_commit(&r->h);
    atomic_fetch_add_explicit(&n_memcpys, 1, memory_order_relaxed);
}

/* ------------------------------------------------------------ buffers */
static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *max_records = 0; /* as many as fit */
    uint32_t f = atomic_load(&pool_free);
    while (f) {
        int i = __builtin_ctz(f);
        if (atomic_compare_exchange_weak(&pool_free, &f, f & ~(1u << i))) {
            *buffer = pool + (size_t)i * BUF_BYTES;
            *size = BUF_BYTES;
            return;
        }
    }
    /* every buffer is being filled or read: CUPTI drops these records and
     * counts them (cuptiActivityGetNumDroppedRecords, logged as dropped) */
    *buffer = NULL;
    *size = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)stream_id;
    (void)size;
    if (!buffer)
        return;
    if (atomic_load(&cstate) != CS_CHILD) {
        ts_enter(); /* any CUDA call CUPTI makes meanwhile is not the program's */
        CUpti_Activity *rec = NULL;
        while (valid && api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS && rec) {
            if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL)
                log_kernel((const CUpti_ActivityKernel10 *)rec);
            else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY)
                log_memcpy((const CUpti_ActivityMemcpy6 *)rec);
        }
        atomic_fetch_add(&n_buffers, 1);
        ts_leave();
    }
    ptrdiff_t off = buffer - pool;
    if (pool && off >= 0 && (size_t)off < (size_t)POOL_BUFS * BUF_BYTES)
        atomic_fetch_or(&pool_free, 1u << (off / BUF_BYTES));
}

/* ------------------------------------------------------------ flushing */
static void count_dropped(void)
{
    size_t d = 0;
    if (api.num_dropped(NULL, 0, &d) == CUPTI_SUCCESS && d)
        atomic_fetch_add(&n_dropped, d);
}

static void *flusher_main(void *arg)
{
    (void)arg;
    ts_enter(); /* CUPTI's own CUDA calls on this thread are not the program's */
    for (;;) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += FLUSH_PERIOD_MS * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        while (sem_timedwait(&flusher_wake, &dl) != 0 && errno == EINTR)
            ;
        if (atomic_load(&cstate) == CS_CHILD)
            break;
        int req = atomic_load(&flush_forced_req);
        if (req == atomic_load(&flush_forced_done)) {
            api.flush_all(0);
            continue;
        }
        bool final = atomic_load(&flusher_final);
        api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        count_dropped();
        if (final) {
            log_clock(); /* a second pair: the report can see drift */
            log_status(TS_GPU_STATUS_FINAL, NULL);
        }
        atomic_store(&flush_forced_done, req);
        if (final)
            break;
    }
    ts_leave();
    atomic_store(&flusher_exited, 1);
    return NULL;
}

/* Asks the flusher for a forced flush and waits for it, at most wait_ms.
 * Only atomics, sem_post and nanosleep: callable from a signal handler. */
static bool forced_flush(int wait_ms)
{
    int want = atomic_fetch_add(&flush_forced_req, 1) + 1;
    sem_post(&flusher_wake);
    struct timespec nap = { 0, 1000000 };
    for (int i = 0; i < wait_ms; i++) {
        if (atomic_load(&flush_forced_done) - want >= 0 || atomic_load(&flusher_exited))
            return atomic_load(&flush_forced_done) - want >= 0;
        nanosleep(&nap, NULL);
    }
    return false;
}

void ts_cupti_flush_signal(void)
{
    if (atomic_load(&cstate) != CS_ON || pthread_equal(pthread_self(), flusher))
        return;
    forced_flush(SIGNAL_WAIT_MS);
}

void ts_cupti_stop(void)
{
    int on = CS_ON;
    if (!atomic_compare_exchange_strong(&cstate, &on, CS_STOPPED))
        return;
    atomic_store(&flusher_final, 1);
    /* exited: the flusher did its final flush (maybe for an earlier request) */
    if (forced_flush(EXIT_WAIT_MS) || atomic_load(&flusher_exited)) {
        pthread_join(flusher, NULL);
    } else {
        ts_warn("CUPTI did not deliver its last activity records in %d ms; the GPU timeline may miss the end "
                "of the run",
                EXIT_WAIT_MS);
        pthread_detach(flusher);
    }
}

/* ------------------------------------------------------------ start */
static void fork_child(void)
{
    /* the parent's CUPTI is the parent's: never flushed or read here */
    atomic_store(&cstate, CS_CHILD);
    pthread_mutex_init(&names_mu, NULL);
}

static const char *result_text(CUptiResult r, char *buf, size_t n)
{
    const char *s = NULL;
    if (api.result_string && api.result_string(r, &s) == CUPTI_SUCCESS && s)
        return s;
    snprintf(buf, n, "CUPTI error %d", (int)r);
    return buf;
}

static void unavailable(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void unavailable(const char *fmt, ...)
{
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    atomic_store(&cstate, CS_FAILED);
    ts_warn("TRAINSHIM_CUPTI=1: %s; continuing without the GPU timeline (CUPTI is optional)", why);
    log_status(TS_GPU_STATUS_UNAVAILABLE, why);
}

static bool load_api(void *lib)
{
#define SYM(field, name)                                                                                     \
    if (!(api.field = (__typeof__(api.field))dlsym(lib, #name))) {                                           \
        unavailable("%s lacks %s", ts_cfg()->cupti_lib, #name);                                              \
        return false;                                                                                        \
    }
    SYM(register_callbacks, cuptiActivityRegisterCallbacks);
    SYM(enable, cuptiActivityEnable);
    SYM(disable, cuptiActivityDisable);
    SYM(flush_all, cuptiActivityFlushAll);
    SYM(next_record, cuptiActivityGetNextRecord);
    SYM(num_dropped, cuptiActivityGetNumDroppedRecords);
    SYM(timestamp, cuptiGetTimestamp);
#undef SYM
    api.result_string = (__typeof__(api.result_string))dlsym(lib, "cuptiGetResultString");
    return true;
}

static void start(void)
{
    const char *path = ts_cfg()->cupti_lib;
    if (!path || !*path)
        path = "libcupti.so.13";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        unavailable("cannot load %s (%s); set TRAINSHIM_CUPTI_LIB to its path", path, e ? e : "not found");
        return;
    }
    if (!load_api(lib)) {
        dlclose(lib);
        return;
    }
    void *m =
        mmap(NULL, (size_t)POOL_BUFS * BUF_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        unavailable("cannot map %u activity buffers: %s", POOL_BUFS, strerror(errno));
        return;
    }
    pool = m;
    atomic_store(&pool_free, (1u << POOL_BUFS) - 1);
    char eb[48];
    CUptiResult r = api.register_callbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
        unavailable("cuptiActivityRegisterCallbacks failed: %s", result_text(r, eb, sizeof eb));
        return;
    }
    r = api.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
        unavailable("cuptiActivityEnable(CONCURRENT_KERNEL) failed: %s", result_text(r, eb, sizeof eb));
        return;
    }
    r = api.enable(CUPTI_ACTIVITY_KIND_MEMCPY);
    if (r != CUPTI_SUCCESS) {
        api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        unavailable("cuptiActivityEnable(MEMCPY) failed: %s", result_text(r, eb, sizeof eb));
        return;
    }
    if (sem_init(&flusher_wake, 0, 0) != 0) {
        api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        api.disable(CUPTI_ACTIVITY_KIND_MEMCPY);
        unavailable("cannot create the flusher's semaphore");
        return;
    }
    /* the flusher takes no signals: handlers run in the program's threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int pr = pthread_create(&flusher, NULL, flusher_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pr != 0) {
        api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        api.disable(CUPTI_ACTIVITY_KIND_MEMCPY);
        unavailable("cannot start the flusher thread: %s", strerror(pr));
        return;
    }
    pthread_setname_np(flusher, "trainshim-cupti");
    pthread_atfork(NULL, NULL, fork_child);
    log_clock();
    atomic_store(&cstate, CS_ON);
    log_status(TS_GPU_STATUS_STARTED, path);
}

void ts_cupti_start(void)
{
    if (!ts_cfg()->cupti || atomic_exchange(&started, 1))
        return;
    ts_enter(); /* CUDA calls CUPTI makes while starting are not the program's */
    start();
    ts_leave();
}
