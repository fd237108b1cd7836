/* html_data.c: the page's embedded data, one JSON document written with the
 * JSON report's writer (tools/report/report_json.h): per log the RUN
 * figures, the memory and copy totals, the compute, communication and GPU
 * members exactly as `trainshim report --format json` writes them, the
 * advice lines with the section behind each, and the bucketed series
 * (html_series.c, html_memory.c); across logs the per-rank accounting. */
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc.h"
#include "core/core.h"
#include "html/html_report.h"
#include "report/report_gpu.h"
#include "report/report_offload.h"

static const char *status_text(const struct tslog *log)
{
    if (log->truncated)
        return "truncated";
    return log->complete ? "complete" : "incomplete";
}

static void write_run(struct json *j, const struct tslog *log)
{
    j_open(j, "run", '{');
    j_str(j, "log", log->file);
    j_i64(j, "pid", log->pid);
    j_str(j, "command", log->command ? log->command : "");
    j_str(j, "host", log->host ? log->host : "");
    j_rank(j, "rank", log->rank);
    j_rank(j, "local_rank", log->local_rank);
    j_rank(j, "world_size", log->world_size);
    j_u64(j, "duration_ns", html_run_ns(log));
    j_str(j, "status", status_text(log));
    j_str(j, "note", log->note[0] ? log->note : NULL);
    j_u64(j, "records", log->n_records);
    j_close(j, '}');
    j_devices(j, log);
}

/* The totals of the RANKS table, the memory chart's legend and the COPIES
 * summary, under the JSON report's names. */
static void write_totals(struct json *j, const struct stats *s)
{
    j_open(j, "memory", '{');
    j_u64(j, "peak_allocated_bytes", s->peak_alloc);
    j_u64(j, "peak_reserved_bytes", s->pool_records ? s->pool_peak_reserved : s->peak_alloc);
    j_str(j, "allocator_mode", s->pool_records ? ts_alloc_mode_name(s->pool_mode) : NULL);
    j_u64(j, "alloc_calls", s->alloc_calls);
    j_u64(j, "alloc_failed", s->alloc_failed);
    j_u64(j, "free_calls", s->free_calls);
    j_u64(j, "live_at_end_bytes", s->live_bytes);
    j_close(j, '}');
    j_open(j, "copies", '{');
    j_u64(j, "h2d_bytes", s->copy_bytes[TS_H2D]);
    j_u64(j, "d2h_bytes", s->copy_bytes[TS_D2H]);
    j_u64(j, "d2d_bytes", s->copy_bytes[TS_D2D]);
    uint64_t calls = 0;
    for (int d = 0; d < DIRS; d++)
        calls += s->copy_calls[d];
    j_u64(j, "calls", calls);
    j_u64(j, "h2d_pageable_bytes", s->h2d_pageable);
    j_u64(j, "d2h_pageable_bytes", s->d2h_pageable);
    j_u64(j, "converted_calls", s->converted_calls);
    j_u64(j, "converted_bytes", s->converted_bytes);
    j_u64(j, "host_time_ns", s->copy_ns);
    j_close(j, '}');
    j_u64(j, "error_records", s->error_records);
}

static void advice_line(struct json *j, const char *text, const char *section)
{
    j_open(j, NULL, '{');
    j_str(j, "text", text);
    j_str(j, "section", section);
    j_close(j, '}');
}

/* The ADVICE lines in the text report's order, each with the id of the
 * section whose chart shows what it measured. */
static void write_advice(struct json *j, const struct acct_log *a, const struct acct_copy_facts *cp,
                         uint64_t run_ns)
{
    char c[ACCT_MAX_ADVICE][256], m[ACCT_MAX_ADVICE][256], k[ACCT_MAX_ADVICE][256];
    int nc = a->has_gemm ? acct_advice(&a->c, NULL, NULL, run_ns, c) : 0;
    int nm = a->has_nccl ? acct_advice(NULL, &a->m, NULL, run_ns, m) : 0;
    int nk = acct_advice(NULL, NULL, cp, run_ns, k);
    j_open(j, "advice", '[');
    for (int i = 0; i < nc; i++) /* the compute lines: misaligned shapes, then MFU */
        if (!strstr(c[i], "MFU"))
            advice_line(j, c[i], "gemm");
    for (int i = 0; i < nm; i++)
        advice_line(j, m[i], "nccl");
    for (int i = 0; i < nk; i++)
        advice_line(j, k[i], "copies");
    for (int i = 0; i < nc; i++)
        if (strstr(c[i], "MFU"))
            advice_line(j, c[i], "steps");
    if (a->gpu_advice[0])
        advice_line(j, a->gpu_advice, "timeline");
    for (int i = 0; i < a->rules.n; i++) /* the rule table's lines (tools/report/report_advice.c) */
        advice_line(j, a->rules.line[i].text,
                    !strcmp(a->rules.line[i].rule, "precision_fp32")    ? "gemm"
                    : !strcmp(a->rules.line[i].rule, "memory_headroom") ? "memory"
                    : !strcmp(a->rules.line[i].rule, "fragmentation")   ? "memory"
                    : !strcmp(a->rules.line[i].rule, "host_sync")       ? "steps"
                    : !strcmp(a->rules.line[i].rule, "mfu_hfu")         ? "steps"
                                                                        : "timeline");
    j_close(j, ']');
}

