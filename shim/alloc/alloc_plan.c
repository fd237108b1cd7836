/* alloc_plan.c: the step plan.  A training step asks for the same blocks
 * in the same order every time, and frees them at the same points.
 * Online best fit cannot know lifetimes, so it leaves holes and its mapped
 * footprint settles about 5% (torch's expandable segments: the same) above
 * the step's peak.  Once the sequence of requests is seen to repeat
 * with a period p, and every block of one period was freed before its
 * counterpart of the next was asked for (so nothing accumulates), the
 * previous period's lifetimes are known exactly and an offline packing
 * gives each of the p requests its address: blocks whose lifetimes overlap
 * never share bytes, the largest placed first, each at the lowest address
 * that fits.  That packing reaches the step's live peak, and since the
 * same addresses come back every step, the pages under it stay mapped and
 * the steady state needs no driver call.
 *
 * The plan covers every block over TS_PLAN_MIN (the kind TS_KIND_PLANNED,
 * an arena of its own; smaller ones stay in the thread caches' reach).
 * Before a plan, such blocks go to the lowest free range and idle pages
 * move rather than new ones being made, so the first steps stay at their
 * allocated peak too; large blocks also go to their arena's lowest free
 * range then, so those that stay (parameters, optimizer state) lie
 * together.
 *
 * Recording: every planned-kind allocation's size, stream, address and the
 * allocation count at its free, in a ring.  Detection: a hash of the last
 * PLAN_W requests proposes a period (the distance to the window's previous
 * occurrence); each proposal keeps a streak of requests equal to the one a
 * period before.  A streak of a whole period is checked (lifetimes) and
 * planned.  A request other than the plan's, or too many placements that
 * find their range taken, drop the plan; best fit serves in the meantime.
 * Everything here runs under the pool's lock, on the slow path only (these
 * blocks never go through the thread caches). */
#include <stdlib.h>
#include <string.h>
#include "alloc/alloc_internal.h"

#define PLAN_RING 8192 /* allocations remembered */
#define PLAN_MAX_PERIOD 2048
#define PLAN_MIN_PERIOD 4
#define PLAN_W 4 /* requests hashed to propose a period */
#define PLAN_HT 4096
#define PLAN_NCAND 8
#define PLAN_LIVE UINT64_MAX
#define PLAN_WARMUP 16384 /* allocations without a plan before growth is unbounded */
#define PLAN_TRANSITION 4 /* periods a new plan may take to settle */

typedef struct plan_rec {
    uint64_t rsize, stream, addr;
    uint64_t freed_at; /* allocation count when freed, PLAN_LIVE while live */
} plan_rec;

typedef struct plan_slot {
    uint64_t rsize, stream, addr;
    uint64_t a, f; /* lifetime in the period: allocated at a, freed before f (f <= a + p) */
} plan_slot;

struct ts_plan {
    plan_rec ring[PLAN_RING];
    uint64_t n; /* allocations so far */
    uint64_t ht_key[PLAN_HT], ht_pos[PLAN_HT];
    struct {
        uint64_t p, streak;
    } cand[PLAN_NCAND];
    /* the plan in force (period 0: none) */
    uint64_t period, base; /* slot of allocation o: (o - base) % period */
    plan_slot *slot;
    uint64_t end;         /* the end of the plan's highest slot */
    uint64_t period_miss; /* placements that found their range taken, this period */
    /* The first period of a plan: blocks of the steps before it are still
     * where best fit put them, so placements may miss; it ends with the
     * pages no slot touches given back. */
    bool transition;
    ts_block *near; /* the block placed last: where the next walk starts */
    ts_plan_stats st;
};

static plan_rec *rec_at(ts_plan *pl, uint64_t o) { return &pl->ring[o & (PLAN_RING - 1)]; }

static bool same_request(const plan_rec *x, const plan_rec *y)
{
    return x->rsize == y->rsize && x->stream == y->stream;
}

