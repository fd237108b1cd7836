/* logfmt.h: the ONE definition of the trainshim event log format, shared by
 * the writer (shim/log/log.c, shim/log/events.c) and the reader (tools/read/logread.c) so
 * the two cannot drift.  docs/log-format.md describes it in prose.
 *
 * A log is a 16-byte preamble followed by records.  Every record starts with
 * struct ts_rec_hdr and is `len` bytes long (a multiple of 8), so a reader
 * skips a record type it does not know by its length.  A record's fields may
 * grow at the end in later minor versions: readers take the fields they know
 * and ignore the rest; a record shorter than the reader's struct has its
 * missing fields read as zero.  Integers are little-endian (the preamble's
 * byte-order word says so); the writer is the host, and every supported host
 * is little-endian.
 *
 * Every record carries a check value (ts_rec_check) over all its bytes, so a
 * log cut anywhere (kill -9, full disk) or overwritten reads up to its last
 * complete record and no further. */
#ifndef TRAINSHIM_LOGFMT_H
#define TRAINSHIM_LOGFMT_H
#include <stdint.h>
#include <string.h>

#define TS_LOG_MAGIC "TSHMLOG\n" /* 8 bytes, no NUL */
#define TS_LOG_VERSION_MAJOR 1   /* a reader rejects another major */
#define TS_LOG_VERSION_MINOR 0   /* a reader accepts any minor */
#define TS_LOG_BYTE_ORDER 0x01020304u

struct ts_log_preamble {
    char magic[8];
    uint16_t version_major;
    uint16_t version_minor;
    uint32_t byte_order; /* TS_LOG_BYTE_ORDER as written by the host */
};

/* Record types.  New types get new numbers; numbers are never reused. */
enum ts_rec_type {
    TS_REC_HEADER = 1,    /* process facts; the first record of every log */
    TS_REC_API_NAMES = 2, /* names of API ids (ts_register_apis) */
    TS_REC_DEVICE = 3,
    TS_REC_ALLOC = 4,
    TS_REC_FREE = 5,
    TS_REC_COPY = 6,
    TS_REC_ERROR = 7,
    TS_REC_END = 8,          /* written at clean shutdown: the log is complete */
    TS_REC_TYPE_COUNT_V1 = 9 /* one past the last type this version knows */
};

/* Header flags (ts_rec_hdr.flags): none defined yet; readers ignore unknown
 * bits, writers write 0. */

struct ts_rec_hdr {
    uint32_t len;  /* bytes of the whole record, header included; multiple of 8 */
    uint16_t type; /* enum ts_rec_type */
    uint16_t flags;
    uint32_t tid;     /* Linux thread id of the thread the event happened on */
    uint32_t check;   /* ts_rec_check() of the record with this field 0 */
    uint64_t time_ns; /* CLOCK_MONOTONIC when the record was made */
};

#define TS_REC_ALIGN 8u
/* Upper bound of a valid record: a reader rejects longer ones as corrupt. */
#define TS_REC_MAX_LEN (16u << 20)

/* TS_REC_HEADER.  Strings follow the fixed part, in this order, each exactly
 * its *_len bytes (no terminator; cmdline's arguments are NUL-separated as in
 * /proc/self/cmdline), then zero padding to the record length. */
struct ts_rec_header {
    struct ts_rec_hdr h;
    int32_t pid;
    int32_t rank;               /* -1: unknown */
    int32_t local_rank;         /* -1: unknown */
    int32_t world_size;         /* -1: unknown */
    uint64_t start_realtime_ns; /* CLOCK_REALTIME at log creation */
    uint64_t start_mono_ns;     /* CLOCK_MONOTONIC at the same instant */
    uint32_t host_len;
    uint32_t cmdline_len;
    uint32_t config_len; /* effective configuration, "name=value\n" lines */
    uint32_t reserved;
};

/* TS_REC_API_NAMES: names of API ids first_id .. first_id+count-1, each
 * NUL-terminated, back to back after the fixed part. */
struct ts_rec_api_names {
    struct ts_rec_hdr h;
    uint32_t first_id;
    uint32_t count;
};

#define TS_DEVICE_NAME_LEN 256
#define TS_PCI_BUS_ID_LEN 32
struct ts_rec_device {
    struct ts_rec_hdr h;
    int32_t ordinal;
    int32_t cc_major;
    int32_t cc_minor;
    int32_t sm_count;
    uint64_t total_mem;
    char name[TS_DEVICE_NAME_LEN];      /* NUL-terminated (truncated if longer) */
    char pci_bus_id[TS_PCI_BUS_ID_LEN]; /* e.g. "0000:3b:00.0", NUL-terminated */
};

