/* exec_copy.c: cuMemcpy* and cuMemset*, with the host-side behaviour of the
 * real driver: device ranges are validated at the call; pageable sources are
 * staged before the call returns; copies into pageable memory return only
 * when done; pinned async copies touch host memory when they run; bytes and
 * copies are counted by kind when the copy executes; an optional bandwidth
 * model (EMU_PINNED_GBPS, EMU_PAGEABLE_GBPS, EMU_LINK_GBPS) makes copies take
 * time (a synchronous pageable upload larger than the driver's staging waits
 * for all but its last staging buffer). */
#define __CUDA_API_VERSION_INTERNAL 1
#include "exec_internal.h"
#include "common/skip_modes.h"
#include "emu_activity.h"

#include <errno.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x) do { CUresult rc_ = (x); if (rc_ != CUDA_SUCCESS) return rc_; } while (0)

enum copy_kind { H2D_PAGEABLE, H2D_PINNED, D2H_PAGEABLE, D2H_PINNED, D2D, H2H, PEER, N_COPY_KINDS };
static const char *const bytes_counter[N_COPY_KINDS] = {
    "bytes.h2d.pageable", "bytes.h2d.pinned", "bytes.d2h.pageable", "bytes.d2h.pinned",
    "bytes.d2d", "bytes.h2h", "bytes.peer"};
static const char *const copies_counter[N_COPY_KINDS] = {
    "copies.h2d.pageable", "copies.h2d.pinned", "copies.d2h.pageable", "copies.d2h.pinned",
    "copies.d2d", "copies.h2h", "copies.peer"};
/* Their cells, resolved at the first copy of each kind. */
static uint64_t *bytes_ref[N_COPY_KINDS], *copies_ref[N_COPY_KINDS];

static void count_copy(int kind, size_t bytes)
{
    uint64_t *b = __atomic_load_n(&bytes_ref[kind], __ATOMIC_ACQUIRE);
    uint64_t *c = __atomic_load_n(&copies_ref[kind], __ATOMIC_ACQUIRE);
    if (__builtin_expect(!b || !c, 0)) {
        b = emu_counter_ref(bytes_counter[kind]);
        c = emu_counter_ref(copies_counter[kind]);
        __atomic_store_n(&bytes_ref[kind], b, __ATOMIC_RELEASE);
        __atomic_store_n(&copies_ref[kind], c, __ATOMIC_RELEASE);
    }
    emu_counter_add_ref(b, bytes);
    emu_counter_add_ref(c, 1);
}

/* A copy is up to three-dimensional: depth slices of height rows of width
 * bytes; pitches are the distances between rows and between slices. */
struct copy_geom { size_t width, height, depth, dpitch, spitch, dslice, sslice; };

static size_t extent(size_t width, size_t height, size_t depth, size_t pitch, size_t slice)
{
    return slice * (depth - 1) + pitch * (height - 1) + width;
}

/* The driver's pinned staging for a synchronous pageable host-to-device
 * copy is finite: the call returns once the source has been staged, and with
 * a few MiB of staging a larger copy can only have staged its last piece once
 * the rest has crossed the link.  Modelled under the bandwidth model: the
 * caller waits (struct staging_wait) until all but STAGING_BYTES have been
 * transferred. */
enum { STAGING_BYTES = 2 << 20 };
struct staging_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool released;
};

static void staging_release(struct staging_wait *w)
{
    pthread_mutex_lock(&w->lock);
    w->released = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock); /* the waiter owns w from here on */
}

struct copy_op {
    struct staging_wait *release_after; /* NULL, or signalled after bytes - STAGING_BYTES */
    char *dst;
    const char *src;
    struct copy_geom g;
    int kind;
    bool dst_managed, src_managed;
    void *staging;      /* owned copy of a pageable source */
    int src_kind, dst_kind;            /* enum emu_mem_kind, for activity records */
    uint32_t stream_id, correlation_id;
    int dev;
    int src_access_dev, dst_access_dev;   /* the devices that read src and write dst */
    uint64_t enqueued_ns;
};

/* CUpti_ActivityMemcpyKind of each copy kind (HTOD 1, DTOH 2, DTOD 8, HTOH 9, PTOP 10). */
static const int cupti_copy_kind[N_COPY_KINDS] = { 1, 1, 2, 2, 8, 9, 10 };

enum { LINK_NICE = -5 };

/* The bandwidth model's link: a copy occupies it for bytes / (GB/s) from
 * when it starts, and the memmove that stands in for the DMA happens inside
 * that window, so a copy takes the link time and not the link time plus a
 * CPU copy.  A contiguous copy crosses progressively, as a DMA does
 * (move_over_link): slice by slice, each moved just before the time its last
 * byte would have crossed, so the last bytes are read and written at the
 * window's end (a program racing its copies still sees it) and a slice that
 * ran late (the worker waited for a CPU) is made up by the next slices'
 * sleeps instead of lengthening the copy.  Other copies move whole at the
 * end of the window.  Sleeps are to absolute deadlines with the thread's
 * timer slack at its minimum: the default 50 us slack would add up to that
 * much to every copy, which a real DMA does not pay. */
