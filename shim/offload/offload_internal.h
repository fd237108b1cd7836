/* offload_internal.h: what the files of shim/offload share (not a door:
 * nothing outside shim/offload includes it). */
#ifndef TRAINSHIM_OFFLOAD_INTERNAL_H
#define TRAINSHIM_OFFLOAD_INTERNAL_H
#include <pthread.h>
#include "alloc/alloc.h"
#include "offload/offload.h"

#define TS_OFF_MAX_DEV 16

struct ts_off_dev {
    bool attached;      /* the provider is wrapped (host-backed VMM available) */
    bool stopped;       /* a page move failed: no more moves for this pool */
    bool scratch_stuck; /* the scratch range could not be unmapped: no move can copy */
    int device;
    struct ts_pool *pool;
    CUcontext ctx; /* its primary context, retained once */
    uint64_t gran;
    CUdeviceptr scratch; /* one page of address space, where a move copies through */
    CUmemAllocationProp host_prop;
    void *prov_ctx;
    int (*inner_create)(void *ctx, uint64_t size, uint64_t *handle);
    int (*inner_release)(void *ctx, uint64_t handle);
    int (*inner_map)(void *ctx, uint64_t va, uint64_t size, uint64_t handle);
    int (*inner_unmap)(void *ctx, uint64_t va, uint64_t size);
    int (*set_access)(void *ctx, uint64_t va, uint64_t size);
};

struct ts_off_range {
    uint64_t ptr, size;
    unsigned tag;
    uint64_t key; /* pinned ranges: the registration handle */
};

/* A page pause moved to the host: its handle there and the pause's tag. */
struct ts_off_paused {
    uint64_t handle;
    unsigned tag;
};

struct ts_offload_state {
    ts_offload_driver drv;
    struct ts_off_dev dev[TS_OFF_MAX_DEV];
    bool available, told_unavailable, summary_registered;
    pthread_mutex_t lock; /* the fields below */
    uint64_t *handles;    /* host-backed handles (open addressing, 0 = empty) */
    size_t hcap, hcount;
    uint64_t host_bytes, peak_host_bytes, paused_bytes;
    uint64_t placement_gen; /* changes whenever a page becomes or stops being host-backed */
    struct ts_off_range *tagged, *pinned;
    size_t ntagged, captagged, npinned, cappinned;
    struct ts_off_paused *paused;
    size_t npaused, cappaused;
    /* counters (atomic) */
    uint64_t oom_host_pages, demoted_pages, promoted_pages, pauses, resumes, failed_moves, managed_allocs;
};
extern struct ts_offload_state ts_off;

bool ts_off_host_add(uint64_t h, uint64_t bytes);
bool ts_off_host_has(uint64_t h);
bool ts_off_host_remove(uint64_t h, uint64_t bytes);
int ts_off_host_create(struct ts_off_dev *d, uint64_t size, uint64_t *handle);
struct ts_off_dev *ts_off_dev_of_ctx(void *ctx);
void ts_off_gate_close(void);
void ts_off_gate_open(void);

/* offload_move.c: moves one page (p->lock held through the page walk);
 * TS_PROV_OK, or the failure after the old mapping was put back. */
int ts_off_move_page(struct ts_off_dev *d, ts_page_view *v, bool to_host);
/* Holds the gate, synchronizes, walks every pool's pages with fn, opens
 * the gate.  The first nonzero answer of fn is returned.  Pools whose moves
 * stopped after a failure are walked only when even_stopped (resume: the
 * program asks for its memory back). */
int ts_off_walk_all(int (*fn)(void *arg, struct ts_off_dev *d, ts_page_view *v), void *arg,
                    bool even_stopped);

/* One TS_REC_OFFLOAD record (kind TS_OFFLOAD_*) with the totals so far. */
void ts_off_log(uint32_t kind, unsigned tag, uint64_t bytes, uint64_t ns);
/* The TS_OFFLOAD_SUMMARY record at exit (registered once). */
void ts_off_summary_at_exit(void);
/* A pause or resume finished: bytes moved in ns. */
void ts_off_note_pause(bool pause, unsigned tag, uint64_t bytes, uint64_t ns);

/* offload_pause.c */
bool ts_off_pinned(uint64_t va, uint64_t size);
void ts_off_signal_setup(int dev);
#endif
