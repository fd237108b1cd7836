/* report_advice.c: advice rules measured from one log (report_advice.h).
 * Each row of the table names its rule, the threshold that makes it fire
 * and the function that measures it; the README's advice table lists the
 * same rows.
 *
 * precision_fp32   GEMM FLOPs in fp32 without TF32 math (the cuBLAS compute
 *                  type, or the handle's math mode for cublas<t>gemm) >= 10%
 *                  of all GEMM FLOPs, and the peaks project a GEMM speed-up
 *                  of at least 1.1x as TF32 or bf16 (or no peak is known).
 * memory_headroom  training steps detected (the GEMM shape sequence repeats)
 *                  and peak reserved device memory < 50% of the device's:
 *                  the micro-batch that would fit in 90% of it.
 * host_sync        (report_advice_sync.c) steps detected and at least one
 *                  host synchronization per step.
 * input_stall      (report_advice_sync.c, CUPTI) GPU idle >= 1 ms at half
 *                  the step starts or more, >= 10% of the steps' time.
 * launch_bound     (CUPTI) GPU idle in gaps under 50 us >= 10% of the span of
 *                  its work, over at least 200 kernels averaging under 50 us. */
#include "report/report_advice.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "report/report_acct.h"
#include "report/report_gpu.h"

#define PRECISION_MIN_SHARE 0.10
#define PRECISION_MIN_GAIN 1.10 /* projected GEMM speed-up, TF32 or bf16 */
#define HEADROOM_MAX_USED 0.50
#define HEADROOM_TARGET 0.90 /* the share of device memory a larger batch may plan for */
#define HEADROOM_FACTOR_SHOWN 16.0
#define LAUNCH_GAP_NS 50000ull
#define LAUNCH_MIN_IDLE_SHARE 0.10
#define LAUNCH_MIN_KERNELS 200
#define LAUNCH_MAX_MEAN_NS 50000.0
#define GiB (1024.0 * 1024.0 * 1024.0)

static struct advice_line *add_line(struct advice_set *out, const char *rule)
{
    if (out->n >= ADVICE_MAX_RULES)
        return NULL;
    struct advice_line *l = &out->line[out->n++];
    memset(l, 0, sizeof *l);
    l->rule = rule;
    return l;
}

static void figure(struct advice_line *l, const char *name, double v)
{
    if (l->n_figures < ADVICE_MAX_FIGURES)
        l->fig[l->n_figures++] = (struct advice_figure){ name, v };
}

/* ---- precision_fp32 ------------------------------------------------------- */
/* GEMM time at the peaks, with the fp32 FLOPs moved to precision to. */
static double gemm_ideal_ns(const struct acct_compute *c, int to)
{
    double ns = 0;
    for (int p = 0; p < TS_PREC_COUNT; p++) {
        uint64_t fl = c->prec_flops[p];
        int at = p == TS_PREC_FP32 ? to : p;
        if (!fl)
            continue;
        if (c->peak_tflops[at] <= 0)
            return NAN;
        ns += (double)fl / (c->peak_tflops[at] * 1e3);
    }
    return ns;
}

static void rule_precision(const struct acct_compute *c, struct advice_set *out)
{
    if (!c || !c->gemm_flops)
        return;
    double share = (double)c->prec_flops[TS_PREC_FP32] / (double)c->gemm_flops;
    double now = gemm_ideal_ns(c, TS_PREC_FP32);
    double tf32 = now / gemm_ideal_ns(c, TS_PREC_TF32), bf16 = now / gemm_ideal_ns(c, TS_PREC_BF16);
    /* peaks known, and neither TF32 nor bf16 faster (V100, or a flat
     * TRAINSHIM_PEAK_TFLOPS): nothing to gain by the peaks the report uses */
    bool gain = tf32 >= PRECISION_MIN_GAIN || bf16 >= PRECISION_MIN_GAIN; /* NaN: unknown */
    if (share < PRECISION_MIN_SHARE || (c->peak_source[0] && !gain))
        return;
    struct advice_line *l = add_line(out, "precision_fp32");
    if (!l)
        return;
    figure(l, "fp32_flop_share", share);
    figure(l, "fp32_flops", (double)c->prec_flops[TS_PREC_FP32]);
    figure(l, "gemm_flops", (double)c->gemm_flops);
    figure(l, "speedup_tf32", tf32);
    figure(l, "speedup_bf16", bf16);
    char proj[128] = "no peak table entry for this device to project a speed-up";
    const char *src = strncmp(c->peak_source, "table: ", 7) ? c->peak_source : c->peak_source + 7;
    if (!isnan(tf32) || !isnan(bf16))
        snprintf(proj, sizeof proj, "at the %.60s peaks GEMM time would be %.1fx shorter as %s", src,
                 isnan(tf32) ? bf16 : tf32, isnan(tf32) ? "bf16" : "TF32");
    if (!isnan(tf32) && !isnan(bf16))
        snprintf(proj, sizeof proj,
                 "at the %.60s peaks GEMM time would be %.1fx shorter as TF32, %.1fx as bf16", src, tf32,
                 bf16);
    snprintf(
        l->text, sizeof l->text,
        "%.1f%% of GEMM FLOPs ran in fp32 without TF32; %s: torch.backends.cuda.matmul.allow_tf32 = True "
        "(or torch.set_float32_matmul_precision('high')), or bf16 autocast; cuBLAS directly: "
        "cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH)",
        100.0 * share, proj);
}

