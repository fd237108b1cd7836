/* logcap.c: the log's size cap (logcap.h).
 *
 * With a cap, the writer hands every sealed range to ts_logcap_filter
 * before writing it.  Every allocation and free is replayed into a map of
 * live pointers, from the first record on, so the whole run's peak is known
 * however much of it was folded.  Once the file would pass the cap, each
 * per-event record is added to the totals of its call site (a fixed table)
 * instead of being written; the totals go into the file at shutdown.  The
 * filter runs in the writer thread or in a logging thread whose buffers
 * ran out, never in a signal handler; one mutex covers the map and the
 * table. */
#include "log/logcap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define SITE_SLOTS 4096

struct site {
    bool used;
    struct ts_rec_site_total t;
};

static uint64_t g_cap;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static bool g_folding;
static struct ts_rec_log_capped g_summary;
static struct site *g_sites; /* SITE_SLOTS, allocated when folding starts */

/* live allocations: linear probing, ptr 0 = empty */
static uint64_t *g_keys, *g_vals;
static size_t g_map_cap, g_map_n;
static uint64_t g_live;

void ts_logcap_init(uint64_t cap_bytes) { g_cap = cap_bytes; }

bool ts_logcap_enabled(void) { return g_cap != 0; }

static size_t map_slot(uint64_t ptr)
{
    size_t i = (size_t)ts_rec_mix64(ptr) & (g_map_cap - 1);
    while (g_keys[i] && g_keys[i] != ptr)
        i = (i + 1) & (g_map_cap - 1);
    return i;
}

static bool map_grow(void)
{
    size_t old_cap = g_map_cap, cap = old_cap ? old_cap * 2 : 1024;
    uint64_t *ok = g_keys, *ov = g_vals;
    uint64_t *k = calloc(cap, sizeof *k), *v = calloc(cap, sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return false;
    }
    g_keys = k, g_vals = v, g_map_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (ok[i]) {
            size_t s = map_slot(ok[i]);
            g_keys[s] = ok[i];
            g_vals[s] = ov[i];
        }
    free(ok);
    free(ov);
    return true;
}

/* Removes slot i, moving later entries of its probe run back. */
static void map_erase(size_t i)
{
    size_t mask = g_map_cap - 1;
    g_keys[i] = 0;
    for (size_t j = (i + 1) & mask; g_keys[j]; j = (j + 1) & mask) {
        size_t home = (size_t)ts_rec_mix64(g_keys[j]) & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            g_keys[i] = g_keys[j];
            g_vals[i] = g_vals[j];
            g_keys[j] = 0;
            i = j;
        }
    }
    g_map_n--;
}

/* The report's replay (tools/report/report_stats.c), on the whole run. */
static void replay(const struct ts_rec_hdr *h)
{
    if (h->type == TS_REC_ALLOC && h->len >= sizeof(struct ts_rec_alloc)) {
        const struct ts_rec_alloc *a = (const struct ts_rec_alloc *)h;
        /* device -1: pinned host memory, not device memory */
        if (a->device < 0 || a->result || !a->ptr || ((g_map_n + 1) * 2 > g_map_cap && !map_grow()))
            return;
        size_t s = map_slot(a->ptr);
        if (g_keys[s])
            g_live -= g_vals[s]; /* handed out again: its free was not seen */
        else
            g_keys[s] = a->ptr, g_map_n++;
        g_vals[s] = a->size;
        g_live += a->size;
        if (g_live > g_summary.peak_live_bytes)
            g_summary.peak_live_bytes = g_live;
    } else if (h->type == TS_REC_FREE && h->len >= sizeof(struct ts_rec_free)) {
        const struct ts_rec_free *f = (const struct ts_rec_free *)h;
        if (f->result || !f->ptr || !g_map_cap)
            return;
        size_t s = map_slot(f->ptr);
        if (!g_keys[s])
            return;
        g_live -= g_vals[s];
        map_erase(s);
    }
}