/* "offload": the OFFLOAD part's figures (tools/report/report_offload.c),
 * null without offload records. */
static void write_offload(struct json *j, const struct tslog *log)
{
    struct offload_data *d = offload_load(log);
    if (!d) {
        j_str(j, "offload", NULL);
        return;
    }
    const struct ts_rec_offload *t = &d->last;
    char advice[512];
    j_open(j, "offload", '{');
    j_u64(j, "records", d->n_records);
    j_u64(j, "host_bytes", t->host_bytes);
    j_u64(j, "peak_host_bytes", t->peak_host_bytes);
    j_u64(j, "oom_host_pages", t->oom_host_pages);
    j_u64(j, "demoted_pages", t->demoted_pages);
    j_u64(j, "promoted_pages", t->promoted_pages);
    j_u64(j, "failed_moves", t->failed_moves);
    j_u64(j, "managed_allocs", t->managed_allocs);
    j_open(j, "events", '[');
    for (size_t i = 0; i < d->n_events; i++) {
        const struct ts_rec_offload *e = &d->events[i];
        j_open(j, NULL, '{');
        j_str(j, "kind", e->kind == TS_OFFLOAD_PAUSE ? "pause" : "resume");
        j_u64(j, "tag", e->tag);
        j_u64(j, "bytes", e->bytes);
        j_u64(j, "duration_ns", e->duration_ns);
        j_close(j, '}');
    }
    j_close(j, ']');
    j_u64(j, "more_events", d->n_more);
    j_str(j, "advice", offload_advice(d, advice, sizeof advice) ? advice : NULL);
    j_close(j, '}');
    offload_free(d);
}

static int write_log(struct json *j, const struct html_input *in, int i)
{
    const struct tslog *log = &in->logs[i];
    const struct acct_log *a = &in->acct[i];
    struct acct_json aj = acct_json_of(j);
    struct acct_copy_facts cf = in->copy_facts(&in->st[i]);
    struct html_raw *raw = calloc(1, sizeof *raw);
    if (!raw)
        return -1;
    html_raw_load(log, raw);
    j_open(j, NULL, '{');
    write_run(j, log);
    write_totals(j, &in->st[i]);
    if (a->has_gemm)
        acct_compute_json(&aj, &a->c);
    if (a->has_nccl)
        acct_comm_json(&aj, &a->m);
    gpu_report_json(&aj, log);
    write_advice(j, a, &cf, html_run_ns(log));
    write_offload(j, log);
    int rc = html_memory_series(j, log, raw);
    html_copy_series(j, log, raw);
    html_gpu_series(j, log);
    j_close(j, '}');
    free(raw);
    return rc;
}

int html_data_write(FILE *f, const struct html_input *in)
{
    struct json j = { .f = f };
    int rc = 0;
    j_open(&j, NULL, '{');
    j_str(&j, "page", "trainshim report");
    j_u64(&j, "version", 1);
    j_u64(&j, "buckets", HTML_BUCKETS);
    j_u64(&j, "top_blocks", HTML_TOP_BLOCKS);
    j_open(&j, "logs", '[');
    for (int i = 0; i < in->n && !rc; i++)
        rc = write_log(&j, in, i);
    j_close(&j, ']');
    if (in->n > 1) {
        struct acct_json aj = acct_json_of(&j);
        acct_logs_json(&aj, in->logs, in->acct, in->n); /* "rank_accounting": stragglers per step */
    }
    j_close(&j, '}');
    return rc;
}
