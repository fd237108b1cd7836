/* numa_mem.c: memory policy calls.  libnuma's wrappers (libnuma.so.1,
 * loaded with dlopen so that the shim loads where it is not installed),
 * else the raw system calls.  Only the three policy calls are used: the
 * topology comes from sysfs (numa_topo.c), so that a test can describe one. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "numa/numa_internal.h"

typedef long (*mbind_fn)(void *, unsigned long, int, const unsigned long *, unsigned long, unsigned);
typedef long (*set_policy_fn)(int, const unsigned long *, unsigned long);
typedef long (*get_policy_fn)(int *, unsigned long *, unsigned long, void *, unsigned long);

static struct {
    mbind_fn mbind;
    set_policy_fn set_policy;
    get_policy_fn get_policy;
} lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static long sys_mbind(void *addr, unsigned long len, int mode, const unsigned long *mask,
                      unsigned long maxnode, unsigned flags)
{
    return syscall(SYS_mbind, addr, len, mode, mask, maxnode, flags);
}
static long sys_set_policy(int mode, const unsigned long *mask, unsigned long maxnode)
{
    return syscall(SYS_set_mempolicy, mode, mask, maxnode);
}
static long sys_get_policy(int *mode, unsigned long *mask, unsigned long maxnode, void *addr,
                           unsigned long flags)
{
    return syscall(SYS_get_mempolicy, mode, mask, maxnode, addr, flags);
}

static void load_lib(void)
{
    lib.mbind = sys_mbind;
    lib.set_policy = sys_set_policy;
    lib.get_policy = sys_get_policy;
    void *h = dlopen("libnuma.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h)
        return;
    mbind_fn mb = (mbind_fn)dlsym(h, "mbind");
    set_policy_fn sp = (set_policy_fn)dlsym(h, "set_mempolicy");
    get_policy_fn gp = (get_policy_fn)dlsym(h, "get_mempolicy");
    if (mb && sp && gp) {
        lib.mbind = mb;
        lib.set_policy = sp;
        lib.get_policy = gp;
    }
}

static void ensure_lib(void) { pthread_once(&lib_once, load_lib); }

/* The kernel takes maxnode as one more than the highest node bit it reads. */
#define MAXNODE (sizeof(((struct ts_numa_place *)0)->saved_mask) * 8)

int ts_numa_get_policy(int *mode, unsigned long *mask)
{
    ensure_lib();
    memset(mask, 0, MAXNODE / 8);
    return lib.get_policy(mode, mask, MAXNODE, NULL, 0) == 0 ? 0 : -1;
}

bool ts_numa_node_has_memory(int node)
{
    unsigned long allowed[MAXNODE / (8 * sizeof(unsigned long))] = { 0 };
    int mode;
    ensure_lib();
    if (node < 0 || (size_t)node >= MAXNODE)
        return false;
    if (lib.get_policy(&mode, allowed, MAXNODE, NULL, TS_MPOL_F_MEMS_ALLOWED) != 0)
        return false;
    return (allowed[node / (8 * sizeof(unsigned long))] >> (node % (8 * sizeof(unsigned long)))) & 1;
}

static void node_mask(int node, unsigned long *mask)
{
    memset(mask, 0, MAXNODE / 8);
    mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
}

void ts_numa_place_begin(struct ts_numa_place *pl)
{
    ts_numa_at_context();
    pl->node = ts_numa_place_node();
    if (pl->node < 0)
        return;
    unsigned long mask[MAXNODE / (8 * sizeof(unsigned long))];
    if (ts_numa_get_policy(&pl->saved_mode, pl->saved_mask) != 0) {
        pl->node = -1;
        return;
    }
    node_mask(pl->node, mask);
    if (lib.set_policy(TS_MPOL_PREFERRED, mask, MAXNODE) != 0)
        pl->node = -1;
}

void ts_numa_place_end(struct ts_numa_place *pl, void *ptr, size_t size)
{
    if (pl->node < 0)
        return;
    int saved = errno;
    bool plain = (pl->saved_mode & 0xff) == 0; /* default: no node mask */
    lib.set_policy(pl->saved_mode, plain ? NULL : pl->saved_mask, plain ? 0 : MAXNODE);
    if (ptr && size) {
        unsigned long mask[MAXNODE / (8 * sizeof(unsigned long))];
        node_mask(pl->node, mask);
        /* a mapping the driver made may refuse a policy: its pages were
         * already placed by the thread's preference above */
        lib.mbind(ptr, size, TS_MPOL_PREFERRED, mask, MAXNODE, 0);
    }
    errno = saved;
}
