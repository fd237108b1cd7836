/* offload.c: availability, the provider wrap that backs a page with host
 * memory when the device cannot, the set of host-backed handles, the managed
 * fallback, tags, pinned ranges, the gate and the figures. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc/alloc.h"
#include "core/config.h"
#include "core/core.h"
#include "log/logfmt.h"
#include "offload/offload_internal.h"

struct ts_offload_state ts_off = { .lock = PTHREAD_MUTEX_INITIALIZER };

int ts_offload_mode(void)
{
    int m = ts_cfg()->offload;
    if (m == TS_OFFLOAD_ON && !__atomic_load_n(&ts_off.available, __ATOMIC_ACQUIRE))
        return TS_OFFLOAD_OFF;
    return m;
}

/* ---- host-backed handles: an open-addressing set (lock held) ---- */

static bool set_grow(void)
{
    size_t cap = ts_off.hcap ? 2 * ts_off.hcap : 1024;
    uint64_t *t = calloc(cap, sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < ts_off.hcap; i++) {
        uint64_t h = ts_off.handles[i];
        if (!h)
            continue;
        size_t j = (size_t)(h * 0x9e3779b97f4a7c15ull) & (cap - 1);
        while (t[j])
            j = (j + 1) & (cap - 1);
        t[j] = h;
    }
    free(ts_off.handles);
    ts_off.handles = t;
    ts_off.hcap = cap;
    return true;
}

static size_t set_slot(uint64_t h)
{
    size_t j = (size_t)(h * 0x9e3779b97f4a7c15ull) & (ts_off.hcap - 1);
    while (ts_off.handles[j] && ts_off.handles[j] != h)
        j = (j + 1) & (ts_off.hcap - 1);
    return j;
}

bool ts_off_host_add(uint64_t h, uint64_t bytes)
{
    pthread_mutex_lock(&ts_off.lock);
    bool ok = (ts_off.hcount + 1) * 2 <= ts_off.hcap || set_grow();
    if (ok) {
        ts_off.handles[set_slot(h)] = h;
        ts_off.hcount++;
        __atomic_fetch_add(&ts_off.placement_gen, 1, __ATOMIC_RELEASE);
        ts_off.host_bytes += bytes;
        if (ts_off.host_bytes > ts_off.peak_host_bytes)
            ts_off.peak_host_bytes = ts_off.host_bytes;
    }
    pthread_mutex_unlock(&ts_off.lock);
    return ok;
}

bool ts_off_host_has(uint64_t h)
{
    pthread_mutex_lock(&ts_off.lock);
    bool has = ts_off.hcap && ts_off.handles[set_slot(h)] == h;
    pthread_mutex_unlock(&ts_off.lock);
    return has;
}

/* Forgets h (it is being released); true if it was host-backed. */
bool ts_off_host_remove(uint64_t h, uint64_t bytes)
{
    pthread_mutex_lock(&ts_off.lock);
    bool had = ts_off.hcap && ts_off.handles[set_slot(h)] == h;
    if (had) {
        /* backward-shift deletion keeps every probe chain intact */
        size_t i = set_slot(h), j = i;
        ts_off.handles[i] = 0;
        for (;;) {
            j = (j + 1) & (ts_off.hcap - 1);
            uint64_t k = ts_off.handles[j];
            if (!k)
                break;
            size_t home = (size_t)(k * 0x9e3779b97f4a7c15ull) & (ts_off.hcap - 1);
            if (((j - home) & (ts_off.hcap - 1)) >= ((j - i) & (ts_off.hcap - 1))) {
                ts_off.handles[i] = k;
                ts_off.handles[j] = 0;
                i = j;
            }
        }
        ts_off.hcount--;
        __atomic_fetch_add(&ts_off.placement_gen, 1, __ATOMIC_RELEASE);
        ts_off.host_bytes -= bytes;
    }
    pthread_mutex_unlock(&ts_off.lock);
    return had;
}

/* ---- the provider wrap ---- */

struct ts_off_dev *ts_off_dev_of_ctx(void *ctx)
{
    for (int i = 0; i < TS_OFF_MAX_DEV; i++)
        if (ts_off.dev[i].attached && ts_off.dev[i].prov_ctx == ctx)
            return &ts_off.dev[i];
    return NULL;
}

int ts_off_host_create(struct ts_off_dev *d, uint64_t size, uint64_t *handle)
{
    CUmemGenericAllocationHandle h = 0;
    CUresult r = ts_off.drv.cuMemCreate(&h, size, &d->host_prop, 0);
    if (r != CUDA_SUCCESS)
        return r == CUDA_ERROR_OUT_OF_MEMORY ? TS_PROV_OOM : TS_PROV_ERROR;
    if (!ts_off_host_add(h, size)) {
        ts_off.drv.cuMemRelease(h);
        return TS_PROV_OOM;
    }
    *handle = h;
    return TS_PROV_OK;
}

static __thread bool oom_backing
    __attribute__((tls_model("initial-exec"))); /* this thread's allocation may be backed by the host */

