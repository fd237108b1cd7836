/* copy_engine.c: converts a pageable host<->device copy into pipelined
 * asynchronous copies through pinned staging (see copy_engine.h for the
 * contract), in the pieces copy_plan.c sizes: small first and last pieces,
 * large ones between.
 *
 * H2D: piece k is copied (by the caller and the copy pool) into a staging
 * buffer, its transfer queued on the stream and the buffer's event recorded,
 * so the CPU copy of piece k+1 overlaps the transfer of piece k.
 * D2H: up to DEPTH piece transfers are queued ahead; the oldest is waited
 * for and copied out to the destination while the later ones cross the link,
 * and its buffer is refilled with the next piece.
 * A synchronous H2D and every D2H keep up to DEPTH buffers for the whole copy
 * and reuse them piece after piece (waiting on a buffer's own event), so a
 * piece costs no ring lock, event query or driver check; an asynchronous H2D
 * takes a fresh buffer from the ring per piece and returns it at once, so it
 * can stage as far ahead of a busy stream as the ring allows.
 *
 * A 1D copy is cut into byte ranges; a 2D copy into whole rows (packed in the
 * staging buffer with pitch = width), so a row wider than a buffer is left to
 * the original call. */
#include <string.h>

#include "core/config.h"
#include "copy/copy_engine.h"
#include "core/cuda_real.h"
#include "log/log.h"
#include "log/logfmt.h"

/* Staging buffers a synchronous H2D or a D2H copy keeps: pieces in flight
 * at once (the piece being staged or copied out, the one on the link and two
 * queued behind it, which absorb the ramp's growing pieces). */
enum { DEPTH = 4 };

bool ts_copy_wanted(uint64_t bytes)
{
    const struct ts_config *c = ts_cfg();
    return c->pinned_copy && bytes > 0 && bytes >= c->pinned_copy_min;
}

static size_t extent(size_t width, size_t height, size_t pitch) { return pitch * (height - 1) + width; }

static bool is_1d(const struct ts_copy_req *q) { return q->height == 1; }

enum ts_copy_engine_dir ts_copy_classify(const struct ts_copy_req *q, enum ts_copy_engine_dir dir)
{
    if (!q->dst || !q->src || q->width == 0 || q->height == 0)
        return TS_CE_NONE;
    if (q->height > 1 && (q->dpitch < q->width || q->spitch < q->width))
        return TS_CE_NONE;
    if (!is_1d(q) && q->width > ts_staging_chunk())
        return TS_CE_NONE;
    ts_cuda_fn_cuCtxGetCurrent get_ctx = TS_CUDA_REAL(cuCtxGetCurrent);
    CUcontext ctx = NULL;
    /* No current context: this thread has not used CUDA yet; the original
     * call sets it up. */
    if (!get_ctx || get_ctx(&ctx) != CUDA_SUCCESS || !ctx)
        return TS_CE_NONE;
    /* A stream of another context (another device's, while this one is
     * current): the staging events are this context's and cannot be
     * recorded there ("hEvent and hStream must be from the same context"). */
    if (!ts_stream_is_default((uint64_t)(uintptr_t)q->stream)
        && ts_stream_context((uint64_t)(uintptr_t)q->stream) != ctx)
        return TS_CE_NONE;
    enum ts_host_class dk = ts_hostclass(q->dst), sk = ts_hostclass(q->src);
    if (dir == TS_CE_NONE) {
        if (sk == TS_HC_PAGEABLE && dk == TS_HC_DEVICE)
            dir = TS_CE_H2D;
        else if (dk == TS_HC_PAGEABLE && sk == TS_HC_DEVICE)
            dir = TS_CE_D2H;
        else
            return TS_CE_NONE;
    }
    size_t dext = extent(q->width, q->height, q->dpitch), sext = extent(q->width, q->height, q->spitch);
    if (dir == TS_CE_H2D) {
        if (sk != TS_HC_PAGEABLE || !ts_hostclass_device_range(q->dst, dext))
            return TS_CE_NONE;
    } else {
        if (dk != TS_HC_PAGEABLE || !ts_hostclass_device_range(q->src, sext))
            return TS_CE_NONE;
    }
    /* During capture a copy becomes a graph node: pass through.  An error
     * here (e.g. the legacy stream while another stream captures) also means
     * "leave it to the original call", which reports what CUDA reports. */
    ts_cuda_fn_cuStreamIsCapturing is_capturing = TS_CUDA_REAL(cuStreamIsCapturing);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!is_capturing || is_capturing(q->stream, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE)
        return TS_CE_NONE;
    return dir;
}

