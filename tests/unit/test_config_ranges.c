/* Values that parse but cannot be meant as given: numeric options outside
 * their range (one warning naming the range, the nearest bound in effect and
 * printed by the effective configuration), a memory limit below one page (a
 * warning, the value kept), TRAINSHIM_PEAK_TFLOPS that is not a positive
 * finite number or type=number list (a warning, the default), and
 * TRAINSHIM_STRICT making each of them fatal (a nonzero problem count). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_capture.h"
#include "core/config.h"

static int failures;
#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            failures++;                                                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                  \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fputc('\n', stderr);                                                                             \
        }                                                                                                    \
    } while (0)

static struct ts_config cfg;
static char err_text[16384];

/* Loads one variable (plus an optional second) into cfg; stderr captured. */
static int load2(const char *a, const char *b)
{
    char *envp[3] = { (char *)a, (char *)b, NULL };
    return config_load_captured(&cfg, envp, err_text, sizeof err_text);
}
static int load(const char *a) { return load2(a, NULL); }

static int lines(void)
{
    int n = 0;
    for (const char *s = err_text; *s; s++)
        n += *s == '\n';
    return n;
}

static void check_clamped(const char *var, int option, uint64_t want, const char *range)
{
    int problems = load(var);
    char value[64];
    ts_option_format_value(&cfg, option, value, sizeof value);
    CHECK(problems == 1 && lines() == 1, "%s: %d problems, output: %s", var, problems, err_text);
    CHECK(strstr(err_text, range) != NULL, "%s: range '%s' not named: %s", var, range, err_text);
    CHECK(strtoull(value, NULL, 10) == want, "%s: in effect %s, want %llu", var, value, (unsigned long long)want);
}

static void ranges(void)
{
    check_clamped("TRAINSHIM_LOG_BUFFER=1", TS_OPT_LOG_BUFFER, TS_LOG_BUFFER_MIN, "[4096, 67108864]");
    check_clamped("TRAINSHIM_LOG_BUFFER=1GiB", TS_OPT_LOG_BUFFER, TS_LOG_BUFFER_MAX, "[4096, 67108864]");
    check_clamped("TRAINSHIM_COPY_CHUNK=1", TS_OPT_COPY_CHUNK, TS_COPY_CHUNK_MIN, "[65536, 268435456]");
    check_clamped("TRAINSHIM_COPY_THREADS=99999", TS_OPT_COPY_THREADS, TS_COPY_THREADS_MAX, "[0, 16]");
    check_clamped("TRAINSHIM_STACKS=99999", TS_OPT_STACKS, TS_STACKS_MAX, "[0, 256]");
    /* in range: silent */
    CHECK(load("TRAINSHIM_COPY_THREADS=16") == 0 && !err_text[0], "16 threads: %s", err_text);
    CHECK(load("TRAINSHIM_STACKS=0") == 0 && !err_text[0], "stacks 0: %s", err_text);
    /* TRAINSHIM_CONF's values are checked the same way */
    CHECK(load("TRAINSHIM_CONF=stacks:1000") == 1 && cfg.stacks == TS_STACKS_MAX, "conf: %s", err_text);
    /* strict: the same problem counts (ts_config_load exits when allowed) */
    CHECK(load2("TRAINSHIM_STRICT=1", "TRAINSHIM_COPY_CHUNK=1") == 1 && strstr(err_text, "fatal"),
          "strict: %s", err_text);
}

static void memory_limit(void)
{
    CHECK(load("TRAINSHIM_MEMORY_LIMIT=2") == 1 && strstr(err_text, "below one 2 MiB page"), "2 bytes: %s",
          err_text);
    CHECK(cfg.memory_limit.bytes == 2, "the limit is kept as given: %llu",
          (unsigned long long)cfg.memory_limit.bytes);
    CHECK(load("TRAINSHIM_MEMORY_LIMIT=2GiB") == 0 && !err_text[0], "2GiB: %s", err_text);
    CHECK(load("TRAINSHIM_MEMORY_LIMIT=0.5") == 0 && !err_text[0], "0.5: %s", err_text);
    CHECK(load("TRAINSHIM_MEMORY_LIMIT=0") == 0 && !err_text[0], "0 (none): %s", err_text);
}

static void peak_tflops(void)
{
    static const char *const bad[] = { "garbage", "-5", "0", "fp32=abc", "1e999", "fp32=1e999", "inf", "nan",
                                       "fp33=5", "fp32=5,", "5x", "fp32=-1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char var[64];
        snprintf(var, sizeof var, "TRAINSHIM_PEAK_TFLOPS=%s", bad[i]);
        CHECK(load(var) == 1 && lines() == 1, "%s accepted: %s", var, err_text);
        CHECK(cfg.peak_tflops && !cfg.peak_tflops[0], "%s: default not kept: '%s'", var, cfg.peak_tflops);
    }
    CHECK(load("TRAINSHIM_PEAK_TFLOPS=989.4") == 0, "one number: %s", err_text);
    CHECK(load("TRAINSHIM_PEAK_TFLOPS=fp16=989.4,BF16=989.4,fp32=67") == 0, "list: %s", err_text);

    double out[TS_PEAK_PRECISION_COUNT];
    CHECK(!ts_parse_rates("fp16=2,fp32=3", TS_PEAK_PRECISIONS, out, TS_PEAK_PRECISION_COUNT)
              && out[1] == 3 && out[3] == 2 && out[0] == 0,
          "parsed list: %g %g %g", out[0], out[1], out[3]);
    CHECK(!ts_parse_rates("7.5", TS_PEAK_PRECISIONS, out, TS_PEAK_PRECISION_COUNT) && out[6] == 7.5,
          "one number for every name");
}

int main(void)
{
    ranges();
    memory_limit();
    peak_tflops();
    if (failures)
        return 1;
    printf("config ranges ok\n");
    return 0;
}