struct ts_rec_alloc {
    struct ts_rec_hdr h;
    int32_t api; /* API id (index in the API name table) */
    int32_t device;
    uint64_t ptr;
    uint64_t size; /* bytes requested */
    uint64_t stream;
    int32_t result; /* the API's own status code; 0 = success */
    uint32_t reserved;
};

struct ts_rec_free {
    struct ts_rec_hdr h;
    int32_t api;
    int32_t device;
    uint64_t ptr;
    uint64_t stream;
    int32_t result;
    uint32_t reserved;
};

struct ts_rec_copy {
    struct ts_rec_hdr h;
    int32_t api;
    uint8_t dir;       /* enum ts_copy_dir (core.h) */
    uint8_t host_kind; /* enum ts_host_kind (core.h) */
    uint8_t async;     /* 1: an asynchronous API */
    uint8_t reserved0;
    uint64_t bytes;
    uint64_t stream;
    uint64_t duration_ns; /* host time spent inside the call */
    int32_t result;
    uint32_t reserved;
};

struct ts_rec_error {
    struct ts_rec_hdr h;
    int32_t api;
    int32_t result;
};

struct ts_rec_end {
    struct ts_rec_hdr h;
    uint64_t records_written; /* records before this one (header included) */
    uint64_t records_dropped; /* events lost (e.g. buffers exhausted) */
};

_Static_assert(sizeof(struct ts_log_preamble) == 16, "preamble layout");
_Static_assert(sizeof(struct ts_rec_hdr) == 24, "record header layout");
_Static_assert(sizeof(struct ts_rec_header) % 8 == 0, "header record alignment");
_Static_assert(sizeof(struct ts_rec_api_names) % 8 == 0, "api names alignment");
_Static_assert(sizeof(struct ts_rec_device) % 8 == 0, "device alignment");
_Static_assert(sizeof(struct ts_rec_alloc) == 64, "alloc layout");
_Static_assert(sizeof(struct ts_rec_free) == 56, "free layout");
_Static_assert(sizeof(struct ts_rec_copy) == 64, "copy layout");
_Static_assert(sizeof(struct ts_rec_error) == 32, "error layout");
_Static_assert(sizeof(struct ts_rec_end) == 40, "end layout");

/* ---- compute and communication accounting (shim/observe/compute.c, shim/observe/comm.c).
 * Numbered apart from the enum above so features adding types in parallel
 * cannot collide; readers skip them by length like any unknown type. */
#define TS_REC_GEMM 16     /* one outermost cuBLAS/cuBLASLt GEMM call */
#define TS_REC_NCCL 17     /* one NCCL collective, send/recv or group call */
#define TS_REC_COMM 18     /* communicator created / split / destroyed */
#define TS_REC_GPU_TIME 19 /* sampled GPU time of an earlier GEMM/NCCL record */

/* TS_REC_GEMM.  flops = 2*m*n*k*batch (x4 complex), computed by the writer.
 * sample_id != 0: a TS_REC_GPU_TIME with that id may follow (the call was
 * timed with events; the time arrives when the events complete). */
struct ts_rec_gemm {
    struct ts_rec_hdr h;
    int32_t api;
    int32_t device;
    int64_t m, n, k, batch;
    uint64_t flops;
    uint64_t stream;
    uint64_t sample_id;
    int32_t data_type;      /* cudaDataType_t of A (and B) */
    int32_t out_type;       /* cudaDataType_t of C/D */
    int32_t compute_type;   /* cublasComputeType_t; -1 unknown */
    uint8_t transa, transb; /* cublasOperation_t */
    uint8_t is_complex;
    uint8_t reserved0;
    int32_t result;
    uint32_t reserved;
};

/* enum ts_nccl_op values (shim/observe/comm.h) */
/* TS_REC_NCCL.  bytes = count * element size (the buffer the call names);
 * the reader derives the nccl-tests "S" and busbw from op and comm_size. */
struct ts_rec_nccl {
    struct ts_rec_hdr h;
    int32_t api;
    int32_t op; /* enum ts_nccl_op */
    uint64_t count;
    uint64_t bytes;
    uint64_t comm_id; /* same value on every rank of one communicator */
    uint64_t stream;
    uint64_t sample_id;
    int32_t datatype;  /* ncclDataType_t */
    int32_t comm_size; /* -1 unknown */
    int32_t rank;      /* -1 unknown */
    int32_t peer;      /* root or peer; -1 none */
    int32_t result;
    uint32_t group_depth; /* open ncclGroupStart levels when called */
};

