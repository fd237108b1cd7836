/* copy_engine.c: converts a pageable host<->device copy into chunked
 * asynchronous copies through pinned staging (see copy_engine.h for the
 * contract).
 *
 * H2D: chunk i is copied (by the caller and the copy pool) into a staging
 * buffer, its transfer queued on the stream and the buffer's event recorded;
 * the buffer goes back to the ring at once and is reused only after that
 * event, so the CPU copy of chunk i+1 overlaps the transfer of chunk i.
 * D2H: up to PIPE_DEPTH chunk transfers are queued ahead; the oldest is waited
 * for, copied out to the destination, and its buffer refilled with the next.
 *
 * A 1D copy is cut into byte ranges; a 2D copy into whole rows (packed in the
 * staging buffer with pitch = width), so a row wider than a chunk is left to
 * the original call. */
#include <string.h>

#include "core/config.h"
#include "copy/copy_engine.h"
#include "core/cuda_real.h"
#include "log/log.h"
#include "log/logfmt.h"

enum {
    PIPE_DEPTH = 4,
    /* The first piece of a synchronous entry point is a synchronous copy
     * (transfer_sync): nothing overlaps it, so it is kept small. */
    FIRST_SYNC_PIECE = 256 << 10,
    SYNC_AHEAD = 3, /* chunks a synchronous H2D stages ahead of its transfers (run_h2d) */
};

/* Bytes of the next piece: a whole chunk, or FIRST_SYNC_PIECE for the
 * synchronous first piece. */
static size_t piece_limit(const struct ts_copy_req *q, const struct ts_copy_stats *st)
{
    size_t chunk = ts_staging_chunk();
    return q->sync && st->chunks == 0 && chunk > FIRST_SYNC_PIECE ? FIRST_SYNC_PIECE : chunk;
}

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

