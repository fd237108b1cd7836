/* html_memory.c: the page's memory-over-time data: allocated bytes per
 * device in HTML_BUCKETS time buckets, and at each bucket's highest point
 * the largest live blocks with their call sites.
 *
 * Two replays of the alloc/free events in time order: the first finds each
 * bucket's highest point (the event after which it holds), the second
 * stops at those events and lists the largest live blocks of the device.
 * Buckets whose highest point is the same event share one list. */
#include <stdlib.h>
#include <string.h>

#include "html/html_report.h"
#include "report/report_sites.h"

#define MEM_DEVICES 8 /* devices >= this are counted as device 0, as MEMORY TIMELINE does */

/* Live allocations: open addressing on the pointer, backward-shift erase. */
struct live {
    uint64_t *ptr, *size, *time;
    uint8_t *dev;
    size_t cap, n, most; /* slots, entries, the most entries at once */
};

static size_t live_slot(const struct live *m, uint64_t p)
{
    size_t s = (size_t)ts_rec_mix64(p) & (m->cap - 1);
    while (m->ptr[s] && m->ptr[s] != p)
        s = (s + 1) & (m->cap - 1);
    return s;
}

static int live_init(struct live *m, size_t n)
{
    m->cap = 16;
    while (m->cap < n * 2 + 2)
        m->cap *= 2;
    m->n = m->most = 0;
    m->ptr = calloc(m->cap, 8);
    m->size = calloc(m->cap, 8);
    m->time = calloc(m->cap, 8);
    m->dev = calloc(m->cap, 1);
    return m->ptr && m->size && m->time && m->dev ? 0 : -1;
}

static void live_free(struct live *m)
{
    free(m->ptr);
    free(m->size);
    free(m->time);
    free(m->dev);
}

static void live_move(struct live *m, size_t to, size_t from)
{
    m->ptr[to] = m->ptr[from];
    m->size[to] = m->size[from];
    m->time[to] = m->time[from];
    m->dev[to] = m->dev[from];
    m->ptr[from] = 0;
}

static void live_erase(struct live *m, size_t s)
{
    m->ptr[s] = 0;
    for (size_t j = s;;) {
        j = (j + 1) & (m->cap - 1);
        if (!m->ptr[j])
            return;
        size_t home = (size_t)ts_rec_mix64(m->ptr[j]) & (m->cap - 1);
        if ((s < j) ? (home <= s || home > j) : (home <= s && home > j)) {
            live_move(m, s, j);
            s = j;
        }
    }
}

/* Applies e to m and to the per-device totals cur[]; returns the device
 * whose total grew or shrank by e, -1 when e changed nothing.  A pointer
 * handed out again without a free seen leaves the device it was on. */
static int live_apply(struct live *m, const struct tslog_event *e, uint64_t *cur)
{
    size_t s = live_slot(m, e->ptr);
    if (m->ptr[s])
        cur[m->dev[s]] -= m->size[s];
    else if (e->type == TS_REC_ALLOC && ++m->n > m->most)
        m->most = m->n;
    if (e->type == TS_REC_ALLOC) {
        int d = e->device >= 0 && e->device < MEM_DEVICES ? e->device : 0;
        m->ptr[s] = e->ptr;
        m->size[s] = e->bytes;
        m->time[s] = e->time_ns;
        m->dev[s] = (uint8_t)d;
        cur[d] += e->bytes;
        return d;
    }
    if (!m->ptr[s])
        return -1;
    int d = m->dev[s];
    live_erase(m, s);
    m->n--;
    return d;
}

/* ---- first replay: each bucket's highest point ----------------------------- */
struct mem_scan {
    uint64_t hi[MEM_DEVICES][HTML_BUCKETS];
    long at[MEM_DEVICES][HTML_BUCKETS]; /* event index after which hi holds; -1: before any */
    uint64_t peak[MEM_DEVICES], peak_ns[MEM_DEVICES];
    bool seen[MEM_DEVICES];
};

static void scan_highs(const struct tslog_event **ev, size_t n, const struct html_axis *a, struct live *m,
                       struct mem_scan *p)
{
    uint64_t cur[MEM_DEVICES] = { 0 };
    size_t i = 0;
    for (size_t b = 0; b < HTML_BUCKETS; b++) {
        for (int d = 0; d < MEM_DEVICES; d++) {
            p->hi[d][b] = cur[d];
            p->at[d][b] = (long)i - 1;
        }
        for (; i < n && (b == HTML_BUCKETS - 1 || html_bucket_of(a, ev[i]->time_ns) <= b); i++) {
            int d = live_apply(m, ev[i], cur);
            if (d < 0)
                continue;
            p->seen[d] |= ev[i]->type == TS_REC_ALLOC;
            if (cur[d] > p->hi[d][b]) {
                p->hi[d][b] = cur[d];
                p->at[d][b] = (long)i;
            }
            if (cur[d] > p->peak[d]) {
                p->peak[d] = cur[d];
                p->peak_ns[d] = ev[i]->time_ns;
            }
        }
    }
}

