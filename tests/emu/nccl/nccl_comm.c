/* Communicator life and queries of the emulated NCCL.  Every public ncclX is a
 * weak alias of the strong pncclX, as in the real library (NCCL's profiling
 * interface): a preload that defines ncclX sees the program's calls, and
 * pncclX stays reachable. */
#include "nccl_emu.h"
#include "common/driver_link.h"
#include "emu.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define NCCL_ALIAS(name) __typeof__(p##name) name __attribute__((weak, alias("p" #name)))

static __thread char last_error[256];

ncclResult_t nccl_fail(ncclResult_t rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (getenv("NCCL_DEBUG")) fprintf(stderr, "NCCL WARN (emu) %s\n", last_error);
    return rc;
}

void nccl_count(const char *name, uint64_t delta)
{
    void (*add)(const char *, uint64_t) = EMU_DRV(emuAddCounter);
    if (add) add(name, delta);
}

ncclResult_t nccl_check_comm(const struct ncclComm *comm)
{
    if (!comm) return nccl_fail(ncclInvalidArgument, "comm is NULL");
    if (comm->magic != NCCL_EMU_COMM_MAGIC) return nccl_fail(ncclInvalidArgument, "comm is not a live communicator");
    return ncclSuccess;
}

void nccl_comm_drain(struct ncclComm *comm)
{
    while (__atomic_load_n(&comm->pending, __ATOMIC_ACQUIRE) > 0) {
        struct timespec ts = {0, 100 * 1000};
        nanosleep(&ts, NULL);
    }
}

ncclResult_t pncclGetVersion(int *version)
{
    if (!version) return nccl_fail(ncclInvalidArgument, "version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
NCCL_ALIAS(ncclGetVersion);

const char *pncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}
NCCL_ALIAS(ncclGetErrorString);

const char *pncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return last_error;
}
NCCL_ALIAS(ncclGetLastError);

static uint64_t random_nonce(void)
{
    uint64_t n = 0;
    if (getrandom(&n, sizeof n, 0) != (ssize_t)sizeof n) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        n = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
    }
    return n;
}

ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (!uniqueId) return nccl_fail(ncclInvalidArgument, "uniqueId is NULL");
    static uint64_t counter;
    struct nccl_emu_id id;
    memset(&id, 0, sizeof id);
    id.magic = NCCL_EMU_ID_MAGIC;
    id.nonce = random_nonce();
    snprintf(id.shm_name, sizeof id.shm_name, "/emunccl.%d.%llu.%016llx", (int)getpid(),
             (unsigned long long)__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED), (unsigned long long)id.nonce);
    memset(uniqueId, 0, sizeof *uniqueId);
    memcpy(uniqueId->internal, &id, sizeof id);
    return ncclSuccess;
}
NCCL_ALIAS(ncclGetUniqueId);

static int current_device(void)
{
    CUdevice dev = 0;
    if (EMU_DRV(cuCtxGetDevice)(&dev) != CUDA_SUCCESS) dev = 0;
    return (int)dev;
}

static struct ncclComm *comm_new(int rank, int nranks, int dev, int blocking)
{
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->magic = NCCL_EMU_COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->cudev = dev;
    c->blocking = blocking;
    pthread_mutex_init(&c->exec_lock, NULL);
    return c;
}

static void comm_free(struct ncclComm *c)
{
    c->magic = 0;
    nccl_shm_detach(c->shm);
    pthread_mutex_destroy(&c->exec_lock);
    free(c);
}

static ncclResult_t check_config(const ncclConfig_t *config, int *blocking)
{
    *blocking = 1;
    if (!config) return ncclSuccess;
    if (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, cgaClusterSize))
        return nccl_fail(ncclInvalidArgument, "config was not initialized with NCCL_CONFIG_INITIALIZER");
    if (config->blocking != NCCL_CONFIG_UNDEF_INT) {
        if (config->blocking != 0 && config->blocking != 1)
            return nccl_fail(ncclInvalidArgument, "config->blocking must be 0 or 1 (got %d)", config->blocking);
        *blocking = config->blocking;
    }
    return ncclSuccess;
}

