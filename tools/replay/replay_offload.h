/* replay_offload.h: `trainshim replay --device-memory SIZE [--offload]`
 * (tools/replay/replay_offload.c).  A provider step between the pool and the
 * replay's provider that gives the device SIZE bytes of pages: past that a
 * page is refused (out of memory, as the device would) or, with offload,
 * counted as backed by the host, as TRAINSHIM_OFFLOAD=on would back it.  The
 * replay then reports the bytes that would have lived on the host. */
#ifndef TRAINSHIM_REPLAY_OFFLOAD_H
#define TRAINSHIM_REPLAY_OFFLOAD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/alloc_provider.h"

typedef struct rp_offload {
    ts_page_provider inner, table;
    uint64_t device_memory; /* bytes of device pages allowed */
    bool offload;           /* past it: host-backed (true) or out of memory */
    uint64_t device_bytes, host_bytes, peak_host_bytes, host_pages;
    uint64_t *host; /* handles counted as host-backed (open addressing, 0 = empty) */
    size_t hcap, hcount;
} rp_offload;

/* The table to give the pool (valid while w lives). */
const ts_page_provider *rp_offload_wrap(rp_offload *w, const ts_page_provider *inner, uint64_t device_memory,
                                        bool offload);
void rp_offload_free(rp_offload *w);
#endif
