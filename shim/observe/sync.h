/* sync.h: host synchronizations (shim/observe/sync.c): what the hooks of
 * cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize and
 * their driver twins record (TS_REC_HOST_SYNC, shim/log/logfmt.h).  The
 * report counts them per step, names their call sites and measures the GPU
 * idle time that follows them. */
#ifndef TRAINSHIM_OBSERVE_SYNC_H
#define TRAINSHIM_OBSERVE_SYNC_H
#include <stdint.h>

#include "core/core.h"
#include "log/logfmt.h"

/* Whether the stream (as copies log it: 0 legacy, 0x2 per-thread) still had
 * work when asked: TS_SYNC_PENDING, TS_SYNC_IDLE, or TS_SYNC_UNKNOWN when
 * the driver could not say.  One cuStreamQuery. */
unsigned ts_sync_stream_pending(uint64_t stream);
/* The same for an event (cuEventQuery). */
unsigned ts_sync_event_pending(const void *event);

/* The record of one outermost synchronization that returned result after
 * blocked_ns, with the call site's stack when stacks are on. */
void ts_sync_record(int api, unsigned kind, unsigned pending, uint64_t handle, uint64_t blocked_ns,
                    int result);
#endif
