/* Per-symbol tables generated from hooks.def that need the hooks themselves:
 * the hook addresses (for the dlsym / cuGetProcAddress dispatch) and the
 * name -> id index.  Also registers the API names (hooks/resolve.c) with the
 * core's log. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hooks.h"

/* The table takes the address of every hook, including the ones whose real
 * name the toolkit marks deprecated (cudaGetDriverEntryPoint). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define TS_ADDR_PASS(sym) (void *)&sym,
#define TS_ADDR_OWN(sym) (void *)&sym,
#define TS_ADDR_REAL(sym) NULL,
void *const ts_hook_addr[TS_API_COUNT] = {
#define TS_SYM(lib, ret, sym, base, params, args, body) TS_ADDR_##body(sym)
#include "hooks.def"
#undef TS_SYM
};

/* A twin's name is its base name plus "_ptds"/"_ptsz": longer. */
static const bool per_thread[TS_API_COUNT] = {
#define TS_SYM(lib, ret, sym, base, params, args, body) sizeof(#sym) != sizeof(#base),
#include "hooks.def"
#undef TS_SYM
};

bool ts_api_per_thread(int api) { return api >= 0 && api < TS_API_COUNT && per_thread[api]; }

/* Hooked ids sorted by name, for bsearch; built once. */
static int sorted_ids[TS_API_COUNT];
static int sorted_count;
static pthread_once_t sorted_once = PTHREAD_ONCE_INIT;

static int cmp_ids(const void *a, const void *b)
{
    return strcmp(ts_api_names[*(const int *)a], ts_api_names[*(const int *)b]);
}

static void build_index(void)
{
    int n = 0;
    for (int i = 0; i < TS_API_COUNT; i++)
        if (ts_hook_addr[i])
            sorted_ids[n++] = i;
    qsort(sorted_ids, (size_t)n, sizeof sorted_ids[0], cmp_ids);
    sorted_count = n;
}

int ts_hook_by_name(const char *name)
{
    if (!name)
        return -1;
    pthread_once(&sorted_once, build_index);
    int lo = 0, hi = sorted_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(name, ts_api_names[sorted_ids[mid]]);
        if (c == 0)
            return sorted_ids[mid];
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return -1;
}

__attribute__((constructor)) static void register_api_names(void)
{
    ts_register_apis(ts_api_names, TS_API_COUNT);
}
