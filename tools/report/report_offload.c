/* report_offload.c: the OFFLOAD part of the report: how much of the job's
 * memory lived on the host, the pages moved, every pause and resume with its
 * bytes and duration, failed (rolled back) moves, and an advice line with
 * the numbers when memory had to live on the host. */
#include "report/report_offload.h"

#include <stdlib.h>
#include <string.h>

#include <stdio.h>

static int read_one(void *arg, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct offload_data *d = arg;
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
    if (d && !d->n_records) {
        free(d);
        return NULL;
    }
    return d;
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

void offload_report_text(FILE *f, const struct tslog *log)
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
    if (offload_advice(d, advice, sizeof advice))
        fprintf(f, "  advice: %s\n", advice);
    free(d);
}
