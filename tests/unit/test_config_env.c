/* The configuration loader of shim/core/config.c: TRAINSHIM_<NAME> variables,
 * TRAINSHIM_CONF, precedence, unknown names, exactly one warning line per bad
 * value, TRAINSHIM_STRICT's fatal exit, TRAINSHIM_VERBOSE, ts_config_format,
 * and ts_cfg() from many threads. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config_capture.h"
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

static struct ts_config cfg;
static char err_text[65536];

/* Loads envp into cfg, capturing what it prints on stderr into err_text. */
static int load(char **envp) { return config_load_captured(&cfg, envp, err_text, sizeof err_text); }

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Runs fn in a child with fd 2 captured; returns its wait status. */
static int in_child(void (*fn)(void *), void *arg, char *out, size_t n)
{
    int fds[2];
    if (pipe(fds) != 0)
        abort();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t r;
    while ((r = read(fds[0], out + len, n - 1 - len)) > 0)
        len += (size_t)r;
    out[len] = '\0';
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    return status;
}

static void test_defaults(void)
{
    char *envp[] = {"PATH=/bin", "HOME=/root", "TRAINSHIMX=1", "XTRAINSHIM_LOG=1", NULL};
    CHECK(load(envp) == 0, "clean environment has no problem");
    CHECK(err_text[0] == '\0', "nothing printed, got: %s", err_text);
    CHECK(!cfg.strict && !cfg.verbose, "bool defaults");
    CHECK(!strcmp(cfg.log, "trainshim.%h.%p.log"), "log default %s", cfg.log);
    CHECK(cfg.log_buffer == 256 << 10, "log_buffer default %llu", (unsigned long long)cfg.log_buffer);
    CHECK(!ts_config_disabled(&cfg), "enabled by default");
    for (int i = 0; i < TS_OPTION_COUNT; i++)
        CHECK(ts_option_source(&cfg, i) == TS_SRC_DEFAULT, "option %d source", i);
    CHECK(load(NULL) == 0 && !err_text[0], "NULL envp");
}

static void test_variables(void)
{
    char *envp[] = {"TRAINSHIM_VERBOSE=on", "TRAINSHIM_LOG=/tmp/run.%r.%p.log", "TRAINSHIM_LOG_BUFFER=1.5MiB",
                    "TRAINSHIM_LOG=/second/ignored.log", NULL};
    CHECK(load(envp) == 0, "valid variables: %s", err_text);
    CHECK(!err_text[0], "nothing printed: %s", err_text);
    CHECK(cfg.verbose, "verbose");
    CHECK(!strcmp(cfg.log, "/tmp/run.%r.%p.log"), "first of duplicate variables wins, as getenv: %s", cfg.log);
    CHECK(cfg.log_buffer == 3 << 19, "log_buffer %llu", (unsigned long long)cfg.log_buffer);
    CHECK(ts_option_source(&cfg, TS_OPT_LOG) == TS_SRC_ENV, "source env");
    CHECK(ts_option_source(&cfg, TS_OPT_STRICT) == TS_SRC_DEFAULT, "source default");
    /* the string is a copy: changing the environment later changes nothing */
    char value[] = "TRAINSHIM_LOG=abc.log";
    char *envp2[] = {value, NULL};
    load(envp2);
    value[14] = 'X';
    CHECK(!strcmp(cfg.log, "abc.log"), "path copied out of the environment: %s", cfg.log);
}

/* One bad value: exactly one line, in the documented form, default kept. */
static void expect_one_warning(char *assignment, const char *why_part, const char *using)
{
    char *envp[] = {assignment, NULL};
    int problems = load(envp);
    char want_head[512];
    int name_len = (int)(strchr(assignment, '=') - assignment) + 1;
    if (strlen(assignment + name_len) <= 200)
        snprintf(want_head, sizeof want_head, "trainshim: warning: %s: ", assignment);
    else /* longer values are shown shortened to 200 characters */
        snprintf(want_head, sizeof want_head, "trainshim: warning: %.*s...: ", name_len + 200, assignment);
    char want_tail[256];
    snprintf(want_tail, sizeof want_tail, "; using %s\n", using);
    size_t len = strlen(err_text), tl = strlen(want_tail);
    CHECK(problems == 1, "%s: problems %d", assignment, problems);
    CHECK(count_lines(err_text) == 1, "%s: exactly one line, got: %s", assignment, err_text);
    CHECK(!strncmp(err_text, want_head, strlen(want_head)), "%s: head, got: %s", assignment, err_text);
    CHECK(len > tl && !strcmp(err_text + len - tl, want_tail), "%s: tail '%s', got: %s", assignment, want_tail,
          err_text);
    CHECK(strstr(err_text, why_part), "%s: reason '%s', got: %s", assignment, why_part, err_text);
}

