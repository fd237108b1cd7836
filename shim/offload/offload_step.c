/* offload_step.c: step-order placement.  The job's work is seen as it is
 * enqueued (the hooks call ts_offload_touch for copy and GEMM operands and
 * ts_offload_touch_args for kernel parameters): every pooled page reached is
 * noted with how many times the current step reached it and when first.
 *
 * Steps are found online, cheaply: the program's stream synchronizations
 * (cudaStreamSynchronize) cut the work into segments, each with a signature
 * (the kinds of operand it reached, in order: not addresses or extents,
 * which may change between steps); a step is the shortest run of
 * 1..PERIOD_MAX segments that repeats.  At each step boundary, before the
 * synchronization returns to the program, the previous step's use counts
 * and first-use order say what the next step needs: host-backed pages it
 * used most are promoted into whatever room the device has, then swapped in
 * place of device pages it used least (unused first, then the ones first
 * used farthest ahead).  A swap costs two page transfers, so it is made only
 * when the host page was used at least SWAP_MARGIN times more than the
 * device page it replaces.  A wrong guess costs link time only: every move
 * is the quiesce-and-swap of offload_move.c, with its rollback.
 *
 * Each step's figures go to the log (TS_REC_OFFLOAD_STEP): pages moved,
 * bytes reached, of them on host-backed pages, and the predicted link time,
 * (bytes moved + bytes reached on host pages) / TRAINSHIM_OFFLOAD_LINK_GBPS. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/core.h"
#include "log/logfmt.h"
#include "offload/offload_internal.h"

#define PERIOD_MAX 8  /* synchronizations per step, at most */
#define HISTORY 16    /* segment signatures kept: 2 * PERIOD_MAX */
#define MAX_PARAMS 64 /* kernel parameters looked at */
#define FUNC_SLOTS 512
#define SWAP_MARGIN 2 /* uses a swapped-in page must have over the page it replaces */

struct page_use {
    uint64_t va; /* 0: empty slot */
    uint32_t uses, first;
};

struct use_map {
    struct page_use *slot;
    size_t cap, n;
};

struct mapped_page {
    uint64_t va;
    bool host;
};

/* A kernel's pointer-sized parameters (indexes), learned once per function. */
struct func_params {
    const void *func;
    uint8_t n, idx[MAX_PARAMS];
};

static struct step_state {
    pthread_mutex_t lock;
    struct use_map cur, prev;
    uint32_t seq; /* touches so far in the current step */
    uint64_t sig; /* signature of the current segment */
    uint64_t history[HISTORY];
    unsigned nhist, period, since_boundary;
    uint32_t step;
    uint64_t touched, host_touched, touches;
    uint64_t promoted0, demoted0; /* the move counters at the step's start */
    struct mapped_page *pages;    /* the pools' mapped pages, sorted */
    size_t npages, cappages;
    uint64_t pages_gen, gran;
    bool pages_known, exit_registered;
    struct func_params funcs[FUNC_SLOTS];
} st = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ---- the per-step page map (st.lock held) ---- */

static size_t slot_of(const struct use_map *m, uint64_t va)
{
    size_t j = (size_t)((va >> 21) * 0x9e3779b97f4a7c15ull) & (m->cap - 1);
    while (m->slot[j].va && m->slot[j].va != va)
        j = (j + 1) & (m->cap - 1);
    return j;
}

static bool map_grow(struct use_map *m)
{
    size_t cap = m->cap ? 2 * m->cap : 256;
    struct page_use *t = calloc(cap, sizeof *t);
    if (!t)
        return false;
    struct use_map n = { t, cap, 0 };
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i].va)
            n.slot[slot_of(&n, m->slot[i].va)] = m->slot[i];
    n.n = m->n;
    free(m->slot);
    *m = n;
    return true;
}

