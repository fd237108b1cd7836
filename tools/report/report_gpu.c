/* report_gpu.c: GPU TIMELINE (report_gpu.h) from the CUPTI activity records
 * of a log: how long the GPU was busy (the union of its kernel and copy
 * intervals), where it sat idle (gaps longer than TRAINSHIM_IDLE_GAP_US
 * between two pieces of GPU work: input-pipeline or host-side stalls),
 * which kernels took the time, and the copies by kind with the host memory
 * as the driver saw it (pageable or pinned).
 *
 * Idle gaps are counted between the first and the last GPU activity only:
 * the time before the first kernel (start-up) and after the last one is
 * idle too, and is in the busy share, but is not a stall of the training
 * loop. */
#include "report/report_gpu.h"

#include <stdlib.h>
#include <string.h>

#define TOP_KERNELS_TEXT 10
#define TOP_KERNELS_JSON 100
#define GAPS_TEXT 5
#define GAPS_JSON 1000
#define MAX_DEVICES 16
#define DEFAULT_GAP_US 1000
/* an advice line when the gaps over the threshold hold this share of the run */
#define ADVICE_IDLE_SHARE 0.05

/* ------------------------------------------------------------ reading */
static int push_act(struct gpu_data *d, size_t *cap, const struct gpu_activity *a)
{
    struct gpu_activity *slot = tslog_push_item((void **)&d->acts, &d->n_acts, cap, sizeof *slot);
    if (!slot)
        return -1;
    *slot = *a;
    return 0;
}

static int push_name(struct gpu_data *d, size_t *cap, const unsigned char *rec, uint32_t len)
{
    struct ts_rec_gpu_name r;
    memcpy(&r, rec, sizeof r);
    if (r.len > len - sizeof r || !r.name_id)
        return 0; /* a name longer than its record: ignored */
    char *s = malloc(r.len + 1);
    struct gpu_name *slot = s ? tslog_push_item((void **)&d->names, &d->n_names, cap, sizeof *slot) : NULL;
    if (!slot) {
        free(s);
        return -1;
    }
    memcpy(s, rec + sizeof r, r.len);
    s[r.len] = 0;
    for (char *c = s; *c; c++) /* names go to a terminal and to JSON strings */
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    *slot = (struct gpu_name){ r.name_id, s };
    return 0;
}

/* Copies a record into a zeroed struct of the size known here. */
static void take(void *dst, size_t dst_size, const unsigned char *rec, uint32_t len)
{
    memset(dst, 0, dst_size);
    memcpy(dst, rec, len < dst_size ? len : dst_size);
}

