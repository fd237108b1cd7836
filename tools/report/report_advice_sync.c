/* report_advice_sync.c: the advice rules about the host waiting for the GPU
 * and the GPU waiting for the host (report_advice.h).
 *
 * host_sync    steps detected and at least 1 host synchronization per full
 *              step: a synchronize call that found work pending (or could
 *              not tell: device-wide), or a copy that made the host wait
 *              (synchronous, or D2H into pageable memory).  A synchronize
 *              that found its stream already done waited for nothing (the
 *              second half of a copy-and-sync) and does not count.  Figures:
 *              per step, the host time in them, the GPU idle from each one's
 *              return to the GPU's next work (CUPTI; n/a without), the top 3
 *              sites with their stacks (TRAINSHIM_STACKS).
 * input_stall  (CUPTI) steps detected, and at half the step starts or more
 *              the GPU ran no kernel for >= 1 ms around it (the kernel-free
 *              stretch holding the host's call of the step's first GEMM,
 *              after the GPU began the loop), those stretches >= 10% of the
 *              steps' time.  What the host was doing in them: copy calls,
 *              synchronizations, or neither (data loading, Python). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "report/report_acct.h"
#include "report/report_gpu.h"
#include "report/report_sites.h"
#include "report/report_spans.h"

#define SYNC_MIN_PER_STEP 1.0
#define STALL_MIN_SHARE 0.10
#define STALL_MIN_GAP_NS 1000000ull /* as the GPU TIMELINE counts idle gaps */

static bool sync_counts(const struct tslog_sync *s) { return !s->result && s->pending != TS_SYNC_IDLE; }

/* ---- the GPU's busy intervals (CUPTI) ----------------------------------- */
/* Activities by start with the running maximum of their ends: whether the
 * GPU is busy at t and when its next work starts. */
struct busy {
    const struct gpu_activity *acts;
    uint64_t *max_end; /* max end of acts[0..i] */
    size_t n;
    bool kernels_only;
};

static int busy_init(struct busy *b, const struct gpu_data *d, bool kernels_only)
{
    memset(b, 0, sizeof *b);
    b->kernels_only = kernels_only;
    b->acts = d->acts;
    b->max_end = malloc((d->n_acts + 1) * sizeof *b->max_end);
    if (!b->max_end)
        return -1;
    uint64_t m = 0;
    for (size_t i = 0; i < d->n_acts; i++) {
        if (!kernels_only || !d->acts[i].is_copy)
            m = d->acts[i].end_ns > m ? d->acts[i].end_ns : m;
        b->max_end[i] = m;
    }
    b->n = d->n_acts;
    return 0;
}

/* The first activity starting at or after t (n when none). */
static size_t busy_lower(const struct busy *b, uint64_t t)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->acts[mid].start_ns < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The idle stretch [*from, *to) holding t: false when the GPU is busy at t,
 * has done nothing before it, or does nothing after it. */
static bool busy_idle_at(const struct busy *b, uint64_t t, uint64_t *from, uint64_t *to)
{
    size_t i = busy_lower(b, t);
    uint64_t end_before = i ? b->max_end[i - 1] : 0;
    while (b->kernels_only && i < b->n && b->acts[i].is_copy)
        i++;
    if (i >= b->n || !end_before || end_before > t)
        return false;
    *from = end_before;
    *to = b->acts[i].start_ns;
    return true;
}

/* ---- host_sync ------------------------------------------------------------ */
struct sync_site {
    int32_t api;
    uint32_t stack_id;
    uint64_t count;
};

static int by_count(const void *a, const void *b)
{
    const struct sync_site *x = a, *y = b;
    return (x->count < y->count) - (x->count > y->count);
}

static int by_site(const void *a, const void *b)
{
    const struct sync_site *x = a, *y = b;
    if (x->api != y->api)
        return x->api < y->api ? -1 : 1;
    return (x->stack_id > y->stack_id) - (x->stack_id < y->stack_id);
}

/* One entry per (API, stack) with its count, from one entry per
 * synchronization; by count, descending. */
static void merge_sites(struct sync_site *sites, size_t *n)
{
    size_t out = 0;
    qsort(sites, *n, sizeof *sites, by_site);
    for (size_t i = 0; i < *n; i++) {
        if (out && !by_site(&sites[out - 1], &sites[i]))
            sites[out - 1].count++;
        else
            sites[out++] = (struct sync_site){ sites[i].api, sites[i].stack_id, 1 };
    }
    *n = out;
    qsort(sites, *n, sizeof *sites, by_count);
}

