/* report_sites.c: allocation call sites and the memory timeline.
 *
 * The stack records are read here in a second pass over the file (the
 * general reader, tools/read/logread.c, skips them as unknown types), with the
 * same framing checks: length, alignment, check value. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_sites.h"

/* ------------------------------------------------------------ reading */
static int by_stack_id(const void *a, const void *b)
{
    const struct sites_stack *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static int by_ptr_time(const void *a, const void *b)
{
    const struct sites_alloc_stack *x = a, *y = b;
    if (x->ptr != y->ptr)
        return x->ptr < y->ptr ? -1 : 1;
    return (x->time_ns > y->time_ns) - (x->time_ns < y->time_ns);
}

static int read_modules(struct sites_data *d, const unsigned char *rec, uint32_t len)
{
    struct ts_rec_modules m;
    memcpy(&m, rec, sizeof m);
    if (m.count > len / sizeof(struct ts_module_entry))
        return -1;
    struct sym_module *mods = calloc(m.count ? m.count : 1, sizeof *mods);
    if (!mods)
        return -1;
    size_t off = sizeof m, n = 0;
    int rc = 0;
    for (; n < m.count; n++) {
        struct ts_module_entry e;
        if (off + sizeof e > len) {
            rc = -1;
            break;
        }
        memcpy(&e, rec + off, sizeof e);
        uint64_t body = (uint64_t)e.path_len + e.build_id_len;
        if (body > len - off - sizeof e) {
            rc = -1;
            break;
        }
        mods[n].base = e.base;
        mods[n].start = e.start;
        mods[n].end = e.end;
        mods[n].path = strndup((const char *)rec + off + sizeof e, e.path_len);
        if (!mods[n].path) {
            rc = -1;
            break;
        }
        off += ts_rec_align((uint32_t)(sizeof e + body));
    }
    if (rc == 0 && sym_add_generation(d->sym, m.generation, mods, n) == 0)
        d->n_module_records++;
    for (size_t i = 0; i < n; i++)
        free(mods[i].path);
    free(mods);
    return rc;
}

static int read_stack(struct sites_data *d, size_t *cap, const unsigned char *rec, uint32_t len)
{
    struct ts_rec_stack s;
    memcpy(&s, rec, sizeof s);
    if (s.n_frames > (len - sizeof s) / 8)
        return -1;
    uint64_t *frames = malloc((s.n_frames ? s.n_frames : 1) * sizeof *frames);
    struct sites_stack *st =
        frames ? tslog_push_item((void **)&d->stacks, &d->n_stacks, cap, sizeof *st) : NULL;
    if (!st) {
        free(frames);
        return -1;
    }
    memcpy(frames, rec + sizeof s, (size_t)s.n_frames * 8);
    st->frames = frames;
    st->id = s.stack_id;
    st->gen = s.modules_gen;
    st->n_frames = s.n_frames;
    return 0;
}

static int read_alloc_stack(struct sites_data *d, size_t *cap, const unsigned char *rec, uint32_t len)
{
    struct ts_rec_alloc_stack a = { 0 };
    memcpy(&a, rec, len < sizeof a ? len : sizeof a);
    struct sites_alloc_stack *slot = tslog_push_item((void **)&d->allocs, &d->n_allocs, cap, sizeof *slot);
    if (!slot)
        return -1;
    *slot = (struct sites_alloc_stack){ a.ptr, a.alloc_time_ns, a.h.tid, a.stack_id };
    return 0;
}

struct load_state {
    struct sites_data *d;
    size_t cap_stacks, cap_allocs;
};

/* A record this part reads; a bad one (or out of memory) ends the reading. */
static int load_one(void *arg, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct load_state *st = arg;
    int bad = 0;
    if (h->type == TS_REC_STACK && h->len >= sizeof(struct ts_rec_stack))
        bad = read_stack(st->d, &st->cap_stacks, rec, h->len);
    else if (h->type == TS_REC_MODULES && h->len >= sizeof(struct ts_rec_modules))
        bad = read_modules(st->d, rec, h->len);
    else if (h->type == TS_REC_ALLOC_STACK && h->len >= sizeof(struct ts_rec_hdr) + 24)
        bad = read_alloc_stack(st->d, &st->cap_allocs, rec, h->len);
    return bad ? 1 : 0;
}

int sites_load(const struct tslog *log, struct sites_data *d)
{
    memset(d, 0, sizeof *d);
    d->sym = sym_new();
    if (!d->sym || !log->raw)
        return -1;
    struct load_state st = { d, 0, 0 };
    if (tslog_walk_records(log->raw, log->raw_size, load_one, &st) < 0) /* not a log */
        return -1;
    if (d->n_stacks)
        qsort(d->stacks, d->n_stacks, sizeof *d->stacks, by_stack_id);
    if (d->n_allocs)
        qsort(d->allocs, d->n_allocs, sizeof *d->allocs, by_ptr_time);
    return 0;
}

void sites_free(struct sites_data *d)
{
    for (size_t i = 0; i < d->n_stacks; i++)
        free(d->stacks[i].frames);
    free(d->stacks);
    free(d->allocs);
    sym_free(d->sym);
    memset(d, 0, sizeof *d);
}

uint32_t sites_stack_of(const struct sites_data *d, uint64_t ptr, uint64_t time_ns)
{
    size_t lo = 0, hi = d->n_allocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct sites_alloc_stack *a = &d->allocs[mid];
        if (a->ptr < ptr || (a->ptr == ptr && a->time_ns < time_ns))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < d->n_allocs && d->allocs[lo].ptr == ptr && d->allocs[lo].time_ns == time_ns)
        return d->allocs[lo].stack_id;
    return 0;
}

