/* report_compute.c: the COMPUTE section of `trainshim report` and its JSON
 * ("compute"): GEMM calls and FLOPs (exact: every outermost cuBLAS/cuBLASLt
 * GEMM is logged), achieved TFLOP/s and MFU from the sampled GPU times against
 * the device's peak for each precision (GPU times from the log's CUPTI kernel
 * records when it has GEMM kernels, tools/report/report_gemm_gpu.c, else from the
 * sampled events), the most expensive shapes, shapes
 * that miss the tensor-core alignment, and training steps detected from the
 * repeating sequence of GEMM shapes.  Only GEMMs through cuBLAS are counted;
 * the report says so wherever it prints a FLOP figure. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/core.h"
#include "report/report_acct.h"
#include "report/report_gpu.h"
#include "report/report_spans.h"

#define COUNTED_NOTE                                                                                         \
    "GEMMs through cuBLAS/cuBLASLt only; kernels outside cuBLAS (attention, elementwise, custom) are not "   \
    "counted"
#define PERIOD_SCAN_MAX 65536u /* GEMMs searched for the period */
#define PERIOD_MAX 4096u       /* GEMMs per step, at most */
#define TOP_SHAPES 10
#define JSON_SHAPES 20
#define JSON_STEPS 1000

/* ---- device peaks (dense, TFLOP/s) ------------------------------------------ */
struct peak_row {
    const char *match1, *match2; /* both must occur in the name (match2 may be NULL) */
    const char *label;
    double tflops[TS_PREC_COUNT]; /* fp64 fp32 tf32 fp16 bf16 fp8 int8 */
};

/* NVIDIA datasheets, dense (no sparsity).  FP64 is the tensor-core rate
 * (DGEMM uses it); FP32 the non-tensor rate. */
static const struct peak_row peak_table[] = {
    { "H100", "PCIE", "H100 PCIe", { 51.2, 51.2, 378.0, 756.0, 756.0, 1513.0, 1513.0 } },
    { "H100", NULL, "H100 SXM", { 67.0, 67.0, 494.7, 989.4, 989.4, 1978.9, 1978.9 } },
    { "H200", NULL, "H200", { 67.0, 67.0, 494.7, 989.4, 989.4, 1978.9, 1978.9 } },
    { "A100", NULL, "A100", { 19.5, 19.5, 156.0, 312.0, 312.0, 0, 624.0 } },
    { "V100", NULL, "V100", { 7.8, 15.7, 0, 125.0, 0, 0, 0 } },
};

