/* cupti.h: GPU activity through CUPTI (shim/observe/cupti.c), TRAINSHIM_CUPTI=1.
 *
 * CUPTI is optional: libcupti is dlopen'ed at the first CUDA call (never
 * linked); when it is absent or refuses, one warning says so and the run
 * continues without a GPU timeline.  Kernel and copy activity records are
 * written to the log as TS_REC_GPU_* records (shim/log/logfmt.h).
 *
 * process.c calls these (weakly, like the log): */
#ifndef TRAINSHIM_CUPTI_H
#define TRAINSHIM_CUPTI_H

/* At the first CUDA call (process.c, READY -> USED): loads CUPTI and
 * subscribes when TRAINSHIM_CUPTI is on; does nothing otherwise.  Once per
 * process; never fails the caller. */
void ts_cupti_start(void);
/* At exit, before the log's final flush: the last records (a forced flush),
 * the dropped count and the final status.  Bounded: never waits more than a
 * few seconds for CUPTI. */
void ts_cupti_stop(void);
/* From a signal handler, before the log's async-signal-safe flush: asks the
 * flusher thread for a forced flush and waits for it a bounded time (only
 * sem_post, atomics and nanosleep here; CUPTI is called on the flusher
 * thread, never in the handler). */
void ts_cupti_flush_signal(void);
#endif