/* ---- memory_headroom ---------------------------------------------------------- */
struct live_map {
    uint64_t *ptr, *bytes;
    size_t mask;
};

static uint64_t *live_slot(struct live_map *m, uint64_t ptr)
{
    size_t i = (size_t)((ptr >> 8) * 0x9e3779b97f4a7c15ull) & m->mask;
    while (m->ptr[i] && m->ptr[i] != ptr)
        i = (i + 1) & m->mask;
    m->ptr[i] = ptr;
    return &m->bytes[i];
}

static int by_time(const void *a, const void *b)
{
    const struct tslog_event *x = *(const struct tslog_event *const *)a,
                             *y = *(const struct tslog_event *const *)b;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Peak live device bytes on device dev from the alloc/free records in time
 * order, and the least held from the first step's start to the last one's
 * (*base: the memory that stays across steps, such as weights and optimizer
 * state; the teardown after the loop does not count).  -1 when out of
 * memory. */
static int live_peak(const struct tslog *log, int dev, uint64_t mark, uint64_t last, uint64_t *peak,
                     uint64_t *base)
{
    size_t n = 0, cap = 16;
    const struct tslog_event **ev = malloc(log->n_events * sizeof *ev + 1);
    for (size_t i = 0; ev && i < log->n_events; i++)
        if (log->events[i].device == dev && !log->events[i].result
            && (log->events[i].type == TS_REC_ALLOC || log->events[i].type == TS_REC_FREE))
            ev[n++] = &log->events[i];
    while (cap < 2 * n)
        cap *= 2;
    struct live_map m = { calloc(cap, sizeof *m.ptr), calloc(cap, sizeof *m.bytes), cap - 1 };
    int rc = ev && m.ptr && m.bytes ? 0 : -1;
    uint64_t live = 0;
    bool marked = false;
    *peak = *base = 0;
    if (!rc)
        qsort(ev, n, sizeof *ev, by_time);
    for (size_t i = 0; !rc && i < n; i++) {
        if (ev[i]->time_ns >= mark && !marked)
            marked = true, *base = live;
        if (!ev[i]->ptr)
            continue;
        uint64_t *b = live_slot(&m, ev[i]->ptr);
        live -= *b;
        *b = ev[i]->type == TS_REC_ALLOC ? ev[i]->bytes : 0;
        live += *b;
        *peak = live > *peak ? live : *peak;
        if (marked && ev[i]->time_ns <= last && live < *base)
            *base = live;
    }
    if (!marked)
        *base = live;
    free(ev);
    free(m.ptr);
    free(m.bytes);
    return rc;
}

/* The step memory is the peak allocated beyond what stays across the steps;
 * assuming it scales with the micro-batch, the factor that fills
 * HEADROOM_TARGET of the device. */
static void headroom_text(struct advice_line *l, double used, uint64_t reserved, uint64_t peak,
                          uint64_t total, uint64_t base)
{
    char p[32], t[32], s[32], b[32];
    double factor = (HEADROOM_TARGET * (double)total - (double)base) / (double)(peak - base);
    figure(l, "batch_factor", factor);
    char fx[48]; /* past a few doublings the linear estimate says little more */
    if (factor > HEADROOM_FACTOR_SHOWN)
        snprintf(fx, sizeof fx, "more than %.0fx", HEADROOM_FACTOR_SHOWN);
    else
        snprintf(fx, sizeof fx, "about %.1fx", factor);
    snprintf(l->text, sizeof l->text,
             "peak reserved device memory is %s of %s (%.1f%%); the steps add %s over the %s held across "
             "them: a micro-batch %s larger would fit in %.0f%% of the device (raise it before adding "
             "gradient accumulation)",
             tslog_human_bytes(reserved, p, sizeof p), tslog_human_bytes(total, t, sizeof t), 100.0 * used,
             tslog_human_bytes(peak - base, s, sizeof s), tslog_human_bytes(base, b, sizeof b), fx,
             100.0 * HEADROOM_TARGET);
}

static void rule_headroom(const struct tslog *log, const struct acct_compute *c, struct advice_set *out)
{
    if (!c || c->n_steps < 2) /* not a training loop: no batch to grow */
        return;
    uint64_t mark = c->steps[0].start_ns, last = c->steps[c->n_steps - 1].start_ns;
    for (size_t d = 0; d < log->n_devices; d++) {
        const struct tslog_device *dv = &log->devices[d];
        uint64_t peak, base, reserved;
        if (!dv->total_mem || live_peak(log, dv->ordinal, mark, last, &peak, &base))
            continue;
        reserved = peak; /* trainshim's pool reserves more than it hands out */
        if (dv->ordinal >= 0 && dv->ordinal < TSLOG_POOL_DEVS && log->pool_dev[dv->ordinal].seen
            && log->pool_dev[dv->ordinal].peak_reserved > reserved)
            reserved = log->pool_dev[dv->ordinal].peak_reserved;
        double used = (double)reserved / (double)dv->total_mem;
        if (!peak || base >= peak || used >= HEADROOM_MAX_USED)
            continue;
        struct advice_line *l = add_line(out, "memory_headroom");
        if (!l)
            return;
        figure(l, "device", dv->ordinal);
        figure(l, "peak_reserved_bytes", (double)reserved);
        figure(l, "peak_allocated_bytes", (double)peak);
        figure(l, "device_memory_bytes", (double)dv->total_mem);
        figure(l, "used_share", used);
        figure(l, "held_across_steps_bytes", (double)base);
        headroom_text(l, used, reserved, peak, dv->total_mem, base);
        return; /* one line: the first device with room */
    }
}

/* ---- launch_bound -------------------------------------------------------------- */
static void rule_launch(const struct tslog *log, const struct acct_compute *c, struct advice_set *out)
{
    struct gpu_data d;
    if (gpu_load(log, &d))
        return;
    uint64_t first = 0, end = 0, short_idle = 0, short_gaps = 0, kernel_ns = 0;
    for (size_t i = 0; i < d.n_acts; i++) {
        const struct gpu_activity *a = &d.acts[i];
        if (!a->is_copy)
            kernel_ns += a->end_ns - a->start_ns;
        if (i == 0)
            first = a->start_ns, end = a->end_ns;
        else if (a->start_ns > end && a->start_ns - end < LAUNCH_GAP_NS)
            short_idle += a->start_ns - end, short_gaps++;
        end = a->end_ns > end ? a->end_ns : end;
    }
    size_t kernels = d.n_kernels;
    gpu_free(&d);
    double span = (double)(end - first), mean = kernels ? (double)kernel_ns / (double)kernels : 0;
    if (kernels < LAUNCH_MIN_KERNELS || span <= 0 || mean >= LAUNCH_MAX_MEAN_NS
        || (double)short_idle < LAUNCH_MIN_IDLE_SHARE * span)
        return;
    struct advice_line *l = add_line(out, "launch_bound");
    if (!l)
        return;
    double per_step = c && c->n_steps ? (double)kernels / (double)c->n_steps : NAN;
    figure(l, "short_gap_idle_share", (double)short_idle / span);
    figure(l, "short_gaps", (double)short_gaps);
    figure(l, "kernels", (double)kernels);
    figure(l, "mean_kernel_ns", mean);
    figure(l, "kernels_per_step", per_step);
    char steps[48] = "";
    if (!isnan(per_step))
        snprintf(steps, sizeof steps, ", %.0f per step", per_step);
    snprintf(l->text, sizeof l->text,
             "the GPU sat idle %.1f%% of its working span in %llu gaps under %llu us between %zu kernels "
             "(mean %.1f us%s): launch-bound; capture the step with CUDA graphs or "
             "torch.compile(mode=\"reduce-overhead\")",
             100.0 * (double)short_idle / span, (unsigned long long)short_gaps,
             (unsigned long long)(LAUNCH_GAP_NS / 1000), kernels, mean / 1e3, steps);
}

void advice_evaluate(const struct tslog *log, const struct acct_compute *c, struct advice_set *out)
{
    memset(out, 0, sizeof *out);
    rule_precision(c, out);
    rule_headroom(log, c, out);
    advice_host_sync(log, c, out);
    advice_input_stall(log, c, out);
    rule_launch(log, c, out);
    advice_fragmentation(log, out);
    advice_comm_overlap(log, c, out);
    advice_mfu_hfu(log, c, out);
    advice_numa(log, out);
}

struct advice_line *advice_add(struct advice_set *out, const char *rule) { return add_line(out, rule); }

void advice_figure(struct advice_line *l, const char *name, double v) { figure(l, name, v); }
