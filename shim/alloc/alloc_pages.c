/* alloc_pages.c: the page walk through which memory offload
 * (shim/offload) sees and re-backs the expandable arenas' pages without
 * knowing the pool's internals. */
#include <stdlib.h>
#include "alloc/alloc_internal.h"

/* Marks the pages under IPC-exported live blocks (p->lock held). */
static void mark_exported(ts_pool *p, uint8_t *exported)
{
    for (int k = 0; k < TS_NKINDS; k++)
        for (ts_block *b = p->arena[k].first; b; b = b->next) {
            if (__atomic_load_n(&b->state, __ATOMIC_RELAXED) != TS_B_LIVE
                || !ts_seg_block_exported(p, b->addr))
                continue;
            uint64_t f = (b->addr - p->va_base) / p->gran, l = (b->addr + b->size - 1 - p->va_base) / p->gran;
            for (uint64_t i = f; i <= l; i++)
                exported[i] = 1;
        }
}

int ts_pool_pages_walk(ts_pool *p, int (*fn)(void *arg, ts_page_view *v), void *arg)
{
    pthread_mutex_lock(&p->lock);
    int rc = 0;
    uint8_t *exported = p->pages ? calloc(p->npages, 1) : NULL;
    if (p->pages && !exported)
        rc = -1;
    if (exported)
        mark_exported(p, exported);
    ts_seg_shadows_drop(p); /* a page re-backed must not stay mapped elsewhere */
    for (uint64_t i = 0; exported && i < p->npages && !rc; i++) {
        ts_page *pg = &p->pages[i];
        if (!pg->mapped)
            continue;
        ts_page_view v = { .va = p->va_base + i * p->gran,
                           .size = p->gran,
                           .handle = pg->handle,
                           .live = pg->refs > 0,
                           .exported = exported[i] != 0 };
        rc = fn(arg, &v);
        pg->handle = v.handle;
    }
    free(exported);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

uint64_t ts_pool_page_size(const ts_pool *p) { return p->gran; }