/* One piece of a copy: bytes [off, off+len) of a 1D copy, or rows
 * [row, row+rows) of a 2D one. */
struct piece {
    size_t off, len, row, rows;
};

/* The piece after `done`, sized by the plan (ts_copy_plan_piece) of dir
 * over the copy's bytes; a 2D piece is whole rows, at least one, at most a
 * buffer. */
static bool next_piece(const struct ts_copy_req *q, enum ts_copy_engine_dir dir, const struct piece *done,
                       struct piece *p)
{
    size_t largest = ts_staging_chunk();
    if (is_1d(q)) {
        size_t off = done->off + done->len;
        if (off >= q->width)
            return false;
        *p = (struct piece){ .off = off, .len = ts_copy_plan_piece(dir, q->width, off, largest) };
        return true;
    }
    size_t row = done->row + done->rows;
    if (row >= q->height)
        return false;
    size_t rows = ts_copy_plan_piece(dir, q->height * q->width, row * q->width, largest) / q->width;
    size_t fit = largest / q->width, left = q->height - row;
    if (rows < 1)
        rows = 1;
    if (rows > fit)
        rows = fit;
    if (rows > left)
        rows = left;
    *p = (struct piece){ .row = row, .rows = rows, .len = rows * q->width };
    return true;
}

/* Host rows <-> packed staging: rows of `width` bytes from src (rows spitch
 * apart) to dst (dpitch apart); one contiguous block goes to `whole`. */
static void copy_rows(char *dst, size_t dpitch, const char *src, size_t spitch, size_t width, size_t rows,
                      void (*whole)(void *, const void *, size_t))
{
    if (dpitch == width && spitch == width) {
        whole(dst, src, width * rows);
        return;
    }
    for (size_t r = 0; r < rows; r++)
        memcpy(dst + r * dpitch, src + r * spitch, width);
}

static void pack_rows(char *dst, const char *src, size_t pitch, size_t width, size_t rows)
{
    copy_rows(dst, width, src, pitch, width, rows, ts_copy_pool_memcpy);
}

static void unpack_rows(char *dst, const char *src, size_t pitch, size_t width, size_t rows)
{
    copy_rows(dst, pitch, src, width, width, rows, ts_copy_pool_memcpy_out);
}

/* The 2D copy of piece p between its rows and staging (packed rows). */
static CUDA_MEMCPY2D piece_2d(const struct ts_copy_req *q, const struct piece *p, void *staging, bool h2d)
{
    CUDA_MEMCPY2D m;
    memset(&m, 0, sizeof m);
    m.WidthInBytes = q->width;
    m.Height = p->rows;
    if (h2d) {
        m.srcMemoryType = CU_MEMORYTYPE_HOST;
        m.srcHost = staging;
        m.srcPitch = q->width;
        m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        m.dstDevice = (CUdeviceptr)(uintptr_t)(q->dst + p->row * q->dpitch);
        m.dstPitch = q->dpitch;
    } else {
        m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        m.srcDevice = (CUdeviceptr)(uintptr_t)(q->src + p->row * q->spitch);
        m.srcPitch = q->spitch;
        m.dstMemoryType = CU_MEMORYTYPE_HOST;
        m.dstHost = staging;
        m.dstPitch = q->width;
    }
    return m;
}

