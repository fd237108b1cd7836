/* report_numa.h: the NUMA facts of a run (TS_REC_NUMA, shim/numa/) in the
 * report: lines of the RUN section (or of each rank's section), one ADVICE
 * line when the process's CPUs or memory policy are off its GPU's node, and
 * the "numa" JSON member.  Logs without the record print nothing. */
#ifndef TRAINSHIM_REPORT_NUMA_H
#define TRAINSHIM_REPORT_NUMA_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "read/logread.h"
#include "report/report_json.h"

void numa_report_text(FILE *f, const struct tslog *log);
/* The same lines under a rank's "== RANK n ==" heading (no newline after). */
void numa_text_rank(FILE *f, const struct tslog *log);
void numa_report_json(struct json *j, const struct tslog *log);
/* The ADVICE line into buf; false (buf "") when there is none. */
bool numa_log_advice(const struct tslog *log, char *buf, size_t n);
/* The figures behind that line (the "numa" advice rule's JSON). */
struct numa_advice_figures {
    int device, node;
    int off_node_cpus;     /* CPUs the process may run on that are off the GPU's node */
    bool memory_off_node;  /* its memory policy puts pages on another node */
    bool launcher_outside; /* none of the node's CPUs was allowed */
};
bool numa_log_figures(const struct tslog *log, struct numa_advice_figures *f);
#endif
