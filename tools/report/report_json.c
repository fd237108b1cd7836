/* report_json.c: the JSON writer of `trainshim report` (report_json.h). */
#include <string.h>

#include "read/logread.h"
#include "report/report_json.h"

void j_sep(struct json *j)
{
    if (j->depth > 0 && !j->first[j->depth])
        fputc(',', j->f);
    if (j->depth > 0) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++)
            fputs("  ", j->f);
    }
    j->first[j->depth] = false;
}

/* A JSON string from raw bytes: escapes quotes, backslashes and control
 * characters, and replaces bytes that are not valid UTF-8 by U+FFFD, so the
 * output always parses. */
void j_raw_string(struct json *j, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', j->f);
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        if (c == '"' || c == '\\') {
            fputc('\\', j->f);
            fputc((int)c, j->f);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(j->f, "\\u%04x", c);
            i++;
        } else if (c < 0x80) {
            fputc((int)c, j->f);
            i++;
        } else {
            size_t k = c >= 0xc2 && c <= 0xdf   ? 2
                       : c >= 0xe0 && c <= 0xef ? 3
                       : c >= 0xf0 && c <= 0xf4 ? 4
                                                : 0;
            bool ok = k && i + k <= n;
            for (size_t t = 1; ok && t < k; t++)
                ok = (p[i + t] & 0xc0) == 0x80;
            if (ok && k == 3) { /* no overlongs, no surrogates */
                ok = !(c == 0xe0 && p[i + 1] < 0xa0) && !(c == 0xed && p[i + 1] >= 0xa0);
            }
            if (ok && k == 4)
                ok = !(c == 0xf0 && p[i + 1] < 0x90) && !(c == 0xf4 && p[i + 1] >= 0x90);
            if (ok) {
                fwrite(p + i, 1, k, j->f);
                i += k;
            } else {
                fputs("\\ufffd", j->f);
                i++;
            }
        }
    }
    fputc('"', j->f);
}

void j_key(struct json *j, const char *k)
{
    j_sep(j);
    if (k) { /* NULL: a value inside an array */
        j_raw_string(j, k, strlen(k));
        fputs(": ", j->f);
    }
    j->first[j->depth] = false;
}

void j_open(struct json *j, const char *key, char c)
{
    if (key)
        j_key(j, key);
    else
        j_sep(j);
    fputc(c, j->f);
    j->depth++;
    j->first[j->depth] = true;
}

void j_close(struct json *j, char c)
{
    bool empty = j->first[j->depth];
    j->depth--;
    if (!empty) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++)
            fputs("  ", j->f);
    }
    fputc(c, j->f);
    if (!j->depth)
        fputc('\n', j->f);
}

void j_u64(struct json *j, const char *k, uint64_t v)
{
    j_key(j, k);
    fprintf(j->f, "%llu", (unsigned long long)v);
}

void j_i64(struct json *j, const char *k, int64_t v)
{
    j_key(j, k);
    fprintf(j->f, "%lld", (long long)v);
}

void j_num(struct json *j, const char *k, double v)
{
    j_key(j, k);
    fprintf(j->f, "%.6f", v);
}

void j_bool(struct json *j, const char *k, bool v)
{
    j_key(j, k);
    fputs(v ? "true" : "false", j->f);
}

void j_str(struct json *j, const char *k, const char *s)
{
    j_key(j, k);
    if (s)
        j_raw_string(j, s, strlen(s));
    else
        fputs("null", j->f);
}

void j_rank(struct json *j, const char *k, int v)
{
    if (v >= 0)
        j_i64(j, k, v);
    else {
        j_key(j, k);
        fputs("null", j->f);
    }
}

/* ---- compute / communication / advice (tools/report/report_compute.c, report_comm.c) */
static void aj_open(void *j, const char *k, char c) { j_open(j, k, c); }
static void aj_close(void *j, char c) { j_close(j, c); }
static void aj_u64(void *j, const char *k, uint64_t v) { j_u64(j, k, v); }
static void aj_i64(void *j, const char *k, int64_t v) { j_i64(j, k, v); }
static void aj_num(void *j, const char *k, double v)
{
    if (v != v) {
        j_key(j, k);
        fputs("null", ((struct json *)j)->f);
    } else {
        j_num(j, k, v);
    }
}
static void aj_str(void *j, const char *k, const char *s) { j_str(j, k, s); }

struct acct_json acct_json_of(struct json *j)
{
    return (struct acct_json){ j, aj_open, aj_close, aj_u64, aj_i64, aj_num, aj_str };
}

void j_devices(struct json *j, const struct tslog *log)
{
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
