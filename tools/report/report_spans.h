/* report_spans.h: host intervals of a log (copy calls, synchronizations)
 * sorted by their end, for the questions the report asks of every step's
 * window: does one end in it, how much of it they cover.  Built once per
 * log, a window then costs a binary search and the intervals near it, not a
 * pass over every event (a million-event log has thousands of steps). */
#ifndef TRAINSHIM_REPORT_SPANS_H
#define TRAINSHIM_REPORT_SPANS_H
#include <stdbool.h>
#include <stdint.h>

#include "read/logread.h"

struct span {
    uint64_t start, end;
};

struct span_set {
    struct span *v; /* sorted by end */
    size_t n;
    uint64_t longest; /* the longest interval: none ending later starts before end - longest */
};

/* The copy calls of log that keep(e) accepts (all copies when keep is
 * NULL), each [time - duration, time).  0, or -1 out of memory. */
int span_set_copies(struct span_set *s, const struct tslog *log, bool (*keep)(const struct tslog_event *e));
/* The host synchronizations, each [time - blocked, time). */
int span_set_syncs(struct span_set *s, const struct tslog *log);
void span_set_free(struct span_set *s);

/* Whether an interval ends in [from, to). */
bool span_set_ends_in(const struct span_set *s, uint64_t from, uint64_t to);
/* The summed overlap of the intervals ending after from with [from, to)
 * (intervals of several threads may overlap each other). */
uint64_t span_set_overlap(const struct span_set *s, uint64_t from, uint64_t to);
#endif
