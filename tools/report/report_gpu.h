/* report_gpu.h: the GPU TIMELINE part of `trainshim report` and the GPU
 * tracks of the chrome-trace export (tools/report/report_gpu.c), from the CUPTI
 * activity records of a log (TS_REC_GPU_*, written with TRAINSHIM_CUPTI=1).
 *
 * Like the call-stack records (tools/report/report_sites.c), these are read from
 * the log file itself, apart from tools/read/logread.c: robust to any input, a
 * bad record ends the reading. */
#ifndef TRAINSHIM_REPORT_GPU_H
#define TRAINSHIM_REPORT_GPU_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "read/logread.h"
#include "report/report_acct.h"

/* One kernel or copy, times on the log's CLOCK_MONOTONIC axis. */
struct gpu_activity {
    uint64_t start_ns, end_ns;
    uint64_t bytes; /* copies */
    uint32_t stream_id, device;
    uint32_t name_id; /* kernels; 0 unknown */
    uint8_t is_copy;
    uint8_t copy_kind, src_kind, dst_kind; /* CUPTI enums (shim/log/logfmt.h) */
};

struct gpu_name {
    uint32_t id;
    char *name;
};

struct gpu_data {
    struct gpu_activity *acts; /* sorted by start */
    size_t n_acts, n_kernels, n_copies;
    struct gpu_name *names; /* sorted by id */
    size_t n_names;
    bool have_clock;         /* a TS_REC_GPU_CLOCK was read (else CUPTI time = log time) */
    int64_t clock_offset_ns; /* log time - CUPTI time */
    uint32_t status;         /* the last TS_GPU_STATUS_* seen, 0 none */
    char detail[400];        /* of an "unavailable" status */
    uint64_t dropped;        /* records CUPTI reported lost */
};

/* Reads the GPU records among the log's valid bytes (log->raw).  0 (no
 * records is not an error), or -1 when there are no bytes to read. */
int gpu_load(const struct tslog *log, struct gpu_data *d);
/* The time the GPU spent in copies by CUPTI's records (*n of them); false
 * when the log has none. */
bool gpu_copy_time(const struct tslog *log, uint64_t *ns, uint64_t *n);
/* The same from bytes in memory (for fuzzing: robust to any input). */
int gpu_parse(const unsigned char *data, size_t size, struct gpu_data *d);
void gpu_free(struct gpu_data *d);
/* The kernel name of an id ("kernel#<id>" in buf when unknown). */
const char *gpu_kernel_name(const struct gpu_data *d, uint32_t id, char *buf, size_t n);

/* True when a kernel name contains "gemm" (any case): a cuBLAS/cuBLASLt GEMM. */
bool gpu_is_gemm_name(const char *name);
/* GPU time of each GEMM call of log from the kernels named *gemm* in d
 * (tools/report/report_gemm_gpu.c): gpu_ns[i] for log->gemms[i] (n_gemms entries),
 * 0 when unmatched or failed.  Matched by device, stream and time order.
 * Returns how many calls got a time, or -1 when out of memory. */
long gpu_match_gemms(const struct tslog *log, const struct gpu_data *d, uint64_t *gpu_ns);

/* The GPU TIMELINE section (text: one part per log when there are several),
 * or the "gpu" JSON member of one log.  Both say how to turn CUPTI on when
 * a log has no GPU records. */
void gpu_report_text(FILE *f, const struct tslog *logs, int n);
/* The idle-gap advice line of a log (for the report's ADVICE section);
 * false when its gaps do not call for one or it has no GPU records. */
bool gpu_log_advice(const struct tslog *log, char *buf, size_t n);
void gpu_report_json(const struct acct_json *j, const struct tslog *log);
#endif
