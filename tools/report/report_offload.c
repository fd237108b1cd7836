/* report_offload.c: the OFFLOAD part of the report: how much of the job's
 * memory lived on the host, the pages moved, every pause and resume with its
 * bytes and duration, failed (rolled back) moves, the per-step figures of
 * step-order placement (pages promoted and demoted, link bytes, predicted
 * link time), and advice lines with the numbers when memory had to live on
 * the host and when steps thrash. */
#include "report/report_offload.h"

#include <stdlib.h>
#include <string.h>

#include <stdio.h>

static void add_step(struct offload_data *d, const unsigned char *rec)
{
    if (d->n_steps == d->cap_steps) {
        size_t c = d->cap_steps ? 2 * d->cap_steps : 64;
        struct ts_rec_offload_step *a = realloc(d->steps, c * sizeof *a);
        if (!a)
            return; /* out of memory: the rest of the steps are not shown */
        d->steps = a;
        d->cap_steps = c;
    }
    memcpy(&d->steps[d->n_steps++], rec, sizeof *d->steps);
}

static int read_one(void *arg, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct offload_data *d = arg;
    if (h->type == TS_REC_OFFLOAD_STEP && h->len >= sizeof(struct ts_rec_offload_step)) {
        add_step(d, rec);
        return 0;
    }
    if (h->type != TS_REC_OFFLOAD || h->len < sizeof(struct ts_rec_offload))
        return 0;
    struct ts_rec_offload r;
    memcpy(&r, rec, sizeof r);
    d->n_records++;
    d->last = r;
    if (r.kind == TS_OFFLOAD_FAILED)
        d->n_failed++;
    if (r.kind == TS_OFFLOAD_PAUSE || r.kind == TS_OFFLOAD_RESUME) {
        if (d->n_events < OFFLOAD_MAX_EVENTS)
            d->events[d->n_events++] = r;
        else
            d->n_more++;
    }
    return 0;
}

static void print_events(FILE *f, const struct offload_data *d)
{
    char b[32];
    for (size_t i = 0; i < d->n_events; i++) {
        const struct ts_rec_offload *e = &d->events[i];
        fprintf(f, "  %-6s tag %-4u %12s in %9.3f ms\n", e->kind == TS_OFFLOAD_PAUSE ? "pause" : "resume",
                e->tag, tslog_human_bytes(e->bytes, b, sizeof b), (double)e->duration_ns / 1e6);
    }
    if (d->n_more)
        fprintf(f, "  ... and %zu more pauses and resumes\n", d->n_more);
}

struct offload_data *offload_load(const struct tslog *log)
{
    if (!log->raw)
        return NULL;
    struct offload_data *d = calloc(1, sizeof *d);
    if (d)
        tslog_walk_records(log->raw, log->raw_size, read_one, d);
    if (d && !d->n_records && !d->n_steps) {
        offload_free(d);
        return NULL;
    }
    return d;
}

void offload_free(struct offload_data *d)
{
    if (d)
        free(d->steps);
    free(d);
}

int offload_advice(const struct offload_data *d, char *buf, size_t n)
{
    char b[32];
    if (!d->last.oom_host_pages)
        return 0;
    return snprintf(
        buf, n,
        "up to %s of this job's memory lived on the host, reached over the host link at every use: a "
        "smaller batch, activation checkpointing or a larger GPU removes that traffic",
        tslog_human_bytes(d->last.peak_host_bytes, b, sizeof b));
}

static uint64_t moved_bytes(const struct ts_rec_offload_step *s)
{
    return (s->promoted_pages + s->demoted_pages) * s->page_size;
}

