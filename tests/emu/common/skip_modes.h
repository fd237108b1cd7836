/* The emulator's opt-in skip modes, read once from the environment by each
 * emulated library (every library links common/):
 *   EMU_UNKNOWN_KERNELS=skip  a launch of a kernel with no registered CPU
 *                             function is validated, ordered and counted,
 *                             and does nothing (default "strict": it fails
 *                             as an invalid device function);
 *   EMU_COMPUTE=skip          GEMMs, collectives, memsets and copies between
 *                             device memories are validated, ordered and
 *                             counted, their data not computed or moved
 *                             (default "full").
 * Results are meaningless in these modes; allocations, copies, GEMM shapes
 * and collectives are the program's real ones.  Collectives, copies and
 * memsets of at most EMU_SKIP_SMALL_BYTES per rank still run: they cost
 * nothing, and frameworks steer by such small buffers (DDP gathers every
 * rank's parameter shapes and compares them). */
#ifndef EMU_SKIP_MODES_H
#define EMU_SKIP_MODES_H
#include <stdbool.h>

#define EMU_SKIP_SMALL_BYTES 65536

bool emu_unknown_kernels_skipped(void);
bool emu_compute_skipped(void);
/* EMU_COMPUTE=skip and an operation on more than EMU_SKIP_SMALL_BYTES. */
bool emu_compute_skipped_for(unsigned long long bytes);
#endif
