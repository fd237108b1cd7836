/* report_comm.c: the COMMUNICATION section of `trainshim report` and its
 * JSON ("nccl"): per-op and per-communicator totals of NCCL calls, algbw and
 * busbw with the nccl-tests formulas (shim/observe/comm.h) over the sampled
 * completion times; with several rank logs, the time each rank spent in
 * collectives and the slowest/fastest rank of every step; and the ADVICE
 * lines, each grounded in a number measured in this run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "observe/comm.h"
#include "report/report_acct.h"

_Static_assert(TS_NCCL_OP_COUNT <= 16, "acct_comm.ops is indexed by op");

static bool counted_call(const struct tslog_nccl *r)
{
    return ts_nccl_op_moves_data(r->op) && r->result == 0;
}

static int by_sample(const void *a, const void *b)
{
    const struct tslog_nccl *x = *(const struct tslog_nccl *const *)a,
                            *y = *(const struct tslog_nccl *const *)b;
    return x->sample_id < y->sample_id ? -1 : x->sample_id > y->sample_id;
}

/* The GPU time each timed call is credited with.  A grouped launch is timed
 * as a unit, once per stream: every call of the group on that stream shares
 * one sample, whose time is split between them by their bytes (S).  *out
 * is indexed like log->nccls; NULL when nothing was timed. */
static int timed_shares(const struct tslog *log, double **out)
{
    *out = NULL;
    size_t n = 0;
    for (size_t i = 0; i < log->n_nccls; i++)
        n += log->nccls[i].gpu_ns && counted_call(&log->nccls[i]);
    if (!n)
        return 0;
    const struct tslog_nccl **t = malloc(n * sizeof *t);
    double *ns = calloc(log->n_nccls, sizeof *ns);
    if (!t || !ns) {
        free(t);
        free(ns);
        return -1;
    }
    n = 0;
    for (size_t i = 0; i < log->n_nccls; i++)
        if (log->nccls[i].gpu_ns && counted_call(&log->nccls[i]))
            t[n++] = &log->nccls[i];
    qsort(t, n, sizeof *t, by_sample);
    for (size_t a = 0, b; a < n; a = b) {
        double total = 0;
        size_t members = 0;
        for (b = a; b < n && t[b]->sample_id == t[a]->sample_id; b++, members++)
            total += (double)ts_nccl_algo_bytes(t[b]->op, t[b]->bytes, t[b]->comm_size);
        for (size_t k = a; k < b; k++) {
            double s = (double)ts_nccl_algo_bytes(t[k]->op, t[k]->bytes, t[k]->comm_size);
            ns[t[k] - log->nccls] = (double)t[k]->gpu_ns * (total > 0 ? s / total : 1.0 / (double)members);
        }
    }
    free(t);
    *out = ns;
    return 0;
}

/* The row of communicator id as seen by rank: a process driving several
 * ranks of one communicator (ncclCommInitAll, a thread per rank) has one
 * row per rank. */
static struct acct_comm_row *comm_row(struct acct_comm *c, const struct tslog_nccl *r)
{
    for (size_t k = 0; k < c->n_comms; k++)
        if (c->comms[k].id == r->comm_id && c->comms[k].rank == r->rank)
            return &c->comms[k];
    if (c->n_comms >= ACCT_MAX_COMMS)
        return NULL;
    if (c->n_comms == c->comms_cap) {
        size_t nc = c->comms_cap ? c->comms_cap * 2 : 8;
        struct acct_comm_row *g = realloc(c->comms, nc * sizeof *g);
        if (!g)
            return NULL;
        c->comms = g;
        c->comms_cap = nc;
    }
    struct acct_comm_row *row = &c->comms[c->n_comms++];
    memset(row, 0, sizeof *row);
    row->id = r->comm_id;
    row->size = r->comm_size;
    row->rank = r->rank;
    return row;
}

static void count_call(struct acct_comm *c, struct acct_comm_row *row, const struct tslog_nccl *r,
                       double gpu_ns)
{
    struct acct_op *o = &c->ops[r->op];
    uint64_t algo = ts_nccl_algo_bytes(r->op, r->bytes, r->comm_size);
    uint64_t t = (uint64_t)(gpu_ns + 0.5);
    o->calls++;
    o->bytes += r->bytes;
    o->algo_bytes += algo;
    if (gpu_ns > 0) {
        o->timed_calls++;
        o->timed_ns += t;
        o->timed_algo_bytes += algo;
        o->timed_bus_bytes += (double)algo * ts_nccl_bus_factor(r->op, r->comm_size);
    }
    if (row) {
        row->calls++;
        row->bytes += r->bytes;
        if (gpu_ns > 0)
            row->timed_calls++, row->timed_ns += t;
    }
}

