/* mem_vmm.c: the VMM address side, strictly as cuda.h documents it:
 * cuMemAddressReserve/Free, cuMemMap/Unmap, cuMemSetAccess/GetAccess,
 * cuMemRetainAllocationHandle, and the lookups copies make on mapped memory.
 *
 * Reservations live in the upper part of each device's range (the range is
 * already PROT_NONE).  cuMemMap maps the handle's memfd there MAP_SHARED with
 * PROT_NONE: until cuMemSetAccess grants access, a copy or kernel touching
 * it faults, which the executor's fault guard turns into the sticky
 * CUDA_ERROR_ILLEGAL_ADDRESS, as on a GPU.  cuMemUnmap puts a PROT_NONE
 * anonymous reservation back.
 *
 * Access is per device: cuMemSetAccess records each device's grant per
 * mapping; the host protection is the widest grant (one host page cannot
 * have one protection per device), and the executor asks
 * emu_vmm_access_ok for the device that performs each copy, memset or
 * kernel, so a device never granted access faults even where another may
 * touch the pages.
 *
 * Host-located handles (mem_vmm_handle.c) map like any other; the device
 * reaches them over the host link, which the copies, memsets and kernels
 * that touch them pay for (emu_host_link_charge_*: counters link.host.*,
 * simulated time at EMU_HOST_LINK_GBPS).  cuMemSetAccess with a HOST_NUMA
 * location (id ignored) grants the CPU access, and only to host-located
 * mappings (cuda.h: CUDA_ERROR_INVALID_VALUE for other location types).
 *
 * Choices where the documentation is silent: cuMemAddressFree of a range
 * that still has mappings fails with CUDA_ERROR_INVALID_VALUE; cuMemSetAccess
 * must cover whole mappings (a sub-range of one mapping is
 * CUDA_ERROR_INVALID_VALUE), like cuMemUnmap. */
#include "mem_vmm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct resv {
    uintptr_t start;
    size_t size;
    bool internal;              /* made for an IPC import, not by cuMemAddressReserve */
};

struct mapping {
    uintptr_t start;
    size_t size;
    struct emu_vmm_handle *h;   /* NULL for an IPC import */
    int dev;
    uint8_t access[EMU_MAX_DEVICES];
    uint8_t host_access;        /* CPU grant (HOST_NUMA location) of a host-located mapping */
    uintptr_t alloc_start;      /* IPC import: the allocation inside the mapping */
    size_t alloc_size;
};

static struct resv *resvs;
static size_t nresvs, resvs_cap;
/* Sorted by start, of pointers: inserting or removing moves 8 bytes per
 * mapping (a trace replay holds ~40k of them), lookups binary-search. */
static struct mapping **maps;
static size_t nmaps, maps_cap;
/* Mappings of host-located handles: while 0 the link charges return at
 * once, without the lock (written under the write lock, read atomically). */
static size_t host_maps;

static bool is_host(const struct mapping *m) { return m->h && m->h->host; }

/* ---- sorted arrays (caller holds emu_vmm_lock) ---- */

static size_t resv_upper(uintptr_t p)    /* first reservation starting after p */
{
    size_t lo = 0, hi = nresvs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (resvs[mid].start <= p) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static size_t map_upper(uintptr_t p)     /* first mapping starting after p */
{
    size_t lo = 0, hi = nmaps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (maps[mid]->start <= p) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static struct mapping *map_find(uintptr_t p)
{
    size_t i = map_upper(p);
    if (i > 0 && p - maps[i - 1]->start < maps[i - 1]->size) return maps[i - 1];
    return NULL;
}

static struct resv *resv_find(uintptr_t p)
{
    size_t i = resv_upper(p);
    if (i > 0 && p - resvs[i - 1].start < resvs[i - 1].size) return &resvs[i - 1];
    return NULL;
}

static bool grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap) return true;
    size_t c = *cap ? 2 * *cap : 64;
    void *a = realloc(*arr, c * elem);
    if (!a) return false;
    *arr = a;
    *cap = c;
    return true;
}

static bool resv_insert(uintptr_t start, size_t size, bool internal)
{
    if (!grow((void **)&resvs, &resvs_cap, nresvs, sizeof *resvs)) return false;
    size_t i = resv_upper(start);
    memmove(&resvs[i + 1], &resvs[i], (nresvs - i) * sizeof *resvs);
    resvs[i] = (struct resv){ start, size, internal };
    nresvs++;
    return true;
}

static void resv_remove(struct resv *r)
{
    size_t i = (size_t)(r - resvs);
    memmove(&resvs[i], &resvs[i + 1], (nresvs - i - 1) * sizeof *resvs);
    nresvs--;
}

