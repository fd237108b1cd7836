/* gen_golden_logs: writes the small deterministic logs under tests/golden/
 * with the logfmt.h structures directly (fixed pids, hosts, timestamps), so
 * that `trainshim report` outputs can be compared with committed files.
 * Built and run by tests/integration/test_report_golden.sh:
 *     gen_golden_logs OUTDIR
 * writes OUTDIR/rank0.tslog, rank1.tslog, truncated.tslog, torch_pool.tslog,
 * queued_gemms.tslog.
 *
 * rank0 is designed so that its peak needs time ordering: thread 102's
 * records come after thread 101's in the file, but its 2 MiB allocation at
 * 45 ms overlaps thread 101's 1 MiB + 4 MiB: the peak is 7 MiB (5 MiB in
 * file order). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "gen_log.h"
#include "log/logfmt.h"

#define START_NS GEN_START_NS /* monotonic start */
#define MS 1000000ull
#define MiB (1ull << 20)

static void *rec(uint16_t type, uint32_t size, uint32_t tid, uint64_t ms) { return gen_rec(type, size, tid, ms * MS); }

static void begin(int pid, int rank, int local, int world, const char *host, const char *cmd,
                  size_t cmdlen, const char *const *apis, int napis)
{
    gen_begin(&(struct gen_log_run){ .tid = (uint32_t)pid, .pid = pid, .rank = rank, .local_rank = local,
                                     .world_size = world, .host = host, .cmdline = cmd, .cmdline_len = cmdlen,
                                     .config = "TRAINSHIM_LOG=trainshim.%h.%p.log\nTRAINSHIM_LOG_BUFFER=262144\n",
                                     .apis = apis, .n_apis = napis });
}

/* The H100 every log here runs on, at PCI address pci. */
static void device(uint32_t tid, int ordinal, const char *pci)
{
    gen_device(tid, 1 * MS, &(struct gen_log_device){ .ordinal = ordinal, .name = "NVIDIA H100 80GB HBM3",
                                                     .total_mem = 85520809984ull, .cc_major = 9, .sm_count = 132,
                                                     .pci_bus_id = pci });
}

static struct ts_rec_alloc *alloc(uint32_t tid, uint64_t ms, int api, uint64_t ptr, uint64_t size, int result)
{
    struct ts_rec_alloc *r = rec(TS_REC_ALLOC, sizeof *r, tid, ms);
    r->api = api;
    r->ptr = ptr;
    r->size = size;
    r->stream = 0;
    r->result = result;
    return r;
}

static struct ts_rec_free *dfree(uint32_t tid, uint64_t ms, int api, uint64_t ptr, int result)
{
    struct ts_rec_free *r = rec(TS_REC_FREE, sizeof *r, tid, ms);
    r->api = api;
    r->ptr = ptr;
    r->result = result;
    return r;
}

static void copy(uint32_t tid, uint64_t ms, int api, int dir, uint64_t bytes, int kind, int async,
                 uint64_t dur, int result)
{
    struct ts_rec_copy *r = rec(TS_REC_COPY, sizeof *r, tid, ms);
    r->api = api;
    r->dir = (uint8_t)dir;
    r->bytes = bytes;
    r->host_kind = (uint8_t)kind;
    r->async = (uint8_t)async;
    r->stream = async ? 0x5000 : 0;
    r->duration_ns = dur;
    r->result = result;
}

static void error(uint32_t tid, uint64_t ms, int api, int result)
{
    struct ts_rec_error *r = rec(TS_REC_ERROR, sizeof *r, tid, ms);
    r->api = api;
    r->result = result;
}

enum { API_MALLOC, API_FREE, API_MEMCPY, API_MEMCPY_ASYNC, API_CUMEMALLOC, API_CUMEMFREE, API_MALLOC_ASYNC };
static const char *const apis[] = {"cudaMalloc", "cudaFree", "cudaMemcpy", "cudaMemcpyAsync",
                                   "cuMemAlloc_v2", "cuMemFree_v2", "cudaMallocAsync"};