static void count_comm_events(const struct tslog *log, struct acct_comm *c)
{
    for (size_t i = 0; i < log->n_comms; i++) {
        const struct tslog_comm *m = &log->comms[i];
        if (m->result != 0 && m->result != 7 /* ncclInProgress */)
            continue;
        switch (m->kind) {
        case TS_COMM_CREATED: c->created++; break;
        case TS_COMM_SPLIT: c->split++; break;
        case TS_COMM_DESTROYED: c->destroyed++; break;
        case TS_COMM_FINALIZED: c->finalized++; break;
        case TS_COMM_ABORTED: c->aborted++; break;
        }
    }
}

/* Time in collectives.  Each communicator rank's is its mean timed duration
 * times its calls.  A process that is one rank of every communicator spends
 * the sum of them; one that drives several ranks of a communicator runs
 * them side by side, so its time is that of the busiest rank.  Never more
 * than the run: an estimate from samples may overshoot it. */
static void estimate_collective_time(struct acct_comm *c)
{
    bool one_rank_each = true;
    for (size_t a = 0; a < c->n_comms; a++) {
        struct acct_comm_row *r = &c->comms[a];
        r->est_ns =
            r->timed_calls ? (uint64_t)((double)r->timed_ns / (double)r->timed_calls * (double)r->calls) : 0;
        for (size_t b = 0; b < a; b++)
            if (c->comms[b].id == r->id)
                one_rank_each = false;
    }
    uint64_t est = 0;
    for (size_t a = 0; a < c->n_comms; a++) {
        uint64_t e = c->comms[a].est_ns;
        est = one_rank_each ? est + e : (e > est ? e : est);
    }
    c->est_ns = c->run_ns && est > c->run_ns ? c->run_ns : est;
}

#define FREE_LOOKBACK 4096

static bool api_is(const struct tslog *log, int32_t api, const char *name)
{
    return api >= 0 && (uint32_t)api < log->n_api_names && log->api_names[api]
           && !strcmp(log->api_names[api], name);
}

