/* NCCL hooks (libnccl.so.2): every collective, send/recv and group bracket
 * logs one TS_REC_NCCL per outermost call (ncclBcast, which NCCL implements
 * by calling ncclBroadcast, counts once) with op, count, type, bytes, the
 * communicator's run-wide id, size and this rank, and the stream; one call in
 * TRAINSHIM_FLOP_SAMPLE outside a group is timed on its stream, and a group
 * is timed as a unit on each stream it uses.  Creation,
 * split, finalize, destroy and abort log TS_REC_COMM.  The program's
 * arguments and the real result pass through unchanged. */
#include "observe/comm.h"
#include "observe/compute.h"
#include "hooks.h"
#include "log/log.h"
#include "offload/offload.h"

/* ncclGroupStart levels open on this thread: inside a group NCCL only
 * enqueues at the matching ncclGroupEnd, so events around one call would
 * time nothing.  A group is timed as a unit instead: a start event on each
 * of its streams when the first call names it (before anything of the group
 * is enqueued), an end event after the outermost ncclGroupEnd; the calls on
 * one stream share its sample id. */
static __thread int tls_group_depth __attribute__((tls_model("initial-exec")));

#define GROUP_STREAMS 16
struct group_sample {
    uint64_t stream;
    struct ts_gpu_sample smp;
};
static __thread struct group_sample tls_group_samples[GROUP_STREAMS];
static __thread int tls_group_streams;

/* The sample id the group's calls on stream share (0: not timed). */
static uint64_t group_sample_id(uint64_t stream)
{
    for (int i = 0; i < tls_group_streams; i++)
        if (tls_group_samples[i].stream == stream)
            return tls_group_samples[i].smp.id;
    if (tls_group_streams == GROUP_STREAMS)
        return 0;
    struct group_sample *g = &tls_group_samples[tls_group_streams++];
    g->stream = stream;
    ts_sample_begin(&g->smp, stream);
    return g->smp.id;
}

/* After the outermost ncclGroupEnd: the group's work is enqueued. */
static void group_samples_end(bool ok)
{
    for (int i = 0; i < tls_group_streams; i++)
        ts_sample_end(&tls_group_samples[i].smp, tls_group_samples[i].stream, TS_REC_NCCL, ok);
    tls_group_streams = 0;
}

static void comm_query(ncclComm_t comm, int *size, int *rank)
{
    ts_fn_ncclCommCount count = TS_REAL(ncclCommCount);
    ts_fn_ncclCommUserRank user_rank = TS_REAL(ncclCommUserRank);
    *size = *rank = -1;
    if (!comm)
        return;
    if (!count || count(comm, size) != ncclSuccess)
        *size = -1;
    if (!user_rank || user_rank(comm, rank) != ncclSuccess)
        *rank = -1;
}

/* What we know of comm; a communicator made before the shim saw it gets
 * a process-local id (its address) and is remembered from then on. */
static struct ts_comm_info comm_info(ncclComm_t comm)
{
    struct ts_comm_info ci;
    if (ts_comm_lookup(comm, &ci))
        return ci;
    ci.id = (uint64_t)(uintptr_t)comm;
    comm_query(comm, &ci.size, &ci.rank);
    if (comm)
        ts_comm_remember(comm, &ci);
    return ci;
}

struct nccl_acct {
    struct ts_rec_nccl r;
    struct ts_gpu_sample smp;
    uint64_t group_sample_id;
};

static void nccl_prepare(struct nccl_acct *a, int api, int op, size_t count, ncclDataType_t dt, int peer,
                         ncclComm_t comm, cudaStream_t stream)
{
    struct ts_rec_nccl *r = &a->r;
    struct ts_comm_info ci = comm_info(comm);
    r->api = api;
    r->op = op;
    r->count = count;
    r->bytes = (uint64_t)count * ts_nccl_type_size((int)dt);
    r->comm_id = ci.id;
    r->stream = (uint64_t)(uintptr_t)stream;
    r->datatype = (int)dt;
    r->comm_size = ci.size;
    r->rank = ci.rank;
    r->peer = peer;
    r->group_depth = (uint32_t)tls_group_depth;
    a->smp.id = 0;
    a->smp.slot = -1;
    a->group_sample_id = 0;
    if (!tls_group_depth)
        ts_sample_begin(&a->smp, r->stream);
    else
        a->group_sample_id = group_sample_id(r->stream);
}

static void nccl_finish(struct nccl_acct *a, int result)
{
    ts_sample_end(&a->smp, a->r.stream, TS_REC_NCCL, result == ncclSuccess);
    a->r.sample_id = a->smp.id ? a->smp.id : a->group_sample_id;
    a->r.result = result;
    ts_ev_nccl(&a->r);
}