static int wrapped_create(void *ctx, uint64_t size, uint64_t *handle)
{
    struct ts_off_dev *d = ts_off_dev_of_ctx(ctx);
    int rc = d->inner_create(ctx, size, handle);
    if (rc != TS_PROV_OOM || !oom_backing)
        return rc;
    rc = ts_off_host_create(d, size, handle);
    if (rc == TS_PROV_OK)
        __atomic_fetch_add(&ts_off.oom_host_pages, 1, __ATOMIC_RELAXED);
    return rc;
}

static int wrapped_release(void *ctx, uint64_t handle)
{
    struct ts_off_dev *d = ts_off_dev_of_ctx(ctx);
    ts_off_host_remove(handle, d->gran);
    return d->inner_release(ctx, handle);
}

/* A page mapped or unmapped (the pool may map a handle it kept at another
 * address): which addresses are host-backed may have changed. */
static int wrapped_map(void *ctx, uint64_t va, uint64_t size, uint64_t handle)
{
    struct ts_off_dev *d = ts_off_dev_of_ctx(ctx);
    int rc = d->inner_map(ctx, va, size, handle);
    __atomic_fetch_add(&ts_off.placement_gen, 1, __ATOMIC_RELEASE);
    return rc;
}

static int wrapped_unmap(void *ctx, uint64_t va, uint64_t size)
{
    struct ts_off_dev *d = ts_off_dev_of_ctx(ctx);
    int rc = d->inner_unmap(ctx, va, size);
    __atomic_fetch_add(&ts_off.placement_gen, 1, __ATOMIC_RELEASE);
    return rc;
}

/* "offload unavailable: <reason>" once, and offload stays off. */
static void unavailable(const char *reason, int dev)
{
    if (!__atomic_exchange_n(&ts_off.told_unavailable, true, __ATOMIC_ACQ_REL))
        ts_warn("offload unavailable: %s (device %d); TRAINSHIM_OFFLOAD is off", reason, dev);
}