/* TS_REC_COMM.  kind: 1 created, 2 split from parent_id, 3 destroyed,
 * 4 aborted, 5 finalized. */
struct ts_rec_comm {
    struct ts_rec_hdr h;
    int32_t api;
    int32_t kind;
    uint64_t comm_id;
    uint64_t parent_id;
    int32_t comm_size;
    int32_t rank;
    int32_t color;
    int32_t result;
};

/* TS_REC_GPU_TIME: kind = TS_REC_GEMM or TS_REC_NCCL of the timed record. */
struct ts_rec_gpu_time {
    struct ts_rec_hdr h;
    uint64_t sample_id;
    uint64_t gpu_ns;
    int32_t kind;
    int32_t reserved;
};
_Static_assert(sizeof(struct ts_rec_gemm) == 112, "gemm layout");
_Static_assert(sizeof(struct ts_rec_nccl) == 96, "nccl layout");
_Static_assert(sizeof(struct ts_rec_comm) == 64, "comm layout");
_Static_assert(sizeof(struct ts_rec_gpu_time) == 48, "gpu time layout");

/* ---- allocation call stacks (shim/log/stacks.c, TRAINSHIM_STACKS=DEPTH).
 * Raw return addresses only; tools/read/symbolize.c names them at report time
 * from the module map.  Numbered apart like the accounting records. */
#define TS_REC_STACK 24       /* one distinct call stack, written once */
#define TS_REC_MODULES 25     /* the loaded modules; again after a dlopen/dlclose */
#define TS_REC_ALLOC_STACK 26 /* the stack of one TS_REC_ALLOC (same tid, ptr, time) */

/* TS_REC_STACK: n_frames uint64_t return addresses follow, innermost first
 * (the caller of the CUDA API first; the shim's own frames are left out).
 * modules_gen: the TS_REC_MODULES generation that maps them. */
struct ts_rec_stack {
    struct ts_rec_hdr h;
    uint32_t stack_id; /* >= 1, unique in the log */
    uint32_t n_frames;
    uint32_t modules_gen;
    uint32_t reserved;
};

/* TS_REC_MODULES: count entries follow, each a struct ts_module_entry then
 * path_len bytes of path and build_id_len bytes of GNU build-id, padded with
 * zeros to a multiple of 8.  A generation lists every module loaded then. */
struct ts_rec_modules {
    struct ts_rec_hdr h;
    uint32_t generation; /* 1, 2, ...: a new one after each change */
    uint32_t count;
};
struct ts_module_entry {
    uint64_t base;  /* load bias (dlpi_addr): file vaddr + base = address */
    uint64_t start; /* lowest and one past the highest address of its PT_LOAD segments */
    uint64_t end;
    uint32_t path_len;
    uint32_t build_id_len;
};

/* TS_REC_ALLOC_STACK: written right after the TS_REC_ALLOC it belongs to, on
 * the same thread; alloc_time_ns is that record's time_ns. */
struct ts_rec_alloc_stack {
    struct ts_rec_hdr h;
    uint64_t ptr;
    uint64_t alloc_time_ns;
    uint32_t stack_id;
    int32_t device;
};
_Static_assert(sizeof(struct ts_rec_stack) == 40, "stack layout");
_Static_assert(sizeof(struct ts_rec_modules) == 32, "modules layout");
_Static_assert(sizeof(struct ts_module_entry) == 32, "module entry layout");
_Static_assert(sizeof(struct ts_rec_alloc_stack) == 48, "alloc stack layout");

/* ---- pinned copy engine (shim/copy/copy_engine.c, shim/copy/host_cache.c).
 * Numbered apart like the accounting records. */
#define TS_REC_COPY_CONVERT 28 /* a pageable copy carried out through pinned staging */
#define TS_REC_PINNED_ALLOC 29 /* a pinned host allocation served by (or added to) the cache */

/* TS_REC_COPY_CONVERT follows the TS_REC_COPY of the same call (same tid).
 * bytes: moved through staging (the rest, if any, went through the original
 * call); host_blocked_ns: the whole call as the program saw it;
 * staging_wait_ns: time spent waiting for a free staging buffer. */
