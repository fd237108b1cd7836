/* gen_advice_logs: writes small synthetic logs, each made to trigger one
 * advice rule of tools/report/report_advice.c or to stay just short of it,
 * with figures worked out by hand (tests/integration/test_report_advice.sh
 * checks them):
 *     gen_advice_logs OUTDIR
 *
 * fp32.tslog        10 steps of 3 fp32 GEMMs (compute type 32F, no TF32),
 *                   H100: precision_fp32, 100% of FLOPs, x7.38 as TF32
 *                   (494.7/67), x14.77 as bf16 (989.4/67).
 * tf32.tslog        the same GEMMs with CUBLAS_COMPUTE_32F_FAST_TF32 except
 *                   the first (1024^3): 2^31 of 180 x 2^30 FLOPs in fp32
 *                   (1.1%, under 10%), silent.
 * headroom.tslog    80 GiB device, 20 GiB allocated before the steps, each of
 *                   10 steps allocates and frees 10 GiB: peak 30 GiB (37.5%),
 *                   factor (72 - 20) / 10 = 5.2: memory_headroom.
 * full.tslog        the same with 40 GiB per step: peak 60 GiB (75%), silent.
 * nosteps.tslog     30 GiB allocated, one GEMM: no steps, silent.
 * sync.tslog        TF32 steps, each with a 4-byte D2H copy into pageable
 *                   memory taking 2 ms: host_sync, 9 copies in the 9 full
 *                   steps, 1.0 per step, 2 ms per step.
 * nosync.tslog      the same copies asynchronous into pinned memory: silent.
 * launch.tslog      CUPTI: 400 kernels of 10 us with 10 us gaps: idle 399 x 10
 *                   us in a span of 7990 us (49.9%): launch_bound.
 * long.tslog        400 kernels of 1 ms with 10 us gaps: mean 1 ms, silent.
 *
 * With a second argument "overlap" it writes the logs of
 * tools/report/report_advice_overlap.c's rules instead (see overlap_logs
 * below). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "gen_log.h"
#include "log/logfmt.h"

#define START_NS GEN_START_NS
#define US 1000ull
#define MS 1000000ull
#define GiB (1ull << 30)

static void *rec(uint16_t type, uint32_t size, uint64_t ns) { return gen_rec(type, size, 7, ns); }

static const char *const apis[] = { "cudaMalloc", "cudaFree", "cublasSgemm_v2", "cudaMemcpyAsync" };
enum { API_MALLOC, API_FREE, API_GEMM, API_COPY, N_APIS };

static void begin(void)
{
    gen_begin_h100_run(7, "TRAINSHIM_LOG=x.log\n", apis, N_APIS);
}

static void gemm(uint64_t ns, int64_t m, int64_t n, int64_t k, int compute_type)
{
    struct ts_rec_gemm *g = rec(TS_REC_GEMM, sizeof *g, ns);
    g->api = API_GEMM;
    g->m = m, g->n = n, g->k = k, g->batch = 1;
    g->flops = 2ull * (uint64_t)(m * n * k);
    g->data_type = g->out_type = 0; /* CUDA_R_32F */
    g->compute_type = compute_type;
}

static void alloc(uint64_t ns, uint64_t ptr, uint64_t size)
{
    struct ts_rec_alloc *r = rec(TS_REC_ALLOC, sizeof *r, ns);
    r->api = API_MALLOC, r->ptr = ptr, r->size = size;
}

static void dfree(uint64_t ns, uint64_t ptr)
{
    struct ts_rec_free *r = rec(TS_REC_FREE, sizeof *r, ns);
    r->api = API_FREE, r->ptr = ptr;
}

/* A 4-byte D2H copy at the end of a step: into pageable memory (the host
 * waits for the GPU) or asynchronously into pinned memory (it does not). */
static void loss_copy(uint64_t ns, int waits)
{
    struct ts_rec_copy *r = rec(TS_REC_COPY, sizeof *r, ns);
    r->api = API_COPY, r->dir = TS_D2H, r->bytes = 4, r->async = 1, r->stream = 0x5000;
    r->host_kind = waits ? TS_HOST_PAGEABLE : TS_HOST_PINNED;
    r->duration_ns = waits ? 2 * MS : 10 * US;
}

