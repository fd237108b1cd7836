/* A small log made by the real writer, cut at EVERY byte offset and, in a
 * second sweep, with EVERY byte flipped: the reader never crashes, names the
 * offset where it stopped, and returns exactly the records that were complete
 * (for a flip: a prefix of the original records, ending before the damaged
 * one). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "log/log.h"
#include "../../tools/read/logread.c"

static int failures;
#define CHECK(c, ...)                                                                  \
    do {                                                                               \
        if (!(c)) {                                                                    \
            if (++failures < 20) {                                                     \
                fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c);           \
                fprintf(stderr, __VA_ARGS__);                                          \
                fputc('\n', stderr);                                                   \
            }                                                                          \
        }                                                                              \
    } while (0)

static bool same_event(const struct tslog_event *a, const struct tslog_event *b)
{
    return a->type == b->type && a->time_ns == b->time_ns && a->ptr == b->ptr && a->bytes == b->bytes &&
           a->stream == b->stream && a->duration_ns == b->duration_ns && a->api == b->api &&
           a->result == b->result && a->device == b->device && a->tid == b->tid && a->dir == b->dir &&
           a->host_kind == b->host_kind && a->async == b->async;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 20);
    *n = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

int main(void)
{
    char dir[] = "/tmp/ts_log_trunc.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char path[300];
    snprintf(path, sizeof path, "%s/t.log", dir);
    setenv("TRAINSHIM_LOG", path, 1);
    static const char *const names[] = {"cudaMalloc", "cudaFree", "cudaMemcpyAsync"};
    ts_register_apis(names, 3);
    ts_ev_device(0, "GPU zero", 1ull << 34, 8, 0, 108, "0000:01:00.0");
    for (int i = 0; i < 6; i++) {
        ts_ev_alloc(0, 0, 0x10000ull * (uint64_t)(i + 1), 1000ull * (uint64_t)(i + 1), 0, 0);
        ts_ev_copy(2, TS_H2D, 4096, TS_HOST_PAGEABLE, 0, true, 100, 0);
        ts_ev_error(1, i);
        ts_ev_free(1, 0, 0x10000ull * (uint64_t)(i + 1), 0, 0);
    }
    ts_log_shutdown();

    size_t full_n;
    char *full = slurp(path, &full_n);
    if (!full) {
        fprintf(stderr, "no log written at %s\n", path);
        return 1;
    }
    /* record boundaries, walked independently of the reader */
    size_t bounds[256], nb = 0;
    for (size_t off = sizeof(struct ts_log_preamble); off < full_n && nb < 256;) {
        struct ts_rec_hdr h;
        memcpy(&h, full + off, sizeof h);
        off += h.len;
        bounds[nb++] = off;
    }
    struct tslog ref;
    CHECK(tslog_parse(full, full_n, "full", &ref) == 0, "full parse: %s", ref.error);
    CHECK(ref.complete && !ref.note[0], "full log complete (note %s)", ref.note);
    CHECK(ref.n_records == nb && bounds[nb - 1] == full_n, "boundaries %zu vs %llu", nb,
          (unsigned long long)ref.n_records);
    CHECK(ref.n_events == 24, "events %zu", ref.n_events);
    /* events among the first k records: every record after the header, API
     * names and device records is an event, except the end record */
    size_t first_event_rec = 3;

    for (size_t cut = 0; cut <= full_n; cut++) {
        char *p = malloc(cut ? cut : 1);
        memcpy(p, full, cut);
        struct tslog log;
        char name[32];
        snprintf(name, sizeof name, "cut%zu", cut);
        int rc = tslog_parse(p, cut, name, &log);
        if (cut < sizeof(struct ts_log_preamble)) {
            char want[32];
            snprintf(want, sizeof want, "offset %zu", cut);
            CHECK(rc == -1 && strstr(log.error, name) && strstr(log.error, want),
                  "cut %zu: error '%s'", cut, log.error);
        } else {
            size_t k = 0;
            while (k < nb && bounds[k] <= cut)
                k++;
            size_t boundary = k ? bounds[k - 1] : sizeof(struct ts_log_preamble);
            CHECK(rc == 0, "cut %zu: rc %d (%s)", cut, rc, log.error);
            CHECK(log.n_records == k, "cut %zu: %llu records, want %zu", cut,
                  (unsigned long long)log.n_records, k);
            CHECK(log.stop_offset == boundary, "cut %zu: stopped at %llu, want %zu", cut,
                  (unsigned long long)log.stop_offset, boundary);
            char want[48];
            snprintf(want, sizeof want, "offset %zu", boundary);
            if (cut == full_n) {
                CHECK(log.complete && !log.truncated && !log.note[0], "full: note %s", log.note);
            } else {
                CHECK(!log.complete, "cut %zu: complete", cut);
                CHECK(log.truncated == (cut != boundary), "cut %zu: truncated flag", cut);
                CHECK(strstr(log.note, want) != NULL, "cut %zu: note '%s' lacks '%s'", cut, log.note, want);
                if (cut != boundary)
                    CHECK(strstr(log.note, "truncated at offset") == log.note, "cut %zu: note %s", cut,
                          log.note);
            }
            size_t want_events = k > first_event_rec ? k - first_event_rec : 0;
            if (want_events > ref.n_events)
                want_events = ref.n_events;
            CHECK(log.n_events == want_events, "cut %zu: %zu events, want %zu", cut, log.n_events,
                  want_events);
            for (size_t i = 0; i < log.n_events && i < ref.n_events; i++)
                CHECK(same_event(&log.events[i], &ref.events[i]), "cut %zu: event %zu differs", cut, i);
            CHECK(log.have_header == (k >= 1), "cut %zu: header", cut);
            CHECK(log.n_devices == (k >= 3), "cut %zu: devices", cut);
        }
        tslog_free(&log);
        free(p);
    }

    /* every single byte flipped */
    for (size_t at = 0; at < full_n; at++) {
        char *p = malloc(full_n);
        memcpy(p, full, full_n);
        p[at] ^= 0x5a;
        struct tslog log;
        int rc = tslog_parse(p, full_n, "flip", &log);
        size_t k = 0; /* index of the damaged record */
        while (k < nb && bounds[k] <= at)
            k++;
        if (at < sizeof(struct ts_log_preamble)) {
            bool minor = at == 10 || at == 11;
            CHECK(minor ? rc == 0 && log.n_records == nb : rc == -1, "flip %zu: rc %d", at, rc);
        } else {
            CHECK(rc == 0, "flip %zu: rc %d", at, rc);
            CHECK(log.n_records == k, "flip %zu: %llu records, want the %zu before the damaged one", at,
                  (unsigned long long)log.n_records, k);
            CHECK(strstr(log.note, "offset") != NULL, "flip %zu: note '%s'", at, log.note);
            for (size_t i = 0; i < log.n_events && i < ref.n_events; i++)
                CHECK(same_event(&log.events[i], &ref.events[i]), "flip %zu: event %zu differs", at, i);
        }
        tslog_free(&log);
        free(p);
    }
    tslog_free(&ref);
    free(full);
    unlink(path);
    rmdir(dir);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok: %zu bytes, %zu records, every cut and every flip checked\n", full_n, nb);
    return 0;
}
