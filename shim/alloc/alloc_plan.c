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
 * Before a plan, such blocks go to a free range they fill exactly, else
 * the lowest free range not kept for a size asked for lately (one of whole
 * pages on a page boundary, place_in_run; see lowest_range) and idle pages
 * move rather than new ones being made, so the first steps stay at their
 * allocated peak too; large blocks also go to their arena's lowest free
 * range then, so those that stay (parameters, optimizer state) lie
 * together.
 *
 * Recording: every planned-kind allocation's size, stream, address and the
 * allocation count at its free, in a ring.  Detection: a hash of the last
 * PLAN_W requests proposes a period (the distance to the window's previous
 * occurrence); each proposal keeps a streak of requests equal to the one a
 * period before.  The first step also makes tensors that live on (a
 * workspace, the optimizer's state): where a streak breaks on requests of
 * the earlier sequence that are all still live, it skips them, so the
 * second step is matched against the first and the plan is in force from
 * the third.  A streak of a whole period is checked (lifetimes) and
 * planned.  A request other than the plan's suspends the plan (a pass
 * of another kind between steps: best fit serves it) until the program
 * comes back to the pattern, one still settling too (dropping it would
 * learn the pass's or a layer's pattern in its place); too many
 * placements that find their range taken drop a settled plan; best fit
 * serves in the meantime.  Growth stays bounded (pages move rather than
 * new ones being made) until a plan settles and, for the first PLAN_WARMUP
 * allocations, while it is suspended: a small model's plan may be one
 * layer's, settled long before the step's peak.
 *
 * Moving in: at adoption the pages the plan lacks move there from idle
 * pages it does not need, the first asked for first; the rest in advance,
 * from pages under blocks that die before the plan asks for them (mapped
 * there too, taken up with no driver call: ts_seg_move_in); until it
 * settles moves take pages it does not need first.
 * Blocks of the steps before still lie where they were put: the packing
 * keeps the requests of the plan's first period clear of those still live
 * (plan_old) when that needs no more pages than are mapped; a request
 * whose range one holds all the same goes where the plan leaves room while
 * it lives.
 * Nothing is unmapped: the reserved peak was reached before the plan.
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
#define PLAN_WARMUP 16384    /* allocations without a plan before growth is unbounded */
#define PLAN_TRANSITION 4    /* periods a new plan may take to settle */
#define PLAN_SKIP_MAX 1024   /* requests made once (workspaces, optimizer state) a skip passes */
#define PLAN_SKIP_BACK 64    /* requests before a break that may have matched skipped ones */
#define PLAN_SKIPS 4         /* skips a candidate may make */
#define PLAN_RESYNC 8        /* requests matching the plan's in a row that resume it */
#define PLAN_SUSPENDED 4     /* periods a suspended plan waits before any other may replace it */
#define PLAN_LEFT_BACK 16    /* slots before where the program left the pattern it may come back at */
#define PLAN_ASKED_LOG 9     /* 512 sizes remembered with the request that last asked for them */
#define PLAN_ASKED_LATELY 64 /* requests back that a size counts as asked for lately */

typedef struct plan_rec {
    uint64_t rsize, stream, addr;
    uint64_t freed_at; /* allocation count when freed, PLAN_LIVE while live */
} plan_rec;

typedef struct plan_asked {
    uint64_t rsize, at;
} plan_asked;

typedef struct plan_slot {
    uint64_t rsize, stream, addr;
    uint64_t a, f; /* lifetime in the period: allocated at a, freed before f (f <= a + p) */
} plan_slot;

struct ts_plan {
    plan_rec ring[PLAN_RING];
    uint64_t n; /* allocations so far */
    uint64_t ht_key[PLAN_HT], ht_pos[PLAN_HT];
    /* A candidate period p, and the requests it has matched in a row.  When
     * the earlier sequence held requests made once and never freed (a first
     * step that also creates workspaces and the optimizer's state), the
     * candidate skips them: before request skip_at[i] it compared with
     * skip_k[i] more requests back than after it. */
    struct {
        uint64_t p, streak, nskip;
        uint64_t skip_at[PLAN_SKIPS], skip_k[PLAN_SKIPS];
        uint64_t check_at; /* the request from which its period is checked */
    } cand[PLAN_NCAND];
    /* the plan in force (period 0: none) */
    uint64_t period, base; /* slot of allocation o: (o - base) % period */
    plan_slot *slot;
    uint64_t end;         /* the end of the plan's highest slot */
    uint64_t period_miss; /* placements that found their range taken, this period */
    /* The first periods of a plan: blocks of the steps before it are still
     * where they were put, so placements may miss (they go where the plan
     * leaves room, take_room); it ends after a period without a miss. */
    bool transition;
    /* A settled plan whose pattern the program leaves (an evaluation pass
     * between training steps) is suspended, not dropped: best fit serves
     * meanwhile.  It resumes at the slot where the program left it, or one
     * of the few before, when a request matches that slot (the program came
     * back to where it left: until PLAN_RESYNC requests match after, that
     * slot stays the place to come back to), or where the last PLAN_RESYNC
     * requests match a run of its slots found once in each of its cycles
     * (resync[], by the hash of the run: the first slot ending it and how
     * many do), in the cycle that comes next after the slot it was
     * suspended at. */
    bool suspended, left_pending;
    uint64_t suspended_at, suspended_slot; /* allocation count and slot when it was */
    uint64_t left_slot, matched;           /* where the program left the pattern; requests matched since */
    uint64_t cycle;                        /* requests per cycle (the template's period) */
    struct plan_run {
        uint64_t key;
        uint32_t first, count;
    } * resync;
    uint64_t resync_mask;
    /* The sizes asked for, each with the last request that did (by a hash
     * of the size, the later overwriting: asked_lately) */
    plan_asked asked[1 << PLAN_ASKED_LOG];
    uint8_t *keep;  /* the pages the plan needs (plan_pages): moves take others first */
    ts_block *near; /* the block placed last: where the next walk starts */
    ts_plan_stats st;
};

