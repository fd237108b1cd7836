/* core.h: the small core API the hooks call.  The core knows nothing of which
 * symbol was called: hooks pass an API id (an index in the hook table,
 * hooks/hooks.def) and the raw facts.  All functions are safe to call from any
 * thread, from inside a hook, and before initialization (they initialize
 * lazily or do nothing). */
#ifndef TRAINSHIM_CORE_H
#define TRAINSHIM_CORE_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TS_EXPORT __attribute__((visibility("default")))
#define TS_HIDDEN __attribute__((visibility("hidden")))
#define ts_likely(x) __builtin_expect(!!(x), 1)
#define ts_unlikely(x) __builtin_expect(!!(x), 0)

/* ---- process life (shim/core/process.c) ------------------------------------- */
/* True when the shim does more than pass through: TRAINSHIM is not 0, the
 * process was initialized, and no internal error forced passthrough.  Cheap:
 * one load after the first call. */
extern _Atomic int ts_process_state; /* process.c; TS_PROCESS_USED: active */
#define TS_PROCESS_USED 3
#define TS_PROCESS_OFF 4
bool ts_active_slow(void);
static inline bool ts_active(void)
{
    int s = atomic_load_explicit(&ts_process_state, memory_order_acquire);
    if (ts_likely(s == TS_PROCESS_USED))
        return true;
    return s != TS_PROCESS_OFF && ts_active_slow();
}
/* Called by the shim itself on an internal problem: prints one
 * "trainshim: error: ..." line and turns every hook into passthrough. */
void ts_fallback_passthrough(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Re-entry: only the outermost call of a thread is accounted.  A hook does
 *     if (ts_enter()) { ...account...; r = real(...); ...; } else r = real(...);
 *     ts_leave();
 * ts_enter() returns true for the outermost call; the core's own CUDA calls
 * run inside ts_enter/ts_leave too, so they are never seen as user calls. */
/* initial-exec: the library is preloaded, so its TLS is in the static block and a
 * hook's depth check is one instruction instead of a __tls_get_addr call. */
extern __thread int ts_tls_depth __attribute__((tls_model("initial-exec")));
static inline bool ts_enter(void) { return ts_tls_depth++ == 0; }
static inline void ts_leave(void) { ts_tls_depth--; }

/* Monotonic nanoseconds (CLOCK_MONOTONIC). */
uint64_t ts_now_ns(void);

/* ---- messages (shim/core/msg.c): one prefix, "trainshim: " ------------------- */
void ts_msg(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define ts_warn(...) ts_msg("warning", __VA_ARGS__)
#define ts_error(...) ts_msg("error", __VA_ARGS__)
#define ts_info(...) ts_msg(NULL, __VA_ARGS__)

/* ---- events (shim/log/events.c over shim/log/log.c) ----------------------------- */
/* The hooks register their symbol names once so the log can name API ids. */
void ts_register_apis(const char *const *names, int count);

enum ts_copy_dir { TS_H2D = 1, TS_D2H = 2, TS_D2D = 3, TS_H2H = 4, TS_PEER = 5, TS_DEFAULT_DIR = 6 };
enum ts_host_kind { TS_HOST_UNKNOWN = 0, TS_HOST_PAGEABLE = 1, TS_HOST_PINNED = 2, TS_HOST_NONE = 3 };

void ts_ev_alloc(int api, int device, uint64_t ptr, uint64_t size, uint64_t stream, int result);
void ts_ev_free(int api, int device, uint64_t ptr, uint64_t stream, int result);
void ts_ev_copy(int api, int dir, uint64_t bytes, int host_kind, uint64_t stream, bool async,
                uint64_t duration_ns, int result);
/* Device properties, once per device when the process first uses it (the log
 * header lists them). */
void ts_ev_device(int device, const char *name, uint64_t total_mem, int cc_major, int cc_minor, int sm_count,
                  const char *pci_bus_id);
/* An error returned to the program by any hooked call. */
void ts_ev_error(int api, int result);
/* Compute and communication accounting (records in shim/log/logfmt.h). */
struct ts_rec_gemm;
struct ts_rec_nccl;
/* The hook fills every body field of *g / *c (not the header); the event
 * copies it into the log. */
void ts_ev_gemm(const struct ts_rec_gemm *g);
void ts_ev_nccl(const struct ts_rec_nccl *c);
void ts_ev_comm(int api, int kind, uint64_t comm_id, uint64_t parent_id, int comm_size, int rank, int color,
                int result);
/* kind: TS_REC_GEMM or TS_REC_NCCL */
void ts_ev_gpu_time(uint64_t sample_id, uint64_t gpu_ns, int kind);
/* Device memory pool (records in shim/log/logfmt.h): the caller fills every
 * body field of *s (not the header). */
struct ts_rec_pool_stats;
void ts_ev_pool_stats(const struct ts_rec_pool_stats *s);
void ts_ev_pool_oom(int device, int mode, uint64_t requested, uint64_t reserved, uint64_t allocated,
                    uint64_t largest_free_block);
/* PyTorch's allocator backend as the shim left it (enum ts_torch_backend_case,
 * the variable's value or NULL). */
void ts_ev_torch_backend(uint32_t backend_case, const char *conf);
/* Memory offload (shim/offload): the caller fills every body field. */
struct ts_rec_offload;
void ts_ev_offload(const struct ts_rec_offload *o);
struct ts_rec_offload_step;
void ts_ev_offload_step(const struct ts_rec_offload_step *o);
#endif
