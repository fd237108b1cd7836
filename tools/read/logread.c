/* logread.c: the event log reader (see logread.h and docs/log-format.md). */
#include "read/logread.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* An API id beyond this is treated as corrupt (the hook table is far smaller). */
#define API_ID_MAX (1u << 20)

static void set_msg(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_msg(char *dst, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, n, fmt, ap);
    va_end(ap);
}

static char *dup_bytes(const void *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        if (n)
            memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

/* Copy a record into a zeroed struct of the size this reader knows: fields a
 * newer writer appended are ignored, fields an older writer lacked read 0. */
static void take(void *dst, size_t dst_size, const unsigned char *rec, uint32_t len)
{
    memset(dst, 0, dst_size);
    memcpy(dst, rec, len < dst_size ? len : dst_size);
}

static void read_torch_backend(struct tslog *log, const unsigned char *rec, uint32_t len)
{
    struct ts_rec_torch_backend t;
    take(&t, sizeof t, rec, len);
    log->torch_backend_case = t.backend_case;
    size_t avail = len > sizeof t ? len - sizeof t : 0;
    size_t n = t.conf_len < avail ? t.conf_len : avail;
    if (n >= sizeof log->torch_alloc_conf)
        n = sizeof log->torch_alloc_conf - 1;
    memcpy(log->torch_alloc_conf, rec + sizeof t, n);
    log->torch_alloc_conf[n] = 0;
}

void *tslog_push_item(void **arr, size_t *n, size_t *cap, size_t size)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        void *g = realloc(*arr, c * size);
        if (!g)
            return NULL;
        *arr = g;
        *cap = c;
    }
    return (char *)*arr + (*n)++ * size;
}
#define PUSH_ITEM(log, name)                                                                                 \
    tslog_push_item((void **)&(log)->name##s, &(log)->n_##name##s, &(log)->cap_##name##s,                    \
                    sizeof *(log)->name##s)

static int push_event(struct tslog *log, const struct tslog_event *e)
{
    struct tslog_event *slot = PUSH_ITEM(log, event);
    if (!slot)
        return -1;
    *slot = *e;
    slot->seq = log->n_events - 1;
    return 0;
}

/* Returns NULL when fine, else why the record is corrupt. */
static const char *read_header(struct tslog *log, const unsigned char *rec, uint32_t len)
{
    struct ts_rec_header h;
    if (len < sizeof h)
        return "header record too short";
    take(&h, sizeof h, rec, len);
    uint64_t strings = (uint64_t)h.host_len + h.cmdline_len + h.config_len;
    if (strings > len - sizeof h)
        return "header string lengths exceed the record";
    if (log->have_header)
        return "second header record";
    const char *s = (const char *)rec + sizeof h;
    log->host = dup_bytes(s, h.host_len);
    log->cmdline = dup_bytes(s + h.host_len, h.cmdline_len);
    log->command = dup_bytes(s + h.host_len, h.cmdline_len);
    log->config = dup_bytes(s + h.host_len + h.cmdline_len, h.config_len);
    if (!log->host || !log->cmdline || !log->command || !log->config)
        return "out of memory";
    log->cmdline_len = h.cmdline_len;
    for (size_t i = 0; i < h.cmdline_len; i++)
        if (!log->command[i])
            log->command[i] = ' ';
    /* strings are raw bytes: cut the C strings at an embedded NUL */
    log->host[strnlen(log->host, h.host_len)] = 0;
    log->have_header = true;
    log->pid = h.pid;
    log->rank = h.rank;
    log->local_rank = h.local_rank;
    log->world_size = h.world_size;
    log->start_realtime_ns = h.start_realtime_ns;
    log->start_mono_ns = h.start_mono_ns;
    return NULL;
}

static const char *read_api_names(struct tslog *log, const unsigned char *rec, uint32_t len)
{
    struct ts_rec_api_names a;
    if (len < sizeof a)
        return "API name record too short";
    take(&a, sizeof a, rec, len);
    if (a.first_id > API_ID_MAX || a.count > API_ID_MAX - a.first_id)
        return "API id out of range";
    /* every name takes at least one byte, so count is bounded by len */
    if (a.count > len - sizeof a)
        return "API name count exceeds the record";
    uint32_t end = a.first_id + a.count;
    if (end > log->n_api_names) {
        char **n = realloc(log->api_names, (size_t)end * sizeof *n);
        if (!n)
            return "out of memory";
        memset(n + log->n_api_names, 0, (size_t)(end - log->n_api_names) * sizeof *n);
        log->api_names = n;
        log->n_api_names = end;
    }
    const char *p = (const char *)rec + sizeof a, *lim = (const char *)rec + len;
    for (uint32_t i = 0; i < a.count; i++) {
        const char *z = memchr(p, 0, (size_t)(lim - p));
        if (!z)
            return "API name not terminated";
        free(log->api_names[a.first_id + i]);
        log->api_names[a.first_id + i] = dup_bytes(p, (size_t)(z - p));
        p = z + 1;
    }
    return NULL;
}

void tslog_pool_plan_add(struct tslog_pool_plan *t, const struct tslog_pool_plan *s)
{
    t->records += s->records;
    t->off += s->off;
    t->adopted += s->adopted;
    t->hits += s->hits;
    t->misses += s->misses;
    if (s->adopted)
        t->period = s->period;
    t->settled += s->settled;
    t->settling += s->settling;
    t->calls_since_settled += s->calls_since_settled;
}

static void read_pool_plan(struct tslog_pool_plan *pl, const struct ts_rec_pool_stats *p, uint32_t len)
{
    if (len < offsetof(struct ts_rec_pool_stats, reserved1))
        return; /* a record from before the plan's fields */
    bool settled = p->plan_state == TS_POOL_PLAN_SETTLED;
    struct tslog_pool_plan one = {
        .records = 1,
        .off = p->plan_state == TS_POOL_PLAN_OFF,
        .adopted = p->plan_adopted,
        .hits = p->plan_hits,
        .misses = p->plan_misses,
        .period = p->plan_period,
        .settled = settled,
        .settling = p->plan_state == TS_POOL_PLAN_SETTLING,
        .calls_since_settled = settled ? p->plan_calls_since_settled : 0,
    };
    tslog_pool_plan_add(pl, &one);
}

/* Keeps each device's record with the largest peak reserved and the sums
 * of those over devices. */
static void read_pool_stats(struct tslog *log, const unsigned char *rec, uint32_t len)
{
    struct ts_rec_pool_stats p;
    take(&p, sizeof p, rec, len);
    log->n_pool_stats++;
    log->pool_mode = p.mode;
    log->pool_driver_calls += p.driver_calls;
    log->pool_fence_calls += p.fence_calls;
    log->pool_cache_hits += p.cache_hits;
    log->pool_ooms += p.ooms;
    read_pool_plan(&log->pool_plan, &p, len);
    if (p.device < 0 || p.device >= TSLOG_POOL_DEVS)
        return;
    struct tslog_pool_dev *d = &log->pool_dev[p.device];
    if (d->seen && d->peak_reserved >= p.peak_reserved_bytes)
        return;
    log->pool_peak_reserved += p.peak_reserved_bytes - d->peak_reserved;
    log->pool_allocated_at_reserved_peak -= d->allocated_at_reserved_peak;
    log->pool_allocated_at_reserved_peak += p.allocated_at_reserved_peak;
    log->pool_peak_allocated -= d->peak_allocated;
    log->pool_peak_allocated += p.peak_allocated_bytes;
    d->seen = true;
    d->peak_reserved = p.peak_reserved_bytes;
    d->allocated_at_reserved_peak = p.allocated_at_reserved_peak;
    d->peak_allocated = p.peak_allocated_bytes;
}

static const char *read_device(struct tslog *log, const unsigned char *rec, uint32_t len)
{
    struct ts_rec_device d;
    take(&d, sizeof d, rec, len);
    if (log->n_devices == log->cap_devices) {
        size_t cap = log->cap_devices ? log->cap_devices * 2 : 8;
        struct tslog_device *n = realloc(log->devices, cap * sizeof *n);
        if (!n)
            return "out of memory";
        log->devices = n;
        log->cap_devices = cap;
    }
    struct tslog_device *v = &log->devices[log->n_devices++];
    v->ordinal = d.ordinal;
    v->cc_major = d.cc_major;
    v->cc_minor = d.cc_minor;
    v->sm_count = d.sm_count;
    v->total_mem = d.total_mem;
    v->time_ns = d.h.time_ns;
    memcpy(v->name, d.name, sizeof v->name);
    v->name[sizeof v->name - 1] = 0;
    memcpy(v->pci_bus_id, d.pci_bus_id, sizeof v->pci_bus_id);
    v->pci_bus_id[sizeof v->pci_bus_id - 1] = 0;
    return NULL;
}

static const char *read_event(struct tslog *log, uint16_t type, const unsigned char *rec, uint32_t len)
{
    struct tslog_event e;
    memset(&e, 0, sizeof e);
    e.type = type;
    switch (type) {
    case TS_REC_ALLOC: {
        struct ts_rec_alloc r;
        take(&r, sizeof r, rec, len);
        e.api = r.api, e.device = r.device, e.ptr = r.ptr, e.bytes = r.size;
        e.stream = r.stream, e.result = r.result;
        break;
    }
    case TS_REC_FREE: {
        struct ts_rec_free r;
        take(&r, sizeof r, rec, len);
        e.api = r.api, e.device = r.device, e.ptr = r.ptr, e.stream = r.stream, e.result = r.result;
        break;
    }
    case TS_REC_COPY: {
        struct ts_rec_copy r;
        take(&r, sizeof r, rec, len);
        e.api = r.api, e.dir = r.dir, e.host_kind = r.host_kind, e.async = r.async;
        e.bytes = r.bytes, e.stream = r.stream, e.duration_ns = r.duration_ns, e.result = r.result;
        e.device = -1;
        break;
    }
    case TS_REC_ERROR: {
        struct ts_rec_error r;
        take(&r, sizeof r, rec, len);
        e.api = r.api, e.result = r.result, e.device = -1;
        break;
    }
    }
    struct ts_rec_hdr h;
    memcpy(&h, rec, sizeof h);
    e.time_ns = h.time_ns;
    e.tid = h.tid;
    return push_event(log, &e) ? "out of memory" : NULL;
}

static const char *read_gemm(struct tslog *log, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct ts_rec_gemm r;
    take(&r, sizeof r, rec, h->len);
    struct tslog_gemm *g = PUSH_ITEM(log, gemm);
    if (!g)
        return "out of memory";
    *g = (struct tslog_gemm){ .time_ns = h->time_ns,
                              .flops = r.flops,
                              .stream = r.stream,
                              .sample_id = r.sample_id,
                              .m = r.m,
                              .n = r.n,
                              .k = r.k,
                              .batch = r.batch,
                              .api = r.api,
                              .device = r.device,
                              .data_type = r.data_type,
                              .out_type = r.out_type,
                              .compute_type = r.compute_type,
                              .result = r.result,
                              .tid = h->tid,
                              .transa = r.transa,
                              .transb = r.transb,
                              .is_complex = r.is_complex };
    return NULL;
}

static const char *read_nccl(struct tslog *log, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct ts_rec_nccl r;
    take(&r, sizeof r, rec, h->len);
    struct tslog_nccl *c = PUSH_ITEM(log, nccl);
    if (!c)
        return "out of memory";
    *c = (struct tslog_nccl){ .time_ns = h->time_ns,
                              .count = r.count,
                              .bytes = r.bytes,
                              .comm_id = r.comm_id,
                              .stream = r.stream,
                              .sample_id = r.sample_id,
                              .api = r.api,
                              .op = r.op,
                              .datatype = r.datatype,
                              .comm_size = r.comm_size,
                              .rank = r.rank,
                              .peer = r.peer,
                              .result = r.result,
                              .group_depth = r.group_depth,
                              .tid = h->tid };
    return NULL;
}

static const char *read_comm(struct tslog *log, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct ts_rec_comm r;
    take(&r, sizeof r, rec, h->len);
    struct tslog_comm *c = PUSH_ITEM(log, comm);
    if (!c)
        return "out of memory";
    *c = (struct tslog_comm){ .time_ns = h->time_ns,
                              .comm_id = r.comm_id,
                              .parent_id = r.parent_id,
                              .api = r.api,
                              .kind = r.kind,
                              .comm_size = r.comm_size,
                              .rank = r.rank,
                              .color = r.color,
                              .result = r.result };
    return NULL;
}

static const char *read_gpu_time(struct tslog *log, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct ts_rec_gpu_time r;
    take(&r, sizeof r, rec, h->len);
    struct tslog_gpu_time *t = PUSH_ITEM(log, gpu_time);
    if (!t)
        return "out of memory";
    *t = (struct tslog_gpu_time){ .sample_id = r.sample_id, .gpu_ns = r.gpu_ns, .kind = r.kind };
    return NULL;
}

static const char *read_host_sync(struct tslog *log, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct ts_rec_host_sync r;
    take(&r, sizeof r, rec, h->len);
    struct tslog_sync *v = PUSH_ITEM(log, sync);
    if (!v)
        return "out of memory";
    *v = (struct tslog_sync){ .time_ns = h->time_ns,
                              .handle = r.handle,
                              .blocked_ns = r.blocked_ns,
                              .api = r.api,
                              .result = r.result,
                              .tid = h->tid,
                              .stack_id = r.stack_id,
                              .kind = r.kind,
                              .pending = r.pending };
    return NULL;
}

static void read_copy_convert(struct tslog *log, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct ts_rec_copy_convert c;
    take(&c, sizeof c, rec, h->len);
    log->n_copy_converts++;
    log->copy_converted_bytes += c.bytes;
    log->copy_converted_chunks += c.chunks;
    log->copy_converted_blocked_ns += c.host_blocked_ns;
    log->copy_staging_wait_ns += c.staging_wait_ns;
}

static void read_pinned_alloc(struct tslog *log, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct ts_rec_pinned_alloc a;
    take(&a, sizeof a, rec, h->len);
    log->n_pinned_allocs++;
    log->n_pinned_cache_hits += a.cache_hit != 0;
}

static void read_end(struct tslog *log, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct ts_rec_end e;
    take(&e, sizeof e, rec, h->len);
    log->complete = true;
    log->end_time_ns = h->time_ns;
    log->end_records_written = e.records_written;
    log->end_records_dropped = e.records_dropped;
}

static int by_sample_id(const void *a, const void *b)
{
    const struct tslog_gpu_time *x = a, *y = b;
    return x->sample_id < y->sample_id ? -1 : x->sample_id > y->sample_id;
}

static uint64_t find_gpu_time(const struct tslog *log, uint64_t id, int kind)
{
    size_t lo = 0, hi = log->n_gpu_times;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (log->gpu_times[mid].sample_id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < log->n_gpu_times && log->gpu_times[lo].sample_id == id && log->gpu_times[lo].kind == kind
               ? log->gpu_times[lo].gpu_ns
               : 0;
}

/* Sampled times arrive after the call they time: joined once all is read. */
static void join_gpu_times(struct tslog *log)
{
    if (!log->n_gpu_times)
        return;
    qsort(log->gpu_times, log->n_gpu_times, sizeof *log->gpu_times, by_sample_id);
    for (size_t i = 0; i < log->n_gemms; i++)
        if (log->gemms[i].sample_id)
            log->gemms[i].gpu_ns = find_gpu_time(log, log->gemms[i].sample_id, TS_REC_GEMM);
    for (size_t i = 0; i < log->n_nccls; i++)
        if (log->nccls[i].sample_id)
            log->nccls[i].gpu_ns = find_gpu_time(log, log->nccls[i].sample_id, TS_REC_NCCL);
}

static void init_log(struct tslog *log, const char *name)
{
    memset(log, 0, sizeof *log);
    log->file = dup_bytes(name, strlen(name));
    log->pid = log->rank = log->local_rank = log->world_size = -1;
}

/* 0 when the size bytes at d start with a readable preamble; else the error is set. */
static int check_preamble(struct tslog *log, const unsigned char *d, size_t size, const char *name)
{
    struct ts_log_preamble pre;
    if (size < sizeof pre) {
        if (size == 0)
            set_msg(log->error, sizeof log->error, "%s: empty file (offset 0)", name);
        else if (memcmp(d, TS_LOG_MAGIC, size < 8 ? size : 8) != 0)
            set_msg(log->error, sizeof log->error, "%s: not a trainshim log (bad magic at offset 0)", name);
        else
            set_msg(log->error, sizeof log->error,
                    "%s: truncated at offset %zu: shorter than the %zu-byte preamble", name, size,
                    sizeof pre);
        return -1;
    }
    memcpy(&pre, d, sizeof pre);
    if (memcmp(pre.magic, TS_LOG_MAGIC, 8) != 0) {
        set_msg(log->error, sizeof log->error, "%s: not a trainshim log (bad magic at offset 0)", name);
        return -1;
    }
    if (pre.byte_order != TS_LOG_BYTE_ORDER) {
        set_msg(log->error, sizeof log->error,
                "%s: written with another byte order (offset 12: 0x%08x); not readable here", name,
                pre.byte_order);
        return -1;
    }
    if (pre.version_major != TS_LOG_VERSION_MAJOR) {
        set_msg(log->error, sizeof log->error,
                "%s: log format version %u.%u (offset 8) is not readable by this version (%d.x)", name,
                pre.version_major, pre.version_minor, TS_LOG_VERSION_MAJOR);
        return -1;
    }
    log->version_major = pre.version_major;
    log->version_minor = pre.version_minor;
    return 0;
}

/* Whether the avail bytes at off start with a whole record header of a valid
 * length (into *h); else the note says why reading stops there. */
static bool header_ok(struct tslog *log, const unsigned char *p, size_t avail, size_t off,
                      struct ts_rec_hdr *h)
{
    if (avail < sizeof *h) {
        set_msg(log->note, sizeof log->note,
                "truncated at offset %zu: incomplete record header (%zu of %zu bytes)", off, avail,
                sizeof *h);
        return false;
    }
    memcpy(h, p, sizeof *h);
    if (h->len < sizeof *h || h->len % TS_REC_ALIGN || h->len > TS_REC_MAX_LEN) {
        set_msg(log->note, sizeof log->note, "corrupt record at offset %zu: invalid length %u", off, h->len);
        return false;
    }
    return true;
}

/* Whether all of the record at off is among the avail bytes present there. */
static bool body_present(struct tslog *log, const struct ts_rec_hdr *h, size_t off, size_t avail)
{
    if (h->len <= avail)
        return true;
    set_msg(log->note, sizeof log->note, "truncated at offset %zu: record of %u bytes, %zu present", off,
            h->len, avail);
    return false;
}

/* Whether a whole record may be read here: its check matches and it stands
 * where the format allows it. */
static bool record_allowed(struct tslog *log, const unsigned char *rec, const struct ts_rec_hdr *h,
                           size_t off)
{
    if (ts_rec_check(rec, h->len) != h->check)
        set_msg(log->note, sizeof log->note, "corrupt record at offset %zu: check mismatch", off);
    else if (log->complete)
        set_msg(log->note, sizeof log->note, "data after the end record at offset %zu", off);
    else if (!log->have_header && h->type != TS_REC_HEADER)
        set_msg(log->note, sizeof log->note,
                "corrupt log at offset %zu: first record is type %u, not the header", off, h->type);
    else
        return true;
    return false;
}

/* Reads one record by its type; NULL when fine, else why it is corrupt. */
static const char *dispatch_record(struct tslog *log, const unsigned char *rec, const struct ts_rec_hdr *h)
{
    switch (h->type) {
    case TS_REC_HEADER: return read_header(log, rec, h->len);
    case TS_REC_API_NAMES: return read_api_names(log, rec, h->len);
    case TS_REC_DEVICE: return read_device(log, rec, h->len);
    case TS_REC_ALLOC:
    case TS_REC_FREE:
    case TS_REC_COPY:
    case TS_REC_ERROR: return read_event(log, h->type, rec, h->len);
    case TS_REC_GEMM: return read_gemm(log, h, rec);
    case TS_REC_NCCL: return read_nccl(log, h, rec);
    case TS_REC_COMM: return read_comm(log, h, rec);
    case TS_REC_GPU_TIME: return read_gpu_time(log, h, rec);
    case TS_REC_HOST_SYNC: return read_host_sync(log, h, rec);
    case TS_REC_COPY_CONVERT: read_copy_convert(log, h, rec); break;
    case TS_REC_PINNED_ALLOC: read_pinned_alloc(log, h, rec); break;
    case TS_REC_POOL_STATS: read_pool_stats(log, rec, h->len); break;
    case TS_REC_POOL_OOM: log->n_pool_oom_records++; break;
    /* CUPTI activity: read by tools/report/report_gpu.c from the log's bytes */
    case TS_REC_GPU_KERNEL:
    case TS_REC_GPU_MEMCPY:
    case TS_REC_GPU_NAME:
    case TS_REC_GPU_CLOCK:
    case TS_REC_GPU_STATUS: break;
    case TS_REC_NUMA: break; /* read by tools/report/report_numa.c */
    case TS_REC_TORCH_BACKEND: read_torch_backend(log, rec, h->len); break;
    case TS_REC_OFFLOAD:
    case TS_REC_OFFLOAD_STEP: break; /* read by tools/report/report_offload.c */
    case TS_REC_END: read_end(log, h, rec); break;
    default: log->n_unknown++; break;
    }
    return NULL;
}

/* Reads the whole record at off; false when reading stops there (note set). */
static bool read_record(struct tslog *log, const unsigned char *rec, const struct ts_rec_hdr *h, size_t off)
{
    if (!record_allowed(log, rec, h, off))
        return false;
    const char *bad = dispatch_record(log, rec, h);
    if (bad) {
        set_msg(log->note, sizeof log->note, "corrupt record at offset %zu: %s", off, bad);
        return false;
    }
    if (h->type < TS_REC_TYPE_COUNT_V1)
        log->n_by_type[h->type]++;
    if (!log->n_records || h->time_ns < log->first_time_ns)
        log->first_time_ns = h->time_ns;
    if (h->time_ns > log->last_time_ns)
        log->last_time_ns = h->time_ns;
    log->n_records++;
    return true;
}

/* After the last record read (reading stopped at off; more: bytes remained). */
static void finish_log(struct tslog *log, size_t off, bool more)
{
    join_gpu_times(log);
    log->stop_offset = off;
    log->truncated = more;
    if (!log->truncated && !log->complete)
        set_msg(log->note, sizeof log->note,
                "incomplete: no end record (log ends at offset %zu; the process did not exit cleanly)", off);
    if (log->complete && !log->truncated && log->end_records_written != log->n_records - 1)
        set_msg(log->note, sizeof log->note,
                "inconsistent: the end record counts %llu records, %llu were read",
                (unsigned long long)log->end_records_written, (unsigned long long)(log->n_records - 1));
}

int tslog_parse(const void *data, size_t size, const char *name, struct tslog *log)
{
    const unsigned char *d = data;
    init_log(log, name);
    log->file_size = size;
    if (check_preamble(log, d, size, name))
        return -1;
    size_t off = sizeof(struct ts_log_preamble);
    while (off < size) {
        struct ts_rec_hdr h;
        if (!header_ok(log, d + off, size - off, off, &h) || !body_present(log, &h, off, size - off)
            || !read_record(log, d + off, &h, off))
            break;
        off += h.len;
    }
    finish_log(log, off, off < size);
    log->raw = (unsigned char *)dup_bytes(d, off);
    log->raw_size = log->raw ? off : 0;
    return 0;
}

/* Reads up to want bytes (fewer only at the end of the input); -1 on an error. */
static ssize_t read_full(int fd, void *p, size_t want)
{
    size_t n = 0;
    while (n < want) {
        ssize_t r = read(fd, (char *)p + n, want - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        n += (size_t)r;
    }
    return (ssize_t)n;
}

/* The valid bytes read so far, and room for the record being read. */
struct stream_buf {
    unsigned char *p;
    size_t n, cap;
};

static unsigned char *room_for(struct stream_buf *b, size_t more)
{
    if (b->cap - b->n < more) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap - b->n < more)
            cap *= 2;
        unsigned char *g = realloc(b->p, cap);
        if (!g)
            return NULL;
        b->p = g;
        b->cap = cap;
    }
    return b->p + b->n;
}

/* Reads records from fd one at a time, keeping only the valid ones, until the
 * end of the input or the first record that cannot be read (*more: bytes
 * remained there).  -1 on a read error (errno), -2 out of memory. */
static int stream_records(int fd, struct tslog *log, struct stream_buf *b, bool *more)
{
    for (;;) {
        struct ts_rec_hdr h;
        unsigned char *rec = room_for(b, sizeof h);
        if (!rec)
            return -2;
        ssize_t got = read_full(fd, rec, sizeof h);
        if (got <= 0) {
            *more = false;
            return (int)got;
        }
        *more = true;
        if (!header_ok(log, rec, (size_t)got, b->n, &h))
            return 0;
        if (!(rec = room_for(b, h.len)))
            return -2;
        ssize_t body = read_full(fd, rec + sizeof h, h.len - sizeof h);
        if (body < 0)
            return -1;
        if (!body_present(log, &h, b->n, sizeof h + (size_t)body) || !read_record(log, rec, &h, b->n))
            return 0;
        b->n += h.len;
    }
}

/* Bytes not read from a regular file past the stopping point count in the file size. */
static uint64_t input_size(int fd, uint64_t read_up_to)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > read_up_to)
        return (uint64_t)st.st_size;
    return read_up_to;
}

