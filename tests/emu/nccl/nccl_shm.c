/* The rendezvous of the emulated NCCL: one shared-memory segment per
 * communicator, shared by its ranks whether they live in several processes
 * (POSIX shm named by the unique id) or in one (anonymous shared mapping for
 * ncclCommInitAll).  Waits are futexes on words of the segment (not private:
 * they work across processes), bounded so that abort and dead peers are
 * noticed. */
#include "nccl_emu.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SLOT_BYTES (1u << 20)        /* collective staging per rank */
#define RING_BYTES (64u << 10)       /* send/recv ring per ordered pair */
#define WAIT_NS (20 * 1000 * 1000)   /* futex wait bound: abort / dead-peer polling */

struct shm_header {
    uint32_t nranks;
    uint32_t attached;
    uint32_t abort_flag;
    uint32_t bar_count;
    uint32_t bar_gen;
    uint32_t pad_[11];
    uint32_t claimed[NCCL_EMU_MAX_RANKS];
    int32_t pid[NCCL_EMU_MAX_RANKS];
    uint32_t doorbell[NCCL_EMU_MAX_RANKS];
    int64_t info[NCCL_EMU_MAX_RANKS][8];
};
#define HEADER_BYTES (((sizeof(struct shm_header) + 4095) / 4096) * 4096)

struct ring_header {
    uint64_t head;                   /* bytes written (producer) */
    uint64_t pad0_[7];
    uint64_t tail;                   /* bytes read (consumer) */
    uint64_t pad1_[7];
};
#define RING_STRIDE (sizeof(struct ring_header) + RING_BYTES)

struct nccl_shm {
    struct shm_header *h;
    char *base;
    size_t size;
    int nranks;
    int anon;                        /* one process: peers cannot die separately */
    int refs;                        /* local ranks sharing this mapping (atomic) */
    pid_t mypid;
};

static size_t segment_bytes(int nranks)
{
    return HEADER_BYTES + (size_t)nranks * SLOT_BYTES + (size_t)nranks * nranks * RING_STRIDE;
}

static void futex_wait(uint32_t *addr, uint32_t val)
{
    struct timespec ts = {0, WAIT_NS};
    syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(uint32_t *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Gone, or a zombie nobody has reaped yet (kill(pid, 0) still succeeds on
 * those): state 'Z' or 'X' in /proc/<pid>/stat. */
static int process_gone(pid_t p)
{
    if (kill(p, 0) != 0 && errno == ESRCH) return 1;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)p);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* A peer process that exited while we wait would hang us forever: treat it
 * as a remote error and abort the communicator, as NCCL does on a lost peer. */
static int peer_dead(struct nccl_shm *s)
{
    if (s->anon) return 0;
    for (int r = 0; r < s->nranks; r++) {
        pid_t p = __atomic_load_n(&s->h->pid[r], __ATOMIC_ACQUIRE);
        if (p > 0 && p != s->mypid && process_gone(p)) {
            nccl_shm_set_abort(s);
            return 1;
        }
    }
    return 0;
}

static int should_bail(struct nccl_shm *s, unsigned *polls)
{
    if (__atomic_load_n(&s->h->abort_flag, __ATOMIC_ACQUIRE)) return 1;
    if ((++*polls & 15u) == 0 && peer_dead(s)) return 1;
    return 0;
}

static ncclResult_t map_segment(int fd, int nranks, struct nccl_shm **out)
{
    size_t size = segment_bytes(nranks);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | (fd < 0 ? MAP_ANONYMOUS : 0), fd, 0);
    if (p == MAP_FAILED) return nccl_fail(ncclSystemError, "mmap of %zu bytes failed: %s", size, strerror(errno));
    struct nccl_shm *s = calloc(1, sizeof *s);
    if (!s) { munmap(p, size); return nccl_fail(ncclSystemError, "out of host memory"); }
    s->h = p;
    s->base = p;
    s->size = size;
    s->nranks = nranks;
    s->refs = 1;
    s->mypid = getpid();
    *out = s;
    return ncclSuccess;
}

