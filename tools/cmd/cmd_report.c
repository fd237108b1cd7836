/* cmd_report.c: `trainshim report [--format text|json] LOG...`.
 *
 * Prints what tools/report/report_stats.c derives from each log's records, the
 * accounting (report_compute.c, report_comm.c), call sites (report_sites.c)
 * and GPU timeline (report_gpu.c), as text or JSON (report_json.c).  Text
 * output is stable (golden-tested); JSON output is a contract
 * (docs/log-format.md). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc.h"
#include "cmd/cmds.h"
#include "html/html_report.h"
#include "core/core.h"
#include "read/logread.h"
#include "report/report_acct.h"
#include "report/report_gpu.h"
#include "report/report_json.h"
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
    for (size_t i = 0; i < log->n_devices; i++) {
        const struct tslog_device *d = &log->devices[i];
        fprintf(f, "device %-6d ", d->ordinal);
        print_sanitized(f, d->name);
        fprintf(f, ", %s, cc %d.%d, %d SMs, ", tslog_human_bytes(d->total_mem, b, sizeof b), d->cc_major,
                d->cc_minor, d->sm_count);
        print_sanitized(f, d->pci_bus_id);
        fputc('\n', f);
    }
}

/* Peak reserved: the pools' own when they logged it, else the peak of the
 * logged allocations (all a run without pools can tell). */
static uint64_t peak_reserved(const struct stats *s)
{
    return s->pool_records ? s->pool_peak_reserved : s->peak_alloc;
}

/* 1 - allocated/reserved at the reserved peak */
static double pool_fragmentation(const struct stats *s)
{
    if (!s->pool_peak_reserved || s->pool_alloc_at_peak >= s->pool_peak_reserved)
        return 0.0;
    return 1.0 - (double)s->pool_alloc_at_peak / (double)s->pool_peak_reserved;
}

static void text_stats(FILE *f, const struct stats *s, const struct tslog *names)
{
    char b1[32], b2[32];
    fprintf(f, "\n== DEVICE MEMORY ==\n");
    fprintf(f, "peak allocated      %s (%llu B)\n", tslog_human_bytes(s->peak_alloc, b1, sizeof b1),
            (unsigned long long)s->peak_alloc);
    fprintf(f, "peak reserved       %s (%llu B)\n", tslog_human_bytes(peak_reserved(s), b1, sizeof b1),
            (unsigned long long)peak_reserved(s));
    if (s->pool_records) {
        fprintf(f, "allocator           %s\n", ts_alloc_mode_name(s->pool_mode));
        fprintf(f, "fragmentation       %.4f (1 - allocated/reserved at the reserved peak)\n",
                pool_fragmentation(s));
        fprintf(f, "driver calls        %llu\n", (unsigned long long)s->pool_driver_calls);
        fprintf(f, "cache hits          %llu\n", (unsigned long long)s->pool_cache_hits);
        fprintf(f, "OOMs                %llu\n", (unsigned long long)s->pool_ooms);
    }
    fprintf(f, "allocations         %llu (%llu failed), %s requested\n", (unsigned long long)s->alloc_calls,
            (unsigned long long)s->alloc_failed, tslog_human_bytes(s->alloc_requested, b1, sizeof b1));
    fprintf(f, "frees               %llu (%llu failed, %llu of unknown pointers)\n",
            (unsigned long long)s->free_calls, (unsigned long long)s->free_failed,
            (unsigned long long)s->free_unknown);
    fprintf(f, "live at end         %llu blocks, %s\n", (unsigned long long)s->live_blocks,
            tslog_human_bytes(s->live_bytes, b1, sizeof b1));
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
    fprintf(f, "host time in copies %.3f ms\n", (double)s->copy_ns / 1e6);
    if (s->converted_calls) {
        fprintf(f, "converted to pinned %s in %llu calls (host blocked %.3f ms, staging wait %.3f ms)\n",
                tslog_human_bytes(s->converted_bytes, b1, sizeof b1), (unsigned long long)s->converted_calls,
                (double)s->converted_blocked_ns / 1e6, (double)s->staging_wait_ns / 1e6);
    }

    fprintf(f, "\n== ERRORS ==\n");
    if (!s->n_errs)
        fprintf(f, "none\n");
    else
        fprintf(f, "%-32s %8s %10s\n", "api", "code", "count");
    for (size_t i = 0; i < s->n_errs; i++) {
        char nb[32];
        const char *name = s->errs[i].name;
        if (!name || !*name)
            name = names ? tslog_api_name(names, s->errs[i].api, nb, sizeof nb)
                         : (snprintf(nb, sizeof nb, "api#%d", s->errs[i].api), nb);
        fprintf(f, "%-32s %8d %10llu\n", name, s->errs[i].code, (unsigned long long)s->errs[i].count);
    }
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
    size_t l = strlen(name);
    for (const char *p = log ? log->config : NULL; p && *p;) {
        const char *nl = strchr(p, '\n');
        if (!strncmp(p, name, l) && p[l] == '=') {
            char *end;
            unsigned long long v = strtoull(p + l + 1, &end, 10);
            if (end == p + l + 1)
                return false;
            *out = v;
            return true;
        }
        p = nl ? nl + 1 : p + strlen(p);
    }
    return false;
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
    j_u64(j, "unknown_records", log->n_unknown);
    j_key(j, "format_version");
    fprintf(j->f, "\"%u.%u\"", log->version_major, log->version_minor);
    j_close(j, '}');
    j_open(j, "devices", '[');
    for (size_t i = 0; i < log->n_devices; i++) {
        const struct tslog_device *d = &log->devices[i];
        j_open(j, NULL, '{');
        j_i64(j, "ordinal", d->ordinal);
        j_str(j, "name", d->name);
        j_u64(j, "total_memory_bytes", d->total_mem);
        j_i64(j, "cc_major", d->cc_major);
        j_i64(j, "cc_minor", d->cc_minor);
        j_i64(j, "sm_count", d->sm_count);
        j_str(j, "pci_bus_id", d->pci_bus_id);
        j_close(j, '}');
    }
    j_close(j, ']');
}

