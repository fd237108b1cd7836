/* devmem_torch.c: PyTorch hands trainshim every tensor only under its
 * cudaMallocAsync backend (one cudaMallocAsync / cudaFreeAsync per tensor);
 * its default caching allocator asks for large segments and caches tensors
 * inside them itself, where trainshim's allocator cannot reach.  So at load
 * time, before any program code can read it, the allocator configuration
 * gets backend:cudaMallocAsync when it names no backend of its own.  It is
 * only an environment variable: a program without torch never reads it.
 *
 * The user's choice stands: a backend named, expandable_segments (torch's
 * own allocator tuned) or PYTORCH_NO_CUDA_MEMORY_CACHING leave the
 * variable as it is, and so does TRAINSHIM_TORCH_BACKEND=off.  torch under
 * cudaMallocAsync refuses what needs its own allocator's blocks, and the
 * backend cannot change once torch has read it, so the variable is also
 * left alone where the environment or the command line shows such a need
 * (see command_line_case): torch.distributed (a launcher's WORLD_SIZE, a
 * multiprocessing worker, a script that creates its own process group),
 * whose NCCL process group takes a snapshot at teardown, and a script whose
 * own source calls torch's memory history or snapshots, shares CUDA tensors
 * between processes, compiles with CUDA graphs or makes a torch.cuda.MemPool
 * (each refused under cudaMallocAsync: shareIpcHandle, getCheckpointState,
 * createOrIncrefPool).  Which case applied is logged with the first device
 * pool (the report's RUN section). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc.h"
#include "core/config.h"
#include "core/core.h"
#include "devmem/devmem.h"
#include "log/logfmt.h"

#define TORCH_CONF_MAX 1024
#define CMDLINE_MAX 65536
#define CMDLINE_ARGS 256
#define SCRIPT_SCAN_MAX (4u << 20)

extern const int ts_tool_process __attribute__((weak));

static uint32_t backend_case;

/* The value of `key` in a torch allocator configuration ("k:v,k2:v2", spaces
 * around tokens allowed) copied into out; false if the key is absent. */
static bool conf_value(const char *conf, const char *key, char *out, size_t n)
{
    size_t klen = strlen(key);
    for (const char *p = conf; p && *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > klen && !strncmp(p, key, klen)) {
            const char *v = p + klen;
            while (*v == ' ')
                v++;
            if (*v == ':') {
                v++;
                while (*v == ' ')
                    v++;
                size_t vlen = (size_t)(p + len - v);
                while (vlen && v[vlen - 1] == ' ')
                    vlen--;
                if (vlen >= n)
                    vlen = n - 1;
                memcpy(out, v, vlen);
                out[vlen] = 0;
                return true;
            }
        }
        p = end;
    }
    return false;
}

/* torch reads PYTORCH_ALLOC_CONF first, PYTORCH_CUDA_ALLOC_CONF otherwise. */
static const char *conf_variable(void)
{
    return getenv("PYTORCH_ALLOC_CONF") ? "PYTORCH_ALLOC_CONF" : "PYTORCH_CUDA_ALLOC_CONF";
}

/* The variable as the shim found it, for child processes: "-" unset, else
 * "=" and the value.  Not a TRAINSHIM_ name (those are options). */
#define ORIGINAL_CONF "_TRAINSHIM_TORCH_CONF_FOUND"

static int added_conf(const char *conf, char *out, size_t n)
{
    return conf && *conf ? snprintf(out, n, "backend:cudaMallocAsync,%s", conf)
                         : snprintf(out, n, "backend:cudaMallocAsync");
}

/* A child of a process where the shim added the backend inherits the added
 * value: the variable is put back as the user left it, so that this process
 * decides for itself (a torchrun launcher's workers are distributed). */
static void undo_inherited(const char *var)
{
    const char *found = getenv(ORIGINAL_CONF);
    const char *conf = getenv(var);
    if (!found || !conf || (found[0] != '-' && found[0] != '='))
        return;
    char want[TORCH_CONF_MAX];
    int n = added_conf(found[0] == '=' ? found + 1 : NULL, want, sizeof want);
    if (n < 0 || (size_t)n >= sizeof want || strcmp(conf, want))
        return; /* changed since: the user's */
    if (found[0] == '=')
        setenv(var, found + 1, 1);
    else
        unsetenv(var);
}