static void map_note(struct use_map *m, uint64_t va, uint32_t seq)
{
    if ((m->n + 1) * 2 > m->cap && !map_grow(m))
        return; /* out of memory: this page's use is not learned */
    struct page_use *u = &m->slot[slot_of(m, va)];
    if (!u->va) {
        *u = (struct page_use){ va, 0, seq };
        m->n++;
    }
    u->uses++;
}

static void map_clear(struct use_map *m)
{
    if (m->slot)
        memset(m->slot, 0, m->cap * sizeof *m->slot);
    m->n = 0;
}

/* ---- the pooled pages and which are host-backed (st.lock held) ---- */

static int collect_page(void *arg, ts_page_view *v)
{
    (void)arg;
    if (st.npages == st.cappages) {
        size_t c = st.cappages ? 2 * st.cappages : 256;
        struct mapped_page *a = realloc(st.pages, c * sizeof *a);
        if (!a)
            return -1;
        st.pages = a;
        st.cappages = c;
    }
    st.pages[st.npages++] = (struct mapped_page){ v->va, ts_off_host_has(v->handle) };
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Rebuilt only when a page was mapped, unmapped or changed its backing
 * since the last time. */
static void refresh_pages(void)
{
    uint64_t gen = __atomic_load_n(&ts_off.placement_gen, __ATOMIC_ACQUIRE);
    if (st.pages_known && gen == st.pages_gen)
        return;
    st.npages = 0;
    bool ok = true;
    for (int i = 0; i < TS_OFF_MAX_DEV && ok; i++)
        if (ts_off.dev[i].pool)
            ok = ts_pool_pages_walk(ts_off.dev[i].pool, collect_page, NULL) == 0;
    qsort(st.pages, st.npages, sizeof *st.pages, cmp_u64); /* va is the first member */
    st.pages_gen = gen;
    st.pages_known = ok;
}

static const struct mapped_page *page_at(uint64_t va)
{
    return st.npages ? bsearch(&va, st.pages, st.npages, sizeof *st.pages, cmp_u64) : NULL;
}

/* ---- touches ---- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

/* What a touch reaches: [ptr, ptr+len), or with len 0 the pooled block
 * from ptr to its end (a pointer inside a block, which the pool cannot
 * look up, counts as the rest of its page).  False outside the pools. */
static bool extent_of(uint64_t ptr, uint64_t len, uint64_t *hi)
{
    uint64_t gran = st.gran, base = 0, size = 0;
    if (!page_at(ptr & ~(gran - 1)))
        return false;
    if (len) {
        *hi = ptr + len;
        return true;
    }
    for (int i = 0; i < TS_OFF_MAX_DEV; i++)
        if (ts_off.dev[i].pool && ts_pool_lookup(ts_off.dev[i].pool, ptr, &base, &size) == TS_ALLOC_OK) {
            *hi = base + size;
            return true;
        }
    *hi = (ptr & ~(gran - 1)) + gran;
    return true;
}

/* One operand reached (st.lock held): its mapped pages are noted in the
 * step's order, and its bytes on host-backed pages counted. */
static void note_touch(uint64_t ptr, uint64_t len, unsigned kind)
{
    if (!st.gran) {
        for (int i = 0; i < TS_OFF_MAX_DEV && !st.gran; i++)
            st.gran = ts_off.dev[i].gran;
        if (!st.gran)
            return;
    }
    refresh_pages();
    uint64_t lo = ptr, hi;
    if (!extent_of(ptr, len, &hi))
        return;
    uint32_t seq = st.seq++;
    for (uint64_t va = lo & ~(st.gran - 1); va < hi; va += st.gran) {
        const struct mapped_page *pg = page_at(va);
        if (!pg)
            continue;
        uint64_t a = va > lo ? va : lo, b = va + st.gran < hi ? va + st.gran : hi;
        map_note(&st.cur, va, seq);
        st.touched += b - a;
        if (pg->host)
            st.host_touched += b - a;
    }
    st.touches++;
    st.sig = mix(st.sig, kind);
}

void ts_offload_touch_range(uint64_t ptr, uint64_t len, unsigned kind)
{
    if (ts_offload_mode() != TS_OFFLOAD_ON)
        return;
    pthread_mutex_lock(&st.lock);
    note_touch(ptr, len, kind);
    pthread_mutex_unlock(&st.lock);
}

/* The pointer-sized parameters of func, asked of param_info once. */
static const struct func_params *params_of(const void *func,
                                           int (*param_info)(const void *, size_t, size_t *, size_t *))
{
    size_t j = (size_t)(((uintptr_t)func >> 4) * 0x9e3779b97f4a7c15ull) & (FUNC_SLOTS - 1);
    for (size_t probe = 0; probe < FUNC_SLOTS; probe++, j = (j + 1) & (FUNC_SLOTS - 1)) {
        struct func_params *f = &st.funcs[j];
        if (f->func == func)
            return f;
        if (f->func)
            continue;
        size_t off, size;
        f->n = 0;
        for (size_t i = 0; i < MAX_PARAMS && param_info(func, i, &off, &size) == 0; i++)
            if (size == sizeof(uint64_t))
                f->idx[f->n++] = (uint8_t)i;
        f->func = func;
        return f;
    }
    return NULL; /* table full: this function's parameters are not looked at */
}

void ts_offload_touch_args_slow(const void *func, void **args,
                                int (*param_info)(const void *func, size_t i, size_t *off, size_t *size))
{
    if (ts_offload_mode() != TS_OFFLOAD_ON || !func || !param_info)
        return;
    pthread_mutex_lock(&st.lock);
    const struct func_params *f = params_of(func, param_info);
    for (unsigned i = 0; f && i < f->n; i++) {
        uint64_t p;
        memcpy(&p, args[f->idx[i]], sizeof p);
        if (p)
            note_touch(p, 0, TS_TOUCH_KERNEL);
    }
    pthread_mutex_unlock(&st.lock);
}

/* ---- step boundaries ---- */

static uint32_t link_mbps(void)
{
    uint64_t g = ts_cfg()->offload_link_gbps;
    return (uint32_t)(g ? (g > 4000000 ? 4000000 : g) * 1000 : 25000);
}

/* The current step's record; its counters start again (st.lock held). */
static void end_step(bool tail)
{
    struct ts_rec_offload_step r;
    memset(&r, 0, sizeof r);
    uint64_t p = __atomic_load_n(&ts_off.promoted_pages, __ATOMIC_RELAXED);
    uint64_t d = __atomic_load_n(&ts_off.demoted_pages, __ATOMIC_RELAXED);
    uint64_t gran = st.gran;
    r.step = st.step++;
    r.flags = tail ? TS_OFFLOAD_STEP_TAIL : 0;
    r.period = st.period;
    r.link_mbps = link_mbps();
    r.promoted_pages = p - st.promoted0;
    r.demoted_pages = d - st.demoted0;
    r.page_size = gran;
    r.touched_bytes = st.touched;
    r.host_touched_bytes = st.host_touched;
    r.link_bytes = (r.promoted_pages + r.demoted_pages) * gran + st.host_touched;
    r.predicted_ns = r.link_bytes * 1000 / r.link_mbps; /* bytes / (MB/s) = us */
    r.touches = st.touches;
    ts_ev_offload_step(&r);
    st.promoted0 = p;
    st.demoted0 = d;
    st.touched = st.host_touched = st.touches = 0;
    st.seq = 0;
    struct use_map t = st.prev;
    st.prev = st.cur;
    st.cur = t;
    map_clear(&st.cur);
}

/* A segment ended: true when it ends a step.  The period is the shortest
 * run of segments whose signatures repeat; it is looked for again when the
 * pattern changes. */
static bool segment_ends_step(void)
{
    if (st.nhist == HISTORY)
        memmove(st.history, st.history + 1, (HISTORY - 1) * sizeof *st.history);
    else
        st.nhist++;
    st.history[st.nhist - 1] = st.sig;
    st.sig = 0;
    st.since_boundary++;
    const uint64_t *h = st.history;
    unsigned n = st.nhist;
    if (st.period && n >= 2 * st.period
        && memcmp(h + n - st.period, h + n - 2 * st.period, st.period * sizeof *h))
        st.period = 0;
    for (unsigned p = 1; !st.period && p <= PERIOD_MAX && 2 * p <= n; p++)
        if (!memcmp(h + n - p, h + n - 2 * p, p * sizeof *h)) {
            st.period = p;
            st.since_boundary = p;
        }
    if (!st.period || st.since_boundary < st.period)
        return false;
    st.since_boundary = 0;
    return true;
}

static pid_t owner_pid;

/* The rest of the run as a last (tail) record; a fork child logs nothing. */
static void at_exit(void)
{
    if (getpid() != owner_pid)
        return;
    pthread_mutex_lock(&st.lock);
    if (st.touches || st.step)
        end_step(true);
    pthread_mutex_unlock(&st.lock);
}

static void place_for_next_step(void);

/* Called inside the program's synchronization hook, which holds the gate
 * shared: a boundary's moves need it exclusively, so this thread lets go of
 * its hold for them and takes it again before the hook returns.  The hold
 * exists: the segment that ended here had touches, which are only noted once
 * offload is available, so the hook's entry found the gate in use. */
void ts_offload_sync_seen_slow(void)
{
    if (ts_offload_mode() != TS_OFFLOAD_ON)
        return;
    pthread_mutex_lock(&st.lock);
    if (!st.exit_registered) {
        st.exit_registered = true;
        owner_pid = getpid();
        atexit(at_exit); /* after the log's own exit flush: runs before it */
    }
    bool boundary = st.touches && segment_ends_step();
    if (boundary)
        end_step(false);
    pthread_mutex_unlock(&st.lock);
    if (boundary && ts_cfg()->offload_step_order) {
        ts_offload_gate_leave(true);
        place_for_next_step();
        (void)ts_offload_gate_enter();
    }
}

/* ---- the placement at a boundary ---- */

struct cand {
    uint64_t va;
    uint32_t uses, first;
    bool host;
};

struct plan {
    struct page_use *uses; /* the previous step's, sorted by va */
    size_t nuses;
    struct cand *c;
    size_t n, cap;
    uint64_t room; /* pages the device can still back */
    bool room_known;
    uint64_t *demote, *promote; /* sorted */
    size_t ndemote, npromote;
};

static int cmp_use_va(const void *a, const void *b)
{
    return cmp_u64(&((const struct page_use *)a)->va, &((const struct page_use *)b)->va);
}

static bool paused_handle(uint64_t h)
{
    pthread_mutex_lock(&ts_off.lock);
    bool paused = false;
    for (size_t i = 0; i < ts_off.npaused && !paused; i++)
        paused = ts_off.paused[i].handle == h;
    pthread_mutex_unlock(&ts_off.lock);
    return paused;
}

static int collect_cand(void *arg, struct ts_off_dev *d, ts_page_view *v)
{
    struct plan *pl = arg;
    if (!pl->room_known && ts_off.drv.cuMemGetInfo) {
        size_t free_b = 0, total = 0;
        pl->room_known = true;
        if (ts_off.drv.cuMemGetInfo(&free_b, &total) == CUDA_SUCCESS && d->gran)
            pl->room = free_b / d->gran;
    }
    if (v->exported || ts_off_pinned(v->va, v->size) || paused_handle(v->handle))
        return 0;
    if (pl->n == pl->cap) {
        size_t c = pl->cap ? 2 * pl->cap : 256;
        struct cand *a = realloc(pl->c, c * sizeof *a);
        if (!a)
            return -1;
        pl->c = a;
        pl->cap = c;
    }
    struct page_use key = { .va = v->va }, *u = bsearch(&key, pl->uses, pl->nuses, sizeof key, cmp_use_va);
    pl->c[pl->n++] =
        (struct cand){ v->va, u ? u->uses : 0, u ? u->first : UINT32_MAX, ts_off_host_has(v->handle) };
    return 0;
}

/* Host pages: most used first, then first used soonest. */
static int cmp_promote(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->uses != y->uses)
        return x->uses > y->uses ? -1 : 1;
    return x->first < y->first ? -1 : x->first > y->first;
}

