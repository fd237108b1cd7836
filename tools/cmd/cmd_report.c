/* cmd_report.c: `trainshim report [--format text|json] LOG...`.
 *
 * Prints what tools/report/report_stats.c derives from each log's records, the
 * accounting (report_compute.c, report_comm.c), call sites (report_sites.c)
 * and GPU timeline (report_gpu.c), as text or JSON (report_json.c).  Text
 * output is stable (golden-tested); JSON output is a contract
 * (docs/log-format.md). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc.h"
#include "cmd/cmds.h"
#include "html/html_report.h"
#include "core/core.h"
#include "read/logread.h"
#include "report/report_acct.h"
#include "report/report_capped.h"
#include "report/report_gpu.h"
#include "report/report_json.h"
#include "report/report_numa.h"
#include "report/report_offload.h"
#include "report/report_sites.h"
#include "report/report_stats.h"

/* ------------------------------------------------------------ formatting */
static const char *const dir_names[DIRS] = { "unknown", "H2D", "D2H", "D2D", "H2H", "peer", "default" };
static const char *const dir_keys[DIRS] = { "unknown", "h2d", "d2h", "d2d", "h2h", "peer", "default" };

static void print_sanitized(FILE *f, const char *s)
{
    for (; *s; s++)
        fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

static uint64_t duration_ns(const struct tslog *log)
{
    uint64_t end = log->complete ? log->end_time_ns : log->last_time_ns;
    return end > log->start_mono_ns ? end - log->start_mono_ns : 0;
}

static const char *status_text(const struct tslog *log)
{
    if (log->truncated)
        return "truncated";
    return log->complete ? "complete" : "incomplete";
}

/* How PyTorch's allocator backend was found and left at load time. */
static const char *torch_backend_text(uint32_t c)
{
    switch (c) {
    case TS_TORCH_BACKEND_ADDED:
        return "cudaMallocAsync, added by trainshim (the default): every tensor served by trainshim; torch "
               "refuses its memory history and snapshots under it (TRAINSHIM_TORCH_BACKEND=off keeps torch's "
               "own allocator)";
    case TS_TORCH_BACKEND_ASYNC: return "cudaMallocAsync, the user's: every tensor served by trainshim";
    case TS_TORCH_BACKEND_NATIVE:
        return "native, the user's: torch caches tensors in segments trainshim backs";
    case TS_TORCH_BACKEND_EXPANDABLE:
        return "native expandable_segments, the user's: torch maps its own pages";
    case TS_TORCH_BACKEND_NO_CACHING:
        return "native without caching (PYTORCH_NO_CUDA_MEMORY_CACHING), the user's";
    case TS_TORCH_BACKEND_OFF: return "left alone (TRAINSHIM_TORCH_BACKEND=off)";
    case TS_TORCH_BACKEND_DISTRIBUTED:
        return "left alone for torch.distributed (a distributed launch, a multiprocessing worker or a script "
               "that creates a process group: torch's NCCL process group aborts at teardown under "
               "cudaMallocAsync)";
    case TS_TORCH_BACKEND_HISTORY:
        return "left alone: the script calls torch's memory history or snapshots, which torch refuses under "
               "cudaMallocAsync";
    case TS_TORCH_BACKEND_IPC:
        return "left alone: the script uses torch.multiprocessing, and torch refuses to share CUDA tensors "
               "between processes under cudaMallocAsync";
    case TS_TORCH_BACKEND_GRAPH_TREES:
        return "left alone: the script compiles with CUDA graphs (torch.compile "
               "reduce-overhead, max-autotune or cudagraphs), whose graph trees torch refuses under "
               "cudaMallocAsync";
    case TS_TORCH_BACKEND_MEMPOOL:
        return "left alone: the script uses torch.cuda.MemPool, which torch refuses under cudaMallocAsync";
    default: return "unknown";
    }
}

static void torch_backend_advice(const struct tslog *log, char *out, size_t n)
{
    out[0] = 0;
    uint32_t c = log->torch_backend_case;
    if (c == TS_TORCH_BACKEND_NATIVE || c == TS_TORCH_BACKEND_EXPANDABLE)
        snprintf(
            out, n,
            "torch's own allocator (%s) keeps tensors in its segments: trainshim cannot reuse, defragment "
            "or report them per tensor; drop that setting to let it serve each tensor",
            c == TS_TORCH_BACKEND_NATIVE ? "backend:native" : "expandable_segments:True");
    else if (c == TS_TORCH_BACKEND_HISTORY)
        snprintf(out, n,
                 "torch's own allocator (kept: the script calls torch's memory history or snapshots, refused "
                 "under cudaMallocAsync) keeps tensors out of trainshim's reach; `trainshim export --type "
                 "memory-snapshot` draws the memory_viz picture from trainshim's log");
    else if (c == TS_TORCH_BACKEND_IPC || c == TS_TORCH_BACKEND_GRAPH_TREES || c == TS_TORCH_BACKEND_MEMPOOL)
        snprintf(
            out, n,
            "torch's own allocator (kept: the script %s, refused under cudaMallocAsync) keeps tensors out "
            "of trainshim's reach; where the script does not need it, "
            "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync lets trainshim serve each tensor",
            c == TS_TORCH_BACKEND_IPC           ? "uses torch.multiprocessing"
            : c == TS_TORCH_BACKEND_GRAPH_TREES ? "compiles with CUDA graphs"
                                                : "uses torch.cuda.MemPool");
}

static void text_run(FILE *f, const struct tslog *log)
{
    char b[64];
    fprintf(f, "== RUN ==\nlog           ");
    print_sanitized(f, log->file);
    fprintf(f, "\npid           %d\ncommand       ", log->pid);
    print_sanitized(f, log->command ? log->command : "");
    fprintf(f, "\nhost          ");
    print_sanitized(f, log->host ? log->host : "");
    snprintf(b, sizeof b, "%d", log->rank);
    fprintf(f, "\nrank          %s", log->rank >= 0 ? b : "-");
    if (log->local_rank >= 0)
        fprintf(f, " (local %d)", log->local_rank);
    if (log->world_size >= 0)
        fprintf(f, " of %d", log->world_size);
    fprintf(f, "\nduration      %.3f s\nstatus        %s", (double)duration_ns(log) / 1e9, status_text(log));
    if (log->note[0])
        fprintf(f, " (%s)", log->note);
    fprintf(f, "\nrecords       %llu\n", (unsigned long long)log->n_records);
    struct capped_log cl;
    if (!capped_load(log, &cl)) {
        capped_text(f, &cl);
        capped_free(&cl);
    }
    if (log->end_records_dropped)
        fprintf(f,
                "dropped       %llu events not logged (log buffers exhausted or a failed write, e.g. a full "
                "disk)\n",
                (unsigned long long)log->end_records_dropped);
    if (log->torch_backend_case) {
        fprintf(f, "torch alloc   %s (", torch_backend_text(log->torch_backend_case));
        print_sanitized(f,
                        log->torch_alloc_conf[0] ? log->torch_alloc_conf : "PYTORCH_CUDA_ALLOC_CONF unset");
        fprintf(f, ")\n");
    }
    for (size_t i = 0; i < log->n_devices; i++) {
        const struct tslog_device *d = &log->devices[i];
        fprintf(f, "device %-6d ", d->ordinal);
        print_sanitized(f, d->name);
        fprintf(f, ", %s, cc %d.%d, %d SMs, ", tslog_human_bytes(d->total_mem, b, sizeof b), d->cc_major,
                d->cc_minor, d->sm_count);
        print_sanitized(f, d->pci_bus_id);
        fputc('\n', f);
    }
    numa_report_text(f, log); /* the GPU's NUMA node and the process's CPUs */
}

/* Peak reserved: the pools' own when they logged it, else the peak of the
 * logged allocations (all a run without pools can tell).  Never below peak
 * allocated: device memory allocated outside the pools (before they existed,
 * or through APIs they do not serve) was reserved too, by CUDA itself. */
static uint64_t peak_reserved(const struct stats *s)
{
    return s->pool_records && s->pool_peak_reserved > s->peak_alloc ? s->pool_peak_reserved : s->peak_alloc;
}

/* 1 - allocated/reserved at the reserved peak */
static double pool_fragmentation(const struct stats *s)
{
    if (!s->pool_peak_reserved || s->pool_alloc_at_peak >= s->pool_peak_reserved)
        return 0.0;
    return 1.0 - (double)s->pool_alloc_at_peak / (double)s->pool_peak_reserved;
}

static void text_counts(FILE *f, const struct err_count *list, size_t n, const struct tslog *names)
{
    for (size_t i = 0; i < n; i++) {
        char nb[32];
        const char *name = list[i].name;
        if (!name || !*name)
            name = names ? tslog_api_name(names, list[i].api, nb, sizeof nb)
                         : (snprintf(nb, sizeof nb, "api#%d", list[i].api), nb);
        fprintf(f, "%-32s %8d %10llu\n", name, list[i].code, (unsigned long long)list[i].count);
    }
}

/* ERRORS, then the statuses (not ready, in progress) that are not errors. */
static void text_errors(FILE *f, const struct stats *s, const struct tslog *names)
{
    fprintf(f, "\n== ERRORS ==\n");
    if (!s->n_errs)
        fprintf(f, "none\n");
    else
        fprintf(f, "%-32s %8s %10s\n", "api", "code", "count");
    text_counts(f, s->errs, s->n_errs, names);
    if (s->n_statuses) {
        fprintf(f, "statuses, not errors (not ready / in progress):\n");
        text_counts(f, s->statuses, s->n_statuses, names);
    }
}

/* COPIES: by direction, the pageable share, and where the time went. */
static void text_copies(FILE *f, const struct stats *s, const struct tslog *names)
{
    char b1[32], b2[32];
    fprintf(f, "\n== COPIES ==\n");
    fprintf(f, "%-10s %10s %22s %22s\n", "direction", "calls", "bytes", "pageable");
    for (int d = 0; d < DIRS; d++) {
        if (!s->copy_calls[d])
            continue;
        char pg[40] = "-";
        uint64_t p = d == TS_H2D ? s->h2d_pageable : d == TS_D2H ? s->d2h_pageable : 0;
        if (d == TS_H2D || d == TS_D2H)
            snprintf(pg, sizeof pg, "%s (%.1f%%)", tslog_human_bytes(p, b2, sizeof b2),
                     s->copy_bytes[d] ? 100.0 * (double)p / (double)s->copy_bytes[d] : 0.0);
        fprintf(f, "%-10s %10llu %22s %22s\n", dir_names[d], (unsigned long long)s->copy_calls[d],
                tslog_human_bytes(s->copy_bytes[d], b1, sizeof b1), pg);
    }
    fprintf(f, "failed copies       %llu\n", (unsigned long long)s->copy_failed);
    fprintf(f,
            "host time in copies %.3f ms (in the copy calls, summed over threads: includes waits for earlier "
            "stream work)\n",
            (double)s->copy_ns / 1e6);
    uint64_t gpu_ns, gpu_n;
    if (names && gpu_copy_time(names, &gpu_ns, &gpu_n))
        fprintf(
            f,
            "GPU time in copies  %.3f ms (%llu transfers, CUPTI: the transfers alone, without the waits)\n",
            (double)gpu_ns / 1e6, (unsigned long long)gpu_n);
    if (s->converted_calls) {
        fprintf(f, "converted to pinned %s in %llu calls (host blocked %.3f ms, staging wait %.3f ms)\n",
                tslog_human_bytes(s->converted_bytes, b1, sizeof b1), (unsigned long long)s->converted_calls,
                (double)s->converted_blocked_ns / 1e6, (double)s->staging_wait_ns / 1e6);
    }
}

/* Devices whose pools logged figures (one log's stats only: ranks' totals
 * have no device of their own). */
static int pool_devices(const struct stats *s)
{
    int n = 0;
    for (int d = 0; s->log && d < TSLOG_POOL_DEVS; d++)
        n += s->log->pool_dev[d].seen;
    return n;
}

/* One line per device when the pools span several (the figures above are
 * the whole process's): its peak allocated and its pool's peak reserved. */
static void text_pool_devices(FILE *f, const struct stats *s)
{
    char b1[32], b2[32];
    if (pool_devices(s) < 2)
        return;
    for (int d = 0; d < TSLOG_POOL_DEVS; d++) {
        const struct tslog_pool_dev *p = &s->log->pool_dev[d];
        if (p->seen)
            fprintf(f, "  device %-11d peak allocated %s, trainshim's pool reserved %s at its peak\n", d,
                    tslog_human_bytes(s->dev_peak_alloc[d], b1, sizeof b1),
                    tslog_human_bytes(p->peak_reserved, b2, sizeof b2));
    }
}

/* The expandable pools' step plans, when the records carry them: whether
 * one formed and is in force, how many allocations found their planned
 * address, and the driver calls since it settled (0 in a steady state). */
static void text_plan(FILE *f, const struct tslog_pool_plan *pl)
{
    if (!pl->records)
        return;
    if (pl->off == pl->records) {
        fprintf(f, "step plan           off (TRAINSHIM_ALLOC_STEP_PLAN=0)\n");
        return;
    }
    if (!pl->adopted) {
        fprintf(f, "step plan           none formed (no sequence of allocations over 2 MiB repeated)\n");
        return;
    }
    uint64_t placed = pl->hits + pl->misses;
    fprintf(f, "step plan           period %llu allocations, %.1f%% of %llu at their planned address; ",
            (unsigned long long)pl->period, placed ? 100.0 * (double)pl->hits / (double)placed : 0.0,
            (unsigned long long)placed);
    if (pl->settled)
        fprintf(f, "settled, %llu driver calls since\n", (unsigned long long)pl->calls_since_settled);
    else if (pl->settling)
        fprintf(f, "still settling at the end\n");
    else
        fprintf(f, "not in force at the end\n");
}

static void text_stats(FILE *f, const struct stats *s, const struct tslog *names)
{
    char b1[32], b2[32];
    fprintf(f, "\n== DEVICE MEMORY ==\n");
    fprintf(f, "peak allocated      %s (%llu B)\n", tslog_human_bytes(s->peak_alloc, b1, sizeof b1),
            (unsigned long long)s->peak_alloc);
    fprintf(f, "peak reserved       %s (%llu B)", tslog_human_bytes(peak_reserved(s), b1, sizeof b1),
            (unsigned long long)peak_reserved(s));
    if (s->pool_records && s->pool_peak_reserved < s->peak_alloc)
        fprintf(f, " at least: trainshim's pool reserved %s at its peak; the rest was allocated outside it",
                tslog_human_bytes(s->pool_peak_reserved, b2, sizeof b2));
    fputc('\n', f);
    text_pool_devices(f, s);
    if (s->pool_records) {
        fprintf(f, "allocator           %s\n", ts_alloc_mode_name(s->pool_mode));
        fprintf(f, "fragmentation       %.4f (1 - allocated/reserved at the reserved peak)\n",
                pool_fragmentation(s));
        fprintf(f, "driver calls        %llu (memory: VMM and segments)\n",
                (unsigned long long)s->pool_driver_calls);
        fprintf(f, "fence checks        %llu (driver calls that tell when freed memory is idle)\n",
                (unsigned long long)s->pool_fence_calls);
        fprintf(f, "cache hits          %llu\n", (unsigned long long)s->pool_cache_hits);
        fprintf(f, "OOMs                %llu\n", (unsigned long long)s->pool_ooms);
        if (s->pool_mode == TS_ALLOC_EXPANDABLE)
            text_plan(f, &s->pool_plan);
    }
    fprintf(f, "allocations         %llu (%llu failed), %s requested\n", (unsigned long long)s->alloc_calls,
            (unsigned long long)s->alloc_failed, tslog_human_bytes(s->alloc_requested, b1, sizeof b1));
    fprintf(f, "frees               %llu (%llu failed, %llu of unknown pointers)\n",
            (unsigned long long)s->free_calls, (unsigned long long)s->free_failed,
            (unsigned long long)s->free_unknown);
    fprintf(f, "live at end         %llu blocks, %s\n", (unsigned long long)s->live_blocks,
            tslog_human_bytes(s->live_bytes, b1, sizeof b1));
    if (s->host_alloc_calls)
        fprintf(f, "pinned host         %llu allocations, %s, %llu frees (host memory: not counted above)\n",
                (unsigned long long)s->host_alloc_calls,
                tslog_human_bytes(s->host_alloc_bytes, b1, sizeof b1),
                (unsigned long long)s->host_free_calls);
    fprintf(f, "allocation sizes\n");
    for (int i = 0; i < HIST_BUCKETS; i++) {
        if (!s->hist[i])
            continue;
        if (i == 0)
            fprintf(f, "  %-24s %10llu\n", "0 B", (unsigned long long)s->hist[i]);
        else {
            char r[80];
            tslog_human_bytes(1ull << (i - 1), b1, sizeof b1);
            if (i < 64)
                tslog_human_bytes(1ull << i, b2, sizeof b2);
            else
                snprintf(b2, sizeof b2, "16.00 EiB");
            snprintf(r, sizeof r, "[%s, %s)", b1, b2);
            fprintf(f, "  %-24s %10llu\n", r, (unsigned long long)s->hist[i]);
        }
    }

    text_copies(f, s, names);
    text_errors(f, s, names);
}

static void text_rank_table(FILE *f, struct tslog *logs, const struct stats *st, int n)
{
    char b1[32], b2[32], b3[32];
    fprintf(f, "== RANKS ==\n");
    fprintf(f, "%-5s %8s %-10s %-10s %10s %14s %8s %8s %14s %14s %6s\n", "rank", "pid", "host", "status",
            "duration", "peak alloc", "allocs", "frees", "H2D", "D2H", "errors");
    for (int i = 0; i < n; i++) {
        char rank[16], host[11];
        if (logs[i].rank >= 0)
            snprintf(rank, sizeof rank, "%d", logs[i].rank);
        else
            snprintf(rank, sizeof rank, "-");
        snprintf(host, sizeof host, "%s", logs[i].host ? logs[i].host : "");
        for (char *c = host; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
        fprintf(f, "%-5s %8d %-10s %-10s %9.3fs %14s %8llu %8llu %14s %14s %6llu\n", rank, logs[i].pid, host,
                status_text(&logs[i]), (double)duration_ns(&logs[i]) / 1e9,
                tslog_human_bytes(st[i].peak_alloc, b1, sizeof b1), (unsigned long long)st[i].alloc_calls,
                (unsigned long long)st[i].free_calls,
                tslog_human_bytes(st[i].copy_bytes[TS_H2D], b2, sizeof b2),
                tslog_human_bytes(st[i].copy_bytes[TS_D2H], b3, sizeof b3),
                (unsigned long long)st[i].error_records);
    }
    for (int i = 0; i < n; i++)
        if (logs[i].note[0]) {
            fprintf(f, "note: ");
            print_sanitized(f, logs[i].file);
            fprintf(f, ": %s\n", logs[i].note);
        }
}

/* A TRAINSHIM_* value of the run's configuration (log header: NAME=value
 * lines, sizes in bytes, booleans 0/1), as a number; false if absent. */
static bool run_option(const struct tslog *log, const char *name, uint64_t *out)
{
    char v[32], *end;
    if (!log || !tslog_config_value(log, name, v, sizeof v))
        return false;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v)
        return false;
    *out = x;
    return true;
}

/* The COPIES figures plus what the pinned copy engine did: its records'
 * totals, the run's TRAINSHIM_PINNED_COPY[_MIN], and the pageable H2D/D2H
 * copies too small for it (from this log's copy records). */
static struct acct_copy_facts acct_copy_facts_of(const struct stats *s)
{
    struct acct_copy_facts f = { .h2d_bytes = s->copy_bytes[TS_H2D],
                                 .h2d_pageable = s->h2d_pageable,
                                 .d2h_bytes = s->copy_bytes[TS_D2H],
                                 .d2h_pageable = s->d2h_pageable,
                                 .copy_ns = s->copy_ns };
    f.converted_bytes = s->converted_bytes;
    f.converted_calls = s->converted_calls;
    f.converted_blocked_ns = s->converted_blocked_ns;
    uint64_t on = 0;
    f.engine_known = run_option(s->log, "TRAINSHIM_PINNED_COPY", &on)
                     && run_option(s->log, "TRAINSHIM_PINNED_COPY_MIN", &f.engine_min);
    f.engine_on = f.engine_known && on;
    for (size_t i = 0; f.engine_known && i < s->log->n_events; i++) {
        const struct tslog_event *e = &s->log->events[i];
        if (e->type == TS_REC_COPY && !e->result && e->host_kind == TS_HOST_PAGEABLE
            && (e->dir == TS_H2D || e->dir == TS_D2H) && e->bytes < f.engine_min) {
            f.small_bytes += e->bytes;
            f.small_calls++;
        }
    }
    return f;
}

static void json_run(struct json *j, const struct tslog *log)
{
    j_open(j, "run", '{');
    j_str(j, "log", log->file);
    j_i64(j, "pid", log->pid);
    j_key(j, "command");
    j_raw_string(j, log->command ? log->command : "", log->cmdline_len);
    j_open(j, "argv", '[');
    for (size_t i = 0; log->cmdline && i < log->cmdline_len;) {
        size_t l = strnlen(log->cmdline + i, log->cmdline_len - i);
        j_sep(j);
        j_raw_string(j, log->cmdline + i, l);
        i += l + 1;
    }
    j_close(j, ']');
    j_str(j, "host", log->host ? log->host : "");
    j_rank(j, "rank", log->rank);
    j_rank(j, "local_rank", log->local_rank);
    j_rank(j, "world_size", log->world_size);
    j_u64(j, "start_unix_ns", log->start_realtime_ns);
    j_u64(j, "duration_ns", duration_ns(log));
    j_str(j, "status", status_text(log));
    j_bool(j, "complete", log->complete);
    j_bool(j, "truncated", log->truncated);
    j_key(j, "stopped_at_offset");
    if (log->truncated)
        fprintf(j->f, "%llu", (unsigned long long)log->stop_offset);
    else
        fputs("null", j->f);
    j_str(j, "note", log->note[0] ? log->note : NULL);
    j_u64(j, "records", log->n_records);
    j_u64(j, "records_dropped", log->end_records_dropped);
    struct capped_log cl;
    bool capped = !capped_load(log, &cl) && cl.capped;
    j_u64(j, "log_cap_bytes", capped ? cl.summary.cap_bytes : 0);
    j_u64(j, "records_aggregated", capped ? cl.summary.records_folded : 0);
    capped_free(&cl);
    j_u64(j, "unknown_records", log->n_unknown);
    j_key(j, "format_version");
    fprintf(j->f, "\"%u.%u\"", log->version_major, log->version_minor);
    j_close(j, '}');
    j_devices(j, log);
}

static void json_size_histogram(struct json *j, const struct stats *s)
{
    j_open(j, "size_histogram", '[');
    for (int i = 0; i < HIST_BUCKETS; i++) {
        if (!s->hist[i])
            continue;
        j_open(j, NULL, '{');
        j_u64(j, "min_bytes", i ? 1ull << (i - 1) : 0);
        j_key(j, "max_bytes_exclusive");
        if (i == 0)
            fputs("1", j->f);
        else if (i < 64)
            fprintf(j->f, "%llu", 1ull << i);
        else
            fputs("18446744073709551616", j->f);
        j_u64(j, "count", s->hist[i]);
        j_close(j, '}');
    }
    j_close(j, ']');
}

static void json_plan(struct json *j, const struct tslog_pool_plan *pl)
{
    if (!pl->records)
        return;
    j_open(j, "step_plan", '{');
    j_bool(j, "enabled", pl->off < pl->records);
    j_u64(j, "adopted", pl->adopted);
    j_u64(j, "period", pl->period);
    j_u64(j, "planned_hits", pl->hits);
    j_u64(j, "planned_misses", pl->misses);
    j_u64(j, "pools_settled", pl->settled);
    j_u64(j, "pools_settling", pl->settling);
    j_u64(j, "driver_calls_since_settled", pl->calls_since_settled);
    j_close(j, '}');
}

static void json_memory(struct json *j, const struct stats *s, uint64_t max_rank_peak, bool total)
{
    j_open(j, "memory", '{');
    j_u64(j, "peak_allocated_bytes", s->peak_alloc);
    j_u64(j, "peak_reserved_bytes", peak_reserved(s));
    if (s->pool_records) {
        j_u64(j, "pool_peak_reserved_bytes", s->pool_peak_reserved);
        j_str(j, "allocator_mode", ts_alloc_mode_name(s->pool_mode));
        j_num(j, "fragmentation", pool_fragmentation(s));
        j_u64(j, "driver_calls", s->pool_driver_calls);
        j_u64(j, "fence_calls", s->pool_fence_calls);
        j_u64(j, "cache_hits", s->pool_cache_hits);
        j_u64(j, "ooms", s->pool_ooms);
        json_plan(j, &s->pool_plan);
        if (pool_devices(s) >= 2) {
            j_open(j, "pool_devices", '[');
            for (int d = 0; d < TSLOG_POOL_DEVS; d++) {
                const struct tslog_pool_dev *p = &s->log->pool_dev[d];
                if (!p->seen)
                    continue;
                j_open(j, NULL, '{');
                j_u64(j, "device", (uint64_t)d);
                j_u64(j, "peak_allocated_bytes", s->dev_peak_alloc[d]);
                j_u64(j, "pool_peak_reserved_bytes", p->peak_reserved);
                j_close(j, '}');
            }
            j_close(j, ']');
        }
    }
    if (total)
        j_u64(j, "max_rank_peak_allocated_bytes", max_rank_peak);
    static const struct {
        const char *key;
        size_t offset;
    } counts[] = {
        { "alloc_calls", offsetof(struct stats, alloc_calls) },
        { "alloc_failed", offsetof(struct stats, alloc_failed) },
        { "alloc_requested_bytes", offsetof(struct stats, alloc_requested) },
        { "free_calls", offsetof(struct stats, free_calls) },
        { "free_failed", offsetof(struct stats, free_failed) },
        { "free_unknown_pointer", offsetof(struct stats, free_unknown) },
        { "live_at_end_blocks", offsetof(struct stats, live_blocks) },
        { "live_at_end_bytes", offsetof(struct stats, live_bytes) },
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        uint64_t v;
        memcpy(&v, (const char *)s + counts[i].offset, sizeof v);
        j_u64(j, counts[i].key, v);
    }
    if (s->host_alloc_calls) {
        j_u64(j, "pinned_host_alloc_calls", s->host_alloc_calls);
        j_u64(j, "pinned_host_alloc_bytes", s->host_alloc_bytes);
        j_u64(j, "pinned_host_free_calls", s->host_free_calls);
    }
    json_size_histogram(j, s);
    if (s->log) {
        struct acct_json aj = acct_json_of(j);
        sites_json(&aj, s->log); /* memory.top_sites when the run recorded stacks */
    }
    j_close(j, '}');
}

static void json_copies(struct json *j, const struct stats *s)
{
    j_open(j, "copies", '{');
    for (int d = 1; d < DIRS; d++) {
        char k[32];
        snprintf(k, sizeof k, "%s_bytes", dir_keys[d]);
        j_u64(j, k, s->copy_bytes[d]);
        snprintf(k, sizeof k, "%s_calls", dir_keys[d]);
        j_u64(j, k, s->copy_calls[d]);
    }
    j_u64(j, "unknown_direction_calls", s->copy_calls[0]);
    j_u64(j, "h2d_pageable_bytes", s->h2d_pageable);
    j_u64(j, "d2h_pageable_bytes", s->d2h_pageable);
    j_num(j, "h2d_pageable_share",
          s->copy_bytes[TS_H2D] ? (double)s->h2d_pageable / (double)s->copy_bytes[TS_H2D] : 0);
    j_num(j, "d2h_pageable_share",
          s->copy_bytes[TS_D2H] ? (double)s->d2h_pageable / (double)s->copy_bytes[TS_D2H] : 0);
    j_u64(j, "failed_calls", s->copy_failed);
    j_u64(j, "host_time_ns", s->copy_ns);
    j_bool(j, "host_time_includes_waits", true);
    uint64_t gpu_ns, gpu_n;
    if (s->log && gpu_copy_time(s->log, &gpu_ns, &gpu_n))
        j_u64(j, "gpu_transfer_ns", gpu_ns);
    if (s->converted_calls) { /* absent from logs of runs without the pinned copy engine */
        j_u64(j, "converted_calls", s->converted_calls);
        j_u64(j, "converted_bytes", s->converted_bytes);
        j_u64(j, "host_blocked_ns", s->copy_ns);
        j_u64(j, "converted_host_blocked_ns", s->converted_blocked_ns);
        j_u64(j, "staging_wait_ns", s->staging_wait_ns);
    }
    j_close(j, '}');
}

static void json_counts(struct json *j, const char *key, const struct err_count *list, size_t n)
{
    j_open(j, key, '[');
    for (size_t i = 0; i < n; i++) {
        char nb[32];
        j_open(j, NULL, '{');
        if (list[i].name && list[i].name[0])
            j_str(j, "api", list[i].name);
        else {
            snprintf(nb, sizeof nb, "api#%d", list[i].api);
            j_str(j, "api", nb);
        }
        j_i64(j, "api_id", list[i].api);
        j_i64(j, "code", list[i].code);
        j_u64(j, "count", list[i].count);
        j_close(j, '}');
    }
    j_close(j, ']');
}

static void json_errors(struct json *j, const struct stats *s)
{
    json_counts(j, "errors", s->errs, s->n_errs);
    if (s->n_statuses)
        json_counts(j, "statuses", s->statuses, s->n_statuses);
}

static void json_stats(struct json *j, const struct stats *s, uint64_t max_rank_peak, bool total)
{
    json_memory(j, s, max_rank_peak, total);
    json_copies(j, s);
    json_errors(j, s);
}

/* ------------------------------------------------------------ command */
static int usage(void)
{
    fprintf(stderr,
            "usage: trainshim report [--format text|json] [--html FILE] [--link-trace FILE] LOG...\n");
    return 2;
}

/* The options of the command line. */
struct report_opts {
    bool json;
    const char *html;       /* --html FILE: the page instead of the report */
    const char *link_trace; /* --link-trace FILE: measured link time per offload step */
};

/* The value of option `name` at argv[*i] ("--name V" or "--name=V", *i
 * moved past it), NULL when argv[*i] is another option; "" when missing. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) || (argv[*i][n] && argv[*i][n] != '='))
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    return *i + 1 < argc ? argv[++*i] : "";
}

/* v, or NULL (*rc the exit status) when the option had no file. */
static const char *file_arg(const char *v, const char *option, int *rc)
{
    if (*v)
        return v;
    fprintf(stderr, "trainshim: error: %s needs a file\n", option);
    *rc = usage();
    return NULL;
}

/* Index of the first log argument, or -1 with *rc the exit status. */
static int parse_args(int argc, char **argv, struct report_opts *o, int *rc)
{
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = opt_value(argc, argv, &i, "--format"))) {
            if (strcmp(v, "text") && strcmp(v, "json")) {
                fprintf(stderr, "trainshim: error: --format takes text or json\n");
                *rc = usage();
                return -1;
            }
            o->json = !strcmp(v, "json");
        } else if ((v = opt_value(argc, argv, &i, "--html"))) {
            if (!(o->html = file_arg(v, "--html", rc)))
                return -1;
        } else if ((v = opt_value(argc, argv, &i, "--link-trace"))) {
            if (!(o->link_trace = file_arg(v, "--link-trace", rc)))
                return -1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage();
            *rc = 0;
            return -1;
        } else if (!strcmp(argv[i], "--")) {
            return i + 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "trainshim: error: unknown option '%s'\n", argv[i]);
            *rc = usage();
            return -1;
        } else {
            return i;
        }
    }
    return argc;
}

