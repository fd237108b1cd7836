/* The NUMA topology helpers of shim/numa/numa_topo.c, without CUDA: cpulist
 * text both ways, CUDA's bus id to sysfs's, reading a device's node and
 * CPUs from a sysfs tree (good and bad files), and bind:split's shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "numa/numa.h"

static int failures;
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

static void roundtrip(const char *in, const char *want)
{
    cpu_set_t s;
    char out[256];
    CHECK(ts_numa_parse_cpulist(in, &s) == 0, "'%s' does not parse", in);
    ts_numa_format_cpulist(&s, out, sizeof out);
    CHECK(!strcmp(out, want), "'%s' -> '%s', want '%s'", in, out, want);
}

static void cpulists(void)
{
    roundtrip("0-3,8-11", "0-3,8-11");
    roundtrip("3,1,2,0", "0-3");
    roundtrip("5\n", "5");
    roundtrip("", "");
    roundtrip("0-0,2", "0,2");
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(7, &s);
    const char *bad[] = { "1-x", "3-1", "a", "1,,2", "-1", "1 2", "99999" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(ts_numa_parse_cpulist(bad[i], &s) == -1, "'%s' parsed", bad[i]);
        CHECK(CPU_COUNT(&s) == 1 && CPU_ISSET(7, &s), "'%s' changed the set", bad[i]);
    }
    /* a list that does not fit is cut at a comma; the length is the whole one */
    ts_numa_parse_cpulist("0,2,4,6,8", &s);
    char small[6];
    size_t need = ts_numa_format_cpulist(&s, small, sizeof small);
    CHECK(need == 9 && !strcmp(small, "0,2,4"), "cut: %zu '%s'", need, small);
}

static void bus_ids(void)
{
    char out[32];
    CHECK(ts_numa_sysfs_bus_id("00000000:3B:00.0", out, sizeof out) == 0 && !strcmp(out, "0000:3b:00.0"), "%s",
          out);
    CHECK(ts_numa_sysfs_bus_id("0001:c1:1f.7", out, sizeof out) == 0 && !strcmp(out, "0001:c1:1f.7"), "%s", out);
    CHECK(ts_numa_sysfs_bus_id("3b:00.0", out, sizeof out) == -1, "no domain accepted");
    CHECK(ts_numa_sysfs_bus_id("0000:3b:00.0x", out, sizeof out) == -1, "trailing text accepted");
    CHECK(ts_numa_sysfs_bus_id("0000:3b:20.0", out, sizeof out) == -1, "device 0x20 accepted");
}

static void put(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
}

static void read_device(void)
{
    char root[] = "/tmp/test_numa_topo.XXXXXX", dev[256], cmd[300];
    if (!mkdtemp(root)) {
        CHECK(0, "mkdtemp");
        return;
    }
    snprintf(dev, sizeof dev, "%s/bus/pci/devices/0000:18:00.0", root);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dev);
    CHECK(system(cmd) == 0, "mkdir");
    int node = 9;
    cpu_set_t cpus;
    const char *why = NULL;
    CHECK(ts_numa_read_device(root, "0000:18:00.0", &node, &cpus, &why) == -1 && why, "no files read");
    put(dev, "numa_node", "1\n");
    put(dev, "local_cpulist", "2-3\n");
    CHECK(ts_numa_read_device(root, "0000:18:00.0", &node, &cpus, &why) == 0 && node == 1 && CPU_COUNT(&cpus) == 2 &&
              CPU_ISSET(2, &cpus),
          "node %d", node);
    put(dev, "numa_node", "-1\n");
    CHECK(ts_numa_read_device(root, "0000:18:00.0", &node, &cpus, &why) == 0 && node == -1, "no node: %d", node);
    put(dev, "numa_node", "one\n");
    CHECK(ts_numa_read_device(root, "0000:18:00.0", &node, &cpus, &why) == -1 && strstr(why, "numa_node"), "word");
    put(dev, "numa_node", "0\n");
    put(dev, "local_cpulist", "2-\n");
    CHECK(ts_numa_read_device(root, "0000:18:00.0", &node, &cpus, &why) == -1 && strstr(why, "local_cpulist"),
          "bad list");
    CHECK(ts_numa_read_device(root, "0000:28:00.0", &node, &cpus, &why) == -1, "absent device");
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0, "cleanup");
}

static void split(const char *cpus, int slot, int slots, const char *want)
{
    cpu_set_t in, out;
    char got[256];
    ts_numa_parse_cpulist(cpus, &in);
    ts_numa_split(&in, slot, slots, &out);
    ts_numa_format_cpulist(&out, got, sizeof got);
    CHECK(!strcmp(got, want), "split %s %d/%d -> %s, want %s", cpus, slot, slots, got, want);
}

static void splits(void)
{
    split("0-7", 0, 2, "0-3");
    split("0-7", 1, 2, "4-7");
    split("0-3,8-11", 1, 2, "8-11");
    split("0-9", 2, 3, "6-9");
    split("0-9", 0, 3, "0-2");
    split("4-5", 2, 3, "5");  /* fewer CPUs than shares: one each, shared */
    split("4-5", 0, 3, "4");
    split("0-3", 0, 1, "0-3");
    split("0-3", 5, 4, "1");  /* a slot past the end wraps */
}

int main(void)
{
    cpulists();
    bus_ids();
    read_device();
    splits();
    CHECK(!strcmp(ts_numa_policy_name(0), "default") && !strcmp(ts_numa_policy_name(1), "preferred"), "names");
    if (failures)
        return 1;
    printf("ok: cpulists, bus ids, sysfs reads, splits\n");
    return 0;
}
