/* mem_vmm_handle.c: physical allocation handles of the VMM API (cuMemCreate,
 * cuMemRelease, cuMemRetainAllocationHandle, properties, export/import as
 * POSIX file descriptors).  Each handle is its own memfd, so an exported fd
 * received by another process maps the very same pages.
 *
 * Host-located handles (location HOST, or HOST_NUMA on node 0, the one host
 * NUMA node emulated: CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID answers 0) follow
 * cuda.h's cuMemCreate rules: HOST ignores the id and takes no requested
 * handle type (CUDA_ERROR_INVALID_VALUE otherwise), HOST_NUMA needs a valid
 * node id and may be exported, HOST_NUMA_CURRENT is CUDA_ERROR_INVALID_VALUE;
 * with EMU_HOST_VMM=0 (the device attribute
 * HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED answers 0) both are
 * CUDA_ERROR_NOT_SUPPORTED.  Their granularity is 2 MiB like device
 * memory's.  They are not device memory: EMU_DEVICE_MEMORY does not limit
 * them and they count in phys.host.* instead of phys.*.
 *
 * Handle values index a table and carry a generation, so a stale or forged
 * value is rejected (CUDA_ERROR_INVALID_VALUE) rather than dereferenced. */
#include "mem_vmm.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

pthread_rwlock_t emu_vmm_lock = PTHREAD_RWLOCK_INITIALIZER;

static struct emu_vmm_handle **table;
static uint32_t table_len, table_cap;
static uint32_t next_gen = 1;
static uint32_t *free_idx;
static uint32_t nfree, free_cap;

/* ---- shared backing of non-exportable handles (caller holds the write
 * lock).  One sparse memfd per device; offsets come from a bump pointer, and
 * released ranges (their pages punched out) are reused for the same size. */
#define BACKING_BYTES (1ull << 46)   /* address of pages in the file, not memory */
struct backing_range { uint64_t off, size; };
static struct backing {
    int fd;                          /* -1 until first use */
    uint64_t next;
    struct backing_range *spare;
    size_t nspare, spare_cap;
} backings[EMU_MAX_DEVICES + 1] = { [0 ... EMU_MAX_DEVICES] = { .fd = -1 } };

/* slot: a device ordinal, or EMU_VMM_HOST_SLOT.  Its memfd, made once. */
static bool backing_open(int slot)
{
    struct backing *b = &backings[slot];
    if (b->fd >= 0) return true;
    char name[32];
    if (slot == EMU_VMM_HOST_SLOT) snprintf(name, sizeof name, "emu-vmm-backing-host");
    else snprintf(name, sizeof name, "emu-vmm-backing-d%d", slot);
    int f = memfd_create(name, MFD_CLOEXEC);
    if (f < 0) return false;
    if (ftruncate(f, (off_t)BACKING_BYTES) != 0) { close(f); return false; }
    b->fd = f;
    return true;
}

static bool backing_take(int slot, uint64_t size, int *fd, uint64_t *off)
{
    struct backing *b = &backings[slot];
    if (!backing_open(slot)) return false;
    /* the most recently released range of this size (all 2 MiB, typically) */
    for (size_t i = b->nspare; i-- > 0;) {
        if (b->spare[i].size != size) continue;
        *off = b->spare[i].off;
        b->spare[i] = b->spare[--b->nspare];
        *fd = b->fd;
        return true;
    }
    if (b->next + size > BACKING_BYTES) return false;
    *off = b->next;
    b->next += size;
    *fd = b->fd;
    return true;
}

static void backing_give(int slot, uint64_t off, uint64_t size)
{
    struct backing *b = &backings[slot];
    /* the pages go back to the system; the range reads as zeros */
    fallocate(b->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)size);
    if (b->nspare == b->spare_cap) {
        size_t cap = b->spare_cap ? 2 * b->spare_cap : 256;
        struct backing_range *r = realloc(b->spare, cap * sizeof *r);
        if (!r) return;   /* the offset range is lost, not the memory */
        b->spare = r;
        b->spare_cap = cap;
    }
    b->spare[b->nspare++] = (struct backing_range){ off, size };
}