static void sleep_until(uint64_t deadline_ns)
{
    static __thread bool link_thread;
    if (!link_thread) {
        prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
        /* A DMA does not wait for a CPU: a stream worker that wakes to move
         * a slice must not queue behind the program's own busy threads (a
         * converted copy's staging), so it runs at a higher priority where
         * the process may set one (CAP_SYS_NICE; else as before). */
        if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), LINK_NICE) != 0) {}
        link_thread = true;
    }
    struct timespec ts = {(time_t)(deadline_ns / 1000000000ull), (long)(deadline_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

/* Picoseconds per byte the last memmoves of timed copies took (a running
 * average): where in its window a copy starts its memmove. */
static uint64_t memmove_ps_per_byte;

static uint64_t memmove_estimate_ns(size_t bytes)
{
    uint64_t ps = __atomic_load_n(&memmove_ps_per_byte, __ATOMIC_RELAXED);
    return (uint64_t)((double)bytes * (double)ps * 1.5e-3); /* a margin for a busier CPU */
}

static void memmove_observed(size_t bytes, uint64_t ns)
{
    if (bytes < 4096) return;
    uint64_t ps = (uint64_t)((double)ns * 1e3 / (double)bytes);
    uint64_t old = __atomic_load_n(&memmove_ps_per_byte, __ATOMIC_RELAXED);
    __atomic_store_n(&memmove_ps_per_byte, old ? (3 * old + ps) / 4 : ps, __ATOMIC_RELAXED);
}

/* Sleeps until the latest time that a move of `bytes` can start and still
 * end by due_ns. */
static void sleep_before(uint64_t due_ns, size_t bytes)
{
    uint64_t est = memmove_estimate_ns(bytes);
    if (due_ns > est) sleep_until(due_ns - est);
}

enum { LINK_SLICE = 1 << 20 };

static void move_over_link(char *dst, const char *src, size_t bytes, uint64_t start, double gbps)
{
    bool overlap = dst < src + bytes && src < dst + bytes;   /* memmove's order matters: one piece */
    size_t slice = overlap ? bytes : LINK_SLICE;
    for (size_t off = 0; off < bytes; off += slice) {
        size_t n = bytes - off < slice ? bytes - off : slice;
        sleep_before(start + (uint64_t)((double)(off + n) / gbps), n);
        uint64_t t0 = emu_now_ns();
        memmove(dst + off, src + off, n);
        memmove_observed(n, emu_now_ns() - t0);
    }
}

static double kind_gbps(int kind)
{
    switch (kind) {
    case H2D_PINNED: case D2H_PINNED: return emu_cfg.pinned_gbps;
    case H2D_PAGEABLE: case D2H_PAGEABLE: return emu_cfg.pageable_gbps;
    case PEER: return emu_cfg.nvlink_gbps;
    default: return 0;
    }
}

static bool to_host(int kind) { return kind == D2H_PAGEABLE || kind == D2H_PINNED || kind == H2H; }

/* When a copy's link window starts.  A DMA engine starts a queued copy as
 * the one before it leaves the link; the worker thread that stands in for
 * it wakes some microseconds later (a timer's overshoot, a switch), and
 * counting that as link time would charge every piece of a pipelined copy
 * a wake-up a GPU does not have.  So a copy enqueued before the previous
 * copy's window ended, with nothing timed run between them on this stream
 * (emu_stream_timed_ops), starts its window where that one ended.  A copy
 * enqueued later starts when it runs: the link waited for the program. */
static __thread uint64_t link_prev_end, link_prev_ops; /* this worker's last copy */

static uint64_t link_start(const struct copy_op *c, uint64_t now)
{
    if (link_prev_end && c->enqueued_ns < link_prev_end && link_prev_end < now
        && emu_stream_timed_ops == link_prev_ops + 1)
        return link_prev_end;
    return now;
}

static void run_copy(void *p)
{
    struct copy_op *c = p;
    const struct copy_geom *g = &c->g;
    size_t bytes = g->width * g->height * g->depth;
    size_t sext = extent(g->width, g->height, g->depth, g->spitch, g->sslice);
    size_t dext = extent(g->width, g->height, g->depth, g->dpitch, g->dslice);
    /* Access rights are those of when the copy runs, as on a GPU (a grant
     * made after the enqueue but before the copy executes counts). */
    if (!emu_mem_access_ok(c->src_access_dev, (uintptr_t)c->src, sext, false) ||
        !emu_mem_access_ok(c->dst_access_dev, (uintptr_t)c->dst, dext, true))
        emu_fault_access();
    double gbps = kind_gbps(c->kind);
    uint64_t start = gbps > 0 ? link_start(c, emu_now_ns()) : emu_now_ns();
    uint64_t link_end = gbps > 0 ? start + (uint64_t)((double)bytes / gbps) : 0; /* bytes / (GB/s) = ns */
    if (c->release_after) { /* all but the staging's worth first, then the caller may go on */
        sleep_until(start + (uint64_t)((double)(bytes - STAGING_BYTES) / gbps));
        staging_release(c->release_after);
        c->release_after = NULL;
    }
    /* EMU_COMPUTE=skip: device contents are meaningless, so a copy between
     * device memories moves nothing (reading an untouched page of the
     * shared arena would commit it); copies from and to the host stay real. */
    bool skip = (c->kind == D2D || c->kind == PEER) && emu_compute_skipped_for(bytes);
    bool contiguous = g->height == 1 && g->depth == 1;
    if (link_end && !(contiguous && !skip)) sleep_before(link_end, bytes);
    uint64_t moved_at = emu_now_ns();
    if (c->src_managed) emu_managed_touch((uintptr_t)c->src, sext, !to_host(c->kind));
    if (c->dst_managed) emu_managed_touch((uintptr_t)c->dst, dext, !to_host(c->kind));
    if (skip) {
        emu_counter_add_ref(EMU_COUNTER("copies.skipped"), 1);
    } else if (contiguous && link_end) {
        move_over_link(c->dst, c->src, bytes, start, gbps);
    } else if (contiguous) {
        memmove(c->dst, c->src, bytes);
    } else {
        for (size_t z = 0; z < g->depth; z++)
            for (size_t r = 0; r < g->height; r++)
                memcpy(c->dst + z * g->dslice + r * g->dpitch, c->src + z * g->sslice + r * g->spitch, g->width);
        if (link_end) memmove_observed(bytes, emu_now_ns() - moved_at);
    }
    if (link_end) sleep_until(link_end);
    link_prev_end = link_end;
    link_prev_ops = emu_stream_timed_ops;
    count_copy(c->kind, bytes);
    emu_activity_fn hook = emu_activity_hook();
    if (hook) {
        struct emu_activity rec = {
            .kind = EMU_ACTIVITY_MEMCPY, .start_ns = start, .end_ns = emu_now_ns(),
            .stream_id = c->stream_id, .correlation_id = c->correlation_id, .device = c->dev,
            .copy_kind = cupti_copy_kind[c->kind], .src_kind = c->src_kind, .dst_kind = c->dst_kind,
            .bytes = bytes };
        hook(&rec);
    }
}

/* Waits until an enqueued copy has crossed all but its last staging
 * buffer (or was dropped without running: free_copy releases it then). */
static void wait_for_staging(struct staging_wait *w)
{
    pthread_mutex_lock(&w->lock);
    while (!w->released)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

static void free_copy(void *p)
{
    struct copy_op *c = p;
    if (c->release_after)
        staging_release(c->release_after);
    free(c->staging);
    free(c);
}

static bool is_dev(enum emu_mem_kind k) { return k == EMU_MEM_DEVICE || k == EMU_MEM_MANAGED; }

/* Validates one side of a copy: device memory must be an allocated range,
 * host memory anything but an unallocated device address. */
static CUresult check_side(const void *p, size_t ext, enum emu_mem_kind *kind)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    *kind = emu_classify(p, ext);
    if (*kind == EMU_MEM_INVALID) return CUDA_ERROR_INVALID_VALUE;
    if (*kind == EMU_MEM_DEVICE) return emu_check_device_range((uintptr_t)p, ext);
    return CUDA_SUCCESS;
}

/* The devices of a cuMemcpyPeer* call: the source is read by the source
 * context's device, the destination written by the destination context's
 * (the copy is staged between them when they differ).  Other copies are
 * performed by their stream's device, which needs access to both sides
 * (cuMemSetAccess for VMM memory: a cuMemcpyAsync between two devices'
 * cuMemMap'ed memory needs both granted to the stream's device). */
struct peer_devs { int src, dst; };

/* Cross-stream ordering of one copy: it waits for `after` (if set), and
 * seq receives its sequence number on its stream (0: nothing was queued). */
struct copy_order { struct emu_dep after; bool has_after; uint64_t seq; };

/* The one copy path.  sync: a non-Async entry point (host-synchronous where
 * the documentation says so); peer: the devices of a cuMemcpyPeer* call, or
 * NULL; ord: NULL, or cross-stream ordering (synchronous peer copies). */
static CUresult copy_3d_ordered(void *dst, const void *src, struct copy_geom g, struct emu_stream *st,
                                bool sync, const struct peer_devs *peer, struct copy_order *ord)
{
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (g.width == 0 || g.height == 0 || g.depth == 0) return CUDA_SUCCESS;
    if (g.height > 1 && (g.dpitch < g.width || g.spitch < g.width)) return CUDA_ERROR_INVALID_VALUE;
    if (g.depth > 1 && (g.dslice < g.dpitch * g.height || g.sslice < g.spitch * g.height))
        return CUDA_ERROR_INVALID_VALUE;
    if (sync) CHECK(emu_capture_check_unsafe());
    size_t dext = extent(g.width, g.height, g.depth, g.dpitch, g.dslice);
    size_t sext = extent(g.width, g.height, g.depth, g.spitch, g.sslice);
    enum emu_mem_kind dk, sk;
    CHECK(check_side(dst, dext, &dk));
    CHECK(check_side(src, sext, &sk));
    int kind;
    if (is_dev(sk) && is_dev(dk)) {
        int a = emu_addr_device((uintptr_t)src), b = emu_addr_device((uintptr_t)dst);
        kind = (peer && peer->src != peer->dst) || (a >= 0 && b >= 0 && a != b) ? PEER : D2D;
    } else if (is_dev(dk)) {
        kind = sk == EMU_MEM_PINNED ? H2D_PINNED : H2D_PAGEABLE;
    } else if (is_dev(sk)) {
        kind = dk == EMU_MEM_PINNED ? D2H_PINNED : D2H_PAGEABLE;
    } else {
        kind = H2H;
    }
    bool capturing = __atomic_load_n(&st->capture, __ATOMIC_ACQUIRE) != NULL;
    struct copy_op *c = calloc(1, sizeof *c);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    *c = (struct copy_op){.dst = dst, .src = src, .g = g, .kind = kind,
                          .dst_managed = dk == EMU_MEM_MANAGED, .src_managed = sk == EMU_MEM_MANAGED,
                          .src_kind = sk == EMU_MEM_INVALID ? EMU_MEM_PAGEABLE : (int)sk,
                          .dst_kind = dk == EMU_MEM_INVALID ? EMU_MEM_PAGEABLE : (int)dk,
                          .stream_id = (uint32_t)st->id, .dev = st->dev,
                          .correlation_id = emu_activity_next_correlation(),
                          .src_access_dev = peer ? peer->src : st->dev,
                          .dst_access_dev = peer ? peer->dst : st->dev};
    if (kind == H2D_PAGEABLE && sync && !capturing) {
        /* "A stream sync is performed before the copy starts": earlier work
         * (a host function) may still write the source. */
        uint64_t mark;
        CUresult mr = emu_stream_enqueue_on(st, NULL, NULL, NULL, "memcpy stream sync",
                                            ord && ord->has_after ? &ord->after : NULL, &mark);
        if (mr != CUDA_SUCCESS) { free(c); return mr; }
        emu_stream_wait_seq(st, mark);
    }
    if (kind == H2D_PAGEABLE && !capturing) {
        /* The caller may reuse its buffer as soon as we return. */
        size_t row = g.width, slice = g.width * g.height;
        if (!(c->staging = malloc(slice * g.depth))) { free(c); return CUDA_ERROR_OUT_OF_MEMORY; }
        for (size_t z = 0; z < g.depth; z++)
            for (size_t r = 0; r < g.height; r++)
                memcpy((char *)c->staging + z * slice + r * row,
                       (const char *)src + z * g.sslice + r * g.spitch, row);
        c->src = c->staging;
        c->g.spitch = row;
        c->g.sslice = slice;
    }
    bool wait;
    if (capturing) wait = false;
    else if (kind == D2H_PAGEABLE) wait = true;
    else if (sync) wait = kind == H2D_PINNED || kind == D2H_PINNED || kind == H2H;
    else wait = kind == H2H && (sk == EMU_MEM_PAGEABLE || dk == EMU_MEM_PAGEABLE);
    struct staging_wait staged = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false };
    if (kind == H2D_PAGEABLE && sync && !capturing && kind_gbps(kind) > 0
        && g.width * g.height * g.depth > STAGING_BYTES)
        c->release_after = &staged;
    bool staging_limited = c->release_after != NULL; /* c belongs to the stream once enqueued */
    c->enqueued_ns = emu_now_ns();
    uint64_t seq;
    CUresult rc = emu_stream_enqueue_on(st, run_copy, c, free_copy, "memcpy",
                                        ord && ord->has_after ? &ord->after : NULL, &seq);
    if (rc != CUDA_SUCCESS) { free_copy(c); return rc; }
    if (ord) ord->seq = seq;
    if (staging_limited) {
        wait_for_staging(&staged);
        if (!wait) return emu_sticky();
    }
    if (wait) {
        emu_stream_wait_seq(st, seq);
        return emu_sticky();
    }
    return CUDA_SUCCESS;
}

static CUresult copy_3d(void *dst, const void *src, struct copy_geom g, struct emu_stream *st,
                        bool sync, const struct peer_devs *peer)
{
    return copy_3d_ordered(dst, src, g, st, sync, peer, NULL);
}

static CUresult copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                        size_t height, struct emu_stream *st, bool sync, const struct peer_devs *peer)
{
    struct copy_geom g = {width, height, 1, dpitch, spitch, 0, 0};
    return copy_3d(dst, src, g, st, sync, peer);
}

