/* export_snapshot.c: a PyTorch CUDA memory snapshot (the dict that
 * torch.cuda.memory._snapshot() returns; /work/shared/traces/README.md),
 * pickled by hand with protocol 2 opcodes, so pytorch.org/memory_viz and
 * torch/cuda/_memory_viz.py open it without torch here.
 *
 * Every allocation the shim saw is one block in a segment of its own (at
 * the API level each cudaMalloc is a segment): the trace gets
 * segment_alloc + alloc for it, and free_requested + free_completed +
 * segment_free when it is freed; `segments` lists the blocks still live at
 * the end of the log.  Frames are the TRAINSHIM_STACKS call stacks,
 * innermost first as PyTorch writes them: {filename, line, name}. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "export/export.h"

/* ---------------------------------------------------------------- pickle */
static void p_byte(FILE *f, int c) { fputc(c, f); }

static void p_str(FILE *f, const char *s)
{
    uint32_t n = (uint32_t)strlen(s);
    p_byte(f, 'X'); /* BINUNICODE: 4-byte little-endian length, UTF-8 */
    unsigned char len[4] = { (unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16),
                             (unsigned char)(n >> 24) };
    fwrite(len, 1, 4, f);
    fwrite(s, 1, n, f);
}

static void p_int(FILE *f, int64_t v)
{
    if (v >= INT32_MIN && v <= INT32_MAX) {
        uint32_t u = (uint32_t)(int32_t)v;
        unsigned char b[5] = { 'J', (unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                               (unsigned char)(u >> 24) };
        fwrite(b, 1, 5, f); /* BININT */
        return;
    }
    /* LONG1 with 8 bytes: little-endian two's complement holds any int64 */
    unsigned char b[10] = { 0x8a, 8 };
    for (int i = 0; i < 8; i++)
        b[2 + i] = (unsigned char)((uint64_t)v >> (8 * i));
    fwrite(b, 1, 10, f);
}

/* Unsigned values (addresses, sizes) may exceed INT64_MAX in theory. */
static void p_uint(FILE *f, uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX) {
        p_int(f, (int64_t)v);
        return;
    }
    unsigned char b[9];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    b[8] = 0;
    p_byte(f, 0x8a);
    p_byte(f, 9);
    fwrite(b, 1, 9, f);
}

static void p_key_str(FILE *f, const char *k, const char *v)
{
    p_str(f, k);
    p_str(f, v);
}

static void p_key_uint(FILE *f, const char *k, uint64_t v)
{
    p_str(f, k);
    p_uint(f, v);
}

/* dicts and lists: EMPTY_DICT MARK k v ... SETITEMS; EMPTY_LIST MARK x ... APPENDS */
static void p_dict_begin(FILE *f) { fputs("}(", f); }
static void p_dict_end(FILE *f) { p_byte(f, 'u'); }
static void p_list_begin(FILE *f) { fputs("](", f); }
static void p_list_end(FILE *f) { p_byte(f, 'e'); }

/* ---------------------------------------------------------------- snapshot */
static void p_frames(FILE *f, struct sites_data *d, uint32_t stack_id)
{
    p_list_begin(f);
    const struct sites_stack *st = stack_id ? sites_stack(d, stack_id) : NULL;
    for (uint32_t i = 0; st && i < st->n_frames; i++) {
        struct sym_frame fr;
        char name[320];
        sites_frame(d, st, i, &fr);
        if (fr.func[0])
            snprintf(name, sizeof name, "%s", fr.func);
        else
            sym_format(&fr, name, sizeof name);
        p_dict_begin(f);
        p_key_str(f, "filename", fr.file[0] ? fr.file : (fr.module && fr.module[0] ? fr.module : "??"));
        p_key_uint(f, "line", (uint64_t)(fr.line > 0 ? fr.line : 0));
        p_key_str(f, "name", name);
        p_dict_end(f);
    }
    p_list_end(f);
}

static void p_trace_entry(FILE *f, const char *action, uint64_t addr, uint64_t size, uint64_t stream,
                          uint64_t time_us, struct sites_data *d, uint32_t stack_id)
{
    p_dict_begin(f);
    p_key_str(f, "action", action);
    p_key_uint(f, "addr", addr);
    p_key_uint(f, "size", size);
    p_key_uint(f, "stream", stream);
    p_key_uint(f, "time_us", time_us);
    p_str(f, "frames");
    p_frames(f, d, stack_id);
    p_dict_end(f);
}

struct block {
    uint64_t ptr, size, stream;
    uint32_t stack;
    int device;
    int live;
};

/* The export's state: the log's events in time order and a table of blocks by
 * pointer (freed slots keep the pointer). */
struct snap {
    FILE *f;
    const struct tslog *log;
    struct sites_data d;
    const struct tslog_event **ev;
    size_t n;
    struct block *blocks;
    size_t cap;
};

static struct block *block_of(struct snap *sn, uint64_t ptr)
{
    size_t s = (size_t)ts_rec_mix64(ptr) & (sn->cap - 1);
    while (sn->blocks[s].ptr && sn->blocks[s].ptr != ptr)
        s = (s + 1) & (sn->cap - 1);
    return &sn->blocks[s];
}

static int device_of(const struct tslog_event *e) { return e->device >= 0 && e->device < 64 ? e->device : 0; }

static void trace_block(struct snap *sn, const char *action, const struct block *b, uint64_t t_us)
{
    p_trace_entry(sn->f, action, b->ptr, b->size, b->stream, t_us, &sn->d, b->stack);
}

