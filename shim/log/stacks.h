/* stacks.h: native call stacks of device allocations (shim/log/stacks.c),
 * TRAINSHIM_STACKS=DEPTH.  Each distinct stack is logged once as a
 * TS_REC_STACK (raw return addresses; the module map in TS_REC_MODULES,
 * shim/log/modules.c); each allocation then costs one TS_REC_ALLOC_STACK naming
 * the stack's id.  Symbolization happens at report time (tools/read/symbolize.c). */
#ifndef TRAINSHIM_STACKS_H
#define TRAINSHIM_STACKS_H
#include <stdint.h>

#include "core/core.h"

/* -1: not configured yet; 0: off; > 0: frames to record. */
extern int ts_stacks_depth;

uint32_t ts_stack_capture_slow(void);

/* The id of the calling thread's current stack (logging the stack the
 * first time it is seen), or 0 when stacks are off or it cannot be
 * recorded.  Off costs one load and a predicted branch. */
static inline uint32_t ts_stack_capture(void)
{
    if (ts_likely(ts_stacks_depth == 0))
        return 0;
    return ts_stack_capture_slow();
}

/* The TS_REC_ALLOC_STACK of the alloc record (ptr, time_ns) just made. */
void ts_ev_alloc_stack(uint32_t stack_id, uint64_t ptr, uint64_t alloc_time_ns, int device);

/* Tests and benchmarks: set the depth (0: off), overriding TRAINSHIM_STACKS.
 * Returns the depth in effect. */
int ts_stacks_configure(int depth);
/* Distinct stacks logged and captures that could not be stored (table full). */
void ts_stacks_counts(uint64_t *distinct, uint64_t *dropped);
#endif
