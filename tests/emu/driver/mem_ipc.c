/* mem_ipc.c: legacy CUDA IPC (cuIpcGetMemHandle / cuIpcOpenMemHandle /
 * cuIpcCloseMemHandle) on cuMemAlloc memory.
 *
 * A handle names the exporter's arena memfd by (pid, fd number) plus the
 * allocation's offset, size and serial; the importer opens
 * /proc/<pid>/fd/<fd> (or pidfd_getfd) and maps those pages into its own VMM
 * area.  Opening the same handle again in a process returns the same pointer
 * and counts a reference, as cuda.h documents.  Opening a handle in the
 * process that exported it fails with CUDA_ERROR_INVALID_CONTEXT.
 * IPC event handles are not emulated (the generated stubs answer). */
#include "mem_space.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define IPC_MAGIC 0x454d5549u   /* "IUME" */

struct ipc_payload {
    uint32_t magic;
    int32_t pid;
    int32_t fd;
    int32_t dev;
    uint64_t offset, size, id;
};
_Static_assert(sizeof(struct ipc_payload) <= sizeof(CUipcMemHandle), "IPC payload fits the handle");

struct ipc_open {
    int32_t pid;
    uint64_t id;
    uintptr_t ptr;
    unsigned refs;
};

static pthread_mutex_t opens_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ipc_open *opens;
static size_t nopens, opens_cap;

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    EMU_ENTRY_CTX(cuIpcGetMemHandle);
    emu_mem_init();
    if (!pHandle) return CUDA_ERROR_INVALID_VALUE;
    struct emu_arena_block b;
    /* Only cuMemAlloc memory: VMM mappings and pool memory are refused. */
    if (!emu_arena_lookup((uintptr_t)dptr, &b) || b.owner != EMU_OWN_ALLOC) return CUDA_ERROR_INVALID_VALUE;
    struct ipc_payload pl = { IPC_MAGIC, (int32_t)getpid(), b.fd, b.dev, b.fd_offset, b.size, b.id };
    memset(pHandle, 0, sizeof *pHandle);
    memcpy(pHandle->reserved, &pl, sizeof pl);
    return CUDA_SUCCESS;
}

/* Gets our own descriptor for the exporter's memfd. */
static int open_remote_fd(int pid, int fd)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    int local = open(path, O_RDWR | O_CLOEXEC);
    if (local >= 0) return local;
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd >= 0) {
        local = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        close(pidfd);
    }
#endif
    return local;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    EMU_ENTRY_CTX(cuIpcOpenMemHandle_v2);
    emu_mem_init();
    if (!pdptr || Flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) return CUDA_ERROR_INVALID_VALUE;
    struct ipc_payload pl;
    memcpy(&pl, handle.reserved, sizeof pl);
    if (pl.magic != IPC_MAGIC || pl.size == 0 || pl.pid <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (pl.pid == (int32_t)getpid()) return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&opens_lock);
    for (size_t i = 0; i < nopens; i++) {
        if (opens[i].pid == pl.pid && opens[i].id == pl.id) {
            opens[i].refs++;
            *pdptr = (CUdeviceptr)opens[i].ptr;
            goto out;
        }
    }
    if (nopens == opens_cap) {
        size_t cap = opens_cap ? 2 * opens_cap : 16;
        struct ipc_open *o = realloc(opens, cap * sizeof *o);
        if (!o) { rc = CUDA_ERROR_OUT_OF_MEMORY; goto out; }
        opens = o;
        opens_cap = cap;
    }
    int fd = open_remote_fd(pl.pid, pl.fd);
    if (fd < 0) { rc = CUDA_ERROR_INVALID_HANDLE; goto out; }   /* exporter gone or not ours to open */
    int dev = emu_check_device(pl.dev) == CUDA_SUCCESS ? pl.dev : emu_current_device();
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t lo = pl.offset & ~(page - 1);
    size_t len = emu_round_up(pl.offset + pl.size, page) - lo;
    uintptr_t at = emu_vmm_reserve_internal(dev, len);
    if (!at) { close(fd); rc = CUDA_ERROR_OUT_OF_MEMORY; goto out; }
    void *m = mmap((void *)at, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, (off_t)lo);
    close(fd);
    if (m == MAP_FAILED) {
        emu_vmm_free_internal(at, len);
        rc = CUDA_ERROR_MAP_FAILED;
        goto out;
    }
    uintptr_t ptr = at + (pl.offset - lo);
    emu_vmm_add_import(dev, at, len, ptr, pl.size);
    opens[nopens++] = (struct ipc_open){ pl.pid, pl.id, ptr, 1 };
    *pdptr = (CUdeviceptr)ptr;
out:
    pthread_mutex_unlock(&opens_lock);
    return rc;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    EMU_ENTRY_CTX(cuIpcCloseMemHandle);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&opens_lock);
    for (size_t i = 0; i < nopens; i++) {
        if (opens[i].ptr != (uintptr_t)dptr) continue;
        rc = CUDA_SUCCESS;
        if (--opens[i].refs) break;
        uintptr_t map_start;
        size_t map_size;
        if (emu_vmm_remove_import(opens[i].ptr, &map_start, &map_size)) {
            mmap((void *)map_start, map_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
            emu_vmm_free_internal(map_start, map_size);
        }
        opens[i] = opens[--nopens];
        break;
    }
    pthread_mutex_unlock(&opens_lock);
    return rc;
}
