/* Collectives, send/recv and groups of the emulated NCCL.
 *
 * Each operation becomes a task run by a host function enqueued on the
 * caller's stream (cuLaunchHostFunc through the driver), so it executes after
 * the stream's earlier work and before its later work, like NCCL's kernel.
 * Collectives move data through per-rank staging slots of the communicator's
 * shared segment, one bounded chunk at a time: publish my chunk, barrier,
 * read/reduce what I need from the slots, barrier.  Send/recv use byte rings
 * per ordered rank pair; all p2p operations of one communicator in a group
 * form one task that progresses every transfer, so a ring exchange inside a
 * group cannot deadlock. */
#include "nccl_emu.h"
#include "common/driver_link.h"
#include "common/skip_modes.h"
#include "emu.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NCCL_ALIAS(name) __typeof__(p##name) name __attribute__((weak, alias("p" #name)))

enum task_kind { K_ALLREDUCE, K_BROADCAST, K_REDUCE, K_ALLGATHER, K_REDUCESCATTER, K_ALLTOALL, K_GATHER,
                 K_SCATTER, K_P2P };

struct p2p_op { int is_send, peer; char *buf; size_t bytes, done; };

struct task {
    struct task *next;
    struct ncclComm *comm;
    CUstream stream;
    enum task_kind kind;
    const char *send;
    char *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;                  /* built-in op; PreMulSum is turned into Sum + premul */
    int root;
    int premul;                      /* 0 none, 1 host scalar, 2 device scalar */
    double premul_scalar;
    const void *premul_ptr;
    ncclDataType_t premul_type;
    int persistent;                  /* enqueued under stream capture: may run many times */
    int nops, capacity;
    struct p2p_op *ops;
};

/* ------------------------------------------------------------ execution */
static pthread_once_t link_once = PTHREAD_ONCE_INIT;
static double link_gbps_value;
static void read_link_env(void)
{
    const char *e = getenv("EMU_LINK_GBPS");
    link_gbps_value = e ? atof(e) : 0;
}

static double link_gbps(void)
{
    pthread_once(&link_once, read_link_env);
    return link_gbps_value;
}

static void simulate_link(size_t bytes)
{
    double g = link_gbps();
    if (g <= 0 || bytes == 0) return;
    double secs = (double)bytes / (g * 1e9);
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    nanosleep(&ts, NULL);
}

/* My contribution of n elements at src into dst (a slot), pre-multiplied if the
 * op is a PreMulSum. */
static void publish(const struct task *t, void *dst, const void *src, size_t n)
{
    size_t es = nccl_type_size(t->type);
    if (!t->premul) { memcpy(dst, src, n * es); return; }
    double s = t->premul == 1 ? t->premul_scalar : nccl_load_scalar(t->premul_ptr, t->premul_type);
    nccl_scale(dst, src, n, t->type, s);
}

/* EMU_COMPUTE=skip: the ranks still meet (the collective stays ordered
 * across them) and the bytes are accounted, but nothing is copied or
 * reduced. */
static ncclResult_t skip_collective(struct task *t, size_t *moved)
{
    int n = t->comm->nranks;
    int per_rank = t->kind == K_REDUCESCATTER || t->kind == K_ALLTOALL || t->kind == K_SCATTER ||
                   t->kind == K_ALLGATHER || t->kind == K_GATHER;
    *moved += t->count * nccl_type_size(t->type) * (per_rank ? (size_t)n : 1);
    nccl_count("nccl.skipped", 1);
    return nccl_shm_barrier(t->comm->shm);
}

