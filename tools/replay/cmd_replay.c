/* trainshim replay: replays a PyTorch memory snapshot against trainshim's
 * allocator, tensor by tensor (what a framework without a cache of its own
 * asks of cudaMalloc) or segment by segment (what PyTorch's caching allocator
 * asks of cudaMalloc), and prints the reserved/allocated peaks beside what
 * PyTorch's own allocator reserved on the recorded run.
 *
 * The pickle is converted by scripts/snapshot_events.py (found beside the
 * binary: <bindir>/../scripts/, or TRAINSHIM_SNAPSHOT_SCRIPT).  The pages come
 * from the CUDA driver's VMM API (libcuda.so.1 through cuGetProcAddress: the
 * emulator under LD_LIBRARY_PATH=build/emu) or, with --provider fake or when
 * no usable driver answers, from the in-process fake provider. */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "alloc/alloc.h"
#include "devmem/cuda_provider.h"
#include "core/config.h"
#include "cmd/cmds.h"
#include "replay/replay_offload.h"
#include "replay/sim_provider.h"

typedef struct {
    char op;
    uint64_t addr, size;
} rp_event;

typedef struct {
    const char *file, *level, *mode, *provider;
    int device, json, offload;
    uint64_t capacity, limit, device_memory;
    uint32_t slack; /* expandable growth budget (ts_pool_config.grow_slack_pct) */
} rp_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: trainshim replay FILE [--level tensor|segment] [--device N] [--capacity BYTES]\n"
               "                        [--mode expandable|caching|off] [--limit BYTES]\n"
               "                        [--provider auto|cuda|fake] [--json] [--slack PCT|none|plan]\n"
               "                        [--device-memory BYTES [--offload]]\n");
}

static int find_script(char *out, size_t n)
{
    const char *env = getenv("TRAINSHIM_SNAPSHOT_SCRIPT");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return access(out, R_OK);
    }
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
        return -1;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    snprintf(out, n, "%s/../scripts/snapshot_events.py", exe);
    return access(out, R_OK);
}

/* Runs the converter and reads its whole output. */
static int load_events(const rp_opts *o, rp_event **evs, size_t *nev, size_t *ninit, uint64_t *rec_reserved,
                       uint64_t *rec_allocated)
{
    char script[PATH_MAX + 64];
    if (find_script(script, sizeof script)) {
        fprintf(stderr,
                "trainshim: error: cannot find snapshot_events.py (looked at %s; set "
                "TRAINSHIM_SNAPSHOT_SCRIPT)\n",
                script);
        return -1;
    }
    int fd[2];
    if (pipe(fd))
        return -1;
    char dev[16];
    snprintf(dev, sizeof dev, "%d", o->device);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execlp("python3", "python3", script, o->file, "--level", o->level, "--device", dev, (char *)NULL);
        fprintf(stderr, "trainshim: error: cannot run python3: %s\n", strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    FILE *in = fdopen(fd[0], "r");
    char line[256];
    size_t cap = 0, n = 0, nevents = 0, initial = 0;
    rp_event *v = NULL;
    int ok = 0, ended = 0;
    while (fgets(line, sizeof line, in)) {
        rp_event e = { 0, 0, 0 };
        if (line[0] == 'R') {
            if (sscanf(line, "R %" SCNu64 " %" SCNu64 " %zu %zu", rec_reserved, rec_allocated, &nevents,
                       &initial)
                == 4)
                ok = 1;
            continue;
        }
        if (line[0] == 'E') {
            ended = 1;
            break;
        }
        e.op = line[0];
        if ((e.op == 'I' || e.op == 'A') && sscanf(line + 1, "%" SCNu64 " %" SCNu64, &e.addr, &e.size) != 2)
            continue;
        if (e.op == 'F' && sscanf(line + 1, "%" SCNu64, &e.addr) != 1)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            rp_event *nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                free(v);
                fclose(in);
                return -1;
            }
            v = nv;
        }
        v[n++] = e;
    }
    while (fgets(line, sizeof line, in))
        ;
    fclose(in);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!ok || !ended || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "trainshim: error: could not convert %s (snapshot_events.py failed)\n", o->file);
        free(v);
        return -1;
    }
    *evs = v;
    *nev = n;
    *ninit = initial;
    return 0;
}

/* ---- trace address -> replayed pointer ---------------------------------- */
typedef struct {
    uint64_t *k, *v;
    size_t cap;
} addr_map;

static uint64_t *am_slot(addr_map *m, uint64_t key)
{
    size_t i = (size_t)((key >> 9) * 0x9e3779b97f4a7c15ull) & (m->cap - 1);
    while (m->k[i] && m->k[i] != key)
        i = (i + 1) & (m->cap - 1);
    return &m->k[i];
}