/* The logs, each with its statistics and accounting, and their total. */
struct report_input {
    int n;
    struct tslog *logs;
    struct stats *st; /* n + 1: the total last */
    struct acct_log *acct;
    uint64_t max_peak;
};

/* Reads and analyzes one log; nonzero when the report cannot be made. */
static int load_log(struct report_input *in, int i, const char *path)
{
    struct tslog *log = &in->logs[i];
    if (tslog_read_file(path, log) != 0) {
        fprintf(stderr, "trainshim: error: %s\n", log->error);
        return 1;
    }
    if (log->note[0])
        fprintf(stderr, "trainshim: warning: %s: %s\n", log->file, log->note);
    int rc = 0;
    if (stats_analyze(log, &in->st[i])) {
        fprintf(stderr, "trainshim: error: %s: out of memory\n", log->file);
        rc = 1;
    }
    if (acct_log_analyze(log, &in->acct[i])) {
        fprintf(stderr, "trainshim: error: %s: out of memory\n", log->file);
        rc = 1;
    }
    struct capped_log cl; /* a size-capped log: the folded events' totals */
    if (!rc && (capped_load(log, &cl) || capped_apply(&cl, log, &in->st[i], &in->acct[i]))) {
        fprintf(stderr, "trainshim: error: %s: out of memory\n", log->file);
        rc = 1;
    }
    capped_free(&cl);
    gpu_log_advice(log, in->acct[i].gpu_advice, sizeof in->acct[i].gpu_advice);
    torch_backend_advice(log, in->acct[i].torch_advice, sizeof in->acct[i].torch_advice);
    advice_evaluate(log, in->acct[i].has_gemm ? &in->acct[i].c : NULL, &in->acct[i].rules);
    return rc;
}

