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
 * long.tslog        400 kernels of 1 ms with 10 us gaps: mean 1 ms, silent. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "log/logfmt.h"

#define START_NS 1000000000000ull
#define US 1000ull
#define MS 1000000ull
#define GiB (1ull << 30)

static unsigned char buf[1 << 20];
static size_t used;

static void *rec(uint16_t type, uint32_t size, uint64_t ns)
{
    struct ts_rec_hdr *h = (struct ts_rec_hdr *)(buf + used);
    memset(h, 0, size);
    h->len = size;
    h->type = type;
    h->tid = 7;
    h->time_ns = START_NS + ns;
    used += size;
    return h;
}

static const char *const apis[] = { "cudaMalloc", "cudaFree", "cublasSgemm_v2", "cudaMemcpyAsync" };
enum { API_MALLOC, API_FREE, API_GEMM, API_COPY, N_APIS };

static void begin(void)
{
    used = 0;
    struct ts_log_preamble *p = (struct ts_log_preamble *)buf;
    memset(p, 0, sizeof *p);
    memcpy(p->magic, TS_LOG_MAGIC, 8);
    p->version_major = TS_LOG_VERSION_MAJOR;
    p->version_minor = TS_LOG_VERSION_MINOR;
    p->byte_order = TS_LOG_BYTE_ORDER;
    used = sizeof *p;
    static const char host[] = "node-a", cmd[] = "python\0train.py", conf[] = "TRAINSHIM_LOG=x.log\n";
    size_t hl = sizeof host - 1, cl = sizeof cmd - 1, fl = sizeof conf - 1;
    struct ts_rec_header *h =
        rec(TS_REC_HEADER, ts_rec_align((uint32_t)(sizeof(struct ts_rec_header) + hl + cl + fl)), 0);
    h->pid = 4000, h->rank = -1, h->local_rank = -1, h->world_size = -1;
    h->start_realtime_ns = 1767225600ull * 1000000000ull;
    h->start_mono_ns = START_NS;
    h->host_len = (uint32_t)hl, h->cmdline_len = (uint32_t)cl, h->config_len = (uint32_t)fl;
    memcpy((char *)(h + 1), host, hl);
    memcpy((char *)(h + 1) + hl, cmd, cl);
    memcpy((char *)(h + 1) + hl + cl, conf, fl);
    size_t nl = 0;
    for (int i = 0; i < N_APIS; i++)
        nl += strlen(apis[i]) + 1;
    struct ts_rec_api_names *a = rec(TS_REC_API_NAMES, ts_rec_align((uint32_t)(sizeof *a + nl)), 0);
    a->count = N_APIS;
    char *n = (char *)(a + 1);
    for (int i = 0; i < N_APIS; i++)
        n = stpcpy(n, apis[i]) + 1;
    struct ts_rec_device *d = rec(TS_REC_DEVICE, sizeof *d, 1);
    d->ordinal = 0;
    snprintf(d->name, sizeof d->name, "NVIDIA H100 80GB HBM3");
    d->total_mem = 80 * GiB;
    d->cc_major = 9, d->sm_count = 132;
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

static int save(const char *dir, const char *name)
{
    uint64_t n = 0, last = 0;
    for (size_t off = sizeof(struct ts_log_preamble); off < used; n++) {
        const struct ts_rec_hdr *h = (const struct ts_rec_hdr *)(buf + off);
        last = h->time_ns > last ? h->time_ns : last;
        off += h->len;
    }
    struct ts_rec_end *e = rec(TS_REC_END, sizeof *e, last - START_NS + MS);
    e->records_written = n;
    for (size_t off = sizeof(struct ts_log_preamble); off < used;) { /* seal */
        struct ts_rec_hdr *h = (struct ts_rec_hdr *)(buf + off);
        h->check = 0;
        h->check = ts_rec_check(h, h->len);
        off += h->len;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, used, f) != used || fclose(f) != 0) {
        perror(path);
        return 1;
    }
    return 0;
}

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

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_advice_logs OUTDIR\n");
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
