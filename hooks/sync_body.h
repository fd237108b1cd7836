/* sync_body.h: the body shared by the host synchronization hooks
 * (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize and
 * their driver twins, in runtime.c and driver.c).  An outermost call asks
 * whether there is anything to wait for (pending_expr), times the real call
 * and records it (shim/observe/sync.h); nested calls (the runtime's own
 * driver calls) pass through. */
#ifndef TRAINSHIM_SYNC_BODY_H
#define TRAINSHIM_SYNC_BODY_H
#include "hooks.h"
#include "observe/sync.h"

#define TS_SYNC_BODY(ret, base, api, args, kind, handle, pending_expr)                                       \
    TS_SYNC_BODY_THEN(ret, base, api, args, kind, handle, pending_expr, (void)0)
/* `after`: a statement run on the outermost call once the wait is over (offload's step boundaries). */
#define TS_SYNC_BODY_THEN(ret, base, api, args, kind, handle, pending_expr, after)                           \
    TS_HOOK_PROLOGUE(ret, base, api, args);                                                                  \
    TS_OUTER_BEGIN(api);                                                                                     \
    unsigned pending_ = TS_SYNC_UNKNOWN;                                                                     \
    uint64_t t0_ = 0;                                                                                        \
    if (outer_) {                                                                                            \
        pending_ = (pending_expr);                                                                           \
        t0_ = ts_now_ns();                                                                                   \
    }                                                                                                        \
    ret r = real_ args;                                                                                      \
    if (outer_) {                                                                                            \
        ts_sync_record(api, kind, pending_, handle, ts_now_ns() - t0_, (int)r);                              \
        after;                                                                                               \
    }                                                                                                        \
    TS_OUTER_END(api, r);                                                                                    \
    return r
#endif
