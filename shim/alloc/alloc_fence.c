/* alloc_fence.c: when a freed block is safe to reuse.
 * Every free gets a sequence number and waits in a FIFO.  A batch of fences
 * (recorded after the frees it covers, on the streams they were on: a
 * stream-ordered free waits for its own stream, a synchronous one for every
 * registered stream) makes every free up to its sequence safe once all its
 * fences are done; safe blocks go to the free index.  At most one batch is
 * recorded before the previous ones complete, so fence work follows the
 * device's pace, not the call rate.  A
 * stream-ordered free also sits in its stream's own index, from which an
 * allocation on the same stream may take it at once (stream order protects
 * it).  Nothing here touches a stream marked capturing.
 *
 * Epochs (thread-cached synchronous frees, which are in no FIFO): every check
 * that may prove frees safe first bumps p->ep.fence_epoch (seq_cst, so every
 * free stamped with an older epoch happened before the check's first query);
 * when the check proves everything before it safe, safe_epoch becomes its
 * epoch.  A thread-cached block is reusable iff its stamp < safe_epoch. */
#include <stdlib.h>
#include "alloc/alloc_internal.h"

static uint64_t epoch_begin(ts_pool *p)
{
    return __atomic_add_fetch(&p->ep.fence_epoch, 1, __ATOMIC_SEQ_CST);
}

/* Under the lock (the only writer). */
static void epoch_safe(ts_pool *p, uint64_t e)
{
    if (e > __atomic_load_n(&p->ep.safe_epoch, __ATOMIC_RELAXED))
        __atomic_store_n(&p->ep.safe_epoch, e, __ATOMIC_RELEASE);
}

ts_stream_ent *ts_fence_stream(ts_pool *p, uint64_t stream, bool create)
{
    for (int i = 0; i < p->nstreams; i++)
        if (p->streams[i].stream == stream)
            return &p->streams[i];
    if (!create || p->nstreams == TS_MAX_STREAMS)
        return NULL;
    ts_stream_ent *e = &p->streams[p->nstreams++];
    e->stream = stream;
    e->capturing = false;
    e->pending = NULL;
    e->free_seq = 0;
    return e;
}

static void fifo_unlink(ts_pool *p, ts_block *b)
{
    if (!b->qnext)
        p->q_tail = b->qprev;
    TS_LIST_UNLINK(&p->q_head, b, qprev, qnext);
    b->qprev = b->qnext = NULL;
}

/* Links b into the FIFO after prev (first when prev is NULL). */
static void fifo_link_after(ts_pool *p, ts_block *prev, ts_block *b)
{
    b->qprev = prev;
    b->qnext = prev ? prev->qnext : p->q_head;
    if (b->qnext)
        b->qnext->qprev = b;
    else
        p->q_tail = b;
    if (prev)
        prev->qnext = b;
    else
        p->q_head = b;
}

void ts_fence_pend(ts_pool *p, ts_block *b, uint64_t stream, bool stream_ordered)
{
    __atomic_store_n(&b->state, TS_B_PENDING, __ATOMIC_RELAXED);
    b->seq = ++p->seq;
    b->stream = stream;
    fifo_link_after(p, p->q_tail, b);
    p->pending_bytes += b->size;
    b->index = NULL;
    ts_stream_ent *e = stream_ordered ? ts_fence_stream(p, stream, true) : NULL;
    if (e)
        e->free_seq = b->seq;
    else
        p->sync_free_seq = b->seq; /* an unregistered stream too: every stream's fence covers it */
    if (stream_ordered) {
        if (e && !e->pending && (e->pending = malloc(sizeof *e->pending)))
            ts_index_init(e->pending);
        if (e && e->pending)
            ts_index_insert(e->pending, b);
    }
}

/* A PENDING block cut to size and left out of its stream index ix; the
 * remainder (returned, or NULL) keeps b's place in the FIFO and ix. */
static ts_block *cut_pending(ts_pool *p, ts_block *b, ts_index *ix, uint64_t size)
{
    ts_index_remove(ix, b);
    ts_block *r = ts_block_split(&p->slab, b, size);
    if (r) {
        fifo_link_after(p, b, r);
        ts_index_insert(ix, r);
    }
    return r;
}

/* A PENDING block out of every index leaves the FIFO. */
static void leave_fifo(ts_pool *p, ts_block *b)
{
    fifo_unlink(p, b);
    p->pending_bytes -= b->size;
}

ts_block *ts_fence_split_pending(ts_pool *p, ts_block *b, uint64_t size)
{
    ts_index *ix = b->index;
    ts_block *r = cut_pending(p, b, ix, size);
    ts_index_insert(ix, b);
    return r;
}

