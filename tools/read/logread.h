/* logread.h: reads a trainshim event log (shim/log/logfmt.h) into memory.
 *
 * Never crashes on any input: every length is checked against the bytes
 * present, nothing recurses on input, and allocation sizes are bounded by the
 * input size.  A log cut anywhere yields every complete record before the
 * cut plus a note naming the byte offset; a corrupt record ends the reading
 * the same way (records cannot be resynchronized safely). */
#ifndef TRAINSHIM_LOGREAD_H
#define TRAINSHIM_LOGREAD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log/logfmt.h"

/* One alloc/free/copy/error record, in file order. */
struct tslog_event {
    uint64_t time_ns;
    uint64_t seq;         /* index among events in file order (stable sorting) */
    uint64_t ptr;         /* alloc, free */
    uint64_t bytes;       /* alloc: size requested; copy: bytes */
    uint64_t stream;      /* alloc, free, copy */
    uint64_t duration_ns; /* copy */
    int32_t api;
    int32_t result;
    int32_t device; /* alloc, free */
    uint32_t tid;
    uint16_t type;     /* TS_REC_ALLOC, _FREE, _COPY, _ERROR */
    uint8_t dir;       /* copy: enum ts_copy_dir */
    uint8_t host_kind; /* copy: enum ts_host_kind */
    uint8_t async;     /* copy */
};

/* One outermost GEMM call (TS_REC_GEMM). gpu_ns: sampled GPU time, 0 if the
 * call was not timed (or its time never arrived). */
struct tslog_gemm {
    uint64_t time_ns, flops, stream, sample_id, gpu_ns;
    int64_t m, n, k, batch;
    int32_t api, device, data_type, out_type, compute_type, result;
    uint32_t tid;
    uint8_t transa, transb, is_complex;
};

/* One NCCL call (TS_REC_NCCL); op is enum ts_nccl_op (shim/observe/comm.h). */
struct tslog_nccl {
    uint64_t time_ns, count, bytes, comm_id, stream, sample_id, gpu_ns;
    int32_t api, op, datatype, comm_size, rank, peer, result;
    uint32_t group_depth, tid;
};

/* Communicator life (TS_REC_COMM); kind is enum ts_comm_kind. */
struct tslog_comm {
    uint64_t time_ns, comm_id, parent_id;
    int32_t api, kind, comm_size, rank, color, result;
};

struct tslog_gpu_time {
    uint64_t sample_id, gpu_ns;
    int32_t kind;
};

/* One host synchronization (TS_REC_HOST_SYNC).  time_ns: when it returned. */
struct tslog_sync {
    uint64_t time_ns, handle, blocked_ns;
    int32_t api, result;
    uint32_t tid, stack_id;
    uint8_t kind, pending; /* TS_SYNC_* (shim/log/logfmt.h) */
};

struct tslog_device {
    int32_t ordinal, cc_major, cc_minor, sm_count;
    uint64_t total_mem;
    uint64_t time_ns;
    char name[TS_DEVICE_NAME_LEN];
    char pci_bus_id[TS_PCI_BUS_ID_LEN];
};

/* Device pool figures (TS_REC_POOL_STATS) of one device: its record with the
 * largest peak reserved (a reset device has a record per pool). */
struct tslog_pool_dev {
    bool seen;
    uint64_t peak_reserved, allocated_at_reserved_peak, peak_allocated;
};
#define TSLOG_POOL_DEVS 64

/* The step plans of the POOL_STATS records that carry them (records: how
 * many; older logs have none; off: of pools that do not plan): counts
 * summed over records, the period of the last one that had a plan, and how
 * many records saw a plan in force, settled or settling, with the driver
 * calls made since the settled ones settled. */
struct tslog_pool_plan {
    uint64_t records, off, adopted, hits, misses, period;
    uint64_t settled, settling, calls_since_settled;
};
/* Adds s's plans to t's (a record's to a log's, a log's to several
 * ranks'): counts add, the last period with a plan stands. */
void tslog_pool_plan_add(struct tslog_pool_plan *t, const struct tslog_pool_plan *s);

struct tslog {
    char *file; /* name given to the reader */
    uint64_t file_size;
    uint16_t version_major, version_minor;

    /* header record */
    bool have_header;
    int32_t pid, rank, local_rank, world_size; /* -1: unknown */
    uint64_t start_realtime_ns, start_mono_ns;
    char *host;    /* NUL-terminated */
    char *cmdline; /* arguments, NUL-separated, cmdline_len bytes + a NUL */
    size_t cmdline_len;
    char *command; /* arguments joined by spaces */
    char *config;  /* NUL-terminated */