struct ts_rec_copy_convert {
    struct ts_rec_hdr h;
    int32_t api;
    uint8_t dir;  /* enum ts_copy_dir (core.h): TS_H2D or TS_D2H */
    uint8_t sync; /* 1: a synchronous entry point */
    uint16_t reserved0;
    uint64_t bytes;
    uint64_t host_blocked_ns;
    uint64_t staging_wait_ns;
    uint32_t chunks;
    uint32_t reserved;
};
/* TS_REC_PINNED_ALLOC follows the TS_REC_ALLOC of the same call.
 * size: asked; class_size: held; cache_hit: 1 if no real allocation was made. */
struct ts_rec_pinned_alloc {
    struct ts_rec_hdr h;
    int32_t api;
    uint32_t flags; /* CU_MEMHOSTALLOC_* */
    uint64_t ptr;
    uint64_t size;
    uint64_t class_size;
    uint32_t cache_hit;
    uint32_t reserved;
};
_Static_assert(sizeof(struct ts_rec_copy_convert) == 64, "copy convert layout");
_Static_assert(sizeof(struct ts_rec_pinned_alloc) == 64, "pinned alloc layout");

/* ---- device memory allocator (shim/devmem/devmem.c, shim/devmem/devmem_oom.c).
 * Numbered apart like the accounting records. */
#define TS_REC_POOL_STATS 32 /* one device pool's totals, at cudaDeviceReset and at shutdown */
#define TS_REC_POOL_OOM 33   /* the pool could not serve a request (after releasing idle memory) */

/* TS_REC_POOL_STATS: the pool's counters since it was created (a reset
 * device gets a new pool, so one device may have several records: the
 * reader keeps the largest peak and adds the counts).  reason: 1 the
 * device was reset, 2 process shutdown.  mode: enum ts_alloc_mode
 * (shim/alloc/alloc.h: 0 expandable, 1 caching, 2 off). */
struct ts_rec_pool_stats {
    struct ts_rec_hdr h;
    int32_t device;
    int32_t mode;
    uint32_t reason;
    uint32_t reserved0;
    uint64_t peak_reserved_bytes;
    uint64_t peak_allocated_bytes;
    uint64_t allocated_at_reserved_peak; /* allocated bytes while reserved was at its peak */
    uint64_t reserved_bytes;             /* now */
    uint64_t allocated_bytes;            /* now */
    uint64_t driver_calls;               /* memory calls the pool made to the driver (VMM, segments) */
    uint64_t cache_hits;                 /* allocations served without a driver call */
    uint64_t ooms;
    uint64_t allocs, frees;
    uint64_t segments;     /* now (caching) */
    uint64_t mapped_pages; /* now (expandable) */
    uint64_t page_moves;   /* idle pages unmapped and mapped elsewhere */
    /* appended: fence checks (event record/query/sync, stream queries),
     * which driver_calls leaves out; an older record reads as 0 */
    uint64_t fence_calls;
    /* appended: the step plan (expandable pools with TRAINSHIM_ALLOC_STEP_PLAN;
     * an older record is shorter): plans adopted, the latest one's period in
     * allocations, placements at a plan's address or not, and the plan in
     * force at the time of the record (TS_POOL_PLAN_*) with the driver calls
     * the pool made since it settled */
    uint64_t plan_adopted, plan_period, plan_hits, plan_misses;
    uint64_t plan_calls_since_settled;
    uint32_t plan_state;
    uint32_t reserved1;
};
#define TS_POOL_PLAN_NONE 0u     /* no plan in force */
#define TS_POOL_PLAN_SETTLING 1u /* in force, its first periods still moving pages in */
#define TS_POOL_PLAN_SETTLED 2u
#define TS_POOL_PLAN_OFF 3u /* the pool does not plan (not expandable, or the plan turned off) */
#define TS_POOL_REASON_RESET 1u
#define TS_POOL_REASON_SHUTDOWN 2u

/* TS_REC_POOL_OOM: figures of the pool when it refused `requested` bytes. */
struct ts_rec_pool_oom {
    struct ts_rec_hdr h;
    int32_t device;
    int32_t mode;
    uint64_t requested;
    uint64_t reserved_bytes;
    uint64_t allocated_bytes;
    uint64_t largest_free_block;
};
_Static_assert(sizeof(struct ts_rec_pool_stats) == 200, "pool stats layout");
_Static_assert(sizeof(struct ts_rec_pool_oom) == 64, "pool oom layout");

/* ---- memory offload (shim/offload, TRAINSHIM_OFFLOAD=on).  Numbered apart
 * like the accounting records. */
