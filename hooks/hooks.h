/* hooks.h: everything generated from hooks/hooks.def, and the helpers every
 * hook family (runtime.c, driver.c, nccl.c, cublas.c) shares.
 *
 * A hook is thin: resolve the real function, tail-call it when the shim is
 * inactive, otherwise take the re-entry depth (only the outermost call of a
 * thread is accounted), call the real function, report facts to the core,
 * return the real result unchanged. */
#ifndef TRAINSHIM_HOOKS_H
#define TRAINSHIM_HOOKS_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cublasLt.h>
#include <cublas_api.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "core/cuda_real.h"
#include "numa/numa.h"
#include "offload/offload.h"
#include "resolve.h"

/* cuda.h maps legacy names onto their successors with macros (the 4-argument
 * cuGetProcAddress onto cuGetProcAddress_v2, cuDevicePrimaryCtxReset onto
 * _v2, ...); each is a separate export, which binaries built against older
 * headers call, and we hook each separately (hooks.def names both). */
#undef cuGetProcAddress
#undef cuDevicePrimaryCtxReset
#undef cuDevicePrimaryCtxRelease
#undef cuStreamDestroy
#undef cuCtxDestroy
#undef cuCtxCreate
#undef cuCtxPushCurrent
#undef cuCtxPopCurrent

/* cublasHgemm* take __half, which C sees only as a struct tag (the header
 * declares them for C++ only; same ABI: a pointer). */
struct __half;

/* <crt/device_functions.h> declares these for C++ only (nvcc's <<<>>> path). */
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream);

/* ---- generation --------------------------------------------------------- */
/* TS_HOOK expands to one TS_SYM per exported symbol (the variant twin too):
 *   TS_SYM(lib, ret, sym, base, params, args, body)
 * where base is the def line's name (shared signature) and sym the symbol. */
#define TS_HOOK(lib, ret, name, params, args, variant, body)                                                 \
    TS_SYM(lib, ret, name, name, params, args, body)                                                         \
    TS_VARIANT_##variant(lib, ret, name, params, args, body)