    char **api_names; /* api_names[id] or NULL */
    uint32_t n_api_names;

    struct tslog_device *devices;
    size_t n_devices, cap_devices;
    struct tslog_event *events;
    size_t n_events, cap_events;

    uint64_t n_records; /* valid records read, all types */
    uint64_t n_unknown; /* records of types this reader does not know (skipped) */
    uint64_t n_by_type[TS_REC_TYPE_COUNT_V1];
    uint64_t first_time_ns, last_time_ns;

    bool complete; /* the end record was read */
    uint64_t end_time_ns, end_records_written, end_records_dropped;

    bool truncated;       /* reading stopped before the end of the file */
    uint64_t stop_offset; /* first byte not read as a whole valid record */
    char note[320];       /* why reading stopped early, "" if it did not */
    char error[320];      /* fatal: not a (readable) log; "" if none */
    unsigned char *raw;   /* the valid bytes read (preamble and whole records), raw_size of them */
    size_t raw_size;

    /* compute and communication accounting (TS_REC_GEMM/_NCCL/_COMM; the
     * sampled TS_REC_GPU_TIME records are joined into gpu_ns by sample id) */
    struct tslog_gemm *gemms;
    size_t n_gemms, cap_gemms;
    struct tslog_nccl *nccls;
    size_t n_nccls, cap_nccls;
    struct tslog_comm *comms;
    size_t n_comms, cap_comms;
    struct tslog_gpu_time *gpu_times;
    size_t n_gpu_times, cap_gpu_times;
    /* host synchronizations (TS_REC_HOST_SYNC), in file order */
    struct tslog_sync *syncs;
    size_t n_syncs, cap_syncs;

    /* pinned copy engine: totals of TS_REC_COPY_CONVERT / TS_REC_PINNED_ALLOC */
    uint64_t n_copy_converts, copy_converted_bytes, copy_converted_chunks;
    uint64_t copy_converted_blocked_ns, copy_staging_wait_ns;
    uint64_t n_pinned_allocs, n_pinned_cache_hits;

    /* device memory pools (TS_REC_POOL_STATS, TS_REC_POOL_OOM).  Peaks are
     * summed over devices (each device's largest); counts over records. */
    uint64_t n_pool_stats; /* 0: the run had no pool (report prints nothing more) */
    int32_t pool_mode;     /* enum ts_alloc_mode of the last record */
    uint64_t pool_peak_reserved, pool_allocated_at_reserved_peak, pool_peak_allocated;
    uint64_t pool_driver_calls, pool_fence_calls, pool_cache_hits, pool_ooms;
    struct tslog_pool_plan pool_plan;
    uint64_t n_pool_oom_records;
    /* TS_REC_TORCH_BACKEND: enum ts_torch_backend_case (0: none logged) and
     * the allocator configuration the program got */
    uint32_t torch_backend_case;
    char torch_alloc_conf[256];
    struct tslog_pool_dev pool_dev[TSLOG_POOL_DEVS];
};

/* Parse size bytes named name.  Returns 0 when the data is a trainshim log
 * (maybe truncated: see truncated/note), -1 when it is not (see error).  The
 * log owns copies of everything; free it with tslog_free.  */
int tslog_parse(const void *data, size_t size, const char *name, struct tslog *log);
/* The same for a file ("-" is standard input). */
int tslog_read_file(const char *path, struct tslog *log);
void tslog_free(struct tslog *log);
/* Name of an API id: its registered name, or "api#<id>" in buf. */
const char *tslog_api_name(const struct tslog *log, int api, char *buf, size_t n);

/* For report parts that read their own record types from the log's valid
 * bytes (log->raw: report_sites.c, report_gpu.c): a walk over its records in
 * order.  The walk stops at the first record whose length or check is bad,
 * or when fn returns nonzero (that value is returned); -1 when the bytes are
 * not a trainshim log of this major version, else 0. */
int tslog_walk_records(const unsigned char *p, size_t size,
                       int (*fn)(void *arg, const struct ts_rec_hdr *h, const unsigned char *rec), void *arg);
/* The run's value of a TRAINSHIM_* option, from the configuration its header
 * logged ("NAME=value" lines), cut to n - 1 bytes; false if absent. */
bool tslog_config_value(const struct tslog *log, const char *name, char *buf, size_t n);
/* Appends one zeroed-or-not element of size bytes to a growing array (*n of
 * *cap used); its address, or NULL when out of memory. */
void *tslog_push_item(void **arr, size_t *n, size_t *cap, size_t size);
/* A byte count as the report prints it: "123 B", "1.50 MiB". */
const char *tslog_human_bytes(uint64_t b, char *buf, size_t n);
#endif