#define TS_REC_OFFLOAD 34 /* a pause, a resume, a failed page move, or the totals at shutdown */
#define TS_OFFLOAD_PAUSE 1u
#define TS_OFFLOAD_RESUME 2u
#define TS_OFFLOAD_SUMMARY 3u /* totals since start (peak_host_bytes, counts) */
#define TS_OFFLOAD_FAILED 4u  /* a page move failed and was rolled back */

/* TS_REC_OFFLOAD.  bytes: moved by the pause/resume; duration_ns: how long it
 * took.  The counts are totals since the start at the time of the record. */
struct ts_rec_offload {
    struct ts_rec_hdr h;
    int32_t device; /* -1: all devices */
    uint32_t kind;  /* TS_OFFLOAD_* */
    uint32_t tag;   /* pause/resume: the tag (0 = all) */
    uint32_t reserved0;
    uint64_t bytes;
    uint64_t duration_ns;
    uint64_t host_bytes;      /* host-backed now */
    uint64_t peak_host_bytes; /* host-backed at most */
    uint64_t oom_host_pages;  /* pages backed by host memory at an out-of-memory */
    uint64_t demoted_pages, promoted_pages;
    uint64_t failed_moves, managed_allocs;
};
_Static_assert(sizeof(struct ts_rec_offload) == 112, "offload layout");

/* TS_REC_OFFLOAD_STEP: one training step as offload saw it (written at each
 * step boundary it detects, and for the rest of the run at exit).  Link
 * bytes are the pages moved (promoted + demoted, one page each) plus the
 * bytes the step's kernels, GEMMs and copies reached on host-backed pages;
 * predicted_ns is link bytes / link_mbps. */
#define TS_REC_OFFLOAD_STEP 60
#define TS_OFFLOAD_STEP_TAIL 1u /* flags: the run's end, not a whole step */
struct ts_rec_offload_step {
    struct ts_rec_hdr h;
    uint32_t step;      /* 0-based: boundaries seen before this record */
    uint32_t flags;     /* TS_OFFLOAD_STEP_* */
    uint32_t period;    /* synchronizations per step (0: none detected yet) */
    uint32_t link_mbps; /* the link rate predicted_ns assumes (MB/s) */
    uint64_t promoted_pages, demoted_pages, page_size;
    uint64_t touched_bytes;      /* bytes the step's work reached in pooled memory */
    uint64_t host_touched_bytes; /* of them, on host-backed pages */
    uint64_t link_bytes;         /* moved + host_touched_bytes */
    uint64_t predicted_ns;
    uint64_t touches; /* kernel, GEMM and copy arguments seen */
};
_Static_assert(sizeof(struct ts_rec_offload_step) == 104, "offload step layout");

/* ---- GPU activity from CUPTI (shim/observe/cupti.c, TRAINSHIM_CUPTI=1).
 * Numbered apart like the accounting records.  Times of kernels and copies
 * are CUPTI timestamps (ns); TS_REC_GPU_CLOCK pairs one with the log's
 * CLOCK_MONOTONIC so the reader can put them on the log's time axis. */
#define TS_REC_GPU_KERNEL 40 /* one kernel execution (CUPTI CONCURRENT_KERNEL activity) */
#define TS_REC_GPU_MEMCPY 41 /* one copy as the device ran it (CUPTI MEMCPY activity) */
#define TS_REC_GPU_NAME 42   /* a kernel name, once per distinct name */
#define TS_REC_GPU_CLOCK 43  /* a CUPTI timestamp and CLOCK_MONOTONIC taken together */
#define TS_REC_GPU_STATUS 44 /* CUPTI started, unavailable, or its final counts */

struct ts_rec_gpu_kernel {
    struct ts_rec_hdr h;
    uint64_t start_ns; /* CUPTI timestamps */
    uint64_t end_ns;
    uint32_t stream_id; /* CUPTI stream id (cuStreamGetId) */
    uint32_t device;
    uint32_t name_id; /* a TS_REC_GPU_NAME id; 0: unknown */
    uint32_t correlation_id;
};

/* copy_kind: CUpti_ActivityMemcpyKind (1 HtoD, 2 DtoH, 3 HtoA, 4 AtoH, 5 AtoA,
 * 6 AtoD, 7 DtoA, 8 DtoD, 9 HtoH, 10 PtoP); src_kind / dst_kind:
 * CUpti_ActivityMemoryKind (1 pageable, 2 pinned, 3 device, 4 array,
 * 5 managed, 6 device static, 7 managed static), as the driver saw them. */
