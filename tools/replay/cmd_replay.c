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
#include "cmd/cmds.h"
#include "replay/replay_offload.h"

typedef struct {
    char op;
    uint64_t addr, size;
} rp_event;

typedef struct {
    const char *file, *level, *mode, *provider;
    int device, json, offload;
    uint64_t capacity, limit, device_memory;
} rp_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: trainshim replay FILE [--level tensor|segment] [--device N] [--capacity BYTES]\n"
               "                        [--mode expandable|caching|off] [--limit BYTES]\n"
               "                        [--provider auto|cuda|fake] [--json]\n"
               "                        [--device-memory BYTES [--offload]]\n");
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    uint64_t m = 1;
    if (*end) {
        switch (*end) {
        case 'K':
        case 'k': m = 1ull << 10; break;
        case 'M':
        case 'm': m = 1ull << 20; break;
        case 'G':
        case 'g': m = 1ull << 30; break;
        case 'T':
        case 't': m = 1ull << 40; break;
        default: return -1;
        }
        end++;
        if (*end == 'i')
            end++;
        if (*end == 'B')
            end++;
        if (*end)
            return -1;
    }
    *out = (uint64_t)(v * (double)m);
    return 0;
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

int cmd_replay(int argc, char **argv)
{
    rp_opts o = { .level = "tensor", .mode = "expandable", .provider = "auto" };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            o.json = 1;
        } else if (!strcmp(a, "--level") && v) {
            o.level = v, i++;
        } else if (!strcmp(a, "--mode") && v) {
            o.mode = v, i++;
        } else if (!strcmp(a, "--provider") && v) {
            o.provider = v, i++;
        } else if (!strcmp(a, "--device") && v) {
            o.device = atoi(v), i++;
        } else if (!strcmp(a, "--capacity") && v) {
            if (parse_size(v, &o.capacity)) {
                fprintf(stderr, "trainshim: error: bad --capacity '%s'\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--offload")) {
            o.offload = 1;
        } else if (!strcmp(a, "--device-memory") && v) {
            if (parse_size(v, &o.device_memory) || !o.device_memory) {
                fprintf(stderr, "trainshim: error: bad --device-memory '%s'\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--limit") && v) {
            if (parse_size(v, &o.limit)) {
                fprintf(stderr, "trainshim: error: bad --limit '%s'\n", v);
                return 2;
            }
            i++;
        } else if (a[0] != '-' && !o.file) {
            o.file = a;
        } else {
            fprintf(stderr, "trainshim: error: replay: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    int mode = mode_of(o.mode);
    if (!o.file || mode < 0 || (strcmp(o.level, "tensor") && strcmp(o.level, "segment"))
        || (strcmp(o.provider, "auto") && strcmp(o.provider, "cuda") && strcmp(o.provider, "fake"))) {
        usage(stderr);
        return 2;
    }
    if (access(o.file, R_OK)) {
        fprintf(stderr, "trainshim: error: cannot read %s: %s\n", o.file, strerror(errno));
        return 1;
    }
    rp_event *ev = NULL;
    size_t nev = 0, ninit = 0;
    uint64_t rec_res = 0, rec_alloc = 0;
    if (load_events(&o, &ev, &nev, &ninit, &rec_res, &rec_alloc))
        return 1;

    /* the provider */
    rp_cuda cu;
    ts_fake_provider *fake = NULL;
    const ts_page_provider *prov = NULL;
    const char *prov_name = "fake";
    uint64_t capacity = o.capacity;
    if (strcmp(o.provider, "fake")) {
        uint64_t total = 0;
        if (open_cuda(&cu, o.device, &total) == 0) {
            prov = ts_cuda_provider_table(cu.prov);
            prov_name = "cuda";
            if (!capacity)
                capacity = total;
        } else if (!strcmp(o.provider, "cuda")) {
            fprintf(stderr, "trainshim: error: no usable CUDA driver VMM API (libcuda.so.1)\n");
            free(ev);
            return 1;
        } else {
            close_cuda(&cu);
            if (!o.json)
                fprintf(stderr, "trainshim: no usable CUDA driver VMM API; replaying on the fake provider\n");
        }
    }
    if (!capacity)
        capacity = 80ull << 30;
    if (!prov) {
        fake = ts_fake_create(capacity, 2ull << 20);
        /* fences that finish only when waited for: the slowest device */
        if (getenv("TRAINSHIM_REPLAY_SLOW_FENCES"))
            ts_fake_set_manual_fences(fake, 1);
        prov = ts_fake_provider_table(fake);
    }
    rp_offload dm; /* --device-memory: the device's pages, and with --offload the host's beyond them */
    if (o.device_memory)
        prov = rp_offload_wrap(&dm, prov, o.device_memory, o.offload);
    ts_pool_config cfg = { .mode = mode, .device = o.device, .capacity = capacity, .memory_limit = o.limit };
    int st;
    ts_pool *pool = ts_pool_create(&cfg, prov, &st);
    if (!pool) {
        fprintf(stderr, "trainshim: error: cannot create the %s pool (status %d)\n", o.mode, st);
        free(ev);
        return 1;
    }
    ts_pool_stream_add(pool, 0);

    addr_map am = { 0 };
    am.cap = 1;
    while (am.cap < nev * 2 + 64)
        am.cap <<= 1;
    am.k = calloc(am.cap, sizeof *am.k);
    am.v = calloc(am.cap, sizeof *am.v);
    uint64_t ooms = 0, first_oom = 0, unknown_frees = 0, ops = 0, cur = 0, peak_live = 0;
    int fail = 0;
    double t0 = now_s();
    for (size_t i = 0; i < nev && am.k && am.v; i++) {
        rp_event *e = &ev[i];
        uint64_t ptr = 0;
        if (e->op == 'I' || e->op == 'A') {
            uint64_t old;
            if (am_take(&am, e->addr, &old)) { /* inconsistent trace: drop the older */
                ts_pool_free(pool, old, 0, 0);
                ops++;
            }
            int rc = ts_pool_alloc(pool, e->size, 0, 0, &ptr);
            ops++;
            if (rc == TS_ALLOC_OOM) {
                if (!ooms++)
                    first_oom = i;
                continue;
            }
            if (rc) {
                fprintf(stderr, "trainshim: error: allocation failed with status %d at event %zu\n", rc, i);
                fail = 1;
                break;
            }
            am_put(&am, e->addr, ptr);
            cur += ts_round_up(e->size, TS_ALLOC_ALIGN);
            if (cur > peak_live)
                peak_live = cur;
        } else if (e->op == 'F') {
            if (!am_take(&am, e->addr, &ptr)) {
                unknown_frees++;
                continue;
            }
            uint64_t base = 0, size = 0;
            ts_pool_lookup(pool, ptr, &base, &size);
            cur -= size;
            ts_pool_free(pool, ptr, 0, 0);
            ops++;
        }
    }
    double secs = now_s() - t0;
    ts_alloc_stats s;
    ts_pool_stats(pool, &s);
    ts_oom_report oom;
    ts_pool_last_oom(pool, &oom);
    double ratio =
        s.peak_allocated_bytes ? (double)s.peak_reserved_bytes / (double)s.peak_allocated_bytes : 0;
    double rec_ratio = rec_alloc ? (double)rec_res / (double)rec_alloc : 0;
    double ns_op = ops ? secs * 1e9 / (double)ops : 0;
    const double G = 1073741824.0;
    if (o.json) {
        printf("{\"file\": ");
        json_str(o.file);
        printf(
            ", \"level\": \"%s\", \"mode\": \"%s\", \"provider\": \"%s\", "
            "\"capacity_bytes\": %" PRIu64
            ", \"events\": %zu, \"initial_blocks\": %zu, \"operations\": %" PRIu64 ", "
            "\"peak_reserved_bytes\": %" PRIu64 ", \"peak_allocated_bytes\": %" PRIu64 ", "
            "\"ratio\": %.6f, \"fragmentation\": %.6f, \"ooms\": %" PRIu64 ", \"first_oom_event\": %" PRId64
            ", "
            "\"driver_calls\": %" PRIu64 ", \"page_moves\": %" PRIu64 ", \"cache_hits\": %" PRIu64 ", "
            "\"ns_per_op\": %.1f, \"unknown_frees\": %" PRIu64 ", "
            "\"recorded_peak_reserved_bytes\": %" PRIu64 ", \"recorded_peak_allocated_bytes\": %" PRIu64 ", "
            "\"recorded_ratio\": %.6f",
            o.level, o.mode, prov_name, capacity, nev, ninit, ops, s.peak_reserved_bytes,
            s.peak_allocated_bytes, ratio, s.fragmentation, ooms, ooms ? (int64_t)first_oom : (int64_t)-1,
            s.driver_calls, s.page_moves, s.cache_hits, ns_op, unknown_frees, rec_res, rec_alloc, rec_ratio);
        if (o.device_memory)
            printf(", \"device_memory_bytes\": %" PRIu64 ", \"offload\": %s, \"peak_host_bytes\": %" PRIu64
                   ", \"host_pages\": %" PRIu64,
                   o.device_memory, o.offload ? "true" : "false", dm.peak_host_bytes, dm.host_pages);
        printf("}\n");
    } else {
        printf(
            "replay %s (%s level, %zu events, %zu live at start) mode %s, provider %s, capacity %.2f GiB\n",
            o.file, o.level, nev, ninit, o.mode, prov_name, capacity / G);
        printf("  trainshim: peak reserved %.2f GiB, peak allocated %.2f GiB, reserved/allocated %.4f, "
               "fragmentation %.4f\n",
               s.peak_reserved_bytes / G, s.peak_allocated_bytes / G, ratio, s.fragmentation);
        printf("  PyTorch (recorded): peak reserved %.2f GiB, peak allocated %.2f GiB, reserved/allocated "
               "%.4f\n",
               rec_res / G, rec_alloc / G, rec_ratio);
        printf("  OOMs %" PRIu64, ooms);
        if (ooms)
            printf(" (first at event %" PRIu64 ": %.2f GiB requested, %.2f GiB reserved, %.2f GiB allocated)",
                   first_oom, oom.requested / G, oom.reserved / G, oom.allocated / G);
        printf(", driver calls %" PRIu64 " (page moves %" PRIu64 "), cache hits %" PRIu64 " of %" PRIu64
               " allocations, %.0f ns per operation\n",
               s.driver_calls, s.page_moves, s.cache_hits, s.allocs, ns_op);
        if (o.device_memory)
            printf("  device memory %.2f GiB%s: peak %.2f GiB would have lived on the host (%" PRIu64
                   " pages backed by it)\n",
                   o.device_memory / G, o.offload ? ", offload on" : "", dm.peak_host_bytes / G,
                   dm.host_pages);
        if (unknown_frees)
            printf("  %" PRIu64
                   " frees skipped: their address was never allocated (or its allocation failed)\n",
                   unknown_frees);
    }
    free(am.k);
    free(am.v);
    free(ev);
    ts_pool_destroy(pool);
    if (o.device_memory)
        rp_offload_free(&dm);
    if (fake)
        ts_fake_destroy(fake);
    else
        close_cuda(&cu);
    return fail ? 1 : 0;
}