static struct mapping *map_insert(const struct mapping *m)
{
    if (!grow((void **)&maps, &maps_cap, nmaps, sizeof *maps)) return NULL;
    struct mapping *copy = malloc(sizeof *copy);
    if (!copy) return NULL;
    *copy = *m;
    size_t i = map_upper(m->start);
    memmove(&maps[i + 1], &maps[i], (nmaps - i) * sizeof *maps);
    maps[i] = copy;
    nmaps++;
    return copy;
}

static void map_remove_at(size_t i)
{
    if (is_host(maps[i])) __atomic_store_n(&host_maps, host_maps - 1, __ATOMIC_RELAXED);
    free(maps[i]);
    memmove(&maps[i], &maps[i + 1], (nmaps - i - 1) * sizeof *maps);
    nmaps--;
}

static bool range_has_mapping(uintptr_t p, size_t size)
{
    size_t i = map_upper(p + size - 1);   /* mappings starting at or before the last byte */
    return i > 0 && maps[i - 1]->start + maps[i - 1]->size > p;
}

/* First free, aligned gap of size bytes in dev's VMM area. */
static uintptr_t find_gap(int dev, size_t size, size_t align)
{
    uintptr_t lo = emu_dev_base(dev) + EMU_ARENA_SPAN, hi = emu_dev_base(dev) + EMU_DEV_SPAN;
    uintptr_t cand = emu_round_up(lo, align);
    for (size_t i = resv_upper(lo > 0 ? lo - 1 : 0); i < nresvs && resvs[i].start < hi; i++) {
        if (cand + size <= resvs[i].start) break;
        uintptr_t end = resvs[i].start + resvs[i].size;
        if (end > cand) cand = emu_round_up(end, align);
    }
    return cand + size <= hi && cand + size > cand ? cand : 0;
}

static bool in_vmm_area(uintptr_t p, size_t size)
{
    int dev = emu_range_device(p);
    if (dev < 0) return false;
    uintptr_t lo = emu_dev_base(dev) + EMU_ARENA_SPAN, hi = emu_dev_base(dev) + EMU_DEV_SPAN;
    return p >= lo && size <= hi - p;
}

static bool range_reserved_free(uintptr_t p, size_t size)
{
    size_t i = resv_upper(p + size - 1);
    return !(i > 0 && resvs[i - 1].start + resvs[i - 1].size > p);
}

/* ---- address reservations ---- */

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    EMU_ENTRY_INIT(cuMemAddressReserve);
    emu_mem_init();
    /* cuda.h: size and addr multiples of the host page size (mappings, not
     * reservations, need the granularity); alignment a power of two or 0. */
    size_t host_page = (size_t)sysconf(_SC_PAGESIZE);
    if (!ptr || flags != 0 || size == 0 || size % host_page || (uintptr_t)addr % host_page)
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment & (alignment - 1)) return CUDA_ERROR_INVALID_VALUE;
    if (alignment > EMU_DEV_SPAN / 2) return CUDA_ERROR_OUT_OF_MEMORY;
    size_t align = alignment > EMU_GRANULARITY ? alignment : EMU_GRANULARITY;
    uintptr_t got = 0;
    pthread_rwlock_wrlock(&emu_vmm_lock);
    uintptr_t hint = (uintptr_t)addr;
    if (hint && hint % align == 0 && in_vmm_area(hint, size) && range_reserved_free(hint, size))
        got = hint;                          /* the hint is only a hint */
    int cur = emu_current_device();
    if (!got) got = find_gap(cur, size, align);
    for (int d = 0; !got && d < emu_space.devices; d++) got = find_gap(d, size, align);
    if (got && !resv_insert(got, size, false)) got = 0;
    pthread_rwlock_unlock(&emu_vmm_lock);
    if (!got) return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = (CUdeviceptr)got;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    EMU_ENTRY_INIT(cuMemAddressFree);
    CUresult rc = CUDA_SUCCESS;
    pthread_rwlock_wrlock(&emu_vmm_lock);
    struct resv *r = ptr ? resv_find((uintptr_t)ptr) : NULL;
    if (!r || r->internal || r->start != (uintptr_t)ptr || r->size != size)
        rc = CUDA_ERROR_INVALID_VALUE;       /* exactly a reserved ptr and size */
    else if (range_has_mapping(r->start, r->size))
        rc = CUDA_ERROR_INVALID_VALUE;       /* unmap first */
    else
        resv_remove(r);
    pthread_rwlock_unlock(&emu_vmm_lock);
    return rc;
}

