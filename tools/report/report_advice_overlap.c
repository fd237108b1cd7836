/* report_advice_overlap.c: advice rules on memory caching, communication
 * overlap, recomputation and NUMA placement (report_advice.h).  Same table
 * as report_advice.c's; the README's advice table lists these rows too.
 *
 * fragmentation  torch's native caching allocator runs on top (the log's
 *                torch backend record, or without one its segment sizes:
 *                >= 80% multiples of 2 MiB, some of exactly 2 or 20 MiB)
 *                and at least once a cudaMalloc failed and the same thread
 *                then freed cached segments before its next allocation: the
 *                bytes those segments held were reserved and held no tensor.
 *                trainshim cannot see torch's allocated bytes, so this is
 *                the figure it gives: at most reserved - released were
 *                allocated then.
 * comm_overlap   (CUPTI) NCCL kernels (named nccl*) ran >= 5% of the GPU's
 *                working span and >= 30% of their time had no other kernel
 *                of the same device running beside them.
 * mfu_hfu        steps detected and >= 5% of a step's GEMM FLOPs are extra
 *                runs of a non-batched shape: it ran more often in the step
 *                than the most frequent of its gradient shapes (its dims in
 *                another order with other transposes), as a forward re-run
 *                in the backward does under activation checkpointing.
 *                Batched GEMMs are left out: attention's backward repeats
 *                its forward shapes (dO V^T has Q K^T's).
 * numa           the GPU's node is known and the process's CPUs or memory
 *                policy are off it (tools/report/report_numa.c). */
#include <math.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "report/report_acct.h"
#include "report/report_advice.h"
#include "report/report_gpu.h"
#include "report/report_numa.h"

#define SEGMENT_ROUND (2ull << 20)  /* torch's segments are whole 2 MiB */
#define SEGMENT_LARGE (20ull << 20) /* torch's segment for 1-10 MiB requests */
#define SEGMENT_MIN_SHARE 0.80
#define COMM_MIN_EXPOSED_SHARE 0.30
#define COMM_MIN_SPAN_SHARE 0.05
#define COMM_FEW_PER_STEP 2.0
#define RECOMPUTE_MIN_SHARE 0.05

/* ---- fragmentation ------------------------------------------------------------ */
/* torch's native caching allocator, by what the shim logged at load time;
 * a log without the record (an older shim, or trainshim loaded late) by the
 * sizes of its device allocations. */
static bool segment_sizes(const struct tslog *log)
{
    uint64_t n = 0, whole = 0, typical = 0;
    for (size_t i = 0; i < log->n_events; i++) {
        const struct tslog_event *e = &log->events[i];
        if (e->type != TS_REC_ALLOC || e->result || !e->ptr || e->device < 0)
            continue;
        n++;
        whole += e->bytes % SEGMENT_ROUND == 0;
        typical += e->bytes == SEGMENT_ROUND || e->bytes == SEGMENT_LARGE;
    }
    return n && typical && (double)whole >= SEGMENT_MIN_SHARE * (double)n;
}

static bool torch_caches(const struct tslog *log)
{
    const char *conf = log->torch_alloc_conf;
    switch (log->torch_backend_case) {
    case 0: return segment_sizes(log);
    case TS_TORCH_BACKEND_NATIVE: return true;
    case TS_TORCH_BACKEND_OFF:
    case TS_TORCH_BACKEND_HISTORY:
    case TS_TORCH_BACKEND_IPC:
    case TS_TORCH_BACKEND_GRAPH_TREES:
    case TS_TORCH_BACKEND_MEMPOOL:
    case TS_TORCH_BACKEND_DISTRIBUTED: /* left alone: torch's own choice stands */
        return !strcasestr(conf, "expandable_segments:true") && !strcasestr(conf, "cudaMallocAsync");
    default: return false;
    }
}

struct mem_ev {
    uint64_t time_ns, seq, ptr, bytes; /* frees: the bytes of the allocation they end */
    uint32_t tid;
    bool failed, is_free;
};

