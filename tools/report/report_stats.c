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

static int add_count(struct err_count **list, size_t *n, int32_t api, int32_t code, uint64_t count,
                     const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if ((*list)[i].api == api && (*list)[i].code == code) {
            (*list)[i].count += count;
            return 0;
        }
    struct err_count *g = realloc(*list, (*n + 1) * sizeof *g);
    if (!g)
        return -1;
    *list = g;
    g[(*n)++] = (struct err_count){ api, code, count, name };
    return 0;
}

static int add_error(struct stats *s, int32_t api, int32_t code, uint64_t count, const char *name)
{
    return add_count(&s->errs, &s->n_errs, api, code, count, name);
}

/* A result that reports a state, not a failure: not ready yet (the runtime's
 * cudaErrorNotReady and the driver's CUDA_ERROR_NOT_READY, both 600, from
 * cudaEventQuery, cudaStreamQuery and their twins) or NCCL's ncclInProgress
 * (7, a nonblocking communicator still working).  Known by the API's family. */
bool stats_is_status(const char *api_name, int32_t code)
{
    if (!api_name)
        return false;
    if (!strncmp(api_name, "nccl", 4))
        return code == 7;
    return !strncmp(api_name, "cu", 2) && code == 600;
}

static int by_api_code(const void *a, const void *b)
{
    const struct err_count *x = a, *y = b;
    if (x->api != y->api)
        return x->api < y->api ? -1 : 1;
    return (x->code > y->code) - (x->code < y->code);
}

/* Errors and statuses by API, then code. */
static void sort_counts(struct stats *s)
{
    struct err_count *lists[] = { s->errs, s->statuses };
    size_t ns[] = { s->n_errs, s->n_statuses };
    for (int i = 0; i < 2; i++)
        if (ns[i])
            qsort(lists[i], ns[i], sizeof *lists[i], by_api_code);
}

/* The live allocations while the events are replayed in time order. */
struct replay {
    struct live_map m;
    uint64_t cur;
    uint64_t dev_cur[TSLOG_POOL_DEVS];
};

/* A live block's value in the map: its bytes, and its device + 1 in the top
 * byte (0: a device past TSLOG_POOL_DEVS, counted in the total alone). */
static uint64_t live_value(const struct tslog_event *e)
{
    uint64_t dev = e->device < TSLOG_POOL_DEVS ? (uint64_t)e->device + 1 : 0;
    return (e->bytes & ((1ull << 56) - 1)) | dev << 56;
}
static uint64_t live_bytes(uint64_t v) { return v & ((1ull << 56) - 1); }

/* Takes a live block out of the running totals. */
static void live_gone(struct replay *r, uint64_t v)
{
    r->cur -= live_bytes(v);
    if (v >> 56)
        r->dev_cur[(v >> 56) - 1] -= live_bytes(v);
}

static int on_alloc(struct replay *r, struct stats *s, const struct tslog_event *e)
{
    if (e->device < 0) { /* pinned host memory: not device memory */
        s->host_alloc_calls++;
        s->host_alloc_bytes += e->result ? 0 : e->bytes;
        return 0;
    }
    s->alloc_calls++;
    if (e->result) {
        s->alloc_failed++;
        return 0;
    }
    s->alloc_requested += e->bytes;
    s->hist[hist_bucket(e->bytes)]++;
    if (!e->ptr)
        return 0;
    struct live_map *m = &r->m;
    if ((m->n + 1) * 2 > m->cap && map_grow(m))
        return -1;
    size_t k = map_find(m, e->ptr);
    if (m->keys[k]) {
        live_gone(r, m->vals[k]); /* a live pointer handed out again: its free was not seen */
    } else {
        m->keys[k] = e->ptr;
        m->n++;
    }
    m->vals[k] = live_value(e);
    r->cur += live_bytes(m->vals[k]);
    if (r->cur > s->peak_alloc)
        s->peak_alloc = r->cur;
    if (e->device < TSLOG_POOL_DEVS) {
        r->dev_cur[e->device] += live_bytes(m->vals[k]);
        if (r->dev_cur[e->device] > s->dev_peak_alloc[e->device])
            s->dev_peak_alloc[e->device] = r->dev_cur[e->device];
    }
    return 0;
}

static void on_free(struct replay *r, struct stats *s, const struct tslog_event *e)
{
    size_t k = r->m.cap && e->ptr ? map_find(&r->m, e->ptr) : 0;
    bool known = r->m.cap && e->ptr && r->m.keys[k];
    /* device -1: pinned host memory, or a VMM handle (its release does not
     * say the device): a device free only when it matches a device allocation */
    if (e->device < 0 && !known) {
        s->host_free_calls++;
        return;
    }
    s->free_calls++;
    if (e->result) {
        s->free_failed++;
        return;
    }
    if (!e->ptr)
        return;
    if (!known) {
        s->free_unknown++;
        return;
    }
    live_gone(r, r->m.vals[k]);
    map_erase(&r->m, k);
    r->m.n--;
}

