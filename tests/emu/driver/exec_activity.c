/* exec_activity.c: the activity hook the emulated CUPTI installs (see
 * emu_activity.h).  Executors call emu_activity_hook() after each kernel
 * and copy: one atomic load when nobody listens. */
#include "emu_activity.h"

static emu_activity_fn activity_hook;
static uint32_t last_correlation;

emu_activity_fn emuSetActivityHook(emu_activity_fn fn)
{
    return __atomic_exchange_n(&activity_hook, fn, __ATOMIC_ACQ_REL);
}

emu_activity_fn emu_activity_hook(void)
{
    return __atomic_load_n(&activity_hook, __ATOMIC_ACQUIRE);
}

uint32_t emu_activity_next_correlation(void)
{
    return __atomic_add_fetch(&last_correlation, 1, __ATOMIC_RELAXED);
}