/* Device pages: least used first, then first used farthest ahead. */
static int cmp_demote(const void *a, const void *b) { return cmp_promote(b, a); }

/* Splits the candidates into host and device pages and picks the moves. */
static void choose(struct plan *pl)
{
    size_t nh = 0;
    for (size_t i = 0; i < pl->n; i++)
        if (pl->c[i].host) {
            struct cand t = pl->c[nh];
            pl->c[nh++] = pl->c[i];
            pl->c[i] = t;
        }
    struct cand *host = pl->c, *dev = pl->c + nh;
    size_t nd = pl->n - nh, j = 0;
    qsort(host, nh, sizeof *host, cmp_promote);
    qsort(dev, nd, sizeof *dev, cmp_demote);
    pl->demote = malloc((nd + 1) * sizeof *pl->demote);
    pl->promote = malloc((nh + 1) * sizeof *pl->promote);
    if (!pl->demote || !pl->promote)
        return;
    for (size_t i = 0; i < nh && host[i].uses; i++) {
        if (pl->room) {
            pl->room--;
        } else if (j < nd && host[i].uses >= dev[j].uses + SWAP_MARGIN) {
            pl->demote[pl->ndemote++] = dev[j++].va;
        } else {
            break;
        }
        pl->promote[pl->npromote++] = host[i].va;
    }
    qsort(pl->demote, pl->ndemote, sizeof *pl->demote, cmp_u64);
    qsort(pl->promote, pl->npromote, sizeof *pl->promote, cmp_u64);
}