/* sbuf, rbuf: the device buffers the collective reads and writes (NULL: none),
 * in the order offload's step order learns which pages a step uses. */
#define NCCL_BODY(base, api, args, op, count, dt, peer, comm, stream, sbuf, rbuf)                            \
    TS_HOOK_PROLOGUE(ncclResult_t, base, api, args);                                                         \
    TS_OUTER_BEGIN(api);                                                                                     \
    struct nccl_acct acct_;                                                                                  \
    if (outer_) {                                                                                            \
        nccl_prepare(&acct_, api, op, count, dt, peer, comm, stream);                                        \
        ts_offload_touch((sbuf), 0, TS_TOUCH_COLL);                                                          \
        ts_offload_touch((rbuf), 0, TS_TOUCH_COLL);                                                          \
    }                                                                                                        \
    ncclResult_t r_ = real_ args;                                                                            \
    if (outer_)                                                                                              \
        nccl_finish(&acct_, (int)r_);                                                                        \
    TS_OUTER_END(api, r_);                                                                                   \
    return r_

static inline ncclResult_t ts_body_ncclAllReduce(int api, const void *sendbuff, void *recvbuff, size_t count,
                                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                                 cudaStream_t stream)
{
    NCCL_BODY(ncclAllReduce, api, (sendbuff, recvbuff, count, datatype, op, comm, stream), TS_NCCL_ALLREDUCE,
              count, datatype, -1, comm, stream, sendbuff, recvbuff);
}

static inline ncclResult_t ts_body_ncclBroadcast(int api, const void *sendbuff, void *recvbuff, size_t count,
                                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                                 cudaStream_t stream)
{
    NCCL_BODY(ncclBroadcast, api, (sendbuff, recvbuff, count, datatype, root, comm, stream),
              TS_NCCL_BROADCAST, count, datatype, root, comm, stream, sendbuff, recvbuff);
}

static inline ncclResult_t ts_body_ncclBcast(int api, void *buff, size_t count, ncclDataType_t datatype,
                                             int root, ncclComm_t comm, cudaStream_t stream)
{
    NCCL_BODY(ncclBcast, api, (buff, count, datatype, root, comm, stream), TS_NCCL_BROADCAST, count, datatype,
              root, comm, stream, buff, NULL);
}

static inline ncclResult_t ts_body_ncclReduce(int api, const void *sendbuff, void *recvbuff, size_t count,
                                              ncclDataType_t datatype, ncclRedOp_t op, int root,
                                              ncclComm_t comm, cudaStream_t stream)
{
    NCCL_BODY(ncclReduce, api, (sendbuff, recvbuff, count, datatype, op, root, comm, stream), TS_NCCL_REDUCE,
              count, datatype, root, comm, stream, sendbuff, recvbuff);
}

static inline ncclResult_t ts_body_ncclAllGather(int api, const void *sendbuff, void *recvbuff,
                                                 size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                                                 cudaStream_t stream)
{
    NCCL_BODY(ncclAllGather, api, (sendbuff, recvbuff, sendcount, datatype, comm, stream), TS_NCCL_ALLGATHER,
              sendcount, datatype, -1, comm, stream, sendbuff, recvbuff);
}

static inline ncclResult_t ts_body_ncclReduceScatter(int api, const void *sendbuff, void *recvbuff,
                                                     size_t recvcount, ncclDataType_t datatype,
                                                     ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    NCCL_BODY(ncclReduceScatter, api, (sendbuff, recvbuff, recvcount, datatype, op, comm, stream),
              TS_NCCL_REDUCESCATTER, recvcount, datatype, -1, comm, stream, sendbuff, recvbuff);
}

static inline ncclResult_t ts_body_ncclAlltoAll(int api, const void *sendbuff, void *recvbuff, size_t count,
                                                ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    NCCL_BODY(ncclAlltoAll, api, (sendbuff, recvbuff, count, datatype, comm, stream), TS_NCCL_ALLTOALL, count,
              datatype, -1, comm, stream, sendbuff, recvbuff);
}

static inline ncclResult_t ts_body_ncclGather(int api, const void *sendbuff, void *recvbuff, size_t count,
                                              ncclDataType_t datatype, int root, ncclComm_t comm,
                                              cudaStream_t stream)
{
    NCCL_BODY(ncclGather, api, (sendbuff, recvbuff, count, datatype, root, comm, stream), TS_NCCL_GATHER,
              count, datatype, root, comm, stream, sendbuff, recvbuff);
}

