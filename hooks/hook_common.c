/* Helpers shared by the hook families: call counters, the answer for a
 * missing real function, pointer classification for copy events, device
 * records.
 *
 * TRAINSHIM_DEBUG_COUNTS=path (option debug_counts, a test/debug aid): at
 * exit the shim writes one line per API it saw while active,
 *     <symbol> <outermost calls> <nested calls>
 * after a "# trainshim debug counts" header.  Processes that made no hooked
 * call write nothing.  Nested calls are calls made
 * while another hooked call of the same thread was in progress (the runtime
 * calling the driver, ncclBcast calling ncclBroadcast, the shim's own calls). */
#include <stdio.h>

#include "core/config.h"
#include "hooks.h"
#include "numa/numa.h"

/* Neighbouring APIs share cache lines; the counters exist for tests and
 * debugging, not for production runs. */
uint64_t ts_calls_outer[TS_API_COUNT];
uint64_t ts_calls_nested[TS_API_COUNT];
bool ts_counts_enabled;

static const char *counts_path;

__attribute__((constructor)) static void counts_init(void)
{
    counts_path = ts_cfg()->debug_counts;
    ts_counts_enabled = counts_path && *counts_path;
}

__attribute__((destructor)) static void dump_debug_counts(void)
{
    const char *path = counts_path;
    if (!ts_counts_enabled)
        return;
    /* A process that made no CUDA call (a launcher, `timeout`, `env`, which
     * inherit LD_PRELOAD too) must not overwrite its CUDA child's file. */
    bool any = false;
    for (int i = 0; i < TS_API_COUNT && !any; i++)
        any = __atomic_load_n(&ts_calls_outer[i], __ATOMIC_RELAXED)
              || __atomic_load_n(&ts_calls_nested[i], __ATOMIC_RELAXED);
    if (!any)
        return;
    FILE *f = fopen(path, "w");
    if (!f) {
        ts_warn("cannot write TRAINSHIM_DEBUG_COUNTS file %s", path);
        return;
    }
    fprintf(f, "# trainshim debug counts: symbol outermost nested\n");
    for (int i = 0; i < TS_API_COUNT; i++) {
        uint64_t o = __atomic_load_n(&ts_calls_outer[i], __ATOMIC_RELAXED);
        uint64_t n = __atomic_load_n(&ts_calls_nested[i], __ATOMIC_RELAXED);
        if (o || n)
            fprintf(f, "%s %llu %llu\n", ts_api_name(i), (unsigned long long)o, (unsigned long long)n);
    }
    fclose(f);
}

int ts_missing(int api)
{
    static int said[TS_API_COUNT];
    /* Each library's own "not supported" answer (what the emulator's stubs
     * and a too-old library answer), so callers take their usual error path. */
    static const int not_supported[TS_LIB_COUNT] = {
        [TS_LIB_cudart] = cudaErrorNotSupported,
        [TS_LIB_cuda] = CUDA_ERROR_NOT_SUPPORTED,
        [TS_LIB_nccl] = ncclInvalidUsage,
        [TS_LIB_cublas] = CUBLAS_STATUS_NOT_SUPPORTED,
        [TS_LIB_cublasLt] = CUBLAS_STATUS_NOT_SUPPORTED,
    };
    int lib = ts_api_lib(api);
    if (api >= 0 && api < TS_API_COUNT && !__atomic_exchange_n(&said[api], 1, __ATOMIC_RELAXED))
        ts_warn("%s: no loaded %s defines it; returning %d", ts_api_name(api), ts_lib_soname(lib),
                not_supported[lib]);
    return lib >= 0 ? not_supported[lib] : 1;
}

