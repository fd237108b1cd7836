/* nccl_emu.h: internals of the emulated NCCL (build/emu/libnccl.so.2).
 *
 * Files:
 *   nccl_shm.c     the rendezvous: a POSIX shared-memory segment per
 *                  communicator (named by the ncclUniqueId), its layout,
 *                  futex waits, the cross-process barrier, p2p byte rings
 *   nccl_comm.c    versions, errors, unique ids, communicator life
 *                  (init / init-all / split / finalize / destroy / abort),
 *                  queries, ncclMemAlloc, registration, PreMulSum ops
 *   nccl_reduce.c  element types and reductions
 *   nccl_coll.c    the collective and p2p entry points, groups, and the
 *                  stream-ordered execution (host functions on the caller's
 *                  stream, reached through the driver's cuLaunchHostFunc)
 */
#ifndef NCCL_EMU_H
#define NCCL_EMU_H
#include <nccl.h>
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#define NCCL_EMU_MAX_RANKS 64
#define NCCL_EMU_MAX_OPS 64          /* PreMulSum operators alive per communicator */
#define NCCL_EMU_ID_MAGIC 0x4e43434c454d5531ull   /* "NCCLEMU1" */

/* ------------------------------------------------------------ nccl_shm.c */
/* What a ncclUniqueId carries (fits its 128 bytes). */
struct nccl_emu_id {
    uint64_t magic;
    uint64_t nonce;
    char shm_name[96];
};

struct nccl_shm;                     /* the mapped segment (layout in nccl_shm.c) */

/* Attaches (creating if first) the segment `name` for `nranks` ranks and
 * claims slot `rank`; the last rank to attach unlinks the name.  Returns
 * ncclSuccess, ncclInvalidUsage (rank taken, nranks mismatch) or
 * ncclSystemError. */
ncclResult_t nccl_shm_attach(const char *name, int nranks, int rank, struct nccl_shm **out);
/* An unnamed segment shared by the ranks of one process (ncclCommInitAll). */
ncclResult_t nccl_shm_create_anon(int nranks, struct nccl_shm **out);
/* Adds a reference for one more local rank of an anonymous segment. */
void nccl_shm_ref(struct nccl_shm *s);
void nccl_shm_detach(struct nccl_shm *s);
/* Blocks until every rank attached (or abort).  ncclSuccess or ncclRemoteError. */
ncclResult_t nccl_shm_wait_all_attached(struct nccl_shm *s);

/* Barrier across all ranks; ncclRemoteError if the communicator was aborted
 * or a peer process died while waiting. */
ncclResult_t nccl_shm_barrier(struct nccl_shm *s);
void nccl_shm_set_abort(struct nccl_shm *s);
int nccl_shm_aborted(struct nccl_shm *s);

/* Per-rank staging slot of nccl_shm_slot_bytes() bytes (collectives). */
void *nccl_shm_slot(struct nccl_shm *s, int rank);
size_t nccl_shm_slot_bytes(void);
/* Per-rank small exchange area (split colors, keys...). */
int64_t *nccl_shm_info(struct nccl_shm *s, int rank);

/* Byte-stream rings src->dst for send/recv; both return bytes moved (0 if
 * the ring is full/empty right now). */
size_t nccl_shm_ring_write(struct nccl_shm *s, int src, int dst, const void *buf, size_t len);
size_t nccl_shm_ring_read(struct nccl_shm *s, int src, int dst, void *buf, size_t len);
/* p2p progress waiting: read the rank's doorbell, try progress, and if none
 * was made wait for the doorbell to move (bounded wait). */
uint32_t nccl_shm_doorbell(struct nccl_shm *s, int rank);
ncclResult_t nccl_shm_doorbell_wait(struct nccl_shm *s, int rank, uint32_t seen);

/* ------------------------------------------------------------ nccl_comm.c */
struct nccl_emu_redop {
    int in_use;
    ncclDataType_t type;
    ncclScalarResidence_t residence;
    const void *device_scalar;       /* ncclScalarDevice: read when the op runs */
    double host_scalar;              /* ncclScalarHostImmediate: read at creation */
};

struct ncclComm {
    uint64_t magic;                  /* NCCL_EMU_COMM_MAGIC while alive */
    struct nccl_shm *shm;
    int rank, nranks, cudev;
    uint64_t id_nonce;               /* for deterministic split ids */
    char id_name[96];
    int split_count;
    /* Operations of this communicator run one at a time, in the order the
     * stream workers reach them; all ranks enqueue in the same order. */
    pthread_mutex_t exec_lock;
    int pending;                     /* enqueued, not finished (atomic) */
    int async_error;                 /* ncclResult_t (atomic) */
    int finalized, destroyed;
    int blocking;
    struct nccl_emu_redop ops[NCCL_EMU_MAX_OPS];
};
#define NCCL_EMU_COMM_MAGIC 0x636f6d6d454d5531ull

/* ncclInvalidArgument unless comm is a live communicator. */
ncclResult_t nccl_check_comm(const struct ncclComm *comm);
/* Records the thread's last error message (ncclGetLastError) and returns rc. */
ncclResult_t nccl_fail(ncclResult_t rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nccl_count(const char *name, uint64_t delta);
/* Waits until every operation enqueued on comm has run. */
void nccl_comm_drain(struct ncclComm *comm);

/* ------------------------------------------------------------ nccl_reduce.c */
size_t nccl_type_size(ncclDataType_t t);       /* 0 for an invalid type */
/* dst[i] = op over j of srcs[j][i] for j in 0..nsrc-1 (in that order, so all
 * ranks compute identical bits).  op is ncclSum/Prod/Max/Min/Avg (Avg divides
 * the sum by nsrc); PreMulSum is applied by nccl_scale first, then Sum. */
void nccl_reduce(void *dst, const void *const *srcs, int nsrc, size_t count,
                 ncclDataType_t t, ncclRedOp_t op);
/* dst[i] = src[i] * scalar, rounded to the type. */
void nccl_scale(void *dst, const void *src, size_t count, ncclDataType_t t, double scalar);
/* Reads a scalar of type t at p as a double. */
double nccl_load_scalar(const void *p, ncclDataType_t t);

/* ------------------------------------------------------------ nccl_coll.c */
/* Thread-local group depth (> 0 inside ncclGroupStart/End). */
int nccl_group_depth(void);
/* Inside a group, ncclCommInitRank defers its wait-for-all-ranks to GroupEnd. */
void nccl_group_defer_init(struct ncclComm *comm);
#endif