/* Joins the rendezvous `name`; outside a group waits for every rank (the call
 * is collective), inside one leaves the wait to ncclGroupEnd. */
static ncclResult_t init_named(ncclComm_t *out, int nranks, const char *name, uint64_t nonce, int rank,
                               int blocking)
{
    struct ncclComm *c = comm_new(rank, nranks, current_device(), blocking);
    if (!c) return nccl_fail(ncclSystemError, "out of host memory");
    snprintf(c->id_name, sizeof c->id_name, "%s", name);
    c->id_nonce = nonce;
    ncclResult_t rc = nccl_shm_attach(name, nranks, rank, &c->shm);
    if (rc != ncclSuccess) { c->shm = NULL; comm_free(c); return rc; }
    if (nccl_group_depth() > 0) {
        nccl_group_defer_init(c);
    } else if ((rc = nccl_shm_wait_all_attached(c->shm)) != ncclSuccess) {
        comm_free(c);
        return rc;
    }
    *out = c;
    nccl_count("nccl.comm_init", 1);
    return ncclSuccess;
}

ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config)
{
    if (!comm) return nccl_fail(ncclInvalidArgument, "comm is NULL");
    *comm = NULL;
    if (nranks < 1 || nranks > NCCL_EMU_MAX_RANKS)
        return nccl_fail(ncclInvalidArgument, "nranks %d out of range (emulator supports 1..%d)", nranks, NCCL_EMU_MAX_RANKS);
    if (rank < 0 || rank >= nranks) return nccl_fail(ncclInvalidArgument, "rank %d not in [0, %d)", rank, nranks);
    int blocking;
    ncclResult_t rc = check_config(config, &blocking);
    if (rc != ncclSuccess) return rc;
    struct nccl_emu_id id;
    memcpy(&id, commId.internal, sizeof id);
    if (id.magic != NCCL_EMU_ID_MAGIC || id.shm_name[0] != '/' || !memchr(id.shm_name, 0, sizeof id.shm_name))
        return nccl_fail(ncclInvalidArgument, "unique id was not produced by ncclGetUniqueId");
    return init_named(comm, nranks, id.shm_name, id.nonce, rank, blocking);
}
NCCL_ALIAS(ncclCommInitRankConfig);

ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return pncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}
NCCL_ALIAS(ncclCommInitRank);

/* Several ids only spread the bootstrap load in the real library; every rank
 * holds the same list, so the first names the rendezvous. */
ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
                                       ncclConfig_t *config)
{
    if (nId < 1 || !commIds) return nccl_fail(ncclInvalidArgument, "need at least one unique id (nId %d)", nId);
    return pncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}
NCCL_ALIAS(ncclCommInitRankScalable);

ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    if (!comms) return nccl_fail(ncclInvalidArgument, "comms is NULL");
    if (ndev < 1 || ndev > NCCL_EMU_MAX_RANKS) return nccl_fail(ncclInvalidArgument, "ndev %d out of range", ndev);
    int count = 0;
    /* it may be the program's first CUDA call: NCCL initializes CUDA itself */
    if (EMU_DRV(cuInit)(0) != CUDA_SUCCESS || EMU_DRV(cuDeviceGetCount)(&count) != CUDA_SUCCESS) count = 0;
    for (int i = 0; i < ndev; i++) {
        int d = devlist ? devlist[i] : i;
        if (d < 0 || d >= count) return nccl_fail(ncclInvalidArgument, "device %d does not exist (%d devices)", d, count);
        for (int j = 0; j < i; j++)
            if (devlist && devlist[j] == d) return nccl_fail(ncclInvalidUsage, "duplicate GPU %d in devlist", d);
    }
    struct nccl_shm *shm;
    ncclResult_t rc = nccl_shm_create_anon(ndev, &shm);
    if (rc != ncclSuccess) return rc;
    uint64_t nonce = random_nonce();
    for (int i = 0; i < ndev; i++) {
        struct ncclComm *c = comm_new(i, ndev, devlist ? devlist[i] : i, 1);
        if (!c) {
            for (int j = 0; j < i; j++) { comm_free(comms[j]); comms[j] = NULL; }
            nccl_shm_detach(shm);
            return nccl_fail(ncclSystemError, "out of host memory");
        }
        if (i > 0) nccl_shm_ref(shm);
        c->shm = shm;
        c->id_nonce = nonce;
        snprintf(c->id_name, sizeof c->id_name, "/emunccl.%d.all.%016llx", (int)getpid(), (unsigned long long)nonce);
        comms[i] = c;
    }
    nccl_count("nccl.comm_init", (uint64_t)ndev);
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommInitAll);

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
    return h;
}

