/* test_devmem_report: a program whose device pool is reset once and then
 * refuses an allocation larger than the device.  Run by
 * test_devmem_report.sh with EMU_DEVICE_MEMORY=256MiB under the shim (the
 * script then checks the log's pool records); on its own (run.sh runs it
 * without the shim too) it checks that the calls answer as CUDA does. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "check.h"

#define MIB ((size_t)1 << 20)

/* n buffers of 16 MiB, freed, then again (the second round is served from
 * the pool's cache under the shim). */
static void churn(int n)
{
    void *buf[8];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < n; i++) {
            cudaError_t r = cudaMalloc(&buf[i], 16 * MIB);
            CHECK(r == cudaSuccess, "cudaMalloc 16 MiB #%d round %d: %d", i, round, (int)r);
            if (r != cudaSuccess) buf[i] = NULL;
        }
        for (int i = 0; i < n; i++)
            if (buf[i]) CHECK(cudaFree(buf[i]) == cudaSuccess, "cudaFree #%d", i);
    }
}

int main(void)
{
    churn(4);
    CHECK(cudaDeviceReset() == cudaSuccess, "cudaDeviceReset");
    churn(2);
    void *p = NULL;
    cudaError_t r = cudaMalloc(&p, (size_t)1 << 40);
    CHECK(r == cudaErrorMemoryAllocation, "1 TiB cudaMalloc: %d, want cudaErrorMemoryAllocation", (int)r);
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "last error after the OOM");
    CHECK(cudaGetLastError() == cudaSuccess, "the OOM is not sticky");
    churn(1);
    if (failures) return 1;
    printf("devmem report program ok\n");
    return 0;
}
