/* pool_check.c: ts_pool_check, the full consistency check the tests run
 * after every operation: blocks tile their segments, no two free neighbours
 * are left unmerged, each state is where it must be (index, FIFO, map),
 * byte accounting is exact, and (expandable) every page's references match
 * the live blocks over it, a page is mapped exactly when referenced or
 * idle in the LRU, a shadow and its page name each other and one handle,
 * and a free block lies over mapped pages only (index) or over whole
 * unmapped pages only (uindex).  Call it with no other thread inside the pool. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "alloc/alloc_internal.h"

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); rc = -1; goto out; } while (0)

static bool in_list(ts_index *ix, ts_block *b)
{
    int fl, sl;
    ts_index_class(b->size, &fl, &sl);
    for (ts_block *x = ix->heads[fl][sl]; x; x = x->fnext)
        if (x == b)
            return true;
    return false;
}

static int check_index(ts_index *ix, bool pending, char *err, size_t errlen)
{
    int rc = 0;
    uint64_t n = 0, bytes = 0;
    for (int fl = 0; fl < TS_IDX_FL; fl++) {
        if (!!(ix->fl_map & (1ull << fl)) != !!ix->sl_map[fl])
            FAIL("index fl bitmap %d wrong", fl);
        for (int sl = 0; sl < TS_IDX_SL; sl++) {
            if (!!(ix->sl_map[fl] & (1u << sl)) != !!ix->heads[fl][sl])
                FAIL("index sl bitmap %d/%d wrong", fl, sl);
            for (ts_block *b = ix->heads[fl][sl]; b; b = b->fnext) {
                int f2, s2;
                ts_index_class(b->size, &f2, &s2);
                if (f2 != fl || s2 != sl || b->index != ix)
                    FAIL("block %#lx size %lu in wrong class/index", (unsigned long)b->addr, (unsigned long)b->size);
                if (__atomic_load_n(&b->state, __ATOMIC_RELAXED) != (pending ? TS_B_PENDING : TS_B_FREE))
                    FAIL("block %#lx in index with state %d", (unsigned long)b->addr, __atomic_load_n(&b->state, __ATOMIC_RELAXED));
                n++;
                bytes += b->size;
            }
        }
    }
    if (n != ix->count || bytes != ix->bytes)
        FAIL("index count/bytes %lu/%lu != %lu/%lu", (unsigned long)ix->count,
             (unsigned long)ix->bytes, (unsigned long)n, (unsigned long)bytes);
out:
    return rc;
}

int ts_pool_check(ts_pool *p, char *err, size_t errlen)
{
    int rc = 0;
    uint32_t *refs = NULL;
    pthread_mutex_lock(&p->lock);
    uint64_t held = 0, pending = 0, nlive = 0, nfree[TS_NKINDS] = {0}, nufree[TS_NKINDS] = {0}, nkept = 0, mapcount = 0, segbytes = 0;
    for (int i = 0; i < TS_MAP_SHARDS; i++)
        mapcount += p->map.shards[i].count;
    for (int k = 0; k < TS_NKINDS; k++)
        if ((rc = check_index(&p->index[k], false, err, errlen))
            || (rc = check_index(&p->uindex[k], false, err, errlen)))
            goto out;
    if ((rc = check_index(&p->kindex, false, err, errlen)))
        goto out;
    for (int i = 0; i < p->nstreams; i++)
        if (p->streams[i].pending && (rc = check_index(p->streams[i].pending, true, err, errlen)))
            goto out;
    if (p->cfg.mode == TS_ALLOC_EXPANDABLE && !(refs = calloc(p->npages, sizeof *refs)))
        FAIL("out of memory in check");
    /* walk every segment */
    ts_segment *segs[TS_NKINDS] = {&p->arena[0], &p->arena[1], &p->arena[2]};
    int nseg = p->cfg.mode == TS_ALLOC_EXPANDABLE ? TS_NKINDS : 0;
    ts_segment *s = p->cfg.mode == TS_ALLOC_CACHING ? p->segs : NULL;
    for (int si = 0;; si++) {
        ts_segment *seg;
        if (si < nseg)
            seg = segs[si];
        else if (s) {
            seg = s;
            s = s->snext;
            segbytes += seg->size;
        } else
            break;
        uint64_t at = seg->base;
        ts_block *prev = NULL;
        for (ts_block *b = seg->first; b; prev = b, b = b->next) {
            if (b->prev != prev || b->seg != seg || b->addr != at)
                FAIL("segment %#lx: broken tiling at %#lx", (unsigned long)seg->base, (unsigned long)at);
            if (!b->size || b->size % TS_ALLOC_ALIGN || b->addr % TS_ALLOC_ALIGN)
                FAIL("block %#lx size %lu misaligned", (unsigned long)b->addr, (unsigned long)b->size);
            if (b->kind != seg->kind)
                FAIL("block %#lx kind %d in segment kind %d", (unsigned long)b->addr, b->kind, seg->kind);
            switch (__atomic_load_n(&b->state, __ATOMIC_RELAXED)) {
            case TS_B_FREE:
                if ((b->index != &p->index[b->kind] && b->index != &p->uindex[b->kind] && b->index != &p->kindex)
                    || !in_list(b->index, b))
                    FAIL("free block %#lx not in its index", (unsigned long)b->addr);
                if (prev && __atomic_load_n(&prev->state, __ATOMIC_RELAXED) == TS_B_FREE && prev->index == b->index
                    && b->index != &p->kindex)
                    FAIL("free blocks %#lx and %#lx not merged", (unsigned long)prev->addr, (unsigned long)b->addr);
                if (p->cfg.mode == TS_ALLOC_EXPANDABLE) {
                    bool um = b->index == &p->uindex[b->kind];
                    uint64_t f = (b->addr - p->va_base) / p->gran;
                    uint64_t l = (b->addr + b->size - 1 - p->va_base) / p->gran;
                    if (um && ((b->addr - p->va_base) % p->gran || b->size % p->gran))
                        FAIL("unmapped free block %#lx not page-aligned", (unsigned long)b->addr);
                    for (uint64_t i = f; i <= l; i++)
                        if (p->pages[i].mapped == um)
                            FAIL("free block %#lx (%s) over page %lu %s", (unsigned long)b->addr,
                                 um ? "unmapped" : "mapped", (unsigned long)i, um ? "mapped" : "unmapped");
                }
                if (b->index == &p->kindex)
                    nkept++;
                else if (b->index == &p->uindex[b->kind])
                    nufree[b->kind]++;
                else
                    nfree[b->kind]++;
                break;
            case TS_B_PENDING:
                pending += b->size;
                if (b->index && !in_list(b->index, b))
                    FAIL("pending block %#lx not in its stream index", (unsigned long)b->addr);
                break;
            case TS_B_LIVE:
            case TS_B_TCACHED:
                if (ts_map_get(&p->map, b->addr) != b)
                    FAIL("live block %#lx not in the map", (unsigned long)b->addr);
                held += b->size;
                nlive++;
                if (refs) {
                    uint64_t f = (b->addr - p->va_base) / p->gran;
                    uint64_t l = (b->addr + b->size - 1 - p->va_base) / p->gran;
                    for (uint64_t i = f; i <= l; i++)
                        refs[i]++;
                }
                break;
            default:
                FAIL("block %#lx bad state %d", (unsigned long)b->addr, __atomic_load_n(&b->state, __ATOMIC_RELAXED));
            }
            at += b->size;
        }
        if (at != seg->base + seg->size)
            FAIL("segment %#lx not covered by its blocks", (unsigned long)seg->base);
    }
    if (p->cfg.mode == TS_ALLOC_OFF) {
        held = p->held;   /* off-mode blocks have no segment; the map is the truth */
        nlive = mapcount;
        if (p->reserved != p->held)
            FAIL("off mode: reserved %lu != allocated %lu", (unsigned long)p->reserved, (unsigned long)p->held);
    }
    if (held != p->held)
        FAIL("held bytes %lu, blocks say %lu", (unsigned long)p->held, (unsigned long)held);
    if (nlive != mapcount || nlive != p->live_blocks)
        FAIL("live blocks %lu, map %lu, counter %lu", (unsigned long)nlive, (unsigned long)mapcount,
             (unsigned long)p->live_blocks);
    if (pending != p->pending_bytes)
        FAIL("pending bytes %lu, blocks say %lu", (unsigned long)p->pending_bytes, (unsigned long)pending);
    for (int k = 0; k < TS_NKINDS; k++) {
        if (p->cfg.mode != TS_ALLOC_OFF && nfree[k] != p->index[k].count)
            FAIL("index %d holds %lu blocks, segments %lu free", k, (unsigned long)p->index[k].count,
                 (unsigned long)nfree[k]);
        if (k == 0 && nkept != p->kindex.count)
            FAIL("kept index holds %lu blocks, segments %lu", (unsigned long)p->kindex.count, (unsigned long)nkept);
        if (nufree[k] != p->uindex[k].count)
            FAIL("unmapped index %d holds %lu blocks, segments %lu", k, (unsigned long)p->uindex[k].count,
                 (unsigned long)nufree[k]);
    }
    uint64_t qbytes = 0, lastseq = 0;
    for (ts_block *b = p->q_head; b; b = b->qnext) {
        if (__atomic_load_n(&b->state, __ATOMIC_RELAXED) != TS_B_PENDING)
            FAIL("FIFO block %#lx state %d", (unsigned long)b->addr, __atomic_load_n(&b->state, __ATOMIC_RELAXED));
        if (b->seq > p->seq)
            FAIL("FIFO block seq beyond the counter");
        if (b->seq > lastseq)
            lastseq = b->seq;
        qbytes += b->size;
    }
    if (qbytes != pending)
        FAIL("FIFO bytes %lu != pending %lu", (unsigned long)qbytes, (unsigned long)pending);
    if (p->cfg.mode == TS_ALLOC_CACHING && segbytes != p->reserved)
        FAIL("reserved %lu != segments %lu", (unsigned long)p->reserved, (unsigned long)segbytes);
    if (refs) {
        uint64_t mapped = 0, idle = 0;
        for (uint64_t i = 0; i < p->npages; i++) {
            ts_page *pg = &p->pages[i];
            if (pg->refs != refs[i])
                FAIL("page %lu refs %u, blocks say %u", (unsigned long)i, pg->refs, refs[i]);
            if (refs[i] && !pg->mapped)
                FAIL("page %lu under a live block is not mapped", (unsigned long)i);
            if (pg->fresh && (pg->refs || !pg->mapped))
                FAIL("page %lu in use without access set", (unsigned long)i);
            if (pg->shadow && (pg->mapped || pg->twin < 0))
                FAIL("shadow page %lu mapped or of no page", (unsigned long)i);
            if (pg->twin >= 0) {
                const ts_page *tw = &p->pages[pg->twin];
                if ((uint64_t)pg->twin >= p->npages || tw->twin != (int32_t)i || tw->shadow == pg->shadow
                    || tw->handle != pg->handle || !(pg->shadow ? tw->mapped : pg->mapped))
                    FAIL("page %lu and its shadow page %d disagree", (unsigned long)i, pg->twin);
            }
            mapped += pg->mapped;
        }
        int32_t prev = -1;
        for (int32_t i = p->idle_head; i >= 0; prev = i, i = p->pages[i].inext) {
            if (p->pages[i].iprev != prev || !p->pages[i].mapped || p->pages[i].refs)
                FAIL("idle list broken at page %d", i);
            if (++idle > p->npages)
                FAIL("idle list loops");
        }
        if (prev != p->idle_tail || idle != p->idle_count)
            FAIL("idle count %lu != %lu", (unsigned long)idle, (unsigned long)p->idle_count);
        uint64_t busy = 0;
        for (uint64_t i = 0; i < p->npages; i++)
            busy += p->pages[i].mapped && p->pages[i].refs;
        if (busy + idle != mapped || mapped != p->mapped_count)
            FAIL("mapped %lu = busy %lu + idle %lu? counter %lu", (unsigned long)mapped,
                 (unsigned long)busy, (unsigned long)idle, (unsigned long)p->mapped_count);
        if (mapped * p->gran != p->reserved)
            FAIL("reserved %lu != mapped pages %lu", (unsigned long)p->reserved, (unsigned long)mapped);
    }
    if (p->cfg.memory_limit && p->reserved > p->cfg.memory_limit)
        FAIL("reserved %lu over the limit %lu", (unsigned long)p->reserved, (unsigned long)p->cfg.memory_limit);
    if (p->peak_reserved < p->reserved || p->peak_held < p->held)
        FAIL("peaks below current values");
out:
    pthread_mutex_unlock(&p->lock);
    free(refs);
    return rc;
}
