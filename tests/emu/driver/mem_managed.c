/* mem_managed.c: managed (unified) memory: cuMemAllocManaged, residency per
 * 64 KiB page, cuMemPrefetchAsync_v2 (stream-ordered), cuMemAdvise_v2,
 * cuMemRangeGetAttribute(s), and emu_managed_touch, which counts page
 * migrations (managed.migrations.h2d / .d2h) as copies, memsets and kernels
 * touch pages on the device or the host.  A kernel is a CPU function whose
 * accesses the emulator cannot see: it is taken to access, on its device,
 * every page from each pointer argument into managed memory to the end of
 * that allocation (emu_managed_kernel_arg) - what an element-wise kernel over
 * the buffer does, an overestimate for kernels that touch less.
 *
 * Managed memory lives in its own host range, after the devices' ranges:
 * host code dereferences it directly.  It is not counted as device physical
 * memory (oversubscription is allowed).  Host-side accesses by plain loads and
 * stores cannot be seen, so a page counts as migrated to the device when it
 * was host-resident: touched through the driver on the host, or populated by
 * the CPU (mincore() tells) before its first device touch.  Device-to-host
 * migrations are counted for copies to the host and prefetches to the host. */
#include "mem_space.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MPAGE (64u << 10)

enum residency { RES_NONE = 0, RES_HOST = 1, RES_DEVICE = 2 };
#define LOC_NONE ((int8_t)CU_DEVICE_INVALID)   /* -2 */
#define LOC_CPU ((int8_t)CU_DEVICE_CPU)        /* -1 */

struct managed_alloc {
    uintptr_t start;
    size_t size, npages;
    pthread_mutex_t lock;        /* page state */
    uint8_t *resident;           /* enum residency */
    int8_t *preferred, *last_prefetch;   /* device ordinal, LOC_CPU or LOC_NONE */
    uint8_t *read_mostly;
    uint16_t *accessed_by;       /* bit d: device d; bit 15: CPU */
};

static pthread_rwlock_t managed_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct managed_alloc **allocs;   /* sorted by start */
static size_t nallocs, allocs_cap;

