/* libFuzzer harness for the log reader and the report built on it: any bytes
 * are parsed (tools/read/logread.c), and when they read as a log, analyzed and
 * rendered as text and JSON (tools/cmd/cmd_report.c) into /dev/null.  Each input
 * is tried twice: as is (which mostly exercises the length and check
 * validation), and with every record's check recomputed, so that mutated
 * record bodies reach the per-type parsers.  Built and run by
 * tests/fuzz/run.sh with -fsanitize=fuzzer,address,undefined. */
#include <stdio.h>
#include <stdlib.h>

#include "../../tools/read/logread.c"
#include "../../tools/cmd/cmd_report.c"
#include "fuzz_checks.h"
#include "report/report_gpu.h"

static FILE *devnull;

static void one(const uint8_t *data, size_t size)
{
    struct tslog log;
    int rc = tslog_parse(data, size, "fuzz.log", &log);
    if (rc == 0) {
        /* what the reader promises, whatever the input */
        if (log.stop_offset > size || log.n_events > size / sizeof(struct ts_rec_hdr) ||
            (log.truncated != (log.stop_offset < size)) || (!log.have_header && log.n_records))
            abort();
        struct stats st;
        if (stats_analyze(&log, &st) == 0) {
            struct json j = {.f = devnull};
            j_open(&j, NULL, '{');
            json_run(&j, &log);
            json_stats(&j, &st, 0, false);
            j_close(&j, '}');
            text_run(devnull, &log);
            text_stats(devnull, &st, &log);
            struct stats total = {0};
            if (stats_add(&total, &st) == 0)
                text_rank_table(devnull, &log, &st, 1);
            free(total.errs);
            free(total.statuses);
            free(st.errs);
            free(st.statuses);
        }
        /* the advice rules read the records (and CUPTI's, stacks) themselves */
        struct acct_log a;
        memset(&a, 0, sizeof a);
        if (acct_log_analyze(&log, &a) == 0) {
            struct advice_set rules;
            advice_evaluate(&log, a.has_gemm ? &a.c : NULL, &rules);
            acct_log_free(&a);
        }
    } else if (!log.error[0]) {
        abort(); /* a rejected input always says why */
    }
    tslog_free(&log);
    /* the GPU TIMELINE reads the CUPTI records from the bytes itself */
    struct gpu_data g;
    memset(&g, 0, sizeof g);
    gpu_parse(data, size, &g);
    gpu_free(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    one(data, size);
    /* the same bytes with valid checks (an exact-size copy, so ASan sees overreads) */
    uint8_t *copy = fuzz_with_valid_checks(data, size);
    one(copy, size);
    free(copy);
    return 0;
}