/* rank 0's records; stop_after < 0: all of them and the end record */
static size_t rank0(int cut_last_record)
{
    static const char cmd[] = "python\0train.py\0--epochs\0" "2";
    begin(1000, 0, 0, 2, "node-a", cmd, sizeof cmd - 1, apis, 7);
    device(101, 0, "0000:3b:00.0");
    /* thread 101's buffer */
    alloc(101, 10, API_MALLOC, 0x7f0000000000ull, 1 * MiB, 0);
    alloc(101, 20, API_MALLOC, 0x7f0000100000ull, 4 * MiB, 0);
    copy(101, 30, API_MEMCPY, TS_H2D, 1 * MiB, TS_HOST_PAGEABLE, 0, 150000, 0);
    alloc(101, 40, API_MALLOC, 0, 64ull << 30, 2);
    error(101, 41, API_MALLOC, 2);
    dfree(101, 50, API_FREE, 0x7f0000000000ull, 0);
    copy(101, 70, API_MEMCPY_ASYNC, TS_D2H, 4 * MiB, TS_HOST_PINNED, 1, 5000, 0);
    dfree(101, 80, API_FREE, 0xdead0000ull, 0);
    dfree(101, 90, API_FREE, 0x7f0000100000ull, 0);
    /* thread 102's buffer, written later, overlapping in time */
    alloc(102, 45, API_CUMEMALLOC, 0x7f0000500000ull, 2 * MiB, 0);
    copy(102, 60, API_MEMCPY_ASYNC, TS_H2D, 2 * MiB, TS_HOST_PINNED, 1, 3000, 0);
    alloc(102, 65, API_MALLOC_ASYNC, 0, 0, 0);
    copy(102, 75, API_MEMCPY_ASYNC, TS_D2D, 2 * MiB, TS_HOST_NONE, 1, 1000, 0);
    size_t before_last = gen_used;
    dfree(102, 85, API_CUMEMFREE, 0x7f0000500000ull, 0);
    if (cut_last_record) {
        gen_seal();
        return before_last + 40; /* 40 of the free record's 56 bytes */
    }
    copy(102, 95, API_MEMCPY, TS_H2D, 512 << 10, TS_HOST_PAGEABLE, 0, 200, 1);
    error(102, 96, API_MEMCPY, 1);
    alloc(102, 99, API_MALLOC, 0x7f0000900000ull, 3000, 0);
    gen_end(101, 100 * MS);
    gen_seal();
    return gen_used;
}

static size_t rank1(void)
{
    /* arguments with a quote, a backslash, a tab, UTF-8 and an invalid byte:
     * the JSON must still parse */
    static const char cmd[] = "python\0-c\0print(\"a\\b\")\tx\0caf\xc3\xa9\0bad\xff";
    begin(1001, 1, 1, 2, "node-a", cmd, sizeof cmd - 1, apis, 7);
    device(201, 1, "0000:5e:00.0");
    alloc(201, 5, API_MALLOC, 0x7e0000000000ull, 8 * MiB, 0);
    copy(201, 6, API_MEMCPY, TS_H2D, 8 * MiB, TS_HOST_PAGEABLE, 0, 1000000, 0);
    /* a record type from a later format version: skipped by its length */
    struct ts_rec_hdr *future = rec(77, 48, 201, 7);
    memset(future + 1, 0xab, 48 - sizeof *future);
    alloc(201, 8, API_MALLOC, 0x7e0000800000ull, 1ull << 30, 0);
    dfree(201, 9, API_FREE, 0x7e0000000000ull, 0);
    error(201, 10, API_FREE, 400);
    gen_end(201, 20 * MS);
    gen_seal();
    return gen_used;
}

/* A cuBLAS FP32 GEMM call (record time in microseconds). */
static void gemm_us(uint64_t us, int api, int64_t m, int64_t n, int64_t k, int ta, int tb)
{
    struct ts_rec_gemm *g = rec(TS_REC_GEMM, sizeof *g, 301, 0);
    g->h.time_ns = START_NS + us * 1000;
    g->api = api;
    g->m = m, g->n = n, g->k = k, g->batch = 1;
    g->flops = 2ull * (uint64_t)(m * n * k);
    g->data_type = g->out_type = 0; /* CUDA_R_32F */
    g->compute_type = 68;           /* CUBLAS_COMPUTE_32F */
    g->transa = (uint8_t)ta;
    g->transb = (uint8_t)tb;
}

enum { P_MALLOC, P_FREE, P_HOSTALLOC, P_FREEHOST, P_EVENTQUERY, P_STREAMQUERY, P_GROUPEND, P_MEMCPY,
       P_MEMCPY_ASYNC, P_GEMM };
static const char *const pool_apis[] = { "cudaMalloc",     "cudaFree",      "cudaHostAlloc", "cudaFreeHost",
                                         "cudaEventQuery", "cuStreamQuery", "ncclGroupEnd",  "cudaMemcpy",
                                         "cudaMemcpyAsync", "cublasSgemm_v2" };

/* A run under torch's default caching allocator, served by trainshim's pool:
 * one 1 MiB cudaMalloc made before the pool existed (outside it), then
 * torch's segments of 2 + 3 x 20 MiB inside it (the pool's peak reserved:
 * 62 MiB), and 4 MiB of pinned host memory (device -1).  Peak device memory
 * allocated is 63 MiB: reserved must read at least that (the old report
 * summed the pinned block too, 67 MiB, against 62 MiB reserved).  Also:
 * not-ready and in-progress statuses (not errors) beside one real error; a
 * synchronous pageable copy whose call time includes a wait; GEMMs of one
 * size with different transposes (512x64x512 NT twice, NN once), never
 * timed. */
