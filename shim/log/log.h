/* log.h: the event log writer (shim/log/log.c).  Records (shim/log/logfmt.h) are
 * built in per-thread buffers without a syscall, lock or malloc per event;
 * full buffers go to a background writer thread.  The file is created at the
 * first record, so a process that never logs writes nothing.  See
 * docs/log-format.md. */
#ifndef TRAINSHIM_LOG_H
#define TRAINSHIM_LOG_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "log/clock.h"
#include "log/logfmt.h"

/* Fast path: reserve len bytes (a multiple of 8, a fixed-size record) in the
 * calling thread's buffer and fill the record header's len/type/tid/time.
 * The time is a reading of the log's clock (shim/log/clock.h), converted to
 * CLOCK_MONOTONIC ns when the record is written out: copy it only into a
 * field that conversion also covers (ALLOC_STACK's alloc_time_ns).
 * Returns NULL when nothing may be logged (logging off, failed, after
 * shutdown, in a fork child).  The caller fills the body, then calls
 * ts_log_commit(rec) which publishes it (its check is set when it is
 * written out, off the fast path). */
static inline struct ts_rec_hdr *ts_log_reserve(uint32_t len, uint16_t type);
/* The same for the records made per tensor (allocations and frees): a run
 * of them on one thread, with no other record between, takes one reading of
 * the clock for up to TS_LOG_RUN_MAX of them, within one kernel clock tick
 * (ts_clock_tick, 1-4 ms), each one count later than the one before (their
 * order is kept, and a record after the run reads the clock again).  A
 * reading of the CPU's counter costs ~8 ns on its own but ~50 ns after
 * cache misses (it waits for them, on the x86 machines measured): two per
 * tensor were 6% of torch's time per tensor in the churn benchmark, where a
 * tick costs ~10 ns.  A time in a run is early by at most the run's span. */
static inline struct ts_rec_hdr *ts_log_reserve_run(uint32_t len, uint16_t type);
static inline void ts_log_commit(struct ts_rec_hdr *rec);

/* A record of any length, already complete except tid/time/check (filled
 * here), copied into the log.  Records longer than a buffer are written
 * directly.  Returns 0 on success. */
int ts_log_write_record(struct ts_rec_hdr *rec);

/* An API_NAMES record (malloc'd; the log takes it).  Before the log is open
 * it is kept for the start of the file (the latest one wins); afterwards it
 * is logged like any record. */
void ts_log_set_api_record(struct ts_rec_hdr *rec);
/* Provided by shim/log/events.c, called once when the file is created: the
 * header record (malloc'd, check and tid left to the writer), or NULL. */
struct ts_rec_header *ts_ev_make_header(void);

/* Flush every buffer and the end record, then close the file.  Idempotent;
 * records made after it are dropped. */
void ts_log_shutdown(void);
/* Async-signal-safe: write(2) of whatever records are complete in memory.
 * No lock, no malloc, no end record (the log then reads as truncated). */
void ts_log_flush_signal_safe(void);
/* pthread_atfork handlers.  The child of a fork records nothing: its copy of
 * the buffers is abandoned (the parent writes them), its descriptor for the
 * parent's log is closed, and every later event in it is dropped. */
void ts_log_fork_prepare(void);
void ts_log_fork_parent(void);
void ts_log_fork_child(void);

/* TS_REC_HOST_SYNC (shim/log/events_sync.c): one host synchronization, with
 * the caller's stack when stacks are on (shim/observe/sync.c). */
void ts_ev_host_sync(int api, unsigned kind, unsigned pending, uint64_t handle, uint64_t blocked_ns,
                     int result);

/* ---- exposed for tests and tools -------------------------------------- */
/* Expand a TRAINSHIM_LOG template (%p %h %r %l %q{VAR} %%; the default
 * template gets ".r%r" before ".log" when a rank is known).  Returns 0, or -1
 * when the result does not fit in n bytes. */
int ts_log_expand_path(const char *tmpl, char *out, size_t n);
/* Rank, local rank and world size from the launcher's environment; -1 when
 * unknown. */
int ts_log_env_rank(void);
int ts_log_env_local_rank(void);
int ts_log_env_world_size(void);
/* Create path (parents too) without clobbering: O_EXCL|O_NOFOLLOW; when it
 * exists, tries "<stem>.1<ext>", "<stem>.2<ext>", ...  Writes the path used
 * into used[n].  Returns the descriptor or -1 (errno set). */
