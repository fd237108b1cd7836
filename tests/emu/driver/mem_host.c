/* mem_host.c: the pinned host registry (cuMemHostAlloc, cuMemHostRegister).
 * A sorted array of disjoint ranges under a rwlock: every copy classifies
 * its host side here (binary search, shared lock); inserts are rare. */
#include "mem_space.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct emu_pinned_info *ranges;
static size_t nranges, ranges_cap;

/* Index of the first range whose start is > p (caller holds the lock). */
static size_t upper_bound(uintptr_t p)
{
    size_t lo = 0, hi = nranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ranges[mid].start <= p) lo = mid + 1; else hi = mid;
    }
    return lo;
}

bool emu_pinned_lookup(uintptr_t p, struct emu_pinned_info *out)
{
    bool found = false;
    pthread_rwlock_rdlock(&reg_lock);
    size_t i = upper_bound(p);
    if (i > 0 && p - ranges[i - 1].start < ranges[i - 1].size) {
        *out = ranges[i - 1];
        found = true;
    }
    pthread_rwlock_unlock(&reg_lock);
    return found;
}

/* Adds [start, start+size) unless it overlaps a range already there. */
static CUresult registry_insert(uintptr_t start, size_t size, unsigned flags, bool registered)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_rwlock_wrlock(&reg_lock);
    size_t i = upper_bound(start);
    if ((i > 0 && start - ranges[i - 1].start < ranges[i - 1].size) ||
        (i < nranges && ranges[i].start < start + size)) {
        rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        goto out;
    }
    if (nranges == ranges_cap) {
        size_t cap = ranges_cap ? 2 * ranges_cap : 64;
        struct emu_pinned_info *r = realloc(ranges, cap * sizeof *r);
        if (!r) { rc = CUDA_ERROR_OUT_OF_MEMORY; goto out; }
        ranges = r;
        ranges_cap = cap;
    }
    memmove(&ranges[i + 1], &ranges[i], (nranges - i) * sizeof *ranges);
    ranges[i] = (struct emu_pinned_info){ start, size, flags, registered };
    nranges++;
out:
    pthread_rwlock_unlock(&reg_lock);
    return rc;
}

/* Removes the range starting exactly at start and of the given kind. */
static bool registry_remove(uintptr_t start, bool registered, size_t *size)
{
    bool found = false;
    pthread_rwlock_wrlock(&reg_lock);
    size_t i = upper_bound(start);
    if (i > 0 && ranges[i - 1].start == start && ranges[i - 1].registered == registered) {
        *size = ranges[i - 1].size;
        memmove(&ranges[i - 1], &ranges[i], (nranges - i) * sizeof *ranges);
        nranges--;
        found = true;
    }
    pthread_rwlock_unlock(&reg_lock);
    return found;
}

/* Pinned memory may still be read or written by queued copies: freeing or
 * unregistering it waits for every device, as cudaFreeHost does. */
static CUresult sync_all_devices(void)
{
    for (int d = 0; d < emu_space.devices; d++) {
        CUresult rc = emu_device_sync(d);
        if (rc != CUDA_SUCCESS) return rc;
    }
    return CUDA_SUCCESS;
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned int Flags)
{
    emu_mem_init();
    if (!pp || bytesize == 0 ||
        (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    /* Page-aligned like the real allocator; pages committed when touched. */
    void *p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = registry_insert((uintptr_t)p, bytesize, Flags, false);
    if (rc != CUDA_SUCCESS) {
        munmap(p, bytesize);
        return rc;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    EMU_ENTRY_CTX(cuMemHostAlloc);
    return host_alloc(pp, bytesize, Flags);
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    EMU_ENTRY_CTX(cuMemAllocHost_v2);
    return host_alloc(pp, bytesize, 0);
}

CUresult cuMemFreeHost(void *p)
{
    EMU_ENTRY_CTX(cuMemFreeHost);
    struct emu_pinned_info h;
    if (!p || !emu_pinned_lookup((uintptr_t)p, &h) || h.start != (uintptr_t)p || h.registered)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sync_all_devices();
    if (rc != CUDA_SUCCESS) return rc;
    size_t size;
    if (!registry_remove((uintptr_t)p, false, &size)) return CUDA_ERROR_INVALID_VALUE;
    munmap(p, size);
    return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    EMU_ENTRY_CTX(cuMemHostRegister_v2);
    emu_mem_init();
    const unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                           CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    if (!p || bytesize == 0 || (Flags & ~known)) return CUDA_ERROR_INVALID_VALUE;
    if (Flags & CU_MEMHOSTREGISTER_IOMEMORY) return CUDA_ERROR_NOT_SUPPORTED;
    uintptr_t start = (uintptr_t)p;
    if (emu_classify(p, 0) != EMU_MEM_PAGEABLE && emu_classify(p, 0) != EMU_MEM_PINNED)
        return CUDA_ERROR_INVALID_VALUE;    /* device or managed memory */
    /* The driver pins the pages: an unmapped range cannot be registered. */
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = start & ~(uintptr_t)(page - 1);
    if (madvise((void *)lo, emu_round_up(start + bytesize, (uintptr_t)page) - lo, MADV_NORMAL) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return registry_insert(start, bytesize, Flags, true);
}

CUresult cuMemHostUnregister(void *p)
{
    EMU_ENTRY_CTX(cuMemHostUnregister);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    struct emu_pinned_info h;
    if (!emu_pinned_lookup((uintptr_t)p, &h) || h.start != (uintptr_t)p || !h.registered)
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    CUresult rc = sync_all_devices();
    if (rc != CUDA_SUCCESS) return rc;
    size_t size;
    return registry_remove((uintptr_t)p, true, &size) ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    EMU_ENTRY_CTX(cuMemHostGetDevicePointer_v2);
    struct emu_pinned_info h;
    if (!pdptr || !p || Flags != 0 || !emu_pinned_lookup((uintptr_t)p, &h))
        return CUDA_ERROR_INVALID_VALUE;
    /* Unified addressing: the device sees pinned memory at its host address. */
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    EMU_ENTRY_CTX(cuMemHostGetFlags);
    struct emu_pinned_info h;
    if (!pFlags || !p || !emu_pinned_lookup((uintptr_t)p, &h)) return CUDA_ERROR_INVALID_VALUE;
    *pFlags = h.flags;
    return CUDA_SUCCESS;
}
