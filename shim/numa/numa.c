/* numa.c: TRAINSHIM_NUMA at the first CUDA context: the facts (report), the
 * CPU affinity and the node pinned buffers go to (bind, bind:split), and the
 * TS_REC_NUMA record the report reads. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/cuda_real.h"
#include "log/log.h"
#include "log/logfmt.h"
#include "numa/numa_cuda.h"
#include "numa/numa_internal.h"

int ts_numa_done;
static int claimed;
static int place_node = -1;

int ts_numa_place_node(void) { return __atomic_load_n(&place_node, __ATOMIC_ACQUIRE); }

struct numa_facts {
    int device, node, mem_mode, slot, slots, place;
    uint32_t status;
    char bus_id[TS_PCI_BUS_ID_LEN];
    const char *why; /* no node: the reason */
    cpu_set_t node_cpus, allowed, bound;
    unsigned long mem_mask[16];
};

static void gather(struct numa_facts *f, const char *root)
{
    char id[TS_PCI_BUS_ID_LEN];
    if (sched_getaffinity(0, sizeof f->allowed, &f->allowed) != 0)
        CPU_ZERO(&f->allowed);
    if (ts_numa_get_policy(&f->mem_mode, f->mem_mask) != 0)
        f->mem_mode = -1;
    if (ts_numa_cuda_bus_id(f->device, f->bus_id, sizeof f->bus_id) != 0) {
        f->why = "the driver gives no PCI bus id";
    } else if (ts_numa_sysfs_bus_id(f->bus_id, id, sizeof id) != 0) {
        f->why = "the PCI bus id does not parse";
    } else if (ts_numa_read_device(root, id, &f->node, &f->node_cpus, &f->why) == 0 && f->node < 0) {
        f->why = "sysfs gives the GPU no node (numa_node -1)";
    }
    if (f->why || f->node < 0) {
        f->node = -1;
        f->status |= TS_NUMA_NO_NODE;
    } else if (CPU_COUNT(&f->node_cpus) == 0) {
        f->status |= TS_NUMA_NO_CPUS;
    }
}

static int env_first(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        char *end;
        long x = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && x >= 0 && x < 1 << 20)
            return (int)x;
    }
    return -1;
}

/* bind:split: with several visible GPUs, the ranks sharing the node are
 * the GPUs on it (one rank per GPU) and this GPU's place among them is the
 * slot; with one visible GPU (a launcher that hides the others), the slot
 * is the local rank among the local ranks. */
static void split_slot(struct numa_facts *f)
{
    static const char *const sizes[] = { "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                         "SLURM_NTASKS_PER_NODE", NULL };
    int count = ts_numa_cuda_device_count();
    f->slot = 0;
    f->slots = 1;
    if (count > 1) {
        const char *why;
        char cuda_id[TS_PCI_BUS_ID_LEN], id[TS_PCI_BUS_ID_LEN];
        cpu_set_t cpus;
        int node, n = 0;
        for (int d = 0; d < count; d++) {
            if (ts_numa_cuda_bus_id(d, cuda_id, sizeof cuda_id)
                || ts_numa_sysfs_bus_id(cuda_id, id, sizeof id)
                || ts_numa_read_device(ts_cfg()->sysfs_root, id, &node, &cpus, &why) || node != f->node)
                continue;
            if (d == f->device)
                f->slot = n;
            n++;
        }
        f->slots = n > 0 ? n : 1;
        return;
    }
    int rank = ts_log_env_local_rank(), size = env_first(sizes);
    if (rank >= 0 && size > 1) {
        f->slot = rank % size;
        f->slots = size;
    }
}

/* Narrows every thread's affinity to its intersection with target (a
 * thread whose set does not meet it is left alone).  Threads started while
 * this runs may be missed; the ones started later inherit from theirs. */
static void apply_to_threads(const cpu_set_t *target)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) {
        sched_setaffinity(0, sizeof *target, target);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        cpu_set_t cur, next;
        if (*end || tid <= 0 || sched_getaffinity((pid_t)tid, sizeof cur, &cur) != 0)
            continue;
        CPU_AND(&next, &cur, target);
        if (CPU_COUNT(&next) && !CPU_EQUAL(&next, &cur))
            sched_setaffinity((pid_t)tid, sizeof next, &next);
    }
    closedir(d);
}