const struct sites_stack *sites_stack(const struct sites_data *d, uint32_t id)
{
    struct sites_stack key = { .id = id };
    return d->n_stacks ? bsearch(&key, d->stacks, d->n_stacks, sizeof key, by_stack_id) : NULL;
}

void sites_frame(struct sites_data *d, const struct sites_stack *st, uint32_t i, struct sym_frame *out)
{
    sym_lookup(d->sym, st->gen, st->frames[i], out);
}

/* ------------------------------------------------------------ analysis */
static int ev_by_time(const void *a, const void *b)
{
    const struct tslog_event *x = *(const struct tslog_event *const *)a;
    const struct tslog_event *y = *(const struct tslog_event *const *)b;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

const struct tslog_event **sites_sorted_events(const struct tslog *log, size_t *n)
{
    const struct tslog_event **v = malloc((log->n_events ? log->n_events : 1) * sizeof *v);
    *n = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < log->n_events; i++) {
        const struct tslog_event *e = &log->events[i];
        /* device memory only: pinned host allocations carry device -1 */
        if ((e->type == TS_REC_FREE || (e->type == TS_REC_ALLOC && e->device >= 0)) && !e->result && e->ptr)
            v[(*n)++] = e;
    }
    qsort(v, *n, sizeof *v, ev_by_time);
    return v;
}

/* Live allocations: open addressing on the pointer, backward-shift erase. */
struct live {
    uint64_t *ptr, *size;
    uint32_t *stack;
    size_t cap, n;
};

static size_t live_slot(const struct live *m, uint64_t p)
{
    uint64_t h = ts_rec_mix64(p);
    size_t s = (size_t)h & (m->cap - 1);
    while (m->ptr[s] && m->ptr[s] != p)
        s = (s + 1) & (m->cap - 1);
    return s;
}

static int live_init(struct live *m, size_t n)
{
    m->cap = 16;
    while (m->cap < n * 2 + 2)
        m->cap *= 2;
    m->n = 0;
    m->ptr = calloc(m->cap, 8);
    m->size = calloc(m->cap, 8);
    m->stack = calloc(m->cap, 4);
    return m->ptr && m->size && m->stack ? 0 : -1;
}

static void live_free(struct live *m)
{
    free(m->ptr);
    free(m->size);
    free(m->stack);
}

static void live_erase(struct live *m, size_t s)
{
    m->ptr[s] = 0;
    size_t j = s;
    for (;;) {
        j = (j + 1) & (m->cap - 1);
        if (!m->ptr[j])
            return;
        size_t home = (size_t)ts_rec_mix64(m->ptr[j]) & (m->cap - 1);
        if ((s < j) ? (home <= s || home > j) : (home <= s && home > j)) {
            m->ptr[s] = m->ptr[j];
            m->size[s] = m->size[j];
            m->stack[s] = m->stack[j];
            m->ptr[j] = 0;
            s = j;
        }
    }
}

/* Applies event e; returns the change of the allocated total. */
static int64_t live_apply(struct live *m, const struct tslog_event *e, uint32_t stack)
{
    size_t s = live_slot(m, e->ptr);
    if (e->type == TS_REC_ALLOC) {
        int64_t delta = (int64_t)e->bytes;
        if (m->ptr[s])
            delta -= (int64_t)m->size[s]; /* handed out again: its free was not seen */
        else
            m->n++;
        m->ptr[s] = e->ptr;
        m->size[s] = e->bytes;
        m->stack[s] = stack;
        return delta;
    }
    if (!m->ptr[s])
        return 0;
    int64_t delta = -(int64_t)m->size[s];
    live_erase(m, s);
    m->n--;
    return delta;
}