/* ---- descriptors of handles with their own memfd (exportable, imported).
 * A real driver makes a descriptor only at export; here each such handle
 * holds one from creation, so a program mapping tens of GiB in exportable
 * 2 MiB handles (trainshim's pool asks for them, for IPC) would take every
 * descriptor the process may open, and then its own files fail to open.
 * An exportable handle is refused (CUDA_ERROR_OUT_OF_MEMORY, as a failed
 * memfd would be) once it would leave fewer than an eighth of the limit
 * (at least 64) to the program; the caller falls back to a non-exportable
 * handle, carved from the device's shared backing. */
static uint32_t own_fds;

static void own_fd_count(int delta) { __atomic_add_fetch(&own_fds, (uint32_t)delta, __ATOMIC_RELAXED); }

static bool own_fd_allowed(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return true;
    uint64_t reserve = rl.rlim_cur / 8 > 64 ? rl.rlim_cur / 8 : 64;
    return (uint64_t)__atomic_load_n(&own_fds, __ATOMIC_RELAXED) + reserve < rl.rlim_cur;
}

struct emu_vmm_handle *emu_vmm_handle_get(CUmemGenericAllocationHandle hv)
{
    uint64_t idx = (hv & 0xffffffffu);
    if (idx == 0 || idx > table_len) return NULL;
    struct emu_vmm_handle *h = table[idx - 1];
    if (!h || h->gen != (uint32_t)(hv >> 32)) return NULL;
    return h;
}

CUmemGenericAllocationHandle emu_vmm_handle_value(const struct emu_vmm_handle *h)
{
    return ((CUmemGenericAllocationHandle)h->gen << 32) | (h->index + 1);
}

/* Registers h in the table (caller holds the write lock). */
static bool handle_register(struct emu_vmm_handle *h)
{
    if (nfree) {
        h->index = free_idx[--nfree];
    } else {
        if (table_len == table_cap) {
            uint32_t cap = table_cap ? 2 * table_cap : 256;
            struct emu_vmm_handle **t = realloc(table, cap * sizeof *t);
            if (!t) return false;
            table = t;
            table_cap = cap;
        }
        h->index = table_len++;
    }
    h->gen = next_gen++;
    if (next_gen == 0) next_gen = 1;
    table[h->index] = h;
    return true;
}

static int slot_of(const struct emu_vmm_handle *h)
{
    return h->host ? EMU_VMM_HOST_SLOT : h->prop.location.id;
}

/* Device-located handles are charged to their device (and may fail there);
 * host-located ones to phys.host.* (never failing: host memory is not the
 * device's to limit). */
static bool charge(const struct emu_vmm_handle *h)
{
    if (!h->host) return emu_phys_charge(h->prop.location.id, h->size);
    emu_phys_host_charge(h->size);
    return true;
}

static void uncharge(const struct emu_vmm_handle *h)
{
    if (h->host) emu_phys_host_uncharge(h->size);
    else emu_phys_uncharge(h->prop.location.id, h->size);
}

void emu_vmm_handle_maybe_destroy(struct emu_vmm_handle *h)
{
    if (h->refs || h->maps) return;
    table[h->index] = NULL;
    if (nfree == free_cap) {
        uint32_t cap = free_cap ? 2 * free_cap : 256;
        uint32_t *f = realloc(free_idx, cap * sizeof *f);
        if (f) { free_idx = f; free_cap = cap; }
    }
    if (nfree < free_cap) free_idx[nfree++] = h->index;
    if (h->shared_fd) {
        backing_give(slot_of(h), h->fd_offset, h->size);
    } else {
        close(h->fd);
        own_fd_count(-1);
    }
    if (h->charged) uncharge(h);
    free(h);
}

