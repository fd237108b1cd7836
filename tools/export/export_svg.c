/* export_svg.c: the allocated-memory timeline as a plain SVG picture: one
 * step line per (log, device), time on x (seconds from the first log's
 * start), bytes on y, with gridlines, axis labels and a legend.  Each
 * series is reduced to at most two points per horizontal pixel (the value
 * entering the pixel and its highest), so a long run stays small and its
 * peaks stay visible. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "export/export.h"

enum { W = 960, H = 480, LEFT = 90, RIGHT = 200, TOP = 50, BOTTOM = 60, MAX_SERIES = 16 };

static const char *const colors[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf" };

struct point {
    uint64_t t, v;
};

struct series {
    int log, device;
    struct point *pts;
    size_t n, cap;
    uint64_t peak;
};

static int add_point(struct series *s, uint64_t t, uint64_t v)
{
    struct point *p = tslog_push_item((void **)&s->pts, &s->n, &s->cap, sizeof *p);
    if (!p)
        return -1;
    *p = (struct point){ t, v };
    if (v > s->peak)
        s->peak = v;
    return 0;
}

static struct series *series_of(struct series *all, int *n, int log, int device)
{
    for (int i = 0; i < *n; i++)
        if (all[i].log == log && all[i].device == device)
            return &all[i];
    if (*n == MAX_SERIES)
        return NULL;
    all[*n] = (struct series){ .log = log, .device = device };
    return &all[(*n)++];
}

struct collect_state {
    const struct tslog *log;
    int li;
    struct series *all;
    int *ns;
};

static int collect_point(void *arg, uint64_t time_ns, int dev, uint64_t allocated)
{
    struct collect_state *st = arg;
    struct series *se = series_of(st->all, st->ns, st->li, dev);
    return se ? add_point(se, export_wall_ns(st->log, time_ns), allocated) : 0;
}

/* Replays one log's allocations into per-device series (wall ns). */
static int collect(const struct tslog *log, int li, struct series *all, int *ns)
{
    struct collect_state st = { log, li, all, ns };
    return export_allocated_walk(log, collect_point, &st) ? -1 : 0;
}

static const char *human(double b, char *buf, size_t n)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
    return buf;
}

/* A round step near span/ticks: 1, 2 or 5 times a power of ten. */
static double nice_step(double span, int ticks)
{
    double raw = span / ticks;
    if (!(raw > 0))
        return 1;
    double p = pow(10, floor(log10(raw)));
    if (raw <= p)
        return p;
    if (raw <= 2 * p)
        return 2 * p;
    if (raw <= 5 * p)
        return 5 * p;
    return 10 * p;
}

/* The picture's frame: time from t0 to t1 (wall ns), bytes up to ymax. */
struct frame {
    uint64_t t0, t1, peak;
    double span_s, ymax;
    int pw, ph;
};

static double frame_x(const struct frame *fr, uint64_t t)
{
    return LEFT + (double)(t - fr->t0) / (double)(fr->t1 - fr->t0) * fr->pw;
}

static double frame_y(const struct frame *fr, double v) { return TOP + fr->ph - v / fr->ymax * fr->ph; }

/* Collects every log's series and the time span of the runs; -1 when out of memory. */
static int collect_all(const struct export_input *in, struct series *all, int *ns, struct frame *fr)
{
    uint64_t t0 = UINT64_MAX, t1 = 0, peak = 0;
    for (int i = 0; i < in->n; i++) {
        if (collect(&in->logs[i], i, all, ns))
            return -1;
        const struct tslog *log = &in->logs[i];
        uint64_t start = log->have_header ? log->start_realtime_ns : export_wall_ns(log, log->first_time_ns);
        uint64_t end = export_wall_ns(log, log->complete ? log->end_time_ns : log->last_time_ns);
        if (start < t0)
            t0 = start;
        if (end > t1)
            t1 = end;
    }
    for (int i = 0; i < *ns; i++)
        if (all[i].peak > peak)
            peak = all[i].peak;
    if (t0 == UINT64_MAX)
        t0 = t1 = 0;
    if (t1 <= t0)
        t1 = t0 + 1000000;
    *fr = (struct frame){ .t0 = t0,
                          .t1 = t1,
                          .peak = peak,
                          .span_s = (double)(t1 - t0) / 1e9,
                          .ymax = peak ? (double)peak * 1.1 : 1024.0,
                          .pw = W - LEFT - RIGHT,
                          .ph = H - TOP - BOTTOM };
    return 0;
}