static void bind_to_node(struct numa_facts *f, int mode)
{
    char a[TS_NUMA_LIST_LEN], b[TS_NUMA_LIST_LEN];
    if (f->status & TS_NUMA_NO_NODE) {
        ts_warn("TRAINSHIM_NUMA=bind: GPU %d (%s): %s; affinity and buffers left as they are", f->device,
                f->bus_id[0] ? f->bus_id : "no bus id", f->why ? f->why : "no node");
        return;
    }
    if (f->status & TS_NUMA_NO_CPUS) {
        ts_warn("TRAINSHIM_NUMA=bind: node %d of GPU %d lists no CPUs; affinity and buffers left as they are",
                f->node, f->device);
        return;
    }
    cpu_set_t target;
    CPU_AND(&target, &f->node_cpus, &f->allowed);
    if (!CPU_COUNT(&target)) {
        f->status |= TS_NUMA_OUTSIDE;
        ts_numa_format_cpulist(&f->node_cpus, a, sizeof a);
        ts_numa_format_cpulist(&f->allowed, b, sizeof b);
        ts_warn(
            "TRAINSHIM_NUMA=bind: none of node %d's CPUs (%s) is allowed (%s); affinity and buffers left as "
            "they are",
            f->node, a, b);
        return;
    }
    if (mode == TS_NUMA_BIND_SPLIT)
        split_slot(f);
    ts_numa_split(&target, f->slot, f->slots, &f->bound);
    apply_to_threads(&f->bound);
    f->status |= TS_NUMA_BOUND;
    if (ts_numa_node_has_memory(f->node)) {
        f->place = f->node;
        __atomic_store_n(&place_node, f->node, __ATOMIC_RELEASE);
    } else {
        f->status |= TS_NUMA_MEM_UNPLACED;
        ts_warn(
            "TRAINSHIM_NUMA=bind: node %d is not a memory node of this system; pinned buffers left where the "
            "kernel puts them",
            f->node);
    }
}

static void mask_list(const unsigned long *mask, char *buf, size_t n)
{
    cpu_set_t nodes; /* a node list has the same text form as a CPU list */
    CPU_ZERO(&nodes);
    for (int i = 0; i < 16 * 64 && i < CPU_SETSIZE; i++)
        if ((mask[i / 64] >> (i % 64)) & 1)
            CPU_SET(i, &nodes);
    ts_numa_format_cpulist(&nodes, buf, n);
}

static void log_facts(const struct numa_facts *f, int mode)
{
    struct ts_rec_numa *r = (struct ts_rec_numa *)ts_log_reserve(sizeof *r, TS_REC_NUMA);
    if (!r)
        return;
    r->device = f->device;
    r->node = f->node;
    r->mode = (uint32_t)mode;
    r->status = f->status;
    r->mem_mode = f->mem_mode;
    r->place_node = f->place;
    r->slot = f->slot;
    r->slots = f->slots;
    memcpy(r->pci_bus_id, f->bus_id, sizeof r->pci_bus_id);
    r->pci_bus_id[sizeof r->pci_bus_id - 1] = 0;
    ts_numa_format_cpulist(&f->node_cpus, r->node_cpus, sizeof r->node_cpus);
    ts_numa_format_cpulist(&f->allowed, r->allowed_cpus, sizeof r->allowed_cpus);
    r->bound_cpus[0] = 0;
    if (f->status & TS_NUMA_BOUND)
        ts_numa_format_cpulist(&f->bound, r->bound_cpus, sizeof r->bound_cpus);
    r->mem_nodes[0] = 0;
    if (f->mem_mode > 0)
        mask_list(f->mem_mask, r->mem_nodes, sizeof r->mem_nodes);
    ts_log_commit(&r->h);
}

void ts_numa_at_context_slow(void)
{
    const struct ts_config *cfg = ts_cfg();
    int mode = cfg->numa;
    if (mode == TS_NUMA_OFF) {
        __atomic_store_n(&ts_numa_done, 1, __ATOMIC_RELEASE);
        return;
    }
    int dev = ts_current_device();
    if (dev < 0 || __atomic_exchange_n(&claimed, 1, __ATOMIC_ACQ_REL))
        return; /* no context yet, or another thread is taking the facts */
    struct numa_facts f = { .device = dev, .node = -1, .place = -1, .slots = 1 };
    CPU_ZERO(&f.node_cpus);
    CPU_ZERO(&f.bound);
    gather(&f, cfg->sysfs_root);
    if (mode == TS_NUMA_BIND || mode == TS_NUMA_BIND_SPLIT)
        bind_to_node(&f, mode);
    log_facts(&f, mode);
    if (cfg->verbose && (f.status & TS_NUMA_BOUND)) {
        char b[TS_NUMA_LIST_LEN];
        ts_numa_format_cpulist(&f.bound, b, sizeof b);
        ts_info("GPU %d is on NUMA node %d: threads bound to CPUs %s", dev, f.node, b);
    }
    __atomic_store_n(&ts_numa_done, 1, __ATOMIC_RELEASE);
}