static plan_rec *rec_at(ts_plan *pl, uint64_t o) { return &pl->ring[o & (PLAN_RING - 1)]; }

static size_t asked_slot(uint64_t rsize)
{
    return (size_t)((rsize >> 9) * 0x9E3779B97F4A7C15ull >> (64 - PLAN_ASKED_LOG));
}

/* A request among the last PLAN_ASKED_LATELY asked for rsize bytes (as far
 * as the table remembers: a size another overwrote counts as not asked). */
static bool asked_lately(const ts_plan *pl, uint64_t rsize)
{
    const plan_asked *a = &pl->asked[asked_slot(rsize)];
    return a->rsize == rsize && a->at + PLAN_ASKED_LATELY >= pl->n;
}

static bool same_request(const plan_rec *x, const plan_rec *y)
{
    return x->rsize == y->rsize && x->stream == y->stream;
}

/* Slot s is the request (rsize, stream). */
static bool slot_is(const plan_slot *s, uint64_t rsize, uint64_t stream)
{
    return s->rsize == rsize && s->stream == stream;
}

int ts_plan_init(ts_pool *p)
{
    p->plan = calloc(1, sizeof *p->plan);
    return p->plan ? 0 : -1;
}

void ts_plan_fini(ts_pool *p)
{
    if (p->plan) {
        free(p->plan->slot);
        free(p->plan->keep);
        free(p->plan->resync);
    }
    p->move_keep = NULL;
    free(p->plan);
    p->plan = NULL;
}

/* Whether growth is unbounded (else pages move rather than new ones being
 * made): once PLAN_WARMUP allocations have passed, or while a plan is in
 * force and has settled.  While a plan is suspended the bound is back: a
 * plan can settle on a pattern inside the step (one layer's backward) long
 * before the step's own peak, and what the program does outside it must
 * not grow the pool past that peak. */
static void note_settled(ts_pool *p)
{
    ts_plan *pl = p->plan;
    p->grow_settled = pl->n >= PLAN_WARMUP || (pl->period && !pl->transition && !pl->suspended);
}

static void plan_drop(ts_pool *p)
{
    ts_plan *pl = p->plan;
    if (!pl->period)
        return;
    pl->period = 0;
    pl->suspended = pl->left_pending = false;
    free(pl->slot);
    pl->slot = NULL;
    free(pl->keep);
    pl->keep = NULL;
    free(pl->resync);
    pl->resync = NULL;
    p->move_keep = NULL;
    pl->st.drops++;
    note_settled(p);
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
    pl->cand[free_at].nskip = pl->cand[free_at].check_at = 0;
}

#define REQ_HASH0 0x9e3779b97f4a7c15ull

static uint64_t req_hash(uint64_t h, uint64_t rsize, uint64_t stream)
{
    h = (h ^ (rsize >> 9)) * 0x100000001b3ull;
    return (h ^ stream) * 0xc2b2ae3d27d4eb4full;
}

/* h, then the requests recorded from allocation `from` to before `to`. */
static uint64_t recs_hash(ts_plan *pl, uint64_t h, uint64_t from, uint64_t to)
{
    for (uint64_t k = from; k < to; k++)
        h = req_hash(h, rec_at(pl, k)->rsize, rec_at(pl, k)->stream);
    return h;
}

static void propose_from_window(ts_plan *pl, uint64_t o)
{
    if (o + 1 < PLAN_W)
        return;
    uint64_t h = recs_hash(pl, REQ_HASH0, o + 1 - PLAN_W, o + 1) | 1; /* 0: an empty entry */
    unsigned e = (unsigned)(h >> 52) & (PLAN_HT - 1);
    if (pl->ht_key[e] == h && o - pl->ht_pos[e] >= PLAN_MIN_PERIOD && o - pl->ht_pos[e] <= PLAN_MAX_PERIOD)
        cand_propose(pl, o - pl->ht_pos[e]);
    pl->ht_key[e] = h;
    pl->ht_pos[e] = o;
}

/* ---- suspension ---------------------------------------------------------------- */

/* The hash of the run of PLAN_RESYNC slots ending at slot k (circular). */
static uint64_t slot_run_hash(const ts_plan *pl, uint64_t k)
{
    uint64_t n = pl->period, h = REQ_HASH0;
    for (uint64_t j = 0; j < PLAN_RESYNC; j++) {
        const plan_slot *s = &pl->slot[(k + (PLAN_RESYNC - 1 - j) * (n - 1)) % n];
        h = req_hash(h, s->rsize, s->stream);
    }
    return h | 1;
}

/* The entry of the run hashed h in resync[] (its key 0 when absent). */
static struct plan_run *run_at(const ts_plan *pl, uint64_t h)
{
    uint64_t e = h & pl->resync_mask;
    while (pl->resync[e].key && pl->resync[e].key != h)
        e = (e + 1) & pl->resync_mask;
    return &pl->resync[e];
}

/* The plan's runs of slots by hash; without memory for it, a suspended
 * plan never resumes. */
static void resync_index(ts_plan *pl)
{
    uint64_t cap = 16;
    while (cap < 2 * pl->period)
        cap <<= 1;
    pl->resync = calloc(cap, sizeof *pl->resync);
    pl->resync_mask = cap - 1;
    for (uint64_t k = 0; pl->resync && k < pl->period; k++) {
        uint64_t h = slot_run_hash(pl, k);
        struct plan_run *r = run_at(pl, h);
        if (!r->key)
            *r = (struct plan_run){ h, (uint32_t)k, 0 };
        r->count++;
    }
}

/* The program left the plan's pattern at slot k. */
static void plan_suspend(ts_plan *pl, uint64_t k)
{
    pl->suspended = true;
    pl->suspended_at = pl->n;
    pl->suspended_slot = k;
    if (!pl->left_pending)
        pl->left_slot = k, pl->left_pending = true;
    pl->st.suspends++;
}