int tslog_read_file(const char *path, struct tslog *log)
{
    int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
    init_log(log, path);
    if (fd < 0) {
        set_msg(log->error, sizeof log->error, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stream_buf b = { 0 };
    bool more = false;
    ssize_t got = room_for(&b, sizeof(struct ts_log_preamble))
                      ? read_full(fd, b.p, sizeof(struct ts_log_preamble))
                      : -2;
    int rc = got < 0 ? (int)got : check_preamble(log, b.p, (size_t)got, path) ? 1 : 0;
    if (rc == 0) {
        b.n = (size_t)got;
        rc = stream_records(fd, log, &b, &more);
    }
    const char *why = rc == -2 ? "out of memory" : rc == -1 ? strerror(errno) : NULL;
    log->file_size = input_size(fd, b.n);
    if (fd)
        close(fd);
    if (rc) {
        free(b.p);
        if (why) {
            tslog_free(log);
            set_msg(log->error, sizeof log->error, "%s: cannot read: %s", path, why);
        }
        return -1;
    }
    finish_log(log, b.n, more);
    log->raw = b.p;
    log->raw_size = b.n;
    return 0;
}

bool tslog_config_value(const struct tslog *log, const char *name, char *buf, size_t n)
{
    size_t l = strlen(name);
    for (const char *p = log->config; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > l && !strncmp(p, name, l) && p[l] == '=') {
            size_t v = len - l - 1 < n - 1 ? len - l - 1 : n - 1;
            memcpy(buf, p + l + 1, v);
            buf[v] = 0;
            return true;
        }
        p = nl ? nl + 1 : p + len;
    }
    return false;
}

void tslog_free(struct tslog *log)
{
    free(log->file);
    free(log->host);
    free(log->cmdline);
    free(log->command);
    free(log->config);
    for (uint32_t i = 0; i < log->n_api_names; i++)
        free(log->api_names[i]);
    free(log->api_names);
    free(log->devices);
    free(log->events);
    free(log->gemms);
    free(log->nccls);
    free(log->comms);
    free(log->gpu_times);
    free(log->syncs);
    free(log->raw);
    memset(log, 0, sizeof *log);
}

const char *tslog_api_name(const struct tslog *log, int api, char *buf, size_t n)
{
    if (api >= 0 && (uint32_t)api < log->n_api_names && log->api_names[api] && log->api_names[api][0])
        return log->api_names[api];
    snprintf(buf, n, "api#%d", api);
    return buf;
}

int tslog_walk_records(const unsigned char *p, size_t size,
                       int (*fn)(void *arg, const struct ts_rec_hdr *h, const unsigned char *rec), void *arg)
{
    struct ts_log_preamble pre;
    if (size < sizeof pre)
        return -1;
    memcpy(&pre, p, sizeof pre);
    if (memcmp(pre.magic, TS_LOG_MAGIC, 8) || pre.version_major != TS_LOG_VERSION_MAJOR)
        return -1;
    for (size_t off = sizeof pre; off + sizeof(struct ts_rec_hdr) <= size;) {
        struct ts_rec_hdr h;
        memcpy(&h, p + off, sizeof h);
        if (h.len < sizeof h || h.len % TS_REC_ALIGN || h.len > TS_REC_MAX_LEN || h.len > size - off
            || ts_rec_check(p + off, h.len) != h.check)
            break;
        int rc = fn(arg, &h, p + off);
        if (rc)
            return rc;
        off += h.len;
    }
    return 0;
}

const char *tslog_human_bytes(uint64_t b, char *buf, size_t n)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, n, "%llu B", (unsigned long long)b);
    else
        snprintf(buf, n, "%.2f %s", v, unit[u]);
    return buf;
}