static void kernel(uint64_t s, uint64_t e)
{
    struct ts_rec_gpu_kernel *k = rec(TS_REC_GPU_KERNEL, sizeof *k, e);
    k->start_ns = START_NS + s, k->end_ns = START_NS + e, k->stream_id = 7, k->name_id = 0;
}

/* 10 steps of three GEMM shapes; the first fp32_gemms of them in plain
 * fp32 (CUBLAS_COMPUTE_32F), the rest CUBLAS_COMPUTE_32F_FAST_TF32; a loss
 * copy per step when loss >= 0 (loss: whether it waits). */
static int loss = -1;
static void steps(int fp32_gemms, uint64_t step_bytes)
{
    for (int s = 0; s < 10; s++) {
        uint64_t t = 10 * MS + (uint64_t)s * 10 * MS;
        int g = 3 * s;
        if (step_bytes)
            alloc(t + 1 * MS, 0x7f0000000000ull, step_bytes);
        gemm(t + 2 * MS, 1024, 1024, 1024, g < fp32_gemms ? 68 : 77);
        gemm(t + 3 * MS, 1024, 4096, 1024, g + 1 < fp32_gemms ? 68 : 77);
        gemm(t + 4 * MS, 4096, 1024, 1024, g + 2 < fp32_gemms ? 68 : 77);
        if (step_bytes)
            dfree(t + 5 * MS, 0x7f0000000000ull);
        if (loss >= 0)
            loss_copy(t + 6 * MS, loss);
    }
}

static int save(const char *dir, const char *name) { return gen_finish(7, gen_last_ns() + MS, dir, name); }

static int kernels(const char *dir, const char *name, uint64_t len)
{
    begin();
    for (uint64_t i = 0, t = 1 * MS; i < 400; i++, t += len + 10 * US)
        kernel(t, t + len);
    return save(dir, name);
}

static int memory(const char *dir, const char *name, uint64_t step_bytes)
{
    begin();
    alloc(5 * MS, 0x7e0000000000ull, 20 * GiB);
    steps(0, step_bytes);
    return save(dir, name);
}

static int overlap_logs(const char *dir);

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[2], "overlap"))
        return overlap_logs(argv[1]);
    if (argc != 2) {
        fprintf(stderr, "usage: gen_advice_logs OUTDIR [overlap]\n");
        return 2;
    }
    int bad = 0;
    begin();
    steps(30, 0);
    bad |= save(argv[1], "fp32.tslog");
    begin();
    steps(1, 0);
    bad |= save(argv[1], "tf32.tslog");
    bad |= memory(argv[1], "headroom.tslog", 10 * GiB);
    bad |= memory(argv[1], "full.tslog", 40 * GiB);
    begin();
    alloc(5 * MS, 0x7e0000000000ull, 30 * GiB);
    gemm(6 * MS, 1024, 1024, 1024, 77);
    bad |= save(argv[1], "nosteps.tslog");
    for (loss = 1; loss >= 0; loss--) {
        begin();
        steps(0, 0);
        bad |= save(argv[1], loss ? "sync.tslog" : "nosync.tslog");
    }
    bad |= kernels(argv[1], "launch.tslog", 10 * US);
    bad |= kernels(argv[1], "long.tslog", 1 * MS);
    return bad;
}

