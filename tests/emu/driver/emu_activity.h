/* emu_activity.h: the emulator-internal activity hook between the emulated
 * driver's executor and the emulated CUPTI (tests/emu/cupti).  The driver
 * exports emuSetActivityHook (listed in tests/emu/symbols/emu.txt, so it is
 * in the cuGetProcAddress table); libcupti resolves it with
 * cuGetProcAddress("emuSetActivityHook", ...) and installs one callback,
 * which worker threads call after each kernel, copy and memset has run.  Times are
 * CLOCK_MONOTONIC nanoseconds (cuptiGetTimestamp uses the same clock). */
#ifndef EMU_ACTIVITY_H
#define EMU_ACTIVITY_H

#include <stddef.h>
#include <stdint.h>

enum emu_activity_kind { EMU_ACTIVITY_KERNEL = 1, EMU_ACTIVITY_MEMCPY = 2, EMU_ACTIVITY_MEMSET = 3 };

struct emu_activity {
    int kind;                     /* enum emu_activity_kind */
    uint64_t start_ns, end_ns;
    uint32_t stream_id;           /* the stream's serial (cuStreamGetId) */
    uint32_t correlation_id;      /* unique per launch or copy call, from 1 */
    int device;
    /* EMU_ACTIVITY_KERNEL */
    const char *name;             /* device-side (mangled) name; lives as long as the process */
    unsigned grid[3], block[3];
    size_t shared_bytes;
    /* EMU_ACTIVITY_MEMCPY: CUpti_ActivityMemcpyKind and CUpti_ActivityMemoryKind
     * values (PAGEABLE=1 PINNED=2 DEVICE=3 MANAGED=5) */
    int copy_kind, src_kind, dst_kind;
    uint64_t bytes;               /* copies and memsets */
    /* EMU_ACTIVITY_MEMSET: the value (as given: byte, 16 or 32 bits) and the
     * CUpti_ActivityMemoryKind of the target in memory_kind */
    uint32_t value;
    int memory_kind;
};
typedef void (*emu_activity_fn)(const struct emu_activity *rec);

/* Installs fn (NULL removes it); returns the previous hook.  Records of work
 * running while it is swapped may go to either. */
emu_activity_fn emuSetActivityHook(emu_activity_fn fn);

/* Driver-internal (exec_activity.c). */
emu_activity_fn emu_activity_hook(void);          /* one relaxed load */
uint32_t emu_activity_next_correlation(void);

#endif
