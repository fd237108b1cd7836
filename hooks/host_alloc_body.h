/* host_alloc_body.h: the bodies shared by the runtime's and the driver's pinned
 * host allocation hooks (cudaMallocHost/cudaHostAlloc, cuMemHostAlloc/
 * cuMemAllocHost_v2) and frees (cudaFreeHost, cuMemFreeHost), which differ
 * only in their result type and codes.
 * Pinned host allocations are served from the cache (shim/copy/host_cache.h) when
 * the call is outermost; a request the cache cannot serve is a real
 * allocation of the class size, retried once after trimming the cache.
 * Expands inside a ts_body_* function of a family file. */
#ifndef TRAINSHIM_HOST_ALLOC_BODY_H
#define TRAINSHIM_HOST_ALLOC_BODY_H
#include "numa/numa.h"
#define TS_HOST_ALLOC_BODY(rtype, ok, oom, base, api, args, out, size, flags, class_args)                    \
    TS_HOOK_PROLOGUE(rtype, base, api, args);                                                                \
    TS_OUTER_BEGIN(api);                                                                                     \
    rtype r;                                                                                                 \
    bool cached_ = false, hit_ = false;                                                                      \
    if (outer_ && (out) && ts_host_cache_wanted(size, flags)) {                                              \
        void *p_ = ts_host_cache_get(size, flags);                                                           \
        cached_ = true;                                                                                      \
        hit_ = p_ != NULL;                                                                                   \
        if (p_) {                                                                                            \
            *(out) = p_;                                                                                     \
            r = ok;                                                                                          \
        } else {                                                                                             \
            struct ts_numa_place pl_; /* on the GPU's node with TRAINSHIM_NUMA=bind */                       \
            ts_numa_place_begin(&pl_);                                                                       \
            r = real_ class_args;                                                                            \
            if (r == (oom)) {                                                                                \
                ts_host_cache_trim();                                                                        \
                r = real_ class_args;                                                                        \
            }                                                                                                \
            ts_numa_place_end(&pl_, r == (ok) ? *(out) : NULL, ts_host_cache_class(size));                   \
            if (r == (ok))                                                                                   \
                ts_host_cache_adopt(*(out), size, flags);                                                    \
        }                                                                                                    \
    } else {                                                                                                 \
        r = real_ args;                                                                                      \
    }                                                                                                        \
    if (outer_)                                                                                              \
        ts_alloc_event(api, TS_HOST_DEVICE, TS_OUT_PTR(out, r), size, 0, r);                                 \
    if (cached_ && r == (ok))                                                                                \
        ts_host_cache_note(api, *(out), size, flags, hit_);                                                  \
    TS_OUTER_END(api, r);                                                                                    \
    return r

/* A pinned block of the cache goes back to it; a second free of one is the
 * library's invalid-value answer; anything else is the real free. */
#define TS_HOST_FREE_BODY(rtype, ok, invalid, note_invalid, base, api, ptr)                                  \
    TS_HOOK_PROLOGUE(rtype, base, api, (ptr));                                                               \
    TS_OUTER_BEGIN(api);                                                                                     \
    rtype r;                                                                                                 \
    switch (outer_ && (ptr) ? ts_host_cache_put(ptr) : TS_HC_PUT_UNKNOWN) {                                  \
    case TS_HC_PUT_CACHED: r = (ok); break;                                                                  \
    case TS_HC_PUT_DOUBLE_FREE:                                                                              \
        r = (invalid);                                                                                       \
        note_invalid;                                                                                        \
        break;                                                                                               \
    default: r = real_(ptr); break;                                                                          \
    }                                                                                                        \
    if (outer_)                                                                                              \
        ts_free_event(api, TS_HOST_DEVICE, (uint64_t)(uintptr_t)(ptr), 0, r);                                \
    TS_OUTER_END(api, r);                                                                                    \
    return r
#endif