static CUresult queue_2d(const struct ts_copy_req *q, const struct piece *p, void *staging, bool h2d)
{
    ts_cuda_fn_cuMemcpy2DAsync_v2 copy2d = TS_CUDA_REAL(cuMemcpy2DAsync_v2);
    if (!copy2d)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUDA_MEMCPY2D m = piece_2d(q, p, staging, h2d);
    return copy2d(&m, q->stream);
}

static CUresult queue_transfer(const struct ts_copy_req *q, const struct piece *p, void *staging, bool h2d)
{
    if (!is_1d(q))
        return queue_2d(q, p, staging, h2d);
    if (h2d) {
        ts_cuda_fn_cuMemcpyHtoDAsync_v2 htod = TS_CUDA_REAL(cuMemcpyHtoDAsync_v2);
        return htod ? htod((CUdeviceptr)(uintptr_t)(q->dst + p->off), staging, p->len, q->stream)
                    : CUDA_ERROR_NOT_SUPPORTED;
    }
    ts_cuda_fn_cuMemcpyDtoHAsync_v2 dtoh = TS_CUDA_REAL(cuMemcpyDtoHAsync_v2);
    return dtoh ? dtoh(staging, (CUdeviceptr)(uintptr_t)(q->src + p->off), p->len, q->stream)
                : CUDA_ERROR_NOT_SUPPORTED;
}

/* n bytes from device memory src into host memory dst through the
 * driver's synchronous copy on q's stream (its per-thread default stream
 * when q's is): ordered after the stream's earlier work and waiting for it,
 * and refused exactly when a synchronous call on that stream would be. */
static CUresult dtoh_sync(const struct ts_copy_req *q, void *dst, const void *src, size_t n)
{
    bool pt = q->stream == CU_STREAM_PER_THREAD;
    ts_cuda_fn_cuMemcpyDtoH_v2 dtoh = pt ? TS_CUDA_REAL(cuMemcpyDtoH_v2_ptds) : TS_CUDA_REAL(cuMemcpyDtoH_v2);
    return dtoh ? dtoh(dst, (CUdeviceptr)(uintptr_t)src, n) : CUDA_ERROR_NOT_SUPPORTED;
}

/* The first chunk of a synchronous D2H goes through the driver's
 * synchronous copy (to staging, so pinned) on the same stream: it is
 * ordered after the stream's earlier work and waits for it, which is the
 * documented "stream sync before the copy", and it is refused exactly when
 * the original call would be (a capture that forbids synchronous calls; the
 * capture is then invalidated by it as by the original), in which case the
 * whole copy passes through and reports what CUDA reports. */
static CUresult d2h_sync(const struct ts_copy_req *q, const struct piece *p, void *staging)
{
    if (is_1d(q))
        return dtoh_sync(q, staging, q->src + p->off, p->len);
    bool pt = q->stream == CU_STREAM_PER_THREAD;
    ts_cuda_fn_cuMemcpy2D_v2 copy2d = pt ? TS_CUDA_REAL(cuMemcpy2D_v2_ptds) : TS_CUDA_REAL(cuMemcpy2D_v2);
    if (!copy2d)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUDA_MEMCPY2D m = piece_2d(q, p, staging, false);
    return copy2d(&m);
}

/* Queues piece p's transfer and records b's event after it; a record that
 * fails is replaced by draining the stream (the transfer is then complete). */
static CUresult queue_recorded(const struct ts_copy_req *q, const struct piece *p, struct ts_staging_buf *b,
                               bool h2d)
{
    CUresult r = queue_transfer(q, p, ts_staging_ptr(b), h2d);
    if (r != CUDA_SUCCESS)
        return r;
    if (ts_staging_record(b, q->stream) == CUDA_SUCCESS)
        return CUDA_SUCCESS;
    ts_cuda_fn_cuStreamSynchronize sync = TS_CUDA_REAL(cuStreamSynchronize);
    return sync ? sync(q->stream) : CUDA_ERROR_NOT_SUPPORTED;
}

/* The buffers one copy keeps: taken from the ring while fewer than DEPTH are
 * held and the ring gives one, then reused oldest first. */
struct held_bufs {
    struct ts_staging_buf *b[DEPTH];
    int n, next;
    bool ring_done; /* the ring gave no more: cycle through those held */
};