static size_t upper_bound(uintptr_t p)
{
    size_t lo = 0, hi = nallocs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (allocs[mid]->start <= p) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* The allocation holding p (caller holds managed_lock). */
static struct managed_alloc *find(uintptr_t p)
{
    size_t i = upper_bound(p);
    if (i > 0 && p - allocs[i - 1]->start < allocs[i - 1]->size) return allocs[i - 1];
    return NULL;
}

bool emu_managed_lookup(uintptr_t p, struct emu_managed_info *out)
{
    if (!emu_space.base) return false;
    pthread_rwlock_rdlock(&managed_lock);
    struct managed_alloc *m = find(p);
    if (m) *out = (struct emu_managed_info){ m->start, m->size };
    pthread_rwlock_unlock(&managed_lock);
    return m != NULL;
}

static uintptr_t find_gap(size_t size)
{
    uintptr_t lo = emu_space.managed_base, hi = lo + EMU_MANAGED_SPAN, cand = lo;
    for (size_t i = 0; i < nallocs; i++) {
        if (cand + size <= allocs[i]->start) break;
        uintptr_t end = emu_round_up(allocs[i]->start + allocs[i]->size, MPAGE);
        if (end > cand) cand = end;
    }
    return cand + size <= hi ? cand : 0;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    EMU_ENTRY_CTX(cuMemAllocManaged);
    emu_mem_init();
    if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = emu_capture_check_unsafe();
    if (rc != CUDA_SUCCESS) return rc;
    size_t span = emu_round_up(bytesize, MPAGE), npages = span / MPAGE;
    struct managed_alloc *m = calloc(1, sizeof *m + npages * (4 + sizeof(uint16_t)));
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    m->size = bytesize;
    m->npages = npages;
    m->accessed_by = (uint16_t *)(m + 1);
    m->resident = (uint8_t *)(m->accessed_by + npages);
    m->preferred = (int8_t *)(m->resident + npages);
    m->last_prefetch = m->preferred + npages;
    m->read_mostly = (uint8_t *)(m->last_prefetch + npages);
    memset(m->preferred, LOC_NONE, 2 * npages);
    pthread_mutex_init(&m->lock, NULL);
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_rwlock_wrlock(&managed_lock);
    uintptr_t at = find_gap(span);
    if (!at) goto out;
    if (nallocs == allocs_cap) {
        size_t cap = allocs_cap ? 2 * allocs_cap : 64;
        struct managed_alloc **a = realloc(allocs, cap * sizeof *a);
        if (!a) goto out;
        allocs = a;
        allocs_cap = cap;
    }
    if (mmap((void *)at, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
             -1, 0) == MAP_FAILED)
        goto out;
    m->start = at;
    size_t i = upper_bound(at);
    memmove(&allocs[i + 1], &allocs[i], (nallocs - i) * sizeof *allocs);
    allocs[i] = m;
    nallocs++;
    *dptr = (CUdeviceptr)at;
    rc = CUDA_SUCCESS;
out:
    pthread_rwlock_unlock(&managed_lock);
    if (rc != CUDA_SUCCESS) free(m);
    return rc;
}

bool emu_managed_free(uintptr_t p)
{
    struct managed_alloc *m = NULL;
    pthread_rwlock_wrlock(&managed_lock);
    size_t i = upper_bound(p);
    if (i > 0 && allocs[i - 1]->start == p) {
        m = allocs[i - 1];
        memmove(&allocs[i - 1], &allocs[i], (nallocs - i) * sizeof *allocs);
        nallocs--;
        /* Back to an inaccessible reservation. */
        mmap((void *)m->start, m->npages * MPAGE, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    }
    pthread_rwlock_unlock(&managed_lock);
    if (!m) return false;
    pthread_mutex_destroy(&m->lock);
    free(m);
    return true;
}

/* Whether the CPU has populated page `pg` (any of its host pages resident). */
static bool cpu_populated(const struct managed_alloc *m, size_t pg)
{
    unsigned char vec[MPAGE / 4096];
    long host_page = sysconf(_SC_PAGESIZE);
    size_t n = MPAGE / (size_t)host_page;
    if (n > sizeof vec) n = sizeof vec;
    if (mincore((void *)(m->start + pg * MPAGE), n * (size_t)host_page, vec) != 0) return true;
    for (size_t i = 0; i < n; i++)
        if (vec[i] & 1) return true;
    return false;
}

/* Moves pages [first, last] to the device or host; counts migrations
 * (caller holds m->lock). */
static void migrate(struct managed_alloc *m, size_t first, size_t last, bool to_device)
{
    uint64_t moved = 0;
    for (size_t pg = first; pg <= last; pg++) {
        uint8_t r = m->resident[pg];
        if (to_device) {
            if (r == RES_DEVICE) continue;
            if (r == RES_HOST || cpu_populated(m, pg)) moved++;
            m->resident[pg] = RES_DEVICE;
        } else {
            if (r == RES_DEVICE) moved++;
            m->resident[pg] = RES_HOST;
        }
    }
    if (moved) emu_counter_add(to_device ? "managed.migrations.h2d" : "managed.migrations.d2h", moved);
}

/* Migrates [p, p+len) of the managed allocation holding p; len SIZE_MAX:
 * to the end of the allocation. */
static void touch(uintptr_t p, size_t len, int to_device)
{
    if (!emu_space.base || p - emu_space.managed_base >= EMU_MANAGED_SPAN) return;
    pthread_rwlock_rdlock(&managed_lock);
    struct managed_alloc *m = find(p);
    if (m) {
        size_t off = p - m->start;
        size_t end = len > m->size - off ? m->size : off + (len ? len : 1);
        pthread_mutex_lock(&m->lock);
        migrate(m, off / MPAGE, (end - 1) / MPAGE, to_device);
        pthread_mutex_unlock(&m->lock);
    }
    pthread_rwlock_unlock(&managed_lock);
}

void emu_managed_touch(uintptr_t p, size_t len, int to_device)
{
    touch(p, len, to_device);
}

void emu_managed_kernel_arg(uintptr_t p)
{
    touch(p, SIZE_MAX, 1);
}

/* ---- prefetch and advice ---- */

/* Location as stored per page: a device ordinal or LOC_CPU. */
static CUresult location_code(CUmemLocation loc, int8_t *code)
{
    switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        if (emu_check_device(loc.id) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
        *code = (int8_t)loc.id;
        return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        *code = LOC_CPU;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Page span of [p, p+count) inside one managed allocation (caller holds
 * managed_lock); NULL if it is not managed memory. */
static struct managed_alloc *range_pages(uintptr_t p, size_t count, size_t *first, size_t *last)
{
    struct managed_alloc *m = count ? find(p) : NULL;
    if (!m || count > m->size - (p - m->start)) return NULL;
    *first = (p - m->start) / MPAGE;
    *last = (p - m->start + count - 1) / MPAGE;
    return m;
}

struct prefetch_op { uintptr_t p; size_t count; int8_t loc; };

static void prefetch_run(void *arg)
{
    struct prefetch_op *op = arg;
    pthread_rwlock_rdlock(&managed_lock);
    size_t first, last;
    struct managed_alloc *m = range_pages(op->p, op->count, &first, &last);
    if (m) {                 /* freed meanwhile: nothing to move */
        pthread_mutex_lock(&m->lock);
        migrate(m, first, last, op->loc != LOC_CPU);
        memset(m->last_prefetch + first, op->loc, last - first + 1);
        pthread_mutex_unlock(&m->lock);
    }
    pthread_rwlock_unlock(&managed_lock);
}

static CUresult prefetch(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags,
                         CUstream hStream)
{
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    int8_t loc;
    CUresult rc = location_code(location, &loc);
    if (rc != CUDA_SUCCESS) return rc;
    size_t first, last;
    pthread_rwlock_rdlock(&managed_lock);
    bool managed = range_pages((uintptr_t)devPtr, count, &first, &last) != NULL;
    pthread_rwlock_unlock(&managed_lock);
    if (!managed) return CUDA_ERROR_INVALID_VALUE;
    struct prefetch_op *op = malloc(sizeof *op);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    *op = (struct prefetch_op){ (uintptr_t)devPtr, count, loc };
    rc = emu_stream_enqueue(hStream, prefetch_run, op, free, "cuMemPrefetchAsync");
    if (rc != CUDA_SUCCESS) free(op);   /* not queued: still ours */
    return rc;
}

CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags,
                               CUstream hStream)
{
    EMU_ENTRY_INIT(cuMemPrefetchAsync_v2);
    return prefetch(devPtr, count, location, flags, hStream);
}

CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                    unsigned int flags, CUstream hStream)
{
    EMU_ENTRY_INIT(cuMemPrefetchAsync_v2_ptsz);
    return prefetch(devPtr, count, location, flags, hStream ? hStream : CU_STREAM_PER_THREAD);
}

static CUresult advise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
    int8_t loc = LOC_NONE;
    bool needs_location = advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION ||
                          advice == CU_MEM_ADVISE_SET_ACCESSED_BY || advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
    if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
        return CUDA_ERROR_INVALID_VALUE;
    if (needs_location) {
        CUresult rc = location_code(location, &loc);
        if (rc != CUDA_SUCCESS) return rc;
    }
    uint16_t bit = loc == LOC_CPU ? (uint16_t)(1u << 15) : loc >= 0 ? (uint16_t)(1u << loc) : 0;
    CUresult rc = CUDA_SUCCESS;
    pthread_rwlock_rdlock(&managed_lock);
    size_t first, last;
    struct managed_alloc *m = range_pages((uintptr_t)devPtr, count, &first, &last);
    if (!m) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        pthread_mutex_lock(&m->lock);
        for (size_t pg = first; pg <= last; pg++) {
            switch (advice) {
            case CU_MEM_ADVISE_SET_READ_MOSTLY: m->read_mostly[pg] = 1; break;
            case CU_MEM_ADVISE_UNSET_READ_MOSTLY: m->read_mostly[pg] = 0; break;
            case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: m->preferred[pg] = loc; break;
            case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: m->preferred[pg] = LOC_NONE; break;
            case CU_MEM_ADVISE_SET_ACCESSED_BY: m->accessed_by[pg] |= bit; break;
            case CU_MEM_ADVISE_UNSET_ACCESSED_BY: m->accessed_by[pg] &= (uint16_t)~bit; break;
            }
        }
        pthread_mutex_unlock(&m->lock);
    }
    pthread_rwlock_unlock(&managed_lock);
    return rc;
}

CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
    EMU_ENTRY_INIT(cuMemAdvise_v2);
    return advise(devPtr, count, advice, location);
}

/* ---- range attributes ---- */

/* The common value of an int8 per-page array over the range, else LOC_NONE. */
static int8_t common_loc(const int8_t *v, size_t first, size_t last)
{
    for (size_t pg = first + 1; pg <= last; pg++)
        if (v[pg] != v[first]) return LOC_NONE;
    return v[first];
}

static CUresult range_attr(void *data, size_t dataSize, CUmem_range_attribute attribute,
                           struct managed_alloc *m, size_t first, size_t last)
{
    if (attribute == CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY) {
        if (dataSize == 0 || dataSize % 4) return CUDA_ERROR_INVALID_VALUE;
        int *out = data;
        size_t n = dataSize / 4, k = 0;
        uint16_t all = 0xffff;
        for (size_t pg = first; pg <= last; pg++) all &= m->accessed_by[pg];
        if ((all & (1u << 15)) && k < n) out[k++] = CU_DEVICE_CPU;
        for (int d = 0; d < EMU_MAX_DEVICES && k < n; d++)
            if (all & (1u << d)) out[k++] = d;
        while (k < n) out[k++] = CU_DEVICE_INVALID;
        return CUDA_SUCCESS;
    }
    if (dataSize != 4) return CUDA_ERROR_INVALID_VALUE;
    int *out = data;
    int8_t loc;
    switch (attribute) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: {
        int all = 1;
        for (size_t pg = first; pg <= last; pg++) all &= m->read_mostly[pg];
        *out = all;
        return CUDA_SUCCESS;
    }
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
        *out = common_loc(m->preferred, first, last);
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
        *out = common_loc(m->last_prefetch, first, last);
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
        loc = common_loc(attribute == CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE ? m->preferred : m->last_prefetch,
                         first, last);
        *out = loc == LOC_NONE ? CU_MEM_LOCATION_TYPE_INVALID
             : loc == LOC_CPU ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
        loc = common_loc(attribute == CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID ? m->preferred : m->last_prefetch,
                         first, last);
        *out = loc >= 0 ? loc : CU_DEVICE_INVALID;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute, CUdeviceptr devPtr,
                                size_t count)
{
    EMU_ENTRY_INIT(cuMemRangeGetAttribute);
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc;
    pthread_rwlock_rdlock(&managed_lock);
    size_t first, last;
    struct managed_alloc *m = range_pages((uintptr_t)devPtr, count, &first, &last);
    if (!m) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        pthread_mutex_lock(&m->lock);
        rc = range_attr(data, dataSize, attribute, m, first, last);
        pthread_mutex_unlock(&m->lock);
    }
    pthread_rwlock_unlock(&managed_lock);
    return rc;
}