static ncclResult_t run_collective(struct task *t, size_t *moved)
{
    if (emu_compute_skipped_for((unsigned long long)t->count * nccl_type_size(t->type))) return skip_collective(t, moved);
    struct ncclComm *c = t->comm;
    struct nccl_shm *s = c->shm;
    int n = c->nranks, me = c->rank;
    size_t es = nccl_type_size(t->type);
    /* per-peer regions (reduce-scatter, all-to-all, scatter) split the slot n ways */
    int split = t->kind == K_REDUCESCATTER || t->kind == K_ALLTOALL || t->kind == K_SCATTER;
    size_t chunk = nccl_shm_slot_bytes() / es / (split ? (size_t)n : 1);
    char *mine = nccl_shm_slot(s, me);
    const void *srcs[NCCL_EMU_MAX_RANKS];
    ncclResult_t rc;
    for (size_t off = 0; off < t->count; off += chunk) {
        size_t m = t->count - off < chunk ? t->count - off : chunk;
        size_t mb = m * es, ob = off * es, cb = chunk * es, countb = t->count * es;
        switch (t->kind) {   /* publish */
        case K_ALLREDUCE: case K_REDUCE: case K_ALLGATHER: case K_GATHER:
            publish(t, mine, t->send + ob, m);
            break;
        case K_BROADCAST:
            if (me == t->root) memcpy(mine, t->send + ob, mb);
            break;
        case K_REDUCESCATTER: case K_ALLTOALL:
            for (int r = 0; r < n; r++) publish(t, mine + (size_t)r * cb, t->send + (size_t)r * countb + ob, m);
            break;
        case K_SCATTER:
            if (me == t->root)
                for (int r = 0; r < n; r++) memcpy(mine + (size_t)r * cb, t->send + (size_t)r * countb + ob, mb);
            break;
        case K_P2P: break;
        }
        if ((rc = nccl_shm_barrier(s)) != ncclSuccess) return rc;
        switch (t->kind) {   /* consume */
        case K_ALLREDUCE: case K_REDUCE:
            if (t->kind == K_ALLREDUCE || me == t->root) {
                for (int j = 0; j < n; j++) srcs[j] = nccl_shm_slot(s, j);
                nccl_reduce(t->recv + ob, srcs, n, m, t->type, t->op);
            }
            break;
        case K_BROADCAST:
            memcpy(t->recv + ob, nccl_shm_slot(s, t->root), mb);
            break;
        case K_ALLGATHER: case K_GATHER:
            if (t->kind == K_ALLGATHER || me == t->root)
                for (int j = 0; j < n; j++) memcpy(t->recv + (size_t)j * countb + ob, nccl_shm_slot(s, j), mb);
            break;
        case K_REDUCESCATTER:
            for (int j = 0; j < n; j++) srcs[j] = (char *)nccl_shm_slot(s, j) + (size_t)me * cb;
            nccl_reduce(t->recv + ob, srcs, n, m, t->type, t->op);
            break;
        case K_ALLTOALL:
            for (int j = 0; j < n; j++)
                memcpy(t->recv + (size_t)j * countb + ob, (char *)nccl_shm_slot(s, j) + (size_t)me * cb, mb);
            break;
        case K_SCATTER:
            memcpy(t->recv + ob, (char *)nccl_shm_slot(s, t->root) + (size_t)me * cb, mb);
            break;
        case K_P2P: break;
        }
        if ((rc = nccl_shm_barrier(s)) != ncclSuccess) return rc;   /* slots free for the next chunk */
        *moved += mb * (split || t->kind == K_ALLGATHER || t->kind == K_GATHER ? (size_t)n : 1);
    }
    return ncclSuccess;
}

/* Progresses every transfer of the group at once; transfers to the same peer
 * in the same direction go strictly one after the other (NCCL's ordering). */
static ncclResult_t run_p2p(struct task *t, size_t *moved)
{
    struct ncclComm *c = t->comm;
    for (;;) {
        uint32_t seen = nccl_shm_doorbell(c->shm, c->rank);
        uint64_t busy_send = 0, busy_recv = 0;
        int progress = 0, pending = 0;
        for (int i = 0; i < t->nops; i++) {
            struct p2p_op *o = &t->ops[i];
            if (o->done == o->bytes) continue;
            pending = 1;
            uint64_t bit = 1ull << o->peer, *busy = o->is_send ? &busy_send : &busy_recv;
            if (*busy & bit) continue;
            *busy |= bit;
            size_t k = o->is_send ? nccl_shm_ring_write(c->shm, c->rank, o->peer, o->buf + o->done, o->bytes - o->done)
                                  : nccl_shm_ring_read(c->shm, o->peer, c->rank, o->buf + o->done, o->bytes - o->done);
            o->done += k;
            *moved += k;
            if (k) progress = 1;
        }
        if (!pending) return ncclSuccess;
        if (!progress) {
            ncclResult_t rc = nccl_shm_doorbell_wait(c->shm, c->rank, seen);
            if (rc != ncclSuccess) return rc;
        }
    }
}

/* Buffers in host-located VMM memory are reached over the host link
 * (emuHostLinkCharge: counted, and timed at EMU_HOST_LINK_GBPS). */