static void am_put(addr_map *m, uint64_t key, uint64_t val)
{
    uint64_t *s = am_slot(m, key);
    *s = key;
    m->v[s - m->k] = val;
}

static int am_take(addr_map *m, uint64_t key, uint64_t *val)
{
    uint64_t *s = am_slot(m, key);
    if (!*s)
        return 0;
    *val = m->v[s - m->k];
    /* backward-shift delete */
    size_t hole = (size_t)(s - m->k), mask = m->cap - 1;
    for (size_t j = (hole + 1) & mask; m->k[j]; j = (j + 1) & mask) {
        size_t home = (size_t)((m->k[j] >> 9) * 0x9e3779b97f4a7c15ull) & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->k[hole] = m->k[j];
            m->v[hole] = m->v[j];
            hole = j;
        }
    }
    m->k[hole] = 0;
    return 1;
}

/* ---- the CUDA driver provider through cuGetProcAddress ------------------ */
typedef struct {
    void *lib;
    ts_cuda_provider *prov;
    CUcontext ctx;
    CUdevice dev;
    CUresult (*release_ctx)(CUdevice);
} rp_cuda;

static int open_cuda(rp_cuda *c, int device, uint64_t *total)
{
    memset(c, 0, sizeof *c);
    c->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->lib)
        return -1;
    CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
        (CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))dlsym(
            c->lib, "cuGetProcAddress_v2");
    if (!gpa)
        return -1;
#define GET(var, name)                                                                                       \
    do {                                                                                                     \
        void *p_ = NULL;                                                                                     \
        CUdriverProcAddressQueryResult q_;                                                                   \
        if (gpa(name, &p_, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q_) == CUDA_SUCCESS)                  \
            memcpy(&(var), &p_, sizeof p_);                                                                  \
    } while (0)
    CUresult (*init)(unsigned) = NULL;
    CUresult (*devget)(CUdevice *, int) = NULL;
    CUresult (*retain)(CUcontext *, CUdevice) = NULL;
    CUresult (*setcur)(CUcontext) = NULL;
    CUresult (*totalmem)(size_t *, CUdevice) = NULL;
    GET(init, "cuInit");
    GET(devget, "cuDeviceGet");
    GET(retain, "cuDevicePrimaryCtxRetain");
    GET(setcur, "cuCtxSetCurrent");
    GET(totalmem, "cuDeviceTotalMem");
    GET(c->release_ctx, "cuDevicePrimaryCtxRelease");
    if (!init || !devget || !retain || !setcur || init(0) || devget(&c->dev, device)
        || retain(&c->ctx, c->dev) || setcur(c->ctx))
        return -1;
    size_t t = 0;
    if (totalmem && totalmem(&t, c->dev) == CUDA_SUCCESS)
        *total = t;
    ts_cuda_fns f;
    memset(&f, 0, sizeof f);
    GET(f.cuMemAddressReserve, "cuMemAddressReserve");
    GET(f.cuMemAddressFree, "cuMemAddressFree");
    GET(f.cuMemCreate, "cuMemCreate");
    GET(f.cuMemRelease, "cuMemRelease");
    GET(f.cuMemMap, "cuMemMap");
    GET(f.cuMemUnmap, "cuMemUnmap");
    GET(f.cuMemSetAccess, "cuMemSetAccess");
    GET(f.cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity");
    GET(f.cuMemAlloc, "cuMemAlloc");
    GET(f.cuMemFree, "cuMemFree");
    GET(f.cuEventCreate, "cuEventCreate");
    GET(f.cuEventRecord, "cuEventRecord");
    GET(f.cuEventQuery, "cuEventQuery");
    GET(f.cuEventSynchronize, "cuEventSynchronize");
    GET(f.cuEventDestroy, "cuEventDestroy");
#undef GET
    c->prov = ts_cuda_provider_create(&f, device);
    if (!c->prov)
        return -1;
    /* probe the VMM API: the granularity must answer */
    uint64_t g = 0;
    const ts_page_provider *t2 = ts_cuda_provider_table(c->prov);
    if (t2->granularity(t2->ctx, &g) || !g)
        return -1;
    return 0;
}

static void close_cuda(rp_cuda *c)
{
    ts_cuda_provider_destroy(c->prov);
    if (c->release_ctx && c->ctx)
        c->release_ctx(c->dev);
    /* the library stays loaded: the driver may still run threads */
}