static inline ncclResult_t ts_body_ncclScatter(int api, const void *sendbuff, void *recvbuff, size_t count,
                                               ncclDataType_t datatype, int root, ncclComm_t comm,
                                               cudaStream_t stream)
{
    NCCL_BODY(ncclScatter, api, (sendbuff, recvbuff, count, datatype, root, comm, stream), TS_NCCL_SCATTER,
              count, datatype, root, comm, stream, sendbuff, recvbuff);
}

static inline ncclResult_t ts_body_ncclSend(int api, const void *sendbuff, size_t count,
                                            ncclDataType_t datatype, int peer, ncclComm_t comm,
                                            cudaStream_t stream)
{
    NCCL_BODY(ncclSend, api, (sendbuff, count, datatype, peer, comm, stream), TS_NCCL_SEND, count, datatype,
              peer, comm, stream, sendbuff, NULL);
}

static inline ncclResult_t ts_body_ncclRecv(int api, void *recvbuff, size_t count, ncclDataType_t datatype,
                                            int peer, ncclComm_t comm, cudaStream_t stream)
{
    NCCL_BODY(ncclRecv, api, (recvbuff, count, datatype, peer, comm, stream), TS_NCCL_RECV, count, datatype,
              peer, comm, stream, recvbuff, NULL);
}

/* ---- groups --------------------------------------------------------------- */
static void group_record(int api, int op, int result)
{
    struct ts_rec_nccl r;
    memset(&r, 0, sizeof r);
    r.api = api;
    r.op = op;
    r.datatype = -1;
    r.comm_size = r.rank = r.peer = -1;
    r.group_depth = (uint32_t)tls_group_depth;
    r.result = result;
    ts_ev_nccl(&r);
}

static inline ncclResult_t group_start_body(int api)
{
    TS_HOOK_PROLOGUE(ncclResult_t, ncclGroupStart, api, ());
    TS_OUTER_BEGIN(api);
    ncclResult_t r = real_();
    if (outer_ && r == ncclSuccess) {
        group_record(api, TS_NCCL_GROUP_START, r);
        tls_group_depth++;
    }
    TS_OUTER_END(api, r);
    return r;
}

static inline ncclResult_t group_end_body(int api)
{
    TS_HOOK_PROLOGUE(ncclResult_t, ncclGroupEnd, api, ());
    TS_OUTER_BEGIN(api);
    ncclResult_t r = real_();
    if (outer_) {
        /* NCCL closes the group level even when the grouped operations fail */
        if (tls_group_depth > 0)
            tls_group_depth--;
        if (!tls_group_depth)
            group_samples_end(r == ncclSuccess || r == ncclInProgress);
        group_record(api, TS_NCCL_GROUP_END, r);
    }
    TS_OUTER_END(api, r);
    return r;
}

/* The generated OWN hook passes its (empty) argument list after the id,
 * "ts_body_x(api, )": a variadic macro takes it. */
#define ts_body_ncclGroupStart(api, ...) group_start_body(api)
#define ts_body_ncclGroupEnd(api, ...) group_end_body(api)

/* ---- communicators -------------------------------------------------------- */
static void comm_created(int api, ncclComm_t comm, uint64_t id, int nranks, int rank, int result)
{
    struct ts_comm_info ci = { .id = id, .size = nranks, .rank = rank };
    if (result == ncclSuccess || result == ncclInProgress) {
        if (comm)
            ts_comm_remember(comm, &ci);
    }
    ts_ev_comm(api, TS_COMM_CREATED, id, 0, nranks, rank, -1, result);
}

static inline ncclResult_t ts_body_ncclCommInitRank(int api, ncclComm_t *comm, int nranks,
                                                    ncclUniqueId commId, int rank)
{
    TS_HOOK_PROLOGUE(ncclResult_t, ncclCommInitRank, api, (comm, nranks, commId, rank));
    TS_OUTER_BEGIN(api);
    ncclResult_t r = real_(comm, nranks, commId, rank);
    if (outer_)
        comm_created(api, r == ncclSuccess ? *comm : NULL, ts_comm_id_from_unique(&commId, sizeof commId),
                     nranks, rank, r);
    TS_OUTER_END(api, r);
    return r;
}