static void test_bad_values(void)
{
    expect_one_warning("TRAINSHIM_LOG_BUFFER=12Q", "suffix", "default 256KiB");
    expect_one_warning("TRAINSHIM_LOG_BUFFER=-1", "negative", "default 256KiB");
    expect_one_warning("TRAINSHIM_LOG_BUFFER=1G ", "suffix", "default 256KiB");
    expect_one_warning("TRAINSHIM_LOG_BUFFER=99999999999999999999", "overflow", "default 256KiB");
    expect_one_warning("TRAINSHIM_LOG_BUFFER=16777216TiB", "overflow", "default 256KiB");
    expect_one_warning("TRAINSHIM_LOG_BUFFER=", "empty", "default 256KiB");
    CHECK(cfg.log_buffer == 256 << 10, "default kept: %llu", (unsigned long long)cfg.log_buffer);
    expect_one_warning("TRAINSHIM_VERBOSE=maybe", "boolean", "default 0");
    CHECK(!cfg.verbose, "default kept");
    expect_one_warning("TRAINSHIM_STRICT=2", "boolean", "default 0");
    expect_one_warning("TRAINSHIM_LOG=x.%d.log", "escape", "default trainshim.%h.%p.log");
    expect_one_warning("TRAINSHIM_LOG=", "empty", "default trainshim.%h.%p.log");
    CHECK(!strcmp(cfg.log, "trainshim.%h.%p.log"), "default path kept: %s", cfg.log);
    expect_one_warning("TRAINSHIM=sometimes", "boolean", "default 1 (enabled)");
    CHECK(!ts_config_disabled(&cfg), "a bad TRAINSHIM leaves the shim on");

    static char huge[TS_CONFIG_STRSPACE + 64];
    memcpy(huge, "TRAINSHIM_LOG=", 14);
    memset(huge + 14, 'a', sizeof huge - 15);
    expect_one_warning(huge, "too long", "default trainshim.%h.%p.log");

    /* several bad values: one line each */
    char *envp[] = {"TRAINSHIM_LOG_BUFFER=x", "TRAINSHIM_VERBOSE=x", "TRAINSHIM_LOG=%", NULL};
    CHECK(load(envp) == 3 && count_lines(err_text) == 3, "three problems, three lines: %s", err_text);
}

static void test_switch(void)
{
    char *off[] = {"TRAINSHIM=0", NULL}, *on[] = {"TRAINSHIM=1", NULL}, *no[] = {"TRAINSHIM=no", NULL};
    load(off);
    CHECK(ts_config_disabled(&cfg) && !err_text[0], "TRAINSHIM=0 disables quietly");
    load(no);
    CHECK(ts_config_disabled(&cfg), "TRAINSHIM=no disables");
    load(on);
    CHECK(!ts_config_disabled(&cfg) && !err_text[0], "TRAINSHIM=1");
}

