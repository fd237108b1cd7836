/* mem_space.c: the emulated device address space (one PROT_NONE host range
 * per device, reserved once), physical memory accounting, and the lookups
 * every copy and kernel makes: emu_classify, emu_check_device_range. */
#include "mem_space.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

struct emu_mem_space emu_space;

static pthread_once_t space_once = PTHREAD_ONCE_INIT;
/* The phys.* counter cells, resolved once at reservation: charge/uncharge is
 * on the path of every cuMemAlloc/cuMemFree.  phys.current.<dev> and
 * phys.current are the accounting itself (emuResetCounters keeps them). */
static uint64_t *phys_current_ref[EMU_MAX_DEVICES], *phys_peak_ref[EMU_MAX_DEVICES];
static uint64_t *phys_current_all_ref, *phys_peak_all_ref;

/* Reserves span bytes aligned to align (over-reserving and trimming); NULL
 * if the address space has no room (a sanitizer's shadow takes most of it). */
static void *reserve_aligned(size_t span, size_t align)
{
    void *r = mmap(NULL, span + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) return NULL;
    uintptr_t base = emu_round_up((uintptr_t)r, align);
    if (base > (uintptr_t)r) munmap(r, base - (uintptr_t)r);
    uintptr_t end = (uintptr_t)r + span + align;
    if (end > base + span) munmap((void *)(base + span), end - (base + span));
    return (void *)base;
}

static void space_reserve(void)
{
    emu_init();
    int devices = emu_cfg.devices;
    if (devices < 1) devices = 1;
    if (devices > EMU_MAX_DEVICES) devices = EMU_MAX_DEVICES;
    /* 4 TiB per device normally; under TSan (whose shadow occupies most of
     * the address space) or a small RLIMIT_AS, the largest power of two that
     * fits, down to 16 GiB.  Each device span: its arena (1/4, the limit of
     * cuMemAlloc), its VMM area (3/4); managed memory gets one more quarter
     * span.  The base is aligned to the span, so device
     * pointers share no address bits with typical heap pointers. */
    uintptr_t base = 0;
    size_t dev_span = 0;
    for (int shift = 42; shift >= 34 && !base; shift--) {
        dev_span = (size_t)1 << shift;
        size_t span = (size_t)devices * dev_span + dev_span / 4;
        base = (uintptr_t)reserve_aligned(span, dev_span);
    }
    if (!base) {
        fprintf(stderr, "emu: cannot reserve address space for device memory\n");
        abort();
    }
    if (dev_span < (size_t)1 << 42 && dev_span / 4 < emu_cfg.device_memory)
        emu_warn("device address space reduced to %zu GiB per device (arena %zu GiB < EMU_DEVICE_MEMORY)",
                 dev_span >> 30, (dev_span / 4) >> 30);
    phys_current_all_ref = emu_counter_ref("phys.current");
    phys_peak_all_ref = emu_counter_ref("phys.peak");
    for (int d = 0; d < devices; d++) {
        char name[32];
        snprintf(name, sizeof name, "phys.current.%d", d);
        phys_current_ref[d] = emu_counter_ref(name);
        snprintf(name, sizeof name, "phys.peak.%d", d);
        phys_peak_ref[d] = emu_counter_ref(name);
    }
    emu_space.devices = devices;
    emu_space.dev_span = dev_span;
    emu_space.managed_base = base + (uintptr_t)devices * dev_span;
    __atomic_store_n(&emu_space.base, base, __ATOMIC_RELEASE);
}

void emu_mem_init(void)
{
    pthread_once(&space_once, space_reserve);
}

bool emu_is_device_addr(uintptr_t p)
{
    uintptr_t base = __atomic_load_n(&emu_space.base, __ATOMIC_ACQUIRE);
    return base && p >= base && p - base < (uintptr_t)emu_space.devices * EMU_DEV_SPAN;
}

int emu_addr_device(uintptr_t p)
{
    if (!emu_is_device_addr(p)) return -1;
    int dev = (int)((p - emu_space.base) / EMU_DEV_SPAN);
    /* A reservation in one device's area may map another device's memory. */
    struct emu_vmm_info m;
    if ((p - emu_space.base) % EMU_DEV_SPAN >= EMU_ARENA_SPAN && emu_vmm_lookup(p, &m)) return m.dev;
    return dev;
}

int emuIsDevicePointer(const void *p)
{
    return emu_is_device_addr((uintptr_t)p);
}

static bool in_managed_range(uintptr_t p)
{
    uintptr_t base = __atomic_load_n(&emu_space.base, __ATOMIC_ACQUIRE);
    return base && p >= emu_space.managed_base && p - emu_space.managed_base < EMU_MANAGED_SPAN;
}

/* ---- physical accounting ---- */

