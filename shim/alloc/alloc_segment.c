/* alloc_segment.c: the expandable mode's virtual range and its pages.
 * One range is reserved at pool creation (va_factor x capacity): the first
 * capacity bytes are the small arena, the rest the large arena.  A page is
 * mapped exactly while a live (or thread-cached) block touches it, or while it
 * is idle in the LRU.  Idle pages stay where they are: a free block lies
 * either over mapped pages only (index) or over whole unmapped pages only
 * (uindex), so the allocator serves what it can without a driver call and
 * grows (maps pages) only when mapped free space cannot hold a request.
 * Growth creates pages up to the memory limit; at the limit, or when the
 * device refuses, an idle page's handle is moved (unmap + map) instead.
 * A move can also be made in advance: a page's handle mapped at a second
 * page, its shadow, which the pool counts as unmapped; once the first page
 * is idle and its fence done, a request for the shadow's range takes the
 * handle there without a driver call, and the first page becomes the
 * shadow.  A shadow is unmapped before anything is mapped at its page and
 * before its handle is moved or given back. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "alloc/alloc_internal.h"

/* ---- expandable pools by address, for exporting a block's pages ----------
 * (shim/devmem/devmem_ipc.c).  A fixed table: pools are per device and rare; a pool
 * that finds no slot only cannot be exported from. */
#define SEG_MAX_POOLS 64
static ts_pool *seg_pools[SEG_MAX_POOLS];
void (*ts_seg_export_gone)(ts_pool *p, uint64_t addr, uint64_t size);
unsigned ts_seg_live_exports;