/* ---- tools/report/report_advice_overlap.c's rules ------------------------------
 * frag.tslog        torch left alone (backend record: TRAINSHIM_TORCH_BACKEND=
 *                   off): segments of 20 MiB at 1..4 ms and one of 2 MiB
 *                   (82 MiB), a failed 100 MiB cudaMalloc at 10 ms, the
 *                   first and third 20 MiB freed at 11 and 11.5 ms, the
 *                   100 MiB retry served at 12 ms: fragmentation, 1 flush,
 *                   40 MiB released of 82 MiB (at most 42 MiB allocated),
 *                   2 ms to the served retry.
 * frag_sizes.tslog  the same without the backend record (an older log): torch
 *                   recognized by its 2 and 20 MiB segments, fires the same.
 * frag_async.tslog  the same with torch on cudaMallocAsync (trainshim serves
 *                   every tensor): silent.
 * frag_plain.tslog  no backend record and 3 MB buffers (not torch's segment
 *                   sizes), the same failure, frees and retry: silent.
 * comm_serial.tslog 10 steps of 10 ms: a compute kernel 0-8 ms (stream 7),
 *                   an NCCL kernel 8-10 ms (stream 9), one all-reduce call
 *                   and three TF32 GEMMs per step: comm_overlap, 100% of
 *                   20 ms exposed, 20% of the 100 ms span, 1.0 per step.
 * comm_overlap.tslog the NCCL kernel at 5-9 ms: 1 of its 4 ms exposed (25%,
 *                   under 30%), silent.
 * comm_otherdev.tslog comm_serial with another kernel at 8-10 ms on device
 *                   1: another GPU's work does not overlap device 0's
 *                   collectives, still 100% exposed.
 * recompute.tslog   10 steps of 10 ms, each F1 F2 F1 F2 D2 W2 D1 W1 (forward
 *                   (T,N) shapes, then their dgrad (N,N) and wgrad (N,T), all
 *                   permutations of 4096 x 8192 x 1024 TF32, so equal FLOPs),
 *                   a 4-byte pageable D2H copy ending each step (the step
 *                   time basis): mfu_hfu, 2 of 8 GEMMs, 25% of the FLOPs;
 *                   HFU 8 x 2 x 4096 x 8192 x 1024 / (494.7 TFLOPS x 10 ms).
 * norecompute.tslog the same without the second F1 F2: silent.
 * numa.tslog        GPU 0 on node 1 (CPU 1), the process allowed CPUs 0-1,
 *                   default memory policy: numa, 1 CPU off the node.
 * numa_match.tslog  the process allowed CPU 1 only: silent. */
static void torch_backend(uint32_t backend_case)
{
    struct ts_rec_torch_backend *r = rec(TS_REC_TORCH_BACKEND, sizeof *r, 2);
    r->backend_case = backend_case;
}

static void failed_alloc(uint64_t ns, uint64_t size)
{
    struct ts_rec_alloc *r = rec(TS_REC_ALLOC, sizeof *r, ns);
    r->api = API_MALLOC, r->size = size, r->result = 2; /* cudaErrorMemoryAllocation */
}

static int frag(const char *dir, const char *name, uint32_t backend_case, uint64_t segment)
{
    begin();
    if (backend_case)
        torch_backend(backend_case);
    for (uint64_t i = 0; i < 4; i++)
        alloc((1 + i) * MS, 0x7f0000000000ull + i * (64ull << 20), segment);
    alloc(5 * MS, 0x7f0010000000ull, segment == 20ull << 20 ? 2ull << 20 : segment);
    failed_alloc(10 * MS, 100ull << 20);
    dfree(11 * MS, 0x7f0000000000ull);
    dfree(11 * MS + MS / 2, 0x7f0000000000ull + 2 * (64ull << 20));
    alloc(12 * MS, 0x7f0020000000ull, 100ull << 20);
    return save(dir, name);
}

static uint32_t kernel_names(void)
{
    static const char *const names[] = { "sm90_xmma_gemm_f32f32_tf32", "ncclDevKernel_AllReduce_Sum_f32_RING_LL" };
    for (uint32_t i = 0; i < 2; i++) {
        uint32_t len = (uint32_t)strlen(names[i]);
        struct ts_rec_gpu_name *r = rec(TS_REC_GPU_NAME, ts_rec_align((uint32_t)sizeof *r + len), 2);
        r->name_id = i + 1, r->len = len;
        memcpy(r + 1, names[i], len);
    }
    return 2;
}

static void named_kernel(uint64_t s, uint64_t e, uint32_t stream, uint32_t name)
{
    struct ts_rec_gpu_kernel *k = rec(TS_REC_GPU_KERNEL, sizeof *k, e);
    k->start_ns = START_NS + s, k->end_ns = START_NS + e, k->stream_id = stream, k->name_id = name;
}

