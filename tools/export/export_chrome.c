/* export_chrome.c: the Trace Event Format (the JSON object form) that
 * Perfetto and chrome://tracing open.  One process per log (its rank when
 * known), one thread per CUDA stream; copies, GEMMs and NCCL calls are
 * complete ("X") slices, allocated bytes per device a counter ("C").
 *
 * What the times mean, as far as the log allows: a copy's slice is the host
 * time inside its call (the record is made when the call returns); a GEMM
 * or collective starts when it was issued and lasts its sampled GPU time;
 * calls that were not timed are instant events ("i") at the issue time.
 * With CUPTI records (TRAINSHIM_CUPTI=1), kernels and copies as the GPU ran
 * them are slices too, one thread per (device, CUPTI stream) named
 * "GPU d stream s", placed after the host-side streams. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "observe/comm.h"
#include "export/export.h"
#include "report/report_gpu.h"

#define MAX_STREAMS 1024

struct stream_map {
    uint64_t ids[MAX_STREAMS];
    int n;
};

/* Thread id of a stream: 1 + its index (0 would be the process itself). */
static int stream_tid(struct stream_map *m, uint64_t stream)
{
    for (int i = 0; i < m->n; i++)
        if (m->ids[i] == stream)
            return i + 1;
    if (m->n == MAX_STREAMS)
        return MAX_STREAMS; /* the rest share the last thread */
    m->ids[m->n++] = stream;
    return m->n;
}

struct writer {
    FILE *f;
    int first;
    uint64_t t0; /* wall ns of the earliest event of all logs */
};

static void begin(struct writer *w)
{
    fputs(w->first ? "\n" : ",\n", w->f);
    w->first = 0;
}

static double us(const struct writer *w, uint64_t wall_ns)
{
    return wall_ns >= w->t0 ? (double)(wall_ns - w->t0) / 1e3 : 0.0;
}

static void meta(struct writer *w, int pid, int tid, const char *what, const char *name)
{
    begin(w);
    fprintf(w->f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"args\":{\"name\":", pid, tid, what);
    export_json_string(w->f, name);
    fputs("}}", w->f);
}

static void slice(struct writer *w, int pid, int tid, const char *cat, const char *name, double ts,
                  double dur)
{
    begin(w);
    if (dur > 0)
        fprintf(w->f,
                "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"cat\":\"%s\",\"name\":", pid,
                tid, ts, dur, cat);
    else
        fprintf(w->f,
                "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"cat\":\"%s\",\"name\":", pid,
                tid, ts, cat);
    export_json_string(w->f, name);
}

static const char *const dir_names[] = { "copy", "H2D", "D2H", "D2D", "H2H", "peer", "default" };
static const char *const host_names[] = { "unknown", "pageable", "pinned", "none" };

#define GPU_TID_BASE 2000 /* above the host-side stream threads (1..MAX_STREAMS) */
#define MAX_GPU_TRACKS 256

/* Kernels and copies of the CUPTI records: one track per (device, stream). */
static void write_gpu(struct writer *w, const struct tslog *log, int pid)
{
    struct gpu_data d;
    if (gpu_load(log, &d) != 0)
        return;
    static const char *const copy_names[] = { "copy", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                              "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" };
    static const char *const mem_names[] = { "unknown", "pageable", "pinned",        "device",
                                             "array",   "managed",  "device static", "managed static" };
    uint64_t tracks[MAX_GPU_TRACKS];
    int n = 0;
    char nb[32];
    for (size_t i = 0; i < d.n_acts; i++) {
        const struct gpu_activity *a = &d.acts[i];
        uint64_t key = (uint64_t)a->device << 32 | a->stream_id;
        int t;
        for (t = 0; t < n && tracks[t] != key; t++)
            ;
        if (t == n && n < MAX_GPU_TRACKS)
            tracks[n++] = key;
        if (t == MAX_GPU_TRACKS)
            t = MAX_GPU_TRACKS - 1; /* the rest share the last track */
        double ts = us(w, export_wall_ns(log, a->start_ns));
        double dur = (double)(a->end_ns - a->start_ns) / 1e3;
        if (a->is_copy) {
            slice(w, pid, GPU_TID_BASE + t, "gpu_copy", copy_names[a->copy_kind < 11 ? a->copy_kind : 0], ts,
                  dur > 0 ? dur : 0.001);
            fprintf(w->f, ",\"args\":{\"bytes\":%" PRIu64 ",\"src\":\"%s\",\"dst\":\"%s\"}}", a->bytes,
                    mem_names[a->src_kind < 8 ? a->src_kind : 0],
                    mem_names[a->dst_kind < 8 ? a->dst_kind : 0]);
        } else {
            slice(w, pid, GPU_TID_BASE + t, "gpu_kernel", gpu_kernel_name(&d, a->name_id, nb, sizeof nb), ts,
                  dur > 0 ? dur : 0.001);
            fputs("}", w->f);
        }
    }
    for (int t = 0; t < n; t++) {
        char tn[64];
        snprintf(tn, sizeof tn, "GPU %u stream %u", (unsigned)(tracks[t] >> 32), (unsigned)tracks[t]);
        meta(w, pid, GPU_TID_BASE + t, "thread_name", tn);
    }
    gpu_free(&d);
}

static void write_process(struct writer *w, const struct tslog *log, int pid)
{
    char name[160];
    if (log->rank >= 0)
        snprintf(name, sizeof name, "rank %d (pid %d)", log->rank, log->pid);
    else
        snprintf(name, sizeof name, "pid %d", log->pid);
    meta(w, pid, 0, "process_name", name);
    begin(w);
    fprintf(
        w->f,
        "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":%d}}",
        pid, pid);
}

