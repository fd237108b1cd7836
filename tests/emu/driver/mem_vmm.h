/* mem_vmm.h: what mem_vmm.c (address reservations, mappings, access) and
 * mem_vmm_handle.c (physical allocation handles) share. */
#ifndef EMU_MEM_VMM_H
#define EMU_MEM_VMM_H

#include "mem_space.h"

/* A physical allocation (cuMemCreate or cuMemImportFromShareableHandle):
 * an exportable one (POSIX fd requested) or an import is one memfd; others
 * are ranges of one sparse memfd per device, so that ~40k handles of a
 * replayed 80 GiB trace need no more file descriptors than RLIMIT_NOFILE
 * allows.  Lives while it has references or mappings. */
struct emu_vmm_handle {
    uint32_t index, gen;        /* its CUmemGenericAllocationHandle: gen << 32 | index + 1 */
    int fd;                     /* its own memfd, or the device's shared backing */
    uint64_t fd_offset;         /* where its pages start in fd */
    bool shared_fd;             /* carved from the backing (not exportable) */
    size_t size;
    CUmemAllocationProp prop;
    unsigned refs;              /* cuMemCreate/Import/RetainAllocationHandle minus cuMemRelease */
    unsigned maps;              /* live cuMemMap mappings */
    bool charged;               /* counted in this process's physical memory (not imports) */
    bool host;                  /* host-located (CU_MEM_LOCATION_TYPE_HOST or HOST_NUMA) */
};

/* The shared backing slot of host-located handles (device slots are 0..7). */
#define EMU_VMM_HOST_SLOT EMU_MAX_DEVICES

/* All VMM state is guarded by this lock: writers are VMM calls, readers are
 * lookups from copies (emu_vmm_lookup). */
extern pthread_rwlock_t emu_vmm_lock;

/* Handle table (mem_vmm_handle.c); caller holds emu_vmm_lock. */
struct emu_vmm_handle *emu_vmm_handle_get(CUmemGenericAllocationHandle h);
CUmemGenericAllocationHandle emu_vmm_handle_value(const struct emu_vmm_handle *h);
/* Frees h if it has neither references nor mappings (caller holds the lock
 * for writing). */
void emu_vmm_handle_maybe_destroy(struct emu_vmm_handle *h);

#endif