/* ---- second replay: the largest live blocks at those points --------------- */
struct block {
    uint64_t ptr, bytes, time_ns;
};
struct snap {
    long at;
    int dev;
    uint64_t time_ns, live_bytes, live_blocks;
    struct block top[HTML_TOP_BLOCKS];
    int n_top;
};

static void take_snap(const struct live *m, struct snap *s)
{
    for (size_t k = 0; k < m->cap; k++) {
        if (!m->ptr[k] || m->dev[k] != s->dev)
            continue;
        s->live_bytes += m->size[k];
        s->live_blocks++;
        struct block b = { m->ptr[k], m->size[k], m->time[k] };
        int at = s->n_top;
        while (at > 0
               && (s->top[at - 1].bytes < b.bytes
                   || (s->top[at - 1].bytes == b.bytes && s->top[at - 1].time_ns > b.time_ns)))
            at--;
        if (at >= HTML_TOP_BLOCKS)
            continue;
        int last = s->n_top < HTML_TOP_BLOCKS ? s->n_top : HTML_TOP_BLOCKS - 1;
        memmove(&s->top[at + 1], &s->top[at], (size_t)(last - at) * sizeof b);
        s->top[at] = b;
        if (s->n_top < HTML_TOP_BLOCKS)
            s->n_top++;
    }
}

static int snap_by_at(const void *x, const void *y)
{
    const struct snap *a = x, *b = y;
    if (a->at != b->at)
        return a->at < b->at ? -1 : 1;
    return a->dev - b->dev;
}

/* One snapshot per distinct highest-point event of each seen device, in
 * replay order; snap_of[d][b]: the index of bucket b's (in that order). */
static struct snap *plan_snaps(const struct mem_scan *p, size_t *n_out)
{
    struct snap *s = calloc((size_t)MEM_DEVICES * HTML_BUCKETS, sizeof *s);
    size_t n = 0;
    for (int d = 0; s && d < MEM_DEVICES; d++)
        for (size_t b = 0; p->seen[d] && b < HTML_BUCKETS; b++)
            if (b == 0 || p->at[d][b] != p->at[d][b - 1])
                s[n++] = (struct snap){ .at = p->at[d][b], .dev = d };
    if (s)
        qsort(s, n, sizeof *s, snap_by_at);
    *n_out = n;
    return s;
}

/* m: empty, sized for the most blocks live at once (each snapshot scans
 * all its slots). */
static void replay_snaps(const struct tslog_event **ev, size_t n, uint64_t t0, struct live *m, struct snap *s,
                         size_t ns)
{
    uint64_t cur[MEM_DEVICES] = { 0 };
    size_t k = 0;
    for (; k < ns && s[k].at < 0; k++)
        s[k].time_ns = t0;
    for (size_t i = 0; i < n && k < ns; i++) {
        live_apply(m, ev[i], cur);
        for (; k < ns && s[k].at == (long)i; k++) {
            s[k].time_ns = ev[i]->time_ns;
            take_snap(m, &s[k]);
        }
    }
}

static size_t snap_index(const struct snap *s, size_t ns, long at, int dev)
{
    size_t lo = 0, hi = ns;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s[mid].at < at || (s[mid].at == at && s[mid].dev < dev))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- output ------------------------------------------------------------------ */
static void write_block(struct json *j, const struct block *b, uint64_t t0, const struct sites_data *sd)
{
    j_open(j, NULL, '{');
    j_u64(j, "bytes", b->bytes);
    j_u64(j, "allocated_at_ns", b->time_ns > t0 ? b->time_ns - t0 : 0);
    j_u64(j, "site", sd->n_stacks ? sites_stack_of(sd, b->ptr, b->time_ns) : 0);
    j_close(j, '}');
}