static bool contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && toupper((unsigned char)hay[i]) == toupper((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return false;
}

/* "989.4" (every precision) or "fp16=989.4,fp32=67" (core/config.h's
 * parser, the one the shim checks the option with).  false if malformed. */
static bool parse_peak(const char *s, double out[TS_PREC_COUNT])
{
    _Static_assert(TS_PREC_COUNT == TS_PEAK_PRECISION_COUNT, "TS_PEAK_PRECISIONS follows enum ts_prec");
    return ts_parse_rates(s, TS_PEAK_PRECISIONS, out, TS_PREC_COUNT) == NULL;
}

static void choose_peaks(const struct tslog *log, int device, const char *override, struct acct_compute *c)
{
    const char *name = "";
    for (size_t i = 0; i < log->n_devices; i++)
        if (log->devices[i].ordinal == device || !*name)
            name = log->devices[i].name;
    snprintf(c->device_name, sizeof c->device_name, "%.*s", (int)sizeof c->device_name - 1, name);
    char conf[128];
    if (override && *override) {
        if (parse_peak(override, c->peak_tflops)) {
            snprintf(c->peak_source, sizeof c->peak_source, "TRAINSHIM_PEAK_TFLOPS=%.100s (report)",
                     override);
            return;
        }
        fprintf(stderr,
                "trainshim: warning: TRAINSHIM_PEAK_TFLOPS=%s is not a number or type=number list; ignored\n",
                override);
    }
    if (tslog_config_value(log, "TRAINSHIM_PEAK_TFLOPS", conf, sizeof conf) && conf[0]
        && parse_peak(conf, c->peak_tflops)) {
        snprintf(c->peak_source, sizeof c->peak_source, "TRAINSHIM_PEAK_TFLOPS=%.100s (run)", conf);
        return;
    }
    for (size_t i = 0; i < sizeof peak_table / sizeof peak_table[0]; i++) {
        const struct peak_row *r = &peak_table[i];
        if (contains_ci(name, r->match1) && (!r->match2 || contains_ci(name, r->match2))) {
            memcpy(c->peak_tflops, r->tflops, sizeof c->peak_tflops);
            snprintf(c->peak_source, sizeof c->peak_source, "table: %s", r->label);
            return;
        }
    }
    c->peak_source[0] = 0;
}

/* ---- shapes ----------------------------------------------------------------- */
static uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static uint64_t shape_key(const struct tslog_gemm *g)
{
    uint64_t h = mix64((uint64_t)g->m) ^ mix64((uint64_t)g->n * 3 + 1) ^ mix64((uint64_t)g->k * 5 + 2);
    h ^= mix64((uint64_t)g->batch * 7 + 3)
         ^ mix64(((uint64_t)(uint32_t)g->data_type << 32) ^ ((uint64_t)g->transa << 8) ^ g->transb
                 ^ ((uint64_t)(uint32_t)g->compute_type << 16));
    return h ? h : 1;
}

static bool same_shape(const struct acct_shape *s, const struct tslog_gemm *g, int prec)
{
    return s->m == g->m && s->n == g->n && s->k == g->k && s->batch == g->batch && s->dtype == g->data_type
           && s->prec == prec && s->transa == g->transa && s->transb == g->transb;
}

static int by_flops_desc(const void *a, const void *b)
{
    const struct acct_shape *x = a, *y = b;
    if (x->flops != y->flops)
        return x->flops > y->flops ? -1 : 1;
    return x->calls > y->calls ? -1 : x->calls < y->calls;
}

struct gemm_ref {
    uint64_t time_ns;
    size_t idx;
};

static int gemm_by_time(const void *a, const void *b)
{
    const struct gemm_ref *x = a, *y = b;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* ---- steps -------------------------------------------------------------------- */
size_t acct_find_period(const uint64_t *seq, size_t n, size_t *start, size_t *end)
{
    size_t scan = n < PERIOD_SCAN_MAX ? n : PERIOD_SCAN_MAX;
    size_t need = (scan + 1) / 2;
    for (size_t p = 1; p <= PERIOD_MAX && 2 * p <= scan; p++) {
        /* longest run of i with seq[i] == seq[i+p]: the stretch [a, b+p) repeats with period p */
        size_t best_a = 0, best_len = 0, run_a = 0, run = 0;
        for (size_t i = 0; i + p < scan; i++) {
            if (seq[i] == seq[i + p]) {
                if (!run)
                    run_a = i;
                run++;
                if (run > best_len)
                    best_len = run, best_a = run_a;
            } else {
                run = 0;
            }
            /* no stretch left long enough: next p */
            if (best_len + p < need && run + (scan - p - i - 1) + p < need)
                break;
        }
        size_t len = best_len + p;
        if (best_len && len >= 2 * p && len >= need) {
            size_t a = best_a, e = best_a + len;
            /* beyond the scanned prefix, the stretch goes on while it repeats */
            if (e == scan)
                while (e < n && seq[e] == seq[e - p])
                    e++;
            *start = a;
            *end = e;
            return p;
        }
    }
    return 0;
}

static double ideal_ns_of(const struct acct_compute *c, uint64_t flops, int prec)
{
    double pk = prec >= 0 && prec < TS_PREC_COUNT ? c->peak_tflops[prec] : 0;
    return pk > 0 ? (double)flops / (pk * 1e3) : NAN;
}

bool acct_copy_waits(const struct tslog_event *e)
{
    return e->type == TS_REC_COPY && !e->result
           && (!e->async || (e->dir == TS_D2H && e->host_kind == TS_HOST_PAGEABLE));
}

static void fill_step(struct acct_compute *c, const struct tslog *log, const struct gemm_ref *order,
                      struct acct_step *st, const uint64_t *cupti_ns)
{
    st->start_ns = order[st->first_gemm].time_ns;
    for (size_t i = st->first_gemm; i < st->first_gemm + st->gemms; i++) {
        const struct tslog_gemm *g = &log->gemms[order[i].idx];
        uint64_t t = cupti_ns ? cupti_ns[order[i].idx] : g->gpu_ns;
        st->flops += g->flops;
        st->ideal_ns += ideal_ns_of(c, g->flops, ts_gemm_prec(g->data_type, g->compute_type));
        st->gpu_ns += t ? (double)t : NAN;
    }
}

/* Whether other work (collectives, copies, allocations) happened between
 * the GEMMs from..to, at least once per step on average: what makes one
 * GEMM per iteration a training step rather than a GEMM loop. */
static bool work_between(const struct tslog *log, uint64_t from, uint64_t to, size_t nsteps)
{
    size_t n = 0;
    for (size_t i = 0; i < log->n_nccls; i++)
        n += log->nccls[i].time_ns > from && log->nccls[i].time_ns < to;
    for (size_t i = 0; i < log->n_events; i++)
        n += log->events[i].type != TS_REC_ERROR && log->events[i].time_ns > from
             && log->events[i].time_ns < to;
    return n + 1 >= nsteps;
}

/* Steps: the repeating sequence of GEMM shapes.  One GEMM shape repeated
 * with nothing else between is a GEMM loop (a benchmark), not a training
 * step. */
static void find_steps(struct acct_compute *c, const struct tslog *log, const struct gemm_ref *order,
                       size_t n, const uint64_t *cupti_ns)
{
    uint64_t *seq = malloc((n ? n : 1) * sizeof *seq);
    if (!seq)
        return;
    for (size_t i = 0; i < n; i++)
        seq[i] = shape_key(&log->gemms[order[i].idx]);
    size_t a = 0, e = 0, p = acct_find_period(seq, n, &a, &e);
    free(seq);
    size_t nsteps = p ? (e - a) / p : 0;
    if (nsteps < 2)
        return;
    if (p == 1 && !work_between(log, order[e - nsteps].time_ns, order[e - 1].time_ns, nsteps)) {
        c->single_gemm_loop = true;
        return;
    }
    c->steps = calloc(nsteps, sizeof *c->steps);
    if (!c->steps)
        return;
    c->period = p;
    c->n_steps = nsteps;
    /* steps end where the repetition ends: the run stops after a whole step */
    size_t first = e - nsteps * p;
    c->prefix_gemms = first;
    for (size_t s = 0; s < nsteps; s++) {
        c->steps[s].first_gemm = first + s * p;
        c->steps[s].gemms = p;
        fill_step(c, log, order, &c->steps[s], cupti_ns);
    }
    /* whether a copy that waited for the GPU ended in the step */
    struct span_set waits;
    bool have_waits = span_set_copies(&waits, log, acct_copy_waits) == 0;
    for (size_t s = 0; s + 1 < nsteps; s++) {
        struct acct_step *st = &c->steps[s];
        st->time_ns = c->steps[s + 1].start_ns - st->start_ns;
        st->waits = have_waits && span_set_ends_in(&waits, st->start_ns, c->steps[s + 1].start_ns);
    }
    span_set_free(&waits);
}

/* ---- analysis ----------------------------------------------------------------- */
/* GPU time per GEMM call from the log's CUPTI kernels, or NULL: no CUPTI
 * records, none matched (then the sampled events stay the source), or the log
 * cannot be read again (standard input). */
static uint64_t *cupti_gemm_times(const struct tslog *log, struct acct_compute *c)
{
    struct gpu_data d;
    if (gpu_load(log, &d) != 0)
        return NULL;
    c->has_cupti = d.n_acts || d.status;
    uint64_t *ns = d.n_kernels && log->n_gemms ? malloc(log->n_gemms * sizeof *ns) : NULL;
    long matched = ns ? gpu_match_gemms(log, &d, ns) : -1;
    gpu_free(&d);
    if (matched <= 0) {
        free(ns);
        return NULL;
    }
    c->gpu_source = ACCT_GPU_CUPTI;
    c->cupti_matched = (uint64_t)matched;
    return ns;
}

/* The shape row of g, a new one when there is room; NULL past ACCT_MAX_SHAPES
 * (*oom set when a new row could not be made). */
static struct acct_shape *shape_of(struct acct_compute *c, size_t *cap, const struct tslog_gemm *g, int prec,
                                   bool *oom)
{
    /* a linear probe over the few distinct shapes of a model is cheap next
     * to reading the log; capped so no input makes it quadratic */
    for (size_t k = 0; k < c->n_shapes; k++)
        if (same_shape(&c->shapes[k], g, prec))
            return &c->shapes[k];
    if (c->n_shapes >= ACCT_MAX_SHAPES)
        return NULL;
    if (c->n_shapes == *cap) {
        struct acct_shape *ns = realloc(c->shapes, *cap * 2 * sizeof *ns);
        if (!ns) {
            *oom = true;
            return NULL;
        }
        c->shapes = ns;
        *cap *= 2;
    }
    struct acct_shape *s = &c->shapes[c->n_shapes++];
    memset(s, 0, sizeof *s);
    s->m = g->m, s->n = g->n, s->k = g->k, s->batch = g->batch;
    s->dtype = g->data_type, s->prec = prec, s->transa = g->transa, s->transb = g->transb;
    s->align = ts_gemm_align_rule(g->data_type);
    s->misaligned = s->align && (g->m % s->align || g->n % s->align || g->k % s->align);
    return s;
}

/* Counts one successful GEMM call (gpu_ns: its GPU time, 0 if untimed); -1 when out of memory. */
static int count_gemm(struct acct_compute *c, size_t *cap, const struct tslog_gemm *g, uint64_t gpu_ns)
{
    int prec = ts_gemm_prec(g->data_type, g->compute_type);
    c->gemm_calls++;
    c->gemm_flops += g->flops;
    c->prec_calls[prec]++;
    c->prec_flops[prec] += g->flops;
    double ideal = ideal_ns_of(c, g->flops, prec);
    if (isnan(ideal))
        c->ideal_known = false;
    else
        c->ideal_ns += ideal;
    if (gpu_ns) {
        c->timed_calls++;
        c->timed_flops += g->flops;
        c->timed_ns += gpu_ns;
        c->timed_ideal_ns += ideal;
    }
    bool oom = false;
    struct acct_shape *s = shape_of(c, cap, g, prec, &oom);
    if (!s) {
        c->other_shape_calls++;
        c->other_shape_flops += g->flops;
        return oom ? -1 : 0;
    }
    s->calls++;
    s->flops += g->flops;
    if (gpu_ns) {
        s->timed_calls++;
        s->timed_flops += g->flops;
        s->timed_ns += gpu_ns;
    }
    if (s->misaligned) {
        c->mis_calls++;
        c->mis_flops += g->flops;
        c->mis_timed_ns += gpu_ns;
    }
    return 0;
}

/* The end of the whole run's basis: the first copy after the last GEMM that
 * waited for the GPU (0: none did). */
static uint64_t first_wait_after(const struct tslog *log, uint64_t t)
{
    uint64_t end = 0;
    for (size_t i = 0; i < log->n_events; i++) {
        const struct tslog_event *e = &log->events[i];
        if (acct_copy_waits(e) && e->time_ns >= t && (!end || e->time_ns < end))
            end = e->time_ns;
    }
    return end;
}

int acct_compute_analyze(const struct tslog *log, const char *peak_override, struct acct_compute *c)
{
    memset(c, 0, sizeof *c);
    int device = -1;
    for (size_t i = 0; i < log->n_gemms && device < 0; i++)
        device = log->gemms[i].device;
    choose_peaks(log, device, peak_override, c);
    struct gemm_ref *order = malloc((log->n_gemms ? log->n_gemms : 1) * sizeof *order);
    size_t cap = 64, n_ok = 0;
    c->shapes = malloc(cap * sizeof *c->shapes);
    if (!order || !c->shapes) {
        free(order);
        return -1;
    }
    c->ideal_known = true;
    char conf[32];
    c->flop_sample = tslog_config_value(log, "TRAINSHIM_FLOP_SAMPLE", conf, sizeof conf) ? atoi(conf) : -1;
    uint64_t *cupti_ns = cupti_gemm_times(log, c);
    int rc = 0;
    for (size_t i = 0; i < log->n_gemms && !rc; i++) {
        const struct tslog_gemm *g = &log->gemms[i];
        if (g->result != 0) {
            c->gemm_failed++;
            continue;
        }
        order[n_ok++] = (struct gemm_ref){ g->time_ns, i };
        rc = count_gemm(c, &cap, g, cupti_ns ? cupti_ns[i] : g->gpu_ns);
    }
    if (!c->ideal_known || !c->gemm_calls)
        c->ideal_ns = NAN;
    if (c->timed_calls && isnan(c->timed_ideal_ns))
        c->timed_ideal_ns = NAN;
    qsort(c->shapes, c->n_shapes, sizeof *c->shapes, by_flops_desc);
    qsort(order, n_ok, sizeof *order, gemm_by_time);
    if (n_ok) {
        c->first_gemm_ns = order[0].time_ns;
        c->last_gemm_ns = order[n_ok - 1].time_ns;
    }
    c->wait_after_ns = n_ok ? first_wait_after(log, c->last_gemm_ns) : 0;
    if (!rc)
        find_steps(c, log, order, n_ok, cupti_ns);
    free(order);
    free(cupti_ns);
    return rc ? -1 : 0;
}

void acct_compute_free(struct acct_compute *c)
{
    free(c->shapes);
    free(c->steps);
    memset(c, 0, sizeof *c);
}

/* A step's time on a basis that covers the GPU's work: the wall time from
 * its first GEMM to the next step's when the host waited for the GPU in
 * between (a synchronous copy); else, when all its GEMMs were timed, that
 * wall time or their GPU time if longer (the host ran ahead of a queue);
 * else NaN. */
double acct_step_time_ns(const struct acct_step *st)
{
    if (!st->time_ns)
        return NAN;
    if (st->waits)
        return (double)st->time_ns;
    if (isnan(st->gpu_ns))
        return NAN;
    return (double)st->time_ns > st->gpu_ns ? (double)st->time_ns : st->gpu_ns;
}

/* An MFU figure, or NaN when above 100% (no honest basis makes it so: the
 * peak or the time is wrong). */
static double bounded(double mfu) { return mfu > 1.0 ? NAN : mfu; }

/* GEMM FLOPs at peak over the steady steps' time; NaN without a basis. */
static double steady_ratio(const struct acct_compute *c)
{
    double ideal = 0, wall = 0;
    for (size_t s = 1; s < c->n_steps; s++) {
        if (!c->steps[s].time_ns)
            continue;
        double t = acct_step_time_ns(&c->steps[s]);
        if (isnan(t))
            return NAN; /* a step without a basis: the sum would not cover the GPU's work */
        ideal += c->steps[s].ideal_ns;
        wall += t;
    }
    return wall > 0 && !isnan(ideal) ? ideal / wall : NAN;
}

double acct_steady_mfu(const struct acct_compute *c) { return bounded(steady_ratio(c)); }

/* The whole run's basis: from the first GEMM to the first copy after the last
 * one that waited for the GPU, or, when every GEMM was timed, at least their
 * GPU time; NaN when neither is known. */
static double run_time_ns(const struct acct_compute *c)
{
    double wall = c->wait_after_ns ? (double)(c->wait_after_ns - c->first_gemm_ns) : NAN;
    double gpu = c->timed_calls == c->gemm_calls ? (double)c->timed_ns : NAN;
    if (isnan(wall))
        return gpu > (double)(c->last_gemm_ns - c->first_gemm_ns) ? gpu : NAN;
    return !isnan(gpu) && gpu > wall ? gpu : wall;
}

double acct_mfu(const struct acct_compute *c)
{
    if (c->n_steps)
        return acct_steady_mfu(c);
    double t = run_time_ns(c);
    return t > 0 && !isnan(c->ideal_ns) ? bounded(c->ideal_ns / t) : NAN;
}

const char *acct_mfu_basis(const struct acct_compute *c)
{
    bool known = !isnan(acct_mfu(c));
    if (known)
        return c->n_steps ? "steady-state steps" : "first GEMM to the copy that waited for the last";
    if (!c->gemm_calls)
        return "no GEMM";
    if (isnan(c->ideal_ns))
        return "no peak known for the device";
    bool steady_timed = false;
    for (size_t s = 1; s < c->n_steps; s++)
        steady_timed |= c->steps[s].time_ns != 0;
    if (c->n_steps && !steady_timed)
        return "no step after the warm-up has a known end";
    if (c->n_steps ? isnan(steady_ratio(c)) : isnan(run_time_ns(c)))
        return c->n_steps ? "steps neither wait for the GPU (no synchronous copy) nor have all GEMMs timed"
                          : "no copy after the last GEMM waited for the GPU, and not every GEMM was timed";
    return "above 100%: the peak or the time basis is wrong";
}

static double achieved_tflops(const struct acct_compute *c)
{
    return c->timed_ns ? (double)c->timed_flops / (double)c->timed_ns / 1e3 : NAN;
}

static double gemm_efficiency(const struct acct_compute *c)
{
    return c->timed_ns && !isnan(c->timed_ideal_ns) ? c->timed_ideal_ns / (double)c->timed_ns : NAN;
}

/* ---- text -------------------------------------------------------------------- */
static const char *flop_str(double f, char *b, size_t n)
{
    static const char *const unit[] = { "", "K", "M", "G", "T", "P", "E" };
    int u = 0;
    while (f >= 1000 && u < 6)
        f /= 1000, u++;
    snprintf(b, n, u ? "%.3f %sFLOP" : "%.0f %sFLOP", f, unit[u]);
    return b;
}

static void pct(FILE *f, double v)
{
    if (isnan(v))
        fputs("n/a", f);
    else
        fprintf(f, "%.2f%%", 100 * v);
}

static void pad_hint(const struct acct_shape *s, char *b, size_t n)
{
    size_t o = 0;
    b[0] = 0;
    const int64_t dims[3] = { s->m, s->n, s->k };
    const char names[3] = { 'm', 'n', 'k' };
    for (int d = 0; d < 3 && s->align; d++)
        if (dims[d] % s->align) {
            int64_t to = dims[d] > 0 && dims[d] < (INT64_MAX >> 1)
                             ? (dims[d] + s->align - 1) / s->align * s->align
                             : dims[d];
            o += (size_t)snprintf(b + o, o < n ? n - o : 0, "%s%c %lld->%lld", o ? ", " : "", names[d],
                                  (long long)dims[d], (long long)to);
            if (o >= n)
                break;
        }
}

static void gpu_source_text(FILE *f, const struct acct_compute *c)
{
    if (c->gpu_source == ACCT_GPU_CUPTI)
        fprintf(f, "CUPTI kernels (%llu of %llu GEMMs matched)", (unsigned long long)c->cupti_matched,
                (unsigned long long)c->gemm_calls);
    else if (c->flop_sample > 0)
        fprintf(f, "sampled events (1 in %d)", c->flop_sample);
    else
        fprintf(f, "sampled events (TRAINSHIM_FLOP_SAMPLE=%d: none)", c->flop_sample);
}

/* "512x64x512 NT x8": the dimensions, cuBLAS's operations on A and B, the batch. */
static const char *shape_text(const struct acct_shape *s, char *b, size_t n)
{
    static const char ops[] = "NTCH";
    int len = snprintf(b, n, "%lldx%lldx%lld %c%c", (long long)s->m, (long long)s->n, (long long)s->k,
                       s->transa < 4 ? ops[s->transa] : '?', s->transb < 4 ? ops[s->transb] : '?');
    if (s->batch > 1 && len > 0 && (size_t)len < n)
        snprintf(b + len, n - (size_t)len, " x%lld", (long long)s->batch);
    return b;
}

static void text_totals(FILE *f, const struct acct_compute *c)
{
    char b1[48];
    fprintf(f, "\n== COMPUTE ==\n");
    fprintf(f, "counted             %s\n", COUNTED_NOTE);
    fprintf(f, "GEMM calls          %llu (%llu failed)\n", (unsigned long long)c->gemm_calls,
            (unsigned long long)c->gemm_failed);
    fprintf(f, "GEMM FLOPs          %s (%llu)\n", flop_str((double)c->gemm_flops, b1, sizeof b1),
            (unsigned long long)c->gemm_flops);
    fprintf(f, "timed GEMMs         %llu (%s, %.3f ms GPU)\n", (unsigned long long)c->timed_calls,
            flop_str((double)c->timed_flops, b1, sizeof b1), (double)c->timed_ns / 1e6);
    if (c->has_cupti) { /* only then: logs without CUPTI report exactly as before */
        fprintf(f, "GPU time source     ");
        gpu_source_text(f, c);
        fputc('\n', f);
    }
    double a = achieved_tflops(c);
    if (isnan(a))
        fprintf(f, "achieved            n/a (no GEMM was timed; TRAINSHIM_FLOP_SAMPLE)\n");
    else
        fprintf(f, "achieved            %.3f TFLOP/s while timed GEMMs ran\n", a);
    fprintf(f, "device              %s\n", c->device_name[0] ? c->device_name : "unknown");
    fprintf(f, "peak                %s",
            c->peak_source[0] ? c->peak_source : "unknown (set TRAINSHIM_PEAK_TFLOPS)");
    for (int p = 0; p < TS_PREC_COUNT; p++)
        if (c->prec_calls[p])
            fprintf(f, "; %s %.1f TFLOP/s", ts_prec_name(p), c->peak_tflops[p]);
    fputc('\n', f);
    fprintf(f, "GEMM efficiency     ");
    pct(f, gemm_efficiency(c));
    fprintf(f, " of peak while timed GEMMs ran\n");
    double mfu = acct_mfu(c);
    fprintf(f, "MFU                 ");
    pct(f, mfu);
    fprintf(f, isnan(mfu) ? " (%s)\n" : " (GEMM FLOPs at peak over wall time, %s)\n", acct_mfu_basis(c));
    fprintf(f, "by precision       ");
    for (int p = 0; p < TS_PREC_COUNT; p++)
        if (c->prec_calls[p])
            fprintf(f, " %s: %llu calls, %s;", ts_prec_name(p), (unsigned long long)c->prec_calls[p],
                    flop_str((double)c->prec_flops[p], b1, sizeof b1));
    fputc('\n', f);
}

static void text_shapes(FILE *f, const struct acct_compute *c)
{
    char b1[48], dims[80];
    fprintf(f, "top shapes          %-28s %-5s %8s %16s %7s %12s\n", "m x n x k op (x batch)", "type",
            "calls", "FLOPs", "share", "GPU ms(timed)");
    for (size_t i = 0; i < c->n_shapes && i < TOP_SHAPES; i++) {
        const struct acct_shape *s = &c->shapes[i];
        fprintf(f, "  %-36s %-5s %8llu %16s %6.2f%% ", shape_text(s, dims, sizeof dims),
                ts_prec_name(s->prec), (unsigned long long)s->calls,
                flop_str((double)s->flops, b1, sizeof b1),
                c->gemm_flops ? 100.0 * (double)s->flops / (double)c->gemm_flops : 0.0);
        if (s->timed_calls)
            fprintf(f, "%12.3f", (double)s->timed_ns / 1e6);
        else
            fprintf(f, "%12s", "n/a");
        fprintf(f, "%s\n", s->misaligned ? "  misaligned" : "");
    }
}

static void text_steps(FILE *f, const struct acct_compute *c)
{
    char b1[48];
    fprintf(f, "steps               %zu (period %zu GEMMs, %llu GEMMs before the first)\n", c->n_steps,
            c->period, (unsigned long long)c->prefix_gemms);
    fprintf(f, "  %-6s %-8s %12s %18s %8s\n", "step", "", "time ms", "FLOPs", "MFU");
    for (size_t s = 0; s < c->n_steps; s++) {
        const struct acct_step *st = &c->steps[s];
        if (s >= 20 && s + 3 < c->n_steps) {
            if (s == 20)
                fprintf(f, "  ... (%zu more)\n", c->n_steps - 23);
            continue;
        }
        fprintf(f, "  %-6zu %-8s ", s + 1, s == 0 ? "warm-up" : "");
        if (st->time_ns)
            fprintf(f, "%12.3f", (double)st->time_ns / 1e6);
        else
            fprintf(f, "%12s", "n/a");
        fprintf(f, " %18s ", flop_str((double)st->flops, b1, sizeof b1));
        pct(f, bounded(st->ideal_ns / acct_step_time_ns(st)));
        fputc('\n', f);
    }
    double wall = 0;
    size_t k = 0;
    for (size_t s = 1; s < c->n_steps; s++)
        if (c->steps[s].time_ns)
            wall += (double)c->steps[s].time_ns, k++;
    if (k) {
        fprintf(f, "steady state        mean %.3f ms/step over %zu steps, MFU ", wall / (double)k / 1e6, k);
        pct(f, acct_steady_mfu(c));
        fputc('\n', f);
    }
}

void acct_compute_text(FILE *f, const struct acct_compute *c)
{
    text_totals(f, c);
    if (c->n_shapes)
        text_shapes(f, c);
    fprintf(f, "misaligned GEMMs    %llu calls, ", (unsigned long long)c->mis_calls);
    pct(f, c->gemm_flops ? (double)c->mis_flops / (double)c->gemm_flops : NAN);
    fprintf(f, " of FLOPs, ");
    pct(f, c->timed_ns ? (double)c->mis_timed_ns / (double)c->timed_ns : NAN);
    fprintf(f, " of timed GPU time\n");
    if (c->n_steps)
        text_steps(f, c);
    else if (c->single_gemm_loop)
        fprintf(f, "steps               none (one GEMM shape repeated with nothing between: a loop, not "
                   "training steps)\n");
    else
        fprintf(f, "steps               none detected (no repeating sequence of GEMM shapes)\n");
}

/* ---- JSON -------------------------------------------------------------------- */
static void json_shapes(const struct acct_json *j, const struct acct_compute *c)
{
    void *x = j->ctx;
    j->open(x, "shapes", '[');
    for (size_t i = 0; i < c->n_shapes && i < JSON_SHAPES; i++) {
        const struct acct_shape *s = &c->shapes[i];
        char pad[160];
        pad_hint(s, pad, sizeof pad);
        j->open(x, NULL, '{');
        j->i64(x, "m", s->m);
        j->i64(x, "n", s->n);
        j->i64(x, "k", s->k);
        j->i64(x, "batch", s->batch);
        j->i64(x, "data_type", s->dtype);
        j->str(x, "precision", ts_prec_name(s->prec));
        j->i64(x, "transa", s->transa);
        j->i64(x, "transb", s->transb);
        j->u64(x, "calls", s->calls);
        j->u64(x, "flops", s->flops);
        j->u64(x, "timed_calls", s->timed_calls);
        j->u64(x, "timed_gpu_ns", s->timed_ns);
        j->i64(x, "align", s->align);
        j->str(x, "pad", s->misaligned ? pad : NULL);
        j->close(x, '}');
    }
    j->close(x, ']');
}

static void json_steps(const struct acct_json *j, const struct acct_compute *c)
{
    void *x = j->ctx;
    j->u64(x, "steps", c->n_steps);
    j->open(x, "step_detail", '{');
    j->u64(x, "period_gemms", c->period);
    j->u64(x, "gemms_before_first_step", c->prefix_gemms);
    j->num(x, "steady_mfu", acct_steady_mfu(c));
    j->open(x, "list", '[');
    for (size_t s = 0; s < c->n_steps && s < JSON_STEPS; s++) {
        const struct acct_step *st = &c->steps[s];
        j->open(x, NULL, '{');
        j->u64(x, "index", s + 1);
        j->str(x, "phase", s == 0 ? "warmup" : "steady");
        j->u64(x, "gemms", st->gemms);
        j->u64(x, "flops", st->flops);
        j->num(x, "time_ns", st->time_ns ? (double)st->time_ns : NAN);
        j->num(x, "basis_time_ns", acct_step_time_ns(st));
        j->num(x, "mfu", bounded(st->ideal_ns / acct_step_time_ns(st)));
        j->close(x, '}');
    }
    j->close(x, ']');
    j->close(x, '}');
}

void acct_compute_json(const struct acct_json *j, const struct acct_compute *c)
{
    void *x = j->ctx;
    j->open(x, "compute", '{');
    j->str(x, "counted", COUNTED_NOTE);
    const struct {
        const char *key;
        uint64_t v;
    } totals[] = { { "gemm_calls", c->gemm_calls },   { "gemm_failed_calls", c->gemm_failed },
                   { "gemm_flops", c->gemm_flops },   { "timed_calls", c->timed_calls },
                   { "timed_flops", c->timed_flops }, { "timed_gpu_ns", c->timed_ns } };
    for (size_t i = 0; i < sizeof totals / sizeof totals[0]; i++)
        j->u64(x, totals[i].key, totals[i].v);
    if (c->has_cupti) { /* only then: logs without CUPTI report exactly as before */
        j->str(x, "gpu_time_source", c->gpu_source == ACCT_GPU_CUPTI ? "cupti" : "sampled_events");
        j->u64(x, "gpu_time_matched", c->cupti_matched);
        j->num(x, "flop_sample", c->flop_sample >= 0 ? c->flop_sample : NAN);
    }
    j->num(x, "achieved_tflops", achieved_tflops(c));
    j->num(x, "gemm_efficiency", gemm_efficiency(c));
    double mfu = acct_mfu(c);
    j->num(x, "mfu", mfu);
    j->str(x, "mfu_basis", isnan(mfu) ? "none" : c->n_steps ? "steady_steps" : "first_gemm_to_wait");
    j->str(x, "mfu_na_reason", isnan(mfu) ? acct_mfu_basis(c) : NULL);
    j->str(x, "device", c->device_name);
    j->str(x, "peak_source", c->peak_source[0] ? c->peak_source : NULL);
    j->open(x, "peak_tflops", '{');
    for (int p = 0; p < TS_PREC_COUNT; p++)
        j->num(x, ts_prec_name(p), c->peak_tflops[p] > 0 ? c->peak_tflops[p] : NAN);
    j->close(x, '}');
    j->open(x, "by_precision", '[');
    for (int p = 0; p < TS_PREC_COUNT; p++) {
        if (!c->prec_calls[p])
            continue;
        j->open(x, NULL, '{');
        j->str(x, "precision", ts_prec_name(p));
        j->u64(x, "calls", c->prec_calls[p]);
        j->u64(x, "flops", c->prec_flops[p]);
        j->close(x, '}');
    }
    j->close(x, ']');
    json_shapes(j, c);
    j->open(x, "misaligned", '{');
    j->u64(x, "calls", c->mis_calls);
    j->u64(x, "flops", c->mis_flops);
    j->num(x, "flop_share", c->gemm_flops ? (double)c->mis_flops / (double)c->gemm_flops : NAN);
    j->num(x, "gpu_time_share", c->timed_ns ? (double)c->mis_timed_ns / (double)c->timed_ns : NAN);
    j->close(x, '}');
    json_steps(j, c);
    j->close(x, '}');
}
