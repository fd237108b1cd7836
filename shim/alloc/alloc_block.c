/* alloc_block.c: block records (from a slab, so no heap call per allocation),
 * splitting a block and merging free neighbours. */
#include <stdlib.h>
#include <string.h>
#include "alloc/alloc_internal.h"

#define SLAB_CHUNK 1024

ts_block *ts_block_new(ts_block_slab *s)
{
    if (!s->free_list) {
        if (s->nchunks == s->cap_chunks) {
            size_t cap = s->cap_chunks ? s->cap_chunks * 2 : 16;
            void **c = realloc(s->chunks, cap * sizeof *c);
            if (!c)
                return NULL;
            s->chunks = c;
            s->cap_chunks = cap;
        }
        ts_block *chunk = aligned_alloc(_Alignof(ts_block), SLAB_CHUNK * sizeof *chunk);
        if (!chunk)
            return NULL;
        s->chunks[s->nchunks++] = chunk;
        for (int i = SLAB_CHUNK - 1; i >= 0; i--) {
            chunk[i].next = s->free_list;
            s->free_list = &chunk[i];
        }
    }
    ts_block *b = s->free_list;
    s->free_list = b->next;
    memset(b, 0, sizeof *b);
    s->in_use++;
    return b;
}

void ts_block_delete(ts_block_slab *s, ts_block *b)
{
    __atomic_store_n(&b->state, 0, __ATOMIC_RELAXED);
    b->next = s->free_list;
    s->free_list = b;
    s->in_use--;
}

void ts_block_slab_destroy(ts_block_slab *s)
{
    for (size_t i = 0; i < s->nchunks; i++)
        free(s->chunks[i]);
    free(s->chunks);
    memset(s, 0, sizeof *s);
}

ts_block *ts_block_split(ts_block_slab *s, ts_block *b, uint64_t size)
{
    if (b->size - size < TS_ALLOC_ALIGN)
        return NULL;
    ts_block *r = ts_block_new(s);
    if (!r)
        return NULL; /* keeping the block whole is always correct */
    r->addr = b->addr + size;
    r->size = b->size - size;
    r->seg = b->seg;
    r->kind = b->kind;
    __atomic_store_n(&r->state, __atomic_load_n(&b->state, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    r->stream = b->stream;
    r->seq = b->seq;
    r->prev = b;
    r->next = b->next;
    if (b->next)
        b->next->prev = r;
    b->next = r;
    b->size = size;
    return r;
}

/* Merge `right` into `left` (adjacent, same segment). */
static void absorb(ts_block_slab *s, ts_block *left, ts_block *right)
{
    left->size += right->size;
    left->next = right->next;
    if (right->next)
        right->next->prev = left;
    ts_block_delete(s, right);
}

void ts_block_merge_next(ts_block_slab *s, ts_block *b) { absorb(s, b, b->next); }

/* Neighbour states are read atomically: a thread cache flips its own
 * blocks between TCACHED and LIVE without the pool lock (neither is FREE). */
ts_block *ts_block_coalesce(ts_block_slab *s, ts_index *ix, ts_block *b)
{
    ts_block *n = b->next;
    if (n && __atomic_load_n(&n->state, __ATOMIC_RELAXED) == TS_B_FREE && n->index == ix) {
        ts_index_remove(ix, n);
        absorb(s, b, n);
    }
    ts_block *pv = b->prev;
    if (pv && __atomic_load_n(&pv->state, __ATOMIC_RELAXED) == TS_B_FREE && pv->index == ix) {
        ts_index_remove(ix, pv);
        absorb(s, pv, b);
        b = pv;
    }
    return b;
}

void ts_block_release(ts_pool *p, ts_block *b)
{
    ts_index *ix = &p->index[b->kind];
    __atomic_store_n(&b->state, TS_B_FREE, __ATOMIC_RELAXED);
    b = ts_block_coalesce(&p->slab, ix, b);
    ts_index_insert(ix, b);
}

void ts_block_release_freed(ts_pool *p, ts_block *b)
{
    if (p->cfg.mode != TS_ALLOC_EXPANDABLE || b->size < TS_KEEP_MIN) {
        ts_block_release(p, b);
        return;
    }
    __atomic_store_n(&b->state, TS_B_FREE, __ATOMIC_RELAXED);
    b->seq = p->grow_gen;
    ts_index_insert(&p->kindex, b);
}

uint64_t ts_block_unkeep(ts_pool *p, uint64_t max_gen)
{
    uint64_t n = 0;
    ts_index *ix = &p->kindex;
    for (int fl = 0; fl < TS_IDX_FL && ix->count; fl++)
        for (int sl = 0; sl < TS_IDX_SL; sl++)
            for (ts_block *b = ix->heads[fl][sl], *nx; b; b = nx) {
                nx = b->fnext;
                if (b->seq >= max_gen)
                    continue;
                ts_index_remove(ix, b);
                ts_block_release(p, b);
                n++;
            }
    return n;
}