static int by_ptr_time(const void *a, const void *b)
{
    const struct mem_ev *x = a, *y = b;
    if (x->ptr != y->ptr)
        return x->ptr < y->ptr ? -1 : 1;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int by_time_seq(const void *a, const void *b)
{
    const struct mem_ev *x = a, *y = b;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The log's device allocations and frees in time order, each free carrying
 * the size of the allocation it ended; NULL when out of memory. */
static struct mem_ev *mem_events(const struct tslog *log, size_t *n)
{
    struct mem_ev *ev = malloc((log->n_events + 1) * sizeof *ev);
    *n = 0;
    for (size_t i = 0; ev && i < log->n_events; i++) {
        const struct tslog_event *e = &log->events[i];
        bool is_free = e->type == TS_REC_FREE;
        if ((e->type != TS_REC_ALLOC && !is_free) || (is_free && (e->result || !e->ptr)) || e->device < 0)
            continue; /* pinned host memory is logged on device -1 */
        ev[(*n)++] = (struct mem_ev){ e->time_ns, e->seq,
                                      e->ptr,     is_free ? 0 : e->bytes,
                                      e->tid,     !is_free && (e->result || !e->ptr),
                                      is_free };
    }
    if (!ev)
        return NULL;
    qsort(ev, *n, sizeof *ev, by_ptr_time);
    for (size_t i = 1; i < *n; i++) /* a free takes the size of the allocation before it */
        if (ev[i].is_free && ev[i - 1].ptr == ev[i].ptr && !ev[i - 1].is_free && !ev[i - 1].failed)
            ev[i].bytes = ev[i - 1].bytes;
    qsort(ev, *n, sizeof *ev, by_time_seq);
    return ev;
}

struct flush_stats {
    uint64_t flushes, served, released, flush_ns;
    uint64_t first_reserved, first_released, first_request; /* at the first flush */
};

/* A failed allocation opens a flush on its thread; that thread's frees
 * until its next successful allocation are what the cache released (a flush
 * that released nothing does not count), and that allocation, when of the
 * failed size, is the retry it served. */
static void find_flushes(const struct mem_ev *ev, size_t n, struct flush_stats *s)
{
    uint64_t live = 0, released = 0, start = 0, request = 0, reserved = 0;
    uint32_t tid = 0;
    bool open = false;
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < n; i++) {
        const struct mem_ev *e = &ev[i];
        if (e->failed && !open)
            open = true, tid = e->tid, start = e->time_ns, request = e->bytes, reserved = live, released = 0;
        if (e->failed)
            continue;
        live = e->is_free ? live - (e->bytes < live ? e->bytes : live) : live + e->bytes;
        if (!open || e->tid != tid)
            continue;
        if (e->is_free) {
            released += e->bytes;
            continue;
        }
        open = false;
        if (!released)
            continue;
        if (!s->flushes++)
            s->first_reserved = reserved, s->first_released = released, s->first_request = request;
        s->released += released;
        if (e->bytes == request) /* the retry got the memory (else the job saw an OOM) */
            s->served++, s->flush_ns += e->time_ns - start;
    }
}

static void fragmentation_text(struct advice_line *l, const struct flush_stats *s)
{
    char r[32], f[32], q[32], a[32];
    uint64_t at_most = s->first_reserved - (s->first_released < s->first_reserved ? s->first_released : 0);
    snprintf(
        l->text, sizeof l->text,
        "torch's caching allocator ran out of device memory %llu time(s); at the first it held %s, freed "
        "%s of segments holding no tensor (at most %s allocated), retried %s; %.3f ms to served retries. "
        "Free blocks fit only their own segment: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or "
        "backend:cudaMallocAsync (trainshim's page pool, which the shim chooses when the variable names no "
        "backend)",
        (unsigned long long)s->flushes, tslog_human_bytes(s->first_reserved, r, sizeof r),
        tslog_human_bytes(s->first_released, f, sizeof f), tslog_human_bytes(at_most, a, sizeof a),
        tslog_human_bytes(s->first_request, q, sizeof q), (double)s->flush_ns / 1e6);
}

void advice_fragmentation(const struct tslog *log, struct advice_set *out)
{
    if (!torch_caches(log))
        return;
    size_t n;
    struct mem_ev *ev = mem_events(log, &n);
    if (!ev)
        return;
    struct flush_stats s;
    find_flushes(ev, n, &s);
    free(ev);
    struct advice_line *l = s.flushes ? advice_add(out, "fragmentation") : NULL;
    if (!l)
        return;
    advice_figure(l, "flushes", (double)s.flushes);
    advice_figure(l, "retries_served", (double)s.served);
    advice_figure(l, "released_bytes", (double)s.released);
    advice_figure(l, "flush_host_ns", (double)s.flush_ns);
    advice_figure(l, "reserved_at_first_bytes", (double)s.first_reserved);
    advice_figure(l, "released_at_first_bytes", (double)s.first_released);
    advice_figure(l, "requested_at_first_bytes", (double)s.first_request);
    advice_figure(l, "released_share_at_first",
                  s.first_reserved ? (double)s.first_released / (double)s.first_reserved : NAN);
    fragmentation_text(l, &s);
}

/* ---- comm_overlap ------------------------------------------------------------- */
struct span {
    uint64_t start, end;
};

/* Appends [s, e) to a union being built from intervals sorted by start. */
static void span_add(struct span *u, size_t *n, uint64_t s, uint64_t e)
{
    if (*n && s <= u[*n - 1].end) {
        u[*n - 1].end = e > u[*n - 1].end ? e : u[*n - 1].end;
        return;
    }
    u[(*n)++] = (struct span){ s, e };
}

static uint64_t span_total(const struct span *u, size_t n)
{
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++)
        t += u[i].end - u[i].start;
    return t;
}

