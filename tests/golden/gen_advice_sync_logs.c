/* gen_advice_sync_logs: writes synthetic logs for the host_sync and
 * input_stall advice rules (tools/report/report_advice_sync.c), with figures
 * worked out by hand (tests/integration/test_report_advice_sync.sh checks
 * them):
 *     gen_advice_sync_logs OUTDIR
 *
 * Every log: 10 steps of 10 ms, each of three TF32 GEMMs (no precision
 * advice) and their CUPTI kernels, on an H100.
 *
 * syncs.tslog    step t: GEMM calls at t+0.1/0.2/0.3 ms, kernels
 *                [t+0.2, t+3.2) [t+3.2, t+6.2) [t+6.2, t+9.6); a
 *                cudaStreamSynchronize that found work pending returns at
 *                t+9.7 after 9.3 ms (stack 1: three frames), then one that
 *                found the stream done (does not count).  Full steps 9:
 *                host_sync 1.0 per step, 9.3 ms of host time, GPU idle from
 *                t+9.7 to the next kernel at t+10.2: 0.5 ms per step.  The
 *                kernel-free stretch at each step start [t-0.4, t+0.2) is
 *                0.6 ms of 10 (6%): input_stall silent.
 * idle.tslog     the same with every synchronize finding its stream done:
 *                host_sync silent.
 * stall.tslog    step t: the host loads data until t+5, copies the batch
 *                (cudaMemcpyAsync from pageable memory, call [t+5, t+6),
 *                GPU copy [t+5.5, t+5.9)), calls the GEMMs at t+6.1/6.2/6.3,
 *                kernels [t+6.2, t+7.2) [t+7.2, t+8.2) [t+8.2, t+9.2).  At
 *                each of the 9 later step starts the GPU ran no kernel from
 *                t-0.8 to t+6.2: 7 ms of 10 (70%), host in copies 1 ms of
 *                it (1/7), waiting 0, elsewhere 6/7: input_stall.
 * fed.tslog      the batch ready (pinned copy call [t, t+0.1)), GEMMs at
 *                t+0.2/0.3/0.4, kernels back to back [t+0.3, t+3.5)
 *                [t+3.5, t+6.7) [t+6.7, t+10.35): busy at every step start,
 *                input_stall silent. */
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

static void *rec(uint16_t type, uint32_t size, uint64_t ns) { return gen_rec(type, size, 7, ns); }

static const char *const apis[] = { "cublasSgemm_v2", "cudaMemcpyAsync", "cudaStreamSynchronize" };
enum { API_GEMM, API_COPY, API_SYNC, N_APIS };

static void begin(void)
{
    gen_begin_h100_run(7, "TRAINSHIM_CUPTI=1\n", apis, N_APIS);
    struct ts_rec_gpu_status *s = rec(TS_REC_GPU_STATUS, sizeof *s, 1);
    s->state = TS_GPU_STATUS_STARTED;
    /* a stack of three frames for the synchronize site */
    struct ts_rec_stack *st = rec(TS_REC_STACK, sizeof *st + 3 * 8, 2);
    st->stack_id = 1, st->n_frames = 3;
    uint64_t frames[3] = { 0x401234, 0x402345, 0x403456 };
    memcpy(st + 1, frames, sizeof frames);
}

/* The i-th GEMM call of a step at ns: three shapes (a step is where their
 * sequence repeats), CUBLAS_COMPUTE_32F_FAST_TF32. */
static void gemm(uint64_t ns, int i)
{
    struct ts_rec_gemm *g = rec(TS_REC_GEMM, sizeof *g, ns);
    g->api = API_GEMM;
    g->m = 1024 << i, g->n = g->k = 1024, g->batch = 1;
    g->flops = 2ull * (uint64_t)(g->m * g->n * g->k);
    g->compute_type = 77;
}

