/* events.c: the records (shim/log/logfmt.h) -- the core's event API (core.h
 * ts_ev_*: one fixed-size record each, built in the calling thread's log
 * buffer with no lock, syscall or malloc), the API name table
 * (ts_register_apis) and the file's header record.  The log records raw
 * facts; the reader (tools/read/logread.c) derives peaks and totals.  Moving the
 * bytes to the file is shim/log/log.c's business. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/core.h"
#include "log/log.h"
#include "log/stacks.h"

static uint64_t clock_ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Once per process: not on any fast path, so it may allocate. */
struct ts_rec_header *ts_ev_make_header(void)
{
    enum { CMD_MAX = 64 << 10, CONF_MAX = 16 << 10 };
    char host[256] = "";
    if (gethostname(host, sizeof host) != 0)
        strcpy(host, "unknown");
    host[sizeof host - 1] = 0;
    char *cmd = malloc(CMD_MAX), *conf = malloc(CONF_MAX);
    struct ts_rec_header *h = NULL;
    if (!cmd || !conf)
        goto out;
    size_t cmdlen = 0, conflen, hostlen = strlen(host);
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t r;
        while (cmdlen < CMD_MAX && (r = read(fd, cmd + cmdlen, CMD_MAX - cmdlen)) > 0)
            cmdlen += (size_t)r;
        close(fd);
    }
    while (cmdlen && cmd[cmdlen - 1] == 0)
        cmdlen--;
    conflen = ts_config_format(conf, CONF_MAX);
    if (conflen >= CONF_MAX)
        conflen = strnlen(conf, CONF_MAX - 1);
    uint32_t len = ts_rec_align((uint32_t)(sizeof *h + hostlen + cmdlen + conflen));
    h = calloc(1, len);
    if (!h)
        goto out;
    h->h.len = len;
    h->h.type = TS_REC_HEADER;
    h->start_realtime_ns = clock_ns(CLOCK_REALTIME);
    h->start_mono_ns = clock_ns(CLOCK_MONOTONIC);
    h->h.time_ns = h->start_mono_ns;
    h->pid = (int32_t)getpid();
    h->rank = ts_log_env_rank();
    h->local_rank = ts_log_env_local_rank();
    h->world_size = ts_log_env_world_size();
    h->host_len = (uint32_t)hostlen;
    h->cmdline_len = (uint32_t)cmdlen;
    h->config_len = (uint32_t)conflen;
    char *s = (char *)(h + 1);
    memcpy(s, host, hostlen);
    memcpy(s + hostlen, cmd, cmdlen);
    memcpy(s + hostlen + cmdlen, conf, conflen);
out:
    free(cmd);
    free(conf);
    return h;
}

void ts_register_apis(const char *const *names, int count)
{
    if (count < 0 || (count && !names))
        return;
    size_t bytes = sizeof(struct ts_rec_api_names);
    for (int i = 0; i < count; i++)
        bytes += (names[i] ? strlen(names[i]) : 0) + 1;
    if (bytes > TS_REC_MAX_LEN)
        return;
    uint32_t len = ts_rec_align((uint32_t)bytes);
    struct ts_rec_api_names *r = calloc(1, len);
    if (!r)
        return;
    r->h.len = len;
    r->h.type = TS_REC_API_NAMES;
    r->first_id = 0;
    r->count = (uint32_t)count;
    char *s = (char *)(r + 1);
    for (int i = 0; i < count; i++) {
        size_t l = names[i] ? strlen(names[i]) : 0;
        memcpy(s, names[i] ? names[i] : "", l);
        s += l + 1;
    }
    ts_log_set_api_record(&r->h);
}