static void json_stats(struct json *j, const struct stats *s, uint64_t max_rank_peak, bool total)
{
    j_open(j, "memory", '{');
    j_u64(j, "peak_allocated_bytes", s->peak_alloc);
    j_u64(j, "peak_reserved_bytes", peak_reserved(s));
    if (s->pool_records) {
        j_str(j, "allocator_mode", ts_alloc_mode_name(s->pool_mode));
        j_num(j, "fragmentation", pool_fragmentation(s));
        j_u64(j, "driver_calls", s->pool_driver_calls);
        j_u64(j, "cache_hits", s->pool_cache_hits);
        j_u64(j, "ooms", s->pool_ooms);
    }
    if (total)
        j_u64(j, "max_rank_peak_allocated_bytes", max_rank_peak);
    j_u64(j, "alloc_calls", s->alloc_calls);
    j_u64(j, "alloc_failed", s->alloc_failed);
    j_u64(j, "alloc_requested_bytes", s->alloc_requested);
    j_u64(j, "free_calls", s->free_calls);
    j_u64(j, "free_failed", s->free_failed);
    j_u64(j, "free_unknown_pointer", s->free_unknown);
    j_u64(j, "live_at_end_blocks", s->live_blocks);
    j_u64(j, "live_at_end_bytes", s->live_bytes);
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
    if (s->log) {
        struct acct_json aj = acct_json_of(j);
        sites_json(&aj, s->log); /* memory.top_sites when the run recorded stacks */
    }
    j_close(j, '}');

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
    if (s->converted_calls) { /* absent from logs of runs without the pinned copy engine */
        j_u64(j, "converted_calls", s->converted_calls);
        j_u64(j, "converted_bytes", s->converted_bytes);
        j_u64(j, "host_blocked_ns", s->copy_ns);
        j_u64(j, "converted_host_blocked_ns", s->converted_blocked_ns);
        j_u64(j, "staging_wait_ns", s->staging_wait_ns);
    }
    j_close(j, '}');

    j_open(j, "errors", '[');
    for (size_t i = 0; i < s->n_errs; i++) {
        char nb[32];
        j_open(j, NULL, '{');
        if (s->errs[i].name && s->errs[i].name[0])
            j_str(j, "api", s->errs[i].name);
        else {
            snprintf(nb, sizeof nb, "api#%d", s->errs[i].api);
            j_str(j, "api", nb);
        }
        j_i64(j, "api_id", s->errs[i].api);
        j_i64(j, "code", s->errs[i].code);
        j_u64(j, "count", s->errs[i].count);
        j_close(j, '}');
    }
    j_close(j, ']');
}

/* ------------------------------------------------------------ command */
static int usage(void)
{
    fprintf(stderr, "usage: trainshim report [--format text|json] [--html FILE] LOG...\n");
    return 2;
}