struct sync_totals {
    uint64_t copies, calls, wait_ns, copy_bytes, idle_ns;
    bool idle_known;
    struct sync_site *sites;
    size_t n_sites;
};

/* One synchronization that returned at t: its GPU idle until the next work. */
static void add_idle(struct sync_totals *t, const struct busy *b, uint64_t ret_ns)
{
    uint64_t from, to;
    if (b && busy_idle_at(b, ret_ns, &from, &to))
        t->idle_ns += to - ret_ns;
}

static int sync_collect(const struct tslog *log, uint64_t from, uint64_t to, const struct busy *b,
                        struct sync_totals *t)
{
    t->sites = calloc(log->n_syncs + log->n_events + 1, sizeof *t->sites);
    if (!t->sites)
        return -1;
    for (size_t i = 0; i < log->n_events; i++) {
        const struct tslog_event *e = &log->events[i];
        if (e->time_ns < from || e->time_ns >= to || !acct_copy_waits(e))
            continue;
        t->copies++, t->wait_ns += e->duration_ns, t->copy_bytes += e->bytes;
        add_idle(t, b, e->time_ns);
        t->sites[t->n_sites++] = (struct sync_site){ e->api, 0, 1 };
    }
    for (size_t i = 0; i < log->n_syncs; i++) {
        const struct tslog_sync *s = &log->syncs[i];
        if (s->time_ns < from || s->time_ns >= to || !sync_counts(s))
            continue;
        t->calls++, t->wait_ns += s->blocked_ns;
        add_idle(t, b, s->time_ns);
        t->sites[t->n_sites++] = (struct sync_site){ s->api, s->stack_id, 1 };
    }
    merge_sites(t->sites, &t->n_sites);
    return 0;
}

/* Frame k as "function (file:line)", the function without its parameter
 * list (C++ names carry their whole signature), else the symbolizer's
 * short form. */
static void site_frame(struct sites_data *sd, const struct sites_stack *st, uint32_t k, char *out, size_t n)
{
    struct sym_frame f;
    sites_frame(sd, st, k, &f);
    size_t len = strlen(f.func);
    if (len > 6 && !strcmp(f.func + len - 6, " const"))
        len -= 6;
    if (len && f.func[len - 1] == ')') /* back to the '(' that opens the parameters */
        for (size_t depth = 0, i = len; i-- > 0;) {
            depth += f.func[i] == ')';
            depth -= f.func[i] == '(';
            if (!depth) {
                len = i;
                break;
            }
        }
    f.func[len] = 0;
    if (!len) {
        sym_format(&f, out, n);
        return;
    }
    const char *base = strrchr(f.file, '/'); /* the file's name: the path may be the builder's */
    if (f.file[0])
        snprintf(out, n, "%.120s (%.60s:%d)", f.func, base ? base + 1 : f.file, f.line);
    else
        snprintf(out, n, "%.180s", f.func);
}

/* The top sites with the first frames of their stacks. */
static void sync_sites(const struct tslog *log, const struct sync_totals *t, double steps,
                       struct advice_line *l)
{
    struct sites_data sd;
    bool have_stacks = sites_load(log, &sd) == 0;
    for (size_t i = 0; i < t->n_sites && l->n_sites < ADVICE_MAX_SITES; i++) {
        struct advice_site *s = &l->site[l->n_sites++];
        char name[64];
        snprintf(s->api, sizeof s->api, "%s", tslog_api_name(log, t->sites[i].api, name, sizeof name));
        s->per_step = (double)t->sites[i].count / steps;
        const struct sites_stack *st =
            have_stacks && t->sites[i].stack_id ? sites_stack(&sd, t->sites[i].stack_id) : NULL;
        for (uint32_t k = 0; st && k < st->n_frames && s->n_frames < ADVICE_SITE_FRAMES; k++)
            site_frame(&sd, st, k, s->frame[s->n_frames++], sizeof s->frame[0]);
    }
    sites_free(&sd);
}

/* "; sites: API (x/step) at f0 < f1 < f2, ..." */
static void sync_sites_text(const struct advice_line *l, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < l->n_sites && used < n; i++) {
        const struct advice_site *s = &l->site[i];
        used += (size_t)snprintf(buf + used, n - used, "%s%s (%.1f/step)", i ? "; " : "; sites: ", s->api,
                                 s->per_step);
        for (int k = 0; k < s->n_frames && used < n; k++)
            used += (size_t)snprintf(buf + used, n - used, "%s%.100s", k ? " < " : " at ", s->frame[k]);
    }
}