static void write_copies(struct writer *w, const struct tslog *log, int pid, struct stream_map *sm)
{
    char api[64];
    for (size_t i = 0; i < log->n_events; i++) {
        const struct tslog_event *e = &log->events[i];
        if (e->type != TS_REC_COPY)
            continue;
        int tid = stream_tid(sm, e->stream);
        uint64_t end = export_wall_ns(log, e->time_ns);
        uint64_t dur = e->duration_ns ? e->duration_ns : 1;
        slice(w, pid, tid, "copy", dir_names[e->dir < 7 ? e->dir : 0], us(w, end > dur ? end - dur : 0),
              (double)dur / 1e3);
        fprintf(w->f, ",\"args\":{\"bytes\":%" PRIu64 ",\"host\":\"%s\",\"async\":%s,\"api\":", e->bytes,
                host_names[e->host_kind < 4 ? e->host_kind : 0], e->async ? "true" : "false");
        export_json_string(w->f, tslog_api_name(log, e->api, api, sizeof api));
        fprintf(w->f, ",\"result\":%d}}", e->result);
    }
}

static void write_gemms(struct writer *w, const struct tslog *log, int pid, struct stream_map *sm)
{
    char api[64];
    for (size_t i = 0; i < log->n_gemms; i++) {
        const struct tslog_gemm *g = &log->gemms[i];
        int tid = stream_tid(sm, g->stream);
        char label[96];
        snprintf(label, sizeof label, "GEMM %" PRId64 "x%" PRId64 "x%" PRId64, g->m, g->n, g->k);
        slice(w, pid, tid, "gemm", label, us(w, export_wall_ns(log, g->time_ns)), (double)g->gpu_ns / 1e3);
        fprintf(w->f,
                ",\"args\":{\"m\":%" PRId64 ",\"n\":%" PRId64 ",\"k\":%" PRId64 ",\"batch\":%" PRId64
                ",\"flops\":%" PRIu64 ",\"gpu_time\":\"%s\",\"api\":",
                g->m, g->n, g->k, g->batch, g->flops, g->gpu_ns ? "sampled" : "not timed");
        export_json_string(w->f, tslog_api_name(log, g->api, api, sizeof api));
        fputs("}}", w->f);
    }
}

static void write_collectives(struct writer *w, const struct tslog *log, int pid, struct stream_map *sm)
{
    for (size_t i = 0; i < log->n_nccls; i++) {
        const struct tslog_nccl *c = &log->nccls[i];
        if (!ts_nccl_op_moves_data(c->op))
            continue;
        int tid = stream_tid(sm, c->stream);
        slice(w, pid, tid, "nccl", ts_nccl_op_name(c->op), us(w, export_wall_ns(log, c->time_ns)),
              (double)c->gpu_ns / 1e3);
        fprintf(w->f,
                ",\"args\":{\"bytes\":%" PRIu64 ",\"count\":%" PRIu64 ",\"comm_size\":%d,\"rank\":%d,"
                "\"gpu_time\":\"%s\"}}",
                c->bytes, c->count, c->comm_size, c->rank, c->gpu_ns ? "sampled" : "not timed");
    }
}

struct counter_state {
    struct writer *w;
    const struct tslog *log;
    int pid;
};

static int allocated_counter(void *arg, uint64_t time_ns, int dev, uint64_t allocated)
{
    struct counter_state *cs = arg;
    begin(cs->w);
    fprintf(cs->w->f,
            "{\"ph\":\"C\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"name\":\"allocated (device %d)\","
            "\"args\":{\"bytes\":%" PRIu64 "}}",
            cs->pid, us(cs->w, export_wall_ns(cs->log, time_ns)), dev, allocated);
    return 0;
}

static void write_log(struct writer *w, const struct tslog *log, int pid)
{
    struct stream_map *sm = calloc(1, sizeof *sm);
    if (!sm)
        return;
    write_process(w, log, pid);
    write_copies(w, log, pid, sm);
    write_gemms(w, log, pid, sm);
    write_collectives(w, log, pid, sm);
    for (int i = 0; i < sm->n; i++) {
        char tn[64];
        if (sm->ids[i] == 0)
            snprintf(tn, sizeof tn, "stream 0 (legacy default)");
        else
            snprintf(tn, sizeof tn, "stream 0x%" PRIx64, sm->ids[i]);
        meta(w, pid, i + 1, "thread_name", tn);
    }
    write_gpu(w, log, pid);
    /* allocated bytes per device, one counter sample per change */
    struct counter_state cs = { w, log, pid };
    export_allocated_walk(log, allocated_counter, &cs);
    free(sm);
}

int export_chrome(FILE *f, const struct export_input *in)
{
    struct writer w = { f, 1, UINT64_MAX };
    for (int i = 0; i < in->n; i++) {
        const struct tslog *log = &in->logs[i];
        uint64_t first = log->have_header ? log->start_realtime_ns : export_wall_ns(log, log->first_time_ns);
        if (first < w.t0)
            w.t0 = first;
    }
    if (w.t0 == UINT64_MAX)
        w.t0 = 0;
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"trainshim export\"},\"traceEvents\":[",
          f);
    for (int i = 0; i < in->n; i++)
        write_log(&w, &in->logs[i], i);
    fputs("\n]}\n", f);
    return 0;
}