struct ts_rec_gpu_memcpy {
    struct ts_rec_hdr h;
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t bytes;
    uint32_t stream_id;
    uint32_t device;
    uint8_t copy_kind;
    uint8_t src_kind;
    uint8_t dst_kind;
    uint8_t reserved0;
    uint32_t correlation_id;
};

/* TS_REC_GPU_NAME: len bytes of name (no terminator) follow, then zero
 * padding to the record length.  Ids start at 1 and are unique in a log;
 * the record precedes every kernel record that uses its id. */
struct ts_rec_gpu_name {
    struct ts_rec_hdr h;
    uint32_t name_id;
    uint32_t len;
};

/* TS_REC_GPU_CLOCK: cupti_ns was read between two CLOCK_MONOTONIC reads whose
 * midpoint is mono_ns, so GPU time t is at mono_ns + (t - cupti_ns) on the
 * log's axis.  Written when CUPTI starts and again at the final flush. */
struct ts_rec_gpu_clock {
    struct ts_rec_hdr h;
    uint64_t cupti_ns;
    uint64_t mono_ns;
};

/* TS_REC_GPU_STATUS.  state: 1 started (activity for kernels and copies is
 * being recorded), 2 unavailable (libcupti could not be loaded or refused;
 * detail says why), 3 final (at the last flush: the totals below).
 * dropped: records CUPTI reported lost (cuptiActivityGetNumDroppedRecords)
 * plus records lost for want of a free buffer.  detail: detail_len bytes
 * follow, then zero padding. */
#define TS_GPU_STATUS_STARTED 1u
#define TS_GPU_STATUS_UNAVAILABLE 2u
#define TS_GPU_STATUS_FINAL 3u
struct ts_rec_gpu_status {
    struct ts_rec_hdr h;
    uint32_t state;
    uint32_t detail_len;
    uint64_t kernels; /* kernel records logged so far */
    uint64_t memcpys; /* copy records logged so far */
    uint64_t dropped;
    uint64_t buffers; /* activity buffers completed */
};
_Static_assert(sizeof(struct ts_rec_gpu_kernel) == 56, "gpu kernel layout");
_Static_assert(sizeof(struct ts_rec_gpu_memcpy) == 64, "gpu memcpy layout");
_Static_assert(sizeof(struct ts_rec_gpu_name) == 32, "gpu name layout");
_Static_assert(sizeof(struct ts_rec_gpu_clock) == 40, "gpu clock layout");
_Static_assert(sizeof(struct ts_rec_gpu_status) == 64, "gpu status layout");

/* ---- NUMA placement (shim/numa/, TRAINSHIM_NUMA).  Numbered apart like the
 * accounting records. */
#define TS_REC_NUMA 48 /* the GPU's NUMA node and the process's CPUs and memory policy */

/* TS_REC_NUMA: written once, at the first CUDA context.  mode: the
 * TRAINSHIM_NUMA index (1 report, 2 bind, 3 bind:split).  node: the GPU's
 * node, -1 unknown.  mem_mode: the process's memory policy (MPOL_* of
 * <numaif.h>: 0 default, 1 preferred, 2 bind, 3 interleave, 4 local), -1
 * unreadable; mem_nodes its node list.  allowed_cpus: the CPUs the process
 * was allowed before any binding; bound_cpus: the affinity trainshim set
 * ("" when it set none).  place_node: the node pinned buffers are placed on,
 * -1 none.  slot/slots: this rank's share of the node's CPUs (bind:split;
 * 0/1 otherwise).  status: TS_NUMA_* bits.  Lists are cpulist strings
 * ("0-3,8"), NUL-terminated, truncated when longer. */
#define TS_NUMA_LIST_LEN 256
#define TS_NUMA_NO_NODE 0x1u       /* sysfs unreadable or no node for the GPU */
#define TS_NUMA_NO_CPUS 0x2u       /* the node lists no CPUs */
#define TS_NUMA_OUTSIDE 0x4u       /* none of the node's CPUs is allowed: affinity kept */
#define TS_NUMA_BOUND 0x8u         /* the affinity was narrowed to bound_cpus */
#define TS_NUMA_MEM_UNPLACED 0x10u /* the node is not one the kernel places memory on */
struct ts_rec_numa {
    struct ts_rec_hdr h;
    int32_t device;
    int32_t node;
    uint32_t mode;
    uint32_t status;
    int32_t mem_mode;
    int32_t place_node;
    int32_t slot;
    int32_t slots;
    char pci_bus_id[TS_PCI_BUS_ID_LEN];
    char node_cpus[TS_NUMA_LIST_LEN];
    char allowed_cpus[TS_NUMA_LIST_LEN];
    char bound_cpus[TS_NUMA_LIST_LEN];
    char mem_nodes[64];
};
_Static_assert(sizeof(struct ts_rec_numa) == 920, "numa layout");