static void write_device(struct json *j, const struct tslog *log, const struct mem_scan *p, int d,
                         const struct snap *s, size_t ns, const struct sites_data *sd)
{
    uint64_t t0 = log->start_mono_ns, idx[HTML_BUCKETS];
    size_t local = 0, first = snap_index(s, ns, -1, d);
    j_open(j, NULL, '{');
    j_i64(j, "device", d);
    j_u64(j, "peak_allocated_bytes", p->peak[d]);
    j_u64(j, "peak_at_ns", p->peak_ns[d] > t0 ? p->peak_ns[d] - t0 : 0);
    j_key(j, "peak_reserved_bytes"); /* the pool's own figure; null without a pool */
    if (d < TSLOG_POOL_DEVS && log->pool_dev[d].seen)
        fprintf(j->f, "%llu", (unsigned long long)log->pool_dev[d].peak_reserved);
    else
        fputs("null", j->f);
    html_u64_array(j, "allocated_max", p->hi[d], HTML_BUCKETS);
    j_open(j, "snapshots", '[');
    for (size_t k = first; k < ns; k++) {
        if (s[k].dev != d)
            continue;
        j_open(j, NULL, '{');
        j_u64(j, "at_ns", s[k].time_ns > t0 ? s[k].time_ns - t0 : 0);
        j_u64(j, "live_bytes", s[k].live_bytes);
        j_u64(j, "live_blocks", s[k].live_blocks);
        j_open(j, "blocks", '[');
        for (int b = 0; b < s[k].n_top; b++)
            write_block(j, &s[k].top[b], t0, sd);
        j_close(j, ']');
        j_close(j, '}');
    }
    j_close(j, ']');
    for (size_t b = 0; b < HTML_BUCKETS; b++) { /* a device's snapshots in at order: count those before */
        size_t g = snap_index(s, ns, p->at[d][b], d);
        while (first < g) {
            local += s[first].dev == d;
            first++;
        }
        idx[b] = local;
    }
    html_u64_array(j, "snapshot_of_bucket", idx, HTML_BUCKETS);
    j_close(j, '}');
}

static int by_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* "sites": the symbolized stacks of the listed blocks (innermost first). */
static void write_sites(struct json *j, const struct snap *s, size_t ns, struct sites_data *sd)
{
    uint32_t *ids = sd->n_stacks ? malloc((ns * HTML_TOP_BLOCKS + 1) * sizeof *ids) : NULL;
    size_t n = 0;
    for (size_t k = 0; ids && k < ns; k++)
        for (int b = 0; b < s[k].n_top; b++) {
            uint32_t id = sites_stack_of(sd, s[k].top[b].ptr, s[k].top[b].time_ns);
            if (id)
                ids[n++] = id;
        }
    if (n)
        qsort(ids, n, sizeof *ids, by_u32);
    j_open(j, "sites", '[');
    for (size_t i = 0; i < n; i++) {
        const struct sites_stack *st = (i && ids[i] == ids[i - 1]) ? NULL : sites_stack(sd, ids[i]);
        if (!st)
            continue;
        j_open(j, NULL, '{');
        j_u64(j, "id", ids[i]);
        j_open(j, "frames", '[');
        for (uint32_t f = 0; f < st->n_frames; f++) {
            struct sym_frame fr;
            char text[800];
            sites_frame(sd, st, f, &fr);
            sym_format(&fr, text, sizeof text);
            j_sep(j);
            j_raw_string(j, text, strlen(text));
        }
        j_close(j, ']');
        j_close(j, '}');
    }
    j_close(j, ']');
    free(ids);
}

static void write_ooms(struct json *j, const struct html_raw *raw)
{
    j_u64(j, "oom_count", raw->oom_total);
    j_open(j, "ooms", '[');
    for (size_t i = 0; i < raw->n_ooms; i++) {
        const struct html_oom *o = &raw->ooms[i];
        j_open(j, NULL, '{');
        j_u64(j, "at_ns", o->at_ns);
        j_i64(j, "device", o->device);
        j_u64(j, "requested_bytes", o->requested);
        j_str(j, "kind", o->from_pool ? "pool" : "failed allocation");
        if (o->from_pool) {
            j_u64(j, "reserved_bytes", o->reserved);
            j_u64(j, "allocated_bytes", o->allocated);
        }
        j_close(j, '}');
    }
    j_close(j, ']');
}

int html_memory_series(struct json *j, const struct tslog *log, const struct html_raw *raw)
{
    size_t n = 0, ns = 0;
    const struct tslog_event **ev = sites_sorted_events(log, &n);
    struct mem_scan *p = calloc(1, sizeof *p);
    struct live m = { 0 };
    struct snap *s = NULL;
    struct html_axis a = html_axis_of(log);
    int rc = -1;
    if (!ev || !p || live_init(&m, n))
        goto out;
    scan_highs(ev, n, &a, &m, p);
    size_t most = m.most;
    live_free(&m);
    if (live_init(&m, most) || !(s = plan_snaps(p, &ns)))
        goto out;
    replay_snaps(ev, n, a.t0, &m, s, ns);
    struct sites_data sd;
    if (sites_load(log, &sd))
        sd.n_stacks = 0;
    j_open(j, "memory_series", '{');
    j_u64(j, "span_ns", a.span);
    j_open(j, "devices", '[');
    for (int d = 0; d < MEM_DEVICES; d++)
        if (p->seen[d])
            write_device(j, log, p, d, s, ns, &sd);
    j_close(j, ']');
    write_sites(j, s, ns, &sd);
    write_ooms(j, raw);
    j_close(j, '}');
    sites_free(&sd);
    rc = 0;
out:
    free(ev);
    free(p);
    free(s);
    live_free(&m);
    return rc;
}