static bool host_vmm_supported(int dev, CUmemAllocationProp *prop)
{
    int yes = 0, node = -1;
    if (!ts_off.drv.cuDeviceGetAttribute
        || ts_off.drv.cuDeviceGetAttribute(
               &yes, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev)
               != CUDA_SUCCESS
        || !yes)
        return false;
    if (ts_off.drv.cuDeviceGetAttribute(&node, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS)
        node = -1;
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    /* the host node nearest the GPU; HOST (any node) where NUMA is unknown */
    prop->location.type = node >= 0 ? CU_MEM_LOCATION_TYPE_HOST_NUMA : CU_MEM_LOCATION_TYPE_HOST;
    prop->location.id = node >= 0 ? node : 0;
    return true;
}

void ts_offload_attach(int dev, const ts_offload_driver *drv, ts_page_provider *prov)
{
    if (ts_cfg()->offload != TS_OFFLOAD_ON || dev < 0 || dev >= TS_OFF_MAX_DEV)
        return;
    pthread_mutex_lock(&ts_off.lock);
    if (!ts_off.drv.cuMemCreate)
        ts_off.drv = *drv;
    pthread_mutex_unlock(&ts_off.lock);
    struct ts_off_dev *d = &ts_off.dev[dev];
    if (!drv->cuMemCreate || !drv->cuMemMap || !drv->cuMemUnmap || !drv->cuMemcpyDtoD
        || !drv->cuCtxSynchronize || !drv->cuMemAddressReserve) {
        unavailable("the driver lacks a VMM entry point offload needs", dev);
        return;
    }
    if (!host_vmm_supported(dev, &d->host_prop)) {
        unavailable("the device does not support host-located VMM memory "
                    "(CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0; "
                    "TRAINSHIM_OFFLOAD=managed uses managed memory instead)",
                    dev);
        return;
    }
    d->device = dev;
    d->prov_ctx = prov->ctx;
    d->inner_create = prov->create;
    d->inner_release = prov->release;
    d->set_access = prov->set_access;
    d->inner_map = prov->map;
    d->inner_unmap = prov->unmap;
    prov->create = wrapped_create;
    prov->release = wrapped_release;
    if (prov->map && prov->unmap) {
        prov->map = wrapped_map;
        prov->unmap = wrapped_unmap;
    }
    d->attached = true;
}

void ts_offload_pool_created(int dev, struct ts_pool *pool)
{
    if (dev < 0 || dev >= TS_OFF_MAX_DEV || !ts_off.dev[dev].attached)
        return;
    struct ts_off_dev *d = &ts_off.dev[dev];
    if (ts_pool_mode(pool) != TS_ALLOC_EXPANDABLE) {
        d->attached = false;
        unavailable("the device allocator is not in expandable mode (TRAINSHIM_ALLOC)", dev);
        return;
    }
    d->gran = ts_pool_page_size(pool);
    CUdeviceptr scratch = 0;
    if (ts_off.drv.cuMemAddressReserve(&scratch, d->gran, 0, 0, 0) != CUDA_SUCCESS) {
        d->attached = false;
        unavailable("cannot reserve the address range page moves copy through", dev);
        return;
    }
    d->scratch = scratch;
    d->pool = pool;
    __atomic_store_n(&ts_off.available, true, __ATOMIC_RELEASE);
    __atomic_store_n(&ts_offload_gating, true, __ATOMIC_RELEASE);
    ts_off_summary_at_exit();
    ts_off_signal_setup(dev);
}

bool ts_offload_oom_begin(int dev)
{
    if (dev < 0 || dev >= TS_OFF_MAX_DEV || !ts_off.dev[dev].pool)
        return false;
    oom_backing = true;
    return true;
}

void ts_offload_oom_end(void) { oom_backing = false; }

/* ---- the managed fallback ---- */

bool ts_offload_managed_alloc(int dev, uint64_t size, uint64_t *ptr)
{
    (void)dev;
    if (ts_cfg()->offload != TS_OFFLOAD_MANAGED || !ts_off.drv.cuMemAllocManaged)
        return false;
    CUdeviceptr p = 0;
    if (ts_off.drv.cuMemAllocManaged(&p, size, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS)
        return false;
    __atomic_fetch_add(&ts_off.managed_allocs, 1, __ATOMIC_RELAXED);
    ts_off_summary_at_exit();
    *ptr = p;
    return true;
}

void ts_offload_managed_attach(const ts_offload_driver *drv)
{
    if (ts_cfg()->offload != TS_OFFLOAD_MANAGED)
        return;
    pthread_mutex_lock(&ts_off.lock);
    if (!ts_off.drv.cuMemAllocManaged)
        ts_off.drv = *drv;
    pthread_mutex_unlock(&ts_off.lock);
}

/* ---- the gate ---- */

static pthread_rwlock_t gate = PTHREAD_RWLOCK_INITIALIZER;

bool ts_offload_gating;

bool ts_offload_gate_enter(void)
{
    if (ts_likely(!__atomic_load_n(&ts_off.available, __ATOMIC_ACQUIRE)))
        return false;
    pthread_rwlock_rdlock(&gate);
    return true;
}

void ts_offload_gate_leave(bool held)
{
    if (held)
        pthread_rwlock_unlock(&gate);
}

void ts_off_gate_close(void) { pthread_rwlock_wrlock(&gate); }
void ts_off_gate_open(void) { pthread_rwlock_unlock(&gate); }

void ts_offload_stats_get(ts_offload_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&ts_off.lock);
    out->host_bytes = ts_off.host_bytes;
    out->peak_host_bytes = ts_off.peak_host_bytes;
    out->paused_bytes = ts_off.paused_bytes;
    pthread_mutex_unlock(&ts_off.lock);
    out->oom_host_pages = __atomic_load_n(&ts_off.oom_host_pages, __ATOMIC_RELAXED);
    out->demoted_pages = __atomic_load_n(&ts_off.demoted_pages, __ATOMIC_RELAXED);
    out->promoted_pages = __atomic_load_n(&ts_off.promoted_pages, __ATOMIC_RELAXED);
    out->pauses = __atomic_load_n(&ts_off.pauses, __ATOMIC_RELAXED);
    out->resumes = __atomic_load_n(&ts_off.resumes, __ATOMIC_RELAXED);
    out->failed_moves = __atomic_load_n(&ts_off.failed_moves, __ATOMIC_RELAXED);
    out->managed_allocs = __atomic_load_n(&ts_off.managed_allocs, __ATOMIC_RELAXED);
}

/* One TS_REC_OFFLOAD with the totals so far. */
void ts_off_log(uint32_t kind, unsigned tag, uint64_t bytes, uint64_t ns)
{
    ts_offload_stats st;
    ts_offload_stats_get(&st);
    struct ts_rec_offload r;
    memset(&r, 0, sizeof r);
    r.device = -1;
    r.kind = kind;
    r.tag = tag;
    r.bytes = bytes;
    r.duration_ns = ns;
    r.host_bytes = st.host_bytes;
    r.peak_host_bytes = st.peak_host_bytes;
    r.oom_host_pages = st.oom_host_pages;
    r.demoted_pages = st.demoted_pages;
    r.promoted_pages = st.promoted_pages;
    r.failed_moves = st.failed_moves;
    r.managed_allocs = st.managed_allocs;
    ts_ev_offload(&r);
}

void ts_off_note_pause(bool pause, unsigned tag, uint64_t bytes, uint64_t ns)
{
    ts_off_log(pause ? TS_OFFLOAD_PAUSE : TS_OFFLOAD_RESUME, tag, bytes, ns);
    if (ts_cfg()->verbose)
        ts_info("offload: %s tag %u: %llu bytes in %.3f ms", pause ? "paused" : "resumed", tag,
                (unsigned long long)bytes, (double)ns / 1e6);
}

/* The totals at shutdown (registered after the log's own exit flush, so it
 * runs first); a fork child logs nothing. */
static pid_t owner_pid;
static void log_summary_at_exit(void)
{
    if (getpid() == owner_pid)
        ts_off_log(TS_OFFLOAD_SUMMARY, 0, 0, 0);
}

void ts_off_summary_at_exit(void)
{
    if (__atomic_exchange_n(&ts_off.summary_registered, true, __ATOMIC_ACQ_REL))
        return;
    owner_pid = getpid();
    atexit(log_summary_at_exit);
}
