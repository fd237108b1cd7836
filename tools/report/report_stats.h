/* report_stats.h: what `trainshim report` derives from one log's raw
 * records (tools/report/report_stats.c): the peak of allocated device bytes
 * from alloc/free pairs matched by pointer in time order (pinned host
 * allocations counted apart), the size histogram,
 * copy volumes by direction and what the pinned copy engine converted,
 * errors by API and code, and the device pools' own figures. */
#ifndef TRAINSHIM_REPORT_STATS_H
#define TRAINSHIM_REPORT_STATS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "read/logread.h"

#define HIST_BUCKETS 65 /* bucket b >= 1: sizes in [2^(b-1), 2^b); bucket 0: size 0 */
#define DIRS 7          /* enum ts_copy_dir 1..6; 0 = unknown */

struct err_count {
    int32_t api, code;
    uint64_t count;
    const char *name; /* API name (owned by the log) or NULL */
};

struct stats {
    uint64_t peak_alloc, alloc_calls, alloc_failed, alloc_requested, free_calls, free_failed, free_unknown,
        live_blocks, live_bytes;
    uint64_t hist[HIST_BUCKETS];
    uint64_t dev_peak_alloc[TSLOG_POOL_DEVS]; /* peak allocated per device (one log's) */
    /* pinned host memory (allocations logged with device -1): apart from the device's figures */
    uint64_t host_alloc_calls, host_alloc_bytes, host_free_calls;
    uint64_t copy_bytes[DIRS], copy_calls[DIRS], h2d_pageable, d2h_pageable, copy_ns, copy_failed;
    /* pinned copy engine (TS_REC_COPY_CONVERT): shown only when a copy was converted */
    uint64_t converted_calls, converted_bytes, converted_blocked_ns, staging_wait_ns;
    struct err_count *errs;
    size_t n_errs;
    uint64_t error_records;
    /* results that report a state, not a failure (stats_is_status): apart from the errors */
    struct err_count *statuses;
    size_t n_statuses;
    /* the device pools' own figures (TS_REC_POOL_STATS): shown only when a
     * pool existed (pool_records != 0) */
    uint64_t pool_records, pool_peak_reserved, pool_alloc_at_peak, pool_driver_calls, pool_fence_calls,
        pool_cache_hits, pool_ooms;
    struct tslog_pool_plan pool_plan;
    int32_t pool_mode;
    const struct tslog *log; /* one log's stats: its call-site sections (report_sites.c) */
};

/* Whether code, returned by the API named api_name, is a status (not ready,
 * in progress) rather than an error. */
bool stats_is_status(const char *api_name, int32_t code);
/* One log's figures; 0, or -1 when out of memory (s->errs and s->statuses
 * are owned: free them). */
int stats_analyze(struct tslog *log, struct stats *s);
/* Totals over ranks: counts and bytes add up; the peak adds up too (each rank
 * has its own devices; the caller keeps the largest single rank's apart). */
int stats_add(struct stats *t, const struct stats *s);
/* Adds count results code of api (a size-capped log's totals): to the
 * statuses or to the errors, as stats_analyze would; 0, or -1 (memory). */
int stats_add_result(struct stats *s, const struct tslog *log, int32_t api, int32_t code, uint64_t count);
#endif