static int sum_total(struct report_input *in)
{
    for (int i = 0; i < in->n; i++) {
        if (stats_add(&in->st[in->n], &in->st[i])) {
            fprintf(stderr, "trainshim: error: out of memory\n");
            return 1;
        }
        if (in->st[i].peak_alloc > in->max_peak)
            in->max_peak = in->st[i].peak_alloc;
    }
    return 0;
}

/* One log's RUN, memory, copies, errors, accounting and GPU parts. */
static void json_log(struct json *j, const struct report_input *in, int i)
{
    json_run(j, &in->logs[i]);
    numa_report_json(j, &in->logs[i]);
    json_stats(j, &in->st[i], 0, false);
    struct acct_json aj = acct_json_of(j);
    struct acct_copy_facts cf = acct_copy_facts_of(&in->st[i]);
    acct_log_json(&aj, &in->acct[i], &cf, duration_ns(&in->logs[i]));
    gpu_report_json(&aj, &in->logs[i]); /* GPU TIMELINE (tools/report/report_gpu.c) */
}

static void print_json(const struct report_input *in)
{
    struct json j = { .f = stdout };
    j_open(&j, NULL, '{');
    j_str(&j, "report", "trainshim");
    j_u64(&j, "version", 1);
    if (in->n == 1) {
        json_log(&j, in, 0);
    } else {
        j_open(&j, "ranks", '[');
        for (int i = 0; i < in->n; i++) {
            j_open(&j, NULL, '{');
            json_log(&j, in, i);
            j_close(&j, '}');
        }
        j_close(&j, ']');
        j_open(&j, "total", '{');
        j_u64(&j, "logs", (uint64_t)in->n);
        json_stats(&j, &in->st[in->n], in->max_peak, true);
        struct acct_json aj = acct_json_of(&j);
        acct_logs_json(&aj, in->logs, in->acct, in->n);
        j_close(&j, '}');
    }
    j_close(&j, '}');
}