/* A held buffer for the next piece, idle (its last transfer waited for), or
 * NULL: no buffer at all, or a failed wait (a device error). */
static struct ts_staging_buf *held_take(struct held_bufs *h, CUcontext ctx, struct ts_copy_stats *st)
{
    if (!h->ring_done && h->n < DEPTH) {
        struct ts_staging_buf *b = ts_staging_acquire(ctx, &st->staging_wait_ns);
        if (b)
            return h->b[h->n++] = b;
        h->ring_done = true;
    }
    if (h->n == 0)
        return NULL;
    struct ts_staging_buf *b = h->b[h->next];
    h->next = (h->next + 1) % h->n;
    uint64_t t0 = ts_now_ns();
    CUresult r = ts_staging_wait(b);
    st->staging_wait_ns += ts_now_ns() - t0;
    return r == CUDA_SUCCESS ? b : NULL;
}

/* Back to the ring: each reusable once its recorded event completes. */
static void held_release(struct held_bufs *h)
{
    for (int i = 0; i < h->n; i++)
        ts_staging_release(h->b[i]);
    h->n = 0;
}

static void stage_piece(const struct ts_copy_req *q, const struct piece *p, struct ts_staging_buf *b)
{
    char *buf = ts_staging_ptr(b);
    if (is_1d(q))
        ts_copy_pool_memcpy(buf, q->src + p->off, p->len);
    else
        pack_rows(buf, q->src + p->row * q->spitch, q->spitch, q->width, p->rows);
}

static void count_piece(const struct piece *p, struct piece *done, struct ts_copy_stats *st)
{
    *done = *p;
    st->bytes += p->len;
    st->chunks++;
}

/* A synchronous H2D reads its source only once the stream's earlier work is
 * done ("a stream sync is performed before the copy starts": a host
 * function queued before it may still be writing the source).  The drain is
 * a synchronous one-byte read of the destination into staging on the same
 * stream: the driver orders it after that work (on the legacy stream, after
 * the blocking streams' too), waits for it, and refuses it exactly when the
 * original call would be refused (a capture that forbids synchronous calls:
 * the whole copy then passes through and reports what CUDA reports).  The
 * pieces are then staged and queued as they come, the link busy behind
 * them.  False when nothing can be done. */
static bool h2d_sync_first(const struct ts_copy_req *q, struct held_bufs *h, CUcontext ctx,
                           struct ts_copy_stats *st)
{
    struct ts_staging_buf *b = held_take(h, ctx, st);
    return b && dtoh_sync(q, ts_staging_ptr(b), q->dst, 1) == CUDA_SUCCESS;
}

/* Synchronous H2D.  After the drain (h2d_sync_first) only its own transfers
 * are on the stream: DEPTH buffers keep the link busy, and staging further
 * ahead would only leave a longer backlog for the next synchronous call to
 * wait for.  The call returns once the last piece is staged and queued. */
static void run_h2d_sync(const struct ts_copy_req *q, CUcontext ctx, struct piece *done,
                         struct ts_copy_stats *st)
{
    struct held_bufs h = { .n = 0 };
    struct piece p;
    bool go = h2d_sync_first(q, &h, ctx, st);
    while (go && next_piece(q, TS_CE_H2D, done, &p)) {
        struct ts_staging_buf *b = held_take(&h, ctx, st);
        if (!b)
            break; /* a failed device or no staging: the original call does the rest */
        stage_piece(q, &p, b);
        if (queue_recorded(q, &p, b, true) != CUDA_SUCCESS)
            break;
        count_piece(&p, done, st);
    }
    held_release(&h);
}

/* Asynchronous H2D: a buffer from the ring per piece, back to the ring as
 * soon as its transfer is queued (reused after its event), so the call
 * stages as far ahead of the stream's earlier work as the ring allows. */