/* Collective over comm: ranks with the same color form a new communicator,
 * ordered by (key, parent rank).  The new rendezvous name is derived from the
 * parent's id, the split's ordinal and the color, so members agree on it
 * without another exchange. */
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    if (!newcomm) return nccl_fail(ncclInvalidArgument, "newcomm is NULL");
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) return nccl_fail(ncclInvalidArgument, "color %d must be >= 0 or NCCL_SPLIT_NOCOLOR", color);
    int blocking = comm->blocking;
    if (config && (rc = check_config(config, &blocking)) != ncclSuccess) return rc;
    *newcomm = NULL;
    nccl_comm_drain(comm);           /* the exchange must follow every queued op of comm */
    int64_t *mine = nccl_shm_info(comm->shm, comm->rank);
    mine[0] = color;
    mine[1] = key;
    if ((rc = nccl_shm_barrier(comm->shm)) != ncclSuccess)
        return nccl_fail(rc, "communicator aborted during ncclCommSplit");
    int n = 0, newrank = 0;
    for (int r = 0; r < comm->nranks; r++) {
        int64_t *o = nccl_shm_info(comm->shm, r);
        if (o[0] != color) continue;
        n++;
        if (r != comm->rank && (o[1] < key || (o[1] == key && r < comm->rank))) newrank++;
    }
    if ((rc = nccl_shm_barrier(comm->shm)) != ncclSuccess)   /* everyone has read the exchange */
        return nccl_fail(rc, "communicator aborted during ncclCommSplit");
    int ordinal = comm->split_count++;
    if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
    uint64_t h = fnv1a(0xcbf29ce484222325ull, comm->id_name, strlen(comm->id_name));
    h = fnv1a(h, &comm->id_nonce, sizeof comm->id_nonce);
    h = fnv1a(h, &ordinal, sizeof ordinal);
    h = fnv1a(h, &color, sizeof color);
    char name[96];
    snprintf(name, sizeof name, "/emunccl.split.%016llx", (unsigned long long)h);
    rc = init_named(newcomm, n, name, h, newrank, blocking);
    if (rc == ncclSuccess) (*newcomm)->cudev = comm->cudev;
    return rc;
}
NCCL_ALIAS(ncclCommSplit);

ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    if (comm->finalized) return nccl_fail(ncclInvalidUsage, "communicator already finalized");
    nccl_comm_drain(comm);
    comm->finalized = 1;
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommFinalize);

ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;   /* as NCCL: destroying NULL is a no-op */
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    nccl_comm_drain(comm);
    comm_free(comm);
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommDestroy);

ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    nccl_shm_set_abort(comm->shm);   /* queued ops of every rank bail out */
    nccl_comm_drain(comm);
    comm_free(comm);
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommAbort);

ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    if (revokeFlags != NCCL_REVOKE_DEFAULT) return nccl_fail(ncclInvalidArgument, "revokeFlags must be 0");
    nccl_shm_set_abort(comm->shm);
    __atomic_store_n(&comm->async_error, ncclRemoteError, __ATOMIC_RELEASE);
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommRevoke);

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    if (!asyncError) return nccl_fail(ncclInvalidArgument, "asyncError is NULL");
    *asyncError = (ncclResult_t)__atomic_load_n(&comm->async_error, __ATOMIC_ACQUIRE);
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommGetAsyncError);

ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    if (!count) return nccl_fail(ncclInvalidArgument, "count is NULL");
    *count = comm->nranks;
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommCount);

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    if (!device) return nccl_fail(ncclInvalidArgument, "device is NULL");
    *device = comm->cudev;
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommCuDevice);

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    if (!rank) return nccl_fail(ncclInvalidArgument, "rank is NULL");
    *rank = comm->rank;
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommUserRank);

ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
    if (!ptr) return nccl_fail(ncclInvalidArgument, "ptr is NULL");
    *ptr = NULL;
    if (size == 0) return ncclSuccess;
    CUdeviceptr d = 0;
    CUresult cr = EMU_DRV(cuMemAlloc_v2)(&d, size);
    if (cr != CUDA_SUCCESS) return nccl_fail(ncclUnhandledCudaError, "cuMemAlloc of %zu bytes failed: %d", size, (int)cr);
    *ptr = (void *)(uintptr_t)d;
    return ncclSuccess;
}
NCCL_ALIAS(ncclMemAlloc);

