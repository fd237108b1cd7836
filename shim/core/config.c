/* config.c: the option table (shim/core/options.def), value parsers, and the
 * environment loader behind ts_cfg().  No allocation: values live in the
 * ts_config struct (strings in its own strspace_). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/config.h"
#include "core/core.h"

#define TS_TYPENAME_TS_BOOL "bool"
#define TS_TYPENAME_TS_SIZE "size"
#define TS_TYPENAME_TS_COUNT "count"
#define TS_TYPENAME_TS_ENUM "enum"
#define TS_TYPENAME_TS_PATH "path"
#define TS_TYPENAME_TS_STRING "string"
#define TS_TYPENAME_TS_FRACTION_OR_SIZE "fraction-or-size"

static const struct ts_option_info options[TS_OPTION_COUNT] = {
#define TS_OPTION(NAME, field, type, def, values, help)                                                      \
    { #NAME, "TRAINSHIM_" #NAME, type, TS_TYPENAME_##type, def, values, help },
#include "core/options.def"
#undef TS_OPTION
};

static const size_t field_offset[TS_OPTION_COUNT] = {
#define TS_OPTION(NAME, field, type, def, values, help) offsetof(struct ts_config, field),
#include "core/options.def"
#undef TS_OPTION
};

const struct ts_option_info *ts_option_at(int i)
{
    return i >= 0 && i < TS_OPTION_COUNT ? &options[i] : NULL;
}

int ts_option_find(const char *name, size_t len)
{
    if (len >= 10 && !strncasecmp(name, "TRAINSHIM_", 10)) {
        name += 10;
        len -= 10;
    }
    for (int i = 0; i < TS_OPTION_COUNT; i++)
        if (strlen(options[i].name) == len && !strncasecmp(options[i].name, name, len))
            return i;
    return -1;
}

/* ---- parsers --------------------------------------------------------------- */

const char *ts_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = { "1", "true", "yes", "on" };
    static const char *const no[] = { "0", "false", "no", "off" };
    if (!s || !*s)
        return "empty value";
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) {
            *out = true;
            return NULL;
        }
        if (!strcasecmp(s, no[i])) {
            *out = false;
            return NULL;
        }
    }
    return "not a boolean (use 1/0, true/false, yes/no, on/off)";
}

/* A decimal number "123" or "1.25": whole part, and the fractional part as
 * frac_num / frac_den (at most 18 digits kept: below a millionth of a byte
 * even for T suffixes).  *end is the first character after the number. */
static const char *parse_decimal(const char *s, const char **end, uint64_t *whole, uint64_t *frac_num,
                                 uint64_t *frac_den)
{
    if (!s || !*s)
        return "empty value";
    if (*s == '-')
        return "negative value";
    if (!isdigit((unsigned char)*s))
        return "not a number";
    uint64_t w = 0;
    for (; isdigit((unsigned char)*s); s++)
        if (__builtin_mul_overflow(w, 10, &w) || __builtin_add_overflow(w, (uint64_t)(*s - '0'), &w))
            return "too large (overflows 64 bits)";
    uint64_t num = 0, den = 1;
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s))
            return "no digit after the decimal point";
        for (int k = 0; isdigit((unsigned char)*s); s++, k++)
            if (k < 18) {
                num = num * 10 + (uint64_t)(*s - '0');
                den *= 10;
            }
    }
    *whole = w;
    *frac_num = num;
    *frac_den = den;
    *end = s;
    return NULL;
}

