/* mem_space.c: the emulated device address space (one PROT_NONE host range
 * per device, reserved once), physical memory accounting, and the lookups
 * every copy and kernel makes: emu_classify, emu_check_device_range. */
#include "mem_space.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

struct emu_mem_space emu_space;

static pthread_once_t space_once = PTHREAD_ONCE_INIT;
static size_t phys_used[EMU_MAX_DEVICES];         /* atomic */
static size_t phys_total;                         /* atomic, all devices */
static char phys_current_name[EMU_MAX_DEVICES][32];
static char phys_peak_name[EMU_MAX_DEVICES][32];

static void space_reserve(void)
{
    emu_init();
    int devices = emu_cfg.devices;
    if (devices < 1) devices = 1;
    if (devices > EMU_MAX_DEVICES) devices = EMU_MAX_DEVICES;
    size_t span = (size_t)devices * EMU_DEV_SPAN + EMU_MANAGED_SPAN;
    /* Over-reserve by one device span to align the base: device pointers then
     * share no address bits with typical heap pointers, and alignments up to
     * EMU_DEV_SPAN asked of cuMemAddressReserve can be honoured. */
    void *r = mmap(NULL, span + EMU_DEV_SPAN, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {
        fprintf(stderr, "emu: cannot reserve %zu bytes of address space for device memory\n", span);
        abort();
    }
    uintptr_t base = emu_round_up((uintptr_t)r, EMU_DEV_SPAN);
    if (base > (uintptr_t)r) munmap(r, base - (uintptr_t)r);
    uintptr_t end = (uintptr_t)r + span + EMU_DEV_SPAN;
    if (end > base + span) munmap((void *)(base + span), end - (base + span));
    for (int d = 0; d < devices; d++) {
        snprintf(phys_current_name[d], sizeof phys_current_name[d], "phys.current.%d", d);
        snprintf(phys_peak_name[d], sizeof phys_peak_name[d], "phys.peak.%d", d);
    }
    emu_space.devices = devices;
    emu_space.managed_base = base + (uintptr_t)devices * EMU_DEV_SPAN;
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
    size_t cur = __atomic_load_n(&phys_used[dev], __ATOMIC_RELAXED);
    do {
        if (bytes > emu_cfg.device_memory || cur > emu_cfg.device_memory - bytes) return false;
    } while (!__atomic_compare_exchange_n(&phys_used[dev], &cur, cur + bytes, true,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    size_t total = __atomic_add_fetch(&phys_total, bytes, __ATOMIC_RELAXED);
    emu_counter_add("phys.current", bytes);
    emu_counter_add(phys_current_name[dev], bytes);
    /* Peaks from this file's exact totals, so they are right again from the
     * next allocation after an emuResetCounters. */
    emu_counter_max(phys_peak_name[dev], cur + bytes);
    emu_counter_max("phys.peak", total);
    return true;
}

void emu_phys_uncharge(int dev, size_t bytes)
{
    __atomic_sub_fetch(&phys_used[dev], bytes, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&phys_total, bytes, __ATOMIC_RELAXED);
    emu_counter_add("phys.current", (uint64_t)0 - bytes);
    emu_counter_add(phys_current_name[dev], (uint64_t)0 - bytes);
}

size_t emu_phys_used(int dev)
{
    return __atomic_load_n(&phys_used[dev], __ATOMIC_RELAXED);
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