ncclResult_t pncclMemFree(void *ptr)
{
    if (!ptr) return ncclSuccess;
    CUresult cr = EMU_DRV(cuMemFree_v2)((CUdeviceptr)(uintptr_t)ptr);
    if (cr != CUDA_SUCCESS) return nccl_fail(ncclUnhandledCudaError, "cuMemFree failed: %d", (int)cr);
    return ncclSuccess;
}
NCCL_ALIAS(ncclMemFree);

/* Registration is a no-op for the emulator (every buffer is reachable); the
 * handle only proves it came from here. */
struct reg_handle { uint64_t magic; const struct ncclComm *comm; void *buff; size_t size; };
#define REG_MAGIC 0x7265676973746572ull

ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    if (!handle || !buff) return nccl_fail(ncclInvalidArgument, "buff and handle must not be NULL");
    struct reg_handle *h = malloc(sizeof *h);
    if (!h) return nccl_fail(ncclSystemError, "out of host memory");
    *h = (struct reg_handle){REG_MAGIC, comm, buff, size};
    *handle = h;
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommRegister);

ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    struct reg_handle *h = handle;
    if (!h || h->magic != REG_MAGIC || h->comm != comm) return nccl_fail(ncclInvalidArgument, "handle not registered with comm");
    h->magic = 0;
    free(h);
    return ncclSuccess;
}
NCCL_ALIAS(ncclCommDeregister);

ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm)
{
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    if (!op || !scalar) return nccl_fail(ncclInvalidArgument, "op and scalar must not be NULL");
    if (nccl_type_size(datatype) == 0) return nccl_fail(ncclInvalidArgument, "invalid datatype %d", (int)datatype);
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
        return nccl_fail(ncclInvalidArgument, "invalid scalar residence %d", (int)residence);
    for (int i = 0; i < NCCL_EMU_MAX_OPS; i++) {
        struct nccl_emu_redop *o = &comm->ops[i];
        if (o->in_use) continue;
        o->in_use = 1;
        o->type = datatype;
        o->residence = residence;
        o->device_scalar = scalar;
        o->host_scalar = residence == ncclScalarHostImmediate ? nccl_load_scalar(scalar, datatype) : 0;
        *op = (ncclRedOp_t)(ncclNumOps + i);
        return ncclSuccess;
    }
    return nccl_fail(ncclInternalError, "too many PreMulSum operators alive (emulator limit %d)", NCCL_EMU_MAX_OPS);
}
NCCL_ALIAS(ncclRedOpCreatePreMulSum);

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    ncclResult_t rc = nccl_check_comm(comm);
    if (rc != ncclSuccess) return rc;
    int i = (int)op - ncclNumOps;
    if ((int)op < ncclNumOps) return nccl_fail(ncclInvalidArgument, "op %d is a built-in operator", (int)op);
    if (i >= NCCL_EMU_MAX_OPS || !comm->ops[i].in_use) return nccl_fail(ncclInvalidArgument, "op %d was not created on comm", (int)op);
    comm->ops[i].in_use = 0;
    return ncclSuccess;
}
NCCL_ALIAS(ncclRedOpDestroy);
