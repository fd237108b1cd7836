/* test_devmem_driver_reset: a program that resets the device through the
 * driver (cuDevicePrimaryCtxReset, as a library on the driver API may),
 * not cudaDeviceReset: "destroys all allocations and resets all state" on
 * the primary context, so memory a pool kept cached is gone too.  It resets
 * twice: through cuDevicePrimaryCtxReset_v2 (what cuda.h's name means
 * today) and through the CUDA 10 export cuDevicePrimaryCtxReset, which
 * binaries built against older headers call (found by name, as their
 * dynamic linker would).  Buffers are written and read back before and
 * after each; run.sh runs it plain, test_devmem_driver_reset.sh under the
 * shim (whose pool must start anew at each reset, not hand out its old
 * pages).  Before the resets, a stream made through the driver is used and
 * destroyed through the CUDA 10 export cuStreamDestroy: the pool must
 * forget it (its later synchronous frees fence every stream it knows). */
#include <cuda.h>
#include <dlfcn.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

#define MIB ((size_t)1 << 20)
static unsigned char host[16 * MIB];

/* n buffers of 16 MiB written with their own byte and read back, freed;
 * twice (the second round is served from the pool's cache under the shim). */
static void churn(int n, int salt)
{
    void *buf[4];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < n; i++) {
            cudaError_t r = cudaMalloc(&buf[i], 16 * MIB);
            CHECK(r == cudaSuccess, "cudaMalloc #%d round %d: %d", i, round, (int)r);
            if (r != cudaSuccess) {
                buf[i] = NULL;
                continue;
            }
            int v = (salt * 16 + round * 4 + i) & 0xff;
            CHECK(cudaMemset(buf[i], v, 16 * MIB) == cudaSuccess, "cudaMemset #%d", i);
            memset(host, 0, sizeof host);
            r = cudaMemcpy(host, buf[i], 16 * MIB, cudaMemcpyDeviceToHost);
            CHECK(r == cudaSuccess, "cudaMemcpy #%d round %d: %d", i, round, (int)r);
            CHECK(host[0] == v && host[16 * MIB - 1] == v, "buffer #%d round %d reads %d..%d, wrote %d", i, round,
                  host[0], host[16 * MIB - 1], v);
        }
        for (int i = 0; i < n; i++)
            if (buf[i]) CHECK(cudaFree(buf[i]) == cudaSuccess, "cudaFree #%d", i);
    }
}

/* LEGACY_STREAMS driver streams, each used by the pool (a stream-ordered
 * block freed on it), then destroyed through the old name. */
#define LEGACY_STREAMS 100
static void legacy_stream_destroy(void)
{
    CHECK(cudaFree(NULL) == cudaSuccess, "the runtime's context, current for the driver calls");
    CUresult (*legacy_destroy)(CUstream) = (CUresult(*)(CUstream))dlsym(RTLD_DEFAULT, "cuStreamDestroy");
    CHECK(legacy_destroy != NULL, "no cuStreamDestroy export");
    for (int i = 0; i < LEGACY_STREAMS && legacy_destroy; i++) {
        CUstream s = NULL;
        void *p = NULL;
        CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "cuStreamCreate #%d", i);
        CHECK(cudaMallocAsync(&p, 4 * MIB, (cudaStream_t)s) == cudaSuccess, "cudaMallocAsync #%d", i);
        CHECK(cudaMemsetAsync(p, 7, 4 * MIB, (cudaStream_t)s) == cudaSuccess, "cudaMemsetAsync #%d", i);
        CHECK(cudaFreeAsync(p, (cudaStream_t)s) == cudaSuccess, "cudaFreeAsync #%d", i);
        CHECK(legacy_destroy(s) == CUDA_SUCCESS, "cuStreamDestroy (CUDA 10 name) #%d", i);
    }
}

int main(void)
{
    legacy_stream_destroy();
    churn(3, 1);
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS, "cuDeviceGet");
    CHECK(cuDevicePrimaryCtxReset(dev) == CUDA_SUCCESS, "cuDevicePrimaryCtxReset_v2");
    churn(3, 2);
    CUresult (*legacy_reset)(CUdevice) = (CUresult(*)(CUdevice))dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxReset");
    CHECK(legacy_reset != NULL, "no cuDevicePrimaryCtxReset export");
    if (legacy_reset)
        CHECK(legacy_reset(dev) == CUDA_SUCCESS, "cuDevicePrimaryCtxReset (CUDA 10 name)");
    churn(3, 3);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize");
    if (failures) return 1;
    printf("driver reset program ok\n");
    return 0;
}
