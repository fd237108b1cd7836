/* devmem_ipc.c: legacy CUDA IPC on pooled device memory (see devmem.h).
 *
 * Exporter.  The handle names a descriptor: a small memfd of the exporting
 * process holding a header (export id, alive flag, page size, the block's
 * offset in its first page and its size) and the numbers of the exporter's
 * fds for the block's pages (cuMemExportToShareableHandle, POSIX fd).  The
 * exporter keeps them open while the block lives; when the pool frees the
 * block (ts_seg_pages_put calls ts_seg_export_gone under the pool lock,
 * before the pages can serve another block) it clears the alive flag, then
 * closes the page fds and the descriptor.  Exporting the same block again
 * gives the same handle.
 *
 * Importer.  pidfd_open(pid) + pidfd_getfd(descriptor), check the export id
 * and the alive flag, take every page fd the same way, and check the alive
 * flag again: the exporter clears it before closing any page fd, so fds taken
 * while it still reads 1 are the block's pages, not files that reused their
 * numbers.  Then cuMemImportFromShareableHandle, a fresh reservation,
 * cuMemMap page by page, cuMemSetAccess, and the pointer at the block's first
 * byte.  The imported handles are released once mapped (the mapping keeps
 * the memory). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc/alloc.h"
#include "core/core.h"
#include "devmem/cuda_provider.h"
#include "devmem/devmem.h"
#include "core/cuda_real.h"

/* devmem.c's stream of synchronous allocations (cudaMalloc, cuMemAlloc). */
#define IPC_SYNC_STREAM UINT64_MAX
/* A block of more pages than this is refused (the descriptor stays small). */
#define IPC_MAX_PAGES (1u << 20)

/* The 64-byte handle.  The magic differs from anything the driver writes, so
 * a runtime without the shim rejects the handle instead of mapping memory. */
static const char ipc_magic[8] = { 'T', 'S', 'H', 'M', 'I', 'P', 'C', '1' };
struct ipc_wire {
    char magic[8];
    int32_t pid;     /* exporter */
    int32_t desc_fd; /* exporter's descriptor memfd */
    uint64_t export_id;
    uint64_t size;  /* the block's bytes */
    int32_t device; /* exporter's device ordinal */
    uint8_t unused[28];
};
_Static_assert(sizeof(struct ipc_wire) == sizeof(cudaIpcMemHandle_t), "handle layout is 64 bytes");

#define DESC_MAGIC 0x5453484d44455343ull /* "TSHMDESC" */
struct ipc_desc {
    uint64_t magic, export_id;
    uint32_t alive; /* 1 while the exporter holds the page fds */
    uint32_t npages;
    uint64_t gran, offset, size; /* page size, block offset in its first page, block bytes */
    int32_t device, unused;
    /* followed by int32_t page_fd[npages] */
};

/* ---- exporter ------------------------------------------------------------- */
struct ipc_export {
    ts_pool *pool;
    uint64_t base, id;
    int desc_fd;
    uint32_t npages;
    int *page_fds;
    struct ipc_wire wire;
};
static pthread_mutex_t exports_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ipc_export *exports;
static size_t nexports, exports_cap;
static uint64_t next_export_id;

static uint64_t new_export_id(void)
{
    if (!next_export_id) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
            r = (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&r;
        next_export_id = r | 1;
    }
    return next_export_id++;
}