bool emu_phys_charge(int dev, size_t bytes)
{
    uint64_t cur = __atomic_load_n(phys_current_ref[dev], __ATOMIC_RELAXED);
    do {
        if (bytes > emu_cfg.device_memory || cur > emu_cfg.device_memory - bytes) return false;
    } while (!__atomic_compare_exchange_n(phys_current_ref[dev], &cur, cur + bytes, true,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    uint64_t total = __atomic_add_fetch(phys_current_all_ref, bytes, __ATOMIC_RELAXED);
    emu_counter_max_ref(phys_peak_ref[dev], cur + bytes);
    emu_counter_max_ref(phys_peak_all_ref, total);
    return true;
}

void emu_phys_uncharge(int dev, size_t bytes)
{
    __atomic_sub_fetch(phys_current_ref[dev], bytes, __ATOMIC_RELAXED);
    __atomic_sub_fetch(phys_current_all_ref, bytes, __ATOMIC_RELAXED);
}

void emu_phys_host_charge(size_t bytes)
{
    uint64_t now = __atomic_add_fetch(EMU_COUNTER("phys.host.current"), bytes, __ATOMIC_RELAXED);
    emu_counter_max_ref(EMU_COUNTER("phys.host.peak"), now);
}

void emu_phys_host_uncharge(size_t bytes)
{
    __atomic_sub_fetch(EMU_COUNTER("phys.host.current"), bytes, __ATOMIC_RELAXED);
}

void emu_phys_reset_peaks(void)
{
    __atomic_store_n(EMU_COUNTER("phys.host.peak"), __atomic_load_n(EMU_COUNTER("phys.host.current"), __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    if (!__atomic_load_n(&emu_space.base, __ATOMIC_ACQUIRE)) return;   /* nothing allocated yet */
    __atomic_store_n(phys_peak_all_ref, __atomic_load_n(phys_current_all_ref, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    for (int d = 0; d < emu_space.devices; d++)
        __atomic_store_n(phys_peak_ref[d], __atomic_load_n(phys_current_ref[d], __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
}

size_t emu_phys_used(int dev)
{
    if (!__atomic_load_n(&emu_space.base, __ATOMIC_ACQUIRE)) return 0;
    return __atomic_load_n(phys_current_ref[dev], __ATOMIC_RELAXED);
}

/* ---- classification ---- */

/* Device memory at [p, p+len): one arena allocation, or VMM mappings that are
 * contiguous (a tensor may straddle two handles of an expandable segment). */
static bool device_extent_ok(uintptr_t p, size_t len)
{
    uintptr_t off = (p - emu_space.base) % EMU_DEV_SPAN;
    if (off < EMU_ARENA_SPAN) {
        struct emu_arena_block b;
        return emu_arena_lookup(p, &b) && (len == 0 || p + len <= b.start + b.size);
    }
    struct emu_vmm_info m;
    uintptr_t at = p, end = p + (len ? len : 1);
    while (at < end) {
        if (!emu_vmm_lookup(at, &m)) return false;
        if (m.ipc_import)   /* the mapping is page-rounded around the allocation */
            return at >= m.alloc_start && end <= m.alloc_start + m.alloc_size;
        at = m.start + m.size;
    }
    return true;
}

enum emu_mem_kind emu_classify(const void *ptr, size_t len)
{
    uintptr_t p = (uintptr_t)ptr;
    if (emu_is_device_addr(p))
        return device_extent_ok(p, len) ? EMU_MEM_DEVICE : EMU_MEM_INVALID;
    if (in_managed_range(p)) {
        struct emu_managed_info m;
        if (emu_managed_lookup(p, &m) && (len == 0 || p + len <= m.start + m.size))
            return EMU_MEM_MANAGED;
        return EMU_MEM_INVALID;
    }
    struct emu_pinned_info h;
    if (emu_pinned_lookup(p, &h) && (len == 0 || p + len <= h.start + h.size))
        return EMU_MEM_PINNED;
    return EMU_MEM_PAGEABLE;
}

CUresult emu_check_device_range(uintptr_t p, size_t len)
{
    enum emu_mem_kind k = emu_classify((const void *)p, len);
    return (k == EMU_MEM_DEVICE || k == EMU_MEM_MANAGED) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static bool grants(unsigned access, bool write)
{
    return access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE || (!write && access == CU_MEM_ACCESS_FLAGS_PROT_READ);
}

bool emu_mem_access_ok(int dev, uintptr_t p, size_t len, bool write)
{
    int range_dev = emu_range_device(p);
    if (range_dev < 0) return true;                       /* host or managed memory */
    if (p - emu_dev_base(range_dev) >= EMU_ARENA_SPAN) {  /* VMM: cuMemSetAccess for dev */
        if (!emu_vmm_access_ok(dev, p, len, write)) return false;
        emu_host_link_charge_range(p, len);
        return true;
    }
    /* Arena: another device's pool block follows its pool's
     * cuMemPoolSetAccess; cuMemAlloc memory is copied between devices
     * without peer access.  (A copy's range lies in one block.) */
    struct emu_arena_block b;
    if (range_dev == dev || !emu_arena_lookup(p, &b) || b.owner != EMU_OWN_POOL || b.dev == dev) return true;
    return grants(emu_pool_access(b.start, dev), write);
}

bool emu_kernel_arg_access_ok(int dev, uintptr_t p, bool charge)
{
    int range_dev = emu_range_device(p);
    if (range_dev < 0) return true;
    if (p - emu_dev_base(range_dev) >= EMU_ARENA_SPAN) {
        if (!emu_vmm_access_ok(dev, p, 1, false)) return false;
        if (charge) emu_host_link_charge_run(p);
        return true;
    }
    struct emu_arena_block b;
    if (range_dev == dev || !emu_arena_lookup(p, &b) || b.dev == dev) return true;
    /* cuMemAlloc memory of another device: cuCtxEnablePeerAccess from dev;
     * pool memory: its pool's cuMemPoolSetAccess (peer access does not
     * cover it). */
    if (b.owner == EMU_OWN_POOL) return grants(emu_pool_access(b.start, dev), false);
    return emu_peer_enabled(dev, b.dev);
}

/* Context teardown on a GPU frees the context's device memory: stream-ordered
 * pools first (their blocks are arena allocations), then what cuMemAlloc
 * handed out.  VMM handles, pinned host memory and managed memory survive
 * (the emulator does not tie them to a context). */
void emu_mem_reset_device(int dev)
{
    if (!emu_space.base || dev < 0 || dev >= emu_space.devices) return;
    emu_pool_reset_device(dev);
    emu_arena_reset(dev);
}
