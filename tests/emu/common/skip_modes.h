/* The emulator's opt-in skip modes, read once from the environment by each
 * emulated library (every library links common/):
 *   EMU_UNKNOWN_KERNELS=skip  a launch of a kernel with no registered CPU
 *                             function is validated, ordered and counted,
 *                             and does nothing (default "strict": it fails
 *                             as an invalid device function);
 *   EMU_COMPUTE=skip          GEMMs, collectives and memsets are validated,
 *                             ordered and counted, their arithmetic skipped
 *                             (default "full").
 * Results are meaningless in these modes; allocations, copies, GEMM shapes
 * and collectives are the program's real ones. */
#ifndef EMU_SKIP_MODES_H
#define EMU_SKIP_MODES_H
#include <stdbool.h>

bool emu_unknown_kernels_skipped(void);
bool emu_compute_skipped(void);
#endif