static bool next_piece(const struct ts_copy_req *q, const struct piece *done, struct piece *p, size_t chunk)
{
    if (is_1d(q)) {
        size_t off = done->off + done->len;
        if (off >= q->width)
            return false;
        *p = (struct piece){ .off = off, .len = q->width - off < chunk ? q->width - off : chunk };
    } else {
        size_t row = done->row + done->rows, per = chunk / q->width ? chunk / q->width : 1;
        if (row >= q->height)
            return false;
        *p = (struct piece){ .row = row, .rows = q->height - row < per ? q->height - row : per };
        p->len = p->rows * q->width;
    }
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

/* The first chunk of a synchronous entry point goes through the driver's
 * synchronous copy (from/to staging, so pinned) on the same stream: it is
 * ordered after the stream's earlier work and waits for it, which is the
 * documented "stream sync before the copy", and it is refused exactly when
 * the original call would be (a capture that forbids synchronous calls; the
 * capture is then invalidated by it as by the original), in which case the
 * whole copy passes through and reports what CUDA reports. */
static CUresult transfer_sync(const struct ts_copy_req *q, const struct piece *p, void *staging, bool h2d)
{
    bool pt = q->stream == CU_STREAM_PER_THREAD;
    if (!is_1d(q)) {
        ts_cuda_fn_cuMemcpy2D_v2 copy2d = pt ? TS_CUDA_REAL(cuMemcpy2D_v2_ptds) : TS_CUDA_REAL(cuMemcpy2D_v2);
        if (!copy2d)
            return CUDA_ERROR_NOT_SUPPORTED;
        CUDA_MEMCPY2D m = piece_2d(q, p, staging, h2d);
        return copy2d(&m);
    }
    if (h2d) {
        ts_cuda_fn_cuMemcpyHtoD_v2 htod =
            pt ? TS_CUDA_REAL(cuMemcpyHtoD_v2_ptds) : TS_CUDA_REAL(cuMemcpyHtoD_v2);
        return htod ? htod((CUdeviceptr)(uintptr_t)(q->dst + p->off), staging, p->len)
                    : CUDA_ERROR_NOT_SUPPORTED;
    }
    ts_cuda_fn_cuMemcpyDtoH_v2 dtoh = pt ? TS_CUDA_REAL(cuMemcpyDtoH_v2_ptds) : TS_CUDA_REAL(cuMemcpyDtoH_v2);
    return dtoh ? dtoh(staging, (CUdeviceptr)(uintptr_t)(q->src + p->off), p->len) : CUDA_ERROR_NOT_SUPPORTED;
}

/* H2D.  Chunk i is staged while earlier chunks transfer.  A synchronous
 * entry point's first piece drained its stream (transfer_sync), so from then
 * on only its own transfers are queued there: staging more than SYNC_AHEAD
 * chunks ahead of them gains nothing and leaves a backlog that transfers
 * alone after the call (the next synchronous call waits for it with the CPU
 * idle).  So a synchronous copy cycles through SYNC_AHEAD buffers of its
 * own, waiting for the oldest transfer; an asynchronous one stages as far
 * ahead as the ring allows (its stream may hold earlier work for long). */
static void run_h2d(const struct ts_copy_req *q, CUcontext ctx, struct piece *done, struct ts_copy_stats *st)
{
    struct ts_staging_buf *held[SYNC_AHEAD];
    int n_held = 0, oldest = 0;
    struct piece p;
    while (next_piece(q, done, &p, piece_limit(q, st))) {
        bool first_sync = q->sync && st->chunks == 0, own = q->sync && !first_sync;
        struct ts_staging_buf *b;
        bool in_held = own && n_held == SYNC_AHEAD;
        if (in_held) {
            b = held[oldest];
            uint64_t t0 = ts_now_ns();
            CUresult r = ts_staging_wait(b);
            st->staging_wait_ns += ts_now_ns() - t0;
            if (r != CUDA_SUCCESS)
                break; /* a failed device: the original call reports it */
            oldest = (oldest + 1) % SYNC_AHEAD;
        } else {
            b = ts_staging_acquire(ctx, &st->staging_wait_ns);
            if (!b)
                break;
        }
        char *buf = ts_staging_ptr(b);
        if (is_1d(q))
            ts_copy_pool_memcpy(buf, q->src + p.off, p.len);
        else
            pack_rows(buf, q->src + p.row * q->spitch, q->spitch, q->width, p.rows);
        if (first_sync) {
            CUresult r = transfer_sync(q, &p, buf, true);
            ts_staging_release(b); /* the copy is complete: nothing reads it any more */
            if (r != CUDA_SUCCESS)
                break;
        } else {
            if (queue_transfer(q, &p, buf, true) != CUDA_SUCCESS) {
                if (!in_held)
                    ts_staging_release(b); /* nothing queued reads it */
                break;
            }
            if (ts_staging_record(b, q->stream) != CUDA_SUCCESS) {
                /* Cannot track this transfer alone: wait for the stream. */
                ts_cuda_fn_cuStreamSynchronize sync = TS_CUDA_REAL(cuStreamSynchronize);
                if (sync)
                    sync(q->stream);
            }
            if (own && !in_held)
                held[n_held++] = b;
            else if (!own)
                ts_staging_release(b);
        }
        *done = p;
        st->bytes += p.len;
        st->chunks++;
    }
    for (int i = 0; i < n_held; i++)
        ts_staging_release(held[i]); /* reusable once their events complete */
}

/* A device->host piece landed in staging buffer b: to the host, b released,
 * the piece counted as done. */
static void d2h_deliver(const struct ts_copy_req *q, struct ts_staging_buf *b, const struct piece *p,
                        struct piece *done, struct ts_copy_stats *st)
{
    const char *buf = ts_staging_ptr(b);
    if (is_1d(q))
        ts_copy_pool_memcpy_out(q->dst + p->off, buf, p->len);
    else
        unpack_rows(q->dst + p->row * q->dpitch, buf, q->dpitch, q->width, p->rows);
    ts_staging_release(b);
    *done = *p;
    st->bytes += p->len;
    st->chunks++;
}

/* A synchronous copy's first piece, carried synchronously (its size is
 * piece_limit's); false when nothing could be done. */
static bool d2h_first_sync(const struct ts_copy_req *q, CUcontext ctx, struct piece *done,
                           struct ts_copy_stats *st)
{
    struct piece p;
    if (!next_piece(q, done, &p, piece_limit(q, st)))
        return false;
    struct ts_staging_buf *b = ts_staging_acquire(ctx, &st->staging_wait_ns);
    if (!b)
        return false;
    if (transfer_sync(q, &p, ts_staging_ptr(b), false) != CUDA_SUCCESS) {
        ts_staging_release(b);
        return false;
    }
    d2h_deliver(q, b, &p, done, st);
    return true;
}

static void run_d2h(const struct ts_copy_req *q, CUcontext ctx, struct piece *done, struct ts_copy_stats *st)
{
    struct {
        struct ts_staging_buf *b;
        struct piece p;
    } fifo[PIPE_DEPTH];
    int head = 0, count = 0;
    struct piece issued = *done;
    bool stop = false;
    if (q->sync) {
        if (!d2h_first_sync(q, ctx, done, st))
            return;
        issued = *done;
    }
    for (;;) {
        struct piece p;
        while (!stop && count < PIPE_DEPTH && next_piece(q, &issued, &p, ts_staging_chunk())) {
            struct ts_staging_buf *b = ts_staging_acquire(ctx, &st->staging_wait_ns);
            if (!b) {
                stop = true;
                break;
            }
            if (queue_transfer(q, &p, ts_staging_ptr(b), false) != CUDA_SUCCESS) {
                ts_staging_release(b);
                stop = true;
                break;
            }
            if (ts_staging_record(b, q->stream) != CUDA_SUCCESS) {
                /* Cannot wait for this chunk alone: drain the stream. */
                ts_cuda_fn_cuStreamSynchronize sync = TS_CUDA_REAL(cuStreamSynchronize);
                if (!sync || sync(q->stream) != CUDA_SUCCESS) {
                    ts_staging_release(b);
                    stop = true;
                    break;
                }
            }
            fifo[(head + count) % PIPE_DEPTH].b = b;
            fifo[(head + count) % PIPE_DEPTH].p = p;
            count++;
            issued = p;
        }
        if (count == 0)
            return;
        struct ts_staging_buf *b = fifo[head].b;
        struct piece cur = fifo[head].p;
        head = (head + 1) % PIPE_DEPTH;
        count--;
        if (ts_staging_wait(b) != CUDA_SUCCESS) {
            /* The transfer failed (a device error): nothing after `done` may
             * be claimed; the original call redoes it and reports the error.
             * Later buffers are released once their events complete. */
            ts_staging_release(b);
            while (count > 0) {
                ts_staging_release(fifo[head].b);
                head = (head + 1) % PIPE_DEPTH;
                count--;
            }
            return;
        }
        d2h_deliver(q, b, &cur, done, st);
    }
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
     * (transfer_sync): the stream sync before the copy, and the capture rules
     * of synchronous calls. */
    if (go) {
        if (dir == TS_CE_H2D)
            run_h2d(q, ctx, &done, st);
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