static void charge_host_link(const struct task *t)
{
    uint64_t (*charge)(const void *, size_t) = EMU_DRV(emuHostLinkCharge);
    if (!charge) return;
    if (t->kind == K_P2P) {
        for (int i = 0; i < t->nops; i++) charge(t->ops[i].buf, t->ops[i].bytes);
        return;
    }
    size_t n = (size_t)t->comm->nranks, bytes = t->count * nccl_type_size(t->type);
    int send_all = t->kind == K_REDUCESCATTER || t->kind == K_ALLTOALL || t->kind == K_SCATTER;
    int recv_all = t->kind == K_ALLGATHER || t->kind == K_GATHER || t->kind == K_ALLTOALL;
    if (t->send) charge(t->send, send_all ? n * bytes : bytes);
    if (t->recv && t->recv != t->send) charge(t->recv, recv_all ? n * bytes : bytes);
}

static void free_task(struct task *t)
{
    free(t->ops);
    free(t);
}

static void CUDA_CB run_task(void *arg)
{
    struct task *t = arg;
    struct ncclComm *c = t->comm;
    size_t moved = 0;
    ncclResult_t rc = ncclRemoteError;
    pthread_mutex_lock(&c->exec_lock);
    if (t->kind == K_P2P)
        for (int i = 0; i < t->nops; i++) t->ops[i].done = 0;   /* graph replays start over */
    if (!nccl_shm_aborted(c->shm))
        rc = t->kind == K_P2P ? run_p2p(t, &moved) : run_collective(t, &moved);
    if (rc != ncclSuccess) {
        int expect = ncclSuccess;
        __atomic_compare_exchange_n(&c->async_error, &expect, (int)rc, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    pthread_mutex_unlock(&c->exec_lock);
    simulate_link(moved);
    charge_host_link(t);
    if (!t->persistent) {
        __atomic_sub_fetch(&c->pending, 1, __ATOMIC_ACQ_REL);
        free_task(t);
    }
}

static ncclResult_t enqueue_current(struct task *t)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (EMU_DRV(cuStreamIsCapturing)(t->stream, &cs) != CUDA_SUCCESS) cs = CU_STREAM_CAPTURE_STATUS_NONE;
    t->persistent = cs != CU_STREAM_CAPTURE_STATUS_NONE;
    if (!t->persistent) __atomic_add_fetch(&t->comm->pending, 1, __ATOMIC_ACQ_REL);
    CUresult cr = EMU_DRV(cuLaunchHostFunc)(t->stream, run_task, t);
    if (cr != CUDA_SUCCESS) {
        if (!t->persistent) __atomic_sub_fetch(&t->comm->pending, 1, __ATOMIC_ACQ_REL);
        free_task(t);
        return nccl_fail(ncclUnhandledCudaError, "cuLaunchHostFunc on the stream failed: %d", (int)cr);
    }
    return ncclSuccess;
}

/* Like NCCL, which makes the communicator's device current before launching:
 * the default-stream handles then mean that device's stream even when one
 * thread drives several devices (ncclGroupEnd after a loop over devices). */
static int enter_comm_device(const struct ncclComm *c, CUcontext *ctx)
{
    CUdevice cur;
    if (EMU_DRV(cuCtxGetDevice)(&cur) == CUDA_SUCCESS && (int)cur == c->cudev) return 0;
    if (EMU_DRV(cuDevicePrimaryCtxRetain)(ctx, c->cudev) != CUDA_SUCCESS) return 0;
    if (EMU_DRV(cuCtxPushCurrent_v2)(*ctx) != CUDA_SUCCESS) {
        EMU_DRV(cuDevicePrimaryCtxRelease_v2)(c->cudev);
        return 0;
    }
    return 1;
}

static void leave_comm_device(const struct ncclComm *c)
{
    CUcontext popped;
    EMU_DRV(cuCtxPopCurrent_v2)(&popped);
    EMU_DRV(cuDevicePrimaryCtxRelease_v2)(c->cudev);
}

static ncclResult_t enqueue(struct task *t)
{
    CUcontext ctx;
    struct ncclComm *c = t->comm;
    int switched = enter_comm_device(c, &ctx);
    ncclResult_t rc = enqueue_current(t);
    if (switched) leave_comm_device(c);
    return rc;
}

/* ------------------------------------------------------------ groups */
static __thread int group_depth;
static __thread struct task *group_head, *group_tail;   /* collectives, in call order */
static __thread struct task *group_p2p;                 /* one p2p task per communicator */
static __thread struct ncclComm *deferred_init[NCCL_EMU_MAX_RANKS];
static __thread int ndeferred_init;
static __thread ncclResult_t group_error;

int nccl_group_depth(void) { return group_depth; }

void nccl_group_defer_init(struct ncclComm *comm)
{
    if (ndeferred_init < NCCL_EMU_MAX_RANKS) deferred_init[ndeferred_init++] = comm;
}

ncclResult_t pncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}
NCCL_ALIAS(ncclGroupStart);