/* The process's arguments (from /proc/self/cmdline) in buf; their count, 0
 * when unreadable.  A longer command line is cut at n bytes. */
static int read_cmdline(char *buf, size_t n, const char **argv, int max_args)
{
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (!f)
        return 0;
    size_t len = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[len] = 0;
    int argc = 0;
    for (size_t i = 0; i < len && argc < max_args; i += strlen(buf + i) + 1)
        argv[argc++] = buf + i;
    return argc;
}

/* text mentions any of words (NULL-terminated). */
static bool mentions(const char *text, size_t len, const char *const *words)
{
    for (; *words; words++)
        if (memmem(text, len, *words, strlen(*words)))
            return true;
    return false;
}

/* torch.compile with CUDA graphs: mode "reduce-overhead", "max-autotune"
 * (which turns them on; not "max-autotune-no-cudagraphs"), the
 * "cudagraphs" backend or inductor's triton.cudagraphs option.  Their graph
 * trees checkpoint torch's allocator pool (getCheckpointState at every
 * recording). */
static bool compiles_graphs(const char *text, size_t len)
{
    static const char mode[] = "reduce-overhead";
    if (memmem(text, len, mode, sizeof mode - 1))
        return true;
    static const char autotune[] = "max-autotune", without[] = "-no-cudagraphs", graphs[] = "cudagraphs",
                      no[] = "no-";
    for (const char *p = text, *end = text + len;
         (p = memmem(p, (size_t)(end - p), autotune, sizeof autotune - 1));) {
        p += sizeof autotune - 1;
        if ((size_t)(end - p) < sizeof without - 1 || memcmp(p, without, sizeof without - 1))
            return true;
    }
    for (const char *p = text, *end = text + len;
         (p = memmem(p, (size_t)(end - p), graphs, sizeof graphs - 1));) {
        if (p - text < 3 || memcmp(p - 3, no, 3))
            return true;
        p += sizeof graphs - 1;
    }
    return false;
}

/* What a Python source shows it needs of torch's own allocator: a process
 * group it creates itself (torch.distributed.init_process_group without a
 * launcher: see command_line_case), or what torch refuses under
 * cudaMallocAsync with a RuntimeError: CUDA tensors shared between
 * processes (torch.multiprocessing), CUDA graphs under torch.compile, a
 * torch.cuda.MemPool, and torch.cuda.memory's _record_memory_history,
 * memory_snapshot, _snapshot and what is built on them (_dump_snapshot,
 * _export_memory_snapshot).  A script that asks get_allocator_backend() is
 * taken to guard its history calls itself.  Mentions are enough: a script
 * that imports torch.multiprocessing and never shares a CUDA tensor keeps
 * torch's allocator too (less served, nothing refused). */
static uint32_t source_case(const char *text, size_t len)
{
    static const char *const history[] = { "_record_memory_history", "memory_snapshot", "_snapshot(", NULL };
    static const char *const ipc[] = { "torch.multiprocessing", "torch import multiprocessing",
                                       "_share_cuda_", NULL };
    static const char *const mempool[] = { "MemPool", "use_mem_pool", NULL };
    static const char group[] = "init_process_group", guard[] = "get_allocator_backend";
    if (memmem(text, len, group, sizeof group - 1))
        return TS_TORCH_BACKEND_DISTRIBUTED;
    if (mentions(text, len, ipc))
        return TS_TORCH_BACKEND_IPC;
    if (compiles_graphs(text, len))
        return TS_TORCH_BACKEND_GRAPH_TREES;
    if (mentions(text, len, mempool))
        return TS_TORCH_BACKEND_MEMPOOL;
    if (memmem(text, len, guard, sizeof guard - 1))
        return 0;
    return mentions(text, len, history) ? TS_TORCH_BACKEND_HISTORY : 0;
}

static uint32_t file_case(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char *text = malloc(SCRIPT_SCAN_MAX);
    size_t len = text ? fread(text, 1, SCRIPT_SCAN_MAX, f) : 0;
    fclose(f);
    uint32_t c = text ? source_case(text, len) : 0;
    free(text);
    return c;
}

/* python [options] SCRIPT or python [options] -c CODE: what that source
 * shows (modules it imports are not read; nor is a module run with -m). */