static int by_time_seq(const void *a, const void *b)
{
    const struct tslog_event *x = *(const struct tslog_event *const *)a,
                             *y = *(const struct tslog_event *const *)b;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Device memory NCCL owns (ncclMemAlloc / ncclMemFree), replayed in time
 * order: its calls, peak and what was still held at the end. */
static int library_memory(const struct tslog *log, struct acct_comm *c)
{
    size_t n = 0;
    for (size_t i = 0; i < log->n_events; i++)
        n +=
            api_is(log, log->events[i].api, "ncclMemAlloc") || api_is(log, log->events[i].api, "ncclMemFree");
    if (!n)
        return 0;
    const struct tslog_event **e = malloc(n * sizeof *e);
    if (!e)
        return -1;
    n = 0;
    for (size_t i = 0; i < log->n_events; i++)
        if (api_is(log, log->events[i].api, "ncclMemAlloc") || api_is(log, log->events[i].api, "ncclMemFree"))
            e[n++] = &log->events[i];
    qsort(e, n, sizeof *e, by_time_seq);
    for (size_t i = 0; i < n; i++) {
        if (e[i]->result || !e[i]->ptr)
            continue;
        if (e[i]->type == TS_REC_ALLOC) {
            c->mem_allocs++;
            c->mem_live += e[i]->bytes;
            if (c->mem_live > c->mem_peak)
                c->mem_peak = c->mem_live;
            continue;
        }
        /* the allocation this frees: the latest of that pointer (looked for
         * among the last FREE_LOOKBACK calls: NCCL allocates rarely) */
        for (size_t k = i, seen = 0; k-- > 0 && seen++ < FREE_LOOKBACK;)
            if (e[k]->type == TS_REC_ALLOC && !e[k]->result && e[k]->ptr == e[i]->ptr) {
                c->mem_live -= e[k]->bytes < c->mem_live ? e[k]->bytes : c->mem_live;
                c->mem_frees++;
                break;
            }
    }
    free(e);
    return 0;
}

int acct_comm_add_site(struct acct_comm *c, const struct ts_rec_site_total *t)
{
    int op = t->op >= 0 && t->op < TS_NCCL_OP_COUNT ? t->op : TS_NCCL_NONE;
    if (op == TS_NCCL_GROUP_START && t->comm_size == -1) /* group depth 0 */
        c->group_calls += t->count - t->failed;
    if (!ts_nccl_op_moves_data(op))
        return 0;
    struct acct_op *o = &c->ops[op];
    uint64_t ok = t->count - t->failed;
    o->failed += t->failed;
    o->calls += ok;
    o->bytes += t->bytes;
    o->algo_bytes += ts_nccl_algo_bytes(op, t->bytes, t->comm_size);
    struct tslog_nccl key = { .comm_id = t->comm_id, .rank = t->rank, .comm_size = t->comm_size };
    struct acct_comm_row *row = comm_row(c, &key);
    if (row) {
        row->calls += ok;
        row->bytes += t->bytes;
    }
    return 0;
}

void acct_comm_estimate(struct acct_comm *c) { estimate_collective_time(c); }

int acct_comm_analyze(const struct tslog *log, struct acct_comm *c)
{
    memset(c, 0, sizeof *c);
    c->run_ns = log->last_time_ns > log->first_time_ns ? log->last_time_ns - log->first_time_ns : 0;
    double *shares;
    if (timed_shares(log, &shares))
        return -1;
    for (size_t i = 0; i < log->n_nccls; i++) {
        const struct tslog_nccl *r = &log->nccls[i];
        int op = r->op >= 0 && r->op < TS_NCCL_OP_COUNT ? r->op : TS_NCCL_NONE;
        if (op == TS_NCCL_GROUP_START && r->result == 0 && r->group_depth == 0)
            c->group_calls++;
        if (!ts_nccl_op_moves_data(op))
            continue;
        if (r->result != 0) {
            c->ops[op].failed++;
            continue;
        }
        count_call(c, comm_row(c, r), r, shares ? shares[i] : 0.0);
    }
    free(shares);
    if (library_memory(log, c))
        return -1;
    count_comm_events(log, c);
    estimate_collective_time(c);
    return 0;
}

void acct_comm_free(struct acct_comm *c)
{
    free(c->comms);
    memset(c, 0, sizeof *c);
}

static double op_algbw(const struct acct_op *o)
{
    return o->timed_ns ? ts_nccl_algbw_gbps(o->timed_algo_bytes, o->timed_ns) : NAN;
}

static double op_busbw(const struct acct_op *o)
{
    return o->timed_ns ? o->timed_bus_bytes / (double)o->timed_ns : NAN;
}

static bool any_comm(const struct acct_comm *c)
{
    for (int op = 0; op < TS_NCCL_OP_COUNT; op++)
        if (c->ops[op].calls || c->ops[op].failed)
            return true;
    return c->created || c->split || c->group_calls || c->mem_allocs;
}

static void gbps(FILE *f, double v)
{
    if (isnan(v))
        fprintf(f, " %10s", "n/a");
    else
        fprintf(f, " %10.3f", v);
}

/* GPU milliseconds of the timed calls, "n/a" when none was timed (0.000
 * would read as free). */
static const char *timed_ms(char *buf, size_t n, uint64_t timed_calls, uint64_t timed_ns)
{
    if (!timed_calls)
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, "%.3f", (double)timed_ns / 1e6);
    return buf;
}