#define TS_VARIANT_NONE(lib, ret, name, params, args, body)
#define TS_VARIANT_PTDS(lib, ret, name, params, args, body)                                                  \
    TS_SYM(lib, ret, name##_ptds, name, params, args, body)
#define TS_VARIANT_PTSZ(lib, ret, name, params, args, body)                                                  \
    TS_SYM(lib, ret, name##_ptsz, name, params, args, body)

#define TS_UNPAREN(...) __VA_ARGS__

/* Function-pointer type of each def line: ts_fn_<name>. */
#define TS_SYM(lib, ret, sym, base, params, args, body) typedef ret(*ts_fn_##sym) params;
#include "hooks.def"
#undef TS_SYM

/* API ids: TS_API_<symbol>, the index into every per-symbol table. */
enum ts_api_id {
#define TS_SYM(lib, ret, sym, base, params, args, body) TS_API_##sym,
#include "hooks.def"
#undef TS_SYM
    TS_API_COUNT
};

/* Exported hook prototypes (REAL entries are not hooked).  For names the
 * toolkit headers declare, a signature mismatch fails to compile. */
#define TS_PROTO_PASS(ret, sym, params) TS_EXPORT ret sym params;
#define TS_PROTO_OWN(ret, sym, params) TS_EXPORT ret sym params;
#define TS_PROTO_REAL(ret, sym, params)
#define TS_SYM(lib, ret, sym, base, params, args, body) TS_PROTO_##body(ret, sym, params)
#include "hooks.def"
#undef TS_SYM

/* ---- per-API facts (hooks/hook_tables.c) -------------------------------- */
enum ts_lib { TS_LIB_cudart, TS_LIB_cuda, TS_LIB_nccl, TS_LIB_cublas, TS_LIB_cublasLt, TS_LIB_COUNT };
/* Address of our exported hook for api, NULL for REAL entries. */
extern void *const ts_hook_addr[TS_API_COUNT];
/* Id of a hooked (PASS/OWN) symbol by exact name, or -1. */
int ts_hook_by_name(const char *name);
/* True for the _ptds/_ptsz twins, whose stream 0 means the per-thread
 * default stream. */
bool ts_api_per_thread(int api);
/* The stream a call really uses, as the log records it: stream 0 of a
 * per-thread twin is cudaStreamPerThread (0x2). */
static inline uint64_t ts_stream_id(int api, const void *stream)
{
    return stream == NULL && ts_api_per_thread(api) ? (uint64_t)(uintptr_t)cudaStreamPerThread
                                                    : (uint64_t)(uintptr_t)stream;
}

/* The device a stream-ordered allocation from a pool the program chose is
 * logged on: its stream's (the pool's, but for a pool of another device: no
 * call names a pool's device), else the current one. */
static inline int ts_logged_stream_device(int api, const void *stream)
{
    int dev = ts_stream_device(ts_stream_id(api, stream));
    return dev >= 0 ? dev : ts_current_device();
}

/* Outermost-call bracket used by every OWN body:
 *     TS_OUTER_BEGIN(api); r = real_(...); if (outer_) {...events...}; TS_OUTER_END(api, r);
 * Events are emitted inside the bracket so the core's own CUDA calls stay
 * nested. */
#define TS_OUTER_BEGIN(api)                                                                                  \
    bool outer_ = ts_enter();                                                                                \
    ts_count_call(api, outer_)
#define TS_OUTER_END(api, r)                                                                                 \
    do {                                                                                                     \
        if (outer_ && (r) != 0)                                                                              \
            ts_ev_error(api, (int)(r));                                                                      \
        ts_leave();                                                                                          \
    } while (0)

/* ---- allocation events (every family) ----------------------------------- */
/* Pinned host memory is logged with device -1, as are VMM handle releases
 * (a handle does not say its device). */
enum { TS_HOST_DEVICE = -1 };
/* The pointer an allocation call wrote to *out, once it succeeded (0 else). */
#define TS_OUT_PTR(out, r) ((r) == 0 && (out) ? (uint64_t)(uintptr_t) * (out) : 0)
/* The allocation record of an outermost call (ptr only when r is success);
 * the device's record first, the first time it is seen. */
extern uint64_t ts_devices_seen; /* hook_common.c: bit per device ordinal recorded */
void ts_note_device_slow(int dev);
static inline void ts_note_device(int dev)
{
    uint64_t bit = dev >= 0 && dev < 64 ? 1ull << dev : 0;
    if (ts_unlikely(!__atomic_load_n(&ts_numa_done, __ATOMIC_ACQUIRE)
                    || (bit && !(__atomic_load_n(&ts_devices_seen, __ATOMIC_RELAXED) & bit))))
        ts_note_device_slow(dev);
}
static inline void ts_alloc_event(int api, int device, uint64_t ptr, uint64_t size, uint64_t stream, int r)
{
    ts_note_device(device);
    ts_ev_alloc(api, device, r == 0 ? ptr : 0, size, stream, r);
}
/* The free record of an outermost call; cudaFree(NULL) is the usual
 * "initialize the runtime" idiom, not a free. */
static inline void ts_free_event(int api, int device, uint64_t ptr, uint64_t stream, int r)
{
    if (ptr)
        ts_ev_free(api, device, ptr, stream, r);
}

/* ---- shared helpers (hooks/hook_common.c) ------------------------------- */
/* Call counters behind TRAINSHIM_DEBUG_COUNTS (see hook_common.c); off, a
 * hook pays one predictable branch. */
extern bool ts_counts_enabled;
extern uint64_t ts_calls_outer[], ts_calls_nested[];
static inline void ts_count_call(int api, bool outermost)
{
    if (ts_unlikely(ts_counts_enabled))
        __atomic_fetch_add(outermost ? &ts_calls_outer[api] : &ts_calls_nested[api], 1, __ATOMIC_RELAXED);
}
/* Answer of a hook whose real function cannot be found: the library's "not
 * supported" code, one warning per symbol, never a crash. */
int ts_missing(int api);
/* Host-side kind of a pointer for copy events, asked of the real driver
 * (cuPointerGetAttribute) inside the depth guard; nothing is cached because a
 * host range can be registered and unregistered at any time. */
enum ts_ptr_kind { TS_PTR_PAGEABLE, TS_PTR_PINNED, TS_PTR_DEVICE };
enum ts_ptr_kind ts_classify_ptr(const void *p);
int ts_host_kind_of(enum ts_ptr_kind k);
/* Direction of a copy whose kind is "default"/unified, from both pointers. */
int ts_copy_dir_of(enum ts_ptr_kind dst, enum ts_ptr_kind src);
/* The runtime's per-thread last error (cudaGetLastError) for an error the
 * shim returns in place of the real runtime function: set by a real runtime
 * call that fails with the same code and has no other effect, so the state
 * is exactly the real call's.  Codes it cannot produce leave it unchanged. */
void ts_rt_note_error(cudaError_t e);
/* What a runtime allocation does first with no current context: the
 * runtime's lazy initialization of the current device's primary context
 * (cudaFree(NULL)).  True when a context is current afterwards. */
bool ts_rt_init_context(void);
/* cuGetProcAddress / cudaGetDriverEntryPoint results: if p is the real
 * address of one of our hooked driver variants of `symbol`'s base name,
 * returns our hook for it; otherwise p unchanged (hooks/dl.c). */
void *ts_wrap_driver_proc(const char *symbol, void *p);

/* The real function of a hooks.def symbol, typed: TS_REAL(cuEventRecord). */
#define TS_REAL(sym) ((ts_fn_##sym)ts_real(TS_API_##sym))

/* ---- hook body helpers -------------------------------------------------- */
/* Start of every hook: the real function (or the missing answer), and pure
 * passthrough while the shim is inactive.  TS_HOOK_REAL alone: the real
 * function, for hooks that still act while inactive. */
#define TS_HOOK_REAL(ret, base, api)                                                                         \
    ts_fn_##base real_ = (ts_fn_##base)ts_real(api);                                                         \
    if (ts_unlikely(!real_))                                                                                 \
    return (ret)ts_missing(api)
#define TS_HOOK_PROLOGUE(ret, base, api, args)                                                               \
    TS_HOOK_REAL(ret, base, api);                                                                            \
    if (ts_likely(!ts_active()))                                                                             \
    return real_ args

/* Outermost calls hold memory offload's gate (shim/offload/offload.h) so no
 * work is enqueued while a page moves; one load while offload is off. */
#define TS_GATE_ENTER()                                                                                      \
    (ts_unlikely(__atomic_load_n(&ts_offload_gating, __ATOMIC_ACQUIRE)) && ts_tls_depth == 0                 \
     && ts_offload_gate_enter())
#define TS_GATE_LEAVE(held)                                                                                  \
    do {                                                                                                     \
        if (ts_unlikely(held))                                                                               \
            ts_offload_gate_leave(true);                                                                     \
    } while (0)

/* Generated body of a PASS hook: count, call, report an error returned to
 * the program (only the outermost call returns to the program). */
#define TS_GEN_HOOK_PASS(lib, ret, sym, base, params, args)                                                  \
    TS_EXPORT ret sym params                                                                                 \
    {                                                                                                        \
        TS_HOOK_PROLOGUE(ret, base, TS_API_##sym, args);                                                     \
        bool gate_ = TS_GATE_ENTER();                                                                        \
        bool outer_ = ts_enter();                                                                            \
        ts_count_call(TS_API_##sym, outer_);                                                                 \
        ret r_ = real_ args;                                                                                 \
        ts_leave();                                                                                          \
        TS_GATE_LEAVE(gate_);                                                                                \
        if (outer_ && r_ != 0)                                                                               \
            ts_ev_error(TS_API_##sym, (int)r_);                                                              \
        return r_;                                                                                           \
    }
/* Body of a hook that makes the real call and then acts on its result:
 * `after` is a statement that may use r (the result) and outer_ (whether
 * this is the thread's outermost hooked call). */
#define TS_OBSERVE_BODY(ret, base, api, args, after)                                                         \
    TS_HOOK_PROLOGUE(ret, base, api, args);                                                                  \
    TS_OUTER_BEGIN(api);                                                                                     \
    ret r = real_ args;                                                                                      \
    after;                                                                                                   \
    TS_OUTER_END(api, r);                                                                                    \
    return r

/* An allocation hook that only observes: `out` is where the pointer lands,
 * `size` the bytes asked for, `stream` the stream argument or NULL. */
#define TS_ALLOC_BODY(ret, base, api, args, out, size, stream, device_expr)                                  \
    TS_OBSERVE_BODY(ret, base, api, args,                                                                    \
                    if (outer_) ts_alloc_event(api, device_expr, TS_OUT_PTR(out, r), size,                   \
                                               ts_stream_id(api, stream), r))
#define TS_FREE_BODY(ret, base, api, args, ptr, stream, device_expr)                                         \
    TS_OBSERVE_BODY(ret, base, api, args,                                                                    \
                    if (outer_) ts_free_event(api, device_expr, (uint64_t)(uintptr_t)(ptr),                  \
                                              ts_stream_id(api, stream), r))

/* A pitched allocation: pitch * height bytes once the library chose the
 * pitch (width * height if it did not). */
#define TS_PITCH_ALLOC_BODY(ret, base, api, args, out, pitch, width, height)                                 \
    TS_HOOK_PROLOGUE(ret, base, api, args);                                                                  \
    TS_OUTER_BEGIN(api);                                                                                     \
    ret r = real_ args;                                                                                      \
    if (outer_) {                                                                                            \
        uint64_t bytes_ = (uint64_t)(r == 0 && (pitch) ? *(pitch) : (width)) * (height);                     \
        ts_alloc_event(api, ts_current_device(), TS_OUT_PTR(out, r), bytes_, 0, r);                          \
    }                                                                                                        \
    TS_OUTER_END(api, r);                                                                                    \
    return r

/* A driver entry point handed out (cuGetProcAddress, cudaGetDriverEntryPoint):
 * our hook in place of the real function where we hook it. */
#define TS_PROC_ADDRESS_BODY(ret, base, api, args, symbol, pfn)                                              \
    TS_OBSERVE_BODY(ret, base, api, args, if (r == 0 && (pfn)) * (pfn) = ts_wrap_driver_proc(symbol, *(pfn)))

/* OWN hooks forward to the family file's static ts_body_<base>. */
#define TS_GEN_HOOK_OWN(lib, ret, sym, base, params, args)                                                   \
    TS_EXPORT ret sym params                                                                                 \
    {                                                                                                        \
        bool gate_ = TS_GATE_ENTER();                                                                        \
        ret r_ = ts_body_##base(TS_API_##sym, TS_UNPAREN args);                                              \
        TS_GATE_LEAVE(gate_);                                                                                \
        return r_;                                                                                           \
    }
#define TS_GEN_HOOK_REAL(lib, ret, sym, base, params, args)
#define TS_GEN_HOOK(lib, ret, sym, base, params, args, body)                                                 \
    TS_GEN_HOOK_##body(lib, ret, sym, base, params, args)

/* A family file ends with
 *     #define TS_FAMILY_cudart 1          (its library)
 *     #include "hooks_gen.h"
 * which defines the hooks of that library only. */
#endif
