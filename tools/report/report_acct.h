/* report_acct.h: the COMPUTE, COMMUNICATION and ADVICE parts of
 * `trainshim report` (tools/report/report_compute.c, tools/report/report_comm.c), derived
 * from a log's TS_REC_GEMM / TS_REC_NCCL / TS_REC_COMM records.
 *
 * The report's JSON writer (tools/report/report_json.c) hands these functions a small table
 * of its writer's operations (struct acct_json), so the layout of the
 * "compute", "nccl" and "advice" members lives here. */
#ifndef TRAINSHIM_REPORT_ACCT_H
#define TRAINSHIM_REPORT_ACCT_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "observe/compute.h"
#include "read/logread.h"
#include "report/report_advice.h"

struct acct_json {
    void *ctx;
    void (*open)(void *ctx, const char *key, char c); /* key NULL inside an array */
    void (*close)(void *ctx, char c);
    void (*u64)(void *ctx, const char *key, uint64_t v);
    void (*i64)(void *ctx, const char *key, int64_t v);
    void (*num)(void *ctx, const char *key, double v);      /* NaN is written as null */
    void (*str)(void *ctx, const char *key, const char *s); /* NULL is written as null */
};

/* ---- compute (report_compute.c) ------------------------------------------ */
#define ACCT_MAX_SHAPES 4096

struct acct_shape {
    int64_t m, n, k, batch;
    int32_t dtype, prec;
    uint8_t transa, transb;
    uint64_t calls, flops, timed_calls, timed_flops, timed_ns;
    unsigned align; /* 8 / 16 / 0: the multiple dimensions should have */
    bool misaligned;
};

struct acct_step {
    uint64_t first_gemm, gemms; /* index range in the time-sorted GEMMs */
    uint64_t start_ns;
    uint64_t time_ns; /* wall time to the next step's first GEMM; 0: unknown (the last step) */
    uint64_t flops;
    double ideal_ns; /* flops at the device's peak */
    double gpu_ns;   /* GPU time of its GEMMs; NaN: not all were timed */
    bool waits;      /* a copy between it and the next step waited for the GPU */
};

struct acct_compute {
    uint64_t gemm_calls, gemm_failed, gemm_flops;
    uint64_t timed_calls, timed_flops, timed_ns;
    double timed_ideal_ns; /* timed FLOPs at peak */
    double ideal_ns;       /* all FLOPs at peak; NaN: no peak known */
    uint64_t prec_calls[TS_PREC_COUNT], prec_flops[TS_PREC_COUNT];
    double peak_tflops[TS_PREC_COUNT]; /* 0: unknown */
    char peak_source[160];             /* "table: H100 SXM", "TRAINSHIM_PEAK_TFLOPS=...", "" */
    char device_name[64];
    struct acct_shape *shapes; /* by FLOPs, descending */
    size_t n_shapes;
    uint64_t other_shape_calls, other_shape_flops; /* beyond ACCT_MAX_SHAPES */
    /* misaligned (tensor-core) shapes */
    uint64_t mis_calls, mis_flops, mis_timed_ns;
    /* steps */
    size_t period; /* GEMMs per step; 0: none detected */
    struct acct_step *steps;
    size_t n_steps;
    uint64_t prefix_gemms; /* GEMMs before the first step */
    bool single_gemm_loop; /* the GEMMs repeat one shape: no steps */
    uint64_t first_gemm_ns, last_gemm_ns;
    uint64_t wait_after_ns; /* the first copy after the last GEMM that waited for the GPU; 0: none */
    bool ideal_known;
    /* Where the GPU times come from: the log's CUPTI kernels matched to the
     * calls (every GEMM can be timed) or TRAINSHIM_FLOP_SAMPLE events. */
    enum { ACCT_GPU_SAMPLED, ACCT_GPU_CUPTI } gpu_source;
    bool has_cupti;         /* the log has CUPTI records (any) */
    uint64_t cupti_matched; /* GEMM calls given a time by a CUPTI kernel */
    int flop_sample;        /* the run's TRAINSHIM_FLOP_SAMPLE; -1 unknown */
};

/* Derives the compute summary of one log; peak_override: a
 * TRAINSHIM_PEAK_TFLOPS value given at report time (NULL: the one the run
 * logged in its configuration, then the device table).  0 or -1 (memory). */
int acct_compute_analyze(const struct tslog *log, const char *peak_override, struct acct_compute *c);
void acct_compute_free(struct acct_compute *c);
/* Whether the host waited for the GPU in this copy record: a synchronous
 * copy, or one into pageable host memory (it returns once the data arrived). */
bool acct_copy_waits(const struct tslog_event *e);
void acct_compute_text(FILE *f, const struct acct_compute *c);
void acct_compute_json(const struct acct_json *j, const struct acct_compute *c);
/* A step's time on a basis that covers the GPU's work (see report_compute.c);
 * NaN when unknown (the last step) or when there is none. */
double acct_step_time_ns(const struct acct_step *st);
/* Steady-state MFU: GEMM FLOPs at peak over the time of the steps after the
 * first (warm-up); NaN when unknown.  Never above 100%. */
double acct_steady_mfu(const struct acct_compute *c);
/* MFU as reported: steady-state when steps were found, else from the first
 * GEMM to the first copy after the last one that waited for the GPU; NaN
 * when there is no honest basis (acct_mfu_basis says why). */
double acct_mfu(const struct acct_compute *c);
/* The basis of acct_mfu, or why it is n/a. */
const char *acct_mfu_basis(const struct acct_compute *c);

