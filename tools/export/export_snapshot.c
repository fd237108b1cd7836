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

int export_snapshot(FILE *f, const struct export_input *in)
{
    const struct tslog *log = &in->logs[0];
    struct sites_data d;
    if (sites_load(log->file, &d) != 0) {
        sites_free(&d);
        memset(&d, 0, sizeof d);
        d.sym = sym_new();
    }
    size_t n = 0;
    const struct tslog_event **ev = sites_sorted_events(log, &n);
    size_t cap = 2;
    while (cap < n * 2 + 2)
        cap *= 2;
    struct block *blocks = calloc(cap, sizeof *blocks); /* by pointer; freed slots keep the pointer */
    if (!ev || !blocks || !d.sym) {
        free(ev);
        free(blocks);
        sites_free(&d);
        return 1;
    }
    int ndev = 1;
    for (size_t i = 0; i < n; i++)
        if (ev[i]->type == TS_REC_ALLOC && ev[i]->device >= ndev && ev[i]->device < 64)
            ndev = ev[i]->device + 1;

    fputs("\x80\x02", f); /* PROTO 2 */
    p_dict_begin(f);
    /* device_traces first: it fills the table of blocks live at the end */
    p_str(f, "device_traces");
    p_list_begin(f);
    for (int dev = 0; dev < ndev; dev++) {
        p_list_begin(f);
        for (size_t i = 0; i < n; i++) {
            const struct tslog_event *e = ev[i];
            size_t s = (size_t)ts_rec_mix64(e->ptr) & (cap - 1);
            while (blocks[s].ptr && blocks[s].ptr != e->ptr)
                s = (s + 1) & (cap - 1);
            struct block *b = &blocks[s];
            uint64_t t_us = export_wall_ns(log, e->time_ns) / 1000;
            if (e->type == TS_REC_ALLOC) {
                int edev = e->device >= 0 && e->device < 64 ? e->device : 0;
                if (b->live && b->device == dev) {
                    /* handed out again without a free we saw: close the old block */
                    p_trace_entry(f, "free_completed", b->ptr, b->size, b->stream, t_us, &d, b->stack);
                    p_trace_entry(f, "segment_free", b->ptr, b->size, b->stream, t_us, &d, b->stack);
                }
                *b = (struct block){ e->ptr, e->bytes, e->stream, sites_stack_of(&d, e->ptr, e->time_ns),
                                     edev,   1 };
                if (edev != dev)
                    continue;
                p_trace_entry(f, "segment_alloc", b->ptr, b->size, b->stream, t_us, &d, b->stack);
                p_trace_entry(f, "alloc", b->ptr, b->size, b->stream, t_us, &d, b->stack);
            } else if (b->ptr == e->ptr && b->live) {
                b->live = 0;
                if (b->device != dev)
                    continue;
                p_trace_entry(f, "free_requested", b->ptr, b->size, b->stream, t_us, &d, b->stack);
                p_trace_entry(f, "free_completed", b->ptr, b->size, b->stream, t_us, &d, b->stack);
                p_trace_entry(f, "segment_free", b->ptr, b->size, b->stream, t_us, &d, b->stack);
            }
        }
        p_list_end(f);
        if (dev + 1 < ndev)
            memset(blocks, 0, cap * sizeof *blocks); /* replay again for the next device */
    }
    p_list_end(f);
    /* after the last device's replay the table holds the end state of that
     * device only: replay once more over all devices for the segments */
    memset(blocks, 0, cap * sizeof *blocks);
    for (size_t i = 0; i < n; i++) {
        const struct tslog_event *e = ev[i];
        size_t s = (size_t)ts_rec_mix64(e->ptr) & (cap - 1);
        while (blocks[s].ptr && blocks[s].ptr != e->ptr)
            s = (s + 1) & (cap - 1);
        if (e->type == TS_REC_ALLOC)
            blocks[s] = (struct block){ e->ptr,
                                        e->bytes,
                                        e->stream,
                                        sites_stack_of(&d, e->ptr, e->time_ns),
                                        e->device >= 0 && e->device < 64 ? e->device : 0,
                                        1 };
        else if (blocks[s].ptr == e->ptr)
            blocks[s].live = 0;
    }
    p_str(f, "segments");
    p_list_begin(f);
    for (size_t s = 0; s < cap; s++) {
        const struct block *b = &blocks[s];
        if (!b->live)
            continue;
        p_dict_begin(f);
        p_key_uint(f, "device", (uint64_t)b->device);
        p_key_uint(f, "address", b->ptr);
        p_key_uint(f, "total_size", b->size);
        p_key_uint(f, "allocated_size", b->size);
        p_key_uint(f, "active_size", b->size);
        p_key_uint(f, "requested_size", b->size);
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
        p_frames(f, &d, b->stack);
        p_dict_end(f);
        p_list_end(f);
        p_dict_end(f);
    }
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
    free(ev);
    free(blocks);
    sites_free(&d);
    return 0;
}