int ts_plan_init(ts_pool *p)
{
    p->plan = calloc(1, sizeof *p->plan);
    return p->plan ? 0 : -1;
}

void ts_plan_fini(ts_pool *p)
{
    if (p->plan)
        free(p->plan->slot);
    free(p->plan);
    p->plan = NULL;
}

static void plan_drop(ts_plan *pl)
{
    if (!pl->period)
        return;
    pl->period = 0;
    free(pl->slot);
    pl->slot = NULL;
    pl->st.drops++;
}

/* ---- detection -------------------------------------------------------------- */

static void cand_propose(ts_plan *pl, uint64_t period)
{
    int free_at = -1;
    for (int c = 0; c < PLAN_NCAND; c++) {
        if (pl->cand[c].p == period)
            return;
        if (free_at < 0 || pl->cand[c].streak < pl->cand[free_at].streak)
            free_at = c;
    }
    pl->cand[free_at].p = period;
    pl->cand[free_at].streak = PLAN_W - 1; /* the window matched; this request is counted next */
}

static void propose_from_window(ts_plan *pl, uint64_t o)
{
    if (o + 1 < PLAN_W)
        return;
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (uint64_t k = o + 1 - PLAN_W; k <= o; k++) {
        const plan_rec *r = rec_at(pl, k);
        h = (h ^ (r->rsize >> 9)) * 0x100000001b3ull;
        h = (h ^ r->stream) * 0xc2b2ae3d27d4eb4full;
    }
    h |= 1; /* 0: an empty entry */
    unsigned e = (unsigned)(h >> 52) & (PLAN_HT - 1);
    if (pl->ht_key[e] == h && o - pl->ht_pos[e] >= PLAN_MIN_PERIOD && o - pl->ht_pos[e] <= PLAN_MAX_PERIOD)
        cand_propose(pl, o - pl->ht_pos[e]);
    pl->ht_key[e] = h;
    pl->ht_pos[e] = o;
}

/* Every block of the period [o+1-2p, o-p] freed by now, so nothing
 * accumulates (a layer's forward repeats too, but its activations stay):
 * how many periods the longest of them lived, rounded up (1, or 2 when a
 * variable held the step's tensor until the next step replaced it), or 0
 * when one is still live or lived longer. */
static uint64_t period_cycles(ts_plan *pl, uint64_t o, uint64_t period)
{
    uint64_t longest = 0;
    for (uint64_t j = o + 1 - 2 * period; j <= o - period; j++) {
        uint64_t f = rec_at(pl, j)->freed_at;
        if (f == PLAN_LIVE || f - j > 2 * period)
            return 0;
        if (f - j > longest)
            longest = f - j;
    }
    return longest <= period ? 1 : 2;
}

/* ---- planning --------------------------------------------------------------- */

/* The lifetimes of slots x and y (arcs on the period's circle) overlap. */
static bool arcs_meet(const plan_slot *x, const plan_slot *y, uint64_t period)
{
    uint64_t xs[2][2], ys[2][2];
    int nx = 0, ny = 0;
    const plan_slot *s[2] = { x, y };
    for (int i = 0; i < 2; i++) {
        uint64_t(*v)[2] = i ? ys : xs;
        int *n = i ? &ny : &nx;
        if (s[i]->f <= period) {
            v[(*n)][0] = s[i]->a, v[(*n)++][1] = s[i]->f;
        } else {
            v[(*n)][0] = s[i]->a, v[(*n)++][1] = period;
            v[(*n)][0] = 0, v[(*n)++][1] = s[i]->f - period;
        }
    }
    for (int i = 0; i < nx; i++)
        for (int j = 0; j < ny; j++)
            if (xs[i][0] < ys[j][1] && ys[j][0] < xs[i][1])
                return true;
    return false;
}

