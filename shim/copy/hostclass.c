/* hostclass.c: cheap classification of the host side of a copy.
 *
 * Ranges the shim saw become pinned (its staging buffers, the pinned host
 * allocations it serves) are kept in a sorted table and answered without a
 * driver call; any other pointer is classified with one cuPointerGetAttribute
 * query per call (nothing is cached for them: a range may be registered or
 * unregistered at any time).  The driver API keeps no "last error", so the
 * query cannot change what the program later sees from cudaGetLastError. */
#include <pthread.h>
#include <string.h>

#include "copy/copy_engine.h"
#include "core/cuda_real.h"

enum { MAX_RANGES = 8192 };

struct range {
    uintptr_t start, end;
};

static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct range table[MAX_RANGES]; /* sorted by start, disjoint */
static int n_ranges;

/* Index of the first range with start > p. */
static int upper_bound(uintptr_t p)
{
    int lo = 0, hi = n_ranges;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (table[mid].start <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void ts_hostclass_add(const void *p, size_t n)
{
    uintptr_t s = (uintptr_t)p;
    pthread_rwlock_wrlock(&table_lock);
    if (n_ranges < MAX_RANGES) { /* a full table only costs driver queries */
        int i = upper_bound(s);
        memmove(&table[i + 1], &table[i], (size_t)(n_ranges - i) * sizeof table[0]);
        table[i] = (struct range){ s, s + n };
        n_ranges++;
    }
    pthread_rwlock_unlock(&table_lock);
}

void ts_hostclass_remove(const void *p)
{
    uintptr_t s = (uintptr_t)p;
    pthread_rwlock_wrlock(&table_lock);
    int i = upper_bound(s) - 1;
    if (i >= 0 && table[i].start == s) {
        memmove(&table[i], &table[i + 1], (size_t)(n_ranges - i - 1) * sizeof table[0]);
        n_ranges--;
    }
    pthread_rwlock_unlock(&table_lock);
}

static bool known_pinned(uintptr_t p)
{
    bool hit = false;
    pthread_rwlock_rdlock(&table_lock);
    int i = upper_bound(p) - 1;
    if (i >= 0 && p < table[i].end)
        hit = true;
    pthread_rwlock_unlock(&table_lock);
    return hit;
}

enum ts_host_class ts_hostclass(const void *p)
{
    if (known_pinned((uintptr_t)p))
        return TS_HC_PINNED;
    ts_cuda_fn_cuPointerGetAttribute get = TS_CUDA_REAL(cuPointerGetAttribute);
    unsigned int type = 0, managed = 0;
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
    if (!get || get(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d) != CUDA_SUCCESS)
        return TS_HC_PAGEABLE; /* unknown to the driver: ordinary host memory */
    if (type == CU_MEMORYTYPE_HOST)
        return TS_HC_PINNED;
    if (get(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d) == CUDA_SUCCESS && managed)
        return TS_HC_MANAGED;
    return TS_HC_DEVICE;
}

bool ts_hostclass_device_range(const void *p, size_t n)
{
    ts_cuda_fn_cuPointerGetAttribute get = TS_CUDA_REAL(cuPointerGetAttribute);
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)p, start = 0;
    unsigned int type = 0, managed = 1;
    size_t size = 0;
    if (!get)
        return false;
    if (get(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d) != CUDA_SUCCESS || type != CU_MEMORYTYPE_DEVICE)
        return false;
    if (get(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d) != CUDA_SUCCESS || managed)
        return false;
    if (get(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d) != CUDA_SUCCESS)
        return false;
    if (get(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d) != CUDA_SUCCESS)
        return false;
    return d >= start && n <= size && d - start <= size - n;
}

bool ts_hostclass_driver_pinned(const void *p)
{
    ts_cuda_fn_cuPointerGetAttribute get = TS_CUDA_REAL(cuPointerGetAttribute);
    unsigned int type = 0;
    return get && get(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS
           && type == CU_MEMORYTYPE_HOST;
}
