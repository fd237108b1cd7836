/* resolve.h: where the real CUDA / NCCL / cuBLAS functions are.
 *
 * One slot per API id (hooks/hooks.def), filled lazily and thread-safely on
 * first use: dlsym(RTLD_NEXT, name), falling back to
 * dlopen(soname, RTLD_NOLOAD | RTLD_LAZY) + dlsym when the framework loaded
 * the library RTLD_LOCAL (invisible to RTLD_NEXT), or the pointer the real
 * dlsym returned when the program looked the symbol up itself (hooks/dl.c).
 * A pointer into trainshim itself is never accepted, so a hook can never end
 * up calling itself.  A missing symbol is not cached: the library may be
 * dlopen()ed later.  Cached pointers assume CUDA libraries are never unloaded
 * (frameworks never dlclose them). */
#ifndef TRAINSHIM_RESOLVE_H
#define TRAINSHIM_RESOLVE_H
#include <stdbool.h>
#include "core/core.h"

extern void *ts_real_slots[];
/* Resolves api's real function; NULL if no loaded library defines it. */
void *ts_real_resolve(int api);
/* The real function of api: one acquire load once resolved. */
static inline void *ts_real(int api)
{
    void *p = __atomic_load_n(&ts_real_slots[api], __ATOMIC_ACQUIRE);
    return ts_likely(p != NULL) ? p : ts_real_resolve(api);
}
/* Records p (from the real dlsym on a library handle) as api's real
 * function if none is known yet and p is not trainshim's own. */
void ts_real_offer(int api, void *p);

/* glibc's own dlsym (dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5")): trainshim
 * exports a dlsym hook, so its own lookups must never call plain dlsym. */
void *ts_real_dlsym(void *handle, const char *name);

/* True if p lies inside trainshim's own object. */
bool ts_addr_is_ours(const void *p);

/* Symbol table facts generated from hooks/hooks.def. */
extern const char *const ts_api_names[]; /* TS_API_COUNT exported names */
int ts_api_count(void);
const char *ts_api_name(int api);
int ts_api_lib(int api);            /* enum ts_lib of hooks/hooks.h */
const char *ts_lib_soname(int lib); /* "libcudart.so.13", ... */
/* File name prefix that identifies lib's object ("libcudart.so"). */
const char *ts_lib_file_prefix(int lib);
#endif