const char *ts_parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } suffixes[] = {
        { "", 1 },
        { "b", 1 },
        { "k", 1ull << 10 },
        { "m", 1ull << 20 },
        { "g", 1ull << 30 },
        { "t", 1ull << 40 },
        { "kib", 1ull << 10 },
        { "mib", 1ull << 20 },
        { "gib", 1ull << 30 },
        { "tib", 1ull << 40 },
        { "kb", 1000ull },
        { "mb", 1000000ull },
        { "gb", 1000000000ull },
        { "tb", 1000000000000ull },
    };
    const char *rest;
    uint64_t whole, num, den;
    const char *err = parse_decimal(s, &rest, &whole, &num, &den);
    if (err)
        return err;
    uint64_t mult = 0;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
        if (!strcasecmp(rest, suffixes[i].suffix)) {
            mult = suffixes[i].mult;
            break;
        }
    if (!mult)
        return "unknown size suffix (use B, K/M/G/T, KiB/MiB/GiB/TiB or KB/MB/GB/TB)";
    if (mult == 1 && num)
        return "a fractional number of bytes needs a unit suffix";
    uint64_t bytes;
    if (__builtin_mul_overflow(whole, mult, &bytes))
        return "too large (overflows 64 bits)";
    uint64_t part = (uint64_t)((unsigned __int128)num * mult / den);
    if (__builtin_add_overflow(bytes, part, &bytes))
        return "too large (overflows 64 bits)";
    *out = bytes;
    return NULL;
}

const char *ts_parse_count(const char *s, uint64_t *out)
{
    const char *rest;
    uint64_t whole, num, den;
    const char *err = parse_decimal(s, &rest, &whole, &num, &den);
    if (err)
        return err;
    if (den != 1 || *rest)
        return "not a whole number";
    *out = whole;
    return NULL;
}

const char *ts_parse_enum(const char *s, const char *values, int *out)
{
    if (!s || !*s)
        return "empty value";
    size_t len = strlen(s);
    int index = 0;
    for (const char *v = values; v && *v; index++) {
        const char *bar = strchr(v, '|');
        size_t vlen = bar ? (size_t)(bar - v) : strlen(v);
        if (vlen == len && !strncasecmp(v, s, len)) {
            *out = index;
            return NULL;
        }
        if (!bar)
            break;
        v = bar + 1;
    }
    return "not one of the allowed values";
}

const char *ts_check_template(const char *s)
{
    if (!s || !*s)
        return "empty path";
    for (; *s; s++) {
        if (*s != '%')
            continue;
        s++;
        if (!*s)
            return "ends with a lone % (write %% for a percent sign)";
        if (strchr("phrl%", *s))
            continue;
        if (*s != 'q')
            return "unknown %-escape (known: %p %h %r %l %q{VAR} %%)";
        if (s[1] != '{')
            return "%q needs a variable name in braces: %q{VAR}";
        s += 2;
        if (!(isalpha((unsigned char)*s) || *s == '_'))
            return "%q{VAR}: VAR must be a variable name";
        while (isalnum((unsigned char)*s) || *s == '_')
            s++;
        if (*s != '}')
            return "%q{VAR}: VAR must be a variable name closed by }";
    }
    return NULL;
}

const char *ts_parse_fraction_or_size(const char *s, struct ts_fraction_or_size *out)
{
    const char *rest;
    uint64_t whole, num, den;
    const char *err = parse_decimal(s, &rest, &whole, &num, &den);
    if (err)
        return err;
    double value = (double)whole + (double)num / (double)den;
    if (!strcmp(rest, "%")) {
        if (value <= 0 || value > 100)
            return "a percentage must be in (0, 100]";
        *out = (struct ts_fraction_or_size){ value / 100, 0 };
        return NULL;
    }
    if (*rest) { /* a size with a suffix */
        uint64_t bytes;
        if ((err = ts_parse_size(s, &bytes)))
            return err;
        *out = (struct ts_fraction_or_size){ 0, bytes };
        return NULL;
    }
    if (value == 0) {
        *out = (struct ts_fraction_or_size){ 0, 0 };
        return NULL;
    }
    if (value <= 1) {
        *out = (struct ts_fraction_or_size){ value, 0 };
        return NULL;
    }
    if (num)
        return "a fraction must be in (0, 1]; a size needs a whole number or a unit suffix";
    *out = (struct ts_fraction_or_size){ 0, whole };
    return NULL;
}

