/* numa_topo.c: what sysfs says of a GPU's NUMA locality, and the cpulist
 * text form ("0-3,8") the kernel, taskset and numactl use.  Pure functions
 * of their inputs: no CUDA, no global state. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "numa/numa.h"

static const char *skip_space(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

static int parse_cpu(const char **p, long *out)
{
    char *end;
    if (!isdigit((unsigned char)**p))
        return -1;
    errno = 0;
    long v = strtol(*p, &end, 10);
    if (errno || v < 0 || v >= CPU_SETSIZE)
        return -1;
    *p = end;
    *out = v;
    return 0;
}

int ts_numa_parse_cpulist(const char *s, cpu_set_t *out)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    const char *p = skip_space(s);
    while (*p) {
        long a, b;
        if (parse_cpu(&p, &a))
            return -1;
        b = a;
        if (*p == '-') {
            p++;
            if (parse_cpu(&p, &b) || b < a)
                return -1;
        }
        for (long c = a; c <= b; c++)
            CPU_SET((int)c, &set);
        if (*p == ',')
            p++;
        else if (*skip_space(p))
            return -1;
        else
            break;
    }
    *out = set;
    return 0;
}

size_t ts_numa_format_cpulist(const cpu_set_t *set, char *buf, size_t n)
{
    size_t len = 0, kept = 0;
    if (n)
        buf[0] = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
            e++;
        char item[32];
        int k = e > c ? snprintf(item, sizeof item, "%s%d-%d", len ? "," : "", c, e)
                      : snprintf(item, sizeof item, "%s%d", len ? "," : "", c);
        if (kept == len && len + (size_t)k < n) {
            memcpy(buf + len, item, (size_t)k + 1);
            kept = len + (size_t)k;
        }
        len += (size_t)k;
        c = e;
    }
    return len;
}

int ts_numa_sysfs_bus_id(const char *cuda_bus_id, char *out, size_t n)
{
    unsigned domain, bus, dev, fn;
    int end = 0;
    if (!cuda_bus_id || strspn(cuda_bus_id, "0123456789abcdefABCDEF:.") != strlen(cuda_bus_id))
        return -1;
    if (sscanf(cuda_bus_id, "%x:%x:%x.%x%n", &domain, &bus, &dev, &fn, &end) != 4 || cuda_bus_id[end])
        return -1;
    if (domain > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
        return -1;
    int k = snprintf(out, n, "%04x:%02x:%02x.%x", domain, bus, dev, fn);
    return k > 0 && (size_t)k < n ? 0 : -1;
}

/* The first line of root/rel/name, without its newline; 0 or -1. */
static int read_line(const char *root, const char *rel, const char *name, char *buf, size_t n)
{
    char path[1024];
    int k = snprintf(path, sizeof path, "%s/%s/%s", *root ? root : "/sys", rel, name);
    if (k < 0 || (size_t)k >= sizeof path)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, buf, n - 1);
    close(fd);
    if (got < 0)
        return -1;
    buf[got] = 0;
    buf[strcspn(buf, "\n")] = 0;
    return 0;
}

int ts_numa_read_device(const char *root, const char *sysfs_bus_id, int *node, cpu_set_t *cpus,
                        const char **why)
{
    char rel[128], text[4096], *end;
    snprintf(rel, sizeof rel, "bus/pci/devices/%s", sysfs_bus_id);
    if (read_line(root, rel, "numa_node", text, sizeof text)) {
        *why = "numa_node unreadable";
        return -1;
    }
    long v = strtol(text, &end, 10);
    if (end == text || *skip_space(end) || v < -1 || v > 4095) {
        *why = "numa_node is not a node number";
        return -1;
    }
    if (read_line(root, rel, "local_cpulist", text, sizeof text)) {
        *why = "local_cpulist unreadable";
        return -1;
    }
    if (ts_numa_parse_cpulist(text, cpus)) {
        *why = "local_cpulist is not a CPU list";
        return -1;
    }
    *node = (int)v;
    return 0;
}

void ts_numa_split(const cpu_set_t *cpus, int slot, int slots, cpu_set_t *out)
{
    int n = CPU_COUNT(cpus);
    CPU_ZERO(out);
    if (n == 0 || slots <= 1 || slot < 0) {
        *out = *cpus;
        return;
    }
    slot %= slots;
    /* slot k takes the CPUs of index [k*n/slots, (k+1)*n/slots); with fewer
     * CPUs than slots that range can be empty: then CPU k mod n, shared */
    int lo = (int)((long)slot * n / slots), hi = (int)((long)(slot + 1) * n / slots);
    if (hi == lo) {
        lo = slot % n;
        hi = lo + 1;
    }
    for (int c = 0, i = 0; c < CPU_SETSIZE && i < hi; c++) {
        if (!CPU_ISSET(c, cpus))
            continue;
        if (i >= lo)
            CPU_SET(c, out);
        i++;
    }
}

const char *ts_numa_policy_name(int mode)
{
    static const char *const names[] = { "default",    "preferred", "bind",
                                         "interleave", "local",     "preferred-many" };
    if (mode >= 0 && mode < (int)(sizeof names / sizeof names[0]))
        return names[mode];
    return mode < 0 ? "unknown" : "other";
}