void acct_comm_text(FILE *f, const struct acct_comm *c)
{
    fprintf(f, "\n== COMMUNICATION ==\n");
    if (!any_comm(c)) {
        fprintf(f, "no NCCL calls\n");
        return;
    }
    fprintf(f, "communicators       %llu created, %llu split, %llu destroyed, %llu finalized, %llu aborted\n",
            (unsigned long long)c->created, (unsigned long long)c->split, (unsigned long long)c->destroyed,
            (unsigned long long)c->finalized, (unsigned long long)c->aborted);
    fprintf(f, "group calls         %llu\n", (unsigned long long)c->group_calls);
    if (c->mem_allocs) {
        char a[32], b[32];
        fprintf(
            f,
            "NCCL-owned memory   %llu ncclMemAlloc, peak %s, %s live at end (library-owned device memory, "
            "counted in DEVICE MEMORY's peak allocated, outside the pool)\n",
            (unsigned long long)c->mem_allocs, tslog_human_bytes(c->mem_peak, a, sizeof a),
            tslog_human_bytes(c->mem_live, b, sizeof b));
    }
    fprintf(f, "%-14s %8s %6s %16s %8s %12s %10s %10s\n", "op", "calls", "failed", "bytes", "timed",
            "GPU ms(timed)", "algbw GB/s", "busbw GB/s");
    char ms[32];
    for (int op = 0; op < TS_NCCL_OP_COUNT; op++) {
        const struct acct_op *o = &c->ops[op];
        if (!o->calls && !o->failed)
            continue;
        fprintf(f, "%-14s %8llu %6llu %16llu %8llu %12s", ts_nccl_op_name(op), (unsigned long long)o->calls,
                (unsigned long long)o->failed, (unsigned long long)o->bytes,
                (unsigned long long)o->timed_calls, timed_ms(ms, sizeof ms, o->timed_calls, o->timed_ns));
        gbps(f, op_algbw(o));
        gbps(f, op_busbw(o));
        fputc('\n', f);
    }
    fprintf(f, "%-18s %5s %5s %8s %16s %8s %13s\n", "communicator", "size", "rank", "calls", "bytes", "timed",
            "GPU ms(timed)");
    for (size_t k = 0; k < c->n_comms; k++) {
        const struct acct_comm_row *r = &c->comms[k];
        fprintf(f, "%016llx   %5d %5d %8llu %16llu %8llu %13s\n", (unsigned long long)r->id, r->size, r->rank,
                (unsigned long long)r->calls, (unsigned long long)r->bytes,
                (unsigned long long)r->timed_calls, timed_ms(ms, sizeof ms, r->timed_calls, r->timed_ns));
    }
    fprintf(f, "time in collectives %.3f ms (estimated from timed calls), %.2f%% of the run\n",
            (double)c->est_ns / 1e6, c->run_ns ? 100.0 * (double)c->est_ns / (double)c->run_ns : 0.0);
}

void acct_comm_json(const struct acct_json *j, const struct acct_comm *c)
{
    void *x = j->ctx;
    j->open(x, "nccl", '{');
    j->open(x, "ops", '[');
    for (int op = 0; op < TS_NCCL_OP_COUNT; op++) {
        const struct acct_op *o = &c->ops[op];
        if (!o->calls && !o->failed)
            continue;
        j->open(x, NULL, '{');
        j->str(x, "op", ts_nccl_op_name(op));
        j->u64(x, "calls", o->calls);
        j->u64(x, "failed_calls", o->failed);
        j->u64(x, "bytes", o->bytes);
        j->u64(x, "algo_bytes", o->algo_bytes);
        j->u64(x, "timed_calls", o->timed_calls);
        j->u64(x, "timed_gpu_ns", o->timed_ns);
        j->num(x, "algbw_gbps", op_algbw(o));
        j->num(x, "busbw_gbps", op_busbw(o));
        j->close(x, '}');
    }
    j->close(x, ']');
    j->open(x, "communicators", '[');
    for (size_t k = 0; k < c->n_comms; k++) {
        const struct acct_comm_row *r = &c->comms[k];
        char id[24];
        snprintf(id, sizeof id, "%016llx", (unsigned long long)r->id);
        j->open(x, NULL, '{');
        j->str(x, "id", id);
        j->i64(x, "size", r->size);
        j->i64(x, "rank", r->rank);
        j->u64(x, "calls", r->calls);
        j->u64(x, "bytes", r->bytes);
        j->u64(x, "timed_calls", r->timed_calls);
        j->u64(x, "timed_gpu_ns", r->timed_ns);
        j->u64(x, "estimated_collective_ns", r->est_ns);
        j->close(x, '}');
    }
    j->close(x, ']');
    j->u64(x, "group_calls", c->group_calls);
    j->open(x, "library_memory", '{');
    j->u64(x, "allocations", c->mem_allocs);
    j->u64(x, "frees", c->mem_frees);
    j->u64(x, "peak_bytes", c->mem_peak);
    j->u64(x, "live_bytes", c->mem_live);
    j->close(x, '}');
    j->u64(x, "comms_created", c->created);
    j->u64(x, "comms_split", c->split);
    j->u64(x, "comms_destroyed", c->destroyed);
    j->u64(x, "comms_finalized", c->finalized);
    j->u64(x, "comms_aborted", c->aborted);
    j->u64(x, "estimated_collective_ns", c->est_ns);
    j->num(x, "collective_time_share", c->run_ns ? (double)c->est_ns / (double)c->run_ns : NAN);
    j->close(x, '}');
}