#define PTR(d) ((void *)(uintptr_t)(d))
#define SYNC_STREAM(pt) emu_stream_resolve(NULL, pt)

/* -------------------------------------------------------------- 1D copies */
static CUresult copy_1d(void *dst, const void *src, size_t n, struct emu_stream *st, bool sync,
                        bool dst_dev, bool src_dev)
{
    if (dst_dev) CHECK(emu_check_device_range((uintptr_t)dst, n ? n : 1));
    if (src_dev) CHECK(emu_check_device_range((uintptr_t)src, n ? n : 1));
    return copy_2d(dst, n, src, n, n, 1, st, sync, NULL);
}

#define SYNC_PAIR(name, dsttype, srctype, dd, sd)                                          \
    CUresult name(dsttype dst, srctype src, size_t n)                                     \
    { EMU_ENTRY_CTX(name); return copy_1d(PTR(dst), (const void *)(uintptr_t)src, n, SYNC_STREAM(false), true, dd, sd); } \
    CUresult name##_ptds(dsttype dst, srctype src, size_t n)                              \
    { EMU_ENTRY_CTX(name##_ptds); return copy_1d(PTR(dst), (const void *)(uintptr_t)src, n, SYNC_STREAM(true), true, dd, sd); }
#define ASYNC_PAIR(name, dsttype, srctype, dd, sd)                                         \
    CUresult name(dsttype dst, srctype src, size_t n, CUstream h)                         \
    { EMU_ENTRY_CTX(name); return copy_1d(PTR(dst), (const void *)(uintptr_t)src, n, emu_stream_resolve(h, false), false, dd, sd); } \
    CUresult name##_ptsz(dsttype dst, srctype src, size_t n, CUstream h)                  \
    { EMU_ENTRY_CTX(name##_ptsz); return copy_1d(PTR(dst), (const void *)(uintptr_t)src, n, emu_stream_resolve(h, true), false, dd, sd); }

SYNC_PAIR(cuMemcpy, CUdeviceptr, CUdeviceptr, false, false)
SYNC_PAIR(cuMemcpyHtoD_v2, CUdeviceptr, const void *, true, false)
SYNC_PAIR(cuMemcpyDtoH_v2, void *, CUdeviceptr, false, true)
SYNC_PAIR(cuMemcpyDtoD_v2, CUdeviceptr, CUdeviceptr, true, true)
ASYNC_PAIR(cuMemcpyAsync, CUdeviceptr, CUdeviceptr, false, false)
ASYNC_PAIR(cuMemcpyHtoDAsync_v2, CUdeviceptr, const void *, true, false)
ASYNC_PAIR(cuMemcpyDtoHAsync_v2, void *, CUdeviceptr, false, true)
ASYNC_PAIR(cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr, true, true)

/* ------------------------------------------------------------ peer copies */
/* A no-op on a legacy stream: a point in its order to wait for, or one that
 * makes its later work wait (via its dependency). */
static CUresult legacy_mark(int dev, const struct emu_dep *after, struct emu_dep *mark)
{
    struct emu_stream *l = emu_stream_legacy(dev);
    uint64_t seq;
    CHECK(emu_stream_enqueue_on(l, NULL, NULL, NULL, "peer-order", after, &seq));
    if (mark) *mark = (struct emu_dep){l, seq};
    return CUDA_SUCCESS;
}

/* cuMemcpyPeer (not the Async form) "is serialized with respect to all
 * pending and future asynchronous work in to the current context,
 * srcContext, and dstContext" (cuda.h): besides its own (current device's)
 * stream, the copy waits for the legacy streams of both devices - each of
 * which waits for its device's blocking streams - and their later work
 * waits for the copy.  Without this a peer copy issued right after a
 * pageable cudaMemcpy into the source on another device (whose DMA is still
 * queued there) read stale data. */
static CUresult copy_peer_serialized(CUdeviceptr dst, int ddev, CUdeviceptr src, int sdev, size_t n,
                                     struct emu_stream *st)
{
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    int others[2], nothers = 0;
    if (sdev != st->dev) others[nothers++] = sdev;
    if (ddev != st->dev && ddev != sdev) others[nothers++] = ddev;
    struct copy_order ord = {.has_after = false};
    if (n) CHECK(emu_capture_check_unsafe());
    for (int i = 0; n && i < nothers; i++) {
        CHECK(legacy_mark(others[i], ord.has_after ? &ord.after : NULL, &ord.after));
        ord.has_after = true;
    }
    struct copy_geom g = {n, 1, 1, n, n, 0, 0};
    struct peer_devs pd = {sdev, ddev};
    CHECK(copy_3d_ordered(PTR(dst), PTR(src), g, st, true, &pd, &ord));
    if (!ord.seq) return CUDA_SUCCESS;
    struct emu_dep copy_done = {st, ord.seq};
    for (int i = 0; i < nothers; i++) CHECK(legacy_mark(others[i], &copy_done, NULL));
    return CUDA_SUCCESS;
}

static CUresult copy_peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n,
                          struct emu_stream *st, bool sync)
{
    int ddev = emu_ctx_device(dctx), sdev = emu_ctx_device(sctx);
    if (ddev < 0 || sdev < 0) return CUDA_ERROR_INVALID_CONTEXT;
    CHECK(emu_check_device_range(dst, n ? n : 1));
    CHECK(emu_check_device_range(src, n ? n : 1));
    if (sync) return copy_peer_serialized(dst, ddev, src, sdev, n, st);
    struct peer_devs pd = {sdev, ddev};
    return copy_2d(PTR(dst), n, PTR(src), n, n, 1, st, sync, &pd);
}
CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n)
{ EMU_ENTRY_CTX(cuMemcpyPeer); return copy_peer(d, dc, s, sc, n, SYNC_STREAM(false), true); }
CUresult cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n)
{ EMU_ENTRY_CTX(cuMemcpyPeer_ptds); return copy_peer(d, dc, s, sc, n, SYNC_STREAM(true), true); }
CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream h)
{ EMU_ENTRY_CTX(cuMemcpyPeerAsync); return copy_peer(d, dc, s, sc, n, emu_stream_resolve(h, false), false); }
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream h)
{ EMU_ENTRY_CTX(cuMemcpyPeerAsync_ptsz); return copy_peer(d, dc, s, sc, n, emu_stream_resolve(h, true), false); }