static void kernel(uint64_t s, uint64_t e)
{
    struct ts_rec_gpu_kernel *k = rec(TS_REC_GPU_KERNEL, sizeof *k, e);
    k->start_ns = START_NS + s, k->end_ns = START_NS + e, k->stream_id = 7;
}

static void gpu_copy(uint64_t s, uint64_t e)
{
    struct ts_rec_gpu_memcpy m = { 0 }, *r = rec(TS_REC_GPU_MEMCPY, sizeof m, e);
    r->start_ns = START_NS + s, r->end_ns = START_NS + e, r->bytes = 1 << 20, r->copy_kind = 1;
    r->src_kind = 1, r->dst_kind = 3, r->stream_id = 7;
}

/* A copy call returning at ns after dur, H2D from pageable or pinned memory. */
static void copy_call(uint64_t ns, uint64_t dur, int host_kind)
{
    struct ts_rec_copy *r = rec(TS_REC_COPY, sizeof *r, ns);
    r->api = API_COPY, r->dir = TS_H2D, r->host_kind = (uint8_t)host_kind, r->async = 1;
    r->bytes = 1 << 20, r->stream = 0x5000, r->duration_ns = dur;
}

static void sync_call(uint64_t ns, uint64_t blocked, unsigned pending)
{
    struct ts_rec_host_sync *r = rec(TS_REC_HOST_SYNC, sizeof *r, ns);
    r->api = API_SYNC, r->kind = TS_SYNC_STREAM, r->pending = (uint8_t)pending;
    r->handle = 0x5000, r->blocked_ns = blocked, r->stack_id = 1;
}

static void sync_steps(unsigned pending)
{
    for (uint64_t s = 0; s < 10; s++) {
        uint64_t t = 10 * MS + s * 10 * MS;
        gemm(t + 100 * US, 0), gemm(t + 200 * US, 1), gemm(t + 300 * US, 2);
        kernel(t + 200 * US, t + 3200 * US), kernel(t + 3200 * US, t + 6200 * US);
        kernel(t + 6200 * US, t + 9600 * US);
        sync_call(t + 9700 * US, 9300 * US, pending);
        sync_call(t + 9750 * US, 10 * US, TS_SYNC_IDLE);
    }
}

static void stall_steps(void)
{
    for (uint64_t s = 0; s < 10; s++) {
        uint64_t t = 10 * MS + s * 10 * MS;
        copy_call(t + 6 * MS, 1 * MS, TS_HOST_PAGEABLE);
        gpu_copy(t + 5500 * US, t + 5900 * US);
        gemm(t + 6100 * US, 0), gemm(t + 6200 * US, 1), gemm(t + 6300 * US, 2);
        kernel(t + 6200 * US, t + 7200 * US), kernel(t + 7200 * US, t + 8200 * US);
        kernel(t + 8200 * US, t + 9200 * US);
    }
}

static void fed_steps(void)
{
    for (uint64_t s = 0; s < 10; s++) {
        uint64_t t = 10 * MS + s * 10 * MS;
        copy_call(t + 100 * US, 100 * US, TS_HOST_PINNED);
        gemm(t + 200 * US, 0), gemm(t + 300 * US, 1), gemm(t + 400 * US, 2);
        kernel(t + 300 * US, t + 3500 * US), kernel(t + 3500 * US, t + 6700 * US);
        kernel(t + 6700 * US, t + 10350 * US);
    }
}

static int save(const char *dir, const char *name) { return gen_finish(7, gen_last_ns() + MS, dir, name); }

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_advice_sync_logs OUTDIR\n");
        return 2;
    }
    int bad = 0;
    begin();
    sync_steps(TS_SYNC_PENDING);
    bad |= save(argv[1], "syncs.tslog");
    begin();
    sync_steps(TS_SYNC_IDLE);
    bad |= save(argv[1], "idle.tslog");
    begin();
    stall_steps();
    bad |= save(argv[1], "stall.tslog");
    begin();
    fed_steps();
    bad |= save(argv[1], "fed.tslog");
    return bad;
}