/* ---- several ranks -------------------------------------------------------------- */
static size_t common_steps(const struct acct_compute *cs, int n)
{
    size_t k = (size_t)-1;
    for (int i = 0; i < n; i++)
        if (cs[i].n_steps < k)
            k = cs[i].n_steps;
    return n > 0 && k != (size_t)-1 ? k : 0;
}

/* slowest / fastest rank of step s (index into logs), by step time */
static void step_extremes(const struct acct_compute *cs, int n, size_t s, int *slow, int *fast)
{
    *slow = *fast = -1;
    for (int i = 0; i < n; i++) {
        uint64_t t = cs[i].steps[s].time_ns;
        if (!t)
            continue;
        if (*slow < 0 || t > cs[*slow].steps[s].time_ns)
            *slow = i;
        if (*fast < 0 || t < cs[*fast].steps[s].time_ns)
            *fast = i;
    }
}

static int rank_of(const struct tslog *logs, int i) { return logs[i].rank >= 0 ? logs[i].rank : i; }

void acct_ranks_text(FILE *f, const struct tslog *logs, const struct acct_compute *cs,
                     const struct acct_comm *ms, int n)
{
    fprintf(f, "\n== RANKS: COMPUTE AND COMMUNICATION ==\n");
    fprintf(f, "%-5s %18s %8s %10s %16s %10s\n", "rank", "GEMM FLOPs", "steps", "NCCL calls", "collective ms",
            "share");
    for (int i = 0; i < n; i++) {
        uint64_t calls = 0;
        for (int op = 0; op < TS_NCCL_OP_COUNT; op++)
            calls += ms[i].ops[op].calls;
        fprintf(f, "%-5d %18llu %8zu %10llu %16.3f %9.2f%%\n", rank_of(logs, i),
                (unsigned long long)cs[i].gemm_flops, cs[i].n_steps, (unsigned long long)calls,
                (double)ms[i].est_ns / 1e6,
                ms[i].run_ns ? 100.0 * (double)ms[i].est_ns / (double)ms[i].run_ns : 0.0);
    }
    size_t k = common_steps(cs, n);
    if (!k) {
        fprintf(f, "stragglers          no common steps detected\n");
        return;
    }
    fprintf(f, "%-6s %14s %8s %14s %8s %8s\n", "step", "slowest ms", "rank", "fastest ms", "rank", "spread");
    for (size_t s = 0; s < k; s++) {
        int slow, fast;
        step_extremes(cs, n, s, &slow, &fast);
        if (slow < 0)
            continue;
        double ts = (double)cs[slow].steps[s].time_ns, tf = (double)cs[fast].steps[s].time_ns;
        fprintf(f, "%-6zu %14.3f %8d %14.3f %8d %7.1f%%\n", s + 1, ts / 1e6, rank_of(logs, slow), tf / 1e6,
                rank_of(logs, fast), tf > 0 ? 100.0 * (ts - tf) / tf : 0.0);
    }
}

void acct_ranks_json(const struct acct_json *j, const struct tslog *logs, const struct acct_compute *cs,
                     const struct acct_comm *ms, int n)
{
    void *x = j->ctx;
    j->open(x, "rank_accounting", '{');
    j->open(x, "ranks", '[');
    for (int i = 0; i < n; i++) {
        j->open(x, NULL, '{');
        j->i64(x, "rank", rank_of(logs, i));
        j->u64(x, "gemm_flops", cs[i].gemm_flops);
        j->u64(x, "steps", cs[i].n_steps);
        j->u64(x, "estimated_collective_ns", ms[i].est_ns);
        j->num(x, "collective_time_share", ms[i].run_ns ? (double)ms[i].est_ns / (double)ms[i].run_ns : NAN);
        j->close(x, '}');
    }
    j->close(x, ']');
    size_t k = common_steps(cs, n);
    j->open(x, "steps", '[');
    for (size_t s = 0; s < k; s++) {
        int slow, fast;
        step_extremes(cs, n, s, &slow, &fast);
        if (slow < 0)
            continue;
        j->open(x, NULL, '{');
        j->u64(x, "index", s + 1);
        j->i64(x, "slowest_rank", rank_of(logs, slow));
        j->u64(x, "slowest_ns", cs[slow].steps[s].time_ns);
        j->i64(x, "fastest_rank", rank_of(logs, fast));
        j->u64(x, "fastest_ns", cs[fast].steps[s].time_ns);
        j->close(x, '}');
    }
    j->close(x, ']');
    j->close(x, '}');
}