void ts_ev_alloc(int api, int device, uint64_t ptr, uint64_t size, uint64_t stream, int result)
{
    /* before the reserve: a new stack logs its own records first (shim/log/stacks.c) */
    uint32_t stack = result == 0 && ptr ? ts_stack_capture() : 0;
    struct ts_rec_alloc *r = (struct ts_rec_alloc *)ts_log_reserve_run(sizeof *r, TS_REC_ALLOC);
    if (!r)
        return;
    r->api = api;
    r->device = device;
    r->ptr = ptr;
    r->size = size;
    r->stream = stream;
    r->result = result;
    r->reserved = 0;
    uint64_t time_ns = r->h.time_ns;
    ts_log_commit(&r->h);
    if (stack)
        ts_ev_alloc_stack(stack, ptr, time_ns, device);
}

void ts_ev_free(int api, int device, uint64_t ptr, uint64_t stream, int result)
{
    struct ts_rec_free *r = (struct ts_rec_free *)ts_log_reserve_run(sizeof *r, TS_REC_FREE);
    if (!r)
        return;
    r->api = api;
    r->device = device;
    r->ptr = ptr;
    r->stream = stream;
    r->result = result;
    r->reserved = 0;
    ts_log_commit(&r->h);
}

void ts_ev_copy(int api, int dir, uint64_t bytes, int host_kind, uint64_t stream, bool async,
                uint64_t duration_ns, int result)
{
    struct ts_rec_copy *r = (struct ts_rec_copy *)ts_log_reserve(sizeof *r, TS_REC_COPY);
    if (!r)
        return;
    r->api = api;
    r->dir = (uint8_t)dir;
    r->host_kind = (uint8_t)host_kind;
    r->async = async ? 1 : 0;
    r->reserved0 = 0;
    r->bytes = bytes;
    r->stream = stream;
    r->duration_ns = duration_ns;
    r->result = result;
    r->reserved = 0;
    ts_log_commit(&r->h);
}

void ts_ev_error(int api, int result)
{
    struct ts_rec_error *r = (struct ts_rec_error *)ts_log_reserve(sizeof *r, TS_REC_ERROR);
    if (!r)
        return;
    r->api = api;
    r->result = result;
    ts_log_commit(&r->h);
}

/* Devices 0..63 are recorded once even if a hook reports one twice; the log
 * is per process, so a device record never needs repeating. */
static _Atomic uint64_t devices_logged;

static void copy_str(char *dst, size_t n, const char *src)
{
    size_t l = src ? strnlen(src, n - 1) : 0;
    if (l)
        memcpy(dst, src, l);
    memset(dst + l, 0, n - l);
}

void ts_ev_device(int device, const char *name, uint64_t total_mem, int cc_major, int cc_minor, int sm_count,
                  const char *pci_bus_id)
{
    if (device >= 0 && device < 64 && (atomic_fetch_or(&devices_logged, 1ull << device) & (1ull << device)))
        return;
    struct ts_rec_device *r = (struct ts_rec_device *)ts_log_reserve(sizeof *r, TS_REC_DEVICE);
    if (!r)
        return;
    r->ordinal = device;
    r->cc_major = cc_major;
    r->cc_minor = cc_minor;
    r->sm_count = sm_count;
    r->total_mem = total_mem;
    copy_str(r->name, sizeof r->name, name);
    copy_str(r->pci_bus_id, sizeof r->pci_bus_id, pci_bus_id);
    ts_log_commit(&r->h);
}

/* ---- compute and communication accounting ---------------------------------- */
/* The hooks build the whole body (shim/observe/compute.c, shim/observe/comm.c know the
 * shapes); the event only moves it into the thread's buffer. */
static void copy_body(struct ts_rec_hdr *dst, const struct ts_rec_hdr *src, size_t size)
{
    memcpy((char *)dst + sizeof *dst, (const char *)src + sizeof *src, size - sizeof *dst);
}

void ts_ev_gemm(const struct ts_rec_gemm *g)
{
    struct ts_rec_gemm *r = (struct ts_rec_gemm *)ts_log_reserve(sizeof *r, TS_REC_GEMM);
    if (!r)
        return;
    copy_body(&r->h, &g->h, sizeof *r);
    ts_log_commit(&r->h);
}

