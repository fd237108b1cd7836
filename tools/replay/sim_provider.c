/* sim_provider.c: a page provider without a device, for unit tests, replay
 * without the emulator and the benchmark.  It keeps the books the driver
 * keeps (reservations, handles, mappings, plain allocations, events) and
 * rejects what the driver rejects (counted in `misuse`), so a test can assert
 * that the pool never misuses the API and never leaks. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "replay/sim_provider.h"

#define MAX_RES 8
#define MAX_STREAMS 512
enum { OP_CREATE, OP_MAP, OP_SET_ACCESS, OP_UNMAP, OP_RESERVE, OP_SEG_ALLOC, OP_FENCE_RECORD, OP_N };
static const char *const op_names[OP_N] = { "create",  "map",       "set_access",  "unmap",
                                            "reserve", "seg_alloc", "fence_record" };

typedef struct {
    uint64_t size;
    uint32_t maps; /* mappings of it (CUDA allows several, at different addresses) */
    int live;
} fake_handle;
typedef struct {
    uint64_t base, size;
    uint32_t *page_handle;
    uint8_t *page_access;
    uint8_t *page_first; /* the first page of a mapping */
} fake_res;
typedef struct {
    uint64_t stream, recorded, completed;
    int capturing;
} fake_stream;
typedef struct {
    uint64_t stream, number;
    int live;
} fake_fence;
typedef struct {
    uint64_t nth, count;
    int rc;
    double prob;
    uint64_t rng;
} fake_fault;

struct ts_fake_provider {
    pthread_mutex_t lock;
    ts_page_provider table;
    uint64_t capacity, gran, next_va, next_seg;
    fake_res res[MAX_RES];
    fake_handle *h;
    uint32_t nh, caph;
    uint64_t *seg_keys, *seg_sizes;
    uint32_t seg_cap, seg_count;
    fake_stream streams[MAX_STREAMS];
    int nstreams;
    fake_fence *fences;
    uint32_t nfences, capf;
    int manual;
    fake_fault fault[OP_N];
    ts_fake_counters c;
};

static int inject(ts_fake_provider *f, int op)
{
    fake_fault *ft = &f->fault[op];
    ft->count++;
    if (ft->nth && ft->count == ft->nth) {
        ft->nth = 0;
        return ft->rc;
    }
    if (ft->prob > 0) {
        ft->rng ^= ft->rng << 13;
        ft->rng ^= ft->rng >> 7;
        ft->rng ^= ft->rng << 17;
        if ((double)(ft->rng >> 11) / 9007199254740992.0 < ft->prob)
            return ft->rc;
    }
    return 0;
}

static fake_stream *stream_of(ts_fake_provider *f, uint64_t s)
{
    for (int i = 0; i < f->nstreams; i++)
        if (f->streams[i].stream == s)
            return &f->streams[i];
    if (f->nstreams == MAX_STREAMS)
        return NULL;
    fake_stream *st = &f->streams[f->nstreams++];
    memset(st, 0, sizeof *st);
    st->stream = s;
    return st;
}

static fake_res *res_of(ts_fake_provider *f, uint64_t va, uint64_t size)
{
    for (int i = 0; i < MAX_RES; i++) {
        fake_res *r = &f->res[i];
        if (r->size && va >= r->base && va + size <= r->base + r->size)
            return r;
    }
    return NULL;
}

#define MISUSE(f) ((f)->c.misuse++, TS_PROV_ERROR)

/* The pages [va, va+size) of one reservation, whole granules only: what
 * cuMemUnmap and cuMemSetAccess accept.  NULL if the range is not that. */
static fake_res *page_range(ts_fake_provider *f, uint64_t va, uint64_t size, uint64_t *p0, uint64_t *np)
{
    fake_res *r = res_of(f, va, size);
    if (!r || (va - r->base) % f->gran || !size || size % f->gran)
        return NULL;
    *p0 = (va - r->base) / f->gran;
    *np = size / f->gran;
    return r;
}

static int f_gran(void *ctx, uint64_t *g)
{
    *g = ((ts_fake_provider *)ctx)->gran;
    return TS_PROV_OK;
}