static inline ncclResult_t ts_body_ncclCommInitRankConfig(int api, ncclComm_t *comm, int nranks,
                                                          ncclUniqueId commId, int rank, ncclConfig_t *config)
{
    TS_HOOK_PROLOGUE(ncclResult_t, ncclCommInitRankConfig, api, (comm, nranks, commId, rank, config));
    TS_OUTER_BEGIN(api);
    ncclResult_t r = real_(comm, nranks, commId, rank, config);
    if (outer_)
        comm_created(api, (r == ncclSuccess || r == ncclInProgress) ? *comm : NULL,
                     ts_comm_id_from_unique(&commId, sizeof commId), nranks, rank, r);
    TS_OUTER_END(api, r);
    return r;
}

static inline ncclResult_t ts_body_ncclCommInitRankScalable(int api, ncclComm_t *newcomm, int nranks,
                                                            int myrank, int nId, ncclUniqueId *commIds,
                                                            ncclConfig_t *config)
{
    TS_HOOK_PROLOGUE(ncclResult_t, ncclCommInitRankScalable, api,
                     (newcomm, nranks, myrank, nId, commIds, config));
    TS_OUTER_BEGIN(api);
    ncclResult_t r = real_(newcomm, nranks, myrank, nId, commIds, config);
    if (outer_)
        comm_created(api, (r == ncclSuccess || r == ncclInProgress) ? *newcomm : NULL,
                     nId > 0 && commIds ? ts_comm_id_from_unique(&commIds[0], sizeof commIds[0]) : 0, nranks,
                     myrank, r);
    TS_OUTER_END(api, r);
    return r;
}

/* One process owning every rank: one communicator, named by its first
 * handle (no other process shares it). */
static inline ncclResult_t ts_body_ncclCommInitAll(int api, ncclComm_t *comm, int ndev, const int *devlist)
{
    TS_HOOK_PROLOGUE(ncclResult_t, ncclCommInitAll, api, (comm, ndev, devlist));
    TS_OUTER_BEGIN(api);
    ncclResult_t r = real_(comm, ndev, devlist);
    if (outer_) {
        if (r == ncclSuccess && comm && ndev > 0) {
            uint64_t id = ts_comm_id_from_unique(&comm[0], sizeof comm[0]);
            for (int i = 0; i < ndev; i++)
                comm_created(api, comm[i], id, ndev, i, r);
        } else {
            comm_created(api, NULL, 0, ndev, -1, r);
        }
    }
    TS_OUTER_END(api, r);
    return r;
}

static void comm_split(int api, ncclComm_t parent, ncclComm_t child, uint64_t seq, int color, int result)
{
    struct ts_comm_info pi = comm_info(parent), ci = { .id = 0, .size = -1, .rank = -1 };
    if (child && (result == ncclSuccess || result == ncclInProgress)) {
        ci.id = ts_comm_id_from_split(pi.id, color, seq);
        comm_query(child, &ci.size, &ci.rank);
        ts_comm_remember(child, &ci);
    }
    ts_ev_comm(api, TS_COMM_SPLIT, ci.id, pi.id, ci.size, ci.rank, color, result);
}

static inline ncclResult_t ts_body_ncclCommSplit(int api, ncclComm_t comm, int color, int key,
                                                 ncclComm_t *newcomm, ncclConfig_t *config)
{
    TS_HOOK_PROLOGUE(ncclResult_t, ncclCommSplit, api, (comm, color, key, newcomm, config));
    TS_OUTER_BEGIN(api);
    uint64_t seq = outer_ ? ts_comm_next_split(comm) : 0;
    ncclResult_t r = real_(comm, color, key, newcomm, config);
    if (outer_)
        comm_split(api, comm, newcomm ? *newcomm : NULL, seq, color, r);
    TS_OUTER_END(api, r);
    return r;
}