/* The title, gridlines, axes and their labels. */
static void write_axes(FILE *f, const struct frame *fr)
{
    char b1[32];
    int pw = fr->pw, ph = fr->ph;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n"
            "<text x=\"%d\" y=\"28\" font-size=\"16\" font-weight=\"bold\">Device memory allocated over time "
            "(peak %s)</text>\n",
            W, H, W, H, W, H, LEFT, human((double)fr->peak, b1, sizeof b1));
    /* byte ticks at round numbers of the unit they are labelled in */
    double unit = 1;
    while (fr->ymax / unit >= 1024)
        unit *= 1024;
    double ystep = nice_step(fr->ymax / unit, 5) * unit;
    for (double v = 0; v <= fr->ymax; v += ystep) {
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT,
                frame_y(fr, v), LEFT + pw, frame_y(fr, v));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", LEFT - 6, frame_y(fr, v) + 4,
                human(v, b1, sizeof b1));
    }
    double xstep = nice_step(fr->span_s, 8);
    for (double s = 0; s <= fr->span_s + 1e-12; s += xstep) {
        double x = LEFT + s / fr->span_s * pw;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>\n", x, TOP, x,
                TOP + ph);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.3g</text>\n", x, TOP + ph + 18, s);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", LEFT, TOP + ph,
            LEFT + pw, TOP + ph);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", LEFT, TOP, LEFT,
            TOP + ph);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time (s)</text>\n", LEFT + pw / 2, H - 15);
}

/* One series: a step line reduced per pixel column, and its legend entry. */
static void write_series(FILE *f, const struct frame *fr, const struct series *s, int i,
                         const struct tslog *log)
{
    const char *col = colors[i % 10];
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%.1f,%.1f", col,
            frame_x(fr, fr->t0), frame_y(fr, 0));
    uint64_t prev = 0;
    long col_x = -1;
    for (size_t k = 0; k < s->n; k++) {
        double x = frame_x(fr, s->pts[k].t);
        long px = (long)x;
        if (px == col_x && k + 1 < s->n && (long)frame_x(fr, s->pts[k + 1].t) == px) {
            /* same pixel: keep only its highest value */
            if (s->pts[k].v > prev) {
                fprintf(f, " %.1f,%.1f", x, frame_y(fr, (double)s->pts[k].v));
                prev = s->pts[k].v;
            }
            continue;
        }
        col_x = px;
        fprintf(f, " %.1f,%.1f %.1f,%.1f", x, frame_y(fr, (double)prev), x, frame_y(fr, (double)s->pts[k].v));
        prev = s->pts[k].v;
    }
    fprintf(f, " %.1f,%.1f\"/>\n", frame_x(fr, fr->t1), frame_y(fr, (double)prev));
    char label[96], b1[32];
    if (log->rank >= 0)
        snprintf(label, sizeof label, "rank %d device %d", log->rank, s->device);
    else
        snprintf(label, sizeof label, "pid %d device %d", log->pid, s->device);
    int ly = TOP + 10 + 36 * i, lx = LEFT + fr->pw;
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/>\n", lx + 16, ly, col);
    fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", lx + 36, ly + 6, label);
    fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#555\">peak %s</text>\n", lx + 36, ly + 22,
            human((double)s->peak, b1, sizeof b1));
}

int export_svg(FILE *f, const struct export_input *in)
{
    struct series all[MAX_SERIES];
    int ns = 0;
    struct frame fr;
    int rc = collect_all(in, all, &ns, &fr) ? 1 : 0;
    if (!rc) {
        write_axes(f, &fr);
        for (int i = 0; i < ns; i++)
            write_series(f, &fr, &all[i], i, &in->logs[all[i].log]);
        if (!ns)
            fprintf(
                f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no device allocations in the log</text>\n",
                LEFT + fr.pw / 2, TOP + fr.ph / 2);
        fputs("</svg>\n", f);
    }
    for (int i = 0; i < ns; i++)
        free(all[i].pts);
    return rc;
}
