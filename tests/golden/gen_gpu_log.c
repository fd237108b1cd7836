/* gen_gpu_log: writes OUTDIR/gpu.tslog, a small deterministic log with
 * CUPTI activity records (TS_REC_GPU_*), for the GPU TIMELINE golden test
 * (tests/integration/test_cupti_report.sh).  Times in run milliseconds;
 * GPU records carry CUPTI timestamps 5 s minus 1 ms ahead of the run's
 * clock (the first GPU_CLOCK record says so), so a report that ignored the
 * clock pairing would place everything 5 s off.
 *
 * Device 0: kernel A [10,20] stream 7 and kernel B [15,25] stream 8
 * (overlapping), HtoD pageable 1000 B [25,26]; kernel A [40,50]; an
 * unnamed kernel [41,42]; DtoH pinned 4096 B [51,52]; kernel C [52,60];
 * DtoD 2048 B [63,64].  Device 1: kernel B [30,35].  One kernel with its end
 * before its start (ignored).  Threshold TRAINSHIM_IDLE_GAP_US=2000 in the
 * run's configuration.  END at 100 ms.
 *   union of all: [10,26] [30,35] [40,50] [51,60] [63,64] = 41 ms busy;
 *   gaps >= 2 ms: 26-30, 35-40, 60-63 (3, 12 ms, longest 5 ms at 35 ms);
 *   device 0: 36 ms busy, gaps 26-40 and 60-63; device 1: 5 ms, none.
 *
 * OUTDIR/gpu_gemm.tslog: GEMM calls (TS_REC_GEMM, written when each call
 * returned) and their CUPTI kernels, for COMPUTE's GPU time from CUPTI
 * (tests/integration/test_cupti_gemm_golden.sh).  One thread; handle A is
 * CUPTI stream 7, handle B stream 8; S1 = FP16 256x128x64 TN, S2 = FP32
 * 64x64x64 NN.  Calls (record time) -> kernel [start, end] in ms:
 *   c1 10 A S1 -> [11,14] on 7        c2 11 B S2 -> [10,12] on 8 (starts
 *   c3 12 A S1 -> [14,18] on 7           before c2 returned, after c1 did)
 *   (_Z9layernormPfi [18,19] on 7: not a GEMM)
 *   c4 13 A S2 -> [19,20] on 7        c5 14 B S1 -> [20,25] on 8
 *   c6 15 A S2 failed (no kernel)     c7 30 A S1: its kernel was lost
 *   a GEMM kernel nobody called (a graph replay) [26,27] on 8.
 * c1 also has a sampled event time of 50 ms, which CUPTI overrides.
 * Handle A's first call: streams 7 and 8 would both give 3 of A's 4 calls a
 * kernel, and 8's next kernel starts first (10 ms), but only on 7 do the
 * kernels' names carry the calls' transposes: A is stream 7.
 *   matched 5 of 6 successful calls; S1: 4 calls, 3 timed, 3+4+5 = 12 ms;
 *   S2: 2 calls (+1 failed), 2 timed, 2+1 = 3 ms; timed 15 ms in all; CUPTI
 *   GEMM kernels: 6, 16 ms. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_log.h"
#include "log/logfmt.h"

#define START_NS GEN_START_NS
#define MS 1000000ull
#define GPU_AHEAD (5000000000ull - MS) /* CUPTI time - run time */

static uint64_t nrec; /* records so far, the HEADER included */

static void *rec(uint16_t type, uint32_t size, uint64_t at_ms)
{
    nrec++;
    return gen_rec(type, size, 4242, at_ms * MS);
}

static uint64_t gpu(uint64_t ms) { return START_NS + ms * MS + GPU_AHEAD; }

static void name(uint32_t id, const char *s)
{
    size_t n = strlen(s);
    struct ts_rec_gpu_name *r = rec(TS_REC_GPU_NAME, ts_rec_align((uint32_t)(sizeof *r + n)), 1);
    r->name_id = id;
    r->len = (uint32_t)n;
    memcpy(r + 1, s, n);
}

static void kernel(uint64_t s, uint64_t e, uint32_t stream, uint32_t dev, uint32_t id)
{
    struct ts_rec_gpu_kernel *k = rec(TS_REC_GPU_KERNEL, sizeof *k, 70);
    k->start_ns = gpu(s);
    k->end_ns = gpu(e);
    k->stream_id = stream;
    k->device = dev;
    k->name_id = id;
    k->correlation_id = (uint32_t)nrec;
}

static void memcpy_rec(uint64_t s, uint64_t e, uint64_t bytes, int kind, int src, int dst)
{
    struct ts_rec_gpu_memcpy *m = rec(TS_REC_GPU_MEMCPY, sizeof *m, 70);
    m->start_ns = gpu(s);
    m->end_ns = gpu(e);
    m->bytes = bytes;
    m->stream_id = 7;
    m->copy_kind = (uint8_t)kind;
    m->src_kind = (uint8_t)src;
    m->dst_kind = (uint8_t)dst;
    m->correlation_id = (uint32_t)nrec;
}

static void status(uint32_t state, const char *detail, uint64_t dropped, uint64_t at_ms)
{
    size_t n = strlen(detail);
    struct ts_rec_gpu_status *s = rec(TS_REC_GPU_STATUS, ts_rec_align((uint32_t)(sizeof *s + n)), at_ms);
    s->state = state;
    s->detail_len = (uint32_t)n;
    s->dropped = dropped;
    memcpy(s + 1, detail, n);
}

