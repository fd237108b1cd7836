/* report_capped.h: a log written under a size cap (TRAINSHIM_LOG_MAX): its
 * TS_REC_LOG_CAPPED and TS_REC_SITE_TOTAL records, read from the file, and
 * their totals added back into the report's figures, so that counts, bytes,
 * FLOPs and the memory peak are those of the whole run. */
#ifndef TRAINSHIM_REPORT_CAPPED_H
#define TRAINSHIM_REPORT_CAPPED_H
#include <stdbool.h>
#include <stdio.h>

#include "log/logfmt.h"
#include "read/logread.h"
#include "report/report_acct.h"
#include "report/report_stats.h"

struct capped_log {
    bool capped;
    struct ts_rec_log_capped summary;
    struct ts_rec_site_total *sites;
    size_t n_sites;
};

/* 0 (capped false when the log was not capped), -1 when out of memory. */
int capped_load(const struct tslog *log, struct capped_log *c);
void capped_free(struct capped_log *c);
/* Adds the folded events' totals into one log's figures; 0 or -1 (memory). */
int capped_apply(const struct capped_log *c, const struct tslog *log, struct stats *s, struct acct_log *a);
/* The RUN section's line about the cap (nothing when not capped). */
void capped_text(FILE *f, const struct capped_log *c);
#endif