static inline ncclResult_t ts_body_ncclCommShrink(int api, ncclComm_t comm, int *excludeRanksList,
                                                  int excludeRanksCount, ncclComm_t *newcomm,
                                                  ncclConfig_t *config, int shrinkFlags)
{
    TS_HOOK_PROLOGUE(ncclResult_t, ncclCommShrink, api,
                     (comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags));
    TS_OUTER_BEGIN(api);
    uint64_t seq = outer_ ? ts_comm_next_split(comm) : 0;
    ncclResult_t r = real_(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
    if (outer_) /* a shrink is a split every surviving rank makes with one color */
        comm_split(api, comm, newcomm ? *newcomm : NULL, seq, -2, r);
    TS_OUTER_END(api, r);
    return r;
}

static void comm_ended(int api, ncclComm_t comm, int kind, int result)
{
    struct ts_comm_info ci;
    bool known = kind == TS_COMM_FINALIZED ? ts_comm_lookup(comm, &ci) : ts_comm_forget(comm, &ci);
    if (!known)
        ci.id = (uint64_t)(uintptr_t)comm, ci.size = ci.rank = -1;
    ts_ev_comm(api, kind, ci.id, 0, ci.size, ci.rank, -1, result);
}

/* The communicator's facts are taken before the real call frees it. */
#define COMM_END_BODY(base, api, comm, kind)                                                                 \
    TS_HOOK_PROLOGUE(ncclResult_t, base, api, (comm));                                                       \
    TS_OUTER_BEGIN(api);                                                                                     \
    if (outer_)                                                                                              \
        (void)comm_info(comm);                                                                               \
    ncclResult_t r_ = real_(comm);                                                                           \
    if (outer_)                                                                                              \
        comm_ended(api, comm, kind, (int)r_);                                                                \
    TS_OUTER_END(api, r_);                                                                                   \
    return r_

static inline ncclResult_t ts_body_ncclCommFinalize(int api, ncclComm_t comm)
{
    COMM_END_BODY(ncclCommFinalize, api, comm, TS_COMM_FINALIZED);
}
static inline ncclResult_t ts_body_ncclCommDestroy(int api, ncclComm_t comm)
{
    COMM_END_BODY(ncclCommDestroy, api, comm, TS_COMM_DESTROYED);
}
static inline ncclResult_t ts_body_ncclCommAbort(int api, ncclComm_t comm)
{
    COMM_END_BODY(ncclCommAbort, api, comm, TS_COMM_ABORTED);
}

/* ---- library-owned memory --------------------------------------------------- */
/* ncclMemAlloc hands out device memory NCCL allocates itself (its own driver
 * calls run nested and are not logged): logged as allocations under its own
 * API name, so the report counts them and can tell them apart. */
static inline ncclResult_t ts_body_ncclMemAlloc(int api, void **ptr, size_t size)
{
    TS_HOOK_PROLOGUE(ncclResult_t, ncclMemAlloc, api, (ptr, size));
    TS_OUTER_BEGIN(api);
    ncclResult_t r = real_(ptr, size);
    if (outer_) {
        int dev = ts_current_device();
        ts_note_device(dev);
        ts_ev_alloc(api, dev, r == ncclSuccess && ptr ? (uint64_t)(uintptr_t)*ptr : 0, size, 0, (int)r);
    }
    TS_OUTER_END(api, r);
    return r;
}

static inline ncclResult_t ts_body_ncclMemFree(int api, void *ptr)
{
    TS_HOOK_PROLOGUE(ncclResult_t, ncclMemFree, api, (ptr));
    TS_OUTER_BEGIN(api);
    ncclResult_t r = real_(ptr);
    if (outer_ && ptr)
        ts_ev_free(api, ts_current_device(), (uint64_t)(uintptr_t)ptr, 0, (int)r);
    TS_OUTER_END(api, r);
    return r;
}

/* A registered buffer's pages must stay where NCCL registered them: memory
 * offload never moves them (pinned before the registration, so no move can
 * slip in between; unpinned when it is undone). */
static inline ncclResult_t ts_body_ncclCommRegister(int api, const ncclComm_t comm, void *buff, size_t size,
                                                    void **handle)
{
    TS_HOOK_PROLOGUE(ncclResult_t, ncclCommRegister, api, (comm, buff, size, handle));
    bool outer = ts_enter();
    ts_count_call(api, outer);
    ts_offload_pin((uint64_t)(uintptr_t)buff, size);
    ncclResult_t r = real_(comm, buff, size, handle);
    if (r == ncclSuccess && handle)
        ts_offload_pin_key((uint64_t)(uintptr_t)buff, (uint64_t)(uintptr_t)*handle);
    else
        ts_offload_unpin((uint64_t)(uintptr_t)buff);
    ts_leave();
    if (outer && r != ncclSuccess)
        ts_ev_error(api, (int)r);
    return r;
}

static inline ncclResult_t ts_body_ncclCommDeregister(int api, const ncclComm_t comm, void *handle)
{
    TS_HOOK_PROLOGUE(ncclResult_t, ncclCommDeregister, api, (comm, handle));
    bool outer = ts_enter();
    ts_count_call(api, outer);
    ncclResult_t r = real_(comm, handle);
    if (r == ncclSuccess)
        ts_offload_unpin_key((uint64_t)(uintptr_t)handle);
    ts_leave();
    if (outer && r != ncclSuccess)
        ts_ev_error(api, (int)r);
    return r;
}

#define TS_GEN_LIB_nccl(...) TS_GEN_HOOK(__VA_ARGS__)
#include "hooks_gen.h"