/* ---- the size cap (shim/log/logcap.c, TRAINSHIM_LOG_MAX).  Past the cap
 * the per-event records (alloc, free, copy, error, GEMM, NCCL, GPU times,
 * stacks of allocations, copy conversions, pinned allocations, CUPTI
 * kernels and copies, host synchronizations) are no longer written: each is added to the total of
 * its call site, and the totals are written at shutdown, before the end
 * record.  Records of other types are still written.  Numbered apart like
 * the accounting records. */
#define TS_REC_LOG_CAPPED 52 /* the cap was reached: what was folded, the whole run's memory peak */
#define TS_REC_SITE_TOTAL 53 /* the totals of one call site's folded events */

#define TS_SIZE_BUCKETS 65 /* bucket b >= 1: sizes in [2^(b-1), 2^b); bucket 0: size 0 */

/* TS_REC_LOG_CAPPED.  peak_live_bytes, live_*: the allocations of the
 * whole run (logged and folded) replayed in the order they were written:
 * the bytes of successful TS_REC_ALLOC not yet freed by a successful
 * TS_REC_FREE of the same pointer.  size_buckets: the sizes of the folded
 * successful allocations. */
struct ts_rec_log_capped {
    struct ts_rec_hdr h;
    uint64_t cap_bytes;    /* TRAINSHIM_LOG_MAX */
    uint64_t capped_at_ns; /* time of the first folded record */
    uint64_t records_folded;
    uint64_t records_unsited; /* folded into no site: the site table was full (counted, not summed) */
    uint64_t sites;           /* TS_REC_SITE_TOTAL records that follow */
    uint64_t peak_live_bytes;
    uint64_t live_end_bytes;
    uint64_t live_end_blocks;
    uint64_t size_buckets[TS_SIZE_BUCKETS];
};

/* TS_REC_SITE_TOTAL: one call site = the folded record type, its API and
 * device, and for copies the direction and host kind, for NCCL the
 * operation and communicator rank.  bytes: alloc size requested, copy or
 * conversion bytes, NCCL buffer bytes (count * type size), of the calls that
 * succeeded; flops: GEMM FLOPs of the calls that succeeded. */
struct ts_rec_site_total {
    struct ts_rec_hdr h;
    uint16_t rec_type; /* the folded type: TS_REC_ALLOC, TS_REC_COPY, ... */
    uint8_t dir;       /* copy: enum ts_copy_dir */
    uint8_t host_kind; /* copy: enum ts_host_kind */
    int32_t api;
    int32_t device;
    int32_t op; /* NCCL: enum ts_nccl_op */
    int32_t comm_size;
    int32_t rank;
    uint64_t comm_id;
    uint64_t count;
    uint64_t failed; /* of count: calls whose result was not 0 */
    uint64_t bytes;
    uint64_t flops;
    uint64_t duration_ns; /* copy: host time inside the calls */
};
_Static_assert(sizeof(struct ts_rec_log_capped) == 608, "log capped layout");
_Static_assert(sizeof(struct ts_rec_site_total) == 96, "site total layout");

static inline uint32_t ts_rec_align(uint32_t n) { return (n + TS_REC_ALIGN - 1) & ~(TS_REC_ALIGN - 1); }

/* The per-record check: four independent multiply lanes over the record's
 * 64-bit words (len is a multiple of 8), the check field (bytes 12..15)
 * taken as 0, then a full avalanche of the lanes.
 * Each step is a bijection of its lane, so any change to one word changes
 * the result before the final 32-bit fold; the lanes keep the dependency
 * chain short, which is what the writer's fast path pays for (a few ns for a
 * 64-byte record). */