/* ---- advice --------------------------------------------------------------------- */
/* Bytes in KiB/MiB/GiB with one decimal: the copy line must fit 256 bytes. */
static const char *short_size(uint64_t b, char *buf, size_t n)
{
    if (b >= (1ull << 30))
        snprintf(buf, n, "%.1f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, n, "%.1f MiB", (double)b / (double)(1ull << 20));
    else
        snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    return buf;
}

/* The pageable-copy line, when at least 10% of H2D/D2H bytes used pageable
 * host memory: what trainshim's pinned copy engine converted and what it
 * did not (below TRAINSHIM_PINNED_COPY_MIN; above it: during capture, staging
 * exhausted or unallocatable, other side not device memory), or that the
 * engine was off.  Returns 1 if it wrote the line. */
static int copy_advice(const struct acct_copy_facts *cp, char *line)
{
    uint64_t pg = cp->h2d_pageable + cp->d2h_pageable, all = cp->h2d_bytes + cp->d2h_bytes;
    if (!pg || !all || (double)pg < 0.10 * (double)all)
        return 0;
    char a[24], b[24], c[24], d[24], e[24], f[24];
    double share = 100.0 * (double)pg / (double)all;
    if (!cp->engine_known && !cp->converted_calls) { /* a log without the engine's configuration */
        snprintf(line, 256,
                 "%.1f%% of host<->device copy bytes (%llu of %llu) used pageable host memory: pin the host "
                 "buffers (e.g. DataLoader pin_memory=True) so copies run asynchronously",
                 share, (unsigned long long)pg, (unsigned long long)all);
        return 1;
    }
    if (!cp->converted_calls && cp->engine_known && !cp->engine_on) {
        snprintf(
            line, 256,
            "%.1f%% of H2D/D2H copy bytes (%s of %s) used pageable host memory and TRAINSHIM_PINNED_COPY "
            "was off: turn it on, or pin the host buffers (e.g. DataLoader pin_memory=True)",
            share, short_size(pg, a, sizeof a), short_size(all, b, sizeof b));
        return 1;
    }
    uint64_t conv = cp->converted_bytes < pg ? cp->converted_bytes : pg;
    uint64_t left = pg - conv, small = cp->small_bytes < left ? cp->small_bytes : left, other = left - small;
    if (!left) {
        snprintf(line, 256,
                 "%.1f%% of H2D/D2H copy bytes (%s of %s) used pageable host memory; trainshim converted all "
                 "of it "
                 "(%llu calls, host blocked %.1f ms): pinned buffers (pin_memory=True) would skip its "
                 "staging copy",
                 share, short_size(pg, a, sizeof a), short_size(all, b, sizeof b),
                 (unsigned long long)cp->converted_calls, (double)cp->converted_blocked_ns / 1e6);
        return 1;
    }
    if ((double)left < 0.01 * (double)pg) { /* a few tiny copies left: not worth a "pin those" */
        snprintf(
            line, 256,
            "%.1f%% of H2D/D2H copy bytes (%s of %s) used pageable host memory; trainshim converted %s of it "
            "(%llu calls, host blocked %.1f ms; %s in small copies left): pinned buffers (pin_memory=True) "
            "would skip its staging copy",
            share, short_size(pg, a, sizeof a), short_size(all, b, sizeof b), short_size(conv, c, sizeof c),
            (unsigned long long)cp->converted_calls, (double)cp->converted_blocked_ns / 1e6,
            short_size(left, d, sizeof d));
        return 1;
    }
    snprintf(
        line, 256,
        "pageable host memory: %s of %s H2D/D2H bytes; trainshim converted %s (%llu calls); not converted: "
        "%s in %llu copies below TRAINSHIM_PINNED_COPY_MIN=%s, %s above it (capture/fallback): pin those",
        short_size(pg, a, sizeof a), short_size(all, b, sizeof b), short_size(conv, c, sizeof c),
        (unsigned long long)cp->converted_calls, short_size(small, d, sizeof d),
        (unsigned long long)cp->small_calls, short_size(cp->engine_min, e, sizeof e),
        short_size(other, f, sizeof f));
    return 1;
}

int acct_advice(const struct acct_compute *c, const struct acct_comm *m, const struct acct_copy_facts *cp,
                uint64_t run_ns, char lines[][256])
{
    return acct_advice_rules(c, m, cp, run_ns, lines, NULL);
}

int acct_advice_rules(const struct acct_compute *c, const struct acct_comm *m,
                      const struct acct_copy_facts *cp, uint64_t run_ns, char lines[][256],
                      const char **rules)
{
    const char *ids[ACCT_MAX_ADVICE];
    if (!rules)
        rules = ids;
    int n = 0;
    if (c && c->gemm_flops && c->mis_flops && (double)c->mis_flops >= 0.01 * (double)c->gemm_flops) {
        const struct acct_shape *top = NULL;
        for (size_t i = 0; i < c->n_shapes && !top; i++)
            if (c->shapes[i].misaligned)
                top = &c->shapes[i];
        char share_t[48] = "";
        if (c->timed_ns)
            snprintf(share_t, sizeof share_t, ", %.1f%% of timed GEMM GPU time",
                     100.0 * (double)c->mis_timed_ns / (double)c->timed_ns);
        if (top) {
            char dims[96] = "";
            size_t o = 0;
            const int64_t d[3] = { top->m, top->n, top->k };
            for (int i = 0; i < 3 && o < sizeof dims; i++)
                if (d[i] % top->align)
                    o += (size_t)snprintf(dims + o, sizeof dims - o, "%s%c %lld->%lld", o ? ", " : "",
                                          "mnk"[i], (long long)d[i],
                                          (long long)(d[i] > 0 && d[i] < (INT64_MAX >> 1)
                                                          ? (d[i] + top->align - 1) / top->align * top->align
                                                          : d[i]));
            rules[n] = "gemm_alignment";
            snprintf(lines[n++], 256,
                     "%.1f%% of GEMM FLOPs%s run on shapes not a multiple of %u for %s tensor cores; "
                     "largest: %lldx%lldx%lld, pad %s",
                     100.0 * (double)c->mis_flops / (double)c->gemm_flops, share_t, top->align,
                     ts_prec_name(top->prec), (long long)top->m, (long long)top->n, (long long)top->k, dims);
        }
    }
    if (m && m->est_ns && run_ns && (double)m->est_ns >= 0.05 * (double)run_ns) {
        int top = -1;
        for (int op = 0; op < TS_NCCL_OP_COUNT; op++)
            if (m->ops[op].timed_calls && (top < 0 || m->ops[op].timed_ns > m->ops[top].timed_ns))
                top = op;
        if (top >= 0 && n < ACCT_MAX_ADVICE && (rules[n] = "collectives"))
            snprintf(
                lines[n++], 256,
                "collectives took an estimated %.1f%% of the run (%.3f ms); %s dominates at %.2f GB/s busbw: "
                "overlap it with compute or use larger buckets",
                100.0 * (double)m->est_ns / (double)run_ns, (double)m->est_ns / 1e6, ts_nccl_op_name(top),
                op_busbw(&m->ops[top]));
    }
    if (cp && n < ACCT_MAX_ADVICE && (rules[n] = "pageable_copies"))
        n += copy_advice(cp, lines[n]);
    if (c && n < ACCT_MAX_ADVICE) {
        double mfu = acct_steady_mfu(c);
        if (!isnan(mfu) && mfu < 0.3 && (rules[n] = "low_mfu"))
            snprintf(lines[n++], 256,
                     "steady-state GEMM MFU is %.1f%% of peak (%.40s): most of each step is spent outside "
                     "cuBLAS GEMMs (input pipeline, small kernels, synchronization)",
                     100.0 * mfu, c->peak_source);
    }
    return n;
}

/* ---- one log, everything ---------------------------------------------------------- */
int acct_log_analyze(const struct tslog *log, struct acct_log *a)
{
    memset(a, 0, sizeof *a);
    a->has_gemm = log->n_gemms > 0;
    if (acct_compute_analyze(log, getenv("TRAINSHIM_PEAK_TFLOPS"), &a->c) || acct_comm_analyze(log, &a->m)) {
        acct_log_free(a);
        return -1;
    }
    a->has_nccl = log->n_nccls > 0 || log->n_comms > 0 || a->m.mem_allocs;
    return 0;
}

void acct_log_free(struct acct_log *a)
{
    acct_compute_free(&a->c);
    acct_comm_free(&a->m);
}

/* Every ADVICE line of one log: the accounting's own, then the GPU's, the
 * rule table's (NUMA placement among them); figs[i]: the rule table's line
 * behind lines[i], or NULL. */
static int log_advice(const struct acct_log *a, const struct acct_copy_facts *cp, uint64_t run_ns,
                      char lines[][256], const char **rules, const struct advice_line **figs)
{
    int n =
        acct_advice_rules(a->has_gemm ? &a->c : NULL, a->has_nccl ? &a->m : NULL, cp, run_ns, lines, rules);
    if (a->gpu_advice[0] && n < ACCT_MAX_ADVICE && (rules[n] = "gpu_idle"))
        snprintf(lines[n++], 256, "%s", a->gpu_advice);
    if (a->torch_advice[0] && n < ACCT_MAX_ADVICE && (rules[n] = "torch_backend"))
        snprintf(lines[n++], 256, "%s", a->torch_advice);
    for (int i = 0; i < n; i++)
        figs[i] = NULL;
    for (int i = 0; i < a->rules.n && n < ACCT_MAX_ADVICE; i++) {
        figs[n] = &a->rules.line[i];
        rules[n] = a->rules.line[i].rule;
        lines[n++][0] = 0; /* the text is the rule's own (longer than 256) */
    }
    return n;
}

void acct_log_text(FILE *f, const struct acct_log *a)
{
    if (a->has_gemm)
        acct_compute_text(f, &a->c);
    if (a->has_nccl)
        acct_comm_text(f, &a->m);
}

void acct_advice_text(FILE *f, const struct acct_log *a, const struct acct_copy_facts *cp, uint64_t run_ns)
{
    char lines[ACCT_MAX_ADVICE][256];
    const char *rules[ACCT_MAX_ADVICE];
    const struct advice_line *figs[ACCT_MAX_ADVICE];
    int n = log_advice(a, cp, run_ns, lines, rules, figs);
    if (n)
        fprintf(f, "\n== ADVICE ==\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "- %s\n", figs[i] ? figs[i]->text : lines[i]);
}

void acct_log_json(const struct acct_json *j, const struct acct_log *a, const struct acct_copy_facts *cp,
                   uint64_t run_ns)
{
    char lines[ACCT_MAX_ADVICE][256];
    if (a->has_gemm)
        acct_compute_json(j, &a->c);
    if (a->has_nccl)
        acct_comm_json(j, &a->m);
    const char *rules[ACCT_MAX_ADVICE];
    const struct advice_line *figs[ACCT_MAX_ADVICE];
    int n = log_advice(a, cp, run_ns, lines, rules, figs);
    if (!n)
        return;
    j->open(j->ctx, "advice", '[');
    for (int i = 0; i < n; i++) {
        j->open(j->ctx, NULL, '{');
        j->str(j->ctx, "rule", rules[i]);
        j->str(j->ctx, "text", figs[i] ? figs[i]->text : lines[i]);
        j->open(j->ctx, "figures", '{');
        for (int k = 0; figs[i] && k < figs[i]->n_figures; k++)
            j->num(j->ctx, figs[i]->fig[k].name, figs[i]->fig[k].value);
        j->close(j->ctx, '}');
        if (figs[i])
            advice_sites_json(j, figs[i]);
        j->close(j->ctx, '}');
    }
    j->close(j->ctx, ']');
}

static bool any_accounting(const struct acct_log *a, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].has_gemm || a[i].has_nccl)
            return true;
    return false;
}

