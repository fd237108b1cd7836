/* host_cache.h: the pinned host allocation cache (shim/copy/host_cache.c), used by
 * the pinned-host hooks of hooks/runtime.c and hooks/driver.c:
 *
 *   alloc:  if (outer && ts_host_cache_wanted(size, flags)) {
 *               p = ts_host_cache_get(size, flags);
 *               if (!p) { r = real(&p, ts_host_cache_class(size), flags);
 *                         if (r == OUT_OF_MEMORY) { ts_host_cache_trim(); retry; }
 *                         if (ok) ts_host_cache_adopt(p, size, flags); } }
 *   free:   switch (ts_host_cache_put(p)) { CACHED: success; DOUBLE_FREE:
 *           invalid value; UNKNOWN / RELEASE: the real free }
 *
 * Flags are the CU_MEMHOSTALLOC_* bits (equal to cudaHostAlloc*). */
#ifndef TRAINSHIM_HOST_CACHE_H
#define TRAINSHIM_HOST_CACHE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* TRAINSHIM_HOST_CACHE on, size > 0 and only known flags. */
bool ts_host_cache_wanted(size_t size, unsigned flags);
/* The size really allocated for a request of `size` bytes. */
size_t ts_host_cache_class(size_t size);
/* A free cached block of size's class and exactly these flags, or NULL. */
void *ts_host_cache_get(size_t size, unsigned flags);
/* p was just allocated (ts_host_cache_class(size) bytes) for the program. */
void ts_host_cache_adopt(void *p, size_t size, unsigned flags);

enum ts_host_cache_put {
    TS_HC_PUT_UNKNOWN,     /* not a cache block: do the real free */
    TS_HC_PUT_CACHED,      /* kept for reuse: report success */
    TS_HC_PUT_DOUBLE_FREE, /* already free: report the invalid-value error */
    TS_HC_PUT_RELEASE,     /* left the cache: do the real free */
};
enum ts_host_cache_put ts_host_cache_put(void *p);
/* Really frees every cached free block (an allocation failed). */
void ts_host_cache_trim(void);
/* Logs a TS_REC_PINNED_ALLOC for an allocation that went through the cache
 * (after the hook's TS_REC_ALLOC). */
void ts_host_cache_note(int api, void *p, size_t size, unsigned flags, bool hit);
void ts_host_cache_stats(uint64_t *hits, uint64_t *misses, uint64_t *cached_free);
#endif