static int mode_of(const char *s)
{
    return !strcmp(s, "expandable") ? TS_ALLOC_EXPANDABLE
           : !strcmp(s, "caching")  ? TS_ALLOC_CACHING
           : !strcmp(s, "off")      ? TS_ALLOC_OFF
                                    : -1;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A size option: the units of the TRAINSHIM_* size options (ts_parse_size). */
static int size_arg(const char *name, const char *v, uint64_t *out)
{
    const char *err = ts_parse_size(v, out);
    if (err)
        fprintf(stderr, "trainshim: error: bad %s '%s': %s\n", name, v, err);
    return err ? -1 : 0;
}

/* 0: options parsed; else the exit status (help printed: 0 is returned as -1). */
static int parse_args(int argc, char **argv, rp_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--level") && v) {
            o->level = v, i++;
        } else if (!strcmp(a, "--mode") && v) {
            o->mode = v, i++;
        } else if (!strcmp(a, "--provider") && v) {
            o->provider = v, i++;
        } else if (!strcmp(a, "--device") && v) {
            o->device = atoi(v), i++;
        } else if (!strcmp(a, "--capacity") && v) {
            if (size_arg("--capacity", v, &o->capacity))
                return 2;
            i++;
        } else if (!strcmp(a, "--slack") && v) {
            /* expandable growth budget: PCT over the allocated peak, then
             * idle pages move; 0 (default) moves whenever one is safe: a
             * trace is one step, with no steady state to keep pages for;
             * none: unbounded; plan: the shim's default, the step plan with
             * growth bounded until it settles */
            char *end = NULL;
            unsigned long pct = !strcmp(v, "none")   ? TS_GROW_UNBOUNDED
                                : !strcmp(v, "plan") ? TS_GROW_STEP_PLAN
                                                     : strtoul(v, &end, 10);
            if (end && (*end || end == v || pct >= TS_GROW_STEP_PLAN)) {
                fprintf(stderr, "trainshim: error: bad --slack '%s': a percentage, none or plan\n", v);
                return 2;
            }
            o->slack = (uint32_t)pct;
            i++;
        } else if (!strcmp(a, "--offload")) {
            o->offload = 1;
        } else if (!strcmp(a, "--device-memory") && v) {
            if (size_arg("--device-memory", v, &o->device_memory))
                return 2;
            if (!o->device_memory) {
                fprintf(stderr, "trainshim: error: bad --device-memory '%s': must be above 0\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--limit") && v) {
            if (size_arg("--limit", v, &o->limit))
                return 2;
            i++;
        } else if (a[0] != '-' && !o->file) {
            o->file = a;
        } else {
            fprintf(stderr, "trainshim: error: replay: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!o->file || mode_of(o->mode) < 0 || (strcmp(o->level, "tensor") && strcmp(o->level, "segment"))
        || (strcmp(o->provider, "auto") && strcmp(o->provider, "cuda") && strcmp(o->provider, "fake"))) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* The pages: the CUDA driver's unless --provider fake or none answers. */
typedef struct {
    rp_cuda cu;
    ts_fake_provider *fake;
    const ts_page_provider *table;
    const char *name;
    uint64_t capacity;
    uint64_t device_memory; /* --device-memory: the table is wrapped by dm */
    rp_offload dm;
} rp_provider;

static int open_provider(const rp_opts *o, rp_provider *p)
{
    p->fake = NULL;
    p->table = NULL;
    p->device_memory = 0;
    p->name = "fake";
    p->capacity = o->capacity;
    if (strcmp(o->provider, "fake")) {
        uint64_t total = 0;
        if (open_cuda(&p->cu, o->device, &total) == 0) {
            p->table = ts_cuda_provider_table(p->cu.prov);
            p->name = "cuda";
            if (!p->capacity)
                p->capacity = total;
        } else if (!strcmp(o->provider, "cuda")) {
            fprintf(stderr, "trainshim: error: no usable CUDA driver VMM API (libcuda.so.1)\n");
            return -1;
        } else {
            close_cuda(&p->cu);
            if (!o->json)
                fprintf(stderr, "trainshim: no usable CUDA driver VMM API; replaying on the fake provider\n");
        }
    }
    if (!p->capacity)
        p->capacity = 80ull << 30;
    if (!p->table) {
        p->fake = ts_fake_create(p->capacity, 2ull << 20);
        /* fences that finish only when waited for: the slowest device */
        if (getenv("TRAINSHIM_REPLAY_SLOW_FENCES"))
            ts_fake_set_manual_fences(p->fake, 1);
        p->table = ts_fake_provider_table(p->fake);
    }
    /* --device-memory: the device's pages, and with --offload the host's beyond them */
    if (o->device_memory) {
        p->table = rp_offload_wrap(&p->dm, p->table, o->device_memory, o->offload);
        p->device_memory = o->device_memory;
    }
    return 0;
}

static void close_provider(rp_provider *p)
{
    if (p->device_memory)
        rp_offload_free(&p->dm);
    if (p->fake)
        ts_fake_destroy(p->fake);
    else
        close_cuda(&p->cu);
}

/* What the replay counted beside the pool's own statistics. */
typedef struct {
    uint64_t ooms, first_oom, unknown_frees, ops;
    double secs;
} rp_result;

static int replay_alloc(ts_pool *pool, addr_map *am, const rp_event *e, size_t i, rp_result *r)
{
    uint64_t old, ptr = 0;
    if (am_take(am, e->addr, &old)) { /* inconsistent trace: drop the older */
        ts_pool_free(pool, old, 0, 0);
        r->ops++;
    }
    int rc = ts_pool_alloc(pool, e->size, 0, 0, &ptr);
    r->ops++;
    if (rc == TS_ALLOC_OOM) {
        if (!r->ooms++)
            r->first_oom = i;
        return 0;
    }
    if (rc) {
        fprintf(stderr, "trainshim: error: allocation failed with status %d at event %zu\n", rc, i);
        return -1;
    }
    am_put(am, e->addr, ptr);
    return 0;
}

static void replay_free(ts_pool *pool, addr_map *am, const rp_event *e, rp_result *r)
{
    uint64_t ptr;
    if (!am_take(am, e->addr, &ptr)) {
        r->unknown_frees++;
        return;
    }
    ts_pool_free(pool, ptr, 0, 0);
    r->ops++;
}

/* Plays the events on the pool; -1 when an allocation failed other than by OOM. */
static int replay_events(ts_pool *pool, const rp_event *ev, size_t nev, rp_result *r)
{
    addr_map am = { 0 };
    am.cap = 1;
    while (am.cap < nev * 2 + 64)
        am.cap <<= 1;
    am.k = calloc(am.cap, sizeof *am.k);
    am.v = calloc(am.cap, sizeof *am.v);
    int fail = 0;
    double t0 = now_s();
    for (size_t i = 0; i < nev && am.k && am.v && !fail; i++) {
        if (ev[i].op == 'I' || ev[i].op == 'A')
            fail = replay_alloc(pool, &am, &ev[i], i, r);
        else if (ev[i].op == 'F')
            replay_free(pool, &am, &ev[i], r);
    }
    r->secs = now_s() - t0;
    free(am.k);
    free(am.v);
    return fail;
}

/* What the summary prints: the run, the pool's figures and the recorded ones. */
typedef struct {
    const rp_opts *o;
    const rp_provider *prov;
    size_t nev, ninit;
    uint64_t rec_res, rec_alloc;
    const rp_result *r;
    ts_alloc_stats s;
    ts_oom_report oom;
    double ratio, rec_ratio, ns_op;
} rp_summary;

static void print_json(const rp_summary *m)
{
    const ts_alloc_stats *s = &m->s;
    const rp_result *r = m->r;
    printf("{\"file\": ");
    json_str(m->o->file);
    printf(", \"level\": \"%s\", \"mode\": \"%s\", \"provider\": \"%s\", "
           "\"capacity_bytes\": %" PRIu64
           ", \"events\": %zu, \"initial_blocks\": %zu, \"operations\": %" PRIu64 ", "
           "\"peak_reserved_bytes\": %" PRIu64 ", \"peak_allocated_bytes\": %" PRIu64 ", "
           "\"ratio\": %.6f, \"fragmentation\": %.6f, \"ooms\": %" PRIu64 ", \"first_oom_event\": %" PRId64
           ", "
           "\"driver_calls\": %" PRIu64 ", \"page_moves\": %" PRIu64 ", \"cache_hits\": %" PRIu64 ", "
           "\"ns_per_op\": %.1f, \"unknown_frees\": %" PRIu64 ", "
           "\"recorded_peak_reserved_bytes\": %" PRIu64 ", \"recorded_peak_allocated_bytes\": %" PRIu64 ", "
           "\"recorded_ratio\": %.6f",
           m->o->level, m->o->mode, m->prov->name, m->prov->capacity, m->nev, m->ninit, r->ops,
           s->peak_reserved_bytes, s->peak_allocated_bytes, m->ratio, s->fragmentation, r->ooms,
           r->ooms ? (int64_t)r->first_oom : (int64_t)-1, s->driver_calls, s->page_moves, s->cache_hits,
           m->ns_op, r->unknown_frees, m->rec_res, m->rec_alloc, m->rec_ratio);
    if (m->prov->device_memory)
        printf(", \"device_memory_bytes\": %" PRIu64 ", \"offload\": %s, \"peak_host_bytes\": %" PRIu64
               ", \"host_pages\": %" PRIu64,
               m->prov->device_memory, m->o->offload ? "true" : "false", m->prov->dm.peak_host_bytes,
               m->prov->dm.host_pages);
    printf("}\n");
}

static void print_text(const rp_summary *m)
{
    const double G = 1073741824.0;
    const ts_alloc_stats *s = &m->s;
    const rp_result *r = m->r;
    printf("replay %s (%s level, %zu events, %zu live at start) mode %s, provider %s, capacity %.2f GiB\n",
           m->o->file, m->o->level, m->nev, m->ninit, m->o->mode, m->prov->name, m->prov->capacity / G);
    printf("  trainshim: peak reserved %.2f GiB, peak allocated %.2f GiB, reserved/allocated %.4f, "
           "fragmentation %.4f\n",
           s->peak_reserved_bytes / G, s->peak_allocated_bytes / G, m->ratio, s->fragmentation);
    printf("  PyTorch (recorded): peak reserved %.2f GiB, peak allocated %.2f GiB, reserved/allocated "
           "%.4f\n",
           m->rec_res / G, m->rec_alloc / G, m->rec_ratio);
    printf("  OOMs %" PRIu64, r->ooms);
    if (r->ooms)
        printf(" (first at event %" PRIu64 ": %.2f GiB requested, %.2f GiB reserved, %.2f GiB allocated)",
               r->first_oom, m->oom.requested / G, m->oom.reserved / G, m->oom.allocated / G);
    printf(", driver calls %" PRIu64 " (page moves %" PRIu64 "), cache hits %" PRIu64 " of %" PRIu64
           " allocations, %.0f ns per operation\n",
           s->driver_calls, s->page_moves, s->cache_hits, s->allocs, m->ns_op);
    if (m->prov->device_memory)
        printf("  device memory %.2f GiB%s: peak %.2f GiB would have lived on the host (%" PRIu64
               " pages backed by it)\n",
               m->prov->device_memory / G, m->o->offload ? ", offload on" : "",
               m->prov->dm.peak_host_bytes / G, m->prov->dm.host_pages);
    if (r->unknown_frees)
        printf("  %" PRIu64 " frees skipped: their address was never allocated (or its allocation failed)\n",
               r->unknown_frees);
}

static void summarize(rp_summary *m, ts_pool *pool)
{
    ts_pool_stats(pool, &m->s);
    ts_pool_last_oom(pool, &m->oom);
    m->ratio =
        m->s.peak_allocated_bytes ? (double)m->s.peak_reserved_bytes / (double)m->s.peak_allocated_bytes : 0;
    m->rec_ratio = m->rec_alloc ? (double)m->rec_res / (double)m->rec_alloc : 0;
    m->ns_op = m->r->ops ? m->r->secs * 1e9 / (double)m->r->ops : 0;
    if (m->o->json)
        print_json(m);
    else
        print_text(m);
}

int cmd_replay(int argc, char **argv)
{
    rp_opts o = { .level = "tensor", .mode = "expandable", .provider = "auto" };
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (access(o.file, R_OK)) {
        fprintf(stderr, "trainshim: error: cannot read %s: %s\n", o.file, strerror(errno));
        return 1;
    }
    rp_event *ev = NULL;
    rp_summary m = { .o = &o };
    if (load_events(&o, &ev, &m.nev, &m.ninit, &m.rec_res, &m.rec_alloc))
        return 1;
    rp_provider prov;
    if (open_provider(&o, &prov)) {
        free(ev);
        return 1;
    }
    ts_pool_config cfg = { .mode = mode_of(o.mode),
                           .device = o.device,
                           .capacity = prov.capacity,
                           .memory_limit = o.limit,
                           .grow_slack_pct = o.slack,
                           .step_plan = o.slack == TS_GROW_STEP_PLAN };
    int st;
    ts_pool *pool = ts_pool_create(&cfg, prov.table, &st);
    if (!pool) {
        fprintf(stderr, "trainshim: error: cannot create the %s pool (status %d)\n", o.mode, st);
        free(ev);
        return 1;
    }
    ts_pool_stream_add(pool, 0);
    rp_result r = { 0 };
    int fail = replay_events(pool, ev, m.nev, &r);
    m.prov = &prov;
    m.r = &r;
    summarize(&m, pool);
    free(ev);
    ts_pool_destroy(pool);
    close_provider(&prov);
    return fail ? 1 : 0;
}
