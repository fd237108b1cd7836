/* mem_space.h: shared internals of the emulated driver's memory files
 * (mem_*.c).  Not part of the driver contract (emu_driver.h).
 *
 * Address layout, reserved once (PROT_NONE, MAP_NORESERVE) at first use:
 *   device d:  [dev_base(d), dev_base(d) + EMU_DEV_SPAN)   (4 TiB, or less
 *              when the address space is short, as under TSan)
 *       [0, EMU_ARENA_SPAN)            cuMemAlloc / pool arena: one memfd per
 *                                      device mapped MAP_SHARED RW once, carved
 *                                      by mem_arena.c (legacy-IPC shareable)
 *       [EMU_ARENA_SPAN, EMU_DEV_SPAN) VMM reservations and legacy-IPC imports
 *   managed:   [managed_base, managed_base + EMU_MANAGED_SPAN), after the
 *              devices; host-accessible, not a device address for
 *              emu_is_device_addr.
 * Host pages are committed only when touched, so capacity (accounted exactly
 * by emu_phys_charge) can exceed the machine's RAM.
 */
#ifndef EMU_MEM_SPACE_H
#define EMU_MEM_SPACE_H

#include "emu_driver.h"

/* Spans are chosen at reservation (4 TiB per device normally, less under
 * TSan): read them only after emu_mem_init. */
#define EMU_DEV_SPAN      ((uintptr_t)emu_space.dev_span)
#define EMU_ARENA_SPAN    (EMU_DEV_SPAN / 4)
#define EMU_MANAGED_SPAN  (EMU_DEV_SPAN / 4)
#define EMU_GRANULARITY   (2ULL << 20)   /* VMM granularity, arena chunk */
#define EMU_ALIGN         256ULL         /* cuMemAlloc alignment */

struct emu_mem_space {
    uintptr_t base;            /* device 0's range; 0 until initialized */
    int devices;
    size_t dev_span;           /* bytes of address space per device */
    uintptr_t managed_base;
};
extern struct emu_mem_space emu_space;

/* Reserves the ranges (idempotent, thread-safe; calls emu_init). */
void emu_mem_init(void);

static inline uintptr_t emu_dev_base(int dev) { return emu_space.base + (uintptr_t)dev * EMU_DEV_SPAN; }
/* The device whose range holds p (no lookup of what is mapped there), or -1. */
static inline int emu_range_device(uintptr_t p)
{
    return emu_is_device_addr(p) ? (int)((p - emu_space.base) / EMU_DEV_SPAN) : -1;
}
static inline uintptr_t emu_round_up(uintptr_t v, uintptr_t a) { return (v + a - 1) / a * a; }

/* Physical memory of a device: fails (returns false) when bytes would exceed
 * emu_cfg.device_memory.  Updates phys.* counters. */
bool emu_phys_charge(int dev, size_t bytes);
void emu_phys_uncharge(int dev, size_t bytes);
size_t emu_phys_used(int dev);
/* Host-located VMM handles: phys.host.current / phys.host.peak (no limit). */
void emu_phys_host_charge(size_t bytes);
void emu_phys_host_uncharge(size_t bytes);

/* ---- mem_arena.c: allocations carved from a device's arena memfd ---- */
enum emu_arena_owner { EMU_OWN_ALLOC = 1, EMU_OWN_POOL = 2 };
/* Allocates size (> 0) bytes, 256-aligned; charges round_up(size, 256)
 * physical bytes. Returns 0 when out of memory. */
uintptr_t emu_arena_alloc(int dev, size_t size, enum emu_arena_owner owner);
/* Frees a live allocation start; returns false if p is not one.  Does not
 * synchronize: callers do. `owner` must match (0 = any). */
bool emu_arena_free(uintptr_t p, enum emu_arena_owner owner);
/* Frees every live allocation of dev (device reset); returns how many. */
size_t emu_arena_reset(int dev);
struct emu_arena_block {
    uintptr_t start;
    size_t size;               /* requested size */
    enum emu_arena_owner owner;
    int dev;
    int fd;                    /* the arena memfd */
    uint64_t fd_offset;        /* offset of start in it */
    uint64_t id;               /* serial, never reused in this process */
};
/* Finds the live allocation holding p; false if none. Lock-free. */
bool emu_arena_lookup(uintptr_t p, struct emu_arena_block *out);

/* ---- mem_vmm.c: VMM mappings (and legacy-IPC imports) ---- */
struct emu_vmm_info {
    uintptr_t start;           /* the mapping */
    size_t size;
    int dev;
    unsigned access;           /* CUmemAccess_flags for its device */
    bool ipc_import;           /* a cuIpcOpenMemHandle mapping */
    uintptr_t alloc_start;     /* for IPC imports: the imported allocation */
    size_t alloc_size;
    unsigned long long handle_types; /* requested handle types of the handle */
    uintptr_t resv_start;      /* the reservation holding the mapping */
    size_t resv_size;
    bool rdma_capable;         /* allocFlags.gpuDirectRDMACapable of the handle */
    bool host_located;         /* the handle lives in host memory (HOST / HOST_NUMA) */
};
bool emu_vmm_lookup(uintptr_t p, struct emu_vmm_info *out);
/* dev's cuMemSetAccess grant covers [p, p+len) where it is mapped (read, or
 * read-write if write); true outside VMM mappings and for IPC imports. */
bool emu_vmm_access_ok(int dev, uintptr_t p, size_t len, bool write);
/* Reserves address space inside dev's VMM area (for IPC imports); 0 if full. */
uintptr_t emu_vmm_reserve_internal(int dev, size_t size);
void emu_vmm_free_internal(uintptr_t p, size_t size);
/* Records an IPC import mapping (already mmapped at start) for lookups. */
void emu_vmm_add_import(int dev, uintptr_t start, size_t size, uintptr_t alloc_start, size_t alloc_size);
bool emu_vmm_remove_import(uintptr_t alloc_start, uintptr_t *map_start, size_t *map_size);

/* ---- mem_host.c: pinned host registry ---- */
struct emu_pinned_info {
    uintptr_t start;
    size_t size;
    unsigned flags;            /* CU_MEMHOSTALLOC_* or CU_MEMHOSTREGISTER_* */
    bool registered;           /* cuMemHostRegister (vs cuMemHostAlloc) */
};
bool emu_pinned_lookup(uintptr_t p, struct emu_pinned_info *out);

/* ---- mem_managed.c ---- */
struct emu_managed_info {
    uintptr_t start;
    size_t size;
};
bool emu_managed_lookup(uintptr_t p, struct emu_managed_info *out);
bool emu_managed_free(uintptr_t p);

/* ---- mem_pool.c ---- */
/* cuMemFree_v2 of stream-ordered memory: returns true if p was a live pool
 * allocation (and frees it), false otherwise. */
bool emu_pool_free_sync(uintptr_t p);
/* Device reset: every block of dev's pools and graph allocations is released,
 * pool statistics restart at 0. */
void emu_pool_reset_device(int dev);
/* The pool handle owning live allocation p, or NULL. */
CUmemoryPool emu_pool_of(uintptr_t p);
/* CUmemAccess_flags of device dev on the pool block starting at start
 * (cuMemPoolSetAccess); read-write for what is not a pool block. */
unsigned emu_pool_access(uintptr_t start, int dev);

#endif