static int by_bytes(const void *a, const void *b)
{
    const struct site_row *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return (x->stack_id > y->stack_id) - (x->stack_id < y->stack_id);
}

static int by_row_stack(const void *a, const void *b)
{
    const struct site_row *x = a, *y = b;
    return (x->stack_id > y->stack_id) - (x->stack_id < y->stack_id);
}

int sites_analyze(const struct tslog *log, const struct sites_data *d, struct sites_result *r)
{
    memset(r, 0, sizeof *r);
    size_t n = 0;
    const struct tslog_event **ev = sites_sorted_events(log, &n);
    struct live m;
    if (!ev || live_init(&m, n)) {
        free(ev);
        return -1;
    }
    /* pass 1: where the peak is; pass 2: the live set at that moment */
    uint64_t cur = 0;
    size_t peak_at = 0;
    for (size_t i = 0; i < n; i++) {
        cur += (uint64_t)live_apply(&m, ev[i], 0);
        if (cur > r->peak_bytes) {
            r->peak_bytes = cur;
            r->peak_time_ns = ev[i]->time_ns;
            peak_at = i + 1;
        }
    }
    live_free(&m);
    int rc = -1;
    if (live_init(&m, n))
        goto out;
    for (size_t i = 0; i < peak_at; i++)
        live_apply(&m, ev[i],
                   ev[i]->type == TS_REC_ALLOC ? sites_stack_of(d, ev[i]->ptr, ev[i]->time_ns) : 0);
    r->rows = calloc(m.n ? m.n : 1, sizeof *r->rows);
    if (!r->rows)
        goto out;
    /* group by stack: sort the live stacks, then merge runs */
    for (size_t s = 0; s < m.cap; s++)
        if (m.ptr[s])
            r->rows[r->n_rows++] = (struct site_row){ m.stack[s], m.size[s], 1 };
    qsort(r->rows, r->n_rows, sizeof *r->rows, by_row_stack);
    size_t w = 0;
    for (size_t i = 0; i < r->n_rows; i++) {
        if (w && r->rows[w - 1].stack_id == r->rows[i].stack_id) {
            r->rows[w - 1].bytes += r->rows[i].bytes;
            r->rows[w - 1].count++;
        } else
            r->rows[w++] = r->rows[i];
    }
    r->n_rows = w;
    qsort(r->rows, r->n_rows, sizeof *r->rows, by_bytes);
    rc = 0;
out:
    live_free(&m);
    free(ev);
    return rc;
}