/* ---- values in a struct ts_config ------------------------------------------ */

static void *field(struct ts_config *cfg, int i) { return (char *)cfg + field_offset[i]; }
static const void *cfield(const struct ts_config *cfg, int i) { return (const char *)cfg + field_offset[i]; }

/* Copies s into cfg's string space; NULL when it does not fit. */
static const char *keep_string(struct ts_config *cfg, const char *s)
{
    size_t len = strlen(s) + 1;
    if (len > TS_CONFIG_STRSPACE - cfg->strused_)
        return NULL;
    char *dst = cfg->strspace_ + cfg->strused_;
    memcpy(dst, s, len);
    cfg->strused_ += len;
    return dst;
}

/* String options with a syntax of their own: checked when set, so a bad
 * value gets its warning at start, not a silent surprise in the report. */
static const char *check_string(int i, const char *s)
{
    if (i == TS_OPT_PEAK_TFLOPS && *s) {
        double peaks[TS_PEAK_PRECISION_COUNT];
        const char *err = ts_parse_rates(s, TS_PEAK_PRECISIONS, peaks, TS_PEAK_PRECISION_COUNT);
        return err ? "not a number > 0 or a list type=number,... (types " TS_PEAK_PRECISIONS ")" : NULL;
    }
    return NULL;
}

/* Parses s as option i's value into cfg (untouched on error). */
static const char *parse_into(struct ts_config *cfg, int i, const char *s)
{
    const struct ts_option_info *o = &options[i];
    void *f = field(cfg, i);
    const char *err;
    switch (o->type) {
    case TS_BOOL: return ts_parse_bool(s, f);
    case TS_SIZE: return ts_parse_size(s, f);
    case TS_COUNT: return ts_parse_count(s, f);
    case TS_ENUM: return ts_parse_enum(s, o->values, f);
    case TS_FRACTION_OR_SIZE: return ts_parse_fraction_or_size(s, f);
    case TS_PATH:
        if ((err = ts_check_template(s)))
            return err;
        /* fall through */
    case TS_STRING: {
        if ((err = check_string(i, s)))
            return err;
        const char *kept = keep_string(cfg, s);
        if (!kept)
            return "too long";
        *(const char **)f = kept;
        return NULL;
    }
    }
    return "unknown option type";
}

bool ts_config_disabled(const struct ts_config *cfg) { return cfg->disabled_; }
enum ts_option_source ts_option_source(const struct ts_config *cfg, int i)
{
    return i >= 0 && i < TS_OPTION_COUNT ? (enum ts_option_source)cfg->source_[i] : TS_SRC_DEFAULT;
}

static size_t enum_name(const char *values, int index, const char **name)
{
    const char *v = values ? values : "";
    for (int k = 0; k < index && strchr(v, '|'); k++)
        v = strchr(v, '|') + 1;
    *name = v;
    const char *bar = strchr(v, '|');
    return bar ? (size_t)(bar - v) : strlen(v);
}

size_t ts_option_format_value(const struct ts_config *cfg, int i, char *buf, size_t n)
{
    const struct ts_option_info *o = &options[i];
    const void *f = cfield(cfg, i);
    int len = 0;
    switch (o->type) {
    case TS_BOOL: len = snprintf(buf, n, "%d", *(const bool *)f ? 1 : 0); break;
    case TS_SIZE:
    case TS_COUNT: len = snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)f); break;
    case TS_ENUM: {
        const char *name;
        size_t nlen = enum_name(o->values, *(const int *)f, &name);
        len = snprintf(buf, n, "%.*s", (int)nlen, name);
        break;
    }
    case TS_FRACTION_OR_SIZE: {
        const struct ts_fraction_or_size *v = f;
        len = v->fraction > 0 ? snprintf(buf, n, "%.6g", v->fraction)
                              : snprintf(buf, n, "%llu", (unsigned long long)v->bytes);
        break;
    }
    case TS_PATH:
    case TS_STRING: {
        const char *s = *(const char *const *)f;
        if (!s)
            s = "";
        len = snprintf(buf, n, "%s", s);
        /* one line per option: no control characters */
        for (size_t k = 0; n && k < (size_t)len && k < n - 1; k++)
            if ((unsigned char)buf[k] < 0x20 || buf[k] == 0x7f)
                buf[k] = '?';
        break;
    }
    }
    return len < 0 ? 0 : (size_t)len;
}