ncclResult_t pncclGroupEnd(void)
{
    if (group_depth <= 0) return nccl_fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--group_depth > 0) return ncclSuccess;
    ncclResult_t rc = group_error;
    group_error = ncclSuccess;
    for (int i = 0; i < ndeferred_init; i++) {
        ncclResult_t r = nccl_shm_wait_all_attached(deferred_init[i]->shm);
        if (r != ncclSuccess && rc == ncclSuccess) rc = r;
    }
    ndeferred_init = 0;
    /* Collectives first (call order), then each communicator's p2p batch: the
     * same order on every rank whatever the order of calls inside the group. */
    struct task *lists[2] = {group_head, group_p2p};
    group_head = group_tail = group_p2p = NULL;
    for (int l = 0; l < 2; l++) {
        for (struct task *t = lists[l], *next; t; t = next) {
            next = t->next;
            if (rc != ncclSuccess) { free_task(t); continue; }
            ncclResult_t r = enqueue(t);
            if (r != ncclSuccess) rc = r;
        }
    }
    return rc;
}
NCCL_ALIAS(ncclGroupEnd);

/* An invalid call inside a group also fails the group: ncclGroupEnd returns
 * the first such error and enqueues nothing (as NCCL aborts the group). */
static ncclResult_t note_group_error(ncclResult_t rc)
{
    if (rc != ncclSuccess && group_depth > 0 && group_error == ncclSuccess) group_error = rc;
    return rc;
}

/* Outside a group the task is enqueued now; inside, at the outermost GroupEnd. */
static ncclResult_t submit(struct task *t)
{
    if (group_depth == 0) return enqueue(t);
    if (group_tail) group_tail->next = t; else group_head = t;
    group_tail = t;
    return ncclSuccess;
}

/* ------------------------------------------------------------ entry points */
static ncclResult_t check_common(struct ncclComm *comm, ncclDataType_t type)
{
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    if (comm->finalized) return nccl_fail(ncclInvalidUsage, "communicator was finalized");
    if (nccl_type_size(type) == 0) return nccl_fail(ncclInvalidArgument, "invalid datatype %d", (int)type);
    return ncclSuccess;
}

static ncclResult_t make_task(struct task **out, enum task_kind kind, const void *send, void *recv, size_t count,
                              ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                              int reduces, int send_needed, int recv_needed)
{
    *out = NULL;
    ncclResult_t rc = check_common(comm, type);
    if (rc != ncclSuccess) return rc;
    if (root < 0 || root >= comm->nranks) return nccl_fail(ncclInvalidArgument, "root %d not in [0, %d)", root, comm->nranks);
    if (count > 0 && ((send_needed && !send) || (recv_needed && !recv)))
        return nccl_fail(ncclInvalidArgument, "NULL buffer with count %zu", count);
    struct task *t = calloc(1, sizeof *t);
    if (!t) return nccl_fail(ncclSystemError, "out of host memory");
    t->comm = comm;
    t->stream = (CUstream)stream;
    t->kind = kind;
    t->send = send;
    t->recv = recv;
    t->count = count;
    t->type = type;
    t->op = ncclSum;
    t->root = root;
    if (reduces) {
        if ((int)op >= 0 && (int)op < ncclNumOps) {
            t->op = op;
        } else {
            int i = (int)op - ncclNumOps;
            if ((int)op < 0 || i >= NCCL_EMU_MAX_OPS || !comm->ops[i].in_use) {
                free(t);
                return nccl_fail(ncclInvalidArgument, "invalid reduction op %d", (int)op);
            }
            const struct nccl_emu_redop *o = &comm->ops[i];
            if (o->type != type) {
                free(t);
                return nccl_fail(ncclInvalidArgument, "PreMulSum op created for datatype %d used with %d", (int)o->type, (int)type);
            }
            t->premul = o->residence == ncclScalarHostImmediate ? 1 : 2;
            t->premul_scalar = o->host_scalar;
            t->premul_ptr = o->device_scalar;
            t->premul_type = o->type;
        }
    }
    *out = t;
    return ncclSuccess;
}

#define COLL(kind, counter, send, recv, count, type, op, root, comm, stream, reduces, sn, rn) do { \
        struct task *t_; \
        ncclResult_t rc_ = make_task(&t_, kind, send, recv, count, type, op, root, comm, stream, reduces, sn, rn); \
        if (rc_ != ncclSuccess) return note_group_error(rc_); \
        nccl_count(counter, 1); \
        return submit(t_); } while (0)

ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    COLL(K_ALLREDUCE, "nccl.allreduce", sendbuff, recvbuff, count, datatype, op, 0, comm, stream, 1, 1, 1);
}
NCCL_ALIAS(ncclAllReduce);

ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream)
{
    int is_root = comm && comm->magic == NCCL_EMU_COMM_MAGIC && comm->rank == root;
    COLL(K_BROADCAST, "nccl.broadcast", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream, 0, is_root, 1);
}
NCCL_ALIAS(ncclBroadcast);