static void test_conf(void)
{
    char *envp[] = {"TRAINSHIM_CONF=log_buffer:1MiB,VERBOSE:true, Log : run.%p.log ,,", NULL};
    CHECK(load(envp) == 0 && !err_text[0], "valid CONF: %s", err_text);
    CHECK(cfg.log_buffer == 1 << 20 && cfg.verbose && !strcmp(cfg.log, "run.%p.log"),
          "CONF values: %llu %d '%s'", (unsigned long long)cfg.log_buffer, cfg.verbose, cfg.log);
    CHECK(ts_option_source(&cfg, TS_OPT_LOG_BUFFER) == TS_SRC_CONF, "source CONF");

    char *dup[] = {"TRAINSHIM_CONF=log_buffer:8K,log_buffer:16K", NULL};
    CHECK(load(dup) == 0 && cfg.log_buffer == 16384, "later CONF duplicate wins");

    /* the individual variable wins, in either order in the environment */
    char *prec1[] = {"TRAINSHIM_CONF=log_buffer:8K", "TRAINSHIM_LOG_BUFFER=4K", NULL};
    char *prec2[] = {"TRAINSHIM_LOG_BUFFER=4K", "TRAINSHIM_CONF=log_buffer:8K", NULL};
    CHECK(load(prec1) == 0 && cfg.log_buffer == 4096, "variable wins: %llu", (unsigned long long)cfg.log_buffer);
    CHECK(ts_option_source(&cfg, TS_OPT_LOG_BUFFER) == TS_SRC_ENV, "source env");
    CHECK(load(prec2) == 0 && cfg.log_buffer == 4096, "variable wins (2)");

    /* a bad variable falls back to a good CONF value, and says so */
    char *fall[] = {"TRAINSHIM_CONF=log_buffer:16K", "TRAINSHIM_LOG_BUFFER=2X", NULL};
    CHECK(load(fall) == 1 && cfg.log_buffer == 16384, "falls back to CONF: %llu", (unsigned long long)cfg.log_buffer);
    CHECK(count_lines(err_text) == 1 && strstr(err_text, "trainshim: warning: TRAINSHIM_LOG_BUFFER=2X: ") &&
              strstr(err_text, "; using TRAINSHIM_CONF value 16K\n"),
          "fallback message: %s", err_text);

    /* a bad CONF value, shadowed by a good variable */
    char *shadow[] = {"TRAINSHIM_CONF=log_buffer:2X", "TRAINSHIM_LOG_BUFFER=8K", NULL};
    CHECK(load(shadow) == 1 && cfg.log_buffer == 8192, "variable used");
    CHECK(count_lines(err_text) == 1 && strstr(err_text, "trainshim: warning: TRAINSHIM_CONF: LOG_BUFFER:2X: "),
          "CONF value message: %s", err_text);

    char *bad[] = {"TRAINSHIM_CONF=log_buffer:x", NULL};
    CHECK(load(bad) == 1 && count_lines(err_text) == 1 && strstr(err_text, "; using default 256KiB\n"),
          "bad CONF value: %s", err_text);

    char *unknown[] = {"TRAINSHIM_CONF=no_such_option:1,verbose:1", NULL};
    CHECK(load(unknown) == 1 && count_lines(err_text) == 1 && strstr(err_text, "'no_such_option'") &&
              strstr(err_text, "unknown option") && cfg.verbose,
          "unknown CONF key: %s", err_text);

    char *typo[] = {"TRAINSHIM_CONF=log_bufer:1K", NULL};
    CHECK(load(typo) == 1 && strstr(err_text, "did you mean TRAINSHIM_LOG_BUFFER"), "suggestion: %s", err_text);

    char *novalue[] = {"TRAINSHIM_CONF=verbose", NULL};
    CHECK(load(novalue) == 1 && count_lines(err_text) == 1 && strstr(err_text, "name:value"),
          "entry without colon: %s", err_text);

    char *empty[] = {"TRAINSHIM_CONF=", NULL};
    CHECK(load(empty) == 0 && !err_text[0], "empty CONF is nothing");
}

static void test_unknown_variables(void)
{
    char *envp[] = {"TRAINSHIM_NO_SUCH=1", NULL};
    CHECK(load(envp) == 1 && count_lines(err_text) == 1 &&
              !strncmp(err_text, "trainshim: warning: TRAINSHIM_NO_SUCH: unknown variable", 55),
          "unknown variable: %s", err_text);
    char *typo[] = {"TRAINSHIM_VERBOS=1", NULL};
    CHECK(load(typo) == 1 && strstr(err_text, "did you mean TRAINSHIM_VERBOSE?") && !cfg.verbose,
          "typo suggestion: %s", err_text);
    char *lower[] = {"TRAINSHIM_verbose=1", NULL};
    CHECK(load(lower) == 1 && !cfg.verbose, "variable names are case-sensitive: %s", err_text);
}

/* ---- STRICT: fatal, in a child ---- */
static void strict_child(void *arg)
{
    static struct ts_config c;
    int problems = ts_config_load(&c, arg, true);
    _exit(problems == 0 ? 0 : 42); /* 42: strict did not exit */
}

static void test_strict(void)
{
    char out[8192];
    char *bad[] = {"TRAINSHIM_STRICT=1", "TRAINSHIM_LOG_BUFFER=12Q", NULL};
    int st = in_child(strict_child, bad, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1, "strict exits 1, status %#x", st);
    CHECK(!strncmp(out, "trainshim: error: TRAINSHIM_LOG_BUFFER=12Q: ", 44) && !strstr(out, "warning"),
          "strict message is an error: %s", out);
    CHECK(strstr(out, "TRAINSHIM_STRICT"), "says why it is fatal: %s", out);

    char *via_conf[] = {"TRAINSHIM_CONF=strict:yes", "TRAINSHIM_NOPE=1", NULL};
    st = in_child(strict_child, via_conf, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(out, "trainshim: error: TRAINSHIM_NOPE"),
          "strict from CONF, unknown variable fatal: %#x %s", st, out);

    char *conf_key[] = {"TRAINSHIM_STRICT=1", "TRAINSHIM_CONF=bogus:1", NULL};
    st = in_child(strict_child, conf_key, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(out, "trainshim: error: TRAINSHIM_CONF: 'bogus'"),
          "unknown CONF key fatal: %s", out);

    char *good[] = {"TRAINSHIM_STRICT=1", "TRAINSHIM_LOG_BUFFER=1M", NULL};
    st = in_child(strict_child, good, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !out[0], "strict with a valid config runs on: %#x %s", st, out);

    char *bad_strict[] = {"TRAINSHIM_STRICT=sure", NULL};
    st = in_child(strict_child, bad_strict, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42 && strstr(out, "trainshim: warning: TRAINSHIM_STRICT=sure"),
          "an invalid STRICT is a warning, not strict: %#x %s", st, out);

    char *off[] = {"TRAINSHIM_STRICT=0", "TRAINSHIM_LOG_BUFFER=x", NULL};
    st = in_child(strict_child, off, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42 && strstr(out, "warning"), "STRICT=0: %#x %s", st, out);

    /* allow_exit false: returns the problems instead of exiting */
    CHECK(load(bad) == 1 && strstr(err_text, "trainshim: error: "), "no exit when not allowed");
}