typedef struct {
    uint64_t lo, hi;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The lowest address from base where size bytes fit between the taken
 * spans (sorted here). */
static uint64_t lowest_fit(span *taken, size_t n, uint64_t base, uint64_t size)
{
    qsort(taken, n, sizeof *taken, span_cmp);
    uint64_t at = base;
    for (size_t i = 0; i < n; i++) {
        if (taken[i].lo >= at + size)
            break;
        if (taken[i].hi > at)
            at = taken[i].hi;
    }
    return at;
}

/* The largest first, then the earliest. */
static int slot_order(const void *a, const void *b, void *arg)
{
    const plan_slot *sl = arg;
    const plan_slot *x = &sl[*(const uint32_t *)a], *y = &sl[*(const uint32_t *)b];
    if (x->rsize != y->rsize)
        return x->rsize > y->rsize ? -1 : 1;
    return x->a < y->a ? -1 : x->a > y->a;
}

/* The plan's slots, cycles x period of them from allocation first: sizes
 * and lifetimes those of the template period (from tmpl).  A block of the
 * last cycle still live where its slot's next one is placed makes that
 * placement miss, once. */
static plan_slot *plan_slots(ts_plan *pl, uint64_t tmpl, uint64_t period, uint64_t cycles)
{
    uint64_t n = period * cycles;
    plan_slot *sl = calloc(n, sizeof *sl);
    if (!sl)
        return NULL;
    for (uint64_t q = 0; q < n; q++) {
        const plan_rec *t = rec_at(pl, tmpl + q % period);
        uint64_t life = t->freed_at - (tmpl + q % period);
        sl[q] = (plan_slot){ .rsize = t->rsize, .stream = t->stream, .a = q, .f = q + life };
    }
    return sl;
}

/* b is live and was allocated before the plan's first request (first_ord):
 * it stays where it is for the plan's whole life. */
static bool stays(const ts_block *b, uint64_t first_ord)
{
    return __atomic_load_n(&b->state, __ATOMIC_RELAXED) == TS_B_LIVE && b->ord < first_ord;
}

static size_t plan_obstacles(ts_pool *p, uint64_t first_ord, span *out, size_t cap)
{
    size_t n = 0;
    for (ts_block *b = p->arena[TS_KIND_PLANNED].first; b && n < cap; b = b->next)
        if (stays(b, first_ord))
            out[n++] = (span){ b->addr, b->addr + b->size };
    return n;
}

/* Greedy packing from address base: each slot in `order`, the largest
 * first, at the lowest address clear of the obstacles and of every placed
 * slot whose lifetime meets its own.  Returns the end of the highest. */
static uint64_t pack_from(plan_slot *sl, const uint32_t *order, uint64_t n, uint64_t base, const span *obst,
                          size_t nobst, span *taken)
{
    uint64_t end = base;
    for (uint64_t i = 0; i < n; i++) {
        plan_slot *s = &sl[order[i]];
        if (nobst)
            memcpy(taken, obst, nobst * sizeof *obst);
        size_t nt = nobst;
        for (uint64_t j = 0; j < i; j++) {
            const plan_slot *o = &sl[order[j]];
            if (arcs_meet(s, o, n))
                taken[nt++] = (span){ o->addr, o->addr + o->rsize };
        }
        s->addr = lowest_fit(taken, nt, base, s->rsize);
        if (s->addr + s->rsize > end)
            end = s->addr + s->rsize;
    }
    return end;
}

/* Addresses for the slots: in a window of their own above the blocks that
 * stay (pages are what memory costs, not addresses: the holes between the
 * blocks that stay are given back, and a window free of them packs to the
 * lifetimes' peak), else, when the arena has no room for that, among them.
 * False if memory for the work is short or the plan does not fit; *end
 * gets the end of the highest slot, *footprint its distance from the
 * window. */
static bool plan_pack(ts_pool *p, plan_slot *sl, uint64_t n, uint64_t first_ord, uint64_t *end_out,
                      uint64_t *footprint)
{
    const ts_segment *arena = &p->arena[TS_KIND_PLANNED];
    size_t ocap = p->live_blocks + 1;
    span *obst = malloc(ocap * sizeof *obst), *taken = malloc((ocap + n) * sizeof *taken);
    uint32_t *order = malloc(n * sizeof *order);
    bool ok = obst && taken && order;
    size_t nobst = ok ? plan_obstacles(p, first_ord, obst, ocap) : 0;
    uint64_t window = arena->base, end = 0;
    for (size_t i = 0; i < nobst; i++)
        if (obst[i].hi > window)
            window = ts_round_up(obst[i].hi, p->gran);
    for (uint32_t k = 0; ok && k < n; k++)
        order[k] = k;
    if (ok) {
        qsort_r(order, n, sizeof *order, slot_order, sl);
        end = pack_from(sl, order, n, window, NULL, 0, taken);
        if (end > arena->base + arena->size) {
            window = arena->base;
            end = pack_from(sl, order, n, window, obst, nobst, taken);
        }
    }
    free(obst);
    free(taken);
    free(order);
    *end_out = end;
    *footprint = end - window;
    return ok && end <= arena->base + arena->size;
}

/* Marks keep[] for every page under [addr, addr+size). */
static void mark_pages(const ts_pool *p, uint8_t *keep, uint64_t addr, uint64_t size)
{
    uint64_t l = (addr + size - 1 - p->va_base) / p->gran;
    for (uint64_t i = (addr - p->va_base) / p->gran; i <= l; i++)
        keep[i] = 1;
}

/* Idle pages that no slot and no block the plan keeps (allocated before
 * it) will touch go back now: the plan's pages are what the steps need. */
static void release_unplanned(ts_pool *p, const plan_slot *sl, uint64_t n, uint64_t first_ord)
{
    uint8_t *keep = calloc(p->npages, 1);
    if (!keep)
        return;
    mark_pages(p, keep, p->va_base, p->arena[TS_KIND_PLANNED].base - p->va_base); /* the other arenas */
    for (uint64_t q = 0; q < n; q++)
        mark_pages(p, keep, sl[q].addr, sl[q].rsize);
    for (ts_block *b = p->arena[TS_KIND_PLANNED].first; b; b = b->next)
        if (stays(b, first_ord))
            mark_pages(p, keep, b->addr, b->size);
    ts_seg_release_idle_except(p, keep);
    free(keep);
}

/* The period ending at allocation o (the second of two equal ones) becomes
 * the plan for the allocations from o+1 on, over `cycles` periods. */
static void plan_adopt(ts_pool *p, uint64_t o, uint64_t period, uint64_t cycles)
{
    ts_plan *pl = p->plan;
    uint64_t n = period * cycles, first = o + 1 - n, end = 0, footprint = 0;
    plan_slot *sl = plan_slots(pl, o + 1 - 2 * period, period, cycles);
    if (!sl || !plan_pack(p, sl, n, first, &end, &footprint)) {
        free(sl);
        pl->st.failed++;
        return;
    }
    plan_drop(pl);
    pl->slot = sl;
    pl->period = n;
    pl->base = first;
    pl->end = end;
    pl->period_miss = 0;
    pl->transition = true;
    pl->st.adopted++;
    pl->st.period = n;
    pl->st.footprint = footprint;
    release_unplanned(p, sl, n, first);
}

/* Candidates after allocation o: streaks extended or ended; a streak of a
 * whole period (a multiple, once per period) is checked and planned unless
 * a plan of that period or a longer one is in force. */
static void detect(ts_pool *p, uint64_t o)
{
    ts_plan *pl = p->plan;
    propose_from_window(pl, o);
    for (int c = 0; c < PLAN_NCAND; c++) {
        uint64_t per = pl->cand[c].p;
        if (!per)
            continue;
        if (o < per || !same_request(rec_at(pl, o), rec_at(pl, o - per))) {
            pl->cand[c].p = pl->cand[c].streak = 0;
            continue;
        }
        uint64_t st = ++pl->cand[c].streak;
        if (st < per || st % per || pl->period >= per)
            continue;
        uint64_t cycles = period_cycles(pl, o, per);
        if (cycles)
            plan_adopt(p, o, per, cycles);
    }
}

/* ---- recording and placement ------------------------------------------------ */

void ts_plan_on_alloc(ts_pool *p, ts_block *b)
{
    ts_plan *pl = p->plan;
    uint64_t o = pl->n++;
    *rec_at(pl, o) = (plan_rec){ b->size, b->stream, b->addr, PLAN_LIVE };
    b->ord = o;
    detect(p, o);
    if (o >= PLAN_WARMUP)
        p->grow_settled = true;
}

void ts_plan_on_free(ts_pool *p, const ts_block *b)
{
    ts_plan *pl = p->plan;
    if (b->ord + PLAN_RING > pl->n)
        rec_at(pl, b->ord)->freed_at = pl->n;
}

/* b can be part of a range an allocation on stream takes. */
static bool takeable(ts_pool *p, const ts_block *b, uint64_t stream)
{
    int st = __atomic_load_n(&b->state, __ATOMIC_RELAXED);
    const ts_index *ix = b->index;
    if (st == TS_B_FREE)
        return ix == &p->index[b->kind] || ix == &p->uindex[b->kind] || ix == &p->kindex;
    return ts_fence_pending_on(p, b, stream);
}

/* The blocks over [addr, addr+size) when each is free or a stream-ordered
 * free on `stream`: the first of them (the pending ones at the ends cut to
 * the range), else NULL. */
static ts_block *range_takeable(ts_pool *p, int kind, uint64_t addr, uint64_t size, uint64_t stream,
                                bool *pending)
{
    ts_block *near = kind == TS_KIND_PLANNED ? p->plan->near : NULL;
    ts_block *first = ts_seg_block_at(p, kind, near, addr), *b = first;
    *pending = false;
    for (; b && b->addr < addr + size; b = b->next) {
        if (!takeable(p, b, stream))
            return NULL;
        *pending |= __atomic_load_n(&b->state, __ATOMIC_RELAXED) == TS_B_PENDING;
    }
    if (!first || addr + size > p->arena[kind].base + p->arena[kind].size)
        return NULL; /* the arena's blocks tile it: the walk covered the range */
    if (__atomic_load_n(&first->state, __ATOMIC_RELAXED) == TS_B_PENDING && first->addr < addr) {
        first = ts_fence_split_pending(p, first, addr - first->addr);
        if (!first)
            return NULL;
    }
    ts_block *last = first;
    while (last->addr + last->size < addr + size)
        last = last->next;
    if (__atomic_load_n(&last->state, __ATOMIC_RELAXED) == TS_B_PENDING
        && last->addr + last->size > addr + size
        && !ts_fence_split_pending(p, last, addr + size - last->addr))
        return NULL;
    return first;
}

/* Takes [addr, addr+size) for an allocation on stream: TS_PROV_OK with *out,
 * else a miss (the range is not free, or its pages could not be had; what
 * was taken is given back as it was: pending again when part of it was). */
static int take_range(ts_pool *p, int kind, uint64_t addr, uint64_t size, uint64_t stream, ts_block **out)
{
    bool pending;
    ts_block *first = range_takeable(p, kind, addr, size, stream, &pending);
    if (!first)
        return TS_PROV_OOM;
    for (ts_block *b = first; b && b->addr < addr + size; b = b->next) {
        if (__atomic_load_n(&b->state, __ATOMIC_RELAXED) == TS_B_PENDING)
            ts_fence_claim(p, b);
        else
            ts_index_remove(b->index, b);
    }
    ts_block *b = NULL;
    int rc = ts_seg_take_run(p, first, addr, size, &b);
    if (rc == TS_PROV_OK) {
        *out = b;
        if (kind == TS_KIND_PLANNED)
            p->plan->near = b;
        return rc;
    }
    if (pending)
        ts_fence_pend(p, b, stream, true);
    else
        ts_seg_file_free(p, b);
    return rc;
}

/* Before a plan: the lowest range that can be taken, mapped or not (pages
 * move rather than grow then, so an address costs no memory).  Blocks that
 * stay for the whole run (parameters, optimizer state) then lie together
 * at the bottom instead of in the holes best fit would pick, and the plan's
 * window above them wastes no page around them. */
/* Until the plan settles, the pages a range lacks come from idle pages,
 * not new memory: when it lacks some and idle pages wait on fences, wait
 * for them (as best fit does before growing; only the first steps pay). */
static void room_unsettled(ts_pool *p, int kind, uint64_t addr, uint64_t size)
{
    if (p->grow_settled || kind != TS_KIND_PLANNED)
        return;
    if (p->idle_count && ts_seg_mapped_run(p, addr, size) < size)
        ts_fence_sync(p);
    else
        ts_fence_poll(p);
}

static int take_lowest(ts_pool *p, int kind, uint64_t from, uint64_t rsize, uint64_t stream, ts_block **out)
{
    ts_fence_poll(p);
    uint64_t start = 0;
    bool run = false;
    for (ts_block *b = p->arena[kind].first; b; b = b->next) {
        if (!takeable(p, b, stream) || b->addr + b->size <= from) {
            run = false;
            continue;
        }
        if (!run)
            start = b->addr > from ? b->addr : from, run = true;
        if (b->addr + b->size - start >= rsize) {
            room_unsettled(p, kind, start, rsize);
            return take_range(p, kind, start, rsize, stream, out);
        }
    }
    return TS_PROV_OOM;
}

int ts_plan_take(ts_pool *p, int kind, uint64_t rsize, uint64_t stream, ts_block **out)
{
    ts_plan *pl = p->plan;
    if (!pl || p->ncapturing)
        return TS_PROV_OOM;
    if (kind != TS_KIND_PLANNED || !pl->period)
        return p->grow_settled ? TS_PROV_OOM : take_lowest(p, kind, 0, rsize, stream, out);
    uint64_t k = (pl->n - pl->base) % pl->period;
    const plan_slot *s = &pl->slot[k];
    if (k == 0 && pl->n != pl->base + pl->period) {
        if (pl->transition) {
            /* a period without a miss, or the last one allowed, settles */
            pl->transition = pl->period_miss && pl->n < pl->base + (PLAN_TRANSITION + 1) * pl->period;
            p->grow_settled = !pl->transition;
            release_unplanned(p, pl->slot, pl->period, pl->base);
        }
        pl->period_miss = 0;
    }
    if (s->rsize != rsize || s->stream != stream) {
        plan_drop(pl); /* the program left the pattern */
        return TS_PROV_OOM;
    }
    room_unsettled(p, TS_KIND_PLANNED, s->addr, rsize);
    int rc = take_range(p, TS_KIND_PLANNED, s->addr, rsize, stream, out);
    if (rc == TS_PROV_OOM && p->q_head) {
        /* the range may wait on frees whose work is done: look (no wait) */
        ts_fence_poll(p);
        rc = take_range(p, TS_KIND_PLANNED, s->addr, rsize, stream, out);
    }
    if (rc == TS_PROV_OK) {
        pl->st.hits++;
        return rc;
    }
    pl->st.misses++;
    /* once settled, above the plan's window: a block that missed its place
     * must not take the places of the requests after it (in the transition,
     * where the earlier steps' blocks still lie, best fit reuses their
     * pages instead) */
    if (!pl->transition)
        rc = take_lowest(p, TS_KIND_PLANNED, pl->end, rsize, stream, out);
    if (++pl->period_miss > pl->period / 16 + 1 && !pl->transition)
        plan_drop(pl);
    return rc;
}

void ts_plan_stats_get(const ts_pool *p, ts_plan_stats *o)
{
    memset(o, 0, sizeof *o);
    if (p->plan) {
        *o = p->plan->st;
        o->active = p->plan->period != 0;
    }
}