static size_t torch_pool(void)
{
    static const char cmd[] = "python\0train.py";
    begin(3000, -1, -1, -1, "node-b", cmd, sizeof cmd - 1, pool_apis, 10);
    device(301, 0, "0000:3b:00.0");
    alloc(301, 5, P_MALLOC, 0x7a0000000000ull, 1 * MiB, 0);
    alloc(301, 10, P_MALLOC, 0x7b0000000000ull, 2 * MiB, 0);
    for (int i = 0; i < 3; i++)
        alloc(301, 11 + (uint64_t)i, P_MALLOC, 0x7b0000200000ull + (uint64_t)i * 20 * MiB, 20 * MiB, 0);
    alloc(301, 14, P_HOSTALLOC, 0x7c0000000000ull, 4 * MiB, 0)->device = -1;
    gemm_us(20000, P_GEMM, 512, 64, 512, 0, 1);
    gemm_us(21000, P_GEMM, 512, 64, 512, 0, 0);
    gemm_us(22000, P_GEMM, 512, 64, 512, 0, 1);
    for (int i = 0; i < 3; i++)
        error(301, 30, P_EVENTQUERY, 600); /* cudaErrorNotReady */
    error(301, 31, P_STREAMQUERY, 600);    /* CUDA_ERROR_NOT_READY */
    error(301, 32, P_GROUPEND, 7);         /* ncclInProgress */
    alloc(301, 33, P_MALLOC, 0, 80ull << 30, 2);
    error(301, 33, P_MALLOC, 2); /* cudaErrorMemoryAllocation: an error */
    copy(301, 40, P_MEMCPY_ASYNC, TS_D2H, 4 * MiB, TS_HOST_PINNED, 1, 1000000, 0);
    copy(301, 45, P_MEMCPY, TS_H2D, 8 * MiB, TS_HOST_PAGEABLE, 0, 30000000, 0);
    dfree(301, 50, P_FREEHOST, 0x7c0000000000ull, 0)->device = -1;
    dfree(301, 51, P_FREE, 0x7a0000000000ull, 0);
    dfree(301, 52, P_FREE, 0x7b0000000000ull, 0);
    struct ts_rec_pool_stats *p = rec(TS_REC_POOL_STATS, sizeof *p, 301, 60);
    p->device = 0;
    p->mode = 0; /* expandable */
    p->reason = TS_POOL_REASON_SHUTDOWN;
    p->peak_reserved_bytes = p->peak_allocated_bytes = p->allocated_at_reserved_peak = 62 * MiB;
    p->reserved_bytes = 60 * MiB;
    p->allocated_bytes = 60 * MiB;
    p->driver_calls = 31;
    p->fence_calls = 12;
    p->allocs = 4;
    p->frees = 1;
    /* a plan of 40 allocations a step, 117 of 120 placed where planned,
     * settled with 2 driver calls since */
    p->plan_adopted = 1;
    p->plan_period = 40;
    p->plan_hits = 117;
    p->plan_misses = 3;
    p->plan_state = TS_POOL_PLAN_SETTLED;
    p->plan_calls_since_settled = 2;
    gen_end(301, 70 * MS);
    gen_seal();
    return gen_used;
}

/* matrixMulCUBLAS's timing loop: 31 SGEMMs of 1024^3 queued 10 us apart
 * with no sync between them, then the result copied back synchronously at
 * 40 ms.  Each GEMM is 2.147 GFLOP, 32 us at the H100's 67 TFLOP/s FP32: the
 * launch gaps made a 320% MFU; from the first GEMM (10 ms) to the copy
 * that waited for the last one (40 ms) it is 31 x 32.04 us / 30 ms = 3.31%. */
static size_t queued_gemms(void)
{
    static const char cmd[] = "./matrixMulCUBLAS";
    begin(3100, -1, -1, -1, "node-b", cmd, sizeof cmd - 1, pool_apis, 10);
    device(301, 0, "0000:3b:00.0");
    for (uint64_t i = 0; i < 31; i++)
        gemm_us(10000 + 10 * i, P_GEMM, 1024, 1024, 1024, 0, 0);
    copy(301, 40, P_MEMCPY, TS_D2H, 4 * MiB, TS_HOST_PAGEABLE, 0, 29000000, 0);
    gen_end(301, 41 * MS);
    gen_seal();
    return gen_used;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_golden_logs OUTDIR\n");
        return 2;
    }
    int bad = 0;
    bad |= gen_write(argv[1], "rank0.tslog", rank0(0));
    bad |= gen_write(argv[1], "rank1.tslog", rank1());
    bad |= gen_write(argv[1], "truncated.tslog", rank0(1));
    bad |= gen_write(argv[1], "torch_pool.tslog", torch_pool());
    bad |= gen_write(argv[1], "queued_gemms.tslog", queued_gemms());
    return bad;
}