/* Time of the union a that the union b covers (both sorted, disjoint). */
static uint64_t span_covered(const struct span *a, size_t na, const struct span *b, size_t nb)
{
    uint64_t t = 0;
    for (size_t i = 0, j = 0; i < na && j < nb;) {
        uint64_t s = a[i].start > b[j].start ? a[i].start : b[j].start;
        uint64_t e = a[i].end < b[j].end ? a[i].end : b[j].end;
        t += e > s ? e - s : 0;
        if (a[i].end < b[j].end)
            i++;
        else
            j++;
    }
    return t;
}

struct comm_time {
    uint64_t nccl_ns, covered_ns, span_ns, kernels;
};

static bool is_nccl(const struct gpu_data *d, const struct gpu_activity *a)
{
    char b[32];
    return !a->is_copy && !strncasecmp(gpu_kernel_name(d, a->name_id, b, sizeof b), "nccl", 4);
}

/* Adds device dev's NCCL kernel time, the part of it the device's other
 * kernels ran beside, and the span of its work to *t; -1 when out of
 * memory. */
static int comm_time(const struct gpu_data *d, uint32_t dev, struct comm_time *t)
{
    struct span *nc = malloc((d->n_acts + 1) * sizeof *nc), *cu = malloc((d->n_acts + 1) * sizeof *cu);
    size_t nn = 0, nu = 0;
    uint64_t first = UINT64_MAX, last = 0;
    for (size_t i = 0; nc && cu && i < d->n_acts; i++) {
        const struct gpu_activity *a = &d->acts[i];
        if (a->device != dev)
            continue;
        first = a->start_ns < first ? a->start_ns : first;
        last = a->end_ns > last ? a->end_ns : last;
        if (a->end_ns <= a->start_ns || a->is_copy)
            continue;
        if (is_nccl(d, a))
            span_add(nc, &nn, a->start_ns, a->end_ns), t->kernels++;
        else
            span_add(cu, &nu, a->start_ns, a->end_ns);
    }
    int rc = nc && cu ? 0 : -1;
    if (!rc) {
        t->nccl_ns += span_total(nc, nn);
        t->covered_ns += span_covered(nc, nn, cu, nu);
        t->span_ns += last > first ? last - first : 0;
    }
    free(nc);
    free(cu);
    return rc;
}

/* The least device id >= *dev among d's records; false when none. */
static bool next_device(const struct gpu_data *d, uint64_t *dev)
{
    uint64_t best = UINT64_MAX;
    for (size_t i = 0; i < d->n_acts; i++)
        if (d->acts[i].device >= *dev && d->acts[i].device < best)
            best = d->acts[i].device;
    *dev = best;
    return best != UINT64_MAX;
}

/* Each device's NCCL kernels against its own compute kernels. */
static int comm_times(const struct gpu_data *d, struct comm_time *t)
{
    int rc = 0;
    memset(t, 0, sizeof *t);
    for (uint64_t dev = 0; !rc && next_device(d, &dev); dev++)
        rc = comm_time(d, (uint32_t)dev, t);
    return rc;
}