static void run_h2d_async(const struct ts_copy_req *q, CUcontext ctx, struct piece *done,
                          struct ts_copy_stats *st)
{
    struct piece p;
    while (next_piece(q, TS_CE_H2D, done, &p)) {
        struct ts_staging_buf *b = ts_staging_acquire(ctx, &st->staging_wait_ns);
        if (!b)
            break;
        stage_piece(q, &p, b);
        CUresult r = queue_recorded(q, &p, b, true);
        ts_staging_release(b);
        if (r != CUDA_SUCCESS)
            break;
        count_piece(&p, done, st);
    }
}

/* D2H pipeline: pieces whose transfers are queued (oldest first) and the
 * held buffers that carry them. */
struct d2h_pipe {
    struct {
        struct ts_staging_buf *b;
        struct piece p;
    } fifo[DEPTH];
    int head, count;
    struct ts_staging_buf *idle[DEPTH]; /* held, piece delivered */
    int n_idle, n_held;
    bool ring_done, failed;
    struct piece issued; /* the last piece queued */
};

static struct ts_staging_buf *d2h_buffer(struct d2h_pipe *d, CUcontext ctx, struct ts_copy_stats *st)
{
    if (d->n_idle > 0)
        return d->idle[--d->n_idle];
    if (d->ring_done || d->n_held == DEPTH)
        return NULL;
    struct ts_staging_buf *b = ts_staging_acquire(ctx, &st->staging_wait_ns);
    if (b)
        d->n_held++;
    else
        d->ring_done = true;
    return b;
}

static void d2h_push(struct d2h_pipe *d, struct ts_staging_buf *b, const struct piece *p)
{
    int slot = (d->head + d->count) % DEPTH;
    d->fifo[slot].b = b;
    d->fifo[slot].p = *p;
    d->count++;
    d->issued = *p;
}

/* Queues transfers until DEPTH are in flight, the buffers run out or the
 * copy is all queued. */
static void d2h_fill(const struct ts_copy_req *q, struct d2h_pipe *d, CUcontext ctx, struct ts_copy_stats *st)
{
    struct piece p;
    while (!d->failed && d->count < DEPTH && next_piece(q, TS_CE_D2H, &d->issued, &p)) {
        struct ts_staging_buf *b = d2h_buffer(d, ctx, st);
        if (!b)
            return;
        if (queue_recorded(q, &p, b, false) != CUDA_SUCCESS) {
            d->idle[d->n_idle++] = b;
            d->failed = true; /* nothing after it may be claimed */
            return;
        }
        d2h_push(d, b, &p);
    }
}

/* A synchronous copy's first piece, carried by a synchronous copy; false
 * when it could not be (the whole copy then passes through). */
static bool d2h_first_sync(const struct ts_copy_req *q, struct d2h_pipe *d, CUcontext ctx,
                           struct ts_copy_stats *st)
{
    struct piece p;
    if (!next_piece(q, TS_CE_D2H, &d->issued, &p))
        return false;
    struct ts_staging_buf *b = d2h_buffer(d, ctx, st);
    if (!b)
        return false;
    if (d2h_sync(q, &p, ts_staging_ptr(b)) != CUDA_SUCCESS) {
        ts_staging_release(b);
        return false;
    }
    d2h_push(d, b, &p); /* complete: nothing recorded, so waiting for it returns at once */
    return true;
}

/* Waits for the oldest queued piece and copies it out; false when its
 * transfer failed (a device error: the original call redoes the rest and
 * reports it). */
static bool d2h_deliver(const struct ts_copy_req *q, struct d2h_pipe *d, struct piece *done,
                        struct ts_copy_stats *st)
{
    struct ts_staging_buf *b = d->fifo[d->head].b;
    struct piece p = d->fifo[d->head].p;
    uint64_t t0 = ts_now_ns();
    CUresult r = ts_staging_wait(b);
    st->staging_wait_ns += ts_now_ns() - t0;
    if (r != CUDA_SUCCESS)
        return false;
    d->head = (d->head + 1) % DEPTH;
    d->count--;
    const char *buf = ts_staging_ptr(b);
    if (is_1d(q))
        ts_copy_pool_memcpy_out(q->dst + p.off, buf, p.len);
    else
        unpack_rows(q->dst + p.row * q->dpitch, buf, q->dpitch, q->width, p.rows);
    d->idle[d->n_idle++] = b;
    count_piece(&p, done, st);
    return true;
}

