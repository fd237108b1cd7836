/* report_sites.h: "where memory goes" (tools/report/report_sites.c): the call-stack
 * records of a log (TS_REC_STACK / _MODULES / _ALLOC_STACK, written with
 * TRAINSHIM_STACKS), the allocations live at the memory peak grouped by call
 * site, and the allocated-memory timeline per device.  Used by `trainshim
 * report` (TOP ALLOCATION SITES, MEMORY TIMELINE, memory.top_sites) and by
 * `trainshim export`. */
#ifndef TRAINSHIM_REPORT_SITES_H
#define TRAINSHIM_REPORT_SITES_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "read/logread.h"
#include "report/report_acct.h"
#include "read/symbolize.h"

struct sites_stack {
    uint32_t id, gen, n_frames;
    uint64_t *frames;
};

struct sites_alloc_stack {
    uint64_t ptr, time_ns;
    uint32_t tid, stack_id;
};

struct sites_data {
    struct sites_stack *stacks; /* sorted by id */
    size_t n_stacks;
    struct sites_alloc_stack *allocs; /* sorted by (ptr, time_ns) */
    size_t n_allocs;
    size_t n_module_records;
    struct symbolizer *sym;
};

/* Reads the stack records among the log's valid bytes (log->raw, as
 * tools/read/logread.c kept them).  0, or -1 when there are none to read. */
int sites_load(const struct tslog *log, struct sites_data *d);
void sites_free(struct sites_data *d);
/* The stack id of the allocation (ptr, time_ns), 0 if none was logged. */
uint32_t sites_stack_of(const struct sites_data *d, uint64_t ptr, uint64_t time_ns);
const struct sites_stack *sites_stack(const struct sites_data *d, uint32_t id);
/* Symbolized frame i of stack st. */
void sites_frame(struct sites_data *d, const struct sites_stack *st, uint32_t i, struct sym_frame *out);

/* The device alloc/free events of a log in time order (pointers into
 * log->events); pinned host allocations (device -1) are left out. */
const struct tslog_event **sites_sorted_events(const struct tslog *log, size_t *n);

#define SITES_TOP 10
struct site_row {
    uint32_t stack_id; /* 0: allocations without a stack */
    uint64_t bytes, count;
};
struct sites_result {
    uint64_t peak_bytes, peak_time_ns;
    struct site_row *rows; /* by bytes, descending */
    size_t n_rows;
};
int sites_analyze(const struct tslog *log, const struct sites_data *d, struct sites_result *r);
void sites_result_free(struct sites_result *r);

/* The report's sections; both print nothing when the log has no stacks, so
 * reports of runs without TRAINSHIM_STACKS are unchanged. */
void sites_text(FILE *f, const struct tslog *log);
/* "top_sites": [{bytes, count, stack_id, frames: [{function, file, line, module, address}]}] */
void sites_json(const struct acct_json *j, const struct tslog *log);
/* The MEMORY TIMELINE section: allocated bytes per device over time in rows. */
void sites_timeline_text(FILE *f, const struct tslog *log, int rows);
#endif
