/* mem_testutil.h: the memory tests' names for the driver tests' shared
 * helpers (tests/emu/tests/test_drv_mem_*.c); one implementation lives in
 * exec_testutil.h. */
#ifndef EMU_MEM_TESTUTIL_H
#define EMU_MEM_TESTUTIL_H

#include "exec_testutil.h"

#define mt_failures et_failures
#define mt_setup et_setup
#define mt_finish et_finish
#endif