static void print_text(const struct report_input *in, const char *link_trace)
{
    int n = in->n;
    if (n == 1) {
        text_run(stdout, &in->logs[0]);
        text_stats(stdout, &in->st[0], &in->logs[0]);
        sites_text(stdout, &in->logs[0]); /* TOP ALLOCATION SITES, MEMORY TIMELINE: with stacks only */
        acct_log_text(stdout, &in->acct[0]);
        gpu_report_text(stdout, in->logs, 1);                  /* GPU TIMELINE (tools/report/report_gpu.c) */
        offload_report_text(stdout, &in->logs[0], link_trace); /* OFFLOAD (tools/report/report_offload.c) */
        struct acct_copy_facts cf = acct_copy_facts_of(&in->st[0]);
        acct_advice_text(stdout, &in->acct[0], &cf, duration_ns(&in->logs[0]));
        return;
    }
    text_rank_table(stdout, in->logs, in->st, n);
    printf("\n== TOTAL (%d logs; peak allocated is the sum of the ranks' peaks, the largest is %llu B) ==\n",
           n, (unsigned long long)in->max_peak);
    text_stats(stdout, &in->st[n], NULL);
    for (int i = 0; i < n; i++) {
        printf("\n== RANK %d ==", in->logs[i].rank >= 0 ? in->logs[i].rank : i);
        numa_text_rank(stdout, &in->logs[i]);
        sites_text(stdout, &in->logs[i]); /* with stacks only */
        acct_log_text(stdout, &in->acct[i]);
        struct acct_copy_facts cf = acct_copy_facts_of(&in->st[i]);
        acct_advice_text(stdout, &in->acct[i], &cf, duration_ns(&in->logs[i]));
    }
    acct_logs_text(stdout, in->logs, in->acct, n);
    gpu_report_text(stdout, in->logs, n); /* GPU TIMELINE, per rank */
}