static bool per_event(uint16_t type)
{
    switch (type) {
    case TS_REC_ALLOC:
    case TS_REC_FREE:
    case TS_REC_COPY:
    case TS_REC_ERROR:
    case TS_REC_GEMM:
    case TS_REC_NCCL:
    case TS_REC_GPU_TIME:
    case TS_REC_ALLOC_STACK:
    case TS_REC_COPY_CONVERT:
    case TS_REC_PINNED_ALLOC:
    case TS_REC_GPU_KERNEL:
    case TS_REC_GPU_MEMCPY:
    case TS_REC_HOST_SYNC: return true;
    default: return false;
    }
}

static unsigned size_bucket(uint64_t size)
{
    unsigned b = 0;
    while (size) {
        b++;
        size >>= 1;
    }
    return b;
}

static struct ts_rec_site_total *site_of(const struct ts_rec_site_total *key)
{
    uint64_t h = ts_rec_mix64(key->rec_type ^ ((uint64_t)key->dir << 16) ^ ((uint64_t)key->host_kind << 24)
                              ^ ((uint64_t)(uint32_t)key->api << 32))
                 ^ ts_rec_mix64((uint64_t)(uint32_t)key->device ^ ((uint64_t)(uint32_t)key->op << 32))
                 ^ ts_rec_mix64(key->comm_id + (uint64_t)(uint32_t)key->rank);
    for (size_t n = 0, i = (size_t)h % SITE_SLOTS; n < SITE_SLOTS; n++, i = (i + 1) % SITE_SLOTS) {
        struct site *s = &g_sites[i];
        if (!s->used) {
            s->used = true;
            s->t = *key;
            g_summary.sites++;
            return &s->t;
        }
        const struct ts_rec_site_total *t = &s->t;
        if (t->rec_type == key->rec_type && t->dir == key->dir && t->host_kind == key->host_kind
            && t->api == key->api && t->device == key->device && t->op == key->op
            && t->comm_id == key->comm_id && t->rank == key->rank && t->comm_size == key->comm_size)
            return &s->t;
    }
    return NULL;
}

/* Copies a record into a zeroed struct of the size known here. */
static void take(void *dst, size_t size, const struct ts_rec_hdr *h)
{
    memset(dst, 0, size);
    memcpy(dst, h, h->len < size ? h->len : size);
}

/* The site key of h and what it adds: bytes, flops, duration, failed. */
static void site_key(const struct ts_rec_hdr *h, struct ts_rec_site_total *k, uint64_t *bytes,
                     uint64_t *flops, uint64_t *ns, int32_t *result)
{
    memset(k, 0, sizeof *k);
    k->rec_type = h->type;
    k->device = k->comm_size = k->rank = -1;
    *bytes = *flops = *ns = 0;
    *result = 0;
    union {
        struct ts_rec_alloc a;
        struct ts_rec_free f;
        struct ts_rec_copy c;
        struct ts_rec_error e;
        struct ts_rec_gemm g;
        struct ts_rec_nccl n;
        struct ts_rec_copy_convert v;
        struct ts_rec_gpu_memcpy m;
        struct ts_rec_host_sync y;
    } r;
    switch (h->type) {
    case TS_REC_ALLOC:
        take(&r.a, sizeof r.a, h);
        k->api = r.a.api, k->device = r.a.device, *bytes = r.a.size, *result = r.a.result;
        break;
    case TS_REC_FREE:
        take(&r.f, sizeof r.f, h);
        k->api = r.f.api, k->device = r.f.device, *result = r.f.result;
        break;
    case TS_REC_COPY:
        take(&r.c, sizeof r.c, h);
        k->api = r.c.api, k->dir = r.c.dir, k->host_kind = r.c.host_kind;
        *bytes = r.c.bytes, *ns = r.c.duration_ns, *result = r.c.result;
        break;
    case TS_REC_ERROR: /* one site per API and code: the code is the op */
        take(&r.e, sizeof r.e, h);
        k->api = r.e.api, k->op = r.e.result;
        break;
    case TS_REC_GEMM:
        take(&r.g, sizeof r.g, h);
        k->api = r.g.api, k->device = r.g.device, *flops = r.g.flops, *result = r.g.result;
        break;
    case TS_REC_NCCL: /* group brackets: comm_size holds the group depth */
        take(&r.n, sizeof r.n, h);
        k->api = r.n.api, k->op = r.n.op, k->comm_id = r.n.comm_id, k->rank = r.n.rank;
        k->comm_size = r.n.comm_size >= 0 ? r.n.comm_size : -1 - (int32_t)r.n.group_depth;
        *bytes = r.n.bytes, *result = r.n.result;
        break;
    case TS_REC_COPY_CONVERT:
        take(&r.v, sizeof r.v, h);
        k->api = r.v.api, k->dir = r.v.dir, *bytes = r.v.bytes, *ns = r.v.host_blocked_ns;
        break;
    case TS_REC_GPU_MEMCPY:
        take(&r.m, sizeof r.m, h);
        k->dir = r.m.copy_kind, *bytes = r.m.bytes;
        break;
    case TS_REC_HOST_SYNC: /* the site: API, kind (dir) and whether work was pending (host_kind) */
        take(&r.y, sizeof r.y, h);
        k->api = r.y.api, k->dir = r.y.kind, k->host_kind = r.y.pending;
        *ns = r.y.blocked_ns, *result = r.y.result;
        break;
    default: break;
    }
}