size_t offload_thrashing(const struct offload_data *d, const struct ts_rec_offload_step **worst)
{
    size_t n = 0, whole = 0;
    *worst = NULL;
    for (size_t i = 0; i < d->n_steps; i++) {
        const struct ts_rec_offload_step *s = &d->steps[i];
        if (s->flags & TS_OFFLOAD_STEP_TAIL)
            continue;
        whole++;
        uint64_t moved = moved_bytes(s);
        if (moved <= s->touched_bytes)
            continue;
        n++;
        /* moved / reached, compared without dividing by zero */
        if (!*worst
            || (double)moved * (double)(*worst)->touched_bytes
                   > (double)moved_bytes(*worst) * (double)s->touched_bytes)
            *worst = s;
    }
    /* one reorganization (the first boundary's swaps) is not thrashing */
    if (n < OFFLOAD_THRASH_MIN_STEPS || n * OFFLOAD_THRASH_SHARE < whole) {
        *worst = NULL;
        return 0;
    }
    return n;
}

int offload_thrash_advice(const struct offload_data *d, char *buf, size_t n)
{
    const struct ts_rec_offload_step *w;
    size_t steps = offload_thrashing(d, &w);
    if (!steps)
        return 0;
    char b1[32], b2[32];
    return snprintf(buf, n,
                    "thrashing: %zu of %zu steps moved more bytes between device and host than their work "
                    "reached (step %u: %s moved for %s reached, %.3f ms of predicted link time); the "
                    "previous step's order does not predict the next one: TRAINSHIM_OFFLOAD_STEP_ORDER=0 "
                    "leaves pages where they are, a smaller batch keeps them on the device",
                    steps, d->n_steps, w->step, tslog_human_bytes(moved_bytes(w), b1, sizeof b1),
                    tslog_human_bytes(w->touched_bytes, b2, sizeof b2), (double)w->predicted_ns / 1e6);
}

/* Link time measured per step from a trace of charges (see
 * offload_report_text): a charge belongs to the first step whose boundary
 * record comes at or after it; *after gets those past the last boundary.
 * NULL (with one message) when the file cannot be read. */
static uint64_t *measured_link(const struct offload_data *d, const char *path, uint64_t *after)
{
    FILE *in = fopen(path, "r");
    uint64_t *per_step = in ? calloc(d->n_steps, sizeof *per_step) : NULL;
    if (!per_step) {
        fprintf(stderr, "trainshim: error: link trace %s: cannot read it\n", path);
        if (in)
            fclose(in);
        return NULL;
    }
    unsigned long long t, ns;
    size_t bad = 0;
    char line[128];
    *after = 0;
    while (fgets(line, sizeof line, in)) {
        if (sscanf(line, "%llu %llu", &t, &ns) != 2) {
            bad++;
            continue;
        }
        size_t lo = 0, hi = d->n_steps; /* first step with time_ns >= t */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (d->steps[mid].h.time_ns < t)
                lo = mid + 1;
            else
                hi = mid;
        }
        *(lo < d->n_steps ? &per_step[lo] : after) += ns;
    }
    fclose(in);
    if (bad)
        fprintf(stderr, "trainshim: warning: link trace %s: %zu unreadable lines skipped\n", path, bad);
    return per_step;
}

static void print_step(FILE *f, const struct ts_rec_offload_step *s, const uint64_t *measured)
{
    char b1[32], b2[32], b3[32];
    fprintf(f, "  %5u%s %9llu %9llu %12s %12s %12s %11.3f ms", s->step,
            s->flags & TS_OFFLOAD_STEP_TAIL ? "+" : " ", (unsigned long long)s->promoted_pages,
            (unsigned long long)s->demoted_pages, tslog_human_bytes(s->touched_bytes, b1, sizeof b1),
            tslog_human_bytes(s->host_touched_bytes, b2, sizeof b2),
            tslog_human_bytes(s->link_bytes, b3, sizeof b3), (double)s->predicted_ns / 1e6);
    if (measured)
        fprintf(f, " %11.3f ms", (double)*measured / 1e6);
    fputc('\n', f);
}

