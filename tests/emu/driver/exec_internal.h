/* exec_internal.h: what the exec*.c files of the emulated driver share
 * (streams, events, capture state).  Not part of the contract with mem*.c:
 * that is emu_driver.h. */
#ifndef EMU_EXEC_INTERNAL_H
#define EMU_EXEC_INTERNAL_H

#include "emu_driver.h"

enum emu_stream_kind { EMU_STREAM_USER = 0, EMU_STREAM_LEGACY = 1, EMU_STREAM_PER_THREAD = 2 };

#define EMU_STREAM_MAGIC 0x53545245u   /* "STRE"; cleared when destroyed */
#define EMU_MAX_OP_DEPS 8

/* A wait of one op for stream `on` to have completed op number `seq`. */
struct emu_dep { struct emu_stream *on; uint64_t seq; };

struct emu_op {
    struct emu_op *next;
    emu_op_fn fn;
    void *arg;
    void (*free_arg)(void *);
    const char *name;
    uint64_t seq;
    int ndeps;
    struct emu_dep *deps;                  /* inline_deps or a heap array */
    struct emu_dep inline_deps[EMU_MAX_OP_DEPS];
};

struct emu_capture;

struct emu_stream {
    unsigned magic;
    int dev;
    int kind;                   /* enum emu_stream_kind */
    unsigned flags;             /* CU_STREAM_DEFAULT / CU_STREAM_NON_BLOCKING */
    int priority;
    uint64_t id;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;     /* worker waits for ops */
    pthread_cond_t done_cv;     /* synchronizers and dependent workers wait here */
    struct emu_op *head, *tail;
    uint64_t enq_seq;           /* ops enqueued so far (atomic reads) */
    uint64_t done_seq;          /* ops completed so far (atomic reads) */
    bool worker_started, destroying;
    bool worker_idle;           /* worker waits on work_cv: signal needed */
    pthread_t worker;
    struct emu_capture *capture;   /* non-NULL while capturing (atomic reads) */
    struct emu_stream *next_on_dev;   /* device list of blocking streams */
    struct emu_stream *next_free;
};

/* core.c */
void emu_clear_sticky(void);
/* exec_context.c */
/* Device of a context handle, or -1 if it is not a live context. */
int emu_ctx_device(CUcontext c);
/* The primary context of dev (created on first use). */
CUcontext emu_primary_ctx(int dev);

/* exec_stream.c */
/* Resolves a handle (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or a created
 * stream); per_thread_default: the entry point is a _ptsz/_ptds variant, so
 * handle 0 means the calling thread's per-thread stream.  NULL if invalid. */
struct emu_stream *emu_stream_resolve(CUstream s, bool per_thread_default);
/* The legacy stream of device dev (created on first use). */
struct emu_stream *emu_stream_legacy(int dev);
/* Enqueues on an already resolved stream; extra_dep (may be NULL) adds a
 * wait (cuStreamWaitEvent).  Honours capture.  Out: the op's sequence number. */
CUresult emu_stream_enqueue_on(struct emu_stream *st, emu_op_fn fn, void *arg,
                               void (*free_arg)(void *), const char *name,
                               const struct emu_dep *extra_dep, uint64_t *seq_out);
/* Waits until st has completed op number seq. */
void emu_stream_wait_seq(struct emu_stream *st, uint64_t seq);
CUresult emu_stream_sync_resolved(struct emu_stream *st);
/* Marks st destroyed; its queued work still completes. */
void emu_stream_destroy_resolved(struct emu_stream *st);
/* Destroys every stream created on dev (a primary context reset). */
void emu_stream_destroy_device(int dev);
/* A primary context's reset: the events made in it are destroyed. */
void emu_event_destroy_device(int dev);
/* Creates a user stream on the current device. */
CUresult emu_stream_create(struct emu_stream **out, unsigned flags, int priority);
/* Sleeps the configured jitter (called by workers before each op). */
void emu_jitter_sleep(void);
uint64_t emu_now_ns(void);
/* Ops a stream worker thread has run that take time (all but event records
 * and the markers without a function): a copy's link window follows the one
 * before it only when nothing timed ran between them (exec_copy.c). */
extern __thread uint64_t emu_stream_timed_ops;
/* Runs fn(arg) under the fault guard; returns false if it faulted. */
bool emu_guarded_run(emu_op_fn fn, void *arg);
/* An access the device refuses, found by a check rather than a SIGSEGV
 * (emu_vmm_access_ok, emu_kernel_arg_access_ok): inside a stream op it
 * abandons the op exactly as a fault does (sticky CUDA_ERROR_ILLEGAL_ADDRESS,
 * faults.illegal_address) and does not return; outside one it only sets the
 * sticky error. */
void emu_fault_access(void);
/* Called once per worker thread: alternate signal stack, handler check. */
void emu_fault_thread_init(void);
void emu_fault_thread_exit(void);
void emu_fault_install(void);

/* exec_capture.c */
/* Records op into st's capture graph; takes ownership of arg/free_arg on
 * success.  *recorded = false (and CUDA_SUCCESS) if the capture ended
 * meanwhile: the caller then enqueues normally. */
CUresult emu_capture_record(struct emu_stream *st, emu_op_fn fn, void *arg,
                            void (*free_arg)(void *), const char *name, bool *recorded);
/* The legacy stream may not be used while a blocking stream of its device
 * captures: returns CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (and invalidates). */
CUresult emu_capture_check_legacy(int dev);
/* A synchronizing call on a capturing stream: invalidates the capture. */
void emu_capture_invalidate(struct emu_capture *c);
/* Number of active captures on device dev (cheap). */
int emu_capture_active_on(int dev);
void emu_capture_invalidate_dev(int dev);
/* Joins stream st to the capture that recorded an event (cuStreamWaitEvent). */
CUresult emu_capture_join(struct emu_stream *st, struct emu_capture *c);
uint64_t emu_capture_id(struct emu_capture *c);

#endif