static void host_sync_text(struct advice_line *l, const struct sync_totals *t, double steps)
{
    uint64_t n = t->copies + t->calls;
    char idle[96] = "GPU idle after them n/a (no CUPTI records: TRAINSHIM_CUPTI=1)", sites[512];
    if (t->idle_known)
        snprintf(idle, sizeof idle, "the GPU then sat idle %.3f ms per step until its next work",
                 (double)t->idle_ns / steps / 1e6);
    sync_sites_text(l, sites, sizeof sites);
    snprintf(l->text, sizeof l->text,
             "%.1f host synchronizations per step (%llu in %.0f steps: %llu synchronize calls, %llu copies "
             "that waited for the GPU; %.3f ms of host time per step in them; %s; e.g. loss.item(), "
             ".cpu(), torch.cuda.synchronize()): each drains the GPU's queue; keep such values on the GPU "
             "and read them every N steps, or copy with non_blocking=True into pinned memory%s",
             (double)n / steps, (unsigned long long)n, steps, (unsigned long long)t->calls,
             (unsigned long long)t->copies, (double)t->wait_ns / steps / 1e6, idle, sites);
}

void advice_host_sync(const struct tslog *log, const struct acct_compute *c, struct advice_set *out)
{
    if (!c || c->n_steps < 2)
        return;
    uint64_t from = c->steps[0].start_ns, to = c->steps[c->n_steps - 1].start_ns;
    double steps = (double)(c->n_steps - 1);
    struct gpu_data d;
    struct busy b;
    bool gpu = gpu_load(log, &d) == 0;
    bool timed = gpu && d.n_acts && busy_init(&b, &d, false) == 0;
    struct sync_totals t = { .idle_known = timed };
    if (sync_collect(log, from, to, timed ? &b : NULL, &t) == 0
        && (double)(t.copies + t.calls) / steps >= SYNC_MIN_PER_STEP) {
        struct advice_line *l = advice_add(out, "host_sync");
        if (l) {
            uint64_t n = t.copies + t.calls;
            advice_figure(l, "syncs_per_step", (double)n / steps);
            advice_figure(l, "steps", steps);
            advice_figure(l, "host_wait_ns_per_step", (double)t.wait_ns / steps);
            advice_figure(l, "sync_calls_per_step", (double)t.calls / steps);
            advice_figure(l, "copy_waits_per_step", (double)t.copies / steps);
            advice_figure(l, "bytes_per_sync", t.copies ? (double)t.copy_bytes / (double)t.copies : NAN);
            advice_figure(l, "gpu_idle_ns_per_step", timed ? (double)t.idle_ns / steps : NAN);
            sync_sites(log, &t, steps, l);
            host_sync_text(l, &t, steps);
        }
    }
    free(t.sites);
    if (timed)
        free(b.max_end);
    if (gpu)
        gpu_free(&d);
}

void advice_sites_json(const struct acct_json *j, const struct advice_line *l)
{
    if (!l->n_sites)
        return;
    j->open(j->ctx, "sites", '[');
    for (int i = 0; i < l->n_sites; i++) {
        j->open(j->ctx, NULL, '{');
        j->str(j->ctx, "api", l->site[i].api);
        j->num(j->ctx, "per_step", l->site[i].per_step);
        j->open(j->ctx, "frames", '[');
        for (int k = 0; k < l->site[i].n_frames; k++)
            j->str(j->ctx, NULL, l->site[i].frame[k]);
        j->close(j->ctx, ']');
        j->close(j->ctx, '}');
    }
    j->close(j->ctx, ']');
}

/* ---- input_stall ----------------------------------------------------------- */
struct stall_totals {
    uint64_t idle_ns, copy_ns, wait_ns, stretches;
};

/* The host's copy calls and synchronizations, sorted once. */
struct host_spans {
    struct span_set copies, syncs;
};

/* Host time in copy calls and synchronizations within [from, to), each
 * capped at the stretch (calls on several threads may overlap). */
static void host_in(const struct host_spans *h, uint64_t from, uint64_t to, struct stall_totals *t)
{
    uint64_t len = to - from;
    uint64_t copy = span_set_overlap(&h->copies, from, to), wait = span_set_overlap(&h->syncs, from, to);
    copy = copy < len ? copy : len;
    wait = wait < len - copy ? wait : len - copy;
    t->copy_ns += copy, t->wait_ns += wait, t->idle_ns += len;
}