/* The per-rank helpers take arrays of summaries. */
static int split_summaries(const struct acct_log *a, int n, struct acct_compute **cs, struct acct_comm **ms)
{
    *cs = calloc((size_t)n, sizeof **cs);
    *ms = calloc((size_t)n, sizeof **ms);
    if (!*cs || !*ms) {
        free(*cs);
        free(*ms);
        return -1;
    }
    for (int i = 0; i < n; i++)
        (*cs)[i] = a[i].c, (*ms)[i] = a[i].m; /* shallow: the arrays stay owned by a[] */
    return 0;
}

/* The ranks' table as text (f) or JSON (j). */
static void logs_out(FILE *f, const struct acct_json *j, const struct tslog *logs, const struct acct_log *a,
                     int n)
{
    struct acct_compute *cs;
    struct acct_comm *ms;
    if (!any_accounting(a, n) || split_summaries(a, n, &cs, &ms))
        return;
    if (f)
        acct_ranks_text(f, logs, cs, ms, n);
    else
        acct_ranks_json(j, logs, cs, ms, n);
    free(cs);
    free(ms);
}

void acct_logs_text(FILE *f, const struct tslog *logs, const struct acct_log *a, int n)
{
    logs_out(f, NULL, logs, a, n);
}

void acct_logs_json(const struct acct_json *j, const struct tslog *logs, const struct acct_log *a, int n)
{
    logs_out(NULL, j, logs, a, n);
}
