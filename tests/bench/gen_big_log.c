/* gen_big_log: writes one large, deterministic trainshim log for the HTML
 * report's benchmark (tests/bench/bench_report_html.sh):
 *     gen_big_log FILE EVENTS
 * A training-like run: long-lived weights, then steps that allocate and free
 * activations, copy a pageable batch in (converted by the pinned copy
 * engine) and a loss out, run 12 GEMMs (one shape misaligned) with their
 * CUPTI kernels, until EVENTS alloc/free/copy/GEMM/kernel records exist. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "../golden/gen_log.h"
#include "log/logfmt.h"

#define START_NS GEN_START_NS
#define STEP_NS 2000000ull /* 2 ms per step */

static FILE *out;
static uint64_t nrec, now_ns;
static unsigned char buf[4096];

static void *rec(uint16_t type, uint32_t size)
{
    struct ts_rec_hdr *h = (struct ts_rec_hdr *)buf;
    memset(buf, 0, size);
    h->len = size;
    h->type = type;
    h->tid = 7001;
    h->time_ns = now_ns;
    return h;
}

static void put(void)
{
    struct ts_rec_hdr *h = (struct ts_rec_hdr *)buf;
    h->check = 0;
    h->check = ts_rec_check(h, h->len);
    fwrite(buf, 1, h->len, out);
    nrec++;
}

/* The log's opening records, built by gen_log.h at the run's start. */
static void header(void)
{
    static const char *const apis[] = { "cudaMalloc", "cudaFree", "cudaMemcpy", "cublasSgemm_v2" };
    static const char cmd[] = "python\0train.py";
    gen_begin(&(struct gen_log_run){
        .tid = 7001, .pid = 3000, .rank = -1, .local_rank = -1, .world_size = -1, .host = "benchhost",
        .cmdline = cmd, .cmdline_len = sizeof cmd - 1,
        .config = "TRAINSHIM_CUPTI=1\nTRAINSHIM_PINNED_COPY=1\nTRAINSHIM_PINNED_COPY_MIN=262144\n",
        .apis = apis, .n_apis = 4 });
    gen_device(7001, now_ns - START_NS, &(struct gen_log_device){ .name = "NVIDIA H100 80GB HBM3",
                                                                   .total_mem = 80ull << 30, .cc_major = 9,
                                                                   .sm_count = 132, .pci_bus_id = "0000:18:00.0" });
    gen_seal();
    fwrite(gen_buf, 1, gen_used, out);
    nrec += 3;
    struct ts_rec_gpu_clock *c = rec(TS_REC_GPU_CLOCK, sizeof *c);
    c->mono_ns = c->cupti_ns = now_ns;
    put();
    struct ts_rec_gpu_name *n = rec(TS_REC_GPU_NAME, ts_rec_align(sizeof *n + 24));
    n->name_id = 1, n->len = 24;
    memcpy(n + 1, "sm90_xmma_gemm_f32f32_tn", 24);
    put();
}

static void alloc(uint64_t ptr, uint64_t size)
{
    struct ts_rec_alloc *r = rec(TS_REC_ALLOC, sizeof *r);
    r->ptr = ptr, r->size = size;
    put();
}

static void dfree(uint64_t ptr)
{
    struct ts_rec_free *r = rec(TS_REC_FREE, sizeof *r);
    r->api = 1, r->ptr = ptr;
    put();
}

static void copy(int dir, uint64_t bytes, int kind)
{
    struct ts_rec_copy *r = rec(TS_REC_COPY, sizeof *r);
    r->api = 2, r->dir = (uint8_t)dir, r->bytes = bytes, r->host_kind = (uint8_t)kind, r->duration_ns = 40000;
    put();
    if (kind == TS_HOST_PAGEABLE && bytes >= 262144) {
        struct ts_rec_copy_convert *v = rec(TS_REC_COPY_CONVERT, sizeof *v);
        v->api = 2, v->dir = (uint8_t)dir, v->sync = 1, v->bytes = bytes, v->host_blocked_ns = 30000, v->chunks = 1;
        put();
    }
}

static void gemm(int64_t m, int64_t n, int64_t k, uint64_t gpu_ns)
{
    struct ts_rec_gemm *g = rec(TS_REC_GEMM, sizeof *g);
    g->api = 3, g->m = m, g->n = n, g->k = k, g->batch = 1, g->flops = 2ull * (uint64_t)(m * n * k);
    g->stream = 0xa000, g->compute_type = 68;
    put();
    struct ts_rec_gpu_kernel *r = rec(TS_REC_GPU_KERNEL, sizeof *r);
    r->start_ns = now_ns + 1000, r->end_ns = now_ns + 1000 + gpu_ns;
    r->stream_id = 7, r->name_id = 1, r->correlation_id = (uint32_t)nrec;
    put();
}

static void step(uint64_t s)
{
    static const int64_t shapes[4][3] = { { 1024, 1024, 512 }, { 1024, 512, 1024 }, { 1000, 1024, 512 },
                                          { 512, 512, 512 } };
    copy(TS_H2D, 4ull << 20, TS_HOST_PAGEABLE);
    for (int l = 0; l < 40; l++) { /* activations: freed in reverse at the step's end */
        now_ns += 10000;
        alloc(0x7f0000000000ull + ((s % 2) << 32) + ((uint64_t)l << 24), (1ull << 20) << (l % 6));
    }
    static const int order[12] = { 0, 1, 2, 3, 3, 2, 1, 0, 0, 2, 1, 3 }; /* forward, backward, update */
    for (int g = 0; g < 12; g++) {
        const int64_t *d = shapes[order[g]];
        now_ns += 60000;
        gemm(d[0], d[1], d[2], 40000 + (s % 7) * 1000);
    }
    for (int l = 39; l >= 0; l--) {
        now_ns += 5000;
        dfree(0x7f0000000000ull + ((s % 2) << 32) + ((uint64_t)l << 24));
    }
    copy(TS_D2H, 4096, TS_HOST_PAGEABLE);
    copy(TS_D2D, 1ull << 20, TS_HOST_NONE);
}

int main(int argc, char **argv)
{
    if (argc != 3 || !(out = fopen(argv[1], "wb"))) {
        fprintf(stderr, "usage: gen_big_log FILE EVENTS\n");
        return 2;
    }
    uint64_t want = strtoull(argv[2], NULL, 10);
    now_ns = START_NS;
    header();
    for (int w = 0; w < 200; w++) /* weights */
        alloc(0x600000000000ull + ((uint64_t)w << 26), 48ull << 20);
    for (uint64_t s = 0; nrec < want; s++) {
        now_ns = START_NS + 50000000ull + s * STEP_NS;
        step(s);
    }
    now_ns += STEP_NS;
    struct ts_rec_end *e = rec(TS_REC_END, sizeof *e);
    e->records_written = nrec;
    put();
    if (fclose(out) != 0) {
        perror(argv[1]);
        return 1;
    }
    printf("%llu\n", (unsigned long long)nrec);
    return 0;
}