static void on_copy(struct stats *s, const struct tslog_event *e)
{
    int d = e->dir < DIRS ? e->dir : 0;
    s->copy_calls[d]++;
    s->copy_ns += e->duration_ns;
    if (e->result) {
        s->copy_failed++;
        return;
    }
    s->copy_bytes[d] += e->bytes;
    if (e->host_kind == TS_HOST_PAGEABLE && d == TS_H2D)
        s->h2d_pageable += e->bytes;
    if (e->host_kind == TS_HOST_PAGEABLE && d == TS_D2H)
        s->d2h_pageable += e->bytes;
}

static int on_error(struct stats *s, const struct tslog *log, const struct tslog_event *e)
{
    const char *name = e->api >= 0 && (uint32_t)e->api < log->n_api_names ? log->api_names[e->api] : NULL;
    if (stats_is_status(name, e->result))
        return add_count(&s->statuses, &s->n_statuses, e->api, e->result, 1, name);
    s->error_records++;
    return add_error(s, e->api, e->result, 1, name);
}

int stats_add_result(struct stats *s, const struct tslog *log, int32_t api, int32_t code, uint64_t count)
{
    const char *name = api >= 0 && (uint32_t)api < log->n_api_names ? log->api_names[api] : NULL;
    if (stats_is_status(name, code))
        return add_count(&s->statuses, &s->n_statuses, api, code, count, name);
    s->error_records += count;
    return add_error(s, api, code, count, name);
}

/* The figures the reader already summed: the copy engine's and the pools'. */
static void take_log_totals(struct stats *s, const struct tslog *log)
{
    s->converted_calls = log->n_copy_converts;
    s->converted_bytes = log->copy_converted_bytes;
    s->converted_blocked_ns = log->copy_converted_blocked_ns;
    s->staging_wait_ns = log->copy_staging_wait_ns;
    s->pool_records = log->n_pool_stats;
    s->pool_mode = log->pool_mode;
    s->pool_peak_reserved = log->pool_peak_reserved;
    s->pool_alloc_at_peak = log->pool_allocated_at_reserved_peak;
    s->pool_driver_calls = log->pool_driver_calls;
    s->pool_fence_calls = log->pool_fence_calls;
    s->pool_cache_hits = log->pool_cache_hits;
    s->pool_ooms = log->pool_ooms;
    s->pool_plan = log->pool_plan;
}

int stats_analyze(struct tslog *log, struct stats *s)
{
    struct replay r;
    memset(&r, 0, sizeof r);
    memset(s, 0, sizeof *s);
    s->log = log;
    take_log_totals(s, log);
    /* threads' buffers reach the file out of order: replay in time order */
    if (log->n_events)
        qsort(log->events, log->n_events, sizeof *log->events, by_time);
    int rc = 0;
    for (size_t i = 0; i < log->n_events && !rc; i++) {
        const struct tslog_event *e = &log->events[i];
        switch (e->type) {
        case TS_REC_ALLOC: rc = on_alloc(&r, s, e); break;
        case TS_REC_FREE: on_free(&r, s, e); break;
        case TS_REC_COPY: on_copy(s, e); break;
        case TS_REC_ERROR: rc = on_error(s, log, e); break;
        }
    }
    s->live_blocks = r.m.n;
    s->live_bytes = r.cur;
    free(r.m.keys);
    free(r.m.vals);
    sort_counts(s);
    return rc ? -1 : 0;
}

int stats_add(struct stats *t, const struct stats *s)
{
    t->peak_alloc += s->peak_alloc;
    t->alloc_calls += s->alloc_calls;
    t->host_alloc_calls += s->host_alloc_calls;
    t->host_alloc_bytes += s->host_alloc_bytes;
    t->host_free_calls += s->host_free_calls;
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
    t->pool_fence_calls += s->pool_fence_calls;
    t->pool_cache_hits += s->pool_cache_hits;
    t->pool_ooms += s->pool_ooms;
    tslog_pool_plan_add(&t->pool_plan, &s->pool_plan);
    for (size_t i = 0; i < s->n_errs; i++)
        if (add_error(t, s->errs[i].api, s->errs[i].code, s->errs[i].count, s->errs[i].name))
            return -1;
    for (size_t i = 0; i < s->n_statuses; i++)
        if (add_count(&t->statuses, &t->n_statuses, s->statuses[i].api, s->statuses[i].code,
                      s->statuses[i].count, s->statuses[i].name))
            return -1;
    sort_counts(t);
    return 0;
}
