/* report_numa.c: the NUMA facts of one log (TS_REC_NUMA) in the report.
 *
 * "Match" means the process runs where its GPU is: every CPU it may run on
 * (the affinity trainshim set, else the one it started with) is on the GPU's
 * node, and its memory policy puts pages there (a preference or binding for
 * exactly that node, or the default/local policy, which follows the CPUs). */
#include <stdlib.h>
#include <string.h>

#include "numa/numa.h"
#include "report/report_numa.h"

struct numa_view {
    struct ts_rec_numa r;
    cpu_set_t off_cpus; /* CPUs the process may run on that are not on the node */
    bool cpus_ok, mem_ok, mem_known;
};

static int take_record(void *arg, const struct ts_rec_hdr *h, const unsigned char *rec)
{
    struct ts_rec_numa *r = arg;
    if (h->type != TS_REC_NUMA)
        return 0;
    memset(r, 0, sizeof *r);
    memcpy(r, rec, h->len < sizeof *r ? h->len : sizeof *r);
    r->pci_bus_id[sizeof r->pci_bus_id - 1] = 0;
    r->node_cpus[sizeof r->node_cpus - 1] = 0;
    r->allowed_cpus[sizeof r->allowed_cpus - 1] = 0;
    r->bound_cpus[sizeof r->bound_cpus - 1] = 0;
    r->mem_nodes[sizeof r->mem_nodes - 1] = 0;
    return 1; /* the first one: the process's first context */
}

static bool numa_load(const struct tslog *log, struct numa_view *v)
{
    memset(v, 0, sizeof *v);
    if (!log->raw) /* the valid bytes the reader kept */
        return false;
    bool found = tslog_walk_records(log->raw, log->raw_size, take_record, &v->r) == 1;
    if (!found || v->r.node < 0)
        return found;
    cpu_set_t node, run, mem;
    const char *runs = v->r.bound_cpus[0] ? v->r.bound_cpus : v->r.allowed_cpus;
    if (ts_numa_parse_cpulist(v->r.node_cpus, &node) || ts_numa_parse_cpulist(runs, &run))
        return found;
    CPU_XOR(&v->off_cpus, &run, &node);
    CPU_AND(&v->off_cpus, &v->off_cpus, &run);
    v->cpus_ok = CPU_COUNT(&v->off_cpus) == 0;
    int mode = v->r.mem_mode;
    v->mem_known = mode >= 0;
    if (ts_numa_parse_cpulist(v->r.mem_nodes, &mem))
        CPU_ZERO(&mem);
    if (mode == 0 || mode == 4 || (mode == 1 && CPU_COUNT(&mem) == 0))
        v->mem_ok = v->cpus_ok; /* pages go where the touching CPU is */
    else
        v->mem_ok = CPU_COUNT(&mem) == 1 && CPU_ISSET(v->r.node, &mem);
    return found;
}

static const char *mode_name(uint32_t m) { return m == 3 ? "bind:split" : m == 2 ? "bind" : "report"; }

static void text_binding(FILE *f, const struct ts_rec_numa *r)
{
    if (r->status & TS_NUMA_OUTSIDE)
        fprintf(f, "numa bound    no: none of node %d's CPUs is allowed (TRAINSHIM_NUMA=%s)\n", r->node,
                mode_name(r->mode));
    if (!(r->status & TS_NUMA_BOUND))
        return;
    fprintf(f, "numa bound    CPUs %s (TRAINSHIM_NUMA=%s", r->bound_cpus, mode_name(r->mode));
    if (r->slots > 1)
        fprintf(f, ", share %d of %d", r->slot + 1, r->slots);
    if (r->place_node >= 0)
        fprintf(f, "), pinned buffers on node %d\n", r->place_node);
    else
        fprintf(f, "), pinned buffers not placed (node %d is not a memory node there)\n", r->node);
}