/* Successful collectives per step, NaN when the steps are unknown. */
static double collectives_per_step(const struct tslog *log, const struct acct_compute *c)
{
    if (!c || c->n_steps < 2)
        return NAN;
    uint64_t from = c->steps[0].start_ns, to = c->steps[c->n_steps - 1].start_ns, n = 0;
    for (size_t i = 0; i < log->n_nccls; i++)
        n += !log->nccls[i].result && log->nccls[i].time_ns >= from && log->nccls[i].time_ns < to;
    return (double)n / (double)(c->n_steps - 1);
}

void advice_comm_overlap(const struct tslog *log, const struct acct_compute *c, struct advice_set *out)
{
    struct gpu_data d;
    struct comm_time t;
    if (gpu_load(log, &d))
        return;
    int rc = comm_times(&d, &t);
    gpu_free(&d);
    uint64_t exposed = t.nccl_ns - t.covered_ns;
    if (rc || !t.span_ns || (double)t.nccl_ns < COMM_MIN_SPAN_SHARE * (double)t.span_ns
        || (double)exposed < COMM_MIN_EXPOSED_SHARE * (double)t.nccl_ns)
        return;
    struct advice_line *l = advice_add(out, "comm_overlap");
    if (!l)
        return;
    double share = (double)exposed / (double)t.nccl_ns, per_step = collectives_per_step(log, c);
    advice_figure(l, "exposed_share", share);
    advice_figure(l, "exposed_ns", (double)exposed);
    advice_figure(l, "nccl_kernel_ns", (double)t.nccl_ns);
    advice_figure(l, "nccl_kernels", (double)t.kernels);
    advice_figure(l, "exposed_span_share", (double)exposed / (double)t.span_ns);
    advice_figure(l, "collectives_per_step", per_step);
    char steps[48] = "";
    if (!isnan(per_step))
        snprintf(steps, sizeof steps, "; %.1f collectives per step", per_step);
    /* one or two collectives a step: the gradients wait for the whole backward */
    const char *fix =
        !isnan(per_step) && per_step <= COMM_FEW_PER_STEP
            ? "reduce gradients in buckets as the backward produces them (DDP: bucket_cap_mb below "
              "the gradient size; by hand: each layer's all-reduce on a side stream)"
            : "issue collectives during the backward (DDP's hooks; no_sync only on accumulation "
              "steps); FSDP: backward_prefetch=BACKWARD_PRE, forward_prefetch=True";
    snprintf(l->text, sizeof l->text,
             "%.1f%% of NCCL kernel time (%.3f of %.3f ms, %.1f%% of the GPU's working span) had no compute "
             "kernel beside it%.40s: %.170s",
             100.0 * share, (double)exposed / 1e6, (double)t.nccl_ns / 1e6,
             100.0 * (double)exposed / (double)t.span_ns, steps, fix);
}

/* ---- mfu_hfu ---------------------------------------------------------------------- */
static bool same_gemm(const struct tslog_gemm *a, const struct tslog_gemm *b)
{
    return a->m == b->m && a->n == b->n && a->k == b->k && a->batch == b->batch && a->transa == b->transa
           && a->transb == b->transb && a->data_type == b->data_type;
}

/* b has a's dims in another order and other transposes: a gradient of a
 * (a Linear layer's forward is (T, N), its dgrad (N, N), its wgrad (N, T)),
 * or a its gradient. */
static bool gradient_pair(const struct tslog_gemm *a, const struct tslog_gemm *b)
{
    int64_t x[3] = { a->m, a->n, a->k }, y[3] = { b->m, b->n, b->k };
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++) {
            if (x[j] < x[i])
                x[i] ^= x[j], x[j] ^= x[i], x[i] ^= x[j];
            if (y[j] < y[i])
                y[i] ^= y[j], y[j] ^= y[i], y[i] ^= y[j];
        }
    return a->batch == b->batch && a->data_type == b->data_type && x[0] == y[0] && x[1] == y[1]
           && x[2] == y[2] && (a->transa != b->transa || a->transb != b->transb);
}

struct recompute {
    uint64_t gemms, flops, step_flops;
};

/* One step's GEMMs g[0..n): a shape that runs more often than the most
 * frequent of its gradient shapes ran its forward again for the extra
 * times (a shape with no gradient in the step is not trained there). */
