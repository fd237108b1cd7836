/* report_advice.h: the rule-table advice of `trainshim report`
 * (tools/report/report_advice.c): precision, memory headroom, host
 * synchronizations, input stalls and launch-bound steps.  Each rule has a documented threshold, fires only when
 * its measurement crosses it, and hands back its figures for the JSON. */
#ifndef TRAINSHIM_REPORT_ADVICE_H
#define TRAINSHIM_REPORT_ADVICE_H
#include <stdint.h>

#include "read/logread.h"

struct acct_compute;

#define ADVICE_MAX_FIGURES 8
#define ADVICE_MAX_RULES 12
#define ADVICE_TEXT 1024
#define ADVICE_MAX_SITES 3
#define ADVICE_SITE_FRAMES 3

struct acct_json;

struct advice_figure {
    const char *name;
    double value; /* NaN is written as null */
};

/* A call site behind a rule's figure (host_sync): the API and the first
 * frames of its stack ("func (file:line)" or "module+0xoff"), innermost
 * first; n_frames 0 without TRAINSHIM_STACKS. */
struct advice_site {
    char api[64];
    double per_step;
    int n_frames;
    char frame[ADVICE_SITE_FRAMES][192];
};

struct advice_line {
    const char *rule; /* stable id: "precision_fp32", "memory_headroom", "host_sync",
                       * "input_stall", "launch_bound" */
    char text[ADVICE_TEXT];
    int n_figures;
    struct advice_figure fig[ADVICE_MAX_FIGURES];
    int n_sites;
    struct advice_site site[ADVICE_MAX_SITES];
};

struct advice_set {
    int n;
    struct advice_line line[ADVICE_MAX_RULES];
};

/* Evaluates every rule on one log; c: its compute summary (NULL when it has
 * no GEMMs).  Rules that cannot be measured stay silent. */
void advice_evaluate(const struct tslog *log, const struct acct_compute *c, struct advice_set *out);

/* For the rules kept in other files: a new line of rule (NULL when the set
 * is full), and one of its figures. */
struct advice_line *advice_add(struct advice_set *out, const char *rule);
void advice_figure(struct advice_line *l, const char *name, double v);

/* tools/report/report_advice_overlap.c: "fragmentation" (torch's native
 * caching allocator flushed its cache to retry a failed cudaMalloc),
 * "comm_overlap" (NCCL kernel time with no compute kernel beside it),
 * "mfu_hfu" (forward GEMM shapes re-run in the backward phase: MFU and HFU
 * apart) and "numa" (tools/report/report_numa.c's placement). */
void advice_fragmentation(const struct tslog *log, struct advice_set *out);
void advice_comm_overlap(const struct tslog *log, const struct acct_compute *c, struct advice_set *out);
void advice_mfu_hfu(const struct tslog *log, const struct acct_compute *c, struct advice_set *out);
void advice_numa(const struct tslog *log, struct advice_set *out);

/* tools/report/report_advice_sync.c: host_sync (synchronizations per step,
 * their sites and the GPU idle after them) and input_stall (GPU idle at
 * step starts and what the host did meanwhile). */
void advice_host_sync(const struct tslog *log, const struct acct_compute *c, struct advice_set *out);
void advice_input_stall(const struct tslog *log, const struct acct_compute *c, struct advice_set *out);
/* The line's "sites" JSON member, when it has sites. */
void advice_sites_json(const struct acct_json *j, const struct advice_line *l);
#endif