/* ---- VERBOSE and ts_cfg(): the process configuration, in a child ---- */
static void *call_cfg(void *arg)
{
    (void)arg;
    return (void *)ts_cfg();
}

static void verbose_child(void *arg)
{
    for (char **e = arg; *e; e++)
        putenv(*e);
    pthread_t t[8];
    void *r[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, call_cfg, NULL);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], &r[i]);
    for (int i = 0; i < 8; i++)
        if (r[i] != r[0] || r[0] != ts_cfg())
            _exit(3);
    if (ts_cfg()->log_buffer != (2u << 20))
        _exit(4);
    char text[4096];
    size_t need = ts_config_format(text, sizeof text);
    if (need != strlen(text) || !strstr(text, "TRAINSHIM_LOG_BUFFER=2097152\n"))
        _exit(5);
    _exit(0);
}

static void off_child(void *arg)
{
    for (char **e = arg; *e; e++)
        putenv(*e);
    const struct ts_config *c = ts_cfg();
    _exit(ts_config_disabled(c) && !c->verbose && !c->strict && c->log_buffer == 256 << 10 ? 0 : 6);
}

static void test_verbose(void)
{
    char out[16384];
    char *verbose[] = {"TRAINSHIM_VERBOSE=1", "TRAINSHIM_LOG_BUFFER=2M", NULL};
    int st = in_child(verbose_child, verbose, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ts_cfg child status %#x", st);
    const char *head = "trainshim: effective configuration (pid ";
    CHECK(!strncmp(out, head, strlen(head)), "verbose header: %s", out);
    CHECK(strstr(out, "trainshim:   TRAINSHIM_LOG_BUFFER=2097152 (variable)\n") &&
              strstr(out, "trainshim:   TRAINSHIM_STRICT=0 (default)\n"),
          "verbose lines: %s", out);
    CHECK(count_lines(out) == 1 + TS_OPTION_COUNT, "printed once, one line per option: %s", out);

    char *off[] = {"TRAINSHIM=0", "TRAINSHIM_VERBOSE=1", "TRAINSHIM_LOG_BUFFER=bad", "TRAINSHIM_BOGUS=1",
                   "TRAINSHIM_STRICT=1", NULL};
    st = in_child(off_child, off, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !out[0], "TRAINSHIM=0: ts_cfg() silent, defaults: %#x %s", st, out);

    char *quiet[] = {"TRAINSHIM_LOG_BUFFER=2M", NULL};
    st = in_child(verbose_child, quiet, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !out[0], "quiet without VERBOSE: %#x %s", st, out);
}

static void test_format(void)
{
    char *envp[] = {"TRAINSHIM_LOG=a\nb.log", "TRAINSHIM_LOG_BUFFER=8K", NULL};
    load(envp);
    char text[4096];
    size_t need = ts_config_format_cfg(&cfg, text, sizeof text);
    CHECK(need == strlen(text), "length %zu vs %zu", need, strlen(text));
    CHECK(count_lines(text) == TS_OPTION_COUNT, "one line per option: %s", text);
    CHECK(strstr(text, "TRAINSHIM_LOG=a?b.log\n"), "control characters replaced: %s", text);
    CHECK(strstr(text, "TRAINSHIM_LOG_BUFFER=8192\n") && strstr(text, "TRAINSHIM_STRICT=0\n"), "values: %s", text);
    char small[10];
    size_t need2 = ts_config_format_cfg(&cfg, small, sizeof small);
    CHECK(need2 == need && strlen(small) == sizeof small - 1 && !strncmp(small, text, sizeof small - 1),
          "truncated like snprintf: %zu '%s'", need2, small);
    CHECK(ts_config_format_cfg(&cfg, NULL, 0) == need, "n = 0 measures");
}

int main(void)
{
    test_defaults();
    test_variables();
    test_bad_values();
    test_switch();
    test_conf();
    test_unknown_variables();
    test_strict();
    test_verbose();
    test_format();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_config_env: all checks passed\n");
    return 0;
}