/* ------------------------------------------------------- 2D and 3D copies */
static CUresult side_ptr(CUmemorytype t, const void *host, CUdeviceptr dev, size_t x, size_t y, size_t z,
                         size_t pitch, size_t slice, size_t ext_from_origin, const char **out)
{
    const char *base;
    switch (t) {
    case CU_MEMORYTYPE_HOST: base = host; break;
    case CU_MEMORYTYPE_DEVICE: base = (const char *)(uintptr_t)dev; break;
    case CU_MEMORYTYPE_UNIFIED: base = (const char *)(uintptr_t)dev; break;
    case CU_MEMORYTYPE_ARRAY:
        EMU_WARN_ONCE("CUDA arrays are not emulated (cuMemcpy2D/3D with an array)");
        return CUDA_ERROR_NOT_SUPPORTED;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    if (!base) return CUDA_ERROR_INVALID_VALUE;
    const char *p = base + z * slice + y * pitch + x;
    if (t == CU_MEMORYTYPE_DEVICE) CHECK(emu_check_device_range((uintptr_t)p, ext_from_origin));
    if (t == CU_MEMORYTYPE_HOST && emu_classify(p, 0) == EMU_MEM_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    *out = p;
    return CUDA_SUCCESS;
}

static CUresult copy_2d_desc(const CUDA_MEMCPY2D *c, struct emu_stream *st, bool sync)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    if (c->WidthInBytes == 0 || c->Height == 0) return CUDA_SUCCESS;
    size_t spitch = c->srcPitch ? c->srcPitch : c->WidthInBytes;
    size_t dpitch = c->dstPitch ? c->dstPitch : c->WidthInBytes;
    if (c->Height > 1 && (spitch < c->WidthInBytes || dpitch < c->WidthInBytes)) return CUDA_ERROR_INVALID_VALUE;
    const char *s, *d;
    CHECK(side_ptr(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, 0, spitch, 0,
                   extent(c->WidthInBytes, c->Height, 1, spitch, 0), &s));
    CHECK(side_ptr(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, 0, dpitch, 0,
                   extent(c->WidthInBytes, c->Height, 1, dpitch, 0), &d));
    return copy_2d((void *)(uintptr_t)d, dpitch, s, spitch, c->WidthInBytes, c->Height, st, sync, NULL);
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p)
{ EMU_ENTRY_CTX(cuMemcpy2D_v2); return copy_2d_desc(p, SYNC_STREAM(false), true); }
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p)
{ EMU_ENTRY_CTX(cuMemcpy2D_v2_ptds); return copy_2d_desc(p, SYNC_STREAM(true), true); }
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p)
{ EMU_ENTRY_CTX(cuMemcpy2DUnaligned_v2); return copy_2d_desc(p, SYNC_STREAM(false), true); }
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p)
{ EMU_ENTRY_CTX(cuMemcpy2DUnaligned_v2_ptds); return copy_2d_desc(p, SYNC_STREAM(true), true); }
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream h)
{ EMU_ENTRY_CTX(cuMemcpy2DAsync_v2); return copy_2d_desc(p, emu_stream_resolve(h, false), false); }
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream h)
{ EMU_ENTRY_CTX(cuMemcpy2DAsync_v2_ptsz); return copy_2d_desc(p, emu_stream_resolve(h, true), false); }