size_t ts_config_format_cfg(const struct ts_config *cfg, char *buf, size_t n)
{
    size_t total = 0;
    for (int i = 0; i < TS_OPTION_COUNT; i++) {
        char line[TS_CONFIG_STRSPACE + 64];
        size_t len = (size_t)snprintf(line, sizeof line, "%s=", options[i].env);
        len += ts_option_format_value(cfg, i, line + len, sizeof line - len - 1);
        if (len > sizeof line - 2)
            len = sizeof line - 2;
        line[len++] = '\n';
        if (total + 1 < n)
            memcpy(buf + total, line, len < n - 1 - total ? len : n - 1 - total);
        total += len;
    }
    if (n)
        buf[total < n ? total : n - 1] = '\0';
    return total;
}

/* ---- loading from an environment -------------------------------------------- */

struct raw_value {
    const char *text; /* NUL-terminated copy or pointer into envp */
    bool present;
};

/* Edit distance of two short names, for "did you mean" (case-insensitive). */
static int distance(const char *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    if (alen > 40 || blen > 40)
        return 99;
    int row[41];
    for (size_t j = 0; j <= blen; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= alen; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= blen; j++) {
            int up = row[j];
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[blen];
}

static const char *suggest(const char *name, size_t len)
{
    /* a typo, not a different word: 1 edit in short names, 2 in longer ones */
    int best = len >= 5 ? 3 : 2, found = -1;
    for (int i = 0; i < TS_OPTION_COUNT; i++) {
        int d = distance(name, len, options[i].name);
        if (d < best) {
            best = d;
            found = i;
        }
    }
    return found < 0 ? NULL : options[found].env;
}

struct loader {
    bool strict;
    bool quiet; /* the first pass, which only looks for STRICT */
    int problems;
};

/* One problem, one line: a warning, or an error when strict. */
static void problem(struct loader *ld, const char *what, const char *why, const char *using)
{
    ld->problems++;
    if (ld->quiet)
        return;
    if (ld->strict)
        ts_error("%s: %s (fatal: TRAINSHIM_STRICT is set)", what, why);
    else if (using)
        ts_warn("%s: %s; using %s", what, why, using);
    else
        ts_warn("%s: %s", what, why);
}

/* "TRAINSHIM_X=value" or "TRAINSHIM_CONF: key:value" for messages, long
 * values shortened. */
static void describe(char *buf, size_t n, bool from_conf, const char *key, size_t keylen, const char *value)
{
    size_t vlen = strlen(value);
    int show = vlen > 200 ? 200 : (int)vlen;
    const char *more = vlen > 200 ? "..." : "";
    if (from_conf)
        snprintf(buf, n, "TRAINSHIM_CONF: %.*s:%.*s%s", (int)keylen, key, show, value, more);
    else
        snprintf(buf, n, "%.*s=%.*s%s", (int)keylen, key, show, value, more);
}

static void unknown_name(struct loader *ld, bool from_conf, const char *name, size_t len)
{
    char what[160], why[160];
    const char *near = suggest(name, len);
    if (from_conf)
        snprintf(what, sizeof what, "TRAINSHIM_CONF: '%.*s'", len > 100 ? 100 : (int)len, name);
    else
        snprintf(what, sizeof what, "TRAINSHIM_%.*s", len > 100 ? 100 : (int)len, name);
    if (near)
        snprintf(why, sizeof why, "unknown %s (did you mean %s? see `trainshim config`)",
                 from_conf ? "option" : "variable", near);
    else
        snprintf(why, sizeof why, "unknown %s (see `trainshim config`)", from_conf ? "option" : "variable");
    problem(ld, what, why, NULL);
}

/* Splits TRAINSHIM_CONF into conf[] values (copied into scratch, which must
 * outlive them). */
static void split_conf(struct loader *ld, const char *conf, struct raw_value *vals, char *scratch,
                       size_t scratch_len)
{
    size_t used = 0;
    const char *p = conf;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *a = p, *b = end;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (a < b) {
            const char *colon = memchr(a, ':', (size_t)(b - a));
            if (!colon) {
                char what[260];
                snprintf(what, sizeof what, "TRAINSHIM_CONF: '%.*s'", b - a > 200 ? 200 : (int)(b - a), a);
                problem(ld, what, "not name:value", NULL);
            } else {
                const char *k1 = colon;
                while (k1 > a && isspace((unsigned char)k1[-1]))
                    k1--;
                const char *v0 = colon + 1;
                while (v0 < b && isspace((unsigned char)*v0))
                    v0++;
                int i = ts_option_find(a, (size_t)(k1 - a));
                size_t vlen = (size_t)(b - v0);
                if (i < 0) {
                    unknown_name(ld, true, a, (size_t)(k1 - a));
                } else if (used + vlen + 1 > scratch_len) {
                    problem(ld, "TRAINSHIM_CONF", "too long", NULL);
                } else { /* a later duplicate wins, as a later assignment would */
                    memcpy(scratch + used, v0, vlen);
                    scratch[used + vlen] = '\0';
                    vals[i].text = scratch + used;
                    vals[i].present = true;
                    used += vlen + 1;
                }
            }
        }
        p = *end ? end + 1 : end;
    }
}