enum ts_ptr_kind ts_classify_ptr(const void *p)
{
    ts_fn_cuPointerGetAttribute get = TS_REAL(cuPointerGetAttribute);
    unsigned int type = 0;
    /* The driver answers CUDA_ERROR_INVALID_VALUE for memory it does not know:
     * ordinary pageable host memory.  The driver API keeps no "last error",
     * so this query cannot change what the program later sees. */
    if (!get || get(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
        return TS_PTR_PAGEABLE;
    return type == CU_MEMORYTYPE_HOST ? TS_PTR_PINNED : TS_PTR_DEVICE;
}

int ts_host_kind_of(enum ts_ptr_kind k)
{
    switch (k) {
    case TS_PTR_PAGEABLE: return TS_HOST_PAGEABLE;
    case TS_PTR_PINNED: return TS_HOST_PINNED;
    default: return TS_HOST_NONE;
    }
}

int ts_copy_dir_of(enum ts_ptr_kind dst, enum ts_ptr_kind src)
{
    bool dd = dst == TS_PTR_DEVICE, sd = src == TS_PTR_DEVICE;
    return dd ? (sd ? TS_D2D : TS_H2D) : (sd ? TS_D2H : TS_H2H);
}

void ts_rt_note_error(cudaError_t e)
{
    ts_fn_cudaMalloc rt_malloc = (ts_fn_cudaMalloc)ts_real(TS_API_cudaMalloc);
    void *scratch = NULL;
    if (!rt_malloc)
        return;
    ts_enter(); /* the runtime's own driver calls are not the program's */
    switch (e) {
    case cudaErrorInvalidValue: rt_malloc(NULL, 1); break; /* no place for the pointer */
    case cudaErrorMemoryAllocation:
        /* larger than any device's memory: refused before anything is made */
        if (rt_malloc(&scratch, (size_t)1 << 62) == cudaSuccess && scratch) {
            ts_fn_cudaFree rt_free = (ts_fn_cudaFree)ts_real(TS_API_cudaFree);
            if (rt_free)
                rt_free(scratch);
        }
        break;
    default: break;
    }
    ts_leave();
}

bool ts_rt_init_context(void)
{
    ts_fn_cudaFree rt_free = (ts_fn_cudaFree)ts_real(TS_API_cudaFree);
    if (!rt_free)
        return false;
    ts_enter();
    rt_free(NULL);
    ts_leave();
    return ts_current_device() >= 0;
}

uint64_t ts_devices_seen; /* bit per device ordinal */

/* The device's record, the first time it is seen (out of line: the hot
 * allocation hooks call ts_note_device every time). */
static __attribute__((noinline)) void record_device(int dev, uint64_t bit)
{
    ts_fn_cuDeviceGetName get_name = TS_REAL(cuDeviceGetName);
    ts_fn_cuDeviceTotalMem_v2 get_mem = TS_REAL(cuDeviceTotalMem_v2);
    ts_fn_cuDeviceGetAttribute get_attr = TS_REAL(cuDeviceGetAttribute);
    ts_fn_cuDeviceGetPCIBusId get_pci = TS_REAL(cuDeviceGetPCIBusId);
    char name[256] = "", pci[32] = "";
    size_t total = 0;
    int major = 0, minor = 0, sms = 0;
    /* Before the driver is initialized (cudaGetDevice may come first) the
     * queries fail: record nothing yet, a later call will. */
    if (!get_name || get_name(name, sizeof name, dev) != CUDA_SUCCESS)
        return;
    if (get_mem && get_mem(&total, dev) != CUDA_SUCCESS)
        total = 0;
    if (get_attr) {
        if (get_attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS)
            major = 0;
        if (get_attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS)
            minor = 0;
        if (get_attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS)
            sms = 0;
    }
    if (get_pci && get_pci(pci, sizeof pci, dev) != CUDA_SUCCESS)
        pci[0] = 0;
    if (__atomic_fetch_or(&ts_devices_seen, bit, __ATOMIC_RELAXED) & bit)
        return; /* another thread recorded it */
    ts_ev_device(dev, name, (uint64_t)total, major, minor, sms, pci);
}

void ts_note_device_slow(int dev)
{
    ts_numa_at_context(); /* the first context: NUMA facts and binding */
    if (dev < 0 || dev >= 64)
        return;
    uint64_t bit = 1ull << dev;
    if (ts_unlikely(!(__atomic_load_n(&ts_devices_seen, __ATOMIC_RELAXED) & bit)))
        record_device(dev, bit);
}