static inline uint64_t ts_rec_mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static inline uint64_t ts_rec_word(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* len >= sizeof(struct ts_rec_hdr) and a multiple of 8. */
static inline uint32_t ts_rec_check(const void *rec, uint32_t len)
{
    const unsigned char *p = (const unsigned char *)rec;
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    /* the header's three words; bytes 12..15 (the check, little-endian) masked */
    uint64_t a = (len ^ ts_rec_word(p)) * k;
    uint64_t b = (0x243f6a8885a308d3ull ^ (ts_rec_word(p + 8) & 0xffffffffull)) * k;
    uint64_t c = (0x13198a2e03707344ull ^ ts_rec_word(p + 16)) * k;
    uint64_t d = 0xa4093822299f31d0ull;
    for (uint32_t off = 24; off + 8 <= len; off += 8) {
        /* rotate the lanes: each new value depends on the value made four words ago */
        uint64_t t = (d ^ ts_rec_word(p + off)) * k;
        d = c;
        c = b;
        b = a;
        a = t;
    }
    uint64_t h =
        ts_rec_mix64(a) ^ ts_rec_mix64(b + 1) * 3 ^ ts_rec_mix64(c + 2) * 5 ^ ts_rec_mix64(d + 3) * 7;
    h = ts_rec_mix64(h);
    return (uint32_t)h ^ (uint32_t)(h >> 32);
}
/* ---- host synchronizations (shim/observe/sync.c): one record per outermost
 * cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize and
 * their driver twins.  Copies that made the host wait are TS_REC_COPY
 * records already.  Numbered apart like the accounting records. */
#define TS_REC_HOST_SYNC 56

#define TS_SYNC_STREAM 1u /* a stream (handle: the stream as copies log it) */
#define TS_SYNC_DEVICE 2u /* the whole device or context (handle 0) */
#define TS_SYNC_EVENT 3u  /* an event (handle: the event) */

#define TS_SYNC_IDLE 0u    /* the stream or event was complete at entry: nothing to wait for */
#define TS_SYNC_PENDING 1u /* work was still pending at entry */
#define TS_SYNC_UNKNOWN 2u /* not asked (device-wide) or the query failed */

/* TS_REC_HOST_SYNC: h.time_ns is when the call returned; blocked_ns the host
 * time inside it.  stack_id: the TS_REC_STACK of the call site (0: stacks
 * off or not recorded). */
struct ts_rec_host_sync {
    struct ts_rec_hdr h;
    int32_t api;
    uint8_t kind;    /* TS_SYNC_STREAM / _DEVICE / _EVENT */
    uint8_t pending; /* TS_SYNC_IDLE / _PENDING / _UNKNOWN */
    uint16_t reserved0;
    uint64_t handle;
    uint64_t blocked_ns;
    uint32_t stack_id;
    int32_t result;
};
_Static_assert(sizeof(struct ts_rec_host_sync) == 56, "host sync layout");

/* ---- PyTorch's allocator backend (shim/devmem/devmem_torch.c): how the
 * shim found and left PYTORCH_CUDA_ALLOC_CONF at load time, written with the
 * first device pool.  Numbered apart like the accounting records. */
#define TS_REC_TORCH_BACKEND 49

enum ts_torch_backend_case {
    TS_TORCH_BACKEND_ADDED = 1,       /* no backend named: backend:cudaMallocAsync added */
    TS_TORCH_BACKEND_ASYNC = 2,       /* the user named backend:cudaMallocAsync */
    TS_TORCH_BACKEND_NATIVE = 3,      /* the user named backend:native */
    TS_TORCH_BACKEND_EXPANDABLE = 4,  /* the user chose expandable_segments:True */
    TS_TORCH_BACKEND_NO_CACHING = 5,  /* PYTORCH_NO_CUDA_MEMORY_CACHING set */
    TS_TORCH_BACKEND_OFF = 6,         /* TRAINSHIM_TORCH_BACKEND=off */
    TS_TORCH_BACKEND_DISTRIBUTED = 7, /* torch.distributed (WORLD_SIZE, spawned worker, own group) */
    TS_TORCH_BACKEND_HISTORY = 8,     /* the script calls torch's memory history: left alone */
    TS_TORCH_BACKEND_IPC = 9, /* the script uses torch.multiprocessing (CUDA tensors shared): left alone */
    TS_TORCH_BACKEND_GRAPH_TREES = 10, /* torch.compile with CUDA graphs (graph trees): left alone */
    TS_TORCH_BACKEND_MEMPOOL = 11,     /* the script uses torch.cuda.MemPool: left alone */
};

/* TS_REC_TORCH_BACKEND: conf_len bytes follow (the variable's value as the
 * program got it, no terminator), padded to 8. */
struct ts_rec_torch_backend {
    struct ts_rec_hdr h;
    uint32_t backend_case; /* enum ts_torch_backend_case */
    uint32_t conf_len;
};
_Static_assert(sizeof(struct ts_rec_torch_backend) == 32, "torch backend layout");
#endif
