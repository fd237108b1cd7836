/* cuda_real.h: the shim's door to the real CUDA driver and runtime.
 *
 * The shim calls real CUDA functions (the VMM calls of the allocator, events,
 * copies, pointer queries) but knows nothing of interposition: it names the
 * function it needs (core/cuda_real.def) and gets the real one, never a hook.
 * Where the real functions are is the hook layer's business: at load it
 * registers a resolver (ts_cuda_set_resolver), which the first call of each
 * function asks.  A found pointer is kept (one acquire load afterwards); a
 * missing one is not, so a library dlopen()ed later is still found.  Without
 * a resolver (or before it is registered) every function is missing (NULL),
 * which callers treat as the library being absent.
 *
 *     ts_cuda_fn_cuMemCreate create = TS_CUDA_REAL(cuMemCreate);
 *     if (!create || create(&h, size, &prop, 0) != CUDA_SUCCESS) ... */
#ifndef TRAINSHIM_CUDA_REAL_H
#define TRAINSHIM_CUDA_REAL_H
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "core/core.h"

/* Ids: TS_CUDA_<symbol>. */
enum ts_cuda_id {
#define TS_CUDA_FN(sym, proto) TS_CUDA_##sym,
#include "core/cuda_real.def"
#undef TS_CUDA_FN
    TS_CUDA_COUNT
};

/* Pointer types: ts_cuda_fn_<symbol>, the toolkit header's prototype. */
#define TS_CUDA_FN(sym, proto) typedef __typeof__(proto) *ts_cuda_fn_##sym;
#include "core/cuda_real.def"
#undef TS_CUDA_FN

/* The resolver answers id's real function, or NULL when no loaded library
 * defines it.  Registered once by the hook layer, before the shim turns
 * active. */
typedef void *(*ts_cuda_resolver)(int id);
void ts_cuda_set_resolver(ts_cuda_resolver resolve);

extern void *ts_cuda_slots[TS_CUDA_COUNT];
/* Asks the resolver and keeps a found pointer; NULL if missing. */
void *ts_cuda_resolve(int id);
/* The real function of id: one acquire load once resolved. */
static inline void *ts_cuda_real(int id)
{
    void *p = __atomic_load_n(&ts_cuda_slots[id], __ATOMIC_ACQUIRE);
    return ts_likely(p != NULL) ? p : ts_cuda_resolve(id);
}
/* Typed: TS_CUDA_REAL(cuMemCreate) is a ts_cuda_fn_cuMemCreate (or NULL). */
#define TS_CUDA_REAL(sym) ((ts_cuda_fn_##sym)ts_cuda_real(TS_CUDA_##sym))

/* Device of the calling thread's current context (-1 if none), asked of the
 * real driver (cuCtxGetDevice). */
int ts_current_device(void);
/* The same, kept per thread between the calls that can change it: for the
 * runtime API's allocations only (cudaMalloc, cudaMallocAsync on a default
 * stream), made by the program at the outermost level, where nothing of the
 * shim's own has a context pushed.  The driver is asked again after
 *   - ts_current_context_changed() on this thread (the hooks of
 *     cudaSetDevice and the driver's context set/push/pop/create calls);
 *   - ts_streams_destroyed() on any thread (a context or device destroyed);
 * and always once ts_current_device_unkept() was called: an entry point that
 * changes contexts was handed out where no hook sees its calls (a driver's
 * proc address that is not its export), so no kept answer can be trusted.
 * A library's own runtime (statically linked: NCCL's) switches devices
 * unseen, but restores them before it returns, and allocates through the
 * driver API, which always asks (ts_current_device). */
int ts_current_device_kept(void);
void ts_current_context_changed(void);
void ts_current_device_unkept(void);
/* The default streams (0, cudaStreamLegacy, cudaStreamPerThread): handles
 * that name the current context's stream, not a stream of their own. */
static inline bool ts_stream_is_default(uint64_t stream)
{
    return stream <= (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD;
}
/* Device a stream's work runs on: a created stream's own (cuStreamGetDevice),
 * the current context's for the default streams; -1 if the driver cannot
 * tell. */
int ts_stream_device(uint64_t stream);
/* Streams were destroyed (a stream, a context's, a device reset's): answers
 * ts_stream_device kept for their handles, and every thread's kept current
 * device, are forgotten. */
void ts_streams_destroyed(void);
/* A created stream's context (cuStreamGetCtx): NULL for a default stream
 * or one the driver names no context for. */
CUcontext ts_stream_context(uint64_t stream);
#endif