static void fold(const struct ts_rec_hdr *h)
{
    struct ts_rec_site_total key;
    uint64_t bytes, flops, ns;
    int32_t result;
    if (!g_summary.records_folded)
        g_summary.capped_at_ns = h->time_ns;
    g_summary.records_folded++;
    site_key(h, &key, &bytes, &flops, &ns, &result);
    struct ts_rec_site_total *t = g_sites ? site_of(&key) : NULL;
    if (!t) {
        g_summary.records_unsited++;
        return;
    }
    t->count++;
    t->duration_ns += ns;
    if (result) {
        t->failed++;
        return;
    }
    t->bytes += bytes;
    t->flops += flops;
    if (h->type == TS_REC_ALLOC && key.device >= 0)
        g_summary.size_buckets[size_bucket(bytes)]++;
}

uint32_t ts_logcap_filter(char *p, uint32_t n, uint64_t file_bytes, uint64_t *kept_records)
{
    uint32_t out = 0;
    *kept_records = 0;
    pthread_mutex_lock(&g_mu);
    for (uint32_t off = 0; off + sizeof(struct ts_rec_hdr) <= n;) {
        struct ts_rec_hdr *h = (struct ts_rec_hdr *)(p + off);
        uint32_t len = h->len;
        if (len < sizeof *h || len > n - off)
            break;
        replay(h);
        if (!g_folding && per_event(h->type) && file_bytes + out + len > g_cap) {
            g_folding = true;
            if (!g_sites)
                g_sites = calloc(SITE_SLOTS, sizeof *g_sites);
        }
        if (g_folding && per_event(h->type)) {
            fold(h);
        } else {
            if (out != off)
                memmove(p + out, h, len);
            out += len;
            ++*kept_records;
        }
        off += len;
    }
    pthread_mutex_unlock(&g_mu);
    return out;
}

char *ts_logcap_final_records(uint32_t *len, uint64_t *records)
{
    pthread_mutex_lock(&g_mu);
    char *block = NULL;
    *len = 0;
    *records = 0;
    if (!g_folding)
        goto out;
    uint64_t n = g_summary.sites;
    size_t bytes = sizeof g_summary + n * sizeof(struct ts_rec_site_total);
    block = calloc(1, bytes);
    if (!block)
        goto out;
    struct ts_rec_log_capped *c = (struct ts_rec_log_capped *)block;
    *c = g_summary;
    c->cap_bytes = g_cap;
    c->live_end_bytes = g_live;
    c->live_end_blocks = g_map_n;
    c->h.len = sizeof *c;
    c->h.type = TS_REC_LOG_CAPPED;
    struct ts_rec_site_total *t = (struct ts_rec_site_total *)(c + 1);
    for (size_t i = 0; g_sites && i < SITE_SLOTS; i++)
        if (g_sites[i].used) {
            *t = g_sites[i].t;
            t->h.len = sizeof *t;
            t->h.type = TS_REC_SITE_TOTAL;
            t++;
        }
    *len = (uint32_t)bytes;
    *records = 1 + n;
out:
    pthread_mutex_unlock(&g_mu);
    return block;
}
