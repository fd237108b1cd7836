/* numa.h: the door of shim/numa/, NUMA placement (TRAINSHIM_NUMA).
 *
 * At the first CUDA context the process has, the core reads the node of the
 * context's GPU (its PCI bus id -> sysfs numa_node, local_cpulist), the CPUs
 * the process is allowed and its memory policy, and logs them (TS_REC_NUMA)
 * for the report.  With bind it narrows the CPU affinity of every thread to
 * the GPU node's CPUs (intersected with what each thread was allowed: a
 * launcher's or cgroup's narrower set is never widened) and places the
 * pinned buffers trainshim allocates (staging ring, host cache) on the node.
 * Anything it cannot read or apply costs one warning and changes nothing.
 *
 * Callers: the hooks call ts_numa_at_context() wherever a context may have
 * become current; the pinned allocations are bracketed by
 * ts_numa_place_begin / ts_numa_place_end. */
#ifndef TRAINSHIM_NUMA_H
#define TRAINSHIM_NUMA_H
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/core.h"

/* TRAINSHIM_NUMA values (the option's enum index). */
enum ts_numa_mode { TS_NUMA_OFF, TS_NUMA_REPORT, TS_NUMA_BIND, TS_NUMA_BIND_SPLIT };

/* Nonzero once the NUMA facts were taken (or there is nothing to take). */
extern int ts_numa_done;
void ts_numa_at_context_slow(void);
/* If the calling thread has a current context and this is the first time:
 * gather, log and (bind) apply.  One load once done. */
static inline void ts_numa_at_context(void)
{
    if (ts_unlikely(!__atomic_load_n(&ts_numa_done, __ATOMIC_ACQUIRE)))
        ts_numa_at_context_slow();
}

/* Around a pinned host allocation made by trainshim:
 *     struct ts_numa_place pl; ts_numa_place_begin(&pl);
 *     r = real_alloc(&p, size, ...);
 *     ts_numa_place_end(&pl, r == OK ? p : NULL, size);
 * With bind, the calling thread prefers the GPU's node while the driver
 * allocates (the driver pins, that is touches, the pages inside the call),
 * and the range gets the same preference (mbind) for pages touched later.
 * Otherwise both do nothing. */
struct ts_numa_place {
    int node; /* -1: nothing to do */
    int saved_mode;
    unsigned long saved_mask[16];
};
void ts_numa_place_begin(struct ts_numa_place *pl);
void ts_numa_place_end(struct ts_numa_place *pl, void *ptr, size_t size);

/* ---- topology helpers (numa_topo.c), exposed for tests ------------------- */
/* "0-3,8,10-11" -> set; 0, or -1 when s is not a cpulist (set untouched). */
int ts_numa_parse_cpulist(const char *s, cpu_set_t *out);
/* set -> "0-3,8"; like snprintf (a list that does not fit is cut at a comma). */
size_t ts_numa_format_cpulist(const cpu_set_t *set, char *buf, size_t n);
/* CUDA's "00000000:3B:00.0" -> sysfs's "0000:3b:00.0"; 0 or -1. */
int ts_numa_sysfs_bus_id(const char *cuda_bus_id, char *out, size_t n);
/* What sysfs (under root, "" meaning /sys) says of a PCI device: its node
 * (-1 none) and local CPUs.  0, or -1 when a file cannot be read or parsed
 * (why: a short reason). */
int ts_numa_read_device(const char *root, const char *sysfs_bus_id, int *node, cpu_set_t *cpus,
                        const char **why);
/* Share slot of slots of cpus (in CPU order, as even as possible; a slot
 * gets one CPU, shared, when there are fewer CPUs than slots). */
void ts_numa_split(const cpu_set_t *cpus, int slot, int slots, cpu_set_t *out);
/* The memory policy as the report names it: "default", "preferred", ... */
const char *ts_numa_policy_name(int mode);
#endif