/* STRICT decides how every other problem is reported, so it is read first,
 * quietly (its own bad value is reported like any other). */
static bool read_strict(const struct raw_value *env, const struct raw_value *conf)
{
    bool strict = false;
    if (env[TS_OPT_STRICT].present && !ts_parse_bool(env[TS_OPT_STRICT].text, &strict))
        return strict;
    if (conf[TS_OPT_STRICT].present && !ts_parse_bool(conf[TS_OPT_STRICT].text, &strict))
        return strict;
    ts_parse_bool(options[TS_OPT_STRICT].def, &strict);
    return strict;
}

/* Numeric options with bounds: a value outside is reported and the nearest
 * bound is what takes effect (and what TRAINSHIM_VERBOSE prints). */
static const struct option_range {
    int option;
    uint64_t min, max;
} option_ranges[] = {
    { TS_OPT_LOG_BUFFER, TS_LOG_BUFFER_MIN, TS_LOG_BUFFER_MAX },
    { TS_OPT_COPY_CHUNK, TS_COPY_CHUNK_MIN, TS_COPY_CHUNK_MAX },
    { TS_OPT_COPY_THREADS, 0, TS_COPY_THREADS_MAX },
    { TS_OPT_STACKS, 0, TS_STACKS_MAX },
};

static void check_range(struct loader *ld, struct ts_config *cfg, int i)
{
    const struct ts_option_info *o = &options[i];
    for (size_t k = 0; k < sizeof option_ranges / sizeof option_ranges[0]; k++) {
        const struct option_range *r = &option_ranges[k];
        uint64_t *v = field(cfg, i);
        if (r->option != i || (*v >= r->min && *v <= r->max))
            continue;
        char what[200], why[120], using[80];
        snprintf(what, sizeof what, "%s=%llu", o->env, (unsigned long long)*v);
        snprintf(why, sizeof why, "out of range [%llu, %llu]", (unsigned long long)r->min,
                 (unsigned long long)r->max);
        *v = *v < r->min ? r->min : r->max;
        snprintf(using, sizeof using, "%llu", (unsigned long long)*v);
        problem(ld, what, why, using);
    }
    if (i == TS_OPT_MEMORY_LIMIT) {
        const struct ts_fraction_or_size *m = field(cfg, i);
        if (m->bytes && m->bytes < TS_MEMORY_LIMIT_PAGE) {
            char what[200];
            snprintf(what, sizeof what, "%s=%llu", o->env, (unsigned long long)m->bytes);
            problem(ld, what,
                    "is below one 2 MiB page, so every pooled allocation will fail (a size needs a unit, "
                    "e.g. 2GiB)",
                    NULL);
        }
    }
}