/* The fields CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER share. */
#define COPY_3D_FROM(c) do {                                                                  \
        if (c->srcLOD || c->dstLOD) return CUDA_ERROR_INVALID_VALUE;                         \
        if (c->WidthInBytes == 0 || c->Height == 0 || c->Depth == 0) return CUDA_SUCCESS;    \
        if (c->Depth > 1 && (c->srcHeight < c->Height || c->dstHeight < c->Height))          \
            return CUDA_ERROR_INVALID_VALUE;                                                  \
        g = (struct copy_geom){c->WidthInBytes, c->Height, c->Depth,                          \
                               c->dstPitch ? c->dstPitch : c->WidthInBytes,                   \
                               c->srcPitch ? c->srcPitch : c->WidthInBytes, 0, 0};            \
        g.sslice = g.spitch * (c->srcHeight ? c->srcHeight : c->Height);                      \
        g.dslice = g.dpitch * (c->dstHeight ? c->dstHeight : c->Height);                      \
        CHECK(side_ptr(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY,  \
                       c->srcZ, g.spitch, g.sslice,                                           \
                       extent(g.width, g.height, g.depth, g.spitch, g.sslice), &s));         \
        CHECK(side_ptr(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY,  \
                       c->dstZ, g.dpitch, g.dslice,                                           \
                       extent(g.width, g.height, g.depth, g.dpitch, g.dslice), &d));         \
    } while (0)