ncclResult_t nccl_shm_attach(const char *name, int nranks, int rank, struct nccl_shm **out)
{
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (fd < 0) return nccl_fail(ncclSystemError, "shm_open(%s) failed: %s", name, strerror(errno));
    /* Every rank sizes the segment identically; extending is idempotent and
     * a fresh segment reads as zeros, which is its initial state. */
    struct stat st;
    if (fstat(fd, &st) != 0 || ((size_t)st.st_size < segment_bytes(nranks) &&
                                ftruncate(fd, (off_t)segment_bytes(nranks)) != 0)) {
        close(fd);
        return nccl_fail(ncclSystemError, "sizing shm %s failed: %s", name, strerror(errno));
    }
    if ((size_t)st.st_size > segment_bytes(nranks)) {
        close(fd);
        return nccl_fail(ncclInvalidUsage, "ranks disagree on nranks for this unique id (got %d)", nranks);
    }
    struct nccl_shm *s;
    ncclResult_t rc = map_segment(fd, nranks, &s);
    close(fd);
    if (rc != ncclSuccess) return rc;
    uint32_t expect = 0;
    if (!__atomic_compare_exchange_n(&s->h->nranks, &expect, (uint32_t)nranks, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
        expect != (uint32_t)nranks) {
        nccl_shm_detach(s);
        return nccl_fail(ncclInvalidUsage, "ranks disagree on nranks (%u vs %d)", expect, nranks);
    }
    if (__atomic_exchange_n(&s->h->claimed[rank], 1, __ATOMIC_ACQ_REL)) {
        nccl_shm_detach(s);
        return nccl_fail(ncclInvalidUsage, "rank %d of this unique id is already initialized", rank);
    }
    __atomic_store_n(&s->h->pid[rank], s->mypid, __ATOMIC_RELEASE);
    if (__atomic_add_fetch(&s->h->attached, 1, __ATOMIC_ACQ_REL) == (uint32_t)nranks)
        shm_unlink(name);            /* everyone is in: the name is no longer needed */
    futex_wake(&s->h->attached);
    *out = s;
    return ncclSuccess;
}

ncclResult_t nccl_shm_create_anon(int nranks, struct nccl_shm **out)
{
    ncclResult_t rc = map_segment(-1, nranks, out);
    if (rc != ncclSuccess) return rc;
    struct nccl_shm *s = *out;
    s->anon = 1;
    s->h->nranks = (uint32_t)nranks;
    s->h->attached = (uint32_t)nranks;
    for (int r = 0; r < nranks; r++) { s->h->claimed[r] = 1; s->h->pid[r] = s->mypid; }
    return ncclSuccess;
}

void nccl_shm_ref(struct nccl_shm *s) { __atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL); }

void nccl_shm_detach(struct nccl_shm *s)
{
    if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    munmap(s->base, s->size);
    free(s);
}

ncclResult_t nccl_shm_wait_all_attached(struct nccl_shm *s)
{
    unsigned polls = 0;
    for (;;) {
        uint32_t a = __atomic_load_n(&s->h->attached, __ATOMIC_ACQUIRE);
        if (a >= (uint32_t)s->nranks) return ncclSuccess;
        if (__atomic_load_n(&s->h->abort_flag, __ATOMIC_ACQUIRE) || ((++polls & 15u) == 0 && peer_dead(s)))
            return nccl_fail(ncclRemoteError, "communicator aborted while waiting for ranks to join");
        futex_wait(&s->h->attached, a);
    }
}

ncclResult_t nccl_shm_barrier(struct nccl_shm *s)
{
    struct shm_header *h = s->h;
    uint32_t gen = __atomic_load_n(&h->bar_gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&h->bar_count, 1, __ATOMIC_ACQ_REL) == (uint32_t)s->nranks) {
        __atomic_store_n(&h->bar_count, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&h->bar_gen, 1, __ATOMIC_RELEASE);
        futex_wake(&h->bar_gen);
        return ncclSuccess;
    }
    unsigned polls = 0;
    while (__atomic_load_n(&h->bar_gen, __ATOMIC_ACQUIRE) == gen) {
        if (should_bail(s, &polls)) return ncclRemoteError;
        futex_wait(&h->bar_gen, gen);
    }
    return ncclSuccess;
}