int ts_log_create_file(const char *path, char *used, size_t n);
/* The path of the open log ("" when none). */
const char *ts_log_path(void);

/* ---- the fast path, inline: a record costs no call (log.c owns all this) -- */
/* A thread's buffer.  Its owner appends whole records and publishes them by
 * a release store of committed; the writer thread, the exit flush and the
 * signal flush write the committed ranges out (log.c). */
struct ts_log_buf {
    struct ts_log_buf *next;    /* registry link, set before publication */
    _Atomic uint32_t committed; /* bytes of whole records, published by the owner */
    uint32_t used;              /* owner's write offset (== committed outside commit) */
    uint32_t flushed;           /* bytes already written; only the claimer touches it */
    _Atomic int busy;           /* flush claim */
    _Atomic int state;          /* log.c's enum buf_state */
    uint32_t cap;
    uint32_t tid;
    /* The owner's previous buffer, still to be written when this one was
     * taken: this one waits for it, so each thread's records reach the file
     * in order and a cut file holds a prefix of every thread's history. */
    struct ts_log_buf *pred;
    uint64_t pred_gen;
    _Atomic uint64_t gen;      /* bumped each time the buffer is recycled */
    _Atomic uint64_t done_gen; /* gen + 1 once handed over and all written */
    char *data;
};
/* The log's state (log.c's enum log_state; TS_LOG_OPEN: records may be
 * made) and the calling thread's buffer.  initial-exec: no __tls_get_addr
 * call on the fast path of the preloaded library. */
#define TS_LOG_OPEN 1
extern _Atomic int ts_log_state;
extern __thread struct ts_log_buf *ts_log_tls_buf __attribute__((tls_model("initial-exec")));
/* The calling thread's run of per-tensor records (ts_log_reserve_run): its
 * reading, the tick it was taken in, and how many more may share it. */
#define TS_LOG_RUN_MAX 8
struct ts_log_run {
    uint64_t reading, tick;
    uint32_t left;
};
extern __thread struct ts_log_run ts_log_tls_run __attribute__((tls_model("initial-exec")));
/* Everything but an open log with room in the thread's buffer. */
struct ts_rec_hdr *ts_log_reserve_slow(uint32_t len, uint16_t type);

static inline struct ts_rec_hdr *ts_log_fill_header(struct ts_log_buf *b, uint32_t len, uint16_t type,
                                                    uint64_t reading)
{
    struct ts_rec_hdr *r = (struct ts_rec_hdr *)(b->data + b->used);
    r->len = len;
    r->type = type;
    r->flags = 0;
    r->tid = b->tid;
    r->check = 0;
    r->time_ns = reading; /* converted when written (seal_records) */
    return r;
}

static inline bool ts_log_has_room(const struct ts_log_buf *b, uint32_t len)
{
    return __builtin_expect(atomic_load_explicit(&ts_log_state, memory_order_acquire) == TS_LOG_OPEN && b
                                && b->used + len <= b->cap,
                            1);
}

static inline struct ts_rec_hdr *ts_log_reserve(uint32_t len, uint16_t type)
{
    struct ts_log_buf *b = ts_log_tls_buf;
    ts_log_tls_run.left = 0; /* the next per-tensor record reads the clock */
    if (!ts_log_has_room(b, len))
        return ts_log_reserve_slow(len, type);
    return ts_log_fill_header(b, len, type, ts_clock_read());
}

static inline struct ts_rec_hdr *ts_log_reserve_run(uint32_t len, uint16_t type)
{
    struct ts_log_buf *b = ts_log_tls_buf;
    if (!ts_log_has_room(b, len))
        return ts_log_reserve(len, type);
    struct ts_log_run *run = &ts_log_tls_run;
    uint64_t tick = ts_clock_tick();
    if (run->left && tick == run->tick) {
        run->left--;
        return ts_log_fill_header(b, len, type, ++run->reading);
    }
    run->reading = ts_clock_read();
    run->tick = tick;
    run->left = tick ? TS_LOG_RUN_MAX - 1 : 0;
    return ts_log_fill_header(b, len, type, run->reading);
}

static inline void ts_log_commit(struct ts_rec_hdr *rec)
{
    struct ts_log_buf *b = ts_log_tls_buf;
    b->used += rec->len; /* the check is set when the record is written (seal_records) */
    atomic_store_explicit(&b->committed, b->used, memory_order_release);
}

#endif