static CUresult copy_3d_desc(const CUDA_MEMCPY3D *c, struct emu_stream *st, bool sync)
{
    if (!c || c->reserved0 || c->reserved1) return CUDA_ERROR_INVALID_VALUE;
    struct copy_geom g;
    const char *s, *d;
    COPY_3D_FROM(c);
    return copy_3d((void *)(uintptr_t)d, s, g, st, sync, NULL);
}

static CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER *c, struct emu_stream *st, bool sync)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    int sdev = emu_ctx_device(c->srcContext), ddev = emu_ctx_device(c->dstContext);
    if ((c->srcMemoryType != CU_MEMORYTYPE_ARRAY && sdev < 0) ||
        (c->dstMemoryType != CU_MEMORYTYPE_ARRAY && ddev < 0))
        return CUDA_ERROR_INVALID_CONTEXT;
    struct copy_geom g;
    const char *s, *d;
    COPY_3D_FROM(c);
    struct peer_devs pd = {sdev, ddev};
    return copy_3d((void *)(uintptr_t)d, s, g, st, sync, &pd);
}

CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *p)
{ EMU_ENTRY_CTX(cuMemcpy3D_v2); return copy_3d_desc(p, SYNC_STREAM(false), true); }
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *p)
{ EMU_ENTRY_CTX(cuMemcpy3D_v2_ptds); return copy_3d_desc(p, SYNC_STREAM(true), true); }
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream h)
{ EMU_ENTRY_CTX(cuMemcpy3DAsync_v2); return copy_3d_desc(p, emu_stream_resolve(h, false), false); }
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *p, CUstream h)
{ EMU_ENTRY_CTX(cuMemcpy3DAsync_v2_ptsz); return copy_3d_desc(p, emu_stream_resolve(h, true), false); }
CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *p)
{ EMU_ENTRY_CTX(cuMemcpy3DPeer); return copy_3d_peer(p, SYNC_STREAM(false), true); }
CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *p)
{ EMU_ENTRY_CTX(cuMemcpy3DPeer_ptds); return copy_3d_peer(p, SYNC_STREAM(true), true); }
CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *p, CUstream h)
{ EMU_ENTRY_CTX(cuMemcpy3DPeerAsync); return copy_3d_peer(p, emu_stream_resolve(h, false), false); }
CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *p, CUstream h)
{ EMU_ENTRY_CTX(cuMemcpy3DPeerAsync_ptsz); return copy_3d_peer(p, emu_stream_resolve(h, true), false); }

