/* test_report_spans: the report's sorted host intervals (tools/report/
 * report_spans.c) answer each window as a pass over every interval does:
 * random copy calls and synchronizations (some long, some ending at 0, one
 * wait-free kind filtered out), random windows, both questions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/report/report_spans.c"

#include "check.h"

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static bool synchronous(const struct tslog_event *e) { return !e->async; }

/* What a pass over every interval answers. */
static uint64_t brute_overlap(const struct span *v, size_t n, uint64_t from, uint64_t to)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t lo = v[i].start > from ? v[i].start : from, hi = v[i].end < to ? v[i].end : to;
        if (v[i].end > from)
            sum += hi > lo ? hi - lo : 0;
    }
    return sum;
}

static bool brute_ends_in(const struct span *v, size_t n, uint64_t from, uint64_t to)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].end >= from && v[i].end < to)
            return true;
    return false;
}

int main(void)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 20; round++) {
        size_t n = 1 + rnd(&seed) % 3000;
        struct tslog log;
        memset(&log, 0, sizeof log);
        log.events = calloc(n, sizeof *log.events);
        log.syncs = calloc(n, sizeof *log.syncs);
        struct span *copies = calloc(n, sizeof *copies), *syncs = calloc(n, sizeof *syncs);
        size_t ncopies = 0;
        for (size_t i = 0; i < n; i++) {
            struct tslog_event *e = &log.events[log.n_events++];
            e->type = rnd(&seed) % 4 ? TS_REC_COPY : TS_REC_ALLOC;
            e->async = rnd(&seed) % 3 == 0;
            e->time_ns = rnd(&seed) % 1000000;
            /* mostly short, a few long, some longer than their end time */
            e->duration_ns = rnd(&seed) % 50 ? rnd(&seed) % 2000 : rnd(&seed) % 2000000;
            if (e->type == TS_REC_COPY && !e->async)
                copies[ncopies++] = ending_at(e->time_ns, e->duration_ns);
            struct tslog_sync *s = &log.syncs[log.n_syncs++];
            s->time_ns = rnd(&seed) % 1000000;
            s->blocked_ns = rnd(&seed) % 5000;
            syncs[i] = ending_at(s->time_ns, s->blocked_ns);
        }
        struct span_set c, y;
        CHECK(span_set_copies(&c, &log, synchronous) == 0 && c.n == ncopies, "copies %zu of %zu", c.n, ncopies);
        CHECK(span_set_syncs(&y, &log) == 0 && y.n == n, "syncs %zu of %zu", y.n, n);
        for (int w = 0; w < 500; w++) {
            uint64_t from = rnd(&seed) % 1100000, to = from + rnd(&seed) % (w % 2 ? 3000 : 300000);
            CHECK(span_set_overlap(&c, from, to) == brute_overlap(copies, ncopies, from, to),
                  "copies overlap [%llu, %llu)", (unsigned long long)from, (unsigned long long)to);
            CHECK(span_set_overlap(&y, from, to) == brute_overlap(syncs, n, from, to), "syncs overlap");
            CHECK(span_set_ends_in(&c, from, to) == brute_ends_in(copies, ncopies, from, to), "copies end");
            CHECK(span_set_ends_in(&y, from, to) == brute_ends_in(syncs, n, from, to), "syncs end");
        }
        span_set_free(&c);
        span_set_free(&y);
        free(log.events);
        free(log.syncs);
        free(copies);
        free(syncs);
    }
    /* an empty log */
    struct tslog none;
    memset(&none, 0, sizeof none);
    struct span_set e;
    CHECK(span_set_syncs(&e, &none) == 0 && e.n == 0 && !span_set_ends_in(&e, 0, 100)
              && span_set_overlap(&e, 0, 100) == 0,
          "empty");
    span_set_free(&e);
    if (failures) {
        printf("test_report_spans: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_report_spans: ok\n");
    return 0;
}