/* The plan resumes with the next request as slot k. */
static void plan_resume_at(ts_plan *pl, uint64_t k)
{
    pl->base = pl->n - k;
    pl->suspended = false;
    pl->period_miss = 0;
    pl->matched = 0;
    pl->st.resumes++;
}

/* Suspended: this request (rsize, stream) is the slot where the program
 * left the pattern or one of the PLAN_LEFT_BACK before it, or it and the
 * last PLAN_RESYNC - 1 requests are a run of slots found once in each
 * cycle: the plan resumes with this request as that slot (for a run, the
 * slot ending it in the cycle next after the one it was suspended in: a
 * pass between two steps, then the next step). */
static bool plan_resume(ts_plan *pl, uint64_t rsize, uint64_t stream)
{
    uint64_t h = REQ_HASH0, n = pl->period, cycles = n / pl->cycle;
    /* the pass that left it may have looked like the pattern for a few
     * requests (an evaluation begins as a forward pass does): the program
     * comes back at the earliest of the slots before that one this request
     * is */
    for (uint64_t d = PLAN_LEFT_BACK < n ? PLAN_LEFT_BACK : n - 1; pl->left_pending && d != UINT64_MAX; d--) {
        if (slot_is(&pl->slot[(pl->left_slot + n - d) % n], rsize, stream)) {
            plan_resume_at(pl, (pl->left_slot + n - d) % n);
            return true;
        }
    }
    if (!pl->resync || pl->n < PLAN_RESYNC)
        return false;
    h = recs_hash(pl, h, pl->n + 1 - PLAN_RESYNC, pl->n);
    const struct plan_run *r = run_at(pl, req_hash(h, rsize, stream) | 1);
    if (!r->key || r->count != cycles)
        return false;
    uint64_t first = r->first % pl->cycle, k = first, best = UINT64_MAX;
    for (uint64_t c = 0; c < cycles; c++) { /* the cycle next after the suspension */
        uint64_t at = first + c * pl->cycle, ahead = (at + n - pl->suspended_slot) % n;
        if (ahead < best) {
            best = ahead;
            k = at;
        }
    }
    for (uint64_t j = 0; j < PLAN_RESYNC; j++) { /* not a hash collision */
        const plan_rec *q = j ? rec_at(pl, pl->n - j) : NULL;
        if (!slot_is(&pl->slot[(k + n - j % n) % n], q ? q->rsize : rsize, q ? q->stream : stream))
            return false;
    }
    plan_resume_at(pl, k);
    return true;
}

/* ---- the template --------------------------------------------------------- */

/* A period about to be planned, read from the ring: the last period's
 * requests are c0..c0+p-1 (c0 = o+1-p), and idx[q] is the request of the
 * period before that matched request c0+q (the template: its blocks are
 * all freed, so their lifetimes are known).  idx ascends; it is c0+q-p,
 * less the skipped requests before the candidate's skip point. */
typedef struct {
    uint64_t p, c0, cycles;
    uint64_t *idx;
} plan_tmpl;

/* Allocation count F as a position in the template's frame: the template
 * is 0..p-1, the last period p..2p-1. */