static int read_record(struct gpu_data *d, size_t *cap_acts, size_t *cap_names, const unsigned char *rec,
                       const struct ts_rec_hdr *h)
{
    switch (h->type) {
    case TS_REC_GPU_KERNEL: {
        struct ts_rec_gpu_kernel k;
        take(&k, sizeof k, rec, h->len);
        if (k.end_ns < k.start_ns || !k.start_ns)
            return 0; /* a record without valid times */
        struct gpu_activity a = { .start_ns = k.start_ns,
                                  .end_ns = k.end_ns,
                                  .stream_id = k.stream_id,
                                  .device = k.device,
                                  .name_id = k.name_id };
        d->n_kernels++;
        return push_act(d, cap_acts, &a);
    }
    case TS_REC_GPU_MEMCPY: {
        struct ts_rec_gpu_memcpy m;
        take(&m, sizeof m, rec, h->len);
        if (m.end_ns < m.start_ns || !m.start_ns)
            return 0;
        struct gpu_activity a = { .start_ns = m.start_ns,
                                  .end_ns = m.end_ns,
                                  .bytes = m.bytes,
                                  .stream_id = m.stream_id,
                                  .device = m.device,
                                  .is_copy = 1,
                                  .copy_kind = m.copy_kind,
                                  .src_kind = m.src_kind,
                                  .dst_kind = m.dst_kind };
        d->n_copies++;
        return push_act(d, cap_acts, &a);
    }
    case TS_REC_GPU_NAME:
        return h->len >= sizeof(struct ts_rec_gpu_name) ? push_name(d, cap_names, rec, h->len) : 0;
    case TS_REC_GPU_CLOCK: {
        struct ts_rec_gpu_clock c;
        take(&c, sizeof c, rec, h->len);
        if (!d->have_clock && c.cupti_ns && c.mono_ns) { /* the first pair: the start of the run */
            d->have_clock = true;
            d->clock_offset_ns = (int64_t)(c.mono_ns - c.cupti_ns);
        }
        return 0;
    }
    case TS_REC_GPU_STATUS: {
        struct ts_rec_gpu_status s;
        take(&s, sizeof s, rec, h->len);
        /* threads' buffers reach the file out of order: unavailable wins
         * over final, final over started */
        if (s.state == TS_GPU_STATUS_UNAVAILABLE
            || (s.state == TS_GPU_STATUS_FINAL && d->status != TS_GPU_STATUS_UNAVAILABLE)
            || (s.state == TS_GPU_STATUS_STARTED && !d->status))
            d->status = s.state;
        if (s.state == TS_GPU_STATUS_FINAL)
            d->dropped = s.dropped;
        if (s.state == TS_GPU_STATUS_UNAVAILABLE) {
            size_t room = h->len > sizeof s ? h->len - sizeof s : 0;
            size_t n = s.detail_len < room ? s.detail_len : room;
            if (n >= sizeof d->detail)
                n = sizeof d->detail - 1;
            memcpy(d->detail, rec + sizeof s, n);
            d->detail[n] = 0;
            for (char *c = d->detail; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                    *c = '?';
        }
        return 0;
    }
    }
    return 0;
}

static int by_start(const void *a, const void *b)
{
    const struct gpu_activity *x = a, *y = b;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    return (x->end_ns > y->end_ns) - (x->end_ns < y->end_ns);
}

static int by_name_id(const void *a, const void *b)
{
    const struct gpu_name *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

struct parse_state {
    struct gpu_data *d;
    size_t cap_acts, cap_names;
};

static int parse_one(void *arg, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct parse_state *st = arg;
    return read_record(st->d, &st->cap_acts, &st->cap_names, rec, h) ? 1 : 0;
}

int gpu_parse(const unsigned char *p, size_t size, struct gpu_data *d)
{
    memset(d, 0, sizeof *d);
    struct parse_state st = { d, 0, 0 };
    if (tslog_walk_records(p, size, parse_one, &st) > 0) { /* out of memory */
        gpu_free(d);
        return -1;
    }
    for (size_t i = 0; i < d->n_acts; i++) { /* onto the log's time axis */
        d->acts[i].start_ns += (uint64_t)d->clock_offset_ns;
        d->acts[i].end_ns += (uint64_t)d->clock_offset_ns;
    }
    if (d->n_acts)
        qsort(d->acts, d->n_acts, sizeof *d->acts, by_start);
    if (d->n_names)
        qsort(d->names, d->n_names, sizeof *d->names, by_name_id);
    return 0;
}

int gpu_load(const struct tslog *log, struct gpu_data *d)
{
    memset(d, 0, sizeof *d);
    return log->raw ? gpu_parse(log->raw, log->raw_size, d) : -1;
}

bool gpu_copy_time(const struct tslog *log, uint64_t *ns, uint64_t *n)
{
    struct gpu_data d;
    *ns = *n = 0;
    if (gpu_load(log, &d) != 0)
        return false;
    for (size_t i = 0; i < d.n_acts; i++)
        if (d.acts[i].is_copy && d.acts[i].end_ns > d.acts[i].start_ns) {
            *ns += d.acts[i].end_ns - d.acts[i].start_ns;
            (*n)++;
        }
    gpu_free(&d);
    return *n > 0;
}

void gpu_free(struct gpu_data *d)
{
    for (size_t i = 0; i < d->n_names; i++)
        free(d->names[i].name);
    free(d->names);
    free(d->acts);
    memset(d, 0, sizeof *d);
}

const char *gpu_kernel_name(const struct gpu_data *d, uint32_t id, char *buf, size_t n)
{
    struct gpu_name key = { id, NULL };
    const struct gpu_name *hit =
        id && d->n_names ? bsearch(&key, d->names, d->n_names, sizeof key, by_name_id) : NULL;
    if (hit)
        return hit->name;
    snprintf(buf, n, "kernel#%u", id);
    return buf;
}

/* ------------------------------------------------------------ analysis */
struct gap {
    uint64_t start_ns, dur_ns; /* start: since the start of the run */
};

struct busy {
    uint64_t busy_ns, first_ns, last_ns;
    uint64_t n_gaps, gap_total_ns, longest_ns, longest_at_ns;
    struct gap *gaps; /* in time order, the first GAPS_JSON */
    size_t n_listed;
};

struct kernel_row {
    uint32_t name_id;
    uint64_t calls, ns;
};

/* host memory of a copy: the side that is not the device */
enum { HOST_NONE, HOST_PAGEABLE, HOST_PINNED, HOST_MANAGED, HOST_OTHER, HOST_KINDS };
static const char *const host_names[HOST_KINDS] = { "device", "pageable", "pinned", "managed", "other" };
#define COPY_KINDS 11
static const char *const copy_names[COPY_KINDS] = { "unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                                    "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP" };

struct copy_row {
    uint64_t calls, bytes, ns;
};

struct summary {
    uint64_t run_start_ns, run_ns, threshold_ns;
    uint64_t kernel_ns, copy_ns;
    struct busy all;
    int n_devices;
    uint32_t device_ids[MAX_DEVICES];
    struct busy dev[MAX_DEVICES];
    struct kernel_row *kernels; /* by time, descending */
    size_t n_kernel_rows;
    struct copy_row copies[COPY_KINDS][HOST_KINDS];
    uint64_t gemm_kernels, gemm_ns;
    uint64_t gemm_calls, gemm_matched, gemm_matched_ns; /* COMPUTE's GEMMs timed by these kernels */
    int flop_sample;                                    /* the run's TRAINSHIM_FLOP_SAMPLE; -1 unknown */
};

/* TRAINSHIM_IDLE_GAP_US of the report's environment, else the run's, else
 * the default. */
static uint64_t gap_threshold_ns(const struct tslog *log)
{
    char buf[32];
    const char *v = getenv("TRAINSHIM_IDLE_GAP_US");
    if (!v || !*v)
        v = tslog_config_value(log, "TRAINSHIM_IDLE_GAP_US", buf, sizeof buf) ? buf : NULL;
    char *end;
    unsigned long long us = v ? strtoull(v, &end, 10) : 0;
    if (!v || end == v || *end || us > (1ull << 40))
        us = DEFAULT_GAP_US;
    return (uint64_t)us * 1000;
}

/* The union of the intervals of one device (or all: device < 0) and the
 * gaps between them. */
static int busy_of(const struct gpu_data *d, int64_t device, uint64_t thr, uint64_t run_start, struct busy *b)
{
    memset(b, 0, sizeof *b);
    b->gaps = malloc(GAPS_JSON * sizeof *b->gaps);
    if (!b->gaps)
        return -1;
    bool open = false;
    uint64_t cs = 0, ce = 0;
    for (size_t i = 0; i < d->n_acts; i++) {
        const struct gpu_activity *a = &d->acts[i];
        if (device >= 0 && a->device != (uint64_t)device)
            continue;
        if (!open) {
            open = true;
            cs = a->start_ns;
            ce = a->end_ns;
            b->first_ns = cs;
            continue;
        }
        if (a->start_ns <= ce) {
            if (a->end_ns > ce)
                ce = a->end_ns;
            continue;
        }
        b->busy_ns += ce - cs;
        uint64_t gap = a->start_ns - ce;
        if (gap >= thr && thr) {
            uint64_t at = ce > run_start ? ce - run_start : 0;
            b->n_gaps++;
            b->gap_total_ns += gap;
            if (gap > b->longest_ns) {
                b->longest_ns = gap;
                b->longest_at_ns = at;
            }
            if (b->n_listed < GAPS_JSON)
                b->gaps[b->n_listed++] = (struct gap){ at, gap };
        }
        cs = a->start_ns;
        ce = a->end_ns;
    }
    if (open) {
        b->busy_ns += ce - cs;
        b->last_ns = ce;
    }
    return 0;
}

static int by_kernel_ns(const void *a, const void *b)
{
    const struct kernel_row *x = a, *y = b;
    if (x->ns != y->ns)
        return x->ns > y->ns ? -1 : 1;
    return (x->name_id > y->name_id) - (x->name_id < y->name_id);
}

bool gpu_is_gemm_name(const char *s)
{
    for (; *s; s++)
        if ((s[0] | 0x20) == 'g' && (s[1] | 0x20) == 'e' && (s[2] | 0x20) == 'm' && (s[3] | 0x20) == 'm')
            return true;
    return false;
}

static int host_of(const struct gpu_activity *a)
{
    int k = a->copy_kind == 1 || a->copy_kind == 3   ? a->src_kind /* from the host */
            : a->copy_kind == 2 || a->copy_kind == 4 ? a->dst_kind /* to the host */
            : a->copy_kind == 9                      ? a->src_kind
                                                     : 3;
    switch (k) {
    case 1: return HOST_PAGEABLE;
    case 2: return HOST_PINNED;
    case 3:
    case 4:
    case 6: return HOST_NONE;
    case 5:
    case 7: return HOST_MANAGED;
    default: return HOST_OTHER;
    }
}

static void summary_free(struct summary *s)
{
    free(s->all.gaps);
    for (int i = 0; i < s->n_devices; i++)
        free(s->dev[i].gaps);
    free(s->kernels);
    memset(s, 0, sizeof *s);
}

static int analyze(const struct tslog *log, const struct gpu_data *d, struct summary *s)
{
    memset(s, 0, sizeof *s);
    s->run_start_ns = log->start_mono_ns;
    uint64_t end = log->complete ? log->end_time_ns : log->last_time_ns;
    s->run_ns = end > log->start_mono_ns ? end - log->start_mono_ns : 0;
    s->threshold_ns = gap_threshold_ns(log);
    char buf[32], *e;
    s->flop_sample =
        tslog_config_value(log, "TRAINSHIM_FLOP_SAMPLE", buf, sizeof buf) ? (int)strtol(buf, &e, 10) : -1;
    if (busy_of(d, -1, s->threshold_ns, s->run_start_ns, &s->all))
        return -1;
    s->kernels = calloc(d->n_names + 1, sizeof *s->kernels); /* row 0: unnamed kernels */
    if (!s->kernels)
        return -1;
    for (size_t i = 0; i <= d->n_names; i++)
        s->kernels[i].name_id = i ? d->names[i - 1].id : 0;
    for (size_t i = 0; i < d->n_acts; i++) {
        const struct gpu_activity *a = &d->acts[i];
        uint64_t dur = a->end_ns - a->start_ns;
        int k;
        for (k = 0; k < s->n_devices && s->device_ids[k] != a->device; k++)
            ;
        if (k == s->n_devices && k < MAX_DEVICES)
            s->device_ids[s->n_devices++] = a->device;
        if (a->is_copy) {
            s->copy_ns += dur;
            struct copy_row *r = &s->copies[a->copy_kind < COPY_KINDS ? a->copy_kind : 0][host_of(a)];
            r->calls++;
            r->bytes += a->bytes;
            r->ns += dur;
            continue;
        }
        s->kernel_ns += dur;
        /* names are sorted by id: binary search for the row */
        size_t lo = 0, hi = d->n_names;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (d->names[mid].id < a->name_id)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t row = lo < d->n_names && d->names[lo].id == a->name_id && a->name_id ? lo + 1 : 0;
        s->kernels[row].calls++;
        s->kernels[row].ns += dur;
        if (row && gpu_is_gemm_name(d->names[row - 1].name)) {
            s->gemm_kernels++;
            s->gemm_ns += dur;
        }
    }
    qsort(s->kernels, d->n_names + 1, sizeof *s->kernels, by_kernel_ns);
    if (s->gemm_kernels && log->n_gemms) {
        uint64_t *ns = malloc(log->n_gemms * sizeof *ns);
        bool ok = ns && gpu_match_gemms(log, d, ns) >= 0; /* out of memory: the line says "sampled" */
        for (size_t i = 0; ok && i < log->n_gemms; i++) {
            s->gemm_calls += log->gemms[i].result == 0;
            s->gemm_matched += ns[i] != 0;
            s->gemm_matched_ns += ns[i];
        }
        free(ns);
    }
    for (s->n_kernel_rows = 0; s->n_kernel_rows <= d->n_names && s->kernels[s->n_kernel_rows].calls;)
        s->n_kernel_rows++;
    for (int i = 0; i < s->n_devices; i++)
        if (busy_of(d, s->device_ids[i], s->threshold_ns, s->run_start_ns, &s->dev[i]))
            return -1;
    return 0;
}

/* ------------------------------------------------------------ formatting */
static double share(uint64_t part, uint64_t whole) { return whole ? (double)part / (double)whole : 0.0; }

static double ms(uint64_t ns) { return (double)ns / 1e6; }

static const char *enable_hint(void)
{
    return "no GPU activity recorded: run with TRAINSHIM_CUPTI=1 to record kernels and copies through CUPTI";
}

/* The advice line, grounded in the measured gaps; false when there is none. */
static bool idle_advice(const struct summary *s, char *buf, size_t n)
{
    if (!s->all.n_gaps || share(s->all.gap_total_ns, s->run_ns) < ADVICE_IDLE_SHARE)
        return false;
    snprintf(buf, n,
             "GPU idle %.0f%% of the run in %llu gaps over %.3g ms (longest %.1f ms at %.3f s): "
             "input pipeline or host-side stalls; overlap data loading and host work with GPU work",
             100.0 * share(s->all.gap_total_ns, s->run_ns), (unsigned long long)s->all.n_gaps,
             ms(s->threshold_ns), ms(s->all.longest_ns), (double)s->all.longest_at_ns / 1e9);
    return true;
}

bool gpu_log_advice(const struct tslog *log, char *buf, size_t n)
{
    struct gpu_data d;
    struct summary s;
    bool found = false;
    if (gpu_load(log, &d) != 0)
        return false;
    if (d.n_acts && analyze(log, &d, &s) == 0) {
        found = idle_advice(&s, buf, n);
        summary_free(&s);
    }
    gpu_free(&d);
    return found;
}

static void gemm_source_text(FILE *f, const struct summary *s)
{
    if (s->gemm_matched) {
        fprintf(f,
                "GEMM GPU time   COMPUTE uses CUPTI kernels: %llu of %llu GEMMs matched, %.3f ms; "
                "CUPTI saw %llu kernels named *gemm* taking %.3f ms\n",
                (unsigned long long)s->gemm_matched, (unsigned long long)s->gemm_calls,
                ms(s->gemm_matched_ns), (unsigned long long)s->gemm_kernels, ms(s->gemm_ns));
        return;
    }
    fprintf(f, "GEMM GPU time   COMPUTE uses sampled events (");
    if (s->flop_sample > 0)
        fprintf(f, "1 call in %d, TRAINSHIM_FLOP_SAMPLE", s->flop_sample);
    else
        fprintf(f, "TRAINSHIM_FLOP_SAMPLE");
    fprintf(f, "); CUPTI saw %llu kernels named *gemm* taking %.3f ms\n", (unsigned long long)s->gemm_kernels,
            ms(s->gemm_ns));
}

static void text_section(FILE *f, const struct tslog *log, const struct gpu_data *d, const struct summary *s)
{
    char b[32], nb[32];
    (void)log;
    fprintf(f, "source          CUPTI activity: %zu kernels, %zu copies, %llu records dropped\n",
            d->n_kernels, d->n_copies, (unsigned long long)d->dropped);
    fprintf(f, "GPU busy        %.3f ms (%.1f%% of the run; kernels %.3f ms, copies %.3f ms)\n",
            ms(s->all.busy_ns), 100.0 * share(s->all.busy_ns, s->run_ns), ms(s->kernel_ns), ms(s->copy_ns));
    fprintf(f, "idle gaps       %llu over %.3f ms: %.3f ms (%.1f%% of the run)",
            (unsigned long long)s->all.n_gaps, ms(s->threshold_ns), ms(s->all.gap_total_ns),
            100.0 * share(s->all.gap_total_ns, s->run_ns));
    if (s->all.n_gaps)
        fprintf(f, ", longest %.3f ms at %.3f s", ms(s->all.longest_ns), (double)s->all.longest_at_ns / 1e9);
    fputc('\n', f);
    for (size_t i = 0; i < s->all.n_listed && i < GAPS_TEXT; i++)
        fprintf(f, "  at %9.3f s  %10.3f ms\n", (double)s->all.gaps[i].start_ns / 1e9,
                ms(s->all.gaps[i].dur_ns));
    if (s->all.n_gaps > GAPS_TEXT)
        fprintf(f, "  ... %llu more\n", (unsigned long long)(s->all.n_gaps - GAPS_TEXT));
    if (s->n_devices > 1)
        for (int i = 0; i < s->n_devices; i++)
            fprintf(f, "device %-8u busy %.3f ms (%.1f%%), %llu idle gaps\n", s->device_ids[i],
                    ms(s->dev[i].busy_ns), 100.0 * share(s->dev[i].busy_ns, s->run_ns),
                    (unsigned long long)s->dev[i].n_gaps);
    if (s->n_kernel_rows) {
        fprintf(f, "kernels by GPU time\n");
        for (size_t i = 0; i < s->n_kernel_rows && i < TOP_KERNELS_TEXT; i++) {
            const struct kernel_row *k = &s->kernels[i];
            fprintf(f, "  %-40s %8llu calls %12.3f ms %6.1f%%  mean %.3f ms\n",
                    gpu_kernel_name(d, k->name_id, nb, sizeof nb), (unsigned long long)k->calls, ms(k->ns),
                    100.0 * share(k->ns, s->kernel_ns), ms(k->ns) / (double)k->calls);
        }
        if (s->n_kernel_rows > TOP_KERNELS_TEXT)
            fprintf(f, "  ... %zu more kernels\n", s->n_kernel_rows - TOP_KERNELS_TEXT);
    }
    bool any_copy = false;
    for (int k = 0; k < COPY_KINDS; k++)
        for (int h = 0; h < HOST_KINDS; h++) {
            const struct copy_row *r = &s->copies[k][h];
            if (!r->calls)
                continue;
            if (!any_copy)
                fprintf(f, "copies on the GPU (host memory as the driver saw it)\n");
            any_copy = true;
            char label[32];
            snprintf(label, sizeof label, "%s %s", copy_names[k], host_names[h]);
            fprintf(f, "  %-18s %8llu calls %12s %12.3f ms", label, (unsigned long long)r->calls,
                    tslog_human_bytes(r->bytes, b, sizeof b), ms(r->ns));
            if (r->ns)
                fprintf(f, "  %.2f GB/s", (double)r->bytes / (double)r->ns);
            fputc('\n', f);
        }
    gemm_source_text(f, s);
    char adv[320];
    if (idle_advice(s, adv, sizeof adv))
        fprintf(f, "advice          %s\n", adv);
}

/* prefix: "rank N: " before a one-line outcome when there are several logs */
static void text_one(FILE *f, const struct tslog *log, const char *prefix, const char *title)
{
    struct gpu_data d;
    struct summary s;
    if (gpu_load(log, &d) != 0) {
        fprintf(f, "%sGPU records not read (the log could not be read again)\n", prefix);
        return;
    }
    if (!d.n_acts) {
        if (d.status == TS_GPU_STATUS_UNAVAILABLE)
            fprintf(f, "%sCUPTI was requested but not available: %s\n", prefix, d.detail);
        else if (d.status)
            fprintf(f, "%sCUPTI was on but recorded no kernels or copies\n", prefix);
        else
            fprintf(f, "%s%s\n", prefix, enable_hint());
    } else if (analyze(log, &d, &s) == 0) {
        fputs(title, f);
        text_section(f, log, &d, &s);
    } else {
        fprintf(f, "%sout of memory\n", prefix);
    }
    if (d.n_acts)
        summary_free(&s);
    gpu_free(&d);
}

void gpu_report_text(FILE *f, const struct tslog *logs, int n)
{
    fprintf(f, "\n== GPU TIMELINE ==\n");
    for (int i = 0; i < n; i++) {
        char prefix[48] = "", title[80] = "";
        if (n > 1) {
            int r = logs[i].rank >= 0 ? logs[i].rank : i;
            snprintf(prefix, sizeof prefix, "rank %d: ", r);
            snprintf(title, sizeof title, "-- rank %d (pid %d) --\n", r, logs[i].pid);
        }
        text_one(f, &logs[i], prefix, title);
    }
}

static const char *status_name(uint32_t st)
{
    switch (st) {
    case TS_GPU_STATUS_STARTED: return "started";
    case TS_GPU_STATUS_UNAVAILABLE: return "unavailable";
    case TS_GPU_STATUS_FINAL: return "complete";
    default: return "off";
    }
}

static void json_gaps(const struct acct_json *j, const struct busy *b)
{
    j->open(j->ctx, "idle_gaps", '[');
    for (size_t i = 0; i < b->n_listed; i++) {
        j->open(j->ctx, NULL, '{');
        j->u64(j->ctx, "start_ns", b->gaps[i].start_ns);
        j->u64(j->ctx, "duration_ns", b->gaps[i].dur_ns);
        j->close(j->ctx, '}');
    }
    j->close(j->ctx, ']');
}

static void json_section(const struct acct_json *j, const struct gpu_data *d, const struct summary *s)
{
    char nb[32];
    void *x = j->ctx;
    j->u64(x, "threshold_ns", s->threshold_ns);
    j->u64(x, "run_ns", s->run_ns);
    j->u64(x, "busy_ns", s->all.busy_ns);
    j->num(x, "busy_share", share(s->all.busy_ns, s->run_ns));
    j->u64(x, "kernel_ns", s->kernel_ns);
    j->u64(x, "copy_ns", s->copy_ns);
    j->u64(x, "kernel_count", d->n_kernels);
    j->u64(x, "copy_count", d->n_copies);
    j->u64(x, "dropped_records", d->dropped);
    j->u64(x, "first_activity_ns", s->all.first_ns > s->run_start_ns ? s->all.first_ns - s->run_start_ns : 0);
    j->u64(x, "last_activity_ns", s->all.last_ns > s->run_start_ns ? s->all.last_ns - s->run_start_ns : 0);
    j->u64(x, "idle_gap_count", s->all.n_gaps);
    j->u64(x, "idle_gap_total_ns", s->all.gap_total_ns);
    j->num(x, "idle_gap_share", share(s->all.gap_total_ns, s->run_ns));
    j->u64(x, "longest_idle_gap_ns", s->all.longest_ns);
    j->u64(x, "longest_idle_gap_at_ns", s->all.longest_at_ns);
    json_gaps(j, &s->all);
    j->open(x, "devices", '[');
    for (int i = 0; i < s->n_devices; i++) {
        j->open(x, NULL, '{');
        j->i64(x, "device", s->device_ids[i]);
        j->u64(x, "busy_ns", s->dev[i].busy_ns);
        j->num(x, "busy_share", share(s->dev[i].busy_ns, s->run_ns));
        j->u64(x, "idle_gap_count", s->dev[i].n_gaps);
        j->u64(x, "idle_gap_total_ns", s->dev[i].gap_total_ns);
        json_gaps(j, &s->dev[i]);
        j->close(x, '}');
    }
    j->close(x, ']');
    j->open(x, "kernels", '[');
    for (size_t i = 0; i < s->n_kernel_rows && i < TOP_KERNELS_JSON; i++) {
        const struct kernel_row *k = &s->kernels[i];
        j->open(x, NULL, '{');
        j->str(x, "name", gpu_kernel_name(d, k->name_id, nb, sizeof nb));
        j->u64(x, "calls", k->calls);
        j->u64(x, "gpu_ns", k->ns);
        j->num(x, "share", share(k->ns, s->kernel_ns));
        j->close(x, '}');
    }
    j->close(x, ']');
    j->open(x, "copies", '[');
    for (int k = 0; k < COPY_KINDS; k++)
        for (int h = 0; h < HOST_KINDS; h++) {
            const struct copy_row *r = &s->copies[k][h];
            if (!r->calls)
                continue;
            j->open(x, NULL, '{');
            j->str(x, "kind", copy_names[k]);
            j->str(x, "host", host_names[h]);
            j->u64(x, "calls", r->calls);
            j->u64(x, "bytes", r->bytes);
            j->u64(x, "gpu_ns", r->ns);
            j->close(x, '}');
        }
    j->close(x, ']');
    j->open(x, "gemm_gpu_time", '{');
    j->str(x, "compute_source", s->gemm_matched ? "cupti" : "sampled events");
    j->u64(x, "cupti_gemm_kernels", s->gemm_kernels);
    j->u64(x, "cupti_gemm_ns", s->gemm_ns);
    if (s->gemm_matched) { /* absent otherwise: logs without GEMM calls report as before */
        j->u64(x, "gemm_calls", s->gemm_calls);
        j->u64(x, "matched_gemms", s->gemm_matched);
        j->u64(x, "matched_gemm_ns", s->gemm_matched_ns);
    }
    j->close(x, '}');
    char adv[320];
    j->open(x, "advice", '[');
    if (idle_advice(s, adv, sizeof adv)) {
        j->open(x, NULL, '{');
        j->str(x, "topic", "idle");
        j->str(x, "text", adv);
        j->close(x, '}');
    }
    j->close(x, ']');
}

void gpu_report_json(const struct acct_json *j, const struct tslog *log)
{
    struct gpu_data d;
    struct summary s;
    void *x = j->ctx;
    j->open(x, "gpu", '{');
    bool loaded = gpu_load(log, &d) == 0;
    j->str(x, "source", loaded && d.n_acts ? "cupti" : NULL);
    j->str(x, "status", loaded ? status_name(d.status) : "unread");
    if (loaded && d.status == TS_GPU_STATUS_UNAVAILABLE)
        j->str(x, "detail", d.detail);
    if (loaded && !d.n_acts && !d.status)
        j->str(x, "hint", enable_hint());
    if (loaded && d.n_acts && analyze(log, &d, &s) == 0)
        json_section(j, &d, &s);
    if (loaded && d.n_acts)
        summary_free(&s);
    if (loaded)
        gpu_free(&d);
    j->close(x, '}');
}
