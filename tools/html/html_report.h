/* html_report.h: the door of tools/html/: `trainshim report --html FILE`
 * writes one self-contained HTML page (no network fetches; its CSS and JS
 * are inlined, its charts are hand-made SVG).
 *
 * The page draws what the text and JSON reports derive (tools/report/): the
 * caller hands over the same analyses.  Everything the page shows sits in
 * one JSON block (<script type="application/json" id="trainshim-data">),
 * bucketed here on the C side (html_series.c) so the page stays small and
 * responsive for any log size: never the raw log. */
#ifndef TRAINSHIM_HTML_REPORT_H
#define TRAINSHIM_HTML_REPORT_H
#include <stdbool.h>
#include <stdio.h>

#include "read/logread.h"
#include "report/report_acct.h"
#include "report/report_json.h"
#include "report/report_stats.h"

/* Time buckets of every series (memory, copies, GPU busy time) and the
 * largest live blocks listed at each memory bucket's highest point. */
#define HTML_BUCKETS 200
#define HTML_TOP_BLOCKS 8

/* The copy facts of one log's stats (the ADVICE section's input). */
typedef struct acct_copy_facts (*html_copy_facts_fn)(const struct stats *s);

struct html_input {
    const struct tslog *logs;
    const struct stats *st; /* n entries */
    const struct acct_log *acct;
    html_copy_facts_fn copy_facts;
    int n;
};

/* Writes the page to path; 0, or -1 with one "trainshim: error:" line. */
int html_report_write(const char *path, const struct html_input *in);
/* The page's embedded data: one JSON document. */
int html_data_write(FILE *f, const struct html_input *in);

/* ---- bucketed series (html_series.c, html_memory.c) ------------------ */
/* What the page needs from records logread.c only totals: the pools' OOM
 * points and the pinned copy engine's conversions over time. */
#define HTML_MAX_OOMS 64
struct html_oom {
    uint64_t at_ns; /* since the run's start */
    uint64_t requested, reserved, allocated;
    int32_t device;
    bool from_pool; /* a TS_REC_POOL_OOM (else a failed allocation call) */
};
struct html_raw {
    uint64_t converted[HTML_BUCKETS]; /* bytes the pinned copy engine converted */
    struct html_oom ooms[HTML_MAX_OOMS];
    size_t n_ooms;
    uint64_t oom_total;
};
/* Reads them from log->file (nothing when it cannot be read again). */
void html_raw_load(const struct tslog *log, struct html_raw *r);

/* "memory_series": allocated bytes per device and bucket, the peak, the
 * pools' reserved peak, the largest live blocks with their call sites at
 * each bucket's highest point, and the OOM points.  0, or -1 (memory). */
int html_memory_series(struct json *j, const struct tslog *log, const struct html_raw *raw);
/* "copy_series": copied bytes per direction and bucket, pageable and
 * converted bytes. */
void html_copy_series(struct json *j, const struct tslog *log, const struct html_raw *raw);
/* "gpu_series": GPU busy time per bucket (null without CUPTI records). */
void html_gpu_series(struct json *j, const struct tslog *log);

/* The time axis of one log's series: HTML_BUCKETS equal parts of the run. */
struct html_axis {
    uint64_t t0, span;
};
struct html_axis html_axis_of(const struct tslog *log);
size_t html_bucket_of(const struct html_axis *a, uint64_t t);

/* A run's duration as the reports give it (end record, else last record). */
uint64_t html_run_ns(const struct tslog *log);
/* "key": [v0,v1,...] on one line. */
void html_u64_array(struct json *j, const char *key, const uint64_t *v, size_t n);
#endif
