/* mem_alloc.c: cuMemAlloc/cuMemFree and the queries on ordinary device
 * allocations (cuMemGetInfo, cuMemGetAddressRange). */
#include "mem_space.h"

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    EMU_ENTRY_CTX(cuMemAlloc_v2);
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = emu_capture_check_unsafe();
    if (rc != CUDA_SUCCESS) return rc;
    if (bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p = emu_arena_alloc(emu_current_device(), bytesize, EMU_OWN_ALLOC);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    *dptr = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    EMU_ENTRY_CTX(cuMemAllocPitch_v2);
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = emu_capture_check_unsafe();
    if (rc != CUDA_SUCCESS) return rc;
    /* 512 bytes: the texture pitch alignment current GPUs report. */
    size_t pitch = emu_round_up(WidthInBytes, 512);
    if (Height > SIZE_MAX / pitch) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t p = emu_arena_alloc(emu_current_device(), pitch * Height, EMU_OWN_ALLOC);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    *dptr = (CUdeviceptr)p;
    *pPitch = pitch;
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    EMU_ENTRY_CTX(cuMemFree_v2);
    if (dptr == 0) return CUDA_SUCCESS;
    CUresult rc = emu_capture_check_unsafe();
    if (rc != CUDA_SUCCESS) return rc;
    uintptr_t p = (uintptr_t)dptr;
    struct emu_arena_block b;
    if (emu_arena_lookup(p, &b) && b.start == p) {
        if (b.owner == EMU_OWN_POOL) {
            /* Stream-ordered memory: no implicit synchronization (cuda.h). */
            return emu_pool_free_sync(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        }
        /* Observed on GPUs: cuMemFree waits for the whole device, and programs
         * rely on it (they free right after launching work on the buffer). */
        rc = emu_device_sync(b.dev);
        if (rc != CUDA_SUCCESS) return rc;
        return emu_arena_free(p, EMU_OWN_ALLOC) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    struct emu_managed_info m;
    if (emu_managed_lookup(p, &m) && m.start == p) {
        for (int d = 0; d < emu_space.devices; d++) {
            rc = emu_device_sync(d);
            if (rc != CUDA_SUCCESS) return rc;
        }
        return emu_managed_free(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    EMU_ENTRY_CTX(cuMemGetInfo_v2);
    if (!free || !total) return CUDA_ERROR_INVALID_VALUE;
    emu_mem_init();
    int dev = emu_current_device();
    size_t used = emu_phys_used(dev);
    *total = emu_cfg.device_memory;
    *free = used < emu_cfg.device_memory ? emu_cfg.device_memory - used : 0;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    EMU_ENTRY_CTX(cuMemGetAddressRange_v2);
    emu_mem_init();
    uintptr_t p = (uintptr_t)dptr, start;
    size_t size;
    struct emu_arena_block b;
    struct emu_vmm_info v;
    struct emu_managed_info m;
    if (emu_arena_lookup(p, &b)) {
        start = b.start;
        size = b.size;
    } else if (emu_vmm_lookup(p, &v)) {
        start = v.ipc_import ? v.alloc_start : v.start;
        size = v.ipc_import ? v.alloc_size : v.size;
        if (p - start >= size) return CUDA_ERROR_NOT_FOUND;   /* page rounding of an IPC import */
    } else if (emu_managed_lookup(p, &m)) {
        start = m.start;
        size = m.size;
    } else {
        return CUDA_ERROR_NOT_FOUND;
    }
    if (pbase) *pbase = (CUdeviceptr)start;
    if (psize) *psize = size;
    return CUDA_SUCCESS;
}
