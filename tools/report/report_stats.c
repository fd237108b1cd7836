/* report_stats.c: one log's figures for `trainshim report` (see
 * report_stats.h), derived from the raw records of tools/read/logread.c. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "report/report_stats.h"

/* ------------------------------------------------------------ live-pointer map */
struct live_map {
    uint64_t *keys, *vals;
    size_t cap, n;
};

static size_t slot_of(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

static int map_grow(struct live_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint64_t *k = calloc(cap, sizeof *k), *v = calloc(cap, sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) {
            size_t s = slot_of(m->keys[i], cap);
            while (k[s])
                s = (s + 1) & (cap - 1);
            k[s] = m->keys[i];
            v[s] = m->vals[i];
        }
    free(m->keys);
    free(m->vals);
    m->keys = k;
    m->vals = v;
    m->cap = cap;
    return 0;
}

/* Slot of key (0 never stored), or of the empty slot where it would go. */
static size_t map_find(const struct live_map *m, uint64_t key)
{
    size_t s = slot_of(key, m->cap);
    while (m->keys[s] && m->keys[s] != key)
        s = (s + 1) & (m->cap - 1);
    return s;
}

/* Removal with backward shift, so probing never needs tombstones. */
static void map_erase(struct live_map *m, size_t s)
{
    size_t j = s;
    m->keys[s] = 0;
    for (;;) {
        j = (j + 1) & (m->cap - 1);
        if (!m->keys[j])
            return;
        size_t home = slot_of(m->keys[j], m->cap);
        /* move j back to s when home is not cyclically in (s, j] */
        if ((s < j) ? (home <= s || home > j) : (home <= s && home > j)) {
            m->keys[s] = m->keys[j];
            m->vals[s] = m->vals[j];
            m->keys[j] = 0;
            s = j;
        }
    }
}

/* ------------------------------------------------------------ analysis */
static int by_time(const void *a, const void *b)
{
    const struct tslog_event *x = a, *y = b;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int hist_bucket(uint64_t size) { return size ? 64 - __builtin_clzll(size) : 0; }

int stats_add_error(struct stats *s, int32_t api, int32_t code, uint64_t count, const char *name)
{
    for (size_t i = 0; i < s->n_errs; i++)
        if (s->errs[i].api == api && s->errs[i].code == code) {
            s->errs[i].count += count;
            return 0;
        }
    struct err_count *n = realloc(s->errs, (s->n_errs + 1) * sizeof *n);
    if (!n)
        return -1;
    s->errs = n;
    s->errs[s->n_errs++] = (struct err_count){ api, code, count, name };
    return 0;
}

static int by_api_code(const void *a, const void *b)
{
    const struct err_count *x = a, *y = b;
    if (x->api != y->api)
        return x->api < y->api ? -1 : 1;
    return (x->code > y->code) - (x->code < y->code);
}

int stats_analyze(struct tslog *log, struct stats *s)
{
    struct live_map m = { 0 };
    uint64_t cur = 0;
    memset(s, 0, sizeof *s);
    s->log = log;
    s->converted_calls = log->n_copy_converts;
    s->converted_bytes = log->copy_converted_bytes;
    s->converted_blocked_ns = log->copy_converted_blocked_ns;
    s->staging_wait_ns = log->copy_staging_wait_ns;
    s->pool_records = log->n_pool_stats;
    s->pool_mode = log->pool_mode;
    s->pool_peak_reserved = log->pool_peak_reserved;
    s->pool_alloc_at_peak = log->pool_allocated_at_reserved_peak;
    s->pool_driver_calls = log->pool_driver_calls;
    s->pool_cache_hits = log->pool_cache_hits;
    s->pool_ooms = log->pool_ooms;
    /* threads' buffers reach the file out of order: replay in time order */
    if (log->n_events)
        qsort(log->events, log->n_events, sizeof *log->events, by_time);
    for (size_t i = 0; i < log->n_events; i++) {
        const struct tslog_event *e = &log->events[i];
        switch (e->type) {
        case TS_REC_ALLOC:
            s->alloc_calls++;
            if (e->result) {
                s->alloc_failed++;
                break;
            }
            s->alloc_requested += e->bytes;
            s->hist[hist_bucket(e->bytes)]++;
            if (!e->ptr)
                break;
            if ((m.n + 1) * 2 > m.cap && map_grow(&m))
                goto oom;
            {
                size_t k = map_find(&m, e->ptr);
                if (m.keys[k]) {
                    cur -= m.vals[k]; /* a live pointer handed out again: its free was not seen */
                } else {
                    m.keys[k] = e->ptr;
                    m.n++;
                }
                m.vals[k] = e->bytes;
            }
            cur += e->bytes;
            if (cur > s->peak_alloc)
                s->peak_alloc = cur;
            break;
        case TS_REC_FREE:
            s->free_calls++;
            if (e->result) {
                s->free_failed++;
                break;
            }
            if (!e->ptr)
                break;
            if (!m.cap) {
                s->free_unknown++;
                break;
            }
            {
                size_t k = map_find(&m, e->ptr);
                if (!m.keys[k]) {
                    s->free_unknown++;
                    break;
                }
                cur -= m.vals[k];
                map_erase(&m, k);
                m.n--;
            }
            break;
        case TS_REC_COPY: {
            int d = e->dir < DIRS ? e->dir : 0;
            s->copy_calls[d]++;
            s->copy_ns += e->duration_ns;
            if (e->result) {
                s->copy_failed++;
                break;
            }
            s->copy_bytes[d] += e->bytes;
            if (e->host_kind == TS_HOST_PAGEABLE && d == TS_H2D)
                s->h2d_pageable += e->bytes;
            if (e->host_kind == TS_HOST_PAGEABLE && d == TS_D2H)
                s->d2h_pageable += e->bytes;
            break;
        }
        case TS_REC_ERROR: {
            s->error_records++;
            const char *name =
                e->api >= 0 && (uint32_t)e->api < log->n_api_names ? log->api_names[e->api] : NULL;
            if (stats_add_error(s, e->api, e->result, 1, name))
                goto oom;
            break;
        }
        }
    }
    s->live_blocks = m.n;
    s->live_bytes = cur;
    free(m.keys);
    free(m.vals);
    if (s->n_errs)
        qsort(s->errs, s->n_errs, sizeof *s->errs, by_api_code);
    return 0;
oom:
    free(m.keys);
    free(m.vals);
    return -1;
}

int stats_add(struct stats *t, const struct stats *s)
{
    t->peak_alloc += s->peak_alloc;
    t->alloc_calls += s->alloc_calls;
    t->alloc_failed += s->alloc_failed;
    t->alloc_requested += s->alloc_requested;
    t->free_calls += s->free_calls;
    t->free_failed += s->free_failed;
    t->free_unknown += s->free_unknown;
    t->live_blocks += s->live_blocks;
    t->live_bytes += s->live_bytes;
    for (int i = 0; i < HIST_BUCKETS; i++)
        t->hist[i] += s->hist[i];
    for (int d = 0; d < DIRS; d++) {
        t->copy_bytes[d] += s->copy_bytes[d];
        t->copy_calls[d] += s->copy_calls[d];
    }
    t->h2d_pageable += s->h2d_pageable;
    t->d2h_pageable += s->d2h_pageable;
    t->copy_ns += s->copy_ns;
    t->copy_failed += s->copy_failed;
    t->converted_calls += s->converted_calls;
    t->converted_bytes += s->converted_bytes;
    t->converted_blocked_ns += s->converted_blocked_ns;
    t->staging_wait_ns += s->staging_wait_ns;
    t->error_records += s->error_records;
    if (s->pool_records)
        t->pool_mode = s->pool_mode;
    t->pool_records += s->pool_records;
    t->pool_peak_reserved += s->pool_peak_reserved;
    t->pool_alloc_at_peak += s->pool_alloc_at_peak;
    t->pool_driver_calls += s->pool_driver_calls;
    t->pool_cache_hits += s->pool_cache_hits;
    t->pool_ooms += s->pool_ooms;
    for (size_t i = 0; i < s->n_errs; i++)
        if (stats_add_error(t, s->errs[i].api, s->errs[i].code, s->errs[i].count, s->errs[i].name))
            return -1;
    if (t->n_errs)
        qsort(t->errs, t->n_errs, sizeof *t->errs, by_api_code);
    return 0;
}