/* Like the real library, the legacy in-place broadcast calls the public
 * ncclBroadcast: looked up dynamically so that a preloaded ncclBroadcast sees
 * this nested call (the library itself is linked -Bsymbolic). */
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream)
{
    static __typeof__(&pncclBroadcast) bcast;
    __typeof__(&pncclBroadcast) f = __atomic_load_n(&bcast, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (__typeof__(&pncclBroadcast))dlsym(RTLD_DEFAULT, "ncclBroadcast");
        if (!f) f = pncclBroadcast;
        __atomic_store_n(&bcast, f, __ATOMIC_RELEASE);
    }
    return f(buff, buff, count, datatype, root, comm, stream);
}
NCCL_ALIAS(ncclBcast);

ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream)
{
    int is_root = comm && comm->magic == NCCL_EMU_COMM_MAGIC && comm->rank == root;
    COLL(K_REDUCE, "nccl.reduce", sendbuff, recvbuff, count, datatype, op, root, comm, stream, 1, 1, is_root);
}
NCCL_ALIAS(ncclReduce);

ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream)
{
    COLL(K_ALLGATHER, "nccl.allgather", sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream, 0, 1, 1);
}
NCCL_ALIAS(ncclAllGather);

ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    COLL(K_REDUCESCATTER, "nccl.reducescatter", sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream, 1, 1, 1);
}
NCCL_ALIAS(ncclReduceScatter);

ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream)
{
    COLL(K_ALLTOALL, "nccl.alltoall", sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream, 0, 1, 1);
}
NCCL_ALIAS(ncclAlltoAll);

ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream)
{
    int is_root = comm && comm->magic == NCCL_EMU_COMM_MAGIC && comm->rank == root;
    COLL(K_GATHER, "nccl.gather", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream, 0, 1, is_root);
}
NCCL_ALIAS(ncclGather);

ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream)
{
    int is_root = comm && comm->magic == NCCL_EMU_COMM_MAGIC && comm->rank == root;
    COLL(K_SCATTER, "nccl.scatter", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream, 0, is_root, 1);
}
NCCL_ALIAS(ncclScatter);

static ncclResult_t p2p(int is_send, void *buf, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                        cudaStream_t stream)
{
    ncclResult_t rc = check_common(comm, datatype);
    if (rc != ncclSuccess) return note_group_error(rc);
    if (peer < 0 || peer >= comm->nranks)
        return note_group_error(nccl_fail(ncclInvalidArgument, "peer %d not in [0, %d)", peer, comm->nranks));
    if (count > 0 && !buf) return note_group_error(nccl_fail(ncclInvalidArgument, "NULL buffer with count %zu", count));
    nccl_count(is_send ? "nccl.send" : "nccl.recv", 1);
    struct task *t = NULL;
    if (group_depth > 0)
        for (struct task *g = group_p2p; g; g = g->next)
            if (g->comm == comm) { t = g; break; }
    if (!t) {
        if (!(t = calloc(1, sizeof *t))) return nccl_fail(ncclSystemError, "out of host memory");
        t->comm = comm;
        t->stream = (CUstream)stream;
        t->kind = K_P2P;
        t->type = datatype;
        if (group_depth > 0) { t->next = group_p2p; group_p2p = t; }
    }
    if (t->nops == t->capacity) {
        int cap = t->capacity ? 2 * t->capacity : 4;
        struct p2p_op *ops = realloc(t->ops, (size_t)cap * sizeof *ops);
        if (!ops) {
            if (group_depth > 0) group_error = ncclSystemError; else free_task(t);
            return nccl_fail(ncclSystemError, "out of host memory");
        }
        t->ops = ops;
        t->capacity = cap;
    }
    t->ops[t->nops++] = (struct p2p_op){is_send, peer, buf, count * nccl_type_size(datatype), 0};
    return group_depth > 0 ? ncclSuccess : enqueue(t);
}

ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream)
{
    return p2p(1, (void *)sendbuff, count, datatype, peer, comm, stream);
}
NCCL_ALIAS(ncclSend);

ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream)
{
    return p2p(0, recvbuff, count, datatype, peer, comm, stream);
}
NCCL_ALIAS(ncclRecv);