static int find_recompute(const struct tslog_gemm *const *g, size_t n, struct recompute *r)
{
    size_t *count = calloc(n + 1, sizeof *count), *first = calloc(n + 1, sizeof *first), keys = 0;
    memset(r, 0, sizeof *r);
    for (size_t j = 0; count && first && j < n; j++) {
        size_t k = 0;
        while (k < keys && !same_gemm(g[first[k]], g[j]))
            k++;
        if (k == keys)
            first[keys++] = j;
        count[k]++;
        r->step_flops += g[j]->flops;
    }
    for (size_t k = 0; count && first && k < keys; k++) {
        size_t grads = 0;
        for (size_t o = 0; o < keys; o++)
            if (gradient_pair(g[first[k]], g[first[o]]) && count[o] > grads)
                grads = count[o];
        if (g[first[k]]->batch > 1 || !grads || count[k] <= grads)
            continue;
        r->gemms += count[k] - grads;
        r->flops += (count[k] - grads) * g[first[k]]->flops;
    }
    int rc = count && first ? 0 : -1;
    free(count);
    free(first);
    return rc;
}

static int by_gemm_time(const void *a, const void *b)
{
    const struct tslog_gemm *x = *(const struct tslog_gemm *const *)a,
                            *y = *(const struct tslog_gemm *const *)b;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The GEMMs of the second step (the first steady one), as the compute
 * summary counted them: successful calls in time order. */
static int step_recompute(const struct tslog *log, const struct acct_compute *c, struct recompute *r)
{
    const struct tslog_gemm **g = malloc((log->n_gemms + 1) * sizeof *g);
    size_t n = 0;
    for (size_t i = 0; g && i < log->n_gemms; i++)
        if (!log->gemms[i].result)
            g[n++] = &log->gemms[i];
    if (!g)
        return -1;
    qsort(g, n, sizeof *g, by_gemm_time);
    const struct acct_step *st = &c->steps[1];
    int rc = st->first_gemm + st->gemms <= n ? find_recompute(g + st->first_gemm, st->gemms, r) : -1;
    free(g);
    return rc;
}

void advice_mfu_hfu(const struct tslog *log, const struct acct_compute *c, struct advice_set *out)
{
    struct recompute r;
    if (!c || c->n_steps < 2 || step_recompute(log, c, &r) || !r.step_flops)
        return;
    double share = (double)r.flops / (double)r.step_flops;
    if (share < RECOMPUTE_MIN_SHARE)
        return;
    struct advice_line *l = advice_add(out, "mfu_hfu");
    if (!l)
        return;
    double hfu = acct_steady_mfu(c), mfu = hfu * (1.0 - share);
    advice_figure(l, "recompute_flop_share", share);
    advice_figure(l, "recomputed_gemms_per_step", (double)r.gemms);
    advice_figure(l, "recomputed_flops_per_step", (double)r.flops);
    advice_figure(l, "hfu", hfu);
    advice_figure(l, "mfu", mfu);
    char fig[64];
    if (isnan(hfu))
        snprintf(fig, sizeof fig, "MFU = %.2f x HFU (no step time for either)", 1.0 - share);
    else
        snprintf(fig, sizeof fig, "HFU %.1f%%, MFU %.1f%%", 100.0 * hfu, 100.0 * mfu);
    snprintf(l->text, sizeof l->text,
             "%.1f%% of each step's GEMM FLOPs (%llu GEMMs) re-run forward shapes more often than their "
             "gradients (activation checkpointing): %.48s; COMPUTE's MFU counts every GEMM run (the HFU). "
             "With memory to spare, checkpoint fewer layers (torch.utils.checkpoint) or selectively",
             100.0 * share, (unsigned long long)r.gemms, fig);
}

/* ---- numa ------------------------------------------------------------------------ */
void advice_numa(const struct tslog *log, struct advice_set *out)
{
    struct numa_advice_figures f;
    char text[ADVICE_TEXT];
    if (!numa_log_figures(log, &f) || !numa_log_advice(log, text, sizeof text))
        return;
    struct advice_line *l = advice_add(out, "numa");
    if (!l)
        return;
    snprintf(l->text, sizeof l->text, "%s", text);
    advice_figure(l, "device", f.device);
    advice_figure(l, "gpu_node", f.node);
    advice_figure(l, "off_node_cpus", f.off_node_cpus);
    advice_figure(l, "memory_off_node", f.memory_off_node);
    advice_figure(l, "launcher_excluded_node", f.launcher_outside);
}
