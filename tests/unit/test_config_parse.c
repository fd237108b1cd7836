/* The option value parsers of shim/core/config.c, without any environment: every
 * type, every suffix, and every kind of bad value. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"

static int failures;
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

static void size_ok(const char *s, uint64_t want)
{
    uint64_t v = 12345;
    const char *err = ts_parse_size(s, &v);
    CHECK(!err && v == want, "size '%s': err=%s value=%llu want %llu", s, err ? err : "-",
          (unsigned long long)v, (unsigned long long)want);
}

static void size_bad(const char *s, const char *why_contains)
{
    uint64_t v = 777;
    const char *err = ts_parse_size(s, &v);
    CHECK(err && strstr(err, why_contains) && v == 777, "size '%s' should fail with '%s': err=%s v=%llu", s,
          why_contains, err ? err : "(accepted)", (unsigned long long)v);
}

static void test_bool(void)
{
    static const char *const yes[] = {"1", "true", "TRUE", "True", "yes", "YES", "on", "On"};
    static const char *const no[] = {"0", "false", "False", "no", "NO", "off", "OFF"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        bool b = false;
        CHECK(!ts_parse_bool(yes[i], &b) && b, "bool '%s'", yes[i]);
    }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        bool b = true;
        CHECK(!ts_parse_bool(no[i], &b) && !b, "bool '%s'", no[i]);
    }
    static const char *const bad[] = {"", "2", "-1", "tru", "yes ", " 1", "1x", "enable", "00"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        bool b = true;
        CHECK(ts_parse_bool(bad[i], &b) && b, "bool '%s' should be rejected and leave the output", bad[i]);
    }
    bool b;
    CHECK(ts_parse_bool(NULL, &b), "NULL bool");
}

static void test_size(void)
{
    size_ok("0", 0);
    size_ok("4096", 4096);
    size_ok("007", 7);
    size_ok("512B", 512);
    size_ok("512b", 512);
    size_ok("1K", 1024);
    size_ok("1k", 1024);
    size_ok("2M", 2ull << 20);
    size_ok("3G", 3ull << 30);
    size_ok("4T", 4ull << 40);
    size_ok("1KiB", 1024);
    size_ok("1kib", 1024);
    size_ok("256KiB", 256ull << 10);
    size_ok("2MiB", 2ull << 20);
    size_ok("3GiB", 3ull << 30);
    size_ok("5TiB", 5ull << 40);
    size_ok("1KB", 1000);
    size_ok("1kb", 1000);
    size_ok("2MB", 2000000);
    size_ok("3GB", 3000000000ull);
    size_ok("4TB", 4000000000000ull);
    size_ok("1.5GiB", 3ull << 29);
    size_ok("1.5G", 3ull << 29);
    size_ok("0.5K", 512);
    size_ok("1.25MB", 1250000);
    size_ok("0.001K", 1);          /* 1.024 bytes: rounded down */
    size_ok("1.0", 1);             /* a zero fraction is whole */
    size_ok("18446744073709551615", UINT64_MAX);
    size_ok("16777215T", 16777215ull << 40);
    size_ok("15.999999999999999999TiB", (15ull << 40) + ((1ull << 40) - 1)); /* extra digits kept to 18 */

    size_bad("", "empty");
    size_bad("-1", "negative");
    size_bad("-1G", "negative");
    size_bad("1G ", "suffix");
    size_bad(" 1G", "not a number");
    size_bad("1 G", "suffix");
    size_bad("G", "not a number");
    size_bad("1Q", "suffix");
    size_bad("1GiBs", "suffix");
    size_bad("1iB", "suffix");
    size_bad("1.5", "fractional");
    size_bad("1.", "decimal point");
    size_bad(".5G", "not a number");
    size_bad("1.2.3G", "suffix");
    size_bad("0x10", "suffix");
    size_bad("+5", "not a number");
    size_bad("18446744073709551616", "overflow");
    size_bad("99999999999999999999999", "overflow");
    size_bad("16777216T", "overflow");
    size_bad("17179869184GiB", "overflow");
    size_ok("18446744073709551.615KB", UINT64_MAX);
    size_bad("18446744073709551.616KB", "overflow"); /* the whole part fits, the fraction pushes it over */
    size_bad("1e9", "suffix");
    uint64_t v;
    CHECK(ts_parse_size(NULL, &v), "NULL size");
}