/* One device's trace: its allocations and frees replayed in time order. */
static void device_trace(struct snap *sn, int dev)
{
    p_list_begin(sn->f);
    for (size_t i = 0; i < sn->n; i++) {
        const struct tslog_event *e = sn->ev[i];
        struct block *b = block_of(sn, e->ptr);
        uint64_t t_us = export_wall_ns(sn->log, e->time_ns) / 1000;
        if (e->type == TS_REC_ALLOC) {
            if (b->live && b->device == dev) {
                /* handed out again without a free we saw: close the old block */
                trace_block(sn, "free_completed", b, t_us);
                trace_block(sn, "segment_free", b, t_us);
            }
            *b =
                (struct block){ e->ptr,       e->bytes, e->stream, sites_stack_of(&sn->d, e->ptr, e->time_ns),
                                device_of(e), 1 };
            if (b->device != dev)
                continue;
            trace_block(sn, "segment_alloc", b, t_us);
            trace_block(sn, "alloc", b, t_us);
        } else if (b->ptr == e->ptr && b->live) {
            b->live = 0;
            if (b->device != dev)
                continue;
            trace_block(sn, "free_requested", b, t_us);
            trace_block(sn, "free_completed", b, t_us);
            trace_block(sn, "segment_free", b, t_us);
        }
    }
    p_list_end(sn->f);
}

/* The blocks live at the end, over all devices. */
static void replay_end_state(struct snap *sn)
{
    memset(sn->blocks, 0, sn->cap * sizeof *sn->blocks);
    for (size_t i = 0; i < sn->n; i++) {
        const struct tslog_event *e = sn->ev[i];
        struct block *b = block_of(sn, e->ptr);
        if (e->type == TS_REC_ALLOC)
            *b =
                (struct block){ e->ptr,       e->bytes, e->stream, sites_stack_of(&sn->d, e->ptr, e->time_ns),
                                device_of(e), 1 };
        else if (b->ptr == e->ptr)
            b->live = 0;
    }
}

/* A live block as a segment of its own with one active block. */
static void write_segment(struct snap *sn, const struct block *b)
{
    FILE *f = sn->f;
    p_dict_begin(f);
    p_key_uint(f, "device", (uint64_t)b->device);
    p_key_uint(f, "address", b->ptr);
    /* a segment of one block: every size is the block's */
    static const char *const sizes[] = { "total_size", "allocated_size", "active_size", "requested_size" };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        p_key_uint(f, sizes[i], b->size);
    p_key_uint(f, "stream", b->stream);
    p_key_str(f, "segment_type", b->size < (1u << 20) ? "small" : "large");
    p_str(f, "is_expandable");
    p_byte(f, 0x89); /* NEWFALSE */
    p_str(f, "blocks");
    p_list_begin(f);
    p_dict_begin(f);
    p_key_uint(f, "address", b->ptr);
    p_key_uint(f, "size", b->size);
    p_key_uint(f, "requested_size", b->size);
    p_key_str(f, "state", "active_allocated");
    p_str(f, "frames");
    p_frames(f, &sn->d, b->stack);
    p_dict_end(f);
    p_list_end(f);
    p_dict_end(f);
}

static void write_pickle(struct snap *sn)
{
    FILE *f = sn->f;
    int ndev = 1;
    for (size_t i = 0; i < sn->n; i++)
        if (sn->ev[i]->type == TS_REC_ALLOC && sn->ev[i]->device >= ndev && sn->ev[i]->device < 64)
            ndev = sn->ev[i]->device + 1;
    fputs("\x80\x02", f); /* PROTO 2 */
    p_dict_begin(f);
    p_str(f, "device_traces");
    p_list_begin(f);
    for (int dev = 0; dev < ndev; dev++) {
        memset(sn->blocks, 0, sn->cap * sizeof *sn->blocks); /* each device replays from the start */
        device_trace(sn, dev);
    }
    p_list_end(f);
    replay_end_state(sn);
    p_str(f, "segments");
    p_list_begin(f);
    for (size_t s = 0; s < sn->cap; s++)
        if (sn->blocks[s].live)
            write_segment(sn, &sn->blocks[s]);
    p_list_end(f);
    p_str(f, "allocator_settings");
    p_dict_begin(f);
    p_key_str(f, "producer", "trainshim export (every device allocation the program made, by call)");
    p_dict_end(f);
    p_str(f, "external_annotations");
    p_list_begin(f);
    p_list_end(f);
    p_dict_end(f);
    p_byte(f, '.'); /* STOP */
}

int export_snapshot(FILE *f, const struct export_input *in)
{
    struct snap sn = { .f = f, .log = &in->logs[0] };
    if (sites_load(sn.log, &sn.d) != 0) {
        sites_free(&sn.d);
        memset(&sn.d, 0, sizeof sn.d);
        sn.d.sym = sym_new();
    }
    sn.ev = sites_sorted_events(sn.log, &sn.n);
    sn.cap = 2;
    while (sn.cap < sn.n * 2 + 2)
        sn.cap *= 2;
    sn.blocks = calloc(sn.cap, sizeof *sn.blocks);
    int rc = 1;
    if (sn.ev && sn.blocks && sn.d.sym) {
        write_pickle(&sn);
        rc = 0;
    }
    free(sn.ev);
    free(sn.blocks);
    sites_free(&sn.d);
    return rc;
}