/* The measured link time's total line, when a trace was read. */
static void print_measured(FILE *f, const struct offload_data *d, const uint64_t *measured, uint64_t after,
                           uint64_t predicted)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < d->n_steps; i++)
        sum += measured[i];
    fprintf(f,
            "  measured link time %.3f ms in all (predicted / measured %.3f), %.3f ms after the last step\n",
            (double)sum / 1e6, sum ? (double)predicted / (double)sum : 0.0, (double)after / 1e6);
}

/* One line per step (the first OFFLOAD_STEP_ROWS), then the totals. */
static void print_steps(FILE *f, const struct offload_data *d, const char *link_trace)
{
    if (!d->n_steps)
        return;
    uint64_t after = 0, *measured = link_trace ? measured_link(d, link_trace, &after) : NULL;
    /* the period as the last whole step found it (the tail's may be lost) */
    const struct ts_rec_offload_step *last = &d->steps[d->n_steps - 1];
    for (size_t i = d->n_steps; i-- > 0;)
        if (!(d->steps[i].flags & TS_OFFLOAD_STEP_TAIL)) {
            last = &d->steps[i];
            break;
        }
    uint64_t link = 0, predicted = 0, moved = 0;
    for (size_t i = 0; i < d->n_steps; i++) {
        link += d->steps[i].link_bytes;
        predicted += d->steps[i].predicted_ns;
        moved += moved_bytes(&d->steps[i]);
    }
    fprintf(f,
            "  steps %zu (a step every %u synchronizations); predicted link time = (bytes moved + bytes "
            "reached on host pages) / %.1f GB/s\n",
            d->n_steps, last->period, (double)last->link_mbps / 1000);
    fprintf(f, "  %5s  %9s %9s %12s %12s %12s %14s%s\n", "step", "promoted", "demoted", "reached", "on host",
            "link bytes", "predicted", measured ? "       measured" : "");
    for (size_t i = 0; i < d->n_steps && i < OFFLOAD_STEP_ROWS; i++)
        print_step(f, &d->steps[i], measured ? &measured[i] : NULL);
    if (d->n_steps > OFFLOAD_STEP_ROWS)
        fprintf(f, "  ... and %zu more steps\n", d->n_steps - OFFLOAD_STEP_ROWS);
    char b1[32], b2[32];
    fprintf(f,
            "  link bytes %s in all (%s of them page moves); predicted link time %.3f ms in all, %.3f ms "
            "per step\n",
            tslog_human_bytes(link, b1, sizeof b1), tslog_human_bytes(moved, b2, sizeof b2),
            (double)predicted / 1e6, (double)predicted / 1e6 / (double)d->n_steps);
    if (measured)
        print_measured(f, d, measured, after, predicted);
    free(measured);
}

void offload_report_text(FILE *f, const struct tslog *log, const char *link_trace)
{
    struct offload_data *d = offload_load(log);
    if (!d)
        return;
    const struct ts_rec_offload *t = &d->last;
    char b1[32], b2[32], advice[512];
    fprintf(f, "\n== OFFLOAD ==\n");
    fprintf(f, "  peak host-backed memory %s (now %s); %llu pages backed by the host at an out-of-memory\n",
            tslog_human_bytes(t->peak_host_bytes, b1, sizeof b1),
            tslog_human_bytes(t->host_bytes, b2, sizeof b2), (unsigned long long)t->oom_host_pages);
    fprintf(f,
            "  pages moved to the host %llu, back to the device %llu; failed moves (rolled back) %llu; "
            "managed allocations %llu\n",
            (unsigned long long)t->demoted_pages, (unsigned long long)t->promoted_pages,
            (unsigned long long)t->failed_moves, (unsigned long long)t->managed_allocs);
    print_events(f, d);
    print_steps(f, d, link_trace);
    if (offload_advice(d, advice, sizeof advice))
        fprintf(f, "  advice: %s\n", advice);
    if (offload_thrash_advice(d, advice, sizeof advice))
        fprintf(f, "  advice: %s\n", advice);
    offload_free(d);
}