CUresult cuMemRangeGetAttributes(void **data, size_t *dataSizes, CUmem_range_attribute *attributes,
                                 size_t numAttributes, CUdeviceptr devPtr, size_t count)
{
    EMU_ENTRY_INIT(cuMemRangeGetAttributes);
    if (!data || !dataSizes || !attributes || numAttributes == 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_rwlock_rdlock(&managed_lock);
    size_t first, last;
    struct managed_alloc *m = range_pages((uintptr_t)devPtr, count, &first, &last);
    if (!m) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        pthread_mutex_lock(&m->lock);
        for (size_t i = 0; i < numAttributes && rc == CUDA_SUCCESS; i++)
            rc = data[i] ? range_attr(data[i], dataSizes[i], attributes[i], m, first, last) : CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_unlock(&m->lock);
    }
    pthread_rwlock_unlock(&managed_lock);
    return rc;
}

/* The pre-CUDA-13 forms, still exported: a device ordinal, CU_DEVICE_CPU for
 * the host.  cuda.h maps their names to the _v2 forms. */
#undef cuMemPrefetchAsync
#undef cuMemAdvise
CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream);
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream);
CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device);
static CUmemLocation device_location(CUdevice dev)
{
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, dev };
    if (dev == CU_DEVICE_CPU) loc.type = CU_MEM_LOCATION_TYPE_HOST;
    return loc;
}

CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    EMU_ENTRY_INIT(cuMemPrefetchAsync);
    return prefetch(devPtr, count, device_location(dstDevice), 0, hStream);
}

CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    EMU_ENTRY_INIT(cuMemPrefetchAsync_ptsz);
    return prefetch(devPtr, count, device_location(dstDevice), 0, hStream ? hStream : CU_STREAM_PER_THREAD);
}

CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
    EMU_ENTRY_INIT(cuMemAdvise);
    return advise(devPtr, count, advice, device_location(device));
}
