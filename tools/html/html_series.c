/* html_series.c: the page's time series other than memory, bucketed here so
 * the page embeds a bounded amount of data whatever the log's size: copies
 * by direction, the pinned copy engine's conversions, GPU busy time, and
 * the pools' OOM points read from the log's raw records. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "html/html_report.h"
#include "report/report_gpu.h"

uint64_t html_run_ns(const struct tslog *log)
{
    uint64_t end = log->complete ? log->end_time_ns : log->last_time_ns;
    return end > log->start_mono_ns ? end - log->start_mono_ns : 0;
}

struct html_axis html_axis_of(const struct tslog *log)
{
    uint64_t run = html_run_ns(log);
    return (struct html_axis){ log->start_mono_ns, run ? run : 1 };
}

size_t html_bucket_of(const struct html_axis *a, uint64_t t)
{
    if (t <= a->t0)
        return 0;
    unsigned __int128 b = (unsigned __int128)(t - a->t0) * HTML_BUCKETS / a->span;
    return b >= HTML_BUCKETS ? HTML_BUCKETS - 1 : (size_t)b;
}

void html_u64_array(struct json *j, const char *key, const uint64_t *v, size_t n)
{
    j_key(j, key);
    fputc('[', j->f);
    for (size_t i = 0; i < n; i++)
        fprintf(j->f, i ? ",%llu" : "%llu", (unsigned long long)v[i]);
    fputc(']', j->f);
}

/* ---- raw records: conversions and pool OOMs ---------------------------- */
struct raw_walk {
    const struct tslog *log;
    struct html_axis axis;
    struct html_raw *r;
};

static void add_oom(struct html_raw *r, const struct html_oom *o)
{
    r->oom_total++;
    if (r->n_ooms < HTML_MAX_OOMS)
        r->ooms[r->n_ooms++] = *o;
}

static int raw_one(void *arg, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct raw_walk *w = arg;
    if (h->type == TS_REC_COPY_CONVERT && h->len >= sizeof(struct ts_rec_copy_convert)) {
        struct ts_rec_copy_convert c;
        memcpy(&c, rec, sizeof c);
        w->r->converted[html_bucket_of(&w->axis, h->time_ns)] += c.bytes;
    } else if (h->type == TS_REC_POOL_OOM && h->len >= sizeof(struct ts_rec_pool_oom)) {
        struct ts_rec_pool_oom p;
        memcpy(&p, rec, sizeof p);
        struct html_oom o = { .at_ns = h->time_ns > w->axis.t0 ? h->time_ns - w->axis.t0 : 0,
                              .requested = p.requested,
                              .reserved = p.reserved_bytes,
                              .allocated = p.allocated_bytes,
                              .device = p.device,
                              .from_pool = true };
        add_oom(w->r, &o);
    }
    return 0;
}

/* A failed allocation call that a pool's refusal of the same request
 * (device, bytes, within 10 ms before) already stands for. */
static bool pool_refused(const struct html_raw *r, const struct html_oom *o)
{
    for (size_t i = 0; i < r->n_ooms; i++) {
        const struct html_oom *p = &r->ooms[i];
        if (p->from_pool && p->device == o->device && p->requested == o->requested && p->at_ns <= o->at_ns
            && o->at_ns - p->at_ns < 10000000)
            return true;
    }
    return false;
}

void html_raw_load(const struct tslog *log, struct html_raw *r)
{
    memset(r, 0, sizeof *r);
    struct raw_walk w = { log, html_axis_of(log), r };
    if (log->raw) /* the valid bytes the reader kept */
        tslog_walk_records(log->raw, log->raw_size, raw_one, &w);
    /* failed allocation calls (a run without a pool has no OOM records) */
    for (size_t i = 0; i < log->n_events; i++) {
        const struct tslog_event *e = &log->events[i];
        if (e->type != TS_REC_ALLOC || !e->result)
            continue;
        struct html_oom o = { .at_ns = e->time_ns > w.axis.t0 ? e->time_ns - w.axis.t0 : 0,
                              .requested = e->bytes,
                              .device = e->device };
        if (!pool_refused(r, &o))
            add_oom(r, &o);
    }
}