static void close_fds(int *fds, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* exports_lock held.  Alive flag first: see the importer's second check. */
static void export_kill(size_t i)
{
    struct ipc_export *e = &exports[i];
    uint32_t dead = 0;
    if (pwrite(e->desc_fd, &dead, sizeof dead, offsetof(struct ipc_desc, alive)) != (ssize_t)sizeof dead)
        ts_warn("IPC: cannot mark an export dead (%s); closing its pages anyway", strerror(errno));
    close_fds(e->page_fds, e->npages);
    close(e->desc_fd);
    free(e->page_fds);
    exports[i] = exports[--nexports];
    __atomic_fetch_sub(&ts_seg_live_exports, 1, __ATOMIC_ACQ_REL);
}

/* ts_seg_export_gone: the pool's lock is held, so no export of this pool is
 * being created meanwhile. */
static void exports_gone(ts_pool *p, uint64_t addr, uint64_t size)
{
    pthread_mutex_lock(&exports_lock);
    for (size_t i = 0; i < nexports;) {
        struct ipc_export *e = &exports[i];
        if (e->pool == p && e->base >= addr && e->base - addr < size)
            export_kill(i); /* moves the last one into i */
        else
            i++;
    }
    pthread_mutex_unlock(&exports_lock);
}

/* ts_seg_export_has (any thread, with or without the pool's lock). */
static bool export_has(ts_pool *p, uint64_t addr)
{
    bool has = false;
    pthread_mutex_lock(&exports_lock);
    for (size_t i = 0; i < nexports && !has; i++)
        has = exports[i].pool == p && exports[i].base == addr;
    pthread_mutex_unlock(&exports_lock);
    return has;
}

static int write_desc(int fd, const struct ipc_desc *d, const int *page_fds)
{
    size_t bytes = d->npages * sizeof(int32_t);
    int32_t *nums = malloc(bytes);
    if (!nums)
        return -1;
    for (uint32_t i = 0; i < d->npages; i++)
        nums[i] = page_fds[i];
    int ok = pwrite(fd, d, sizeof *d, 0) == (ssize_t)sizeof *d
             && pwrite(fd, nums, bytes, sizeof *d) == (ssize_t)bytes;
    free(nums);
    return ok ? 0 : -1;
}

/* items (count used of *cap) with room for one more: itself, or a larger
 * copy (*cap doubled from 16); NULL when memory runs out (items unchanged). */
static void *grow_array(void *items, size_t *cap, size_t count, size_t size)
{
    if (count < *cap)
        return items;
    size_t c = *cap ? 2 * *cap : 16;
    void *x = realloc(items, c * size);
    if (x)
        *cap = c;
    return x;
}

/* One exported POSIX fd per page of the block in *fds: cudaSuccess, or the
 * refusal (nothing left open). */
static int export_pages(ts_cuda_fn_cuMemExportToShareableHandle export_fd, const ts_seg_block_view *v,
                        int **fds)
{
    uint32_t n = (uint32_t)v->npages;
    int *f = malloc(n * sizeof *f);
    if (!f)
        return cudaErrorMemoryAllocation;
    for (uint32_t i = 0; i < n; i++)
        f[i] = -1;
    for (uint32_t i = 0; i < n; i++) {
        int fd = -1;
        /* a page created without the POSIX handle type is refused here:
         * today's answer, never a handle to the wrong memory */
        if (export_fd(&fd, ts_seg_view_handle(v, i), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)
            != CUDA_SUCCESS) {
            close_fds(f, n);
            free(f);
            return cudaErrorInvalidValue;
        }
        f[i] = fd;
    }
    *fds = f;
    return cudaSuccess;
}

/* The new export in the table (room made by the caller, exports_lock held),
 * the pool told to report its block's end; its wire handle. */
static struct ipc_wire record_export(ts_pool *p, const ts_seg_block_view *v, uint64_t id, int desc_fd,
                                     int *fds)
{
    struct ipc_export *e = &exports[nexports++];
    memset(e, 0, sizeof *e);
    e->pool = p;
    e->base = v->base;
    e->id = id;
    e->desc_fd = desc_fd;
    e->npages = (uint32_t)v->npages;
    e->page_fds = fds;
    memcpy(e->wire.magic, ipc_magic, sizeof ipc_magic);
    e->wire.pid = (int32_t)getpid();
    e->wire.desc_fd = desc_fd;
    e->wire.export_id = id;
    e->wire.size = v->size;
    e->wire.device = v->device;
    ts_seg_export_gone = exports_gone;
    ts_seg_export_has = export_has;
    __atomic_fetch_add(&ts_seg_live_exports, 1, __ATOMIC_ACQ_REL);
    return e->wire;
}

/* Under the pool's lock (ts_seg_with_live_block): the block cannot be freed
 * meanwhile, and its pages are mapped and stay where they are. */
static int export_block(void *arg, ts_pool *p, const ts_seg_block_view *v)
{
    struct ipc_wire *out = arg;
    /* stream-ordered memory is not legacy-IPC capable (the driver refuses it) */
    if (v->stream != IPC_SYNC_STREAM || v->npages > IPC_MAX_PAGES)
        return cudaErrorInvalidValue;
    ts_cuda_fn_cuMemExportToShareableHandle export_fd = TS_CUDA_REAL(cuMemExportToShareableHandle);
    if (!export_fd)
        return cudaErrorInvalidValue;
    int rc = cudaErrorInvalidValue;
    pthread_mutex_lock(&exports_lock);
    for (size_t i = 0; i < nexports; i++)
        if (exports[i].pool == p && exports[i].base == v->base) {
            *out = exports[i].wire;
            rc = cudaSuccess;
            goto out;
        }
    struct ipc_export *grown = grow_array(exports, &exports_cap, nexports, sizeof *grown);
    if (!grown) {
        rc = cudaErrorMemoryAllocation;
        goto out;
    }
    exports = grown;
    uint32_t n = (uint32_t)v->npages;
    int *fds = NULL;
    rc = export_pages(export_fd, v, &fds);
    if (rc != cudaSuccess)
        goto out;
    int desc_fd = memfd_create("trainshim-ipc", MFD_CLOEXEC);
    struct ipc_desc d = {
        .magic = DESC_MAGIC,
        .export_id = new_export_id(),
        .alive = 1,
        .npages = n,
        .gran = v->gran,
        .offset = v->base - v->first_page_va,
        .size = v->size,
        .device = v->device,
    };
    if (desc_fd < 0 || write_desc(desc_fd, &d, fds)) {
        if (desc_fd >= 0)
            close(desc_fd);
        close_fds(fds, n);
        free(fds);
        rc = cudaErrorMemoryAllocation;
        goto out;
    }
    *out = record_export(p, v, d.export_id, desc_fd, fds);
    rc = cudaSuccess;
out:
    pthread_mutex_unlock(&exports_lock);
    return rc;
}

int ts_ipc_export(uint64_t ptr, void *handle)
{
    struct ipc_wire w;
    int rc = ts_seg_with_live_block(ptr, cudaErrorInvalidValue, export_block, &w);
    if (rc == cudaSuccess)
        memcpy(handle, &w, sizeof w);
    return rc;
}

/* Pages of every pool are created exportable from the start (the flag is
 * read when a pool's provider is created): only the shim sets it, not the
 * tools or tests that link the core. */
__attribute__((constructor)) static void ipc_pages_exportable(void) { ts_cuda_pages_exportable = true; }

/* ---- importer ------------------------------------------------------------- */
struct ipc_import {
    int32_t pid;
    uint64_t export_id;
    uint64_t va, npages, gran; /* our reservation */
    uint64_t ptr;              /* what the program got */
    unsigned refs;
};
static pthread_mutex_t imports_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ipc_import *imports;
static size_t nimports, imports_cap;

bool ts_ipc_handle_is_ours(const void *handle) { return memcmp(handle, ipc_magic, sizeof ipc_magic) == 0; }

/* Descriptor fd of process pid, as our own fd; -1 if it is gone.  Without
 * pidfd_getfd (kernel < 5.6, valgrind) /proc/<pid>/fd/<fd> is reopened: that
 * works for a memfd (the emulator's pages), not for the real driver's
 * anonymous-inode fds, which then fail to open (an error, never memory). */
static int take_fd(int pid, int pidfd, int fd)
{
    if (fd < 0)
        return -1;
    if (pidfd >= 0) {
        int got = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        if (got >= 0 || errno != ENOSYS)
            return got;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    return open(path, O_RDWR | O_CLOEXEC);
}

static bool desc_alive(int desc, uint64_t id)
{
    struct ipc_desc d;
    return pread(desc, &d, sizeof d, 0) == (ssize_t)sizeof d && d.magic == DESC_MAGIC && d.export_id == id
           && d.alive == 1;
}

/* The current device, creating the primary context when there is none yet
 * (as the runtime would here). */
static int current_device(void)
{
    int dev = ts_current_device();
    if (dev >= 0)
        return dev;
    ts_cuda_fn_cudaFree rt_free = TS_CUDA_REAL(cudaFree);
    return rt_free && rt_free(NULL) == cudaSuccess ? ts_current_device() : -1;
}

static int cu_error(CUresult r)
{
    return r == CUDA_ERROR_OUT_OF_MEMORY ? cudaErrorMemoryAllocation : cudaErrorMapBufferObjectFailed;
}

/* The exporter's descriptor of the block w names: cudaSuccess when it is
 * alive and consistent. */
static int read_desc(int desc, const struct ipc_wire *w, struct ipc_desc *d)
{
    if (pread(desc, d, sizeof *d, 0) != (ssize_t)sizeof *d || d->magic != DESC_MAGIC
        || d->export_id != w->export_id || d->alive != 1)
        return cudaErrorInvalidResourceHandle; /* freed by the exporter */
    if (!d->npages || d->npages > IPC_MAX_PAGES || !d->gran || (d->gran & (d->gran - 1))
        || d->offset >= d->gran || d->offset + d->size > (uint64_t)d->npages * d->gran)
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* The n page fds the descriptor lists, taken from the exporter into nums
 * (our fds replace its numbers in place); cudaSuccess, or nothing left open. */
static int take_page_fds(int pid, int pidfd, int desc, uint64_t export_id, int32_t *nums, uint32_t n)
{
    if (pread(desc, nums, n * sizeof *nums, sizeof(struct ipc_desc)) != (ssize_t)(n * sizeof *nums))
        return cudaErrorInvalidResourceHandle;
    int *fds = (int *)nums;
    for (uint32_t i = 0; i < n; i++) {
        fds[i] = take_fd(pid, pidfd, nums[i]);
        if (fds[i] < 0) {
            close_fds(fds, i);
            return cudaErrorInvalidResourceHandle;
        }
    }
    if (!desc_alive(desc, export_id)) {
        close_fds(fds, n); /* freed while we took them: they may be other files */
        return cudaErrorInvalidResourceHandle;
    }
    return cudaSuccess;
}

/* Maps the pages of a live descriptor at a fresh reservation. */
static int map_import(int pid, int pidfd, int desc, const struct ipc_wire *w, struct ipc_import *imp)
{
    struct ipc_desc d;
    int rc = read_desc(desc, w, &d);
    if (rc != cudaSuccess)
        return rc;
    ts_cuda_fn_cuMemImportFromShareableHandle import_fd = TS_CUDA_REAL(cuMemImportFromShareableHandle);
    ts_cuda_fn_cuMemAddressReserve reserve = TS_CUDA_REAL(cuMemAddressReserve);
    ts_cuda_fn_cuMemAddressFree unreserve = TS_CUDA_REAL(cuMemAddressFree);
    ts_cuda_fn_cuMemMap map = TS_CUDA_REAL(cuMemMap);
    ts_cuda_fn_cuMemUnmap unmap = TS_CUDA_REAL(cuMemUnmap);
    ts_cuda_fn_cuMemSetAccess set_access = TS_CUDA_REAL(cuMemSetAccess);
    ts_cuda_fn_cuMemRelease release = TS_CUDA_REAL(cuMemRelease);
    if (!import_fd || !reserve || !unreserve || !map || !unmap || !set_access || !release)
        return cudaErrorNotSupported;
    int dev = current_device();
    if (dev < 0)
        return cudaErrorNoDevice;

    uint32_t n = d.npages;
    int32_t *nums = malloc(n * sizeof *nums);
    CUmemGenericAllocationHandle *h = calloc(n, sizeof *h);
    uint32_t imported = 0, mapped = 0;
    CUdeviceptr va = 0;
    if (!nums || !h) {
        rc = cudaErrorMemoryAllocation;
        goto out;
    }
    rc = take_page_fds(pid, pidfd, desc, w->export_id, nums, n);
    if (rc != cudaSuccess)
        goto out;
    int *fds = (int *)nums;
    CUresult r = CUDA_SUCCESS;
    while (imported < n && r == CUDA_SUCCESS) {
        r = import_fd(&h[imported], (void *)(intptr_t)fds[imported],
                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (r == CUDA_SUCCESS)
            imported++;
    }
    close_fds(fds, n); /* the imported handles hold the memory now */
    if (r == CUDA_SUCCESS)
        r = reserve(&va, (size_t)n * d.gran, d.gran, 0, 0);
    while (r == CUDA_SUCCESS && mapped < n) {
        r = map(va + mapped * d.gran, d.gran, 0, h[mapped], 0);
        if (r == CUDA_SUCCESS)
            mapped++;
    }
    if (r == CUDA_SUCCESS) {
        CUmemAccessDesc acc;
        memset(&acc, 0, sizeof acc);
        acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        acc.location.id = dev;
        acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        r = set_access(va, (size_t)n * d.gran, &acc, 1);
    }
    if (r != CUDA_SUCCESS) {
        rc = cu_error(r);
        for (uint32_t i = 0; i < mapped; i++)
            unmap(va + i * d.gran, d.gran);
        if (va)
            unreserve(va, (size_t)n * d.gran);
    } else {
        imp->va = va;
        imp->npages = n;
        imp->gran = d.gran;
        imp->ptr = va + d.offset;
    }
    for (uint32_t i = 0; i < imported; i++)
        release(h[i]); /* a mapping keeps its memory */
out:
    free(nums);
    free(h);
    return rc;
}

int ts_ipc_open(const void *handle, unsigned flags, void **ptr)
{
    struct ipc_wire w;
    memcpy(&w, handle, sizeof w);
    if (!ptr || flags != cudaIpcMemLazyEnablePeerAccess || w.pid <= 0)
        return cudaErrorInvalidValue;
    if (w.pid == (int32_t)getpid())
        return cudaErrorDeviceUninitialized; /* as the driver answers for its own handles */
    int rc = cudaSuccess;
    pthread_mutex_lock(&imports_lock);
    for (size_t i = 0; i < nimports; i++)
        if (imports[i].pid == w.pid && imports[i].export_id == w.export_id) {
            imports[i].refs++;
            *ptr = (void *)(uintptr_t)imports[i].ptr;
            goto out;
        }
    struct ipc_import *grown = grow_array(imports, &imports_cap, nimports, sizeof *grown);
    if (!grown) {
        rc = cudaErrorMemoryAllocation;
        goto out;
    }
    imports = grown;
    int pidfd = (int)syscall(SYS_pidfd_open, w.pid, 0);
    int desc = pidfd >= 0 || errno == ENOSYS ? take_fd(w.pid, pidfd, w.desc_fd) : -1;
    struct ipc_import imp = { .pid = w.pid, .export_id = w.export_id, .refs = 1 };
    if (desc < 0)
        rc = cudaErrorInvalidResourceHandle; /* exporter gone, or not ours to open */
    else
        rc = map_import(w.pid, pidfd, desc, &w, &imp);
    if (desc >= 0)
        close(desc);
    if (pidfd >= 0)
        close(pidfd);
    if (rc == cudaSuccess) {
        imports[nimports++] = imp;
        *ptr = (void *)(uintptr_t)imp.ptr;
    }
out:
    pthread_mutex_unlock(&imports_lock);
    return rc;
}

int ts_ipc_close(void *ptr)
{
    uint64_t p = (uint64_t)(uintptr_t)ptr;
    int rc = TS_IPC_NOT_OURS;
    pthread_mutex_lock(&imports_lock);
    for (size_t i = 0; i < nimports; i++) {
        struct ipc_import *imp = &imports[i];
        if (imp->ptr != p)
            continue;
        rc = cudaSuccess;
        if (--imp->refs)
            break;
        /* unmapping does not wait for the device: queued work may still read */
        ts_cuda_fn_cuCtxSynchronize sync = TS_CUDA_REAL(cuCtxSynchronize);
        ts_cuda_fn_cuMemUnmap unmap = TS_CUDA_REAL(cuMemUnmap);
        ts_cuda_fn_cuMemAddressFree unreserve = TS_CUDA_REAL(cuMemAddressFree);
        if (sync)
            sync();
        for (uint64_t k = 0; k < imp->npages; k++)
            if (!unmap || unmap(imp->va + k * imp->gran, imp->gran) != CUDA_SUCCESS)
                rc = cudaErrorMapBufferObjectFailed;
        if (!unreserve || unreserve(imp->va, imp->npages * imp->gran) != CUDA_SUCCESS)
            rc = cudaErrorMapBufferObjectFailed;
        imports[i] = imports[--nimports];
        break;
    }
    pthread_mutex_unlock(&imports_lock);
    return rc;
}
