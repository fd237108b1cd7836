/* alloc_index.c: the free index, a TLSF-style two-level segregated fit.
 * Sizes are in 512-byte units; the first level is the power of two, the second
 * splits it in 16, so every class spans at most 1/16 of its size.  Bitmaps make
 * finding the first non-empty class >= a size O(1); inside the request's own
 * class a short scan finds the best fit, so waste stays under 1/16. */
#include "alloc/alloc_internal.h"

#define SCAN_LIMIT 16

void ts_index_init(ts_index *ix) { __builtin_memset(ix, 0, sizeof *ix); }

void ts_index_class(uint64_t size, int *fl, int *sl)
{
    uint64_t u = size / TS_ALLOC_ALIGN;
    if (u < TS_IDX_SL) {
        *fl = 0;
        *sl = (int)u;
        return;
    }
    int msb = 63 - __builtin_clzll(u);
    *fl = msb - TS_IDX_SL_LOG + 1;
    *sl = (int)((u >> (msb - TS_IDX_SL_LOG)) & (TS_IDX_SL - 1));
    if (*fl >= TS_IDX_FL) {
        *fl = TS_IDX_FL - 1;
        *sl = TS_IDX_SL - 1;
    }
}

void ts_index_insert(ts_index *ix, ts_block *b)
{
    int fl, sl;
    ts_index_class(b->size, &fl, &sl);
    ts_block *h = ix->heads[fl][sl];
    b->fprev = NULL;
    b->fnext = h;
    if (h)
        h->fprev = b;
    ix->heads[fl][sl] = b;
    ix->sl_map[fl] |= 1u << sl;
    ix->fl_map |= 1ull << fl;
    b->index = ix;
    ix->count++;
    ix->bytes += b->size;
}

void ts_index_remove(ts_index *ix, ts_block *b)
{
    int fl, sl;
    ts_index_class(b->size, &fl, &sl);
    if (b->fprev)
        b->fprev->fnext = b->fnext;
    else
        ix->heads[fl][sl] = b->fnext;
    if (b->fnext)
        b->fnext->fprev = b->fprev;
    if (!ix->heads[fl][sl]) {
        ix->sl_map[fl] &= ~(1u << sl);
        if (!ix->sl_map[fl])
            ix->fl_map &= ~(1ull << fl);
    }
    b->fprev = b->fnext = NULL;
    b->index = NULL;
    ix->count--;
    ix->bytes -= b->size;
}

/* Smallest block >= size among the first SCAN_LIMIT of a list, the lowest
 * address among equals: placements then depend on the free space, not on
 * the order blocks were freed in, so a repeated pattern settles into the
 * same layout. */
static ts_block *scan_best(ts_block *b, uint64_t size)
{
    ts_block *best = NULL;
    for (int n = 0; b && n < SCAN_LIMIT; b = b->fnext, n++)
        if (b->size >= size
            && (!best || b->size < best->size || (b->size == best->size && b->addr < best->addr)))
            best = b;
    return best;
}

ts_block *ts_index_find(ts_index *ix, uint64_t size)
{
    int fl, sl;
    ts_index_class(size, &fl, &sl);
    ts_block *b = scan_best(ix->heads[fl][sl], size);
    if (b)
        return b;
    /* next non-empty class above the request's: every block there fits */
    uint32_t slm = sl + 1 < TS_IDX_SL ? ix->sl_map[fl] & (~0u << (sl + 1)) : 0;
    if (!slm) {
        uint64_t flm = fl + 1 < TS_IDX_FL ? ix->fl_map & (~0ull << (fl + 1)) : 0;
        if (!flm)
            return NULL;
        fl = __builtin_ctzll(flm);
        slm = ix->sl_map[fl];
    }
    sl = __builtin_ctz(slm);
    return scan_best(ix->heads[fl][sl], size);
}

uint64_t ts_index_largest(const ts_index *ix)
{
    if (!ix->fl_map)
        return 0;
    int fl = 63 - __builtin_clzll(ix->fl_map);
    int sl = 31 - __builtin_clz(ix->sl_map[fl]);
    uint64_t best = 0;
    for (ts_block *b = ix->heads[fl][sl]; b; b = b->fnext)
        if (b->size > best)
            best = b->size;
    return best;
}