int cmd_report(int argc, char **argv)
{
    bool json = false;
    const char *html = NULL; /* --html FILE: the page instead of the report */
    int first = argc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--format") || !strncmp(argv[i], "--format=", 9)) {
            const char *v = argv[i][8] == '=' ? argv[i] + 9 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || (strcmp(v, "text") && strcmp(v, "json"))) {
                fprintf(stderr, "trainshim: error: --format takes text or json\n");
                return usage();
            }
            json = !strcmp(v, "json");
        } else if (!strcmp(argv[i], "--html") || !strncmp(argv[i], "--html=", 7)) {
            if (!(html = argv[i][6] == '=' ? argv[i] + 7 : (i + 1 < argc ? argv[++i] : NULL)) || !*html)
                return usage();
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage();
            return 0;
        } else if (!strcmp(argv[i], "--")) {
            first = i + 1;
            break;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "trainshim: error: unknown option '%s'\n", argv[i]);
            return usage();
        } else {
            first = i;
            break;
        }
    }
    int n = argc - first;
    if (n <= 0)
        return usage();
    struct tslog *logs = calloc((size_t)n, sizeof *logs);
    struct stats *st = calloc((size_t)n + 1, sizeof *st);
    struct acct_log *acct = calloc((size_t)n, sizeof *acct);
    if (!logs || !st || !acct) {
        fprintf(stderr, "trainshim: error: out of memory\n");
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (tslog_read_file(argv[first + i], &logs[i]) != 0) {
            fprintf(stderr, "trainshim: error: %s\n", logs[i].error);
            rc = 1;
            continue;
        }
        if (logs[i].note[0])
            fprintf(stderr, "trainshim: warning: %s: %s\n", logs[i].file, logs[i].note);
        if (stats_analyze(&logs[i], &st[i])) {
            fprintf(stderr, "trainshim: error: %s: out of memory\n", logs[i].file);
            rc = 1;
        }
        if (acct_log_analyze(&logs[i], &acct[i])) {
            fprintf(stderr, "trainshim: error: %s: out of memory\n", logs[i].file);
            rc = 1;
        }
        gpu_log_advice(&logs[i], acct[i].gpu_advice, sizeof acct[i].gpu_advice);
    }
    if (rc)
        goto out;
    struct stats *total = &st[n];
    uint64_t max_peak = 0;
    for (int i = 0; i < n; i++) {
        if (stats_add(total, &st[i])) {
            fprintf(stderr, "trainshim: error: out of memory\n");
            rc = 1;
            goto out;
        }
        if (st[i].peak_alloc > max_peak)
            max_peak = st[i].peak_alloc;
    }
    if (html) {
        struct html_input hi = { logs, st, acct, acct_copy_facts_of, n };
        rc = html_report_write(html, &hi) ? 1 : 0;
    } else if (json) {
        struct json j = { .f = stdout };
        j_open(&j, NULL, '{');
        j_str(&j, "report", "trainshim");
        j_u64(&j, "version", 1);
        if (n == 1) {
            json_run(&j, &logs[0]);
            json_stats(&j, &st[0], 0, false);
            struct acct_json aj = acct_json_of(&j);
            struct acct_copy_facts cf = acct_copy_facts_of(&st[0]);
            acct_log_json(&aj, &acct[0], &cf, duration_ns(&logs[0]));
            gpu_report_json(&aj, &logs[0]); /* GPU TIMELINE (tools/report/report_gpu.c) */
        } else {
            j_open(&j, "ranks", '[');
            for (int i = 0; i < n; i++) {
                j_open(&j, NULL, '{');
                json_run(&j, &logs[i]);
                json_stats(&j, &st[i], 0, false);
                struct acct_json aj = acct_json_of(&j);
                struct acct_copy_facts cf = acct_copy_facts_of(&st[i]);
                acct_log_json(&aj, &acct[i], &cf, duration_ns(&logs[i]));
                gpu_report_json(&aj, &logs[i]);
                j_close(&j, '}');
            }
            j_close(&j, ']');
            j_open(&j, "total", '{');
            j_u64(&j, "logs", (uint64_t)n);
            json_stats(&j, total, max_peak, true);
            struct acct_json aj = acct_json_of(&j);
            acct_logs_json(&aj, logs, acct, n);
            j_close(&j, '}');
        }
        j_close(&j, '}');
    } else if (n == 1) {
        text_run(stdout, &logs[0]);
        text_stats(stdout, &st[0], &logs[0]);
        sites_text(stdout, &logs[0]); /* TOP ALLOCATION SITES, MEMORY TIMELINE: with stacks only */
        acct_log_text(stdout, &acct[0]);
        gpu_report_text(stdout, logs, 1);      /* GPU TIMELINE (tools/report/report_gpu.c) */
        offload_report_text(stdout, &logs[0]); /* OFFLOAD (tools/report/report_offload.c) */
        struct acct_copy_facts cf = acct_copy_facts_of(&st[0]);
        acct_advice_text(stdout, &acct[0], &cf, duration_ns(&logs[0]));
    } else {
        text_rank_table(stdout, logs, st, n);
        printf(
            "\n== TOTAL (%d logs; peak allocated is the sum of the ranks' peaks, the largest is %llu B) ==\n",
            n, (unsigned long long)max_peak);
        text_stats(stdout, total, NULL);
        for (int i = 0; i < n; i++) {
            printf("\n== RANK %d ==", logs[i].rank >= 0 ? logs[i].rank : i);
            sites_text(stdout, &logs[i]); /* with stacks only */
            acct_log_text(stdout, &acct[i]);
            struct acct_copy_facts cf = acct_copy_facts_of(&st[i]);
            acct_advice_text(stdout, &acct[i], &cf, duration_ns(&logs[i]));
        }
        acct_logs_text(stdout, logs, acct, n);
        gpu_report_text(stdout, logs, n); /* GPU TIMELINE, per rank */
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "trainshim: error: cannot write the report\n");
        rc = 1;
    }
out:
    for (int i = 0; i <= n; i++)
        free(st[i].errs);
    for (int i = 0; i < n; i++)
        tslog_free(&logs[i]);
    free(st);
    for (int i = 0; acct && i < n; i++)
        acct_log_free(&acct[i]);
    free(acct);
    free(logs);
    return rc;
}