static uint32_t python_source_case(int argc, const char **argv)
{
    const char *base = argc ? strrchr(argv[0], '/') : NULL;
    base = base ? base + 1 : argc ? argv[0] : "";
    if (strncmp(base, "python", 6))
        return 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-c"))
            return i + 1 < argc ? source_case(argv[i + 1], strlen(argv[i + 1])) : 0;
        if (!strcmp(a, "-m") || !strcmp(a, "-"))
            return 0;
        if (!strcmp(a, "-X") || !strcmp(a, "-W") || !strcmp(a, "--check-hash-based-pycs"))
            i++; /* an option and its value */
        else if (a[0] != '-')
            return file_case(a);
    }
    return 0;
}

/* torch's NCCL process group asks the allocator for a snapshot when it is
 * destroyed, which the cudaMallocAsync backend refuses by aborting the
 * process.  A distributed worker shows itself by WORLD_SIZE (torchrun,
 * mpirun wrappers, Slurm launchers); started by torch.multiprocessing.spawn
 * (no WORLD_SIZE), by the command line Python's multiprocessing gives its
 * spawn and forkserver children; a single process that creates its group
 * itself, by its source.  Such children that use no NCCL only keep torch's
 * own allocator. */
static uint32_t command_line_case(void)
{
    if (getenv("WORLD_SIZE") || getenv("TORCHELASTIC_RUN_ID"))
        return TS_TORCH_BACKEND_DISTRIBUTED;
    static char buf[CMDLINE_MAX];
    const char *argv[CMDLINE_ARGS];
    int argc = read_cmdline(buf, sizeof buf, argv, CMDLINE_ARGS);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--multiprocessing-fork")
            || (!strcmp(argv[i - 1], "-c") && !strncmp(argv[i], "from multiprocessing.", 21)))
            return TS_TORCH_BACKEND_DISTRIBUTED;
    return python_source_case(argc, argv);
}

static uint32_t choose_backend(void)
{
    const char *var = conf_variable();
    undo_inherited(var);
    const char *conf = getenv(var);
    char v[64];
    if (conf && conf_value(conf, "backend", v, sizeof v))
        return strcmp(v, "cudaMallocAsync") ? TS_TORCH_BACKEND_NATIVE : TS_TORCH_BACKEND_ASYNC;
    /* expandable_segments tunes torch's native allocator: the user's choice */
    if (conf && conf_value(conf, "expandable_segments", v, sizeof v))
        return strcmp(v, "True") ? TS_TORCH_BACKEND_NATIVE : TS_TORCH_BACKEND_EXPANDABLE;
    const char *nocache = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
    if (nocache && *nocache && strcmp(nocache, "0"))
        return TS_TORCH_BACKEND_NO_CACHING;
    if (ts_cfg()->torch_backend != 0)
        return TS_TORCH_BACKEND_OFF;
    uint32_t needs_native = command_line_case();
    if (needs_native)
        return needs_native;
    char out[TORCH_CONF_MAX], found[TORCH_CONF_MAX];
    int n = added_conf(conf, out, sizeof out);
    int m = snprintf(found, sizeof found, "%s%s", conf ? "=" : "-", conf ? conf : "");
    if (n < 0 || (size_t)n >= sizeof out || m < 0 || (size_t)m >= sizeof found) {
        ts_warn("%s too long to add backend:cudaMallocAsync; left as it is", var);
        return TS_TORCH_BACKEND_OFF;
    }
    setenv(ORIGINAL_CONF, found, 1);
    setenv(var, out, 1);
    return TS_TORCH_BACKEND_ADDED;
}

/* The shim's own tools and a disabled or non-serving shim leave torch alone:
 * the backend would only move torch's tensors to the driver's pool. */
__attribute__((constructor)) static void torch_backend_at_load(void)
{
    if (&ts_tool_process != NULL)
        return;
    const struct ts_config *cfg = ts_cfg();
    if (ts_config_disabled(cfg) || cfg->alloc == TS_ALLOC_OFF)
        return;
    backend_case = choose_backend();
}

void ts_dev_log_torch_backend(void)
{
    if (backend_case)
        ts_ev_torch_backend(backend_case, getenv(conf_variable()));
}