void nccl_shm_set_abort(struct nccl_shm *s)
{
    __atomic_store_n(&s->h->abort_flag, 1, __ATOMIC_RELEASE);
    futex_wake(&s->h->bar_gen);
    futex_wake(&s->h->attached);
    for (int r = 0; r < s->nranks; r++) {
        __atomic_add_fetch(&s->h->doorbell[r], 1, __ATOMIC_RELEASE);
        futex_wake(&s->h->doorbell[r]);
    }
}

int nccl_shm_aborted(struct nccl_shm *s) { return (int)__atomic_load_n(&s->h->abort_flag, __ATOMIC_ACQUIRE); }

void *nccl_shm_slot(struct nccl_shm *s, int rank) { return s->base + HEADER_BYTES + (size_t)rank * SLOT_BYTES; }
size_t nccl_shm_slot_bytes(void) { return SLOT_BYTES; }
int64_t *nccl_shm_info(struct nccl_shm *s, int rank) { return s->h->info[rank]; }

static struct ring_header *ring_of(struct nccl_shm *s, int src, int dst)
{
    return (struct ring_header *)(s->base + HEADER_BYTES + (size_t)s->nranks * SLOT_BYTES +
                                  ((size_t)src * s->nranks + dst) * RING_STRIDE);
}

static void ring_doorbell(struct nccl_shm *s, int rank)
{
    __atomic_add_fetch(&s->h->doorbell[rank], 1, __ATOMIC_RELEASE);
    futex_wake(&s->h->doorbell[rank]);
}

size_t nccl_shm_ring_write(struct nccl_shm *s, int src, int dst, const void *buf, size_t len)
{
    struct ring_header *r = ring_of(s, src, dst);
    char *data = (char *)(r + 1);
    uint64_t head = r->head;         /* only this producer writes head */
    uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
    size_t space = RING_BYTES - (size_t)(head - tail);
    size_t n = len < space ? len : space;
    if (!n) return 0;
    size_t at = (size_t)(head % RING_BYTES), first = RING_BYTES - at < n ? RING_BYTES - at : n;
    memcpy(data + at, buf, first);
    memcpy(data, (const char *)buf + first, n - first);
    __atomic_store_n(&r->head, head + n, __ATOMIC_RELEASE);
    ring_doorbell(s, dst);
    return n;
}

size_t nccl_shm_ring_read(struct nccl_shm *s, int src, int dst, void *buf, size_t len)
{
    struct ring_header *r = ring_of(s, src, dst);
    const char *data = (const char *)(r + 1);
    uint64_t tail = r->tail;         /* only this consumer writes tail */
    uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
    size_t avail = (size_t)(head - tail);
    size_t n = len < avail ? len : avail;
    if (!n) return 0;
    size_t at = (size_t)(tail % RING_BYTES), first = RING_BYTES - at < n ? RING_BYTES - at : n;
    memcpy(buf, data + at, first);
    memcpy((char *)buf + first, data, n - first);
    __atomic_store_n(&r->tail, tail + n, __ATOMIC_RELEASE);
    ring_doorbell(s, src);
    return n;
}

uint32_t nccl_shm_doorbell(struct nccl_shm *s, int rank)
{
    return __atomic_load_n(&s->h->doorbell[rank], __ATOMIC_ACQUIRE);
}

ncclResult_t nccl_shm_doorbell_wait(struct nccl_shm *s, int rank, uint32_t seen)
{
    unsigned polls = 0;
    while (__atomic_load_n(&s->h->doorbell[rank], __ATOMIC_ACQUIRE) == seen) {
        if (should_bail(s, &polls)) return ncclRemoteError;
        futex_wait(&s->h->doorbell[rank], seen);
    }
    return __atomic_load_n(&s->h->abort_flag, __ATOMIC_ACQUIRE) ? ncclRemoteError : ncclSuccess;
}