static void allreduce(uint64_t ns)
{
    struct ts_rec_nccl *r = rec(TS_REC_NCCL, sizeof *r, ns);
    r->api = API_COPY, r->op = 0, r->count = 1 << 20, r->bytes = 4 << 20, r->comm_size = 2, r->rank = 0;
    r->peer = -1, r->stream = 0x9000;
}

static int comm(const char *dir, const char *name, uint64_t nccl_from, uint64_t nccl_to, int other_device)
{
    begin();
    uint32_t nccl = kernel_names();
    for (int s = 0; s < 10; s++) {
        uint64_t t = 10 * MS + (uint64_t)s * 10 * MS;
        gemm(t + 1, 1024, 1024, 1024, 77);
        gemm(t + 2, 1024, 4096, 1024, 77);
        gemm(t + 3, 4096, 1024, 1024, 77);
        allreduce(t + 4);
        named_kernel(t, t + 8 * MS, 7, 1);
        named_kernel(t + nccl_from, t + nccl_to, 9, nccl);
        if (other_device) {
            named_kernel(t + 8 * MS, t + 10 * MS, 11, 1);
            ((struct ts_rec_gpu_kernel *)(gen_buf + gen_used - sizeof(struct ts_rec_gpu_kernel)))->device = 1;
        }
    }
    return save(dir, name);
}

static void lin(uint64_t ns, int64_t m, int64_t n, int64_t k, int ta, int tb)
{
    gemm(ns, m, n, k, 77);
    struct ts_rec_gemm *g = (struct ts_rec_gemm *)(gen_buf + gen_used - sizeof *g);
    g->transa = (uint8_t)ta, g->transb = (uint8_t)tb;
}

static int recompute(const char *dir, const char *name, int again)
{
    begin();
    for (int s = 0; s < 10; s++) {
        uint64_t t = 10 * MS + (uint64_t)s * 10 * MS, u = t;
        for (int f = 0; f <= again; f++) {
            lin(u += US, 4096, 8192, 1024, 1, 0); /* F1 */
            lin(u += US, 1024, 8192, 4096, 1, 0); /* F2 */
        }
        lin(u += US, 4096, 8192, 1024, 0, 0); /* D2 */
        lin(u += US, 4096, 1024, 8192, 0, 1); /* W2 */
        lin(u += US, 1024, 8192, 4096, 0, 0); /* D1 */
        lin(u += US, 1024, 4096, 8192, 0, 1); /* W1 */
        loss_copy(t + 9 * MS, 1);
    }
    return save(dir, name);
}

static int numa(const char *dir, const char *name, const char *allowed)
{
    begin();
    struct ts_rec_numa *r = rec(TS_REC_NUMA, sizeof *r, 2);
    r->device = 0, r->node = 1, r->mode = 1, r->mem_mode = 0, r->place_node = -1, r->slots = 1;
    snprintf(r->pci_bus_id, sizeof r->pci_bus_id, "00000000:18:00.0");
    snprintf(r->node_cpus, sizeof r->node_cpus, "1");
    snprintf(r->allowed_cpus, sizeof r->allowed_cpus, "%s", allowed);
    return save(dir, name);
}

static int overlap_logs(const char *dir)
{
    int bad = numa(dir, "numa.tslog", "0-1") | numa(dir, "numa_match.tslog", "1");
    bad |= frag(dir, "frag.tslog", TS_TORCH_BACKEND_OFF, 20ull << 20);
    bad |= frag(dir, "frag_sizes.tslog", 0, 20ull << 20);
    bad |= frag(dir, "frag_async.tslog", TS_TORCH_BACKEND_ADDED, 20ull << 20);
    bad |= frag(dir, "frag_plain.tslog", 0, 3000000);
    bad |= comm(dir, "comm_serial.tslog", 8 * MS, 10 * MS, 0);
    bad |= comm(dir, "comm_overlap.tslog", 5 * MS, 9 * MS, 0);
    bad |= comm(dir, "comm_otherdev.tslog", 8 * MS, 10 * MS, 1);
    bad |= recompute(dir, "recompute.tslog", 1);
    bad |= recompute(dir, "norecompute.tslog", 0);
    return bad;
}
