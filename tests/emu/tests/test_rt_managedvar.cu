/* Emulated runtime, nvcc-built program with __managed__ variables: nvcc's
 * registration (__cudaRegisterManagedVar) and first-access hook
 * (__cudaInitModule) give each variable managed storage that host code reads
 * and writes directly, and a kernel sees the same storage. */
#include <cuda_runtime.h>
#include <stdio.h>
#include "emu.h"

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)
#define CHECK_RT(call, want) do { cudaError_t e_ = (call); if (e_ != (want)) { \
        fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #call, (int)e_, \
                cudaGetErrorName(e_), (int)(want)); failures++; } } while (0)

__managed__ int managed_counter;
__managed__ double managed_table[64];

__global__ void add_to(int *p, int v)
{
    *p += v;
}

static void add_to_cpu(void **args, const emu_launch *l)
{
    (void)l;
    int *p = *(int **)args[0];
    *p += *(int *)args[1];
}

int main()
{
    size_t sizes[] = { sizeof(int *), sizeof(int) };
    CHECK(emuRegisterKernel((const void *)add_to, NULL, add_to_cpu, 2, sizes) == 0);
    CHECK(managed_counter == 0);              /* zero-initialized like any global */
    managed_counter = 5;
    managed_counter += 1;
    CHECK(managed_counter == 6);
    for (int i = 0; i < 64; i++)
        managed_table[i] = i * 0.5;
    CHECK(managed_table[63] == 31.5);

    struct cudaPointerAttributes pa;
    CHECK_RT(cudaPointerGetAttributes(&pa, &managed_counter), cudaSuccess);
    CHECK(pa.type == cudaMemoryTypeManaged);
    CHECK_RT(cudaPointerGetAttributes(&pa, &managed_table[10]), cudaSuccess);
    CHECK(pa.type == cudaMemoryTypeManaged);

    add_to<<<1, 1>>>(&managed_counter, 10);
    CHECK_RT(cudaGetLastError(), cudaSuccess);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(managed_counter == 16);

    if (failures) {
        fprintf(stderr, "test_rt_managedvar: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_rt_managedvar: ok\n");
    return 0;
}