static uint64_t tmpl_pos(const plan_tmpl *t, uint64_t F)
{
    if (F >= t->c0)
        return t->p + (F - t->c0);
    uint64_t lo = 0, hi = t->p; /* requests of the template made before F */
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (t->idx[mid] < F)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Request q of the template's lifetime in requests, 0 while it is live. */
static uint64_t tmpl_life(ts_plan *pl, const plan_tmpl *t, uint64_t q)
{
    uint64_t f = rec_at(pl, t->idx[q])->freed_at;
    return f == PLAN_LIVE ? 0 : tmpl_pos(t, f) - q;
}

/* The template of candidate c, a streak of a whole period after request o.
 * Every block of it freed by now, so nothing accumulates (a layer's forward
 * repeats too, but its activations stay): t->cycles is how many periods
 * the longest of them lived, rounded up (1, or 2 when a variable held the
 * step's tensor until the next step replaced it); false when one is still
 * live or lived longer, with *bad the last such request's place (the
 * template is good at the earliest that many requests later). */
static bool tmpl_make(ts_plan *pl, int c, uint64_t o, plan_tmpl *t, uint64_t *bad)
{
    uint64_t p = pl->cand[c].p, skipped = 0;
    *t = (plan_tmpl){ .p = p, .c0 = o + 1 - p, .cycles = 1 };
    *bad = p - 1;
    for (uint64_t i = 0; i < pl->cand[c].nskip; i++)
        if (t->c0 < pl->cand[c].skip_at[i])
            skipped += pl->cand[c].skip_k[i];
    if (o + 1 < 2 * p + skipped || !(t->idx = malloc(p * sizeof *t->idx)))
        return false;
    for (uint64_t q = 0; q < p; q++) {
        for (uint64_t i = 0; i < pl->cand[c].nskip; i++)
            if (t->c0 + q == pl->cand[c].skip_at[i])
                skipped -= pl->cand[c].skip_k[i];
        t->idx[q] = t->c0 + q - p - skipped;
    }
    *bad = UINT64_MAX;
    for (uint64_t q = 0; q < p; q++) {
        uint64_t life = tmpl_life(pl, t, q);
        if (!life || life > 2 * p)
            *bad = q;
        else if (life > p)
            t->cycles = 2;
    }
    if (*bad == UINT64_MAX)
        return true;
    free(t->idx);
    t->idx = NULL;
    return false;
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

/* The plan's slots, cycles x period of them: sizes and lifetimes those of
 * the template.  A block of the last cycle still live where its slot's next
 * one is placed makes that placement miss, once. */
static plan_slot *plan_slots(ts_plan *pl, const plan_tmpl *t)
{
    uint64_t n = t->p * t->cycles;
    plan_slot *sl = calloc(n, sizeof *sl);
    if (!sl)
        return NULL;
    for (uint64_t q = 0; q < n; q++) {
        const plan_rec *r = rec_at(pl, t->idx[q % t->p]);
        sl[q] = (plan_slot){
            .rsize = r->rsize, .stream = r->stream, .a = q, .f = q + tmpl_life(pl, t, q % t->p)
        };
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

/* A block of the period before the plan, live when it is adopted (a
 * gradient the next step's forward pass outlives, the logits a variable
 * holds): where the steps before put it, until `until`, its death as a
 * position in the plan's first period.  The requests made before then are
 * placed clear of it, so the plan's first step meets none of the blocks
 * before it in its way (and moves no page for one that missed its place);
 * later ones may use its range.  Its own slot's next block comes after it
 * (a slot's lifetime is at most the period). */
typedef struct {
    span at;
    uint64_t until;
} plan_old;

/* What a packing must keep clear of: the blocks that stay, and those of
 * the period before while they live. */
typedef struct {
    const span *obst;
    size_t nobst;
    const plan_old *old;
    size_t nold;
} plan_fixed;

/* Greedy packing from address base: each slot in `order`, the largest
 * first, at the lowest address clear of fx and of every placed slot whose
 * lifetime meets its own.  Returns the end of the highest. */
static uint64_t pack_from(plan_slot *sl, const uint32_t *order, uint64_t n, uint64_t base,
                          const plan_fixed *fx, span *taken)
{
    uint64_t end = base;
    for (uint64_t i = 0; i < n; i++) {
        plan_slot *s = &sl[order[i]];
        if (fx->nobst)
            memcpy(taken, fx->obst, fx->nobst * sizeof *fx->obst);
        size_t nt = fx->nobst;
        for (uint64_t j = 0; j < i; j++) {
            const plan_slot *o = &sl[order[j]];
            if (arcs_meet(s, o, n))
                taken[nt++] = (span){ o->addr, o->addr + o->rsize };
        }
        for (size_t j = 0; j < fx->nold; j++)
            if (s->a < fx->old[j].until)
                taken[nt++] = fx->old[j].at;
        s->addr = lowest_fit(taken, nt, base, s->rsize);
        if (s->addr + s->rsize > end)
            end = s->addr + s->rsize;
    }
    return end;
}

/* The window over the blocks that stay (obst, in address order) when the
 * highest of them, up to 1/16 of their bytes, stay obstacles inside it
 * instead: a block that stays but was made mid-step (a workspace) must
 * not lift the whole window.  *first gets the first obstacle left. */
static uint64_t window_over_most(const ts_pool *p, const span *obst, size_t nobst, size_t *first)
{
    uint64_t total = 0, top = 0;
    for (size_t i = 0; i < nobst; i++)
        total += obst[i].hi - obst[i].lo;
    size_t k = nobst;
    while (k > 0 && top + (obst[k - 1].hi - obst[k - 1].lo) <= total / 16) {
        k--;
        top += obst[k].hi - obst[k].lo;
    }
    *first = k;
    return k ? ts_round_up(obst[k - 1].hi, p->gran) : p->arena[TS_KIND_PLANNED].base;
}

/* Pages under the slots and the blocks that stay (what a plan costs in
 * memory), and how many of them are not mapped now (*lacking: what moving
 * to it costs in driver calls); UINT64_MAX when out of memory. */
static uint64_t plan_cost(const ts_pool *p, const plan_slot *sl, uint64_t n, const span *obst, size_t nobst,
                          uint64_t *lacking)
{
    uint64_t g = p->gran, used = 0, next = 0; /* pages from index next on not counted yet */
    span *all = malloc((n + nobst) * sizeof *all);
    *lacking = UINT64_MAX;
    if (!all)
        return UINT64_MAX;
    memcpy(all, obst, nobst * sizeof *obst);
    for (uint64_t q = 0; q < n; q++)
        all[nobst + q] = (span){ sl[q].addr, sl[q].addr + sl[q].rsize };
    qsort(all, n + nobst, sizeof *all, span_cmp);
    *lacking = 0;
    for (size_t i = 0; i < n + nobst; i++) {
        uint64_t f = (all[i].lo - p->va_base) / g, l = (all[i].hi - 1 - p->va_base) / g;
        for (uint64_t k = f > next ? f : next; k <= l; k++) {
            used++;
            *lacking += !p->pages[k].mapped;
        }
        if (l + 1 > next)
            next = l + 1;
    }
    free(all);
    return used;
}

/* The three windows' bases and the obstacles inside each (obst[from..]):
 * above every block that stays, above most of them, from the arena's base. */
static void plan_windows(const ts_pool *p, const span *obst, size_t nobst, uint64_t window[3], size_t from[3])
{
    size_t most = 0;
    window[1] = window_over_most(p, obst, nobst, &most);
    window[0] = window[2] = p->arena[TS_KIND_PLANNED].base;
    from[0] = nobst, from[1] = most, from[2] = 0;
    for (size_t i = 0; i < nobst; i++)
        if (obst[i].hi > window[0])
            window[0] = ts_round_up(obst[i].hi, p->gran);
}

/* A packing's figures, to choose among them. */
typedef struct {
    uint64_t cost; /* pages it needs: its slots' and the blocks that stay */
    uint64_t lack; /* of those, not mapped now */
    bool fits;     /* no more than the arena's pages mapped now: no new memory */
    bool clear;    /* its first period meets no block of the period before */
} plan_score;

/* One that fits in the pages mapped now (the reserved peak was reached
 * before the plan) first; of those, one clear of the period before's
 * blocks (its first period then misses no place, so it moves no page
 * then), then the fewest pages; of those that do not fit, the fewest
 * pages, then clear; then the fewest lacking now. */
static bool score_better(const plan_score *x, const plan_score *y)
{
    if (x->fits != y->fits)
        return x->fits;
    if (x->fits && x->clear != y->clear)
        return x->clear;
    if (x->cost != y->cost)
        return x->cost < y->cost;
    if (x->clear != y->clear)
        return x->clear;
    return x->lack < y->lack;
}

static uint64_t arena_mapped_pages(const ts_pool *p, int kind)
{
    uint64_t lo = (p->arena[kind].base - p->va_base) / p->gran, n = 0;
    for (uint64_t i = lo; i < lo + p->arena[kind].size / p->gran; i++)
        n += p->pages[i].mapped;
    return n;
}

/* Addresses for the slots, in a window above the blocks that stay (pages
 * are what memory costs, not addresses: the holes between the blocks that
 * stay are given back, and a window free of them packs to the lifetimes'
 * peak), or above most of them, or among them, each packed clear of the
 * period before's live blocks (old) or not: the best by score_better.
 * False if memory for the work is short or the plan does not fit; *end
 * gets the end of the highest slot, *footprint its distance from the
 * window. */
static bool plan_pack(ts_pool *p, plan_slot *sl, uint64_t n, uint64_t first_ord, const plan_old *old,
                      size_t nold, uint64_t *end_out, uint64_t *footprint)
{
    const ts_segment *arena = &p->arena[TS_KIND_PLANNED];
    size_t ocap = p->live_blocks + 1, from[3];
    span *obst = malloc(ocap * sizeof *obst), *taken = malloc((ocap + n + nold) * sizeof *taken);
    uint32_t *order = malloc(n * sizeof *order);
    plan_slot *best = malloc(n * sizeof *best);
    bool ok = obst && taken && order && best;
    size_t nobst = ok ? plan_obstacles(p, first_ord, obst, ocap) : 0;
    uint64_t window[3], best_end = UINT64_MAX, best_window = arena->base,
                        mapped = arena_mapped_pages(p, TS_KIND_PLANNED);
    plan_score top = { .cost = UINT64_MAX, .lack = UINT64_MAX };
    plan_windows(p, obst, nobst, window, from);
    for (uint32_t k = 0; ok && k < n; k++)
        order[k] = k;
    if (ok)
        qsort_r(order, n, sizeof *order, slot_order, sl);
    /* with no old block, packing clear of them would repeat the three others */
    for (int v = nold ? 0 : 3; ok && v < 6; v++) {
        int w = v % 3;
        plan_score sc = { .clear = v < 3 || !nold };
        plan_fixed fx = { obst + from[w], nobst - from[w], old, v < 3 ? nold : 0 };
        uint64_t end = pack_from(sl, order, n, window[w], &fx, taken);
        sc.cost = plan_cost(p, sl, n, obst, nobst, &sc.lack);
        sc.fits = sc.cost <= mapped;
        if (score_better(&sc, &top)) {
            top = sc;
            memcpy(best, sl, n * sizeof *sl);
            best_end = end;
            best_window = window[w];
        }
    }
    if (ok)
        memcpy(sl, best, n * sizeof *sl);
    free(obst);
    free(taken);
    free(order);
    free(best);
    *end_out = best_end;
    *footprint = best_end - best_window;
    return ok && best_end <= arena->base + arena->size;
}

/* Marks keep[] for every page under [addr, addr+size). */
static void mark_pages(const ts_pool *p, uint8_t *keep, uint64_t addr, uint64_t size)
{
    uint64_t l = (addr + size - 1 - p->va_base) / p->gran;
    for (uint64_t i = (addr - p->va_base) / p->gran; i <= l; i++)
        keep[i] = 1;
}

/* The pages a plan needs: its slots', the other arenas' and those of the
 * blocks it keeps (allocated before it); NULL when out of memory. */
static uint8_t *plan_pages(ts_pool *p, const plan_slot *sl, uint64_t n, uint64_t first_ord)
{
    uint8_t *keep = calloc(p->npages, 1);
    if (!keep)
        return NULL;
    mark_pages(p, keep, p->va_base, p->arena[TS_KIND_PLANNED].base - p->va_base); /* the other arenas */
    for (uint64_t q = 0; q < n; q++)
        mark_pages(p, keep, sl[q].addr, sl[q].rsize);
    for (ts_block *b = p->arena[TS_KIND_PLANNED].first; b; b = b->next)
        if (stays(b, first_ord))
            mark_pages(p, keep, b->addr, b->size);
    return keep;
}

/* The plan settles: growth is unbounded, but a page the plan lacks still
 * comes from an idle page it does not need while there is one.  Those stay
 * mapped meanwhile (a page is unmapped only under memory pressure, on a
 * trim or past the idle threshold): the reserved peak was reached before
 * the plan, and the settled steps make no driver call. */
static void plan_settle(ts_pool *p)
{
    ts_plan *pl = p->plan;
    pl->transition = false;
    pl->st.settled_calls = p->driver_calls;
    note_settled(p);
}

/* The blocks of the last period (allocations c0 on, slot ord - first) still
 * live, with their deaths in the plan's first period; NULL (none) when
 * memory is short: the plan's first step then finds some in its way. */
static plan_old *plan_olds(ts_pool *p, const plan_slot *sl, uint64_t n, uint64_t first, uint64_t c0,
                           size_t *nold)
{
    plan_old *old = malloc((p->live_blocks + 1) * sizeof *old);
    *nold = 0;
    for (ts_block *b = p->arena[TS_KIND_PLANNED].first; old && b; b = b->next) {
        if (__atomic_load_n(&b->state, __ATOMIC_RELAXED) != TS_B_LIVE || b->ord < c0 || b->ord - first >= n)
            continue;
        const plan_slot *s = &sl[b->ord - first];
        /* dies at its slot's end, a period on; one the template has dead
         * already is taken for the whole first period */
        old[(*nold)++] = (plan_old){ { b->addr, b->addr + b->size }, s->f >= n ? s->f - n : n };
    }
    return old;
}

/* The pages the plan lacks, before its first request (ts_seg_move_in): by
 * page of the arena, the first request of the plan's first period over it,
 * and the request before which the blocks over it all die (those of the
 * period before die where the plan has their slots end; any other block
 * stays).  Moved now, so that the steps from here on make no driver call. */
static void plan_move_in(ts_pool *p, const plan_slot *sl, uint64_t n, const plan_old *old, size_t nold)
{
    const ts_segment *a = &p->arena[TS_KIND_PLANNED];
    uint64_t g = p->gran, np = a->size / g;
    uint64_t *first_use = malloc(np * sizeof *first_use), *death = calloc(np, sizeof *death);
    for (uint64_t i = 0; first_use && i < np; i++)
        first_use[i] = UINT64_MAX;
    for (uint64_t k = 0; first_use && death && k < n; k++)
        for (uint64_t i = (sl[k].addr - a->base) / g; i <= (sl[k].addr + sl[k].rsize - 1 - a->base) / g; i++)
            if (k < first_use[i])
                first_use[i] = k;
    size_t j = 0; /* old is in address order, as the blocks */
    for (ts_block *b = a->first; first_use && death && b; b = b->next) {
        if (__atomic_load_n(&b->state, __ATOMIC_RELAXED) != TS_B_LIVE)
            continue;
        while (j < nold && old[j].at.lo < b->addr)
            j++;
        uint64_t d = j < nold && old[j].at.lo == b->addr ? old[j].until : UINT64_MAX;
        for (uint64_t i = (b->addr - a->base) / g; i <= (b->addr + b->size - 1 - a->base) / g; i++)
            if (d > death[i])
                death[i] = d;
    }
    if (first_use && death)
        ts_seg_move_in(p, TS_KIND_PLANNED, first_use, death);
    free(first_use);
    free(death);
}

/* The template of candidate c, a streak of a whole period after request o,
 * becomes the plan for the allocations from o+1 on, over its cycles. */
static void plan_adopt(ts_pool *p, int c, uint64_t o)
{
    ts_plan *pl = p->plan;
    plan_tmpl t;
    uint64_t bad = 0;
    if (!tmpl_make(pl, c, o, &t, &bad)) {
        /* look again once the requests that failed are out of the period,
         * or freed (a tensor the next step replaces: soon), at most once in
         * 1/64 of it (the check is O(period)) */
        uint64_t wait = bad + 1 < t.p / 64 ? bad + 1 : t.p / 64;
        pl->cand[c].check_at = o + (wait ? wait : 1);
        return;
    }
    uint64_t n = t.p * t.cycles, first = o + 1 - n, end = 0, footprint = 0;
    plan_slot *sl = plan_slots(pl, &t);
    free(t.idx);
    size_t nold = 0;
    plan_old *old = sl ? plan_olds(p, sl, n, first, t.c0, &nold) : NULL;
    bool packed = sl && plan_pack(p, sl, n, t.c0, old, nold, &end, &footprint);
    if (!packed) {
        free(old);
        free(sl);
        pl->st.failed++;
        return;
    }
    plan_drop(p);
    pl->slot = sl;
    pl->period = n;
    pl->base = first;
    pl->end = end;
    pl->period_miss = 0;
    pl->transition = true;
    pl->cycle = t.p;
    resync_index(pl);
    pl->st.adopted++;
    pl->st.period = n;
    pl->st.footprint = footprint;
    note_settled(p);
    /* moves take the pages it does not need first, from now on */
    pl->keep = plan_pages(p, sl, n, t.c0);
    p->move_keep = pl->keep;
    if (pl->keep) {
        ts_fence_sync(p); /* the idle pages that can move now */
        plan_move_in(p, sl, n, old, nold);
    }
    free(old);
}

/* Candidate c's streak ended at request o: when the requests it met in
 * the earlier sequence were made once and are all still live (a step that
 * also created the optimizer's state), skip them and go on.  The requests
 * before o may have matched the first skipped ones by chance (optimizer
 * state has the parameters' sizes, as do the optimizer's temporaries): the
 * skip may start up to PLAN_SKIP_BACK requests back, when those then match
 * past it too. */
static bool cand_skip(ts_plan *pl, int c, uint64_t o)
{
    uint64_t per = pl->cand[c].p;
    if (pl->cand[c].nskip == PLAN_SKIPS || pl->cand[c].streak <= PLAN_W)
        return false;
    for (uint64_t back = 0; back < PLAN_SKIP_BACK && back < pl->cand[c].streak; back++) {
        uint64_t from = o - per - back, k = 0;
        while (k < PLAN_SKIP_MAX && per > PLAN_MIN_PERIOD + k + 1
               && rec_at(pl, from + k)->freed_at == PLAN_LIVE)
            k++;
        bool match = k > 0 && k >= back;
        for (uint64_t j = 0; match && j <= back; j++)
            match = same_request(rec_at(pl, o - j), rec_at(pl, o - j - per + k));
        if (!match)
            continue;
        pl->cand[c].p = per - k;
        pl->cand[c].skip_at[pl->cand[c].nskip] = o - back;
        pl->cand[c].skip_k[pl->cand[c].nskip++] = k;
        return true;
    }
    return false;
}

/* A plan of period per may replace the one in force: none is, or it is
 * shorter; or it is suspended and per is not much shorter (a pass of
 * another kind, such as an evaluation, repeats each layer: its short
 * period is not the new pattern), or it has been for PLAN_SUSPENDED
 * periods. */
static bool plan_replaceable(const ts_plan *pl, uint64_t per)
{
    if (!pl->period || pl->period < per)
        return true;
    if (!pl->suspended)
        return false;
    return per >= pl->period / 2 || pl->n - pl->suspended_at > PLAN_SUSPENDED * pl->period;
}

/* Candidates after allocation o: streaks extended or ended; a streak of a
 * whole period is checked and planned unless a plan of that period or a
 * longer one is in force. */
static void detect(ts_pool *p, uint64_t o)
{
    ts_plan *pl = p->plan;
    propose_from_window(pl, o);
    for (int c = 0; c < PLAN_NCAND; c++) {
        uint64_t per = pl->cand[c].p;
        if (!per)
            continue;
        if (o < per || (!same_request(rec_at(pl, o), rec_at(pl, o - per)) && !cand_skip(pl, c, o))) {
            pl->cand[c].p = pl->cand[c].streak = 0;
            continue;
        }
        per = pl->cand[c].p;
        if (++pl->cand[c].streak < per || o < pl->cand[c].check_at || !plan_replaceable(pl, per))
            continue;
        plan_adopt(p, c, o);
    }
}

/* ---- recording and placement ------------------------------------------------ */

void ts_plan_on_alloc(ts_pool *p, ts_block *b)
{
    ts_plan *pl = p->plan;
    uint64_t o = pl->n++;
    *rec_at(pl, o) = (plan_rec){ b->size, b->stream, b->addr, PLAN_LIVE };
    pl->asked[asked_slot(b->size)] = (plan_asked){ b->size, o };
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
}

/* Where a block placed from start begins: a planned block of whole pages
 * on the next page boundary, any other at start. */
static uint64_t whole_pages_start(const ts_pool *p, int kind, uint64_t start, uint64_t rsize)
{
    return kind == TS_KIND_PLANNED && rsize % p->gran == 0 ? ts_round_up(start, p->gran) : start;
}

/* Where a block of rsize bytes goes in the free run [start, end), or
 * UINT64_MAX.  A planned block of whole pages starts on a page boundary
 * (whole_pages_start) when the run allows: it maps as many new pages as it
 * would right after the block before (leaving that block's last page part
 * empty instead of sharing it), and once freed it leaves whole pages, which can move,
 * instead of a hole with part of a page mapped at each end.  Torch's
 * GPT-2-small reserved 1.0027x its allocated peak before, 1.0010x after
 * (batch 4: 1.0073x, 1.0030x; batch 1: 1.0201x, 1.0157x); random batch
 * lengths, whose tensors are seldom whole pages, moved by +-0.0004.  For
 * a planned block, *holed notes the first place that would leave a hole
 * smaller than TS_PLAN_MIN below the next block in use (see lowest_range). */
static uint64_t place_in_run(ts_pool *p, int kind, uint64_t start, uint64_t end, uint64_t rsize,
                             uint64_t *holed)
{
    uint64_t a = whole_pages_start(p, kind, start, rsize);
    if (a != start && end >= a + rsize && (end - a - rsize == 0 || end - a - rsize >= TS_PLAN_MIN))
        return a;
    if (end - start < rsize)
        return UINT64_MAX;
    uint64_t left = end - start - rsize;
    if (kind != TS_KIND_PLANNED || left == 0 || left >= TS_PLAN_MIN)
        return start;
    if (*holed == UINT64_MAX)
        *holed = start;
    return UINT64_MAX;
}

/* The start of the lowest range from `from` up that can be taken, or
 * UINT64_MAX.  For a planned block:
 * - A range between blocks in use that it fills exactly comes first,
 *   wherever it lies: a block of the same shape freed before it (the layer
 *   before's temporaries, the step before's gradients) leaves room that
 *   nothing else fits as well, while the lowest range may be a larger hole
 *   that it would cut, leaving a remainder no later request fits until its
 *   neighbours die, the pages at both its ends mapped.
 * - Before a plan, a range of a size asked for by one of the last
 *   PLAN_ASKED_LATELY requests is kept for that size: a request of another
 *   size passes it over (for a higher range or the top) while one fits.  A
 *   transformer asks for its attention scores' size again a layer later,
 *   and the layer's smaller activations would otherwise cut the hole the
 *   scores before them left (with random batch lengths, one remainder per
 *   layer, none of whole pages).  Not once a plan is in force: its
 *   packing places the requests it knows, and a block that misses its
 *   place goes above the plan's window.
 * - A range that would leave a hole smaller than TS_PLAN_MIN below the
 *   next block in use is passed over while a higher one fits or leaves
 *   more: no planned block fits such a hole, so it would stay empty with
 *   its pages mapped while its neighbours live.  The lowest such range is
 *   taken when no other fits below the top.
 * Random-length GPT-2-small, live over 8 draws of the lengths: peak
 * reserved 1.0048x its allocated peak on average before these (worst
 * 1.0079), 1.0040x with exact ranges first (1.0066), 1.0024x with sizes
 * kept too (1.0043); every draw as good or better. */
static uint64_t lowest_range(ts_pool *p, int kind, uint64_t from, uint64_t rsize, uint64_t stream)
{
    uint64_t start = 0, holed = UINT64_MAX, lowest = UINT64_MAX;
    uint64_t kept = UINT64_MAX, kept_holed = UINT64_MAX; /* the lowest kept range that would do */
    bool run = false;
    for (ts_block *b = p->arena[kind].first; b; b = b->next) {
        if (takeable(p, b, stream) && b->addr + b->size > from) {
            if (!run)
                start = b->addr > from ? b->addr : from, run = true;
            continue;
        }
        uint64_t len = run ? b->addr - start : 0;
        run = false;
        if (len && kind == TS_KIND_PLANNED) {
            if (len == rsize)
                return start;
            if (lowest == UINT64_MAX && !p->plan->period && asked_lately(p->plan, len)) {
                if (kept == UINT64_MAX)
                    kept = place_in_run(p, kind, start, b->addr, rsize, &kept_holed);
                continue;
            }
        }
        if (len && lowest == UINT64_MAX)
            lowest = place_in_run(p, kind, start, b->addr, rsize, &holed);
        if (lowest != UINT64_MAX && kind != TS_KIND_PLANNED)
            return lowest;
    }
    if (lowest != UINT64_MAX)
        return lowest;
    if (holed != UINT64_MAX)
        return holed;
    if (kept == UINT64_MAX)
        kept = kept_holed;
    if (!run)
        return kept;
    uint64_t top = p->arena[kind].base + p->arena[kind].size;
    start = whole_pages_start(p, kind, start, rsize);
    return top >= start + rsize ? start : kept;
}

/* Takes the lowest range from `from` up, once the fences are polled
 * (frees whose work is done, synchronous ones included, may free a lower
 * one). */
static int take_lowest(ts_pool *p, int kind, uint64_t from, uint64_t rsize, uint64_t stream, ts_block **out)
{
    ts_fence_poll(p);
    uint64_t at = lowest_range(p, kind, from, rsize, stream);
    if (at == UINT64_MAX)
        return TS_PROV_OOM;
    room_unsettled(p, kind, at, rsize);
    return take_range(p, kind, at, rsize, stream, out);
}

/* A request whose planned range is taken (in the transition, by a block of
 * the steps before the plan) goes where no slot whose lifetime meets its
 * own lies and nothing is live now: room the plan leaves free until it
 * dies, over pages the plan maps anyway.  TS_PROV_OOM when there is none
 * that can be taken. */
static int take_room(ts_pool *p, const plan_slot *s, uint64_t rsize, uint64_t stream, ts_block **out)
{
    ts_plan *pl = p->plan;
    const ts_segment *arena = &p->arena[TS_KIND_PLANNED];
    span *taken = malloc((pl->period + p->live_blocks + 1) * sizeof *taken);
    if (!taken)
        return TS_PROV_OOM;
    size_t nt = 0;
    for (uint64_t q = 0; q < pl->period; q++)
        if (&pl->slot[q] != s && arcs_meet(s, &pl->slot[q], pl->period))
            taken[nt++] = (span){ pl->slot[q].addr, pl->slot[q].addr + pl->slot[q].rsize };
    for (ts_block *b = arena->first; b && nt < pl->period + p->live_blocks + 1; b = b->next)
        if (!takeable(p, b, stream))
            taken[nt++] = (span){ b->addr, b->addr + b->size };
    uint64_t at = lowest_fit(taken, nt, arena->base, rsize);
    free(taken);
    if (at + rsize > pl->end)
        return TS_PROV_OOM;
    return take_range(p, TS_KIND_PLANNED, at, rsize, stream, out);
}

int ts_plan_take(ts_pool *p, int kind, uint64_t rsize, uint64_t stream, ts_block **out)
{
    ts_plan *pl = p->plan;
    if (!pl || p->ncapturing)
        return TS_PROV_OOM;
    bool back = kind == TS_KIND_PLANNED && pl->period && (!pl->suspended || plan_resume(pl, rsize, stream));
    note_settled(p);
    /* best fit serves a suspended plan's requests, the pool's growth
     * bounded: the free ranges the plan leaves mapped first */
    if (!back)
        return p->grow_settled || pl->suspended ? TS_PROV_OOM : take_lowest(p, kind, 0, rsize, stream, out);
    uint64_t k = (pl->n - pl->base) % pl->period;
    const plan_slot *s = &pl->slot[k];
    if (k == 0 && pl->n != pl->base + pl->period) {
        /* a period without a miss, or the last one allowed, settles */
        if (pl->transition && !(pl->period_miss && pl->n < pl->base + (PLAN_TRANSITION + 1) * pl->period))
            plan_settle(p);
        pl->period_miss = 0;
    }
    if (!slot_is(s, rsize, stream)) {
        /* the program left the pattern: the plan waits for it (this
         * request may be where the program left it, after a pass that
         * looked like the pattern for a while), one still settling too */
        if (!pl->resync) {
            plan_drop(p);
            return TS_PROV_OOM;
        }
        plan_suspend(pl, k);
        back = plan_resume(pl, rsize, stream);
        note_settled(p);
        if (!back)
            return TS_PROV_OOM;
        k = (pl->n - pl->base) % pl->period;
        s = &pl->slot[k];
    }
    room_unsettled(p, TS_KIND_PLANNED, s->addr, rsize);
    int rc = take_range(p, TS_KIND_PLANNED, s->addr, rsize, stream, out);
    if (rc == TS_PROV_OOM && p->q_head) {
        /* the range may wait on frees whose work is done: look (no wait) */
        ts_fence_poll(p);
        rc = take_range(p, TS_KIND_PLANNED, s->addr, rsize, stream, out);
    }
    if (pl->left_pending && ++pl->matched >= PLAN_RESYNC)
        pl->left_pending = false; /* back in the pattern */
    if (rc == TS_PROV_OK) {
        pl->st.hits++;
        return rc;
    }
    pl->st.misses++;
    if (pl->left_pending) {
        /* back in the pattern only maybe (a pass that looks like it): the
         * plan waits again, and best fit serves this one */
        plan_suspend(pl, k);
        note_settled(p);
        return TS_PROV_OOM;
    }
    /* a block that missed its place must not take the places of the
     * requests after it: room the plan leaves free while it lives, else
     * above the plan's window */
    rc = take_room(p, s, rsize, stream, out);
    if (rc == TS_PROV_OOM)
        rc = take_lowest(p, TS_KIND_PLANNED, pl->end, rsize, stream, out);
    if (++pl->period_miss > pl->period / 16 + 1 && !pl->transition)
        plan_drop(p);
    return rc;
}

void ts_plan_stats_get(const ts_pool *p, ts_plan_stats *o)
{
    memset(o, 0, sizeof *o);
    if (p->plan) {
        *o = p->plan->st;
        o->enabled = true;
        o->active = p->plan->period != 0;
        o->settled = o->active && !p->plan->transition;
    }
}