uintptr_t emu_vmm_reserve_internal(int dev, size_t size)
{
    emu_mem_init();
    size = emu_round_up(size, EMU_GRANULARITY);
    pthread_rwlock_wrlock(&emu_vmm_lock);
    uintptr_t got = find_gap(dev, size, EMU_GRANULARITY);
    if (got && !resv_insert(got, size, true)) got = 0;
    pthread_rwlock_unlock(&emu_vmm_lock);
    return got;
}

void emu_vmm_free_internal(uintptr_t p, size_t size)
{
    (void)size;
    pthread_rwlock_wrlock(&emu_vmm_lock);
    struct resv *r = resv_find(p);
    if (r && r->internal && r->start == p) resv_remove(r);
    pthread_rwlock_unlock(&emu_vmm_lock);
}

/* ---- mappings ---- */

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    EMU_ENTRY_INIT(cuMemMap);
    uintptr_t p = (uintptr_t)ptr;
    if (flags != 0 || p == 0 || size == 0 || p % EMU_GRANULARITY || size % EMU_GRANULARITY ||
        offset % EMU_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    if (offset != 0) return CUDA_ERROR_INVALID_VALUE;   /* cuda.h: "currently must be zero" */
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_wrlock(&emu_vmm_lock);
    struct emu_vmm_handle *h = emu_vmm_handle_get(handle);
    struct resv *r = resv_find(p);
    if (!h || h->refs == 0 || offset + size > h->size) goto out;
    if (!r || r->internal || size > r->start + r->size - p) goto out;   /* inside one reservation */
    if (range_has_mapping(p, size)) goto out;                          /* not already mapped */
    void *m = mmap((void *)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd,
                   (off_t)(h->fd_offset + offset));
    if (m == MAP_FAILED) { rc = CUDA_ERROR_OUT_OF_MEMORY; goto out; }
    /* A host-located handle belongs to no device: the reservation's device
     * stands for it in lookups. */
    int owner = h->host ? emu_range_device(p) : h->prop.location.id;
    struct mapping nm = { .start = p, .size = size, .h = h, .dev = owner };
    if (!map_insert(&nm)) {
        mmap((void *)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    h->maps++;
    if (h->host) __atomic_store_n(&host_maps, host_maps + 1, __ATOMIC_RELAXED);
    rc = CUDA_SUCCESS;
out:
    pthread_rwlock_unlock(&emu_vmm_lock);
    return rc;
}

/* Index range [*first, *last] of VMM mappings exactly tiling [p, p+size);
 * false if there is a gap, an overhang, or an IPC import in it. */
static bool whole_mappings(uintptr_t p, size_t size, size_t *first, size_t *last)
{
    size_t i = map_upper(p);
    if (i == 0 || maps[i - 1]->start != p) return false;
    uintptr_t at = p, end = p + size;
    for (size_t j = i - 1; j < nmaps; j++) {
        if (maps[j]->start != at || !maps[j]->h) return false;
        at += maps[j]->size;
        if (at == end) { *first = i - 1; *last = j; return true; }
        if (at > end) return false;
    }
    return false;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    EMU_ENTRY_INIT(cuMemUnmap);
    uintptr_t p = (uintptr_t)ptr;
    if (!p || size == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t first, last;
    CUresult rc = CUDA_SUCCESS;
    pthread_rwlock_wrlock(&emu_vmm_lock);
    if (!whole_mappings(p, size, &first, &last)) {
        rc = CUDA_ERROR_INVALID_VALUE;   /* cannot unmap a sub-range of a mapping */
        goto out;
    }
    /* Back to an inaccessible reservation. */
    mmap((void *)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    for (size_t j = last + 1; j-- > first;) {
        struct emu_vmm_handle *h = maps[j]->h;
        map_remove_at(j);
        h->maps--;
        emu_vmm_handle_maybe_destroy(h);   /* frees physical memory if released */
    }
out:
    pthread_rwlock_unlock(&emu_vmm_lock);
    return rc;
}

static int prot_of(unsigned flags)
{
    return flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
         : flags == CU_MEM_ACCESS_FLAGS_PROT_READ ? PROT_READ : PROT_NONE;
}

/* One CUmemAccessDesc: a device, or the CPU (HOST_NUMA, id ignored). */
static CUresult check_access_desc(const CUmemAccessDesc *d)
{
    if (d->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        if (emu_check_device(d->location.id) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    } else if (d->location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    unsigned f = d->flags;
    if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Records the grants on mappings [first, last] and sets each one's host
 * protection (caller holds the write lock and checked the descriptors). */
static CUresult apply_access(size_t first, size_t last, const CUmemAccessDesc *desc, size_t count)
{
    for (size_t j = first; j <= last; j++)
        for (size_t k = 0; k < count; k++)
            if (desc[k].location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && !is_host(maps[j]))
                return CUDA_ERROR_INVALID_VALUE;   /* CPU access only to host-located memory */
    CUresult rc = CUDA_SUCCESS;
    for (size_t j = first; j <= last; j++) {
        for (size_t k = 0; k < count; k++) {
            if (desc[k].location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA) maps[j]->host_access = (uint8_t)desc[k].flags;
            else maps[j]->access[desc[k].location.id] = (uint8_t)desc[k].flags;
        }
        /* One host mapping serves every device: it gets the widest access any
         * device has (per-device rights: emu_vmm_access_ok). */
        int prot = prot_of(maps[j]->host_access);
        for (int d = 0; d < EMU_MAX_DEVICES; d++) prot |= prot_of(maps[j]->access[d]);
        if (mprotect((void *)maps[j]->start, maps[j]->size, prot) != 0) rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    return rc;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    EMU_ENTRY_INIT(cuMemSetAccess);
    uintptr_t p = (uintptr_t)ptr;
    if (!p || size == 0 || !desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < count; k++) {
        CUresult c = check_access_desc(&desc[k]);
        if (c != CUDA_SUCCESS) return c;
    }
    size_t first, last;
    CUresult rc;
    pthread_rwlock_wrlock(&emu_vmm_lock);
    if (!whole_mappings(p, size, &first, &last))
        rc = CUDA_ERROR_INVALID_VALUE;   /* only over fully mapped ranges */
    else
        rc = apply_access(first, last, desc, count);
    pthread_rwlock_unlock(&emu_vmm_lock);
    return rc;
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    EMU_ENTRY_INIT(cuMemGetAccess);
    if (!flags || !location) return CUDA_ERROR_INVALID_VALUE;
    bool cpu = location->type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
    if (!cpu && location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!cpu && emu_check_device(location->id) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc = CUDA_SUCCESS;
    pthread_rwlock_rdlock(&emu_vmm_lock);
    struct mapping *m = map_find((uintptr_t)ptr);
    if (m && m->h) *flags = cpu ? m->host_access : m->access[location->id]; else rc = CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_unlock(&emu_vmm_lock);
    return rc;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    EMU_ENTRY_INIT(cuMemRetainAllocationHandle);
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_rwlock_wrlock(&emu_vmm_lock);
    struct mapping *m = map_find((uintptr_t)addr);
    if (m && m->h) {
        m->h->refs++;
        *handle = emu_vmm_handle_value(m->h);
    } else {
        rc = CUDA_ERROR_INVALID_VALUE;   /* not a mapped address */
    }
    pthread_rwlock_unlock(&emu_vmm_lock);
    return rc;
}

/* ---- lookups and IPC imports ---- */

bool emu_vmm_lookup(uintptr_t p, struct emu_vmm_info *out)
{
    bool found = false;
    pthread_rwlock_rdlock(&emu_vmm_lock);
    struct mapping *m = map_find(p);
    if (m) {
        *out = (struct emu_vmm_info){
            .start = m->start, .size = m->size, .dev = m->dev, .access = m->access[m->dev],
            .ipc_import = m->h == NULL, .alloc_start = m->alloc_start, .alloc_size = m->alloc_size,
            .handle_types = m->h ? (unsigned long long)m->h->prop.requestedHandleTypes : 0,
            .rdma_capable = m->h && m->h->prop.allocFlags.gpuDirectRDMACapable,
            .host_located = is_host(m),
        };
        struct resv *r = resv_find(p);
        if (r) {
            out->resv_start = r->start;
            out->resv_size = r->size;
        }
        found = true;
    }
    pthread_rwlock_unlock(&emu_vmm_lock);
    return found;
}

/* Per-device access (cuMemSetAccess grants it per CUmemAccessDesc.location.id;
 * the one host mapping carries the widest grant, so the executor asks here
 * for the device that runs the op).  Anything that is not a cuMemMap mapping
 * (arena memory, IPC imports, host memory, gaps) is not this check's
 * business: true. */
bool emu_vmm_access_ok(int dev, uintptr_t p, size_t len, bool write)
{
    int range_dev = emu_range_device(p);
    if (range_dev < 0 || p - emu_dev_base(range_dev) < EMU_ARENA_SPAN || dev < 0 || dev >= EMU_MAX_DEVICES)
        return true;
    bool ok = true;
    uintptr_t end = p + (len ? len : 1);
    pthread_rwlock_rdlock(&emu_vmm_lock);
    size_t i = map_upper(p);
    if (i > 0 && maps[i - 1]->start + maps[i - 1]->size > p) i--;   /* the mapping holding p */
    for (; ok && i < nmaps && maps[i]->start < end; i++) {
        if (!maps[i]->h) continue;                                    /* IPC import */
        unsigned a = maps[i]->access[dev];
        ok = a == CU_MEM_ACCESS_FLAGS_PROT_READWRITE || (!write && a == CU_MEM_ACCESS_FLAGS_PROT_READ);
    }
    pthread_rwlock_unlock(&emu_vmm_lock);
    return ok;
}

void emu_vmm_add_import(int dev, uintptr_t start, size_t size, uintptr_t alloc_start, size_t alloc_size)
{
    struct mapping nm = { .start = start, .size = size, .h = NULL, .dev = dev,
                          .alloc_start = alloc_start, .alloc_size = alloc_size };
    for (int d = 0; d < EMU_MAX_DEVICES; d++) nm.access[d] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    pthread_rwlock_wrlock(&emu_vmm_lock);
    if (!map_insert(&nm)) emu_warn("IPC import at %#lx not recorded: out of host memory", (unsigned long)start);
    pthread_rwlock_unlock(&emu_vmm_lock);
}

bool emu_vmm_remove_import(uintptr_t alloc_start, uintptr_t *map_start, size_t *map_size)
{
    bool found = false;
    pthread_rwlock_wrlock(&emu_vmm_lock);
    struct mapping *m = map_find(alloc_start);
    if (m && !m->h && m->alloc_start == alloc_start) {
        *map_start = m->start;
        *map_size = m->size;
        map_remove_at(map_upper(m->start) - 1);
        found = true;
    }
    pthread_rwlock_unlock(&emu_vmm_lock);
    return found;
}

/* ---- the host-link model ---- */

/* Host-located bytes of [p, end); run: only the contiguous host-located
 * mappings starting with the one holding p.  Caller holds the lock. */
static size_t host_bytes_locked(uintptr_t p, uintptr_t end, bool run)
{
    size_t i = map_upper(p), bytes = 0;
    if (i > 0 && maps[i - 1]->start + maps[i - 1]->size > p) i--;   /* the mapping holding p */
    uintptr_t at = p;
    for (; i < nmaps && maps[i]->start < end; i++) {
        struct mapping *m = maps[i];
        if (run && (m->start > at || !is_host(m))) break;
        if (is_host(m)) {
            uintptr_t lo = m->start > p ? m->start : p;
            uintptr_t hi = m->start + m->size < end ? m->start + m->size : end;
            bytes += hi - lo;
        }
        at = m->start + m->size;
    }
    return bytes;
}

static void link_charge(size_t bytes)
{
    if (!bytes) return;
    emu_counter_add_ref(EMU_COUNTER("link.host.bytes"), bytes);
    emu_counter_add_ref(EMU_COUNTER("link.host.ops"), 1);
    double gbps = emu_cfg.host_link_gbps;
    if (gbps <= 0) return;
    uint64_t ns = (uint64_t)((double)bytes / gbps);   /* bytes / (GB/s) = ns */
    emu_counter_add_ref(EMU_COUNTER("link.host.ns"), ns);
    if (emu_cfg.link_trace_fd >= 0) {
        /* "CLOCK_MONOTONIC-ns link-ns bytes": one write, so lines of
         * several workers never interleave (O_APPEND, under PIPE_BUF) */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        char line[80];
        int n = snprintf(line, sizeof line, "%llu %llu %zu\n",
                         (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec,
                         (unsigned long long)ns, bytes);
        if (write(emu_cfg.link_trace_fd, line, (size_t)n) != n) {}
    }
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    while (nanosleep(&ts, &ts) != 0) {}
}

static size_t host_bytes(uintptr_t p, uintptr_t end, bool run)
{
    if (!__atomic_load_n(&host_maps, __ATOMIC_RELAXED)) return 0;
    pthread_rwlock_rdlock(&emu_vmm_lock);
    size_t bytes = host_bytes_locked(p, end, run);
    pthread_rwlock_unlock(&emu_vmm_lock);
    return bytes;
}

void emu_host_link_charge_range(uintptr_t p, size_t len)
{
    link_charge(host_bytes(p, p + (len ? len : 1), false));
}

void emu_host_link_charge_run(uintptr_t p)
{
    link_charge(host_bytes(p, UINTPTR_MAX, true));
}

uint64_t emuHostLinkCharge(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p;
    if (!emu_is_device_addr(a) || len == 0) return 0;
    size_t bytes = host_bytes(a, a + len, false);
    link_charge(bytes);
    return bytes;
}