static void clock_pair(uint64_t at_ms, uint64_t drift_ns)
{
    struct ts_rec_gpu_clock *c = rec(TS_REC_GPU_CLOCK, sizeof *c, at_ms);
    c->mono_ns = START_NS + at_ms * MS;
    c->cupti_ns = c->mono_ns + GPU_AHEAD + drift_ns;
}

/* A log with no API_NAMES record (no call here has its name looked up). */
static void begin(const char *conf)
{
    static const char cmd[] = "python\0train.py";
    gen_begin(&(struct gen_log_run){ .tid = 4242, .pid = 2000, .rank = -1, .local_rank = -1, .world_size = -1,
                                     .host = "gpuhost", .cmdline = cmd, .cmdline_len = sizeof cmd - 1,
                                     .config = conf });
    nrec = 1;
}

static int finish(const char *dir, const char *file, uint64_t end_ms) { return gen_finish(4242, end_ms * MS, dir, file); }

static void gemm(uint64_t at_ms, uint64_t handle, int64_t m, int64_t n, int64_t k, int dtype, int ta, int tb,
                 int result, uint64_t sample_id)
{
    struct ts_rec_gemm *g = rec(TS_REC_GEMM, sizeof *g, at_ms);
    g->api = 1;
    g->device = 0;
    g->m = m, g->n = n, g->k = k, g->batch = 1;
    g->flops = 2ull * (uint64_t)(m * n * k);
    g->stream = handle;
    g->sample_id = sample_id;
    g->data_type = g->out_type = dtype;
    g->compute_type = 68; /* CUBLAS_COMPUTE_32F */
    g->transa = (uint8_t)ta;
    g->transb = (uint8_t)tb;
    g->result = result;
}

/* OUTDIR/gpu_gemm.tslog (see the top of the file). */
static int gemm_log(const char *dir)
{
    enum { A = 0xa000, B = 0xb000, F16 = 2 /* CUDA_R_16F */, F32 = 0 /* CUDA_R_32F */ };
    begin("TRAINSHIM_CUPTI=1\nTRAINSHIM_FLOP_SAMPLE=16\n");
    clock_pair(1, 0);
    status(TS_GPU_STATUS_STARTED, "libcupti.so.13", 0, 1);
    name(1, "sm80_xmma_hgemm_128x128x32_stage3_warpsize2x2x1_tn");
    name(2, "ampere_sgemm_128x64_nn");
    name(3, "_Z9layernormPfi");
    gemm(10, A, 256, 128, 64, F16, 1, 0, 0, 1);
    struct ts_rec_gpu_time *t = rec(TS_REC_GPU_TIME, sizeof *t, 10);
    t->sample_id = 1;
    t->gpu_ns = 50 * MS;
    t->kind = TS_REC_GEMM;
    gemm(11, B, 64, 64, 64, F32, 0, 0, 0, 0);
    gemm(12, A, 256, 128, 64, F16, 1, 0, 0, 0);
    gemm(13, A, 64, 64, 64, F32, 0, 0, 0, 0);
    gemm(14, B, 256, 128, 64, F16, 1, 0, 0, 0);
    gemm(15, A, 64, 64, 64, F32, 0, 0, 13, 0);
    gemm(30, A, 256, 128, 64, F16, 1, 0, 0, 0);
    kernel(11, 14, 7, 0, 1);
    kernel(10, 12, 8, 0, 2);
    kernel(14, 18, 7, 0, 1);
    kernel(18, 19, 7, 0, 3);
    kernel(19, 20, 7, 0, 2);
    kernel(20, 25, 8, 0, 1);
    kernel(26, 27, 8, 0, 2);
    status(TS_GPU_STATUS_FINAL, "", 0, 39);
    return finish(dir, "gpu_gemm.tslog", 40);

}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_gpu_log OUTDIR\n");
        return 2;
    }
    begin("TRAINSHIM_CUPTI=1\nTRAINSHIM_IDLE_GAP_US=2000\nTRAINSHIM_FLOP_SAMPLE=16\n");
    clock_pair(1, 0);
    status(TS_GPU_STATUS_STARTED, "libcupti.so.13", 0, 1);
    name(1, "ampere_sgemm_128x64_nn");
    name(2, "_Z9layernormPfi");
    name(3, "_Z7softmaxPf");
    kernel(10, 20, 7, 0, 1);
    kernel(15, 25, 8, 0, 2);
    memcpy_rec(25, 26, 1000, 1, 1, 3);   /* HtoD from pageable */
    kernel(30, 35, 9, 1, 2);
    kernel(40, 50, 7, 0, 1);
    kernel(41, 42, 8, 0, 0);             /* name unknown */
    memcpy_rec(51, 52, 4096, 2, 3, 2);   /* DtoH to pinned */
    kernel(52, 60, 7, 0, 3);
    memcpy_rec(63, 64, 2048, 8, 3, 3);   /* DtoD */
    kernel(70, 69, 7, 0, 3);             /* end before start: ignored */
    clock_pair(99, 12345);               /* drifted: the reader keeps the first pair */
    status(TS_GPU_STATUS_FINAL, "", 7, 99);
    if (finish(argv[1], "gpu.tslog", 100))
        return 1;
    return gemm_log(argv[1]);
}
