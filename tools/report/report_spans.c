/* The sorted host intervals of report_spans.h. */
#include "report/report_spans.h"

#include <stdlib.h>

static int by_end(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Sorts what was added and notes the longest. */
static void finish(struct span_set *s)
{
    qsort(s->v, s->n, sizeof *s->v, by_end);
    s->longest = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].end - s->v[i].start > s->longest)
            s->longest = s->v[i].end - s->v[i].start;
}

static struct span ending_at(uint64_t end, uint64_t length)
{
    return (struct span){ end > length ? end - length : 0, end };
}

int span_set_copies(struct span_set *s, const struct tslog *log, bool (*keep)(const struct tslog_event *e))
{
    s->n = 0;
    s->v = malloc((log->n_events ? log->n_events : 1) * sizeof *s->v);
    if (!s->v)
        return -1;
    for (size_t i = 0; i < log->n_events; i++) {
        const struct tslog_event *e = &log->events[i];
        if (e->type == TS_REC_COPY && (!keep || keep(e)))
            s->v[s->n++] = ending_at(e->time_ns, e->duration_ns);
    }
    finish(s);
    return 0;
}

int span_set_syncs(struct span_set *s, const struct tslog *log)
{
    s->n = 0;
    s->v = malloc((log->n_syncs ? log->n_syncs : 1) * sizeof *s->v);
    if (!s->v)
        return -1;
    for (size_t i = 0; i < log->n_syncs; i++)
        s->v[s->n++] = ending_at(log->syncs[i].time_ns, log->syncs[i].blocked_ns);
    finish(s);
    return 0;
}

void span_set_free(struct span_set *s)
{
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* The first interval ending after t (strictly when `after`, else at or after). */
static size_t first_end(const struct span_set *s, uint64_t t, bool after)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->v[mid].end < t || (after && s->v[mid].end == t))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool span_set_ends_in(const struct span_set *s, uint64_t from, uint64_t to)
{
    size_t i = first_end(s, from, false);
    return i < s->n && s->v[i].end < to;
}

uint64_t span_set_overlap(const struct span_set *s, uint64_t from, uint64_t to)
{
    uint64_t sum = 0;
    /* past an end of to + longest, every interval starts at or after to */
    for (size_t i = first_end(s, from, true); i < s->n && (s->v[i].end < to || s->v[i].end - to < s->longest);
         i++) {
        uint64_t lo = s->v[i].start > from ? s->v[i].start : from, hi = s->v[i].end < to ? s->v[i].end : to;
        sum += hi > lo ? hi - lo : 0;
    }
    return sum;
}