/* ---- copies ------------------------------------------------------------- */
enum { COPY_H2D, COPY_D2H, COPY_D2D, COPY_OTHER, COPY_PAGEABLE, COPY_COLUMNS };

void html_copy_series(struct json *j, const struct tslog *log, const struct html_raw *raw)
{
    static const char *const keys[COPY_COLUMNS] = { "h2d", "d2h", "d2d", "other", "pageable" };
    uint64_t(*col)[HTML_BUCKETS] = calloc(COPY_COLUMNS, sizeof *col);
    struct html_axis a = html_axis_of(log);
    uint64_t calls = 0;
    for (size_t i = 0; col && i < log->n_events; i++) {
        const struct tslog_event *e = &log->events[i];
        if (e->type != TS_REC_COPY || e->result)
            continue;
        size_t b = html_bucket_of(&a, e->time_ns);
        int c = e->dir == TS_H2D   ? COPY_H2D
                : e->dir == TS_D2H ? COPY_D2H
                : e->dir == TS_D2D ? COPY_D2D
                                   : COPY_OTHER;
        col[c][b] += e->bytes;
        if (e->host_kind == TS_HOST_PAGEABLE && (c == COPY_H2D || c == COPY_D2H))
            col[COPY_PAGEABLE][b] += e->bytes;
        calls++;
    }
    j_open(j, "copy_series", '{');
    j_u64(j, "span_ns", a.span);
    j_u64(j, "calls", calls);
    for (int c = 0; col && c < COPY_COLUMNS; c++)
        html_u64_array(j, keys[c], col[c], HTML_BUCKETS);
    html_u64_array(j, "converted", raw->converted, HTML_BUCKETS);
    j_close(j, '}');
    free(col);
}

/* ---- GPU busy time --------------------------------------------------------- */
/* Adds [s, e) to the buckets it overlaps (time before the run's start is
 * not the run's; time after its end goes to the last bucket). */
static void add_busy(uint64_t *busy, const struct html_axis *a, uint64_t s, uint64_t e)
{
    if (s < a->t0)
        s = a->t0;
    while (s < e) {
        size_t b = html_bucket_of(a, s);
        uint64_t end = a->t0 + (uint64_t)((unsigned __int128)a->span * (b + 1) / HTML_BUCKETS);
        if (b == HTML_BUCKETS - 1 || end > e)
            end = e;
        if (end <= s) /* the bucket's end rounded down onto s */
            end = s + 1;
        busy[b] += end - s;
        s = end;
    }
}

void html_gpu_series(struct json *j, const struct tslog *log)
{
    struct gpu_data d;
    memset(&d, 0, sizeof d);
    uint64_t *busy = calloc(HTML_BUCKETS, sizeof *busy);
    if (!busy || gpu_load(log, &d) || !d.n_acts) {
        j_key(j, "gpu_series");
        fputs("null", j->f);
        gpu_free(&d);
        free(busy);
        return;
    }
    struct html_axis a = html_axis_of(log);
    uint64_t cs = d.acts[0].start_ns, ce = d.acts[0].end_ns; /* union of the activities, by start */
    for (size_t i = 1; i <= d.n_acts; i++) {
        if (i < d.n_acts && d.acts[i].start_ns <= ce) {
            if (d.acts[i].end_ns > ce)
                ce = d.acts[i].end_ns;
            continue;
        }
        add_busy(busy, &a, cs, ce);
        if (i < d.n_acts)
            cs = d.acts[i].start_ns, ce = d.acts[i].end_ns;
    }
    j_open(j, "gpu_series", '{');
    j_u64(j, "span_ns", a.span);
    j_u64(j, "kernels", d.n_kernels);
    j_u64(j, "copies", d.n_copies);
    html_u64_array(j, "busy_ns", busy, HTML_BUCKETS);
    j_close(j, '}');
    gpu_free(&d);
    free(busy);
}