/* ---------------------------------------------------------------- memsets */
struct memset_op {
    char *dst;
    size_t pitch, width, height;
    int elsize;
    uint32_t value;
    bool managed;
    int dev;
    int memory_kind;                   /* CUpti_ActivityMemoryKind, for activity records */
    uint32_t stream_id, correlation_id;
};

static void run_memset(void *p)
{
    struct memset_op *m = p;
    emu_activity_fn hook = emu_activity_hook();
    uint64_t start = hook ? emu_now_ns() : 0;
    /* The stream's device writes: VMM memory needs its read-write grant. */
    if (!emu_mem_access_ok(m->dev, (uintptr_t)m->dst, m->pitch * (m->height - 1) + m->width * (size_t)m->elsize, true))
        emu_fault_access();
    if (m->managed) emu_managed_touch((uintptr_t)m->dst, m->pitch * (m->height - 1) + m->width * (size_t)m->elsize, 1);
    /* EMU_COMPUTE=skip: checked and ordered, no byte written (untouched
     * device pages stay uncommitted). */
    size_t rows = emu_compute_skipped_for((unsigned long long)m->width * (size_t)m->elsize * m->height) ? 0 : m->height;
    if (!rows) emu_counter_add_ref(EMU_COUNTER("memsets.skipped"), 1);
    for (size_t r = 0; r < rows; r++) {
        char *row = m->dst + r * m->pitch;
        if (m->elsize == 1) { memset(row, (int)(m->value & 0xff), m->width); continue; }
        if (m->elsize == 2) {
            uint16_t v = (uint16_t)m->value, *q = (uint16_t *)(void *)row;
            for (size_t i = 0; i < m->width; i++) q[i] = v;
        } else {
            uint32_t *q = (uint32_t *)(void *)row;
            for (size_t i = 0; i < m->width; i++) q[i] = m->value;
        }
    }
    if (hook) {
        struct emu_activity rec = {
            .kind = EMU_ACTIVITY_MEMSET, .start_ns = start, .end_ns = emu_now_ns(),
            .stream_id = m->stream_id, .correlation_id = m->correlation_id, .device = m->dev,
            .bytes = m->width * (size_t)m->elsize * m->height, .value = m->value, .memory_kind = m->memory_kind };
        hook(&rec);
    }
}

