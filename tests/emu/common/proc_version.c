/* proc_version.c: cuGetProcAddress's versioned lookup over the generated
 * table (see proc_version.h). */
#include "proc_version.h"
#include <string.h>

/* First row of base (rows are sorted by base), or NULL. */
static const struct emu_proc_version *first_row(const char *base)
{
    size_t lo = 0, hi = emu_proc_versions_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(emu_proc_versions[mid].base, base) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo < emu_proc_versions_count && strcmp(emu_proc_versions[lo].base, base) == 0)
        return &emu_proc_versions[lo];
    return NULL;
}

/* name == legacy + "_ptds" or legacy + "_ptsz" */
static bool is_per_thread_of(const char *name, const char *legacy)
{
    size_t n = strlen(legacy);
    return strncmp(name, legacy, n) == 0 &&
           (strcmp(name + n, "_ptds") == 0 || strcmp(name + n, "_ptsz") == 0);
}

const char *emu_proc_select(const char *base, int cuda_version, bool per_thread,
                            CUdriverProcAddressQueryResult *status)
{
    const struct emu_proc_version *r = first_row(base);
    if (!r) {
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return NULL;
    }
    const struct emu_proc_version *end = emu_proc_versions + emu_proc_versions_count;
    const char *legacy = NULL, *pt = NULL;
    for (const struct emu_proc_version *p = r; p < end && strcmp(p->base, base) == 0; p++) {
        if (p->version > cuda_version) continue;
        if (!p->per_thread) legacy = p->name;        /* ascending: the last one wins */
        else if (legacy && is_per_thread_of(p->name, legacy)) pt = p->name;
    }
    if (!legacy) {
        *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return NULL;
    }
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return per_thread && pt ? pt : legacy;
}

/* A rename row (cuGraphInstantiate -> cuGraphInstantiateWithFlags) also
 * names the export; the row of its own base is the one that dates it. */
const struct emu_proc_version *emu_proc_row_of(const char *name)
{
    for (unsigned i = 0; i < emu_proc_versions_count; i++) {
        const struct emu_proc_version *r = &emu_proc_versions[i];
        size_t n = strlen(r->base);
        if (strcmp(r->name, name) == 0 && strncmp(name, r->base, n) == 0 &&
            (name[n] == 0 || name[n] == '_'))
            return r;
    }
    return NULL;
}
