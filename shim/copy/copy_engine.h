/* copy_engine.h: the pinned copy engine.
 *
 * A host<->device copy whose host side is pageable and whose size is at
 * least TRAINSHIM_PINNED_COPY_MIN is carried out through a ring of pinned
 * staging buffers (shim/copy/staging.c), in pieces of at most
 * TRAINSHIM_COPY_CHUNK sized by ts_copy_plan_piece (small first and last
 * pieces, large ones between), each piece an asynchronous copy on the stream
 * the original call would have used.
 *
 * Contract kept (docs/cuda-semantics section 2):
 *   H2D  the call returns once the whole source is staged (the caller may
 *        reuse its buffer); the transfers stay ordered on the stream, so
 *        kernels before and after see the same order.  A synchronous entry
 *        point (cudaMemcpy, cuMemcpyHtoD) first synchronizes its stream.
 *   D2H  the call returns only when the destination holds the data, for the
 *        Async entry points too (programs read it right away).
 * Everything the engine does not handle is left to the original call: the
 * engine reports how much it did and the hook passes the rest through, so an
 * invalid argument reaches the real function and yields its own error.
 *
 * The engine uses only driver calls (CUstream handles are the runtime's
 * cudaStream_t), all made inside the caller's ts_enter()/ts_leave(). */
#ifndef TRAINSHIM_COPY_ENGINE_H
#define TRAINSHIM_COPY_ENGINE_H
#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One copy as the hook describes it.  1D copies have height 1 and pitches
 * equal to width.  dst/src are host or device addresses (unified). */
struct ts_copy_req {
    char *dst;
    const char *src;
    size_t width, height, dpitch, spitch;
    CUstream stream; /* already resolved: CU_STREAM_LEGACY / CU_STREAM_PER_THREAD / a stream */
    bool sync;       /* a non-Async entry point */
};

/* What a converted copy did, for the log and the report. */
struct ts_copy_stats {
    uint64_t bytes; /* bytes moved through staging */
    uint32_t chunks;
    uint64_t staging_wait_ns; /* time spent waiting for a staging buffer */
    int dir;                  /* enum ts_copy_engine_dir of the run */
    bool sync;
};

/* Direction decided by the hook (or by ts_copy_classify for unified kinds). */
enum ts_copy_engine_dir { TS_CE_NONE = 0, TS_CE_H2D = 1, TS_CE_D2H = 2 };

/* Cheap pre-check: conversion on, shim active, size over the threshold. */
bool ts_copy_wanted(uint64_t bytes);

/* Decides whether req can be converted in direction dir: the host side is
 * pageable, the device side is device memory (not managed) covering the whole
 * extent, a context is current, the stream is not capturing.  For
 * TS_CE_NONE (cudaMemcpyDefault / cuMemcpy) the direction is found from the
 * pointers.  Returns the direction to use, or TS_CE_NONE: pass through. */
enum ts_copy_engine_dir ts_copy_classify(const struct ts_copy_req *req, enum ts_copy_engine_dir dir);

/* Performs rows [0, k) of req through staging and returns k (0..height).
 * For 1D copies (height 1) it works on bytes instead: *done_bytes says how
 * many leading bytes were handled.  The caller passes the remainder (rows k..,
 * or bytes *done_bytes..) through the original call, which is ordered after
 * the engine's work on the same stream.  On return, H2D work is staged and
 * queued, D2H work is complete in the destination. */
void ts_copy_run(const struct ts_copy_req *req, enum ts_copy_engine_dir dir, size_t *done_rows,
                 size_t *done_bytes, struct ts_copy_stats *stats);

/* Records a converted copy (st->chunks > 0): process totals and a
 * TS_REC_COPY_CONVERT record; host_blocked_ns is the whole call's time.  The
 * hook calls it after its TS_REC_COPY, inside its ts_enter bracket. */
void ts_copy_note(int api, const struct ts_copy_stats *st, uint64_t host_blocked_ns);
/* Process totals of converted copies (tests, bench). */
void ts_copy_totals(uint64_t *bytes, uint64_t *chunks, uint64_t *staging_wait_ns);

/* ---- piece sizes (shim/copy/copy_plan.c) ------------------------------------- */
/* Bytes of the piece of a copy of `total` bytes in direction dir (TS_CE_H2D
 * or TS_CE_D2H) that starts after `done` bytes, with pieces of at most
 * `largest` bytes: pieces grow from a small first one (H2D: at most
 * doubling after the second; D2H: fourfold), stay at `largest`, and shrink
 * again toward the end; taken one after another they cover [0, total)
 * exactly.  0 when done >= total. */
size_t ts_copy_plan_piece(enum ts_copy_engine_dir dir, size_t total, size_t done, size_t largest);

/* ---- staging ring (shim/copy/staging.c) -------------------------------------- */
struct ts_staging_buf;
/* A free staging buffer of ts_staging_chunk() bytes whose last transfer has
 * completed, with an event usable in the current context, or NULL when the
 * ring is exhausted (at its cap and nothing will come free) or cannot be
 * allocated.  *wait_ns accumulates time spent waiting for one. */
struct ts_staging_buf *ts_staging_acquire(CUcontext ctx, uint64_t *wait_ns);
void *ts_staging_ptr(const struct ts_staging_buf *b);
size_t ts_staging_chunk(void);
/* Records the buffer's event on stream after the transfer that uses it was
 * queued; returns the CUresult of the record. */
CUresult ts_staging_record(struct ts_staging_buf *b, CUstream stream);
/* Waits for the buffer's recorded transfer (D2H: before reading it). */
CUresult ts_staging_wait(struct ts_staging_buf *b);
/* Back to the ring: reusable once its recorded event has completed. */
void ts_staging_release(struct ts_staging_buf *b);
/* Bytes of pinned staging memory allocated (tests, bench). */
uint64_t ts_staging_bytes(void);

/* ---- host pointer classification (shim/copy/hostclass.c) --------------------- */
enum ts_host_class { TS_HC_PAGEABLE, TS_HC_PINNED, TS_HC_DEVICE, TS_HC_MANAGED };
/* Class of p; ranges the shim allocated pinned are answered from a table,
 * other pointers with one driver query. */
enum ts_host_class ts_hostclass(const void *p);
/* True if [p, p+n) lies inside one device (non-managed) allocation. */
bool ts_hostclass_device_range(const void *p, size_t n);
/* Asks the driver (not the table) whether p is still pinned memory: blocks
 * the shim keeps die with their context (cudaDeviceReset). */
bool ts_hostclass_driver_pinned(const void *p);
/* The shim saw [p, p+n) become / stop being pinned host memory. */
void ts_hostclass_add(const void *p, size_t n);
void ts_hostclass_remove(const void *p);

/* ---- helper threads for big host memcpy (shim/copy/copy_pool.c) -------------- */
/* memcpy(dst, src, n), split over TRAINSHIM_COPY_THREADS helpers plus the
 * caller when n is large. */
void ts_copy_pool_memcpy(void *dst, const void *src, size_t n);
/* The same with non-temporal stores to dst (copy-out of a D2H chunk into the
 * program's buffer: large, not re-read by the engine). */
void ts_copy_pool_memcpy_out(void *dst, const void *src, size_t n);
#endif
