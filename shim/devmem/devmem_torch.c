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
 * variable as it is, and so does TRAINSHIM_TORCH_BACKEND=off.  So does a
 * distributed launch (see choose_backend).  torch's memory history and
 * snapshots (torch.cuda.memory._record_memory_history) are refused under
 * cudaMallocAsync: a program using them needs backend:native.  Which case
 * applied is logged with the first device pool (the report's RUN section). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc.h"
#include "core/config.h"
#include "core/core.h"
#include "devmem/devmem.h"
#include "log/logfmt.h"

#define TORCH_CONF_MAX 1024

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
    /* torch's NCCL process group asks the allocator for a snapshot when it
     * is destroyed, which the cudaMallocAsync backend refuses by aborting
     * the process: a worker of a distributed launch keeps torch's own. */
    if (getenv("WORLD_SIZE") || getenv("TORCHELASTIC_RUN_ID"))
        return TS_TORCH_BACKEND_DISTRIBUTED;
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
