/* offload_api.c: trainshim's own exported entry points for memory offload
 * (shim/offload), callable from C or from Python through ctypes:
 *
 *   int trainshim_pause(unsigned tag);    move tagged device memory to host
 *   int trainshim_resume(unsigned tag);   and back; tag 0: all of it
 *   unsigned trainshim_tag(unsigned tag); the calling thread's tag for its
 *                                         next allocations; returns the old one
 *
 * pause/resume return 0, or -1 when TRAINSHIM_OFFLOAD=on is not in effect or
 * a page could not move (nothing is lost: it stays where it was).  They are
 * the shim's own work, never accounted as the program's CUDA calls. */
#include "core/core.h"
#include "offload/offload.h"

TS_EXPORT int trainshim_pause(unsigned tag)
{
    ts_enter();
    int rc = ts_offload_pause(tag);
    ts_leave();
    return rc;
}

TS_EXPORT int trainshim_resume(unsigned tag)
{
    ts_enter();
    int rc = ts_offload_resume(tag);
    ts_leave();
    return rc;
}

TS_EXPORT unsigned trainshim_tag(unsigned tag) { return ts_offload_set_tag(tag); }