static int demote_chosen(void *arg, struct ts_off_dev *d, ts_page_view *v)
{
    struct plan *pl = arg;
    if (!bsearch(&v->va, pl->demote, pl->ndemote, sizeof v->va, cmp_u64) || ts_off_host_has(v->handle))
        return 0;
    int rc = ts_off_move_page(d, v, true);
    return rc == TS_PROV_OK || rc == TS_PROV_OOM ? 0 : -1;
}

static int promote_chosen(void *arg, struct ts_off_dev *d, ts_page_view *v)
{
    struct plan *pl = arg;
    if (!bsearch(&v->va, pl->promote, pl->npromote, sizeof v->va, cmp_u64) || !ts_off_host_has(v->handle))
        return 0;
    int rc = ts_off_move_page(d, v, false);
    return rc == TS_PROV_OK ? 0 : 1; /* the device is full (or moves stopped): done */
}

/* The previous step's uses, sorted by page. */
static bool snapshot_uses(struct plan *pl)
{
    pthread_mutex_lock(&st.lock);
    pl->uses = malloc((st.prev.n + 1) * sizeof *pl->uses);
    for (size_t i = 0; pl->uses && i < st.prev.cap; i++)
        if (st.prev.slot[i].va)
            pl->uses[pl->nuses++] = st.prev.slot[i];
    pthread_mutex_unlock(&st.lock);
    if (pl->uses)
        qsort(pl->uses, pl->nuses, sizeof *pl->uses, cmp_use_va);
    return pl->uses != NULL;
}

static void place_for_next_step(void)
{
    pthread_mutex_lock(&ts_off.lock);
    bool any = ts_off.hcount > ts_off.npaused;
    pthread_mutex_unlock(&ts_off.lock);
    struct plan pl;
    memset(&pl, 0, sizeof pl);
    if (any && snapshot_uses(&pl) && ts_off_walk_all(collect_cand, &pl, false) == 0) {
        choose(&pl);
        if (pl.ndemote)
            ts_off_walk_all(demote_chosen, &pl, false);
        if (pl.npromote)
            ts_off_walk_all(promote_chosen, &pl, false);
    }
    free(pl.uses);
    free(pl.c);
    free(pl.demote);
    free(pl.promote);
}