void numa_report_text(FILE *f, const struct tslog *log)
{
    struct numa_view v;
    if (!numa_load(log, &v))
        return;
    const struct ts_rec_numa *r = &v.r;
    char cpus[TS_NUMA_LIST_LEN];
    fprintf(f, "numa          GPU %d (%s) ", r->device, r->pci_bus_id[0] ? r->pci_bus_id : "no bus id");
    if (r->node < 0)
        fprintf(f, "on no known node%s\n", r->status & TS_NUMA_NO_NODE ? " (sysfs names none)" : "");
    else
        fprintf(f, "on node %d (CPUs %s)\n", r->node, r->node_cpus[0] ? r->node_cpus : "none");
    fprintf(f, "numa process  CPUs %s, memory policy %s%s%s\n", r->allowed_cpus,
            ts_numa_policy_name(r->mem_mode), r->mem_nodes[0] ? " " : "", r->mem_nodes);
    text_binding(f, r);
    if (r->node < 0 || !v.mem_known) {
        fprintf(f, "numa match    unknown\n");
        return;
    }
    ts_numa_format_cpulist(&v.off_cpus, cpus, sizeof cpus);
    if (v.cpus_ok && v.mem_ok)
        fprintf(f, "numa match    yes\n");
    else if (!v.cpus_ok)
        fprintf(f, "numa match    no: CPUs %s are off node %d\n", cpus, r->node);
    else
        fprintf(f, "numa match    no: memory policy %s %s is off node %d\n", ts_numa_policy_name(r->mem_mode),
                r->mem_nodes, r->node);
}

bool numa_log_advice(const struct tslog *log, char *buf, size_t n)
{
    struct numa_view v;
    buf[0] = 0;
    if (!numa_load(log, &v) || v.r.node < 0 || !v.mem_known || (v.cpus_ok && v.mem_ok))
        return false;
    const struct ts_rec_numa *r = &v.r;
    char cpus[TS_NUMA_LIST_LEN], what[TS_NUMA_LIST_LEN + 64];
    ts_numa_format_cpulist(&v.off_cpus, cpus, sizeof cpus);
    if (!v.cpus_ok)
        snprintf(what, sizeof what, "the process may run on CPUs %.100s off it", cpus);
    else
        snprintf(what, sizeof what, "its memory policy (%s %.40s) is off it",
                 ts_numa_policy_name(r->mem_mode), r->mem_nodes);
    const char *fix = r->status & TS_NUMA_OUTSIDE ? "the launcher excluded the node's CPUs: give the rank"
                                                  : "TRAINSHIM_NUMA=bind binds it, or";
    snprintf(buf, n,
             "GPU %d is on NUMA node %d but %s; %s numactl --cpunodebind=%d --membind=%d, or torchrun "
             "--numa-binding=node",
             r->device, r->node, what, fix, r->node, r->node);
    return true;
}

bool numa_log_figures(const struct tslog *log, struct numa_advice_figures *f)
{
    struct numa_view v;
    memset(f, 0, sizeof *f);
    if (!numa_load(log, &v) || v.r.node < 0 || !v.mem_known || (v.cpus_ok && v.mem_ok))
        return false;
    f->device = v.r.device;
    f->node = v.r.node;
    f->off_node_cpus = CPU_COUNT(&v.off_cpus);
    f->memory_off_node = !v.mem_ok;
    f->launcher_outside = (v.r.status & TS_NUMA_OUTSIDE) != 0;
    return true;
}

void numa_report_json(struct json *j, const struct tslog *log)
{
    struct numa_view v;
    if (!numa_load(log, &v))
        return;
    const struct ts_rec_numa *r = &v.r;
    j_open(j, "numa", '{');
    j_str(j, "mode", mode_name(r->mode));
    j_i64(j, "device", r->device);
    j_str(j, "pci_bus_id", r->pci_bus_id);
    j_rank(j, "node", r->node); /* null: unknown */
    j_str(j, "node_cpus", r->node_cpus);
    j_str(j, "allowed_cpus", r->allowed_cpus);
    j_str(j, "memory_policy", ts_numa_policy_name(r->mem_mode));
    j_str(j, "memory_nodes", r->mem_nodes);
    j_str(j, "bound_cpus", r->status & TS_NUMA_BOUND ? r->bound_cpus : NULL);
    j_rank(j, "pinned_buffers_node", r->place_node);
    j_key(j, "match");
    fputs(r->node < 0 || !v.mem_known ? "null" : v.cpus_ok && v.mem_ok ? "true" : "false", j->f);
    j_close(j, '}');
}

void numa_text_rank(FILE *f, const struct tslog *log)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        return;
    numa_report_text(m, log);
    fclose(m);
    if (len) /* right under the rank's heading, as the sections that follow begin with a newline */
        fprintf(f, "\n%.*s", (int)(len - 1), text);
    free(text);
}
