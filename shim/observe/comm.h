/* comm.h: NCCL accounting shared by the shim (shim/observe/comm.c, hooks/nccl.c) and
 * the report (tools/report/report_comm.c): the operation codes of TS_REC_NCCL, the
 * element sizes of ncclDataType_t, and the nccl-tests bandwidth formulas
 * (nccl-tests doc/PERFORMANCE.md):
 *     algbw = S / t,   busbw = algbw * factor
 *   op                         factor      S
 *   AllReduce                  2(n-1)/n    count * typesize
 *   ReduceScatter              (n-1)/n     recvcount * typesize * n
 *   AllGather                  (n-1)/n     sendcount * typesize * n
 *   Broadcast, Reduce          1           count * typesize
 *   AlltoAll, Gather, Scatter  (n-1)/n     count * typesize * n
 *   Send, Recv                 1           count * typesize
 * Pure functions: header-only so the unit test checks the very code the
 * report runs. */
#ifndef TRAINSHIM_COMM_H
#define TRAINSHIM_COMM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ts_nccl_op {
    TS_NCCL_NONE = 0,
    TS_NCCL_ALLREDUCE,
    TS_NCCL_BROADCAST,
    TS_NCCL_REDUCE,
    TS_NCCL_ALLGATHER,
    TS_NCCL_REDUCESCATTER,
    TS_NCCL_ALLTOALL,
    TS_NCCL_GATHER,
    TS_NCCL_SCATTER,
    TS_NCCL_SEND,
    TS_NCCL_RECV,
    TS_NCCL_GROUP_START,
    TS_NCCL_GROUP_END,
    TS_NCCL_OP_COUNT
};

/* TS_REC_COMM kinds */
enum ts_comm_kind {
    TS_COMM_CREATED = 1,
    TS_COMM_SPLIT = 2,
    TS_COMM_DESTROYED = 3,
    TS_COMM_ABORTED = 4,
    TS_COMM_FINALIZED = 5
};

static inline const char *ts_nccl_op_name(int op)
{
    static const char *const names[TS_NCCL_OP_COUNT] = {
        "none",   "AllReduce", "Broadcast", "Reduce", "AllGather",  "ReduceScatter", "AlltoAll",
        "Gather", "Scatter",   "Send",      "Recv",   "GroupStart", "GroupEnd"
    };
    return op >= 0 && op < TS_NCCL_OP_COUNT ? names[op] : "unknown";
}

/* True for the operations that move data (not group brackets). */
static inline bool ts_nccl_op_moves_data(int op) { return op >= TS_NCCL_ALLREDUCE && op <= TS_NCCL_RECV; }

/* Bytes of one element of ncclDataType_t dt; 0 unknown. */
static inline unsigned ts_nccl_type_size(int dt)
{
    /* ncclInt8 ncclUint8 ncclInt32 ncclUint32 ncclInt64 ncclUint64 ncclFloat16
     * ncclFloat32 ncclFloat64 ncclBfloat16 ncclFloat8e4m3 ncclFloat8e5m2 */
    static const unsigned char size[12] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };
    return dt >= 0 && dt < 12 ? size[dt] : 0;
}

/* nccl-tests "S": the bytes the algorithm bandwidth is measured on, from the
 * buffer bytes the call names (count * typesize) and the communicator size. */
static inline uint64_t ts_nccl_algo_bytes(int op, uint64_t bytes, int nranks)
{
    uint64_t n = nranks > 0 ? (uint64_t)nranks : 1;
    switch (op) {
    case TS_NCCL_REDUCESCATTER:
    case TS_NCCL_ALLGATHER:
    case TS_NCCL_ALLTOALL:
    case TS_NCCL_GATHER:
    case TS_NCCL_SCATTER: return bytes * n;
    default: return bytes;
    }
}

/* busbw / algbw. */
static inline double ts_nccl_bus_factor(int op, int nranks)
{
    double n = nranks > 0 ? (double)nranks : 1.0;
    switch (op) {
    case TS_NCCL_ALLREDUCE: return 2.0 * (n - 1.0) / n;
    case TS_NCCL_REDUCESCATTER:
    case TS_NCCL_ALLGATHER:
    case TS_NCCL_ALLTOALL:
    case TS_NCCL_GATHER:
    case TS_NCCL_SCATTER: return (n - 1.0) / n;
    default: return 1.0;
    }
}

/* GB/s (1e9 bytes per second) of S bytes in ns nanoseconds; 0 if no time. */
static inline double ts_nccl_algbw_gbps(uint64_t algo_bytes, uint64_t ns)
{
    return ns ? (double)algo_bytes / (double)ns : 0.0;
}

static inline double ts_nccl_busbw_gbps(int op, uint64_t algo_bytes, uint64_t ns, int nranks)
{
    return ts_nccl_algbw_gbps(algo_bytes, ns) * ts_nccl_bus_factor(op, nranks);
}

/* ---- shim side (shim/observe/comm.c) -------------------------------------------- */
/* What the shim knows of a communicator: a run-wide id (the same on every
 * rank: derived from the ncclUniqueId, or from the parent and split color),
 * its size and this process's rank in it. */
struct ts_comm_info {
    uint64_t id;
    int size, rank;
};
/* Id of a communicator made from a ncclUniqueId (128 bytes). */
uint64_t ts_comm_id_from_unique(const void *unique_id, size_t len);
/* Id of the child of split number `seq` of parent with color. */
uint64_t ts_comm_id_from_split(uint64_t parent_id, int color, uint64_t seq);
/* Remembers comm -> info (a new communicator). */
void ts_comm_remember(const void *comm, const struct ts_comm_info *info);
/* Looks comm up; false when unknown (made before the shim saw it). */
bool ts_comm_lookup(const void *comm, struct ts_comm_info *out);
/* Forgets comm (destroyed); returns its info in *out when known. */
bool ts_comm_forget(const void *comm, struct ts_comm_info *out);
/* Next split sequence number of parent (ranks split in the same order). */
uint64_t ts_comm_next_split(const void *parent);
#endif