static int f_reserve(void *ctx, uint64_t size, uint64_t *va)
{
    ts_fake_provider *f = ctx;
    int rc = TS_PROV_OK;
    pthread_mutex_lock(&f->lock);
    do {
        f->c.reserves++;
        if ((rc = inject(f, OP_RESERVE)))
            break;
        if (!size || size % f->gran) {
            rc = MISUSE(f);
            break;
        }
        fake_res *r = NULL;
        for (int i = 0; i < MAX_RES && !r; i++)
            if (!f->res[i].size)
                r = &f->res[i];
        uint64_t np = size / f->gran;
        if (!r || !(r->page_handle = calloc(np, sizeof *r->page_handle)) || !(r->page_access = calloc(np, 1))
            || !(r->page_first = calloc(np, 1))) {
            if (r) {
                free(r->page_handle);
                free(r->page_access);
            }
            rc = TS_PROV_OOM;
            break;
        }
        r->base = f->next_va;
        r->size = size;
        f->next_va += size + (1ull << 30);
        *va = r->base;
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int f_unreserve(void *ctx, uint64_t va, uint64_t size)
{
    ts_fake_provider *f = ctx;
    int rc = TS_PROV_OK;
    pthread_mutex_lock(&f->lock);
    do {
        f->c.unreserves++;
        fake_res *r = res_of(f, va, size);
        if (!r || r->base != va || r->size != size) {
            rc = MISUSE(f);
            break;
        }
        for (uint64_t i = 0; i < size / f->gran; i++)
            if (r->page_handle[i]) {
                rc = MISUSE(f); /* CUDA requires everything unmapped first */
                break;
            }
        free(r->page_handle);
        free(r->page_access);
        free(r->page_first);
        memset(r, 0, sizeof *r);
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int f_create(void *ctx, uint64_t size, uint64_t *handle)
{
    ts_fake_provider *f = ctx;
    int rc = TS_PROV_OK;
    pthread_mutex_lock(&f->lock);
    do {
        f->c.creates++;
        if ((rc = inject(f, OP_CREATE)))
            break;
        if (!size || size % f->gran) {
            rc = MISUSE(f);
            break;
        }
        if (f->c.phys_bytes + f->c.seg_bytes + size > f->capacity) {
            rc = TS_PROV_OOM;
            break;
        }
        if (f->nh == f->caph) {
            uint32_t nc = f->caph ? f->caph * 2 : 1024;
            fake_handle *nh = realloc(f->h, nc * sizeof *nh);
            if (!nh) {
                rc = TS_PROV_OOM;
                break;
            }
            f->h = nh;
            f->caph = nc;
        }
        uint32_t id = f->nh++;
        f->h[id] = (fake_handle){ .size = size, .live = 1 };
        *handle = id + 1;
        f->c.live_handles++;
        f->c.phys_bytes += size;
        if (f->c.phys_bytes + f->c.seg_bytes > f->c.phys_peak)
            f->c.phys_peak = f->c.phys_bytes + f->c.seg_bytes;
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static fake_handle *handle_of(ts_fake_provider *f, uint64_t handle)
{
    if (!handle || handle > f->nh || !f->h[handle - 1].live)
        return NULL;
    return &f->h[handle - 1];
}

static int f_release(void *ctx, uint64_t handle)
{
    ts_fake_provider *f = ctx;
    int rc = TS_PROV_OK;
    pthread_mutex_lock(&f->lock);
    do {
        f->c.releases++;
        fake_handle *h = handle_of(f, handle);
        if (!h) {
            rc = MISUSE(f);
            break;
        }
        if (h->maps) { /* legal in CUDA, but this pool always unmaps first */
            rc = MISUSE(f);
            break;
        }
        h->live = 0;
        f->c.live_handles--;
        f->c.phys_bytes -= h->size;
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int f_map(void *ctx, uint64_t va, uint64_t size, uint64_t handle)
{
    ts_fake_provider *f = ctx;
    int rc = TS_PROV_OK;
    pthread_mutex_lock(&f->lock);
    do {
        f->c.maps++;
        if ((rc = inject(f, OP_MAP)))
            break;
        fake_handle *h = handle_of(f, handle);
        fake_res *r = res_of(f, va, size);
        if (!h || !r || size != h->size || (va - r->base) % f->gran) {
            rc = MISUSE(f);
            break;
        }
        uint64_t p0 = (va - r->base) / f->gran, np = size / f->gran;
        for (uint64_t i = 0; i < np; i++)
            if (r->page_handle[p0 + i])
                rc = MISUSE(f);
        if (rc)
            break;
        for (uint64_t i = 0; i < np; i++) {
            r->page_handle[p0 + i] = (uint32_t)handle;
            r->page_access[p0 + i] = 0;
            r->page_first[p0 + i] = i == 0;
        }
        h->maps++;
        f->c.mapped_pages += np;
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int f_unmap(void *ctx, uint64_t va, uint64_t size)
{
    ts_fake_provider *f = ctx;
    int rc = TS_PROV_OK;
    pthread_mutex_lock(&f->lock);
    do {
        f->c.unmaps++;
        if ((rc = inject(f, OP_UNMAP)))
            break;
        uint64_t p0, np;
        fake_res *r = page_range(f, va, size, &p0, &np);
        if (!r) {
            rc = MISUSE(f);
            break;
        }
        /* must cover whole mappings exactly: mapped pages, from the first
         * page of one to the end of another */
        uint64_t after = p0 + np;
        bool whole = r->page_first[p0]
                     && (after * f->gran == r->size || !r->page_handle[after] || r->page_first[after]);
        for (uint64_t i = 0; i < np && whole; i++)
            whole = handle_of(f, r->page_handle[p0 + i]) != NULL;
        if (!whole) {
            rc = MISUSE(f);
            break;
        }
        for (uint64_t i = 0; i < np; i++) {
            if (r->page_first[p0 + i])
                f->h[r->page_handle[p0 + i] - 1].maps--;
            r->page_handle[p0 + i] = 0;
            r->page_access[p0 + i] = 0;
            r->page_first[p0 + i] = 0;
        }
        f->c.mapped_pages -= np;
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int f_set_access(void *ctx, uint64_t va, uint64_t size)
{
    ts_fake_provider *f = ctx;
    int rc = TS_PROV_OK;
    pthread_mutex_lock(&f->lock);
    do {
        f->c.set_access++;
        if ((rc = inject(f, OP_SET_ACCESS)))
            break;
        uint64_t p0, np;
        fake_res *r = page_range(f, va, size, &p0, &np);
        if (!r) {
            rc = MISUSE(f);
            break;
        }
        for (uint64_t i = 0; i < np; i++)
            if (!r->page_handle[p0 + i])
                rc = MISUSE(f);
        if (!rc)
            memset(r->page_access + p0, 1, np);
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int seg_find(ts_fake_provider *f, uint64_t key)
{
    for (uint32_t i = 0; i < f->seg_cap; i++)
        if (f->seg_keys[i] == key)
            return (int)i;
    return -1;
}

static int f_seg_alloc(void *ctx, uint64_t size, uint64_t *ptr)
{
    ts_fake_provider *f = ctx;
    int rc = TS_PROV_OK;
    pthread_mutex_lock(&f->lock);
    do {
        f->c.seg_allocs++;
        if ((rc = inject(f, OP_SEG_ALLOC)))
            break;
        /* the driver hands out whole 2 MiB pages for a plain allocation too */
        uint64_t phys = (size + f->gran - 1) / f->gran * f->gran;
        if (!size || f->c.phys_bytes + f->c.seg_bytes + phys > f->capacity) {
            rc = TS_PROV_OOM;
            break;
        }
        int slot = seg_find(f, 0);
        if (slot < 0) {
            uint32_t nc = f->seg_cap ? f->seg_cap * 2 : 1024;
            uint64_t *nk = realloc(f->seg_keys, nc * sizeof *nk), *ns;
            if (nk)
                f->seg_keys = nk;
            ns = nk ? realloc(f->seg_sizes, nc * sizeof *ns) : NULL;
            if (!ns) {
                rc = TS_PROV_OOM;
                break;
            }
            f->seg_sizes = ns;
            memset(f->seg_keys + f->seg_cap, 0, (nc - f->seg_cap) * sizeof *nk);
            slot = (int)f->seg_cap;
            f->seg_cap = nc;
        }
        f->seg_keys[slot] = f->next_seg;
        f->seg_sizes[slot] = size;
        *ptr = f->next_seg;
        f->next_seg += (size + 511) / 512 * 512;
        f->seg_count++;
        (void)phys;
        f->c.seg_bytes += (size + 511) / 512 * 512;
        if (f->c.phys_bytes + f->c.seg_bytes > f->c.phys_peak)
            f->c.phys_peak = f->c.phys_bytes + f->c.seg_bytes;
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int f_seg_free(void *ctx, uint64_t ptr)
{
    ts_fake_provider *f = ctx;
    int rc = TS_PROV_OK;
    pthread_mutex_lock(&f->lock);
    do {
        f->c.seg_frees++;
        int slot = ptr ? seg_find(f, ptr) : -1;
        if (slot < 0) {
            rc = MISUSE(f);
            break;
        }
        f->seg_keys[slot] = 0;
        f->seg_count--;
        f->c.seg_bytes -= (f->seg_sizes[slot] + 511) / 512 * 512;
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int f_fence_record(void *ctx, uint64_t stream, uint64_t *fence)
{
    ts_fake_provider *f = ctx;
    int rc = TS_PROV_OK;
    pthread_mutex_lock(&f->lock);
    do {
        f->c.fence_records++;
        if ((rc = inject(f, OP_FENCE_RECORD)))
            break;
        fake_stream *st = stream_of(f, stream);
        if (!st) {
            rc = TS_PROV_ERROR;
            break;
        }
        if (st->capturing)
            f->c.fence_on_capturing++;
        if (f->nfences == f->capf) {
            uint32_t nc = f->capf ? f->capf * 2 : 256;
            fake_fence *nf = realloc(f->fences, nc * sizeof *nf);
            if (!nf) {
                rc = TS_PROV_ERROR;
                break;
            }
            f->fences = nf;
            f->capf = nc;
        }
        st->recorded++;
        if (!f->manual)
            st->completed = st->recorded;
        f->fences[f->nfences] = (fake_fence){ .stream = stream, .number = st->recorded, .live = 1 };
        *fence = ++f->nfences;
        f->c.live_fences++;
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int fence_check(ts_fake_provider *f, uint64_t fence, int wait)
{
    if (!fence || fence > f->nfences || !f->fences[fence - 1].live) {
        f->c.misuse++;
        return -1;
    }
    fake_fence *fe = &f->fences[fence - 1];
    fake_stream *st = stream_of(f, fe->stream);
    if (st->capturing)
        f->c.fence_on_capturing++;
    if (wait && st->completed < fe->number)
        st->completed = fe->number; /* the device catches up */
    return st->completed >= fe->number ? TS_FENCE_DONE : TS_FENCE_PENDING;
}

static int f_fence_query(void *ctx, uint64_t fence)
{
    ts_fake_provider *f = ctx;
    int rc;
    pthread_mutex_lock(&f->lock);
    do {
        f->c.fence_queries++;
        rc = fence_check(f, fence, 0);
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int f_fence_wait(void *ctx, uint64_t fence)
{
    ts_fake_provider *f = ctx;
    int rc;
    pthread_mutex_lock(&f->lock);
    do {
        f->c.fence_waits++;
        rc = fence_check(f, fence, 1) == TS_FENCE_DONE ? TS_PROV_OK : TS_PROV_ERROR;
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static void f_fence_release(void *ctx, uint64_t fence)
{
    ts_fake_provider *f = ctx;
    pthread_mutex_lock(&f->lock);
    do {
        if (!fence || fence > f->nfences || !f->fences[fence - 1].live) {
            f->c.misuse++;
            break;
        }
        f->fences[fence - 1].live = 0;
        f->c.live_fences--;
    } while (0);
    pthread_mutex_unlock(&f->lock);
}

ts_fake_provider *ts_fake_create(uint64_t capacity, uint64_t granularity)
{
    ts_fake_provider *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    pthread_mutex_init(&f->lock, NULL);
    f->capacity = capacity;
    f->gran = granularity ? granularity : (2ull << 20);
    f->next_va = 0x7f0000000000ull;
    f->next_seg = 0x100000000ull;
    f->table = (ts_page_provider){
        .ctx = f,
        .granularity = f_gran,
        .reserve = f_reserve,
        .unreserve = f_unreserve,
        .create = f_create,
        .release = f_release,
        .map = f_map,
        .unmap = f_unmap,
        .set_access = f_set_access,
        .seg_alloc = f_seg_alloc,
        .seg_free = f_seg_free,
        .fence_record = f_fence_record,
        .fence_query = f_fence_query,
        .fence_wait = f_fence_wait,
        .fence_release = f_fence_release,
    };
    return f;
}

void ts_fake_destroy(ts_fake_provider *f)
{
    if (!f)
        return;
    for (int i = 0; i < MAX_RES; i++) {
        free(f->res[i].page_handle);
        free(f->res[i].page_access);
        free(f->res[i].page_first);
    }
    free(f->h);
    free(f->seg_keys);
    free(f->seg_sizes);
    free(f->fences);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

const ts_page_provider *ts_fake_provider_table(ts_fake_provider *f) { return &f->table; }

void ts_fake_counters_get(ts_fake_provider *f, ts_fake_counters *out)
{
    pthread_mutex_lock(&f->lock);
    *out = f->c;
    pthread_mutex_unlock(&f->lock);
}

void ts_fake_set_manual_fences(ts_fake_provider *f, int manual)
{
    pthread_mutex_lock(&f->lock);
    f->manual = manual;
    pthread_mutex_unlock(&f->lock);
}

void ts_fake_complete_stream(ts_fake_provider *f, uint64_t stream)
{
    pthread_mutex_lock(&f->lock);
    do {
        fake_stream *st = stream_of(f, stream);
        if (st)
            st->completed = st->recorded;
    } while (0);
    pthread_mutex_unlock(&f->lock);
}

void ts_fake_set_capturing(ts_fake_provider *f, uint64_t stream, int capturing)
{
    pthread_mutex_lock(&f->lock);
    do {
        fake_stream *st = stream_of(f, stream);
        if (st)
            st->capturing = capturing;
    } while (0);
    pthread_mutex_unlock(&f->lock);
}

static int op_index(const char *op)
{
    for (int i = 0; i < OP_N; i++)
        if (!strcmp(op, op_names[i]))
            return i;
    return -1;
}

void ts_fake_fail_nth(ts_fake_provider *f, const char *op, uint64_t nth, int rc)
{
    int i = op_index(op);
    if (i < 0)
        return;
    pthread_mutex_lock(&f->lock);
    do {
        f->fault[i].nth = nth ? f->fault[i].count + nth : 0;
        f->fault[i].rc = rc;
    } while (0);
    pthread_mutex_unlock(&f->lock);
}

void ts_fake_fail_random(ts_fake_provider *f, const char *op, double p, uint64_t seed, int rc)
{
    int i = op_index(op);
    if (i < 0)
        return;
    pthread_mutex_lock(&f->lock);
    do {
        f->fault[i].prob = p;
        f->fault[i].rng = seed * 2654435761u + 88172645463325252ull;
        f->fault[i].rc = rc;
    } while (0);
    pthread_mutex_unlock(&f->lock);
}

int ts_fake_mapped(ts_fake_provider *f, uint64_t va)
{
    int m = 0;
    pthread_mutex_lock(&f->lock);
    do {
        fake_res *r = res_of(f, va, 1);
        m = r && r->page_handle[(va - r->base) / f->gran] && r->page_access[(va - r->base) / f->gran];
    } while (0);
    pthread_mutex_unlock(&f->lock);
    return m;
}

void ts_fake_stream_progress(ts_fake_provider *f, uint64_t stream, uint64_t *recorded, uint64_t *completed)
{
    pthread_mutex_lock(&f->lock);
    do {
        fake_stream *st = stream_of(f, stream);
        *recorded = st ? st->recorded : 0;
        *completed = st ? st->completed : 0;
    } while (0);
    pthread_mutex_unlock(&f->lock);
}