/* D2H, both entry point kinds: the call returns once every piece it claims
 * is in the destination. */
static void run_d2h(const struct ts_copy_req *q, CUcontext ctx, struct piece *done, struct ts_copy_stats *st)
{
    struct d2h_pipe d = { .issued = *done };
    if (q->sync && !d2h_first_sync(q, &d, ctx, st))
        return;
    for (;;) {
        d2h_fill(q, &d, ctx, st);
        if (d.count == 0 || !d2h_deliver(q, &d, done, st))
            break;
    }
    /* Buffers of pieces not delivered (a failed transfer) are reused only
     * once their events complete. */
    for (int i = 0; i < d.count; i++)
        ts_staging_release(d.fifo[(d.head + i) % DEPTH].b);
    for (int i = 0; i < d.n_idle; i++)
        ts_staging_release(d.idle[i]);
}

void ts_copy_run(const struct ts_copy_req *q, enum ts_copy_engine_dir dir, size_t *done_rows,
                 size_t *done_bytes, struct ts_copy_stats *st)
{
    struct piece done = { 0 };
    memset(st, 0, sizeof *st);
    st->dir = dir;
    st->sync = q->sync;
    ts_cuda_fn_cuCtxGetCurrent get_ctx = TS_CUDA_REAL(cuCtxGetCurrent);
    CUcontext ctx = NULL;
    bool go = get_ctx && get_ctx(&ctx) == CUDA_SUCCESS && ctx;
    /* A synchronous entry point's first chunk is a synchronous copy
     * (d2h_sync, h2d_sync_first): the stream sync before the copy, and the capture rules
     * of synchronous calls. */
    if (go) {
        if (dir == TS_CE_H2D && q->sync)
            run_h2d_sync(q, ctx, &done, st);
        else if (dir == TS_CE_H2D)
            run_h2d_async(q, ctx, &done, st);
        else if (dir == TS_CE_D2H)
            run_d2h(q, ctx, &done, st);
    }
    if (done_bytes)
        *done_bytes = is_1d(q) ? done.off + done.len : 0;
    if (done_rows)
        *done_rows = is_1d(q) ? (done.off + done.len == q->width) : done.row + done.rows;
}

static uint64_t total_bytes, total_chunks, total_wait_ns;

void ts_copy_note(int api, const struct ts_copy_stats *st, uint64_t host_blocked_ns)
{
    struct ts_rec_copy_convert *r =
        (struct ts_rec_copy_convert *)ts_log_reserve(sizeof *r, TS_REC_COPY_CONVERT);
    if (r) {
        r->api = api;
        r->dir = st->dir == TS_CE_H2D ? TS_H2D : TS_D2H;
        r->sync = st->sync;
        r->reserved0 = 0;
        r->bytes = st->bytes;
        r->host_blocked_ns = host_blocked_ns;
        r->staging_wait_ns = st->staging_wait_ns;
        r->chunks = st->chunks;
        r->reserved = 0;
        ts_log_commit(&r->h);
    }
    __atomic_fetch_add(&total_bytes, st->bytes, __ATOMIC_RELAXED);
    __atomic_fetch_add(&total_chunks, st->chunks, __ATOMIC_RELAXED);
    __atomic_fetch_add(&total_wait_ns, st->staging_wait_ns, __ATOMIC_RELAXED);
}

void ts_copy_totals(uint64_t *bytes, uint64_t *chunks, uint64_t *staging_wait_ns)
{
    if (bytes)
        *bytes = __atomic_load_n(&total_bytes, __ATOMIC_RELAXED);
    if (chunks)
        *chunks = __atomic_load_n(&total_chunks, __ATOMIC_RELAXED);
    if (staging_wait_ns)
        *staging_wait_ns = __atomic_load_n(&total_wait_ns, __ATOMIC_RELAXED);
}