static void free_input(struct report_input *in)
{
    for (int i = 0; in->st && i <= in->n; i++)
        free(in->st[i].errs), free(in->st[i].statuses);
    for (int i = 0; in->logs && i < in->n; i++)
        tslog_free(&in->logs[i]);
    for (int i = 0; in->acct && i < in->n; i++)
        acct_log_free(&in->acct[i]);
    free(in->st);
    free(in->acct);
    free(in->logs);
}

int cmd_report(int argc, char **argv)
{
    struct report_opts o = { 0 };
    int rc = 0;
    int first = parse_args(argc, argv, &o, &rc);
    if (first < 0)
        return rc;
    struct report_input in = { .n = argc - first };
    if (in.n <= 0)
        return usage();
    in.logs = calloc((size_t)in.n, sizeof *in.logs);
    in.st = calloc((size_t)in.n + 1, sizeof *in.st);
    in.acct = calloc((size_t)in.n, sizeof *in.acct);
    if (!in.logs || !in.st || !in.acct) {
        fprintf(stderr, "trainshim: error: out of memory\n");
        free_input(&in);
        return 1;
    }
    for (int i = 0; i < in.n; i++)
        rc |= load_log(&in, i, argv[first + i]);
    if (!rc && !(rc = sum_total(&in))) {
        if (o.html) {
            struct html_input hi = { in.logs, in.st, in.acct, acct_copy_facts_of, in.n };
            rc = html_report_write(o.html, &hi) ? 1 : 0;
        } else if (o.json)
            print_json(&in);
        else
            print_text(&in, o.link_trace);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "trainshim: error: cannot write the report\n");
            rc = 1;
        }
    }
    free_input(&in);
    return rc;
}