static void apply_option(struct loader *ld, struct ts_config *cfg, int i, const struct raw_value *env,
                         const struct raw_value *conf)
{
    const struct ts_option_info *o = &options[i];
    const char *env_err = NULL, *conf_err = NULL;
    if (conf->present) {
        conf_err = parse_into(cfg, i, conf->text);
        if (!conf_err)
            cfg->source_[i] = TS_SRC_CONF;
    }
    if (env->present) {
        env_err = parse_into(cfg, i, env->text);
        if (!env_err)
            cfg->source_[i] = TS_SRC_ENV;
    }
    char what[300], why[200], using[240];
    if (conf_err) {
        describe(what, sizeof what, true, o->name, strlen(o->name), conf->text);
        snprintf(why, sizeof why, "%s%s%s", conf_err, o->type == TS_ENUM ? ": " : "",
                 o->type == TS_ENUM ? o->values : "");
        if (env->present && !env_err)
            snprintf(using, sizeof using, "%s from %s", "the value", o->env);
        else
            snprintf(using, sizeof using, "default %s", *o->def ? o->def : "(empty)");
        problem(ld, what, why, using);
    }
    if (env_err) {
        describe(what, sizeof what, false, o->env, strlen(o->env), env->text);
        snprintf(why, sizeof why, "%s%s%s", env_err, o->type == TS_ENUM ? ": " : "",
                 o->type == TS_ENUM ? o->values : "");
        if (conf->present && !conf_err)
            snprintf(using, sizeof using, "TRAINSHIM_CONF value %.200s", conf->text);
        else
            snprintf(using, sizeof using, "default %s", *o->def ? o->def : "(empty)");
        problem(ld, what, why, using);
    }
}

/* Finds TRAINSHIM, TRAINSHIM_CONF and the TRAINSHIM_<option> variables in
 * envp (the first of duplicates, as getenv); reports unknown TRAINSHIM_*. */
static void scan_env(struct loader *ld, char *const *envp, struct raw_value *env, const char **conf_text,
                     const char **switch_text)
{
    for (char *const *e = envp; e && *e; e++) {
        const char *s = *e;
        if (!strncmp(s, "TRAINSHIM=", 10)) {
            if (!*switch_text)
                *switch_text = s + 10;
            continue;
        }
        if (strncmp(s, "TRAINSHIM_", 10))
            continue;
        const char *eq = strchr(s, '=');
        if (!eq)
            continue;
        size_t namelen = (size_t)(eq - s);
        if (namelen == 14 && !strncmp(s, "TRAINSHIM_CONF", 14)) {
            if (!*conf_text)
                *conf_text = eq + 1;
            continue;
        }
        int i = -1; /* variable names are case-sensitive, as in the shell */
        for (int k = 0; k < TS_OPTION_COUNT; k++)
            if (strlen(options[k].env) == namelen && !strncmp(options[k].env, s, namelen))
                i = k;
        if (i >= 0 && !env[i].present)
            env[i] = (struct raw_value){ eq + 1, true };
        else if (i < 0)
            unknown_name(ld, false, s + 10, namelen - 10);
    }
}