static void stall_text(struct advice_line *l, const struct stall_totals *t, double share, double steps)
{
    double idle = (double)t->idle_ns, copy = (double)t->copy_ns / idle, wait = (double)t->wait_ns / idle;
    double other = 1.0 - copy - wait;
    const char *fix =
        copy >= other
            ? "pin the batches (DataLoader(pin_memory=True)) and copy them with .to(device, "
              "non_blocking=True); "
              "more DataLoader workers (num_workers) and a larger prefetch_factor keep the next batch ready"
            : "the next batch was not ready: raise DataLoader num_workers and prefetch_factor (batches "
              "prepared ahead), and pin_memory=True with .to(device, non_blocking=True) for the copy";
    snprintf(l->text, sizeof l->text,
             "the GPU ran no kernel for %.1f%% of the step time at step starts (%.3f ms per step over %.0f "
             "steps), while the host was in copies %.0f%% of it, waiting for the GPU %.0f%%, elsewhere "
             "%.0f%% (data loading, Python): input-bound; %s",
             100.0 * share, idle / steps / 1e6, steps, 100.0 * copy, 100.0 * wait, 100.0 * other, fix);
}

/* The end of the first kernel started at or after the loop's first GEMM
 * call t0 (UINT64_MAX when none). */
static uint64_t loop_begun(const struct busy *b, uint64_t t0)
{
    for (size_t i = busy_lower(b, t0); i < b->n; i++)
        if (!b->acts[i].is_copy)
            return b->acts[i].end_ns;
    return UINT64_MAX;
}

void advice_input_stall(const struct tslog *log, const struct acct_compute *c, struct advice_set *out)
{
    struct gpu_data d;
    struct busy b;
    if (!c || c->n_steps < 2 || gpu_load(log, &d))
        return;
    struct stall_totals t = { 0 };
    uint64_t span = c->steps[c->n_steps - 1].start_ns - c->steps[0].start_ns;
    struct host_spans h;
    bool have_spans = span_set_copies(&h.copies, log, NULL) == 0;
    if (have_spans && span_set_syncs(&h.syncs, log) != 0) {
        span_set_free(&h.copies);
        have_spans = false;
    }
    if (have_spans && d.n_kernels && busy_init(&b, &d, true) == 0) {
        uint64_t last_to = 0, begun = loop_begun(&b, c->steps[0].start_ns);
        for (size_t i = 1; i < c->n_steps; i++) {
            uint64_t from, to, prev = c->steps[i - 1].start_ns;
            /* a stretch holding several step starts (the host ran ahead
             * while the GPU was idle) counts once, and from the previous
             * step's start at the earliest; none before the GPU ran the
             * loop's first kernel (its start-up is not the input's) */
            if (!busy_idle_at(&b, c->steps[i].start_ns, &from, &to) || to == last_to || from < begun)
                continue;
            last_to = to;
            from = from > prev ? from : prev;
            if (to - from >= STALL_MIN_GAP_NS) /* shorter: launch gaps, scheduling noise */
                host_in(&h, from, to, &t), t.stretches++;
        }
        free(b.max_end);
    }
    if (have_spans) {
        span_set_free(&h.copies);
        span_set_free(&h.syncs);
    }
    gpu_free(&d);
    double steps = (double)(c->n_steps - 1), share = span ? (double)t.idle_ns / (double)span : 0;
    /* an input stall is systematic: most step starts wait */
    if (share < STALL_MIN_SHARE || 2 * t.stretches < c->n_steps - 1)
        return;
    struct advice_line *l = advice_add(out, "input_stall");
    if (!l)
        return;
    advice_figure(l, "idle_share", share);
    advice_figure(l, "idle_ns_per_step", (double)t.idle_ns / steps);
    advice_figure(l, "steps", steps);
    advice_figure(l, "stalled_steps", (double)t.stretches);
    advice_figure(l, "host_copy_share", (double)t.copy_ns / (double)t.idle_ns);
    advice_figure(l, "host_wait_share", (double)t.wait_ns / (double)t.idle_ns);
    advice_figure(l, "host_other_share", (double)(t.idle_ns - t.copy_ns - t.wait_ns) / (double)t.idle_ns);
    stall_text(l, &t, share, steps);
}