/* The smallest period p of seq (the shape sequence of the GEMMs) whose
 * longest periodic stretch holds at least two periods and half the sequence;
 * 0 if none.  *start / *end receive that stretch. Exposed for tests. */
size_t acct_find_period(const uint64_t *seq, size_t n, size_t *start, size_t *end);

/* ---- communication (report_comm.c) ---------------------------------------- */
struct acct_op {
    uint64_t calls, failed, bytes, algo_bytes;
    uint64_t timed_calls, timed_ns, timed_algo_bytes;
    double timed_bus_bytes; /* algo bytes x bus factor, timed calls */
};

#define ACCT_MAX_COMMS 256
struct acct_comm_row {
    uint64_t id;
    int size, rank;
    uint64_t calls, bytes, timed_calls, timed_ns;
    uint64_t est_ns; /* estimated time in collectives of this rank */
};

struct acct_comm {
    struct acct_op ops[16]; /* by enum ts_nccl_op */
    uint64_t group_calls;   /* ncclGroupStart..End pairs (outermost) */
    uint64_t created, split, destroyed, finalized, aborted;
    struct acct_comm_row *comms;
    size_t n_comms, comms_cap;
    uint64_t est_ns; /* estimated time in collectives (estimate_collective_time) */
    /* device memory NCCL owns (ncclMemAlloc): calls, peak, held at the end */
    uint64_t mem_allocs, mem_frees, mem_peak, mem_live;
    uint64_t run_ns; /* the log's duration */
};

int acct_comm_analyze(const struct tslog *log, struct acct_comm *c);
void acct_comm_free(struct acct_comm *c);
/* A size-capped log's NCCL site totals (report_capped.c), then the time in
 * collectives again. */
int acct_comm_add_site(struct acct_comm *c, const struct ts_rec_site_total *t);
void acct_comm_estimate(struct acct_comm *c);
void acct_comm_text(FILE *f, const struct acct_comm *c);
void acct_comm_json(const struct acct_json *j, const struct acct_comm *c);
/* Several rank logs: time each rank spent in collectives, per-step slowest
 * and fastest rank (steps from the compute summaries). */
void acct_ranks_text(FILE *f, const struct tslog *logs, const struct acct_compute *cs,
                     const struct acct_comm *ms, int n);
void acct_ranks_json(const struct acct_json *j, const struct tslog *logs, const struct acct_compute *cs,
                     const struct acct_comm *ms, int n);

/* ---- advice ---------------------------------------------------------------- */
/* The copy facts the ADVICE section needs from the COPIES analysis and the
 * pinned copy engine's records (TS_REC_COPY_CONVERT) and configuration. */
struct acct_copy_facts {
    uint64_t h2d_bytes, h2d_pageable, d2h_bytes, d2h_pageable, copy_ns;
    bool engine_known;   /* the log has the run's TRAINSHIM_PINNED_COPY[_MIN] */
    bool engine_on;      /* TRAINSHIM_PINNED_COPY was on */
    uint64_t engine_min; /* TRAINSHIM_PINNED_COPY_MIN of the run (bytes) */
    uint64_t converted_bytes, converted_calls, converted_blocked_ns;
    uint64_t small_bytes, small_calls; /* pageable H2D/D2H copies below engine_min */
};
#define ACCT_MAX_ADVICE (8 + ADVICE_MAX_RULES)
/* Writes up to ACCT_MAX_ADVICE lines (each grounded in a measured number)
 * into lines[][256] and, when rules is not NULL, each line's rule id into
 * rules[]; returns how many.  Any argument may be NULL. */
int acct_advice_rules(const struct acct_compute *c, const struct acct_comm *m,
                      const struct acct_copy_facts *cp, uint64_t run_ns, char lines[][256],
                      const char **rules);
int acct_advice(const struct acct_compute *c, const struct acct_comm *m, const struct acct_copy_facts *cp,
                uint64_t run_ns, char lines[][256]);

/* ---- one log, everything (report_comm.c): what cmd_report.c calls -------- */
struct acct_log {
    struct acct_compute c;
    struct acct_comm m;
    bool has_gemm, has_nccl;
    /* an ADVICE line measured elsewhere (the GPU TIMELINE's idle gaps,
     * tools/report/report_gpu.c), empty when none; the caller fills it */
    char gpu_advice[256];
    char torch_advice[256]; /* PyTorch's allocator kept from trainshim (RUN's "torch alloc") */
    /* the rule table's lines (tools/report/report_advice.c); the caller fills it */
    struct advice_set rules;
};
/* Analyzes once (peaks from TRAINSHIM_PEAK_TFLOPS in the report's
 * environment, else the run's, else the device table).  0 or -1 (memory). */
int acct_log_analyze(const struct tslog *log, struct acct_log *a);
void acct_log_free(struct acct_log *a);
/* COMPUTE and COMMUNICATION when the log has such records. */
void acct_log_text(FILE *f, const struct acct_log *a);
/* ADVICE when there is any (copies, GEMMs, collectives, the GPU's idle
 * gaps): the report's last section. */
void acct_advice_text(FILE *f, const struct acct_log *a, const struct acct_copy_facts *cp, uint64_t run_ns);
/* "compute", "nccl" (when present) and "advice" (when not empty) members. */
void acct_log_json(const struct acct_json *j, const struct acct_log *a, const struct acct_copy_facts *cp,
                   uint64_t run_ns);
/* Several logs: the per-rank table and stragglers (when any log has GEMM or
 * NCCL records). */
void acct_logs_text(FILE *f, const struct tslog *logs, const struct acct_log *a, int n);
void acct_logs_json(const struct acct_json *j, const struct tslog *logs, const struct acct_log *a, int n);
#endif