void sites_result_free(struct sites_result *r)
{
    free(r->rows);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------ output */
#define SITES_FRAMES_SHOWN 4

/* The stacks and the sites live at the peak; -1 (nothing to free) when the
 * run recorded no stacks or out of memory. */
static int load_sites(const struct tslog *log, struct sites_data *d, struct sites_result *r)
{
    if (sites_load(log, d) || !d->n_stacks || sites_analyze(log, d, r)) {
        sites_free(d);
        return -1;
    }
    return 0;
}

void sites_text(FILE *f, const struct tslog *log)
{
    struct sites_data d;
    struct sites_result r;
    if (load_sites(log, &d, &r))
        return;
    char b1[32], b2[32];
    uint64_t t0 = log->have_header ? log->start_mono_ns : log->first_time_ns;
    fprintf(f, "\n== TOP ALLOCATION SITES (live at the peak of %s, t=%.3f s; %zu distinct stacks) ==\n",
            tslog_human_bytes(r.peak_bytes, b1, sizeof b1),
            r.peak_time_ns >= t0 ? (double)(r.peak_time_ns - t0) / 1e9 : 0.0, d.n_stacks);
    for (size_t i = 0; i < r.n_rows && i < SITES_TOP; i++) {
        const struct site_row *row = &r.rows[i];
        fprintf(f, "#%-2zu %10s %5.1f%%  %" PRIu64 " allocation%s\n", i + 1,
                tslog_human_bytes(row->bytes, b2, sizeof b2),
                r.peak_bytes ? 100.0 * (double)row->bytes / (double)r.peak_bytes : 0.0, row->count,
                row->count == 1 ? "" : "s");
        const struct sites_stack *st = sites_stack(&d, row->stack_id);
        if (!st) {
            fprintf(f, "      (no stack recorded)\n");
            continue;
        }
        for (uint32_t k = 0; k < st->n_frames && k < SITES_FRAMES_SHOWN; k++) {
            struct sym_frame fr;
            char line[800];
            sites_frame(&d, st, k, &fr);
            sym_format(&fr, line, sizeof line);
            fprintf(f, "      %s\n", line);
        }
    }
    if (r.n_rows > SITES_TOP)
        fprintf(f, "(%zu more sites)\n", r.n_rows - SITES_TOP);
    sites_result_free(&r);
    sites_free(&d);
    sites_timeline_text(f, log, 12);
}

void sites_json(const struct acct_json *j, const struct tslog *log)
{
    struct sites_data d;
    struct sites_result r;
    if (load_sites(log, &d, &r))
        return;
    j->u64(j->ctx, "top_sites_peak_bytes", r.peak_bytes);
    j->open(j->ctx, "top_sites", '[');
    for (size_t i = 0; i < r.n_rows && i < SITES_TOP; i++) {
        const struct site_row *row = &r.rows[i];
        j->open(j->ctx, NULL, '{');
        j->u64(j->ctx, "bytes", row->bytes);
        j->u64(j->ctx, "count", row->count);
        j->u64(j->ctx, "stack_id", row->stack_id);
        j->open(j->ctx, "frames", '[');
        const struct sites_stack *st = sites_stack(&d, row->stack_id);
        for (uint32_t k = 0; st && k < st->n_frames; k++) {
            struct sym_frame fr;
            char addr[24];
            sites_frame(&d, st, k, &fr);
            snprintf(addr, sizeof addr, "0x%" PRIx64, fr.addr);
            j->open(j->ctx, NULL, '{');
            j->str(j->ctx, "function", fr.func[0] ? fr.func : NULL);
            j->str(j->ctx, "file", fr.file[0] ? fr.file : NULL);
            j->i64(j->ctx, "line", fr.line);
            j->str(j->ctx, "module", fr.module);
            j->str(j->ctx, "address", addr);
            j->close(j->ctx, '}');
        }
        j->close(j->ctx, ']');
        j->close(j->ctx, '}');
    }
    j->close(j->ctx, ']');
    sites_result_free(&r);
    sites_free(&d);
}

#define TIMELINE_DEVICES 8
void sites_timeline_text(FILE *f, const struct tslog *log, int rows)
{
    size_t n = 0;
    const struct tslog_event **ev = sites_sorted_events(log, &n);
    struct live m;
    if (!ev || !n || rows < 1 || live_init(&m, n)) {
        free(ev);
        return;
    }
    int ndev = 1;
    for (size_t i = 0; i < n; i++)
        if (ev[i]->device >= ndev && ev[i]->device < TIMELINE_DEVICES)
            ndev = ev[i]->device + 1;
    uint64_t t0 = ev[0]->time_ns, span = ev[n - 1]->time_ns - t0 + 1;
    uint64_t cur[TIMELINE_DEVICES] = { 0 }, hi[TIMELINE_DEVICES] = { 0 };
    fprintf(f, "\n== MEMORY TIMELINE (highest allocated in each interval) ==\n%10s", "time (s)");
    for (int d = 0; d < ndev; d++)
        fprintf(f, "  %12s%d", "device ", d);
    fputc('\n', f);
    size_t i = 0;
    for (int row = 0; row < rows; row++) {
        uint64_t end = t0 + span * (uint64_t)(row + 1) / (uint64_t)rows;
        for (int d = 0; d < ndev; d++)
            hi[d] = cur[d];
        for (; i < n && (ev[i]->time_ns < end || row == rows - 1); i++) {
            const struct tslog_event *e = ev[i];
            /* a free names no device: the live entry keeps its allocation's
             * device in the stack field (and a pointer handed out again
             * moves from the device it was on) */
            size_t s = live_slot(&m, e->ptr);
            int old = m.ptr[s] ? (int)m.stack[s] : -1;
            int d = e->type == TS_REC_ALLOC ? e->device : old;
            if (d < 0 || d >= TIMELINE_DEVICES)
                d = 0;
            uint64_t old_size = m.ptr[s] ? m.size[s] : 0;
            live_apply(&m, e, (uint32_t)d);
            if (old >= 0 && old < TIMELINE_DEVICES)
                cur[old] -= old_size;
            if (e->type == TS_REC_ALLOC)
                cur[d] += e->bytes;
            if (cur[d] > hi[d])
                hi[d] = cur[d];
        }
        fprintf(f, "%10.3f", (double)(end - t0) / 1e9);
        for (int d = 0; d < ndev; d++) {
            char b[32];
            fprintf(f, "  %13s", tslog_human_bytes(hi[d], b, sizeof b));
        }
        fputc('\n', f);
    }
    live_free(&m);
    free(ev);
}
