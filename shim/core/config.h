/* config.h: trainshim's options, generated from the one table shim/core/options.def.
 *
 * ts_cfg() returns the process configuration: filled once (lazily, thread-safe)
 * from the environment, then read-only.  Every option is read from
 * TRAINSHIM_<NAME>=value or from TRAINSHIM_CONF=name:value,name:value (names
 * case-insensitive); the individual variable wins.  A value that does not
 * parse prints one "trainshim: warning: ...; using default D" line and keeps
 * the default (or the valid TRAINSHIM_CONF value it shadowed);
 * TRAINSHIM_STRICT=1 makes every such problem fatal (exit 1).
 *
 * Value syntax (the README says the same):
 *   bool   1/0, true/false, yes/no, on/off (any case)
 *   size   a whole or decimal number of bytes with an optional suffix:
 *          B; K M G T and KiB MiB GiB TiB = powers of 1024;
 *          KB MB GB TB = powers of 1000 (as in GNU coreutils).  Suffixes are
 *          case-insensitive; "1.5GiB" is allowed and rounded down to a whole
 *          byte; a bare number must be whole.
 *   count  a non-negative decimal integer
 *   enum   one of the '|'-separated names (any case), stored as its index
 *   path   a template: %p pid, %h host, %r rank, %l local rank, %q{VAR}
 *          environment variable VAR, %% a percent sign; any other % is invalid
 *   fraction-or-size  a number in (0, 1] or a percentage "90%" (fraction of
 *          device memory), "0" (none), or a size (bytes >= 2 need no suffix)
 */
#ifndef TRAINSHIM_CONFIG_H
#define TRAINSHIM_CONFIG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ts_option_type { TS_BOOL, TS_SIZE, TS_COUNT, TS_ENUM, TS_PATH, TS_STRING, TS_FRACTION_OR_SIZE };

/* Exactly one member is non-zero, or both are zero ("0": none). */
struct ts_fraction_or_size {
    double fraction; /* 0 < fraction <= 1: a fraction of device memory */
    uint64_t bytes;
};

#define TS_CTYPE_TS_BOOL bool
#define TS_CTYPE_TS_SIZE uint64_t
#define TS_CTYPE_TS_COUNT uint64_t
#define TS_CTYPE_TS_ENUM int
#define TS_CTYPE_TS_PATH const char *
#define TS_CTYPE_TS_STRING const char *
#define TS_CTYPE_TS_FRACTION_OR_SIZE struct ts_fraction_or_size

/* TS_OPT_<NAME>: the option's index in the table. */
enum ts_option_id {
#define TS_OPTION(NAME, field, type, def, values, help) TS_OPT_##NAME,
#include "core/options.def"
#undef TS_OPTION
    TS_OPTION_COUNT
};

/* Where an option's effective value came from. */
enum ts_option_source { TS_SRC_DEFAULT, TS_SRC_ENV, TS_SRC_CONF };

/* Space for path/string values copied out of the environment, so the
 * configuration never points into environ (which the program may change). */
#define TS_CONFIG_STRSPACE 8192

struct ts_config {
#define TS_OPTION(NAME, field, type, def, values, help) TS_CTYPE_##type field;
#include "core/options.def"
#undef TS_OPTION
    /* private: filled by ts_config_load */
    unsigned char source_[TS_OPTION_COUNT];
    bool disabled_; /* TRAINSHIM=0 */
    size_t strused_;
    char strspace_[TS_CONFIG_STRSPACE];
};

/* The process configuration (read from environ on first call, then constant).
 * With TRAINSHIM_VERBOSE=1 the first call prints the effective configuration. */
const struct ts_config *ts_cfg(void);

/* Fills *cfg from envp (a NULL-terminated "NAME=value" array), printing one
 * warning line per problem.  With strict on (TRAINSHIM_STRICT) and a problem:
 * exits with status 1 after printing the problems as errors, unless
 * allow_exit is false, then returns.  Returns the number of problems. */
int ts_config_load(struct ts_config *cfg, char *const *envp, bool allow_exit);

/* True when TRAINSHIM=0 (or false/no/off) in the environment the process
 * configuration was read from. */
bool ts_config_disabled(const struct ts_config *cfg);

/* "TRAINSHIM_<NAME>=value\n" lines for every option of the process
 * configuration, values in canonical machine form (sizes in bytes, bools
 * 0/1, enums by name, control characters in strings replaced by '?').  Like
 * snprintf: writes at most n bytes including the NUL and returns the length
 * the whole text needs. */
size_t ts_config_format(char *buf, size_t n);
/* The same for any configuration. */
size_t ts_config_format_cfg(const struct ts_config *cfg, char *buf, size_t n);

/* ---- the option table, for `trainshim config` ---------------------------- */
struct ts_option_info {
    const char *name; /* "LOG_BUFFER" */
    const char *env;  /* "TRAINSHIM_LOG_BUFFER" */
    enum ts_option_type type;
    const char *type_name; /* "size" */
    const char *def;       /* default, as written in options.def */
    const char *values;    /* enum names "a|b|c", or NULL */
    const char *help;
};
/* Option i (0 <= i < TS_OPTION_COUNT), or NULL. */
const struct ts_option_info *ts_option_at(int i);
/* Index of the option named NAME or TRAINSHIM_NAME (any case), or -1. */
int ts_option_find(const char *name, size_t len);
/* Option i's value in cfg, canonical form as in ts_config_format; returns
 * the length needed like snprintf. */
size_t ts_option_format_value(const struct ts_config *cfg, int i, char *buf, size_t n);
enum ts_option_source ts_option_source(const struct ts_config *cfg, int i);

/* ---- parsers, usable without an environment -------------------------------
 * Each returns NULL on success, else a static string saying why the whole
 * string s is not a valid value (the output is untouched then). */
const char *ts_parse_bool(const char *s, bool *out);
const char *ts_parse_size(const char *s, uint64_t *out);
const char *ts_parse_count(const char *s, uint64_t *out);
/* values: "a|b|c"; *out = index of s among them (case-insensitive). */
const char *ts_parse_enum(const char *s, const char *values, int *out);
/* Syntax check of a path template (see above). */
const char *ts_check_template(const char *s);
const char *ts_parse_fraction_or_size(const char *s, struct ts_fraction_or_size *out);
/* Rates: "989.4" (every name) or "name=number,..." (names: "a|b|c", any
 * case; the others 0).  Every number finite and > 0.  out has one slot per
 * name, in their order. */
const char *ts_parse_rates(const char *s, const char *names, double *out, int n);
/* TRAINSHIM_PEAK_TFLOPS's precision names, in enum ts_prec order
 * (observe/compute.h). */
#define TS_PEAK_PRECISIONS "fp64|fp32|tf32|fp16|bf16|fp8|int8"
#define TS_PEAK_PRECISION_COUNT 7

/* Ranges the consumers of these options can use (values outside are
 * reported, and the nearest bound is what takes effect). */
#define TS_LOG_BUFFER_MIN (4ull << 10)
#define TS_LOG_BUFFER_MAX (64ull << 20)
#define TS_COPY_CHUNK_MIN (64ull << 10)
#define TS_COPY_CHUNK_MAX (256ull << 20)
#define TS_COPY_THREADS_MAX 16
#define TS_STACKS_MAX 256
/* The allocator's page: a memory limit below it cannot serve anything. */
#define TS_MEMORY_LIMIT_PAGE (2ull << 20)
#endif