void ts_fence_claim(ts_pool *p, ts_block *b)
{
    ts_index_remove(b->index, b);
    leave_fifo(p, b);
}

bool ts_fence_pending_on(ts_pool *p, const ts_block *b, uint64_t stream)
{
    if (__atomic_load_n(&b->state, __ATOMIC_RELAXED) != TS_B_PENDING || !b->index)
        return false;
    ts_stream_ent *e = ts_fence_stream(p, stream, false);
    return e && !e->capturing && b->index == e->pending;
}

void ts_fence_take_pending(ts_pool *p, ts_block *b, uint64_t size)
{
    cut_pending(p, b, b->index, size);
    leave_fifo(p, b);
}

static void drain(ts_pool *p)
{
    while (p->q_head && p->q_head->seq <= p->safe_seq) {
        ts_block *b = p->q_head;
        fifo_unlink(p, b);
        if (b->index)
            ts_index_remove(b->index, b);
        p->pending_bytes -= b->size;
        ts_block_release_freed(p, b);
    }
}

static ts_fence_batch *batch_at(ts_pool *p, int k)
{
    return &p->batches[(p->batch_first + k) % TS_MAX_BATCHES];
}

static void batch_pop(ts_pool *p)
{
    ts_fence_batch *bt = batch_at(p, 0);
    for (int i = 0; i < bt->nfences; i++)
        if (bt->fences[i]) {
            p->prov.fence_release(p->prov.ctx, bt->fences[i]);
            bt->fences[i] = 0;
        }
    if (bt->seq > p->safe_seq)
        p->safe_seq = bt->seq;
    epoch_safe(p, bt->epoch);
    p->batch_first = (p->batch_first + 1) % TS_MAX_BATCHES;
    p->batch_count--;
}

/* Stream i has work a check of the frees after seq `after` must wait for:
 * every stream when `all` (a synchronous free among them, or the
 * thread-cached ones), else those with a stream-ordered free among them. */
static bool stream_in(const ts_pool *p, int i, uint64_t after, bool all)
{
    return all || p->streams[i].free_seq > after;
}

/* Records fences covering all frees so far (those of the FIFO and, with
 * `epochs`, the thread-cached ones) on the streams they wait for. */
static bool batch_record(ts_pool *p, bool epochs)
{
    if (p->batch_count && batch_at(p, p->batch_count - 1)->seq >= p->seq && !epochs)
        return true;
    if (p->ncapturing || p->batch_count == TS_MAX_BATCHES)
        return false;
    ts_fence_batch *bt = batch_at(p, p->batch_count);
    uint64_t after = p->fenced_seq > p->safe_seq ? p->fenced_seq : p->safe_seq;
    bool all = epochs || p->sync_free_seq > after;
    bt->seq = p->seq;
    bt->epoch = all ? epoch_begin(p) : 0; /* over every stream: the thread-cached frees before it too */
    bt->nfences = 0;
    for (int i = 0; i < p->nstreams; i++) {
        if (!stream_in(p, i, after, all))
            continue;
        uint64_t f = 0;
        p->fence_records++;
        if (TS_FCALL(p, fence_record, p->streams[i].stream, &f)) {
            for (int k = 0; k < bt->nfences; k++)
                p->prov.fence_release(p->prov.ctx, bt->fences[k]);
            bt->nfences = 0;
            return false;
        }
        bt->streams[bt->nfences] = p->streams[i].stream;
        bt->done[bt->nfences] = 0;
        bt->fences[bt->nfences++] = f;
    }
    p->batch_count++;
    p->fenced_seq = bt->seq;
    return true;
}

static bool stream_capturing(ts_pool *p, uint64_t stream)
{
    ts_stream_ent *e = ts_fence_stream(p, stream, false);
    return e && e->capturing;
}

/* One batch's fences, querying (wait = false) or waiting. True when done. */
static bool batch_complete(ts_pool *p, ts_fence_batch *bt, bool wait)
{
    for (int i = 0; i < bt->nfences; i++) {
        if (bt->done[i])
            continue;
        if (stream_capturing(p, bt->streams[i]))
            return false;
        int rc;
        if (wait) {
            p->fence_waits++;
            rc = TS_FCALL(p, fence_wait, bt->fences[i]) == TS_PROV_OK ? TS_FENCE_DONE : -1;
        } else {
            rc = TS_FCALL(p, fence_query, bt->fences[i]);
        }
        if (rc != TS_FENCE_DONE)
            return false; /* pending, or an error: never assume done */
        bt->done[i] = 1;
        p->prov.fence_release(p->prov.ctx, bt->fences[i]);
        bt->fences[i] = 0;
    }
    return true;
}

/* The streams the pending frees wait for (every registered one when `all`)
 * idle now, after the frees so far: they are all safe (no queued work can
 * still touch them).  Never asks a capturing stream. */