int ts_config_load(struct ts_config *cfg, char *const *envp, bool allow_exit)
{
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < TS_OPTION_COUNT; i++) {
        const char *err = parse_into(cfg, i, options[i].def);
        if (err) /* a defect in options.def; test_config_table catches it */
            ts_error("options.def: default '%s' of %s: %s", options[i].def, options[i].env, err);
        cfg->source_[i] = TS_SRC_DEFAULT;
    }
    struct raw_value env[TS_OPTION_COUNT] = { { 0 } }, conf[TS_OPTION_COUNT] = { { 0 } };
    const char *conf_text = NULL, *switch_text = NULL;
    char scratch[TS_CONFIG_STRSPACE];
    /* STRICT decides whether problems are warnings or errors: a quiet first
     * pass finds it, the second reports. */
    struct loader ld = { .quiet = true };
    scan_env(&ld, envp, env, &conf_text, &switch_text);
    if (conf_text)
        split_conf(&ld, conf_text, conf, scratch, sizeof scratch);
    ld = (struct loader){ .strict = read_strict(env, conf) };
    conf_text = switch_text = NULL;
    memset(env, 0, sizeof env);
    memset(conf, 0, sizeof conf);
    scan_env(&ld, envp, env, &conf_text, &switch_text);
    if (switch_text) {
        bool on = true;
        const char *err = ts_parse_bool(switch_text, &on);
        if (err) {
            char what[260];
            describe(what, sizeof what, false, "TRAINSHIM", 9, switch_text);
            problem(&ld, what, err, "default 1 (enabled)");
        }
        cfg->disabled_ = !on;
    }
    if (conf_text)
        split_conf(&ld, conf_text, conf, scratch, sizeof scratch);
    for (int i = 0; i < TS_OPTION_COUNT; i++) {
        apply_option(&ld, cfg, i, &env[i], &conf[i]);
        if (cfg->source_[i] != TS_SRC_DEFAULT)
            check_range(&ld, cfg, i);
    }
    if (ld.strict && ld.problems && allow_exit) {
        ts_error("invalid configuration; exiting because TRAINSHIM_STRICT is set");
        exit(1);
    }
    return ld.problems;
}

/* ---- the process configuration ---------------------------------------------- */

extern char **environ;
static struct ts_config process_cfg;
static pthread_once_t process_once = PTHREAD_ONCE_INIT;

static void print_effective(const struct ts_config *cfg)
{
    static const char *const source_names[] = { "default", "variable", "TRAINSHIM_CONF" };
    char text[8192];
    size_t used = (size_t)snprintf(text, sizeof text, "effective configuration (pid %d):\n", (int)getpid());
    for (int i = 0; i < TS_OPTION_COUNT && used < sizeof text; i++) {
        char value[1024];
        ts_option_format_value(cfg, i, value, sizeof value);
        used += (size_t)snprintf(text + used, sizeof text - used, "  %s=%s (%s)\n", options[i].env, value,
                                 source_names[cfg->source_[i]]);
    }
    ts_info("%s", text);
}

static void load_process_config(void)
{
    const char *sw = getenv("TRAINSHIM");
    bool on = true;
    if (sw && !ts_parse_bool(sw, &on) && !on) {
        /* TRAINSHIM=0: pure passthrough, so not a word about the other
         * variables either; every option keeps its default */
        char *none[] = { NULL };
        ts_config_load(&process_cfg, none, false);
        process_cfg.disabled_ = true;
        return;
    }
    ts_config_load(&process_cfg, environ, true);
    if (process_cfg.verbose && !process_cfg.disabled_)
        print_effective(&process_cfg);
}

const struct ts_config *ts_cfg(void)
{
    pthread_once(&process_once, load_process_config);
    return &process_cfg;
}

size_t ts_config_format(char *buf, size_t n) { return ts_config_format_cfg(ts_cfg(), buf, n); }