void ts_ev_nccl(const struct ts_rec_nccl *c)
{
    struct ts_rec_nccl *r = (struct ts_rec_nccl *)ts_log_reserve(sizeof *r, TS_REC_NCCL);
    if (!r)
        return;
    copy_body(&r->h, &c->h, sizeof *r);
    ts_log_commit(&r->h);
}

void ts_ev_comm(int api, int kind, uint64_t comm_id, uint64_t parent_id, int comm_size, int rank, int color,
                int result)
{
    struct ts_rec_comm *r = (struct ts_rec_comm *)ts_log_reserve(sizeof *r, TS_REC_COMM);
    if (!r)
        return;
    r->api = api;
    r->kind = kind;
    r->comm_id = comm_id;
    r->parent_id = parent_id;
    r->comm_size = comm_size;
    r->rank = rank;
    r->color = color;
    r->result = result;
    ts_log_commit(&r->h);
}

void ts_ev_gpu_time(uint64_t sample_id, uint64_t gpu_ns, int kind)
{
    struct ts_rec_gpu_time *r = (struct ts_rec_gpu_time *)ts_log_reserve(sizeof *r, TS_REC_GPU_TIME);
    if (!r)
        return;
    r->sample_id = sample_id;
    r->gpu_ns = gpu_ns;
    r->kind = kind;
    r->reserved = 0;
    ts_log_commit(&r->h);
}

/* ---- device memory pool ---------------------------------------------------- */
/* Rare (a reset, shutdown, an OOM): no fast path to keep. */
void ts_ev_pool_stats(const struct ts_rec_pool_stats *s)
{
    struct ts_rec_pool_stats *r = (struct ts_rec_pool_stats *)ts_log_reserve(sizeof *r, TS_REC_POOL_STATS);
    if (!r)
        return;
    copy_body(&r->h, &s->h, sizeof *r);
    ts_log_commit(&r->h);
}

/* Offload: rare (a pause, a resume, a failure, shutdown). */
void ts_ev_offload(const struct ts_rec_offload *o)
{
    struct ts_rec_offload *r = (struct ts_rec_offload *)ts_log_reserve(sizeof *r, TS_REC_OFFLOAD);
    if (!r)
        return;
    copy_body(&r->h, &o->h, sizeof *r);
    ts_log_commit(&r->h);
}

/* One step of offload's figures: one record per detected training step. */
void ts_ev_offload_step(const struct ts_rec_offload_step *o)
{
    struct ts_rec_offload_step *r =
        (struct ts_rec_offload_step *)ts_log_reserve(sizeof *r, TS_REC_OFFLOAD_STEP);
    if (!r)
        return;
    copy_body(&r->h, &o->h, sizeof *r);
    ts_log_commit(&r->h);
}

void ts_ev_pool_oom(int device, int mode, uint64_t requested, uint64_t reserved, uint64_t allocated,
                    uint64_t largest_free_block)
{
    struct ts_rec_pool_oom *r = (struct ts_rec_pool_oom *)ts_log_reserve(sizeof *r, TS_REC_POOL_OOM);
    if (!r)
        return;
    r->device = device;
    r->mode = mode;
    r->requested = requested;
    r->reserved_bytes = reserved;
    r->allocated_bytes = allocated;
    r->largest_free_block = largest_free_block;
    ts_log_commit(&r->h);
}

void ts_ev_torch_backend(uint32_t backend_case, const char *conf)
{
    uint32_t n = conf ? (uint32_t)strnlen(conf, 4096) : 0;
    uint32_t len = ts_rec_align((uint32_t)sizeof(struct ts_rec_torch_backend) + n);
    struct ts_rec_torch_backend *r = (struct ts_rec_torch_backend *)ts_log_reserve(len, TS_REC_TORCH_BACKEND);
    if (!r)
        return;
    r->backend_case = backend_case;
    r->conf_len = n;
    char *text = (char *)(r + 1);
    memcpy(text, conf ? conf : "", n);
    memset(text + n, 0, len - sizeof *r - n);
    ts_log_commit(&r->h);
}