static bool streams_idle(ts_pool *p, bool all)
{
    if (!p->prov.stream_idle || p->ncapturing)
        return false;
    for (int i = 0; i < p->nstreams; i++) {
        if (!stream_in(p, i, p->safe_seq, all))
            continue;
        p->idle_queries++;
        if (TS_FCALL(p, stream_idle, p->streams[i].stream) != TS_FENCE_DONE)
            return false;
    }
    return true;
}

/* Every stream idle since epoch e began: every free so far is safe, the
 * outstanding batches' fences are dropped and the FIFO drains. */
static void all_safe(ts_pool *p, uint64_t e)
{
    while (p->batch_count)
        batch_pop(p);
    epoch_safe(p, e);
    p->safe_seq = p->seq;
    drain(p);
}

void ts_fence_poll(ts_pool *p)
{
    if (!p->q_head)
        return;
    if (p->nstreams == 0 && !p->batch_count) {
        /* no stream was ever used: no queued work can touch anything */
        epoch_safe(p, epoch_begin(p));
        p->safe_seq = p->seq;
        drain(p);
        return;
    }
    while (p->batch_count && batch_complete(p, batch_at(p, 0), false))
        batch_pop(p);
    bool all = p->sync_free_seq > p->safe_seq;
    uint64_t e = p->q_head && all ? epoch_begin(p) : 0;
    if (p->q_head && streams_idle(p, all)) {
        if (all) {
            all_safe(p, e); /* the outstanding batches cover less than this */
            return;
        }
        p->safe_seq = p->seq; /* the FIFO's frees, not the thread-cached ones */
        drain(p);
        return;
    }
    if (!p->batch_count && p->q_head && batch_record(p, false) && batch_complete(p, batch_at(p, 0), false))
        batch_pop(p);
    drain(p);
}

bool ts_fence_sync(ts_pool *p)
{
    ts_fence_poll(p);
    if (!p->q_head && !p->batch_count)
        return true;
    if (p->nstreams == 0 && !p->batch_count) {
        epoch_safe(p, epoch_begin(p));
        p->safe_seq = p->seq;
        drain(p);
        return true;
    }
    for (int round = 0; round < 2 && p->q_head; round++) {
        if (p->ncapturing)
            return false;
        if (!batch_record(p, false) && !p->batch_count)
            return false;
        while (p->batch_count) {
            if (!batch_complete(p, batch_at(p, 0), true)) {
                drain(p);
                return false;
            }
            batch_pop(p);
        }
        drain(p);
    }
    return !p->q_head;
}

void ts_fence_refresh(ts_pool *p)
{
    uint64_t before = __atomic_load_n(&p->ep.safe_epoch, __ATOMIC_RELAXED);
    if (p->q_head)
        ts_fence_poll(p);
    else
        while (p->batch_count && batch_complete(p, batch_at(p, 0), false))
            batch_pop(p);
    if (__atomic_load_n(&p->ep.safe_epoch, __ATOMIC_RELAXED) != before || p->ncapturing)
        return;
    uint64_t e = epoch_begin(p);
    if ((p->nstreams == 0 && !p->batch_count) || streams_idle(p, true)) {
        all_safe(p, e);
        return;
    }
    /* busy: fences for a later check (one outstanding batch at a time),
     * asked once at once (work short enough may be over already) */
    if (!p->batch_count && batch_record(p, true) && batch_complete(p, batch_at(p, 0), false)) {
        batch_pop(p);
        drain(p);
    }
}

void ts_fence_fini(ts_pool *p)
{
    while (p->batch_count)
        batch_pop(p);
    for (int i = 0; i < p->nstreams; i++) {
        free(p->streams[i].pending);
        p->streams[i].pending = NULL;
    }
}

void ts_fence_free_locked(ts_pool *p, ts_block *b, uint64_t stream, bool stream_ordered)
{
    p->held -= b->size;
    p->live_blocks--;
    p->frees++;
    if (p->cfg.mode == TS_ALLOC_OFF) {
        TS_PCALL(p, seg_free, b->addr);
        p->reserved -= b->size;
        ts_block_delete(&p->slab, b);
        return;
    }
    if (b->kind == TS_KIND_PLANNED && p->plan)
        ts_plan_on_free(p, b);
    ts_fence_stream(p, stream, true);
    ts_fence_pend(p, b, stream, stream_ordered);
    if (p->cfg.mode == TS_ALLOC_EXPANDABLE)
        ts_seg_pages_put(p, b->addr, b->size, b->seq);
}

void ts_fence_free_cached_locked(ts_pool *p, ts_block *b, bool sync)
{
    ts_map_take(&p->map, b->addr);
    ts_fence_free_locked(p, b, b->stream, !sync);
}