/* Validates the properties shared by cuMemCreate and the granularity query. */
static CUresult check_prop(const CUmemAllocationProp *prop)
{
    if (!prop) return CUDA_ERROR_INVALID_VALUE;
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return emu_check_device(prop->location.id);
    case CU_MEM_LOCATION_TYPE_HOST:   /* id ignored; not IPC capable */
        if (!emu_cfg.host_vmm) return CUDA_ERROR_NOT_SUPPORTED;
        return prop->requestedHandleTypes ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        if (!emu_cfg.host_vmm) return CUDA_ERROR_NOT_SUPPORTED;
        return prop->location.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:   /* NONE, HOST_NUMA_CURRENT, anything else */
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static bool host_located(const CUmemAllocationProp *prop)
{
    return prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
           prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    EMU_ENTRY_INIT(cuMemGetAllocationGranularity);
    if (!granularity) return CUDA_ERROR_INVALID_VALUE;
    if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_prop(prop);
    if (rc != CUDA_SUCCESS) return rc;
    *granularity = EMU_GRANULARITY;
    return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    EMU_ENTRY_INIT(cuMemCreate);
    emu_mem_init();
    if (!handle || flags != 0 || size == 0 || size % EMU_GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_prop(prop);
    if (rc != CUDA_SUCCESS) return rc;
    if (prop->requestedHandleTypes & ~(unsigned)(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC))
        return CUDA_ERROR_INVALID_VALUE;     /* Win32 handle types on Linux */
    if (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC)
        return CUDA_ERROR_NOT_PERMITTED;     /* no IMEX channel on this system */
    struct emu_vmm_handle *h = calloc(1, sizeof *h);
    if (!h) return CUDA_ERROR_OUT_OF_MEMORY;
    h->size = size;
    h->prop = *prop;
    h->host = host_located(prop);
    if (!charge(h)) { free(h); return CUDA_ERROR_OUT_OF_MEMORY; }
    h->refs = 1;
    h->charged = true;
    h->fd = -1;
    if (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        /* Its own memfd, exportable; the name carries what an importing
         * process needs to know (d<dev> device-located, h<node> host).  A
         * real driver makes the descriptor only at export, so a process
         * creating exportable handles past its open-file limit gets
         * CUDA_ERROR_OUT_OF_MEMORY here where a GPU would not: the shared
         * backing is opened first, so that non-exportable handles (what a
         * caller falls back to) still work then. */
        pthread_rwlock_wrlock(&emu_vmm_lock);
        backing_open(slot_of(h));
        pthread_rwlock_unlock(&emu_vmm_lock);
        char name[64];
        snprintf(name, sizeof name, "emu-vmm-%c%d-t%u", h->host ? 'h' : 'd', prop->location.id,
                 (unsigned)prop->requestedHandleTypes);
        h->fd = own_fd_allowed() ? memfd_create(name, MFD_CLOEXEC) : -1;
        if (h->fd >= 0 && ftruncate(h->fd, (off_t)size) != 0) { close(h->fd); h->fd = -1; }
        if (h->fd < 0) {
            uncharge(h);
            free(h);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        own_fd_count(1);
    }
    pthread_rwlock_wrlock(&emu_vmm_lock);
    bool ok = true;
    if (h->fd < 0) ok = h->shared_fd = backing_take(slot_of(h), size, &h->fd, &h->fd_offset);
    if (ok && !handle_register(h)) {
        if (h->shared_fd) backing_give(slot_of(h), h->fd_offset, size);
        ok = false;
    }
    if (ok) *handle = emu_vmm_handle_value(h);
    pthread_rwlock_unlock(&emu_vmm_lock);
    if (!ok) {
        if (!h->shared_fd && h->fd >= 0) {
            close(h->fd);
            own_fd_count(-1);
        }
        uncharge(h);
        free(h);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    EMU_ENTRY_INIT(cuMemRelease);
    CUresult rc = CUDA_SUCCESS;
    pthread_rwlock_wrlock(&emu_vmm_lock);
    struct emu_vmm_handle *h = emu_vmm_handle_get(handle);
    if (!h || h->refs == 0) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        h->refs--;
        emu_vmm_handle_maybe_destroy(h);   /* physical memory stays while mapped */
    }
    pthread_rwlock_unlock(&emu_vmm_lock);
    return rc;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
    EMU_ENTRY_INIT(cuMemGetAllocationPropertiesFromHandle);
    if (!prop) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_rwlock_rdlock(&emu_vmm_lock);
    struct emu_vmm_handle *h = emu_vmm_handle_get(handle);
    if (h && h->refs) *prop = h->prop; else rc = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_unlock(&emu_vmm_lock);
    return rc;
}

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType, unsigned long long flags)
{
    EMU_ENTRY_INIT(cuMemExportToShareableHandle);
    if (!shareableHandle || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        return handleType == CU_MEM_HANDLE_TYPE_FABRIC ? CUDA_ERROR_NOT_PERMITTED : CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = CUDA_SUCCESS;
    pthread_rwlock_rdlock(&emu_vmm_lock);
    struct emu_vmm_handle *h = emu_vmm_handle_get(handle);
    if (!h || !h->refs || !(h->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        rc = CUDA_ERROR_INVALID_VALUE;   /* created without that requested handle type */
    } else {
        int fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) rc = CUDA_ERROR_OUT_OF_MEMORY;
        else *(int *)shareableHandle = fd;
    }
    pthread_rwlock_unlock(&emu_vmm_lock);
    return rc;
}

/* Reads "emu-vmm-<d|h><id>-t<types>" back from the memfd's name. */
static bool parse_memfd(int fd, int *id, unsigned *types, bool *host)
{
    char link[64], target[256], where;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return false;
    target[n] = 0;
    if (sscanf(target, "/memfd:emu-vmm-%c%d-t%u", &where, id, types) != 3) return false;
    *host = where == 'h';
    return where == 'd' || where == 'h';
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType)
{
    EMU_ENTRY_INIT(cuMemImportFromShareableHandle);
    emu_mem_init();
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return shHandleType == CU_MEM_HANDLE_TYPE_FABRIC ? CUDA_ERROR_NOT_PERMITTED : CUDA_ERROR_INVALID_VALUE;
    /* As in the CUDA samples: the int fd passed as the pointer value. */
    int in_fd = (int)(intptr_t)osHandle;
    int dev;
    unsigned types;
    bool host;
    struct stat st;
    if (in_fd < 0 || fstat(in_fd, &st) != 0 || !parse_memfd(in_fd, &dev, &types, &host))
        return CUDA_ERROR_INVALID_VALUE;
    if (!host && emu_check_device(dev) != CUDA_SUCCESS) return CUDA_ERROR_NOT_SUPPORTED;
    if (st.st_size <= 0 || st.st_size % EMU_GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
    struct emu_vmm_handle *h = calloc(1, sizeof *h);
    if (!h) return CUDA_ERROR_OUT_OF_MEMORY;
    h->fd = fcntl(in_fd, F_DUPFD_CLOEXEC, 0);   /* the caller keeps (and closes) its fd */
    if (h->fd < 0) { free(h); return CUDA_ERROR_OUT_OF_MEMORY; }
    own_fd_count(1);
    h->size = (size_t)st.st_size;
    h->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    h->prop.requestedHandleTypes = (CUmemAllocationHandleType)types;
    h->prop.location.type = host ? CU_MEM_LOCATION_TYPE_HOST_NUMA : CU_MEM_LOCATION_TYPE_DEVICE;
    h->prop.location.id = dev;
    h->host = host;
    h->refs = 1;
    h->charged = false;   /* the exporter's memory, already counted there */
    pthread_rwlock_wrlock(&emu_vmm_lock);
    bool ok = handle_register(h);
    if (ok) *handle = emu_vmm_handle_value(h);
    pthread_rwlock_unlock(&emu_vmm_lock);
    if (!ok) {
        close(h->fd);
        own_fd_count(-1);
        free(h);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}
