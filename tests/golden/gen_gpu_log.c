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
 *   device 0: 36 ms busy, gaps 26-40 and 60-63; device 1: 5 ms, none. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logfmt.h"

#define START_NS 1000000000000ull
#define MS 1000000ull
#define GPU_AHEAD (5000000000ull - MS) /* CUPTI time - run time */

static unsigned char buf[1 << 16];
static size_t used;
static uint64_t nrec;

static void *rec(uint16_t type, uint32_t size, uint64_t at_ms)
{
    struct ts_rec_hdr *h = (struct ts_rec_hdr *)(buf + used);
    memset(h, 0, size);
    h->len = size;
    h->type = type;
    h->tid = 4242;
    h->time_ns = START_NS + at_ms * MS;
    used += size;
    nrec++;
    return h;
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

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_gpu_log OUTDIR\n");
        return 2;
    }
    struct ts_log_preamble *p = (struct ts_log_preamble *)buf;
    memcpy(p->magic, TS_LOG_MAGIC, 8);
    p->version_major = TS_LOG_VERSION_MAJOR;
    p->version_minor = TS_LOG_VERSION_MINOR;
    p->byte_order = TS_LOG_BYTE_ORDER;
    used = sizeof *p;

    const char *host = "gpuhost", cmd[] = "python\0train.py", *conf =
        "TRAINSHIM_CUPTI=1\nTRAINSHIM_IDLE_GAP_US=2000\nTRAINSHIM_FLOP_SAMPLE=16\n";
    size_t hl = strlen(host), cl = sizeof cmd - 1, fl = strlen(conf);
    struct ts_rec_header *h = rec(TS_REC_HEADER, ts_rec_align((uint32_t)(sizeof *h + hl + cl + fl)), 0);
    h->pid = 2000;
    h->rank = h->local_rank = h->world_size = -1;
    h->start_realtime_ns = 1767225600ull * 1000000000ull;
    h->start_mono_ns = START_NS;
    h->host_len = (uint32_t)hl;
    h->cmdline_len = (uint32_t)cl;
    h->config_len = (uint32_t)fl;
    memcpy((char *)(h + 1), host, hl);
    memcpy((char *)(h + 1) + hl, cmd, cl);
    memcpy((char *)(h + 1) + hl + cl, conf, fl);

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
    struct ts_rec_end *e = rec(TS_REC_END, sizeof *e, 100);
    e->records_written = nrec - 1;
    for (size_t off = sizeof *p; off < used;) {
        struct ts_rec_hdr *r = (struct ts_rec_hdr *)(buf + off);
        r->check = 0;
        r->check = ts_rec_check(r, r->len);
        off += r->len;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/gpu.tslog", argv[1]);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, used, f) != used || fclose(f) != 0) {
        perror(path);
        return 1;
    }
    return 0;
}
