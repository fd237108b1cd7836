/* report_capped.c: the totals of a size-capped log (report_capped.h). */
#include "report/report_capped.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "observe/comm.h"

struct load_state {
    struct capped_log *c;
    size_t cap;
};

static int load_one(void *arg, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct load_state *st = arg;
    struct capped_log *c = st->c;
    if (h->type == TS_REC_LOG_CAPPED) {
        memset(&c->summary, 0, sizeof c->summary);
        memcpy(&c->summary, rec, h->len < sizeof c->summary ? h->len : sizeof c->summary);
        c->capped = true;
    } else if (h->type == TS_REC_SITE_TOTAL) {
        if (c->n_sites == st->cap) {
            size_t n = st->cap ? st->cap * 2 : 64;
            struct ts_rec_site_total *g = realloc(c->sites, n * sizeof *g);
            if (!g)
                return 1;
            c->sites = g;
            st->cap = n;
        }
        struct ts_rec_site_total *t = &c->sites[c->n_sites++];
        memset(t, 0, sizeof *t);
        memcpy(t, rec, h->len < sizeof *t ? h->len : sizeof *t);
    }
    return 0;
}

int capped_load(const struct tslog *log, struct capped_log *c)
{
    memset(c, 0, sizeof *c);
    if (!log->raw)
        return 0;
    struct load_state st = { c, 0 };
    int rc = tslog_walk_records(log->raw, log->raw_size, load_one, &st) > 0 ? -1 : 0;
    if (rc || !c->capped)
        capped_free(c);
    return rc;
}

void capped_free(struct capped_log *c)
{
    free(c->sites);
    memset(c, 0, sizeof *c);
}

static void add_copy(struct stats *s, const struct ts_rec_site_total *t)
{
    int d = t->dir < DIRS ? t->dir : 0;
    s->copy_calls[d] += t->count;
    s->copy_failed += t->failed;
    s->copy_ns += t->duration_ns;
    s->copy_bytes[d] += t->bytes;
    if (t->host_kind == TS_HOST_PAGEABLE && d == TS_H2D)
        s->h2d_pageable += t->bytes;
    if (t->host_kind == TS_HOST_PAGEABLE && d == TS_D2H)
        s->d2h_pageable += t->bytes;
}

static int add_site(const struct tslog *log, struct stats *s, struct acct_log *a,
                    const struct ts_rec_site_total *t)
{
    switch (t->rec_type) {
    case TS_REC_ALLOC:
        if (t->device < 0) { /* pinned host memory: apart from the device's */
            s->host_alloc_calls += t->count;
            s->host_alloc_bytes += t->bytes;
            break;
        }
        s->alloc_calls += t->count;
        s->alloc_failed += t->failed;
        s->alloc_requested += t->bytes;
        break;
    case TS_REC_FREE:
        if (t->device < 0) {
            s->host_free_calls += t->count;
            break;
        }
        s->free_calls += t->count;
        s->free_failed += t->failed;
        break;
    case TS_REC_COPY: add_copy(s, t); break;
    case TS_REC_COPY_CONVERT:
        s->converted_calls += t->count;
        s->converted_bytes += t->bytes;
        s->converted_blocked_ns += t->duration_ns;
        break;
    case TS_REC_ERROR: return stats_add_result(s, log, t->api, t->op, t->count);
    case TS_REC_GEMM:
        a->c.gemm_calls += t->count - t->failed;
        a->c.gemm_failed += t->failed;
        a->c.gemm_flops += t->flops;
        a->has_gemm = true;
        break;
    case TS_REC_NCCL: a->has_nccl = true; return acct_comm_add_site(&a->m, t);
    default: break;
    }
    return 0;
}

int capped_apply(const struct capped_log *c, const struct tslog *log, struct stats *s, struct acct_log *a)
{
    if (!c->capped)
        return 0;
    for (size_t i = 0; i < c->n_sites; i++)
        if (add_site(log, s, a, &c->sites[i]))
            return -1;
    for (int b = 0; b < HIST_BUCKETS && b < TS_SIZE_BUCKETS; b++)
        s->hist[b] += c->summary.size_buckets[b];
    /* the shim replayed every allocation, folded or not */
    if (c->summary.peak_live_bytes > s->peak_alloc)
        s->peak_alloc = c->summary.peak_live_bytes;
    s->live_bytes = c->summary.live_end_bytes;
    s->live_blocks = c->summary.live_end_blocks;
    acct_comm_estimate(&a->m);
    return 0;
}

void capped_text(FILE *f, const struct capped_log *c)
{
    if (!c->capped)
        return;
    char b[32];
    fprintf(f,
            "log cap       %s (TRAINSHIM_LOG_MAX) reached: %llu later events were aggregated per call site "
            "(%llu sites%s); counts, bytes, FLOPs and the memory peak cover the whole run, per-event views "
            "(timings, steps, call sites, timeline) the logged part\n",
            tslog_human_bytes(c->summary.cap_bytes, b, sizeof b),
            (unsigned long long)c->summary.records_folded, (unsigned long long)c->n_sites,
            c->summary.records_unsited ? ", some events in no site" : "");
}
