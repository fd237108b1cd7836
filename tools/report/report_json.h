/* report_json.h: the small JSON writer of `trainshim report`
 * (tools/report/report_json.c): pretty-printed, keys in the order written, strings
 * always valid UTF-8.  The JSON output is a contract (docs/log-format.md). */
#ifndef TRAINSHIM_REPORT_JSON_H
#define TRAINSHIM_REPORT_JSON_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report/report_acct.h"

struct json {
    FILE *f;
    int depth;
    bool first[32];
};

/* The separator before the next member or element. */
void j_sep(struct json *j);
/* A JSON string from raw bytes (escaped; invalid UTF-8 becomes U+FFFD). */
void j_raw_string(struct json *j, const char *s, size_t n);
/* key: NULL inside an array.  c: '{' or '['. */
void j_open(struct json *j, const char *key, char c);
void j_close(struct json *j, char c);
void j_key(struct json *j, const char *k);
void j_u64(struct json *j, const char *k, uint64_t v);
void j_i64(struct json *j, const char *k, int64_t v);
void j_num(struct json *j, const char *k, double v);
void j_bool(struct json *j, const char *k, bool v);
/* s NULL: null */
void j_str(struct json *j, const char *k, const char *s);
/* a rank, null when unknown (< 0) */
void j_rank(struct json *j, const char *k, int v);
struct tslog;
/* The log's "devices" array: ordinal, name, memory, compute capability, SMs,
 * PCI bus id (the JSON report's RUN part and the HTML page's data). */
void j_devices(struct json *j, const struct tslog *log);
/* The writer as the accounting and GPU parts take it (report_acct.h). */
struct acct_json acct_json_of(struct json *j);
#endif
