/* mem_attr.c: cuPointerGetAttribute(s).
 *
 * Value types written (cuda.h names the type for some; for the booleans it
 * says "a boolean", which drivers write as a 4-byte unsigned int):
 *   CONTEXT CUcontext, MEMORY_TYPE unsigned int, DEVICE_POINTER CUdeviceptr,
 *   HOST_POINTER void *, SYNC_MEMOPS / IS_MANAGED / IS_LEGACY_CUDA_IPC_CAPABLE /
 *   MAPPED / IS_GPU_DIRECT_RDMA_CAPABLE / IS_HW_DECOMPRESS_CAPABLE unsigned int,
 *   BUFFER_ID / MEMORY_BLOCK_ID / ALLOWED_HANDLE_TYPES unsigned long long,
 *   DEVICE_ORDINAL int, RANGE_START_ADDR / MAPPING_BASE_ADDR CUdeviceptr,
 *   RANGE_SIZE / MAPPING_SIZE size_t, ACCESS_FLAGS unsigned int,
 *   MEMPOOL_HANDLE CUmemoryPool.
 * CONTEXT: VMM memory reports NULL (observed); other memory reports the
 * calling thread's current context (the emulator does not record the context
 * of each allocation).  BUFFER_ID / MEMORY_BLOCK_ID: a serial never reused
 * for cuMemAlloc and pool memory; the mapping's start address (unique among
 * live mappings only) for VMM, pinned and managed memory. */
#include "mem_space.h"

#include <string.h>

struct ptr_desc {
    enum emu_mem_kind kind;
    int dev;
    uintptr_t range_start, map_start;
    size_t range_size, map_size;
    bool vmm, ipc_capable, rdma;
    uint64_t id;
    unsigned access;
    unsigned long long handle_types;
    CUmemoryPool pool;
};

/* Describes p; false if it is not memory the driver knows. */
static bool describe(uintptr_t p, struct ptr_desc *d)
{
    memset(d, 0, sizeof *d);
    struct emu_arena_block b;
    struct emu_vmm_info v;
    struct emu_managed_info m;
    struct emu_pinned_info h;
    if (emu_arena_lookup(p, &b)) {
        *d = (struct ptr_desc){ .kind = EMU_MEM_DEVICE, .dev = b.dev, .range_start = b.start,
                                .range_size = b.size, .map_start = b.start, .map_size = b.size,
                                .ipc_capable = b.owner == EMU_OWN_ALLOC, .rdma = true,
                                .access = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE, .id = b.id };
        if (b.owner == EMU_OWN_POOL) d->pool = emu_pool_of(b.start);
        return true;
    }
    if (emu_vmm_lookup(p, &v)) {
        if (v.ipc_import) {
            if (p - v.alloc_start >= v.alloc_size) return false;
            *d = (struct ptr_desc){ .kind = EMU_MEM_DEVICE, .dev = v.dev, .range_start = v.alloc_start,
                                    .range_size = v.alloc_size, .map_start = v.alloc_start,
                                    .map_size = v.alloc_size, .rdma = true,
                                    .access = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE };
        } else {
            *d = (struct ptr_desc){ .kind = EMU_MEM_DEVICE, .dev = v.dev, .vmm = true,
                                    .range_start = v.resv_start, .range_size = v.resv_size,
                                    .map_start = v.start, .map_size = v.size, .rdma = v.rdma_capable,
                                    .access = v.access, .handle_types = v.handle_types };
        }
        return true;
    }
    if (emu_managed_lookup(p, &m)) {
        *d = (struct ptr_desc){ .kind = EMU_MEM_MANAGED, .dev = emu_current_device(), .range_start = m.start,
                                .range_size = m.size, .map_start = m.start, .map_size = m.size,
                                .access = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE };
        return true;
    }
    if (emu_pinned_lookup(p, &h)) {
        *d = (struct ptr_desc){ .kind = EMU_MEM_PINNED, .dev = emu_current_device(), .range_start = h.start,
                                .range_size = h.size, .map_start = h.start, .map_size = h.size,
                                .access = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE };
        return true;
    }
    return false;
}

#define PUT(type, value) (*(type *)data = (value))

/* Writes one attribute of a described pointer. */
static CUresult put_attr(void *data, CUpointer_attribute attr, uintptr_t p, const struct ptr_desc *d)
{
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: {
        CUcontext ctx = NULL;
        if (!d->vmm && cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) ctx = NULL;
        PUT(CUcontext, ctx);
        return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        PUT(unsigned int, d->kind == EMU_MEM_PINNED ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        PUT(CUdeviceptr, (CUdeviceptr)p);   /* unified addressing */
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (d->kind == EMU_MEM_DEVICE) return CUDA_ERROR_INVALID_VALUE;   /* not host-accessible */
        PUT(void *, (void *)p);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
        return CUDA_ERROR_NOT_SUPPORTED;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        PUT(unsigned int, 0);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        PUT(unsigned long long, d->id ? d->id : (unsigned long long)d->map_start);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        PUT(unsigned int, d->kind == EMU_MEM_MANAGED);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        PUT(int, d->dev);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        PUT(unsigned int, d->ipc_capable);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        PUT(CUdeviceptr, (CUdeviceptr)d->range_start);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        PUT(size_t, d->range_size);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        PUT(unsigned int, 1);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        PUT(unsigned long long, d->handle_types);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        PUT(unsigned int, d->rdma);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        PUT(unsigned int, d->access);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        PUT(CUmemoryPool, d->pool);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        PUT(size_t, d->map_size);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        PUT(CUdeviceptr, (CUdeviceptr)d->map_start);
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The "default NULL values" cuPointerGetAttributes gives memory the driver
 * does not know (ordinal -2, as the runtime reports unregistered memory). */
static void put_default(void *data, CUpointer_attribute attr)
{
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: PUT(CUcontext, NULL); break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: PUT(CUdeviceptr, 0); break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: PUT(void *, NULL); break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: PUT(unsigned long long, 0); break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: PUT(int, -2); break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: PUT(size_t, 0); break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: PUT(CUmemoryPool, NULL); break;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS: break;
    default: PUT(unsigned int, 0); break;
    }
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    EMU_ENTRY_INIT(cuPointerGetAttribute);
    emu_mem_init();
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    struct ptr_desc d;
    if (!describe((uintptr_t)ptr, &d)) return CUDA_ERROR_INVALID_VALUE;
    return put_attr(data, attribute, (uintptr_t)ptr, &d);
}

CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                CUdeviceptr ptr)
{
    EMU_ENTRY_INIT(cuPointerGetAttributes);
    emu_mem_init();
    if (numAttributes == 0 || !attributes || !data) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numAttributes; i++)
        if (!data[i]) return CUDA_ERROR_INVALID_VALUE;
    struct ptr_desc d;
    bool known = describe((uintptr_t)ptr, &d);
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!known) {
            put_default(data[i], attributes[i]);
            continue;
        }
        CUresult rc = put_attr(data[i], attributes[i], (uintptr_t)ptr, &d);
        if (rc == CUDA_ERROR_INVALID_VALUE && attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER)
            put_default(data[i], attributes[i]);   /* device memory: no host pointer */
        else if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}
