/* modules.h: the loaded-module map for call stacks (shim/log/modules.c).  Stack
 * records hold raw addresses; a TS_REC_MODULES record lists where each
 * module was loaded so the report can symbolize them offline.  A new
 * generation is logged whenever dl_iterate_phdr's adds/subs counters say
 * libraries were loaded or unloaded since the last one. */
#ifndef TRAINSHIM_MODULES_H
#define TRAINSHIM_MODULES_H
#include <stdint.h>

/* The generation that maps every module loaded now, logging a new
 * TS_REC_MODULES record first when the set changed.  Cheap when nothing
 * changed (one dl_iterate_phdr step).  0 when no record could be written. */
uint32_t ts_modules_current(void);

/* [lo, hi) of the module holding addr (its PT_LOAD segments); 0 when none.
 * *is_main: the module is the main executable. */
int ts_modules_range_of(const void *addr, uint64_t *lo, uint64_t *hi, int *is_main);
#endif