static void seg_register(ts_pool *p)
{
    for (int i = 0; i < SEG_MAX_POOLS; i++) {
        ts_pool *none = NULL;
        if (__atomic_compare_exchange_n(&seg_pools[i], &none, p, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return;
    }
}

static void seg_unregister(ts_pool *p)
{
    for (int i = 0; i < SEG_MAX_POOLS; i++) {
        ts_pool *mine = p;
        if (__atomic_compare_exchange_n(&seg_pools[i], &mine, NULL, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            return;
    }
}

/* Exports die with the memory they name: p->lock held. */
static void seg_gone(ts_pool *p, uint64_t addr, uint64_t size)
{
    if (__atomic_load_n(&ts_seg_live_exports, __ATOMIC_ACQUIRE) && ts_seg_export_gone)
        ts_seg_export_gone(p, addr, size);
}

bool (*ts_seg_export_has)(ts_pool *p, uint64_t addr);

/* The live block of segment s holding ptr, if any. */
static ts_block *live_in(const ts_segment *s, uint64_t ptr)
{
    if (ptr < s->base || ptr - s->base >= s->size)
        return NULL;
    for (ts_block *b = s->first; b; b = b->next)
        if (ptr >= b->addr && ptr - b->addr < b->size)
            return __atomic_load_n(&b->state, __ATOMIC_RELAXED) == TS_B_LIVE ? b : NULL;
    return NULL;
}

/* The live block holding ptr (p->lock held): the exact start through the
 * map, an interior pointer by walking its arena or segment (IPC and
 * address-range queries are rare). */
static ts_block *live_block_at(ts_pool *p, uint64_t ptr)
{
    ts_block *b = ts_map_get(&p->map, ptr);
    if (b && __atomic_load_n(&b->state, __ATOMIC_RELAXED) == TS_B_LIVE)
        return b;
    b = NULL;
    if (p->pages)
        for (int k = 0; k < TS_NKINDS && !b; k++)
            b = live_in(&p->arena[k], ptr);
    for (ts_segment *s = p->segs; s && !b; s = s->snext)
        b = live_in(s, ptr);
    return b;
}

int ts_pool_range(ts_pool *p, uint64_t ptr, uint64_t *base, uint64_t *size)
{
    pthread_mutex_lock(&p->lock);
    ts_block *b = live_block_at(p, ptr);
    if (b) {
        *base = b->addr;
        *size = b->requested;
    }
    pthread_mutex_unlock(&p->lock);
    return b ? TS_ALLOC_OK : TS_ALLOC_INVALID;
}

int ts_seg_with_live_block(uint64_t ptr, int no_block,
                           int (*fn)(void *arg, ts_pool *p, const ts_seg_block_view *v), void *arg)
{
    for (int i = 0; i < SEG_MAX_POOLS; i++) {
        ts_pool *p = __atomic_load_n(&seg_pools[i], __ATOMIC_ACQUIRE);
        if (!p || ptr < p->va_base || ptr - p->va_base >= p->va_size)
            continue;
        pthread_mutex_lock(&p->lock);
        int rc = no_block;
        ts_block *b = p->pages ? live_block_at(p, ptr) : NULL;
        if (b) {
            uint64_t f = (b->addr - p->va_base) / p->gran, l = (b->addr + b->size - 1 - p->va_base) / p->gran;
            ts_seg_block_view v = {
                .base = b->addr,
                .size = b->size,
                .stream = b->stream,
                .first_page_va = p->va_base + f * p->gran,
                .gran = p->gran,
                .npages = l - f + 1,
                .device = p->cfg.device,
                .pages = &p->pages[f],
            };
            rc = fn(arg, p, &v);
        }
        pthread_mutex_unlock(&p->lock);
        return rc;
    }
    return TS_SEG_NOT_OURS;
}

static void idle_append(ts_pool *p, int32_t i)
{
    ts_page *pg = &p->pages[i];
    pg->inext = -1;
    pg->iprev = p->idle_tail;
    if (p->idle_tail >= 0)
        p->pages[p->idle_tail].inext = i;
    else
        p->idle_head = i;
    p->idle_tail = i;
    p->idle_count++;
}

static void idle_remove(ts_pool *p, int32_t i)
{
    ts_page *pg = &p->pages[i];
    if (pg->iprev >= 0)
        p->pages[pg->iprev].inext = pg->inext;
    else
        p->idle_head = pg->inext;
    if (pg->inext >= 0)
        p->pages[pg->inext].iprev = pg->iprev;
    else
        p->idle_tail = pg->iprev;
    pg->iprev = pg->inext = -1;
    p->idle_count--;
}

int ts_seg_init_arenas(ts_pool *p)
{
    uint64_t g = 0;
    p->driver_calls++;
    if (p->prov.granularity(p->prov.ctx, &g) || !g || (g & (g - 1)))
        return TS_PROV_ERROR;
    p->gran = g;
    uint64_t small = ts_round_up(p->cfg.capacity, g);
    uint64_t total = ts_round_up(p->cfg.capacity * (p->cfg.va_factor ? p->cfg.va_factor : 4), g);
    if (total < (p->cfg.step_plan ? 3 : 2) * small)
        total = (p->cfg.step_plan ? 3 : 2) * small;
    int rc = TS_PCALL(p, reserve, total, &p->va_base);
    if (rc)
        return rc;
    p->va_size = total;
    p->npages = total / g;
    p->pages = calloc(p->npages, sizeof *p->pages);
    if (!p->pages) {
        TS_PCALL(p, unreserve, p->va_base, p->va_size);
        return TS_PROV_ERROR;
    }
    for (uint64_t i = 0; i < p->npages; i++)
        p->pages[i].iprev = p->pages[i].inext = p->pages[i].twin = -1;
    p->idle_head = p->idle_tail = -1;
    /* by kind: small, then large, then planned (the step plan: large as much
     * as the capacity, unused) */
    uint64_t large = p->cfg.step_plan ? small : total - small;
    uint64_t bounds[TS_NKINDS][2] = { [TS_KIND_SMALL] = { p->va_base, small },
                                      [TS_KIND_LARGE] = { p->va_base + small, large },
                                      [TS_KIND_PLANNED] = { p->va_base + small + large,
                                                            total - small - large } };
    for (int k = 0; k < TS_NKINDS; k++) {
        ts_segment *s = &p->arena[k];
        s->base = s->mapped_end = bounds[k][0];
        s->size = bounds[k][1];
        s->kind = k;
        if (!s->size)
            continue; /* no planned arena without the step plan */
        ts_block *b = ts_block_new(&p->slab);
        if (!b)
            return TS_PROV_ERROR;
        b->addr = s->base;
        b->size = s->size;
        b->seg = s;
        b->kind = k;
        __atomic_store_n(&b->state, TS_B_FREE, __ATOMIC_RELAXED);
        s->first = b;
        ts_index_insert(&p->uindex[k], b);
    }
    seg_register(p);
    return TS_PROV_OK;
}

void ts_seg_fini_arenas(ts_pool *p)
{
    if (!p->pages)
        return;
    seg_unregister(p);
    seg_gone(p, p->va_base, p->va_size);
    ts_seg_shadows_drop(p);
    for (uint64_t i = 0; i < p->npages; i++)
        if (p->pages[i].mapped) {
            TS_PCALL(p, unmap, p->va_base + i * p->gran, p->gran);
            TS_PCALL(p, release, p->pages[i].handle);
            p->pages[i].mapped = 0;
            p->reserved -= p->gran;
        }
    TS_PCALL(p, unreserve, p->va_base, p->va_size);
    free(p->pages);
    p->pages = NULL;
    p->mapped_count = p->idle_count = 0;
}

/* The coarse clock (a few ms resolution, no counter read: about 5 ns against
 * 20 for CLOCK_MONOTONIC): it is read on every locked allocation and page
 * put, and only compared with an idle threshold of milliseconds or more. */
uint64_t ts_seg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- shadows ----------------------------------------------------------------- */

static uint64_t page_va(const ts_pool *p, uint64_t i) { return p->va_base + i * p->gran; }

/* Unmaps the shadow of page o's handle, if it has one; false if the driver
 * refused (nothing changed). */
static bool shadow_unmap(ts_pool *p, uint64_t o)
{
    int32_t s = p->pages[o].twin;
    if (s < 0)
        return true;
    if (TS_PCALL(p, unmap, page_va(p, (uint64_t)s), p->gran))
        return false;
    p->pages[s].twin = -1;
    p->pages[s].shadow = 0;
    p->pages[o].twin = -1;
    return true;
}

void ts_seg_shadows_drop(ts_pool *p)
{
    for (uint64_t i = 0; p->pages && i < p->npages; i++)
        if (p->pages[i].twin >= 0 && !p->pages[i].shadow)
            shadow_unmap(p, i);
}

bool ts_seg_shadow_map(ts_pool *p, uint64_t i, uint64_t o)
{
    ts_page *pg = &p->pages[i], *own = &p->pages[o];
    if (pg->mapped || pg->twin >= 0 || !own->mapped || own->twin >= 0)
        return false;
    if (TS_PCALL(p, map, page_va(p, i), p->gran, own->handle))
        return false;
    if (TS_PCALL(p, set_access, page_va(p, i), p->gran)) {
        TS_PCALL(p, unmap, page_va(p, i), p->gran);
        return false;
    }
    pg->shadow = 1;
    pg->twin = (int32_t)o;
    pg->handle = own->handle;
    own->twin = (int32_t)i;
    return true;
}

/* The arena holding address va, or NULL. */
static ts_segment *arena_at(ts_pool *p, uint64_t va)
{
    for (int k = 0; k < TS_NKINDS; k++)
        if (va - p->arena[k].base < p->arena[k].size)
            return &p->arena[k];
    return NULL;
}

/* Page i mapped: its arena's mapped end follows. */
static void note_mapped_end(ts_pool *p, uint64_t i)
{
    ts_segment *a = arena_at(p, page_va(p, i));
    if (a && page_va(p, i + 1) > a->mapped_end)
        a->mapped_end = page_va(p, i + 1);
}

/* Page i is the shadow of an idle page whose fence is done: the handle
 * becomes page i's (its access was set with the shadow), the idle page its
 * shadow.  False (nothing changed) when the other page is not such. */
static bool shadow_take(ts_pool *p, uint64_t i)
{
    int32_t o = p->pages[i].twin;
    ts_page *own = &p->pages[o], *pg = &p->pages[i];
    if (!own->mapped || own->refs || own->idle_seq > p->safe_seq)
        return false;
    idle_remove(p, o);
    own->mapped = 0;
    own->shadow = 1;
    pg->handle = own->handle;
    pg->mapped = 1;
    pg->shadow = 0;
    note_mapped_end(p, i);
    p->unmapped_dirty = true; /* the free blocks over the other page */
    p->shadow_moves++;
    return true;
}

#define IDLE_SCAN 4096 /* idle pages looked at per move */

/* The handle of the highest-addressed idle page whose fence is done (of the
 * oldest IDLE_SCAN; one of the pages a step plan needs only when `any` and
 * no other will do), unmapped there (the free blocks over it are cut later:
 * unmapped_dirty); TS_PROV_OOM if there is none.  The highest, so that the
 * mapped pages stay together at the bottom of the arenas, where a step
 * plan's window goes. */
static int unmap_idle(ts_pool *p, int32_t j, uint64_t *h);
static int take_idle_handle(ts_pool *p, uint64_t *h, bool any)
{
    int32_t j = -1, kept = -1;
    unsigned seen = 0;
    for (int32_t i = p->idle_head; i >= 0 && seen < IDLE_SCAN && p->pages[i].idle_seq <= p->safe_seq;
         i = p->pages[i].inext, seen++) {
        /* one that a step plan needs, or one whose move is made in
         * advance (a shadow), only when no other will do */
        int32_t *best = (p->move_keep && p->move_keep[i]) || p->pages[i].twin >= 0 ? &kept : &j;
        if (i > *best)
            *best = i;
    }
    if (j < 0 && any)
        j = kept;
    if (j < 0)
        return TS_PROV_OOM;
    return unmap_idle(p, j, h);
}

/* The handle of idle page j, unmapped there (the free blocks over it are
 * cut later: unmapped_dirty). */
static int unmap_idle(ts_pool *p, int32_t j, uint64_t *h)
{
    idle_remove(p, j);
    if (!shadow_unmap(p, (uint64_t)j) || TS_PCALL(p, unmap, page_va(p, (uint64_t)j), p->gran)) {
        idle_append(p, j);
        return TS_PROV_ERROR;
    }
    p->pages[j].mapped = 0;
    p->mapped_count--;
    p->page_moves++;
    p->unmapped_dirty = true;
    *h = p->pages[j].handle;
    return TS_PROV_OK;
}

/* Maps handle h (counted in reserved) at page i; on failure the handle goes
 * back to the driver, uncounted.  Returns the driver's answer. */
static int map_handle(ts_pool *p, uint64_t i, uint64_t h)
{
    int rc = p->pages[i].shadow && !shadow_unmap(p, (uint64_t)p->pages[i].twin)
                 ? TS_PROV_ERROR
                 : TS_PCALL(p, map, page_va(p, i), p->gran, h);
    if (rc) {
        TS_PCALL(p, release, h);
        p->reserved -= p->gran;
        return rc;
    }
    p->pages[i].handle = h;
    p->pages[i].mapped = 1;
    p->mapped_count++;
    note_mapped_end(p, i);
    return TS_PROV_OK;
}

/* Gives page i a physical handle: a new one below the growth budget and the
 * memory limit, else (or when the device has no memory left) an idle page's
 * whose fence is done, moved here. */
static int map_one(ts_pool *p, uint64_t i)
{
    if (p->pages[i].shadow && shadow_take(p, i))
        return TS_PROV_OK;
    uint64_t g = p->gran, h = 0;
    bool at_limit = p->cfg.memory_limit && p->reserved + g > p->cfg.memory_limit;
    /* past the budget an idle page moves here if one is safe to take (under
     * a step plan, below the budget too: one that the plan does not need);
     * else new memory, or (at the limit, or refused) an idle page after all */
    int rc = p->reserved + g > p->grow_budget ? take_idle_handle(p, &h, true)
             : p->move_keep                   ? take_idle_handle(p, &h, false)
                                              : TS_PROV_OOM;
    if (rc == TS_PROV_ERROR)
        return rc;
    if (rc != TS_PROV_OK) {
        rc = at_limit ? TS_PROV_OOM : TS_PCALL(p, create, g, &h);
        if (rc == TS_PROV_OK) {
            p->reserved += g;
            ts_stats_note(p);
        } else if (rc == TS_PROV_OOM) {
            rc = take_idle_handle(p, &h, true);
            if (rc)
                return rc;
        } else {
            return TS_PROV_ERROR;
        }
    }
    rc = map_handle(p, i, h);
    if (rc)
        return rc == TS_PROV_OOM ? TS_PROV_OOM : TS_PROV_ERROR;
    p->pages[i].fresh = 1;
    return TS_PROV_OK;
}

/* Gives page i's memory back; false (page still mapped) if unmap failed. */
static bool unmap_release(ts_pool *p, uint64_t i)
{
    if (!shadow_unmap(p, i) || TS_PCALL(p, unmap, page_va(p, i), p->gran))
        return false;
    TS_PCALL(p, release, p->pages[i].handle);
    p->pages[i].mapped = 0;
    p->pages[i].fresh = 0;
    p->mapped_count--;
    p->reserved -= p->gran;
    return true;
}

int ts_seg_pages_get(ts_pool *p, uint64_t addr, uint64_t size)
{
    uint64_t g = p->gran;
    uint64_t f = (addr - p->va_base) / g, l = (addr + size - 1 - p->va_base) / g;
    /* references first, so no page of this range is taken as idle below */
    for (uint64_t i = f; i <= l; i++) {
        ts_page *pg = &p->pages[i];
        if (pg->refs++ == 0 && pg->mapped)
            idle_remove(p, (int32_t)i);
    }
    int rc = TS_PROV_OK;
    for (uint64_t i = f; i <= l && !rc; i++)
        if (!p->pages[i].mapped)
            rc = map_one(p, i);
    /* access for each run of pages mapped here */
    for (uint64_t i = f; i <= l && !rc;) {
        if (!p->pages[i].fresh) {
            i++;
            continue;
        }
        uint64_t e = i;
        while (e <= l && p->pages[e].fresh)
            e++;
        if (TS_PCALL(p, set_access, p->va_base + i * g, (e - i) * g))
            rc = TS_PROV_ERROR;
        for (uint64_t k = i; k < e && !rc; k++)
            p->pages[k].fresh = 0;
        i = e;
    }
    if (!rc)
        return TS_PROV_OK;
    /* roll back: pages mapped here go back to the driver, the others to idle */
    for (uint64_t i = f; i <= l; i++) {
        ts_page *pg = &p->pages[i];
        if (pg->fresh && !unmap_release(p, i)) {
            /* still mapped: make it usable so it can serve as an idle page */
            if (TS_PCALL(p, set_access, p->va_base + i * g, g) == TS_PROV_OK)
                pg->fresh = 0;
        }
        if (--pg->refs == 0 && pg->mapped) {
            /* the caller may put the block back pending under the next
             * free sequence: not safe before that free's fences */
            if (pg->idle_seq < p->seq + 1)
                pg->idle_seq = p->seq + 1;
            idle_append(p, (int32_t)i);
        }
    }
    return rc;
}

void ts_seg_pages_put(ts_pool *p, uint64_t addr, uint64_t size, uint64_t seq)
{
    uint64_t g = p->gran, now = 0;
    uint64_t f = (addr - p->va_base) / g, l = (addr + size - 1 - p->va_base) / g;
    seg_gone(p, addr, size); /* before the pages can move to another block */
    for (uint64_t i = f; i <= l; i++) {
        ts_page *pg = &p->pages[i];
        if (--pg->refs == 0) {
            if (p->cfg.idle_release_ns && !now)
                now = ts_seg_now_ns();
            pg->idle_seq = seq;
            pg->idle_ns = now;
            idle_append(p, (int32_t)i);
        }
    }
}

static bool mapped_at(const ts_pool *p, uint64_t a) { return p->pages[(a - p->va_base) / p->gran].mapped; }

/* Files a free block that is in no index: cut where its pages turn from
 * mapped to unmapped, each piece merged into index (mapped) or uindex.
 * Returns the piece holding its last byte, as merged. */
static ts_block *file_free_run(ts_pool *p, ts_block *b)
{
    uint64_t g = p->gran;
    for (;;) {
        bool m = mapped_at(p, b->addr);
        uint64_t end = b->addr + b->size;
        uint64_t at = p->va_base + ((b->addr - p->va_base) / g + 1) * g;
        while (at < end && mapped_at(p, at) == m)
            at = !m && at >= b->seg->mapped_end ? end : at + g;
        /* a record the slab cannot give leaves the run whole: unmapped
         * somewhere, it goes to uindex, whose growth maps what is missing */
        ts_block *rest = at < end ? ts_block_split(&p->slab, b, at - b->addr) : NULL;
        if (at < end && !rest)
            m = false;
        ts_index *ix = m ? &p->index[b->kind] : &p->uindex[b->kind];
        __atomic_store_n(&b->state, TS_B_FREE, __ATOMIC_RELAXED);
        b = ts_block_coalesce(&p->slab, ix, b);
        ts_index_insert(ix, b);
        if (!rest)
            return b;
        b = rest;
    }
}

/* Free blocks filed as mapped (kept ones too) over pages unmapped since:
 * cut again.  A refiled piece may merge with a neighbour that is itself
 * stale, so the merged block is looked at again. */
static void refile_unmapped(ts_pool *p)
{
    if (!p->unmapped_dirty)
        return;
    p->unmapped_dirty = false;
    uint64_t g = p->gran;
    for (int k = 0; k < TS_NKINDS; k++)
        for (ts_block *b = p->arena[k].first; b;) {
            ts_index *ix = b->index;
            if (__atomic_load_n(&b->state, __ATOMIC_RELAXED) != TS_B_FREE
                || (ix != &p->index[k] && ix != &p->kindex)) {
                b = b->next;
                continue;
            }
            uint64_t f = (b->addr - p->va_base) / g, l = (b->addr + b->size - 1 - p->va_base) / g;
            while (f <= l && p->pages[f].mapped)
                f++;
            if (f > l) {
                b = b->next;
                continue;
            }
            ts_index_remove(ix, b);
            b = file_free_run(p, b);
        }
}

/* Idle page i unmapped and released (its free blocks refiled later);
 * false if the driver refused (it stays idle). */
static bool release_idle_page(ts_pool *p, int32_t i)
{
    idle_remove(p, i);
    if (!unmap_release(p, (uint64_t)i)) {
        idle_append(p, i);
        return false;
    }
    p->unmapped_dirty = true;
    return true;
}

uint64_t ts_seg_release_idle(ts_pool *p, uint64_t idle_before_ns)
{
    uint64_t n = 0;
    while (p->idle_head >= 0) {
        int32_t i = p->idle_head;
        ts_page *pg = &p->pages[i];
        if (pg->idle_seq > p->safe_seq || (idle_before_ns != UINT64_MAX && pg->idle_ns >= idle_before_ns))
            break;
        if (!release_idle_page(p, i))
            break;
        n++;
    }
    refile_unmapped(p);
    return n;
}

/* A place for a grown block: from `start`, over the mapped free block
 * `left` (if any), the unmapped run `hole` and the mapped free block
 * `right` (if any), mapping `pages` new pages. */
typedef struct {
    ts_block *left, *hole, *right;
    uint64_t start, pages, span;
} grow_spot;

/* b if it is a free block over mapped pages too small for the request
 * alone (a larger one would have served it, or is kept whole). */
static ts_block *mapped_free(ts_pool *p, ts_block *b, uint64_t size)
{
    return b && __atomic_load_n(&b->state, __ATOMIC_RELAXED) == TS_B_FREE && b->index == &p->index[b->kind]
                   && b->size < size
               ? b
               : NULL;
}

/* Fewest new pages, then fewest pages spanned (a block sharing a page with
 * its neighbour pins that page too: at the memory limit it is a page
 * short), then the smallest hole, then the lowest address. */
static void keep_better(const ts_pool *p, grow_spot *best, grow_spot c, uint64_t size)
{
    uint64_t g = p->gran, base = p->va_base;
    c.span = (c.start + size - 1 - base) / g - (c.start - base) / g + 1;
    if (!best->hole || c.pages < best->pages
        || (c.pages == best->pages
            && (c.span < best->span
                || (c.span == best->span
                    && (c.hole->size < best->hole->size
                        || (c.hole->size == best->hole->size && c.start < best->start))))))
        *best = c;
}

/* The places for `size` bytes at hole h: from the start of the mapped free
 * block before it (or of h) into h (and on into the block after it when h
 * is short), at the start of h, or ending where the mapped free block after
 * it ends. */
static void consider_hole(ts_pool *p, ts_block *h, uint64_t size, grow_spot *best)
{
    uint64_t g = p->gran;
    ts_block *l = mapped_free(p, h->prev, size), *r = mapped_free(p, h->next, size);
    uint64_t ls = l ? l->size : 0, rs = r ? r->size : 0;
    uint64_t start = l ? l->addr : h->addr;
    uint64_t need = size > ls ? size - ls : 0;
    if (need <= h->size)
        keep_better(p, best, (grow_spot){ l, h, NULL, start, (need + g - 1) / g, 0 }, size);
    else if (r && need <= h->size + rs)
        keep_better(p, best, (grow_spot){ l, h, r, start, (h->size + g - 1) / g, 0 }, size);
    if (l && size <= h->size)
        keep_better(p, best, (grow_spot){ NULL, h, NULL, h->addr, (size + g - 1) / g, 0 }, size);
    need = size > rs ? size - rs : 0;
    if (r && need <= h->size)
        keep_better(p, best, (grow_spot){ NULL, h, r, h->addr + h->size - need, (need + g - 1) / g, 0 },
                    size);
}

#define GROW_SCAN 4096 /* holes looked at per growth, smallest first */

static grow_spot find_spot(ts_pool *p, int kind, uint64_t size)
{
    grow_spot best = { 0 };
    ts_index *ix = &p->uindex[kind];
    unsigned seen = 0;
    for (int fl = 0; fl < TS_IDX_FL && seen < GROW_SCAN; fl++) {
        if (!(ix->fl_map & (1ull << fl)))
            continue;
        for (int sl = 0; sl < TS_IDX_SL; sl++)
            for (ts_block *h = ix->heads[fl][sl]; h && seen < GROW_SCAN; h = h->fnext, seen++)
                consider_hole(p, h, size, &best);
    }
    if (!best.hole) {
        /* past the scan: any hole that holds it whole */
        ts_block *h = ts_index_find(ix, ts_round_up(size, p->gran));
        if (h)
            consider_hole(p, h, size, &best);
    }
    return best;
}

/* New memory up to the budget (cfg.grow_slack_pct over the allocated peak,
 * a request of rsize bytes counted); past it growth reuses idle pages'
 * handles.  Under the step plan, no new memory while idle pages can move
 * until the plan settles, in every arena (the first steps stay at their
 * allocated peak), and unbounded after. */
static void set_grow_budget(ts_pool *p, uint64_t rsize)
{
    uint64_t peak = p->held + rsize > p->peak_held ? p->held + rsize : p->peak_held;
    uint32_t pct = p->cfg.grow_slack_pct;
    if (pct == TS_GROW_STEP_PLAN)
        p->grow_budget = p->grow_settled ? UINT64_MAX : 0;
    else
        p->grow_budget = pct == TS_GROW_UNBOUNDED ? UINT64_MAX : pct ? peak + peak / 100 * pct : 0;
}

int ts_seg_grow(ts_pool *p, int kind, uint64_t rsize, ts_block **out)
{
    grow_spot s = find_spot(p, kind, rsize);
    if (!s.hole)
        return TS_PROV_OOM; /* virtual range exhausted */
    ts_block *b = s.hole;
    ts_index_remove(&p->uindex[kind], b);
    if (s.left) {
        ts_index_remove(&p->index[kind], s.left);
        ts_block_merge_next(&p->slab, s.left);
        b = s.left;
    }
    if (s.right) {
        ts_index_remove(&p->index[kind], s.right);
        ts_block_merge_next(&p->slab, b);
    }
    int rc = ts_seg_take_run(p, b, s.start, rsize, &b);
    if (rc) {
        file_free_run(p, b);
        return rc;
    }
    *out = b;
    return TS_PROV_OK;
}

/* Maps page i (under the free block b of uindex) with the handle of idle
 * page `donor`, or (donor < 0) of an idle page a step plan does not need,
 * moved here: idle at once.  False when there is none or the driver
 * refused. */
static bool premap_page(ts_pool *p, ts_block *b, uint64_t i, int32_t donor)
{
    uint64_t g = p->gran, va = page_va(p, i), h = 0;
    int rc = donor < 0 ? take_idle_handle(p, &h, false) : unmap_idle(p, donor, &h);
    if (rc != TS_PROV_OK || map_handle(p, i, h))
        return false;
    p->pages[i].idle_seq = p->safe_seq;
    if (TS_PCALL(p, set_access, va, g)) {
        unmap_release(p, i);
        return false;
    }
    if (p->cfg.idle_release_ns)
        p->pages[i].idle_ns = ts_seg_now_ns();
    idle_append(p, (int32_t)i);
    ts_index_remove(&p->uindex[b->kind], b);
    file_free_run(p, b);
    return true;
}

/* Page i as premap_page maps it: under a free block of uindex[kind]; 0
 * when it is not such, -1 when premap_page failed. */
static int premap_at(ts_pool *p, int kind, uint64_t i, int32_t donor)
{
    if (p->pages[i].mapped)
        return 0;
    ts_block *b = ts_seg_block_at(p, kind, NULL, page_va(p, i));
    if (!b || __atomic_load_n(&b->state, __ATOMIC_RELAXED) != TS_B_FREE || b->index != &p->uindex[kind])
        return 0;
    return premap_page(p, b, i, donor) ? 1 : -1;
}

static int by_key(const void *a, const void *b, void *key)
{
    uint64_t x = ((const uint64_t *)key)[*(const uint32_t *)a],
             y = ((const uint64_t *)key)[*(const uint32_t *)b];
    return x < y ? -1 : x > y;
}

enum { PG_LACKING, PG_DYING, PG_SPARE };

/* The arena's pages (indices from its first) with key[] below UINT64_MAX
 * and no shadow, in ascending key order: the unmapped ones (PG_LACKING),
 * the mapped ones under live blocks that a step plan does not need
 * (PG_DYING), or the idle ones whose fence is done that it needs
 * (PG_SPARE); *n of them. */
static uint32_t *pages_by(ts_pool *p, int kind, const uint64_t *key, int which, size_t *n)
{
    const ts_segment *a = &p->arena[kind];
    uint64_t lo = (a->base - p->va_base) / p->gran, np = a->size / p->gran;
    uint32_t *v = malloc(np * sizeof *v);
    *n = 0;
    for (uint64_t i = 0; v && i < np; i++) {
        const ts_page *pg = &p->pages[lo + i];
        bool kept = p->move_keep && p->move_keep[lo + i];
        bool pick = which == PG_LACKING ? !pg->mapped
                    : which == PG_DYING ? pg->mapped && pg->refs && !kept
                                        : pg->mapped && !pg->refs && kept && pg->idle_seq <= p->safe_seq;
        if (key[i] != UINT64_MAX && pg->twin < 0 && pick)
            v[(*n)++] = (uint32_t)i;
    }
    if (v)
        qsort_r(v, *n, sizeof *v, by_key, (void *)key);
    return v;
}

/* Targets tgt[t..nt) (ascending first use) that no idle page the plan can
 * spare was moved to: each takes the handle of the idle page the plan asks
 * for last (a donor), and the donor becomes the shadow of a page whose
 * blocks die before the plan asks for the donor; while both last and the
 * donor is asked for later than the target.  Returns how many. */
static uint64_t move_in_chained(ts_pool *p, int kind, const uint32_t *tgt, size_t t, size_t nt,
                                const uint64_t *first_use, const uint64_t *death)
{
    uint64_t lo = (p->arena[kind].base - p->va_base) / p->gran, done = 0;
    size_t nd = 0, ns = 0, d, s = 0;
    uint32_t *donor = pages_by(p, kind, first_use, PG_SPARE, &nd);
    uint32_t *src = donor ? pages_by(p, kind, death, PG_DYING, &ns) : NULL;
    for (d = nd; src && t < nt && d > 0 && s < ns; t++) {
        uint32_t dn = donor[d - 1];
        if (first_use[dn] <= first_use[tgt[t]] || death[src[s]] > first_use[dn])
            break;
        if (p->pages[lo + tgt[t]].mapped || p->pages[lo + tgt[t]].twin >= 0)
            continue;
        if (premap_at(p, kind, lo + tgt[t], (int32_t)(lo + dn)) <= 0)
            break;
        d--;
        done += ts_seg_shadow_map(p, lo + dn, lo + src[s++]);
    }
    free(donor);
    free(src);
    return done;
}

uint64_t ts_seg_move_in(ts_pool *p, int kind, const uint64_t *first_use, const uint64_t *death)
{
    uint64_t lo = (p->arena[kind].base - p->va_base) / p->gran, done = 0;
    size_t nt = 0, ns = 0, t = 0;
    uint32_t *tgt = pages_by(p, kind, first_use, PG_LACKING, &nt);
    for (; tgt && t < nt; t++) {
        int rc = premap_at(p, kind, lo + tgt[t], -1);
        if (rc < 0)
            break; /* no idle page left to move */
        done += (uint64_t)rc;
    }
    /* shadows of the pages that die first, for those asked for first that
     * one dies in time for */
    uint32_t *src = tgt && t < nt ? pages_by(p, kind, death, PG_DYING, &ns) : NULL;
    for (size_t u = t, s = 0; src && u < nt && s < ns; u++) {
        uint64_t i = lo + tgt[u];
        if (!p->pages[i].mapped && death[src[s]] <= first_use[tgt[u]])
            done += ts_seg_shadow_map(p, i, lo + src[s++]);
    }
    free(src);
    if (tgt && t < nt)
        done += move_in_chained(p, kind, tgt, t, nt, first_use, death);
    free(tgt);
    refile_unmapped(p);
    return done;
}

ts_block *ts_seg_block_at(ts_pool *p, int kind, ts_block *near, uint64_t addr)
{
    /* a record on the slab's free list has state 0; any other one of this
     * arena is a block of its list, as good a start as the first */
    ts_block *b = near && __atomic_load_n(&near->state, __ATOMIC_RELAXED) && near->seg == &p->arena[kind]
                      ? near
                      : p->arena[kind].first;
    while (b && addr < b->addr)
        b = b->prev;
    for (; b; b = b->next)
        if (addr - b->addr < b->size)
            return b;
    return NULL;
}

void ts_seg_file_free(ts_pool *p, ts_block *b) { file_free_run(p, b); }

int ts_seg_take_run(ts_pool *p, ts_block *first, uint64_t addr, uint64_t size, ts_block **out)
{
    ts_block *b = first;
    while (b->addr + b->size < addr + size)
        ts_block_merge_next(&p->slab, b);
    ts_block *pre = NULL, *post = NULL;
    if (addr > b->addr) {
        ts_block *x = ts_block_split(&p->slab, b, addr - b->addr);
        if (!x) {
            *out = b;
            return TS_PROV_ERROR;
        }
        pre = b;
        b = x;
    }
    post = ts_block_split(&p->slab, b, size);
    *out = b;
    int rc = TS_PROV_ERROR;
    if (b->size == size) {
        set_grow_budget(p, size);
        rc = ts_seg_pages_get(p, b->addr, b->size);
    }
    refile_unmapped(p); /* pages moved here from idle ones */
    /* after the mapping: the pieces are filed by their pages as they are now */
    if (pre)
        file_free_run(p, pre);
    if (post)
        file_free_run(p, post);
    return rc;
}

uint64_t ts_seg_mapped_run(ts_pool *p, uint64_t addr, uint64_t size)
{
    uint64_t g = p->gran, end = addr + size, best = 0, run = 0;
    const ts_segment *arena = arena_at(p, addr);
    if (arena && end > arena->mapped_end) /* none mapped above */
        end = addr > arena->mapped_end ? addr : arena->mapped_end;
    for (uint64_t a = addr; a < end;) {
        uint64_t i = (a - p->va_base) / g;
        uint64_t pe = p->va_base + (i + 1) * g;
        uint64_t e = pe < end ? pe : end;
        if (p->pages[i].mapped) {
            run += e - a;
            if (run > best)
                best = run;
        } else {
            run = 0;
        }
        a = e;
    }
    return best;
}

uint64_t ts_seg_view_handle(const ts_seg_block_view *v, uint64_t i) { return v->pages[i].handle; }

bool ts_pool_owns(ts_pool *p, uint64_t ptr)
{
    pthread_mutex_lock(&p->lock);
    bool in = p->va_size && ptr >= p->va_base && ptr - p->va_base < p->va_size;
    for (ts_segment *s = p->segs; s && !in; s = s->snext)
        in = ptr >= s->base && ptr - s->base < s->size;
    pthread_mutex_unlock(&p->lock);
    return in;
}

void ts_pool_for_each_mapped(ts_pool *p, void (*fn)(void *arg, uint64_t va, uint64_t size), void *arg)
{
    pthread_mutex_lock(&p->lock);
    if (p->cfg.mode == TS_ALLOC_EXPANDABLE && p->pages) {
        for (uint64_t i = 0; i < p->npages;) {
            if (!p->pages[i].mapped) {
                i++;
                continue;
            }
            uint64_t j = i;
            while (j < p->npages && p->pages[j].mapped)
                j++;
            fn(arg, p->va_base + i * p->gran, (j - i) * p->gran);
            i = j;
        }
    }
    pthread_mutex_unlock(&p->lock);
}
