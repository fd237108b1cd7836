/* numa_internal.h: shared by the files of shim/numa/ only (others use numa.h). */
#ifndef TRAINSHIM_NUMA_INTERNAL_H
#define TRAINSHIM_NUMA_INTERNAL_H
#include "numa/numa.h"

/* <numaif.h>'s values, without needing its header at build time */
#define TS_MPOL_DEFAULT 0
#define TS_MPOL_PREFERRED 1
#define TS_MPOL_F_MEMS_ALLOWED (1 << 2)

/* The calling thread's memory policy; mask holds 1024 node bits.  0 or -1. */
int ts_numa_get_policy(int *mode, unsigned long *mask);
/* True when the kernel lets this process place memory on node. */
bool ts_numa_node_has_memory(int node);
/* The node pinned buffers go to (bind and a placeable node), else -1. */
int ts_numa_place_node(void);
#endif