/* The target is device or managed memory, or pinned host memory (under
 * unified addressing a device can write it, and cudaMemset/cuMemsetD* accept
 * it).  Memsets are asynchronous with respect to the host except the
 * non-Async forms on pinned host memory, which return when done (Runtime
 * API, "API synchronization behavior"). */
static CUresult memset_2d(CUdeviceptr dst, size_t pitch, uint32_t value, size_t width, size_t height,
                          int elsize, struct emu_stream *st, bool sync)
{
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (width == 0 || height == 0) return CUDA_SUCCESS;
    if (dst % (CUdeviceptr)elsize) return CUDA_ERROR_INVALID_VALUE;
    size_t row = width * (size_t)elsize;
    if (height > 1 && (pitch < row || pitch % (size_t)elsize)) return CUDA_ERROR_INVALID_VALUE;
    if (height == 1) pitch = row;
    size_t ext = pitch * (height - 1) + row;
    enum emu_mem_kind kind = emu_classify(PTR(dst), ext);
    if (kind != EMU_MEM_PINNED) CHECK(emu_check_device_range(dst, ext));
    struct memset_op *m = malloc(sizeof *m);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    *m = (struct memset_op){PTR(dst), pitch, width, height, elsize, value, kind == EMU_MEM_MANAGED, st->dev,
                            kind == EMU_MEM_MANAGED ? 5 : kind == EMU_MEM_PINNED ? 2 : 3,
                            (uint32_t)st->id, emu_activity_next_correlation()};
    bool wait = sync && kind == EMU_MEM_PINNED &&
                __atomic_load_n(&st->capture, __ATOMIC_ACQUIRE) == NULL;
    uint64_t seq;
    CUresult rc = emu_stream_enqueue_on(st, run_memset, m, free, "memset", NULL, &seq);
    if (rc != CUDA_SUCCESS) { free(m); return rc; }
    if (wait) {
        emu_stream_wait_seq(st, seq);
        return emu_sticky();
    }
    return CUDA_SUCCESS;
}

#define MEMSET_1D(name, T, es)                                                              \
    CUresult name##_v2(CUdeviceptr d, T v, size_t n)                                        \
    { EMU_ENTRY_CTX(name##_v2); return memset_2d(d, 0, v, n, 1, es, SYNC_STREAM(false), true); }     \
    CUresult name##_v2_ptds(CUdeviceptr d, T v, size_t n)                                   \
    { EMU_ENTRY_CTX(name##_v2_ptds); return memset_2d(d, 0, v, n, 1, es, SYNC_STREAM(true), true); } \
    CUresult name##Async(CUdeviceptr d, T v, size_t n, CUstream h)                          \
    { EMU_ENTRY_CTX(name##Async); return memset_2d(d, 0, v, n, 1, es, emu_stream_resolve(h, false), false); } \
    CUresult name##Async_ptsz(CUdeviceptr d, T v, size_t n, CUstream h)                     \
    { EMU_ENTRY_CTX(name##Async_ptsz); return memset_2d(d, 0, v, n, 1, es, emu_stream_resolve(h, true), false); }
#define MEMSET_2D(name, T, es)                                                              \
    CUresult name##_v2(CUdeviceptr d, size_t p, T v, size_t w, size_t ht)                   \
    { EMU_ENTRY_CTX(name##_v2); return memset_2d(d, p, v, w, ht, es, SYNC_STREAM(false), true); }    \
    CUresult name##_v2_ptds(CUdeviceptr d, size_t p, T v, size_t w, size_t ht)              \
    { EMU_ENTRY_CTX(name##_v2_ptds); return memset_2d(d, p, v, w, ht, es, SYNC_STREAM(true), true); } \
    CUresult name##Async(CUdeviceptr d, size_t p, T v, size_t w, size_t ht, CUstream h)     \
    { EMU_ENTRY_CTX(name##Async); return memset_2d(d, p, v, w, ht, es, emu_stream_resolve(h, false), false); } \
    CUresult name##Async_ptsz(CUdeviceptr d, size_t p, T v, size_t w, size_t ht, CUstream h) \
    { EMU_ENTRY_CTX(name##Async_ptsz); return memset_2d(d, p, v, w, ht, es, emu_stream_resolve(h, true), false); }

MEMSET_1D(cuMemsetD8, unsigned char, 1)
MEMSET_1D(cuMemsetD16, unsigned short, 2)
MEMSET_1D(cuMemsetD32, unsigned int, 4)
MEMSET_2D(cuMemsetD2D8, unsigned char, 1)
MEMSET_2D(cuMemsetD2D16, unsigned short, 2)
MEMSET_2D(cuMemsetD2D32, unsigned int, 4)
