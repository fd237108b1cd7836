/* report_offload.h: the OFFLOAD part of `trainshim report`
 * (tools/report/report_offload.c), from the TS_REC_OFFLOAD records memory
 * offload writes (TRAINSHIM_OFFLOAD=on or managed).  Read from the log file
 * itself, like the GPU and call-stack parts: a bad record ends the reading. */
#ifndef TRAINSHIM_REPORT_OFFLOAD_H
#define TRAINSHIM_REPORT_OFFLOAD_H
#include <stdio.h>

#include "log/logfmt.h"
#include "read/logread.h"

#define OFFLOAD_MAX_EVENTS 64 /* pauses and resumes listed; the rest are counted */

#define OFFLOAD_STEP_ROWS 12 /* steps listed one per line; the rest are summed */

/* What the OFFLOAD part reads from a log's offload records. */
struct offload_data {
    struct ts_rec_offload last; /* the latest record: totals so far */
    struct ts_rec_offload events[OFFLOAD_MAX_EVENTS];
    size_t n_records, n_events, n_more, n_failed;
    /* per-step figures (TS_REC_OFFLOAD_STEP), in order; steps is calloc'd */
    struct ts_rec_offload_step *steps;
    size_t n_steps, cap_steps;
};

/* Thrashing: whole steps whose page moves carried more bytes than their
 * work reached (each moved byte then served less than one use), at least
 * OFFLOAD_THRASH_MIN_STEPS of them and at least one whole step in
 * OFFLOAD_THRASH_SHARE (so one reorganization after the first boundary is
 * not).  The worst such step (most moved bytes per byte reached) in *worst,
 * and how many there were; 0 when the job does not thrash. */
#define OFFLOAD_THRASH_MIN_STEPS 2
#define OFFLOAD_THRASH_SHARE 4
size_t offload_thrashing(const struct offload_data *d, const struct ts_rec_offload_step **worst);
/* The thrashing advice line with its numbers: its length, 0 when none. */
int offload_thrash_advice(const struct offload_data *d, char *buf, size_t n);
/* Frees what offload_load returned. */
void offload_free(struct offload_data *d);

/* The log's offload records (calloc'd, the caller frees), or NULL when it
 * has none or cannot be read again. */
struct offload_data *offload_load(const struct tslog *log);
/* The advice line when memory had to live on the host: its length, 0 when
 * there is none. */
int offload_advice(const struct offload_data *d, char *buf, size_t n);

/* Prints "== OFFLOAD ==" and its lines when the log has offload records;
 * nothing otherwise.  link_trace (NULL: none) names a file of the link's
 * charges as measured or simulated (`trainshim report --link-trace`; the
 * emulator writes one with EMU_LINK_TRACE): lines "T NS BYTES", T the
 * CLOCK_MONOTONIC nanosecond of a charge of NS link nanoseconds.  Each step
 * then shows the link time measured in it beside the predicted one. */
void offload_report_text(FILE *f, const struct tslog *log, const char *link_trace);
#endif