static void test_count(void)
{
    uint64_t v = 9;
    CHECK(!ts_parse_count("0", &v) && v == 0, "count 0");
    CHECK(!ts_parse_count("42", &v) && v == 42, "count 42");
    CHECK(!ts_parse_count("18446744073709551615", &v) && v == UINT64_MAX, "count max");
    static const char *const bad[] = {"", "-1", "1.5", "1K", "4 ", " 4", "x", "18446744073709551616", "1e3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        v = 5;
        CHECK(ts_parse_count(bad[i], &v) && v == 5, "count '%s' should be rejected", bad[i]);
    }
}

static void test_enum(void)
{
    int v = -1;
    CHECK(!ts_parse_enum("off", "off|on|auto", &v) && v == 0, "enum off -> %d", v);
    CHECK(!ts_parse_enum("on", "off|on|auto", &v) && v == 1, "enum on -> %d", v);
    CHECK(!ts_parse_enum("AUTO", "off|on|auto", &v) && v == 2, "enum AUTO -> %d", v);
    CHECK(!ts_parse_enum("single", "single", &v) && v == 0, "enum single value");
    v = 7;
    static const char *const bad[] = {"", "of", "autox", "on|off", "o", " on", "auto "};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(ts_parse_enum(bad[i], "off|on|auto", &v) && v == 7, "enum '%s' should be rejected", bad[i]);
    CHECK(ts_parse_enum("x", "", &v), "empty value list accepts nothing");
}

static void test_template(void)
{
    static const char *const good[] = {"trainshim.%h.%p.log", "/tmp/x.log", "run-%r-%l.log", "100%%.log",
                                       "logs/%q{SLURM_JOB_ID}/%p.log", "%q{_A1}", "%p%p%p"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK(!ts_check_template(good[i]), "template '%s': %s", good[i], ts_check_template(good[i]));
    static const char *const bad[] = {"", "x%", "%d.log", "%P", "%q", "%qVAR", "%q{}", "%q{1A}", "%q{A",
                                      "%q{A-B}", "a%%%"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(ts_check_template(bad[i]) != NULL, "template '%s' should be rejected", bad[i]);
}

static void test_fraction_or_size(void)
{
    struct ts_fraction_or_size v;
    CHECK(!ts_parse_fraction_or_size("0.9", &v) && fabs(v.fraction - 0.9) < 1e-12 && v.bytes == 0, "0.9");
    CHECK(!ts_parse_fraction_or_size("1", &v) && v.fraction == 1.0 && v.bytes == 0, "1 is the whole device");
    CHECK(!ts_parse_fraction_or_size("1.0", &v) && v.fraction == 1.0, "1.0");
    CHECK(!ts_parse_fraction_or_size("90%", &v) && fabs(v.fraction - 0.9) < 1e-12, "90%%");
    CHECK(!ts_parse_fraction_or_size("12.5%", &v) && fabs(v.fraction - 0.125) < 1e-12, "12.5%%");
    CHECK(!ts_parse_fraction_or_size("100%", &v) && v.fraction == 1.0, "100%%");
    CHECK(!ts_parse_fraction_or_size("0", &v) && v.fraction == 0 && v.bytes == 0, "0");
    CHECK(!ts_parse_fraction_or_size("8GiB", &v) && v.fraction == 0 && v.bytes == 8ull << 30, "8GiB");
    CHECK(!ts_parse_fraction_or_size("1.5G", &v) && v.bytes == 3ull << 29, "1.5G");
    CHECK(!ts_parse_fraction_or_size("4096", &v) && v.fraction == 0 && v.bytes == 4096, "4096 bytes");
    CHECK(!ts_parse_fraction_or_size("1B", &v) && v.fraction == 0 && v.bytes == 1, "1B is a size");
    static const char *const bad[] = {"", "-0.5", "1.5", "0%", "101%", "50 %", "%", "x", "0.5x", "1GiBx",
                                      "18446744073709551616", "-1G"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        v = (struct ts_fraction_or_size){0.25, 3};
        CHECK(ts_parse_fraction_or_size(bad[i], &v) && v.fraction == 0.25 && v.bytes == 3,
              "fraction-or-size '%s' should be rejected", bad[i]);
    }
}

int main(void)
{
    test_bool();
    test_size();
    test_count();
    test_enum();
    test_template();
    test_fraction_or_size();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_config_parse: all checks passed\n");
    return 0;
}
