/* export.h: `trainshim export` (tools/cmd/cmd_export.c) and its formats:
 * tools/export/export_chrome.c (Trace Event Format JSON for Perfetto and
 * chrome://tracing), tools/export/export_snapshot.c (a PyTorch memory snapshot
 * pickle for pytorch.org/memory_viz), tools/export/export_svg.c (the memory
 * timeline as a picture). */
#ifndef TRAINSHIM_EXPORT_H
#define TRAINSHIM_EXPORT_H
#include <stdio.h>

#include "read/logread.h"
#include "report/report_sites.h"

/* The logs to export (the formats that show stacks read them themselves,
 * tools/report/report_sites.c). */
struct export_input {
    struct tslog *logs;
    int n;
};

/* Wall-clock nanoseconds of a log's monotonic timestamp (from its header),
 * so several ranks' logs share one time axis. */
uint64_t export_wall_ns(const struct tslog *log, uint64_t mono_ns);
/* Writes s as a JSON string (quotes included). */
void export_json_string(FILE *f, const char *s);

/* Calls fn at each change of a device's allocated bytes, in time order
 * (time_ns on the log's monotonic clock); stops at fn's first nonzero value
 * and returns it, -1 when out of memory, else 0. */
typedef int (*export_allocated_fn)(void *arg, uint64_t time_ns, int device, uint64_t allocated);
int export_allocated_walk(const struct tslog *log, export_allocated_fn fn, void *arg);

int export_chrome(FILE *f, const struct export_input *in);
int export_snapshot(FILE *f, const struct export_input *in);
int export_svg(FILE *f, const struct export_input *in);
#endif
