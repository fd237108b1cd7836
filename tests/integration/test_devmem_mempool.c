/* test_devmem_mempool: the device's default memory pool as a program reads
 * it (torch's cudaMallocAsync backend does so for memory_allocated and
 * friends), run with and without the shim; the script compares the outputs.
 *
 * Printed (must be identical): the used-memory attributes, current and high,
 * through the runtime and the driver, after a fixed sequence of
 * cudaMallocAsync / cudaFreeAsync / cuMemAllocAsync (with a cudaMalloc
 * block alive, which the pool does not hold), after setting the
 * highs to 0 (a reset to the current value) and after cudaMemPoolTrimTo; the
 * answers to bad sets (a high set to non-zero, a current set); the release
 * threshold and reuse flags as set; a pool the program creates itself, which
 * is the driver's alone, also while it is the device's current pool (then
 * cudaMallocAsync's: the default pool's figures do not move until the
 * default is current again).
 * Checked here (each allocator's pages differ, so not printed): reserved
 * current is at least used current, reserved high at least reserved
 * current, equal to it after the reset, and 0 after everything is freed and
 * the pool trimmed to 0, and not holding the cudaMalloc blocks as reserved. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"

static uint64_t rt_attr(cudaMemPool_t p, enum cudaMemPoolAttr a)
{
    uint64_t v = 0;
    cudaError_t e = cudaMemPoolGetAttribute(p, a, &v);
    CHECK(e == cudaSuccess, "get %d: %d", (int)a, (int)e);
    return v;
}

static uint64_t drv_attr(CUmemoryPool p, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    CUresult e = cuMemPoolGetAttribute(p, a, &v);
    CHECK(e == CUDA_SUCCESS, "cu get %d: %d", (int)a, (int)e);
    return v;
}

static void show(const char *tag, cudaMemPool_t p)
{
    uint64_t used = rt_attr(p, cudaMemPoolAttrUsedMemCurrent), used_high = rt_attr(p, cudaMemPoolAttrUsedMemHigh);
    uint64_t res = rt_attr(p, cudaMemPoolAttrReservedMemCurrent);
    uint64_t res_high = rt_attr(p, cudaMemPoolAttrReservedMemHigh);
    CHECK(drv_attr((CUmemoryPool)p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == used, "%s: driver used", tag);
    CHECK(drv_attr((CUmemoryPool)p, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) == res_high, "%s: driver high", tag);
    CHECK(res >= used, "%s: reserved %llu < used %llu", tag, (unsigned long long)res, (unsigned long long)used);
    CHECK(res_high >= res, "%s: reserved high %llu < %llu", tag, (unsigned long long)res_high,
          (unsigned long long)res);
    printf("%s used %llu used_high %llu\n", tag, (unsigned long long)used, (unsigned long long)used_high);
}

int main(void)
{
    cudaSetDevice(0);
    cudaFree(0);
    cudaMemPool_t pool = NULL, current = NULL;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess, "default pool");
    CHECK(cudaDeviceGetMemPool(&current, 0) == cudaSuccess && current == pool, "current pool");
    CUmemoryPool cu_pool = NULL;
    CHECK(cuDeviceGetDefaultMemPool(&cu_pool, 0) == CUDA_SUCCESS && (void *)cu_pool == (void *)pool, "cu pool");
    uint64_t never = UINT64_MAX;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &never) == cudaSuccess, "threshold");
    int on = 1;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &on) == cudaSuccess, "reuse");
    cudaStream_t s;
    cudaStreamCreate(&s);
    show("start", pool);
    /* synchronous memory is not the pool's: it must not count as used */
    void *sync_block = NULL, *sync_big = NULL;
    CHECK(cudaMalloc(&sync_block, 3 << 20) == cudaSuccess, "cudaMalloc");
    CHECK(cudaMalloc(&sync_big, 64 << 20) == cudaSuccess, "cudaMalloc 64 MiB");
    show("cudaMalloc", pool);
    /* nor reserved: no CUDA pool holds it (a library's cudaMalloc, like
     * cuBLAS's workspace, must not show in torch's memory_reserved).  The
     * driver's pool shows 0; trainshim serves both kinds from the same
     * pages, and the rest of a page or segment a synchronous block leaves
     * is the pool's cache, which may show; the blocks themselves may not. */
    CHECK(rt_attr(pool, cudaMemPoolAttrReservedMemCurrent) < (64 << 20), "reserved with only cudaMalloc blocks: %llu",
          (unsigned long long)rt_attr(pool, cudaMemPoolAttrReservedMemCurrent));
    CHECK(rt_attr(pool, cudaMemPoolAttrReservedMemHigh) < (64 << 20), "reserved high with only cudaMalloc blocks: %llu",
          (unsigned long long)rt_attr(pool, cudaMemPoolAttrReservedMemHigh));
    /* some not a multiple of 256: used memory counts the bytes asked for */
    static const size_t sizes[] = { 4 << 20, 512, 8192, (3 << 20) + 4, 100, 1 << 20, 96 << 10, 6 << 20, 1000, 24 << 20 };
    void *live[16];
    int n = 0;
    char tag[32];
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        CHECK(cudaMallocAsync(&live[n++], sizes[i], s) == cudaSuccess, "alloc %u", i);
        if (i % 3 == 2) {
            cudaFreeAsync(live[0], s);
            for (int k = 1; k < n; k++)
                live[k - 1] = live[k];
            n--;
        }
        snprintf(tag, sizeof tag, "alloc%u", i);
        show(tag, pool);
    }
    CUdeviceptr d = 0;
    CHECK(cuMemAllocAsync(&d, 5 << 20, (CUstream)s) == CUDA_SUCCESS, "cu alloc");
    show("cu_alloc", pool);
    cuMemFreeAsync(d, (CUstream)s);
    cudaStreamSynchronize(s);
    show("cu_free", pool);

    uint64_t zero = 0, one = 1;
    printf("set used_high 1: %d\n", (int)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &one));
    printf("set used current: %d\n", (int)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &zero));
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero) == cudaSuccess, "reset used");
    CHECK(cuMemPoolSetAttribute((CUmemoryPool)pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero) == CUDA_SUCCESS,
          "reset reserved");
    CHECK(rt_attr(pool, cudaMemPoolAttrReservedMemHigh) == rt_attr(pool, cudaMemPoolAttrReservedMemCurrent),
          "reserved high after the reset");
    show("reset", pool);
    while (n > 1)
        cudaFreeAsync(live[--n], s);
    cudaStreamSynchronize(s);
    show("freed", pool);
    cudaFree(sync_block);
    cudaFree(sync_big);
    CHECK(cudaMemPoolTrimTo(pool, 0) == cudaSuccess, "trim");
    show("trimmed", pool);
    cudaFreeAsync(live[0], s);
    cudaStreamSynchronize(s);
    CHECK(cuMemPoolTrimTo((CUmemoryPool)pool, 0) == CUDA_SUCCESS, "cu trim");
    show("all_trimmed", pool);
    CHECK(rt_attr(pool, cudaMemPoolAttrReservedMemCurrent) == 0, "reserved after the last trim: %llu",
          (unsigned long long)rt_attr(pool, cudaMemPoolAttrReservedMemCurrent));
    uint64_t thr = 0;
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr);
    int reuse = 0;
    cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse);
    printf("threshold %llu reuse %d\n", (unsigned long long)thr, reuse);

    /* the program's own pool: the driver's figures */
    struct cudaMemPoolProps props = { .allocType = cudaMemAllocationTypePinned,
                               .location = { .type = cudaMemLocationTypeDevice, .id = 0 } };
    cudaMemPool_t mine = NULL;
    CHECK(cudaMemPoolCreate(&mine, &props) == cudaSuccess, "create");
    void *q = NULL;
    CHECK(cudaMallocFromPoolAsync(&q, 3 << 20, mine, s) == cudaSuccess, "from pool");
    printf("own pool used %llu reserved %llu; default used %llu\n",
           (unsigned long long)rt_attr(mine, cudaMemPoolAttrUsedMemCurrent),
           (unsigned long long)rt_attr(mine, cudaMemPoolAttrReservedMemCurrent),
           (unsigned long long)rt_attr(pool, cudaMemPoolAttrUsedMemCurrent));
    cudaFreeAsync(q, s);
    cudaStreamSynchronize(s);

    /* made the device's current pool, it serves cudaMallocAsync (the driver's
     * and the runtime's), until the default is current again: set back, or
     * the program's pool destroyed while current */
    for (int round = 0; round < 2; round++) {
        CHECK(cudaDeviceSetMemPool(0, mine) == cudaSuccess, "set current %d", round);
        cudaMemPool_t cur = NULL;
        CHECK(cudaDeviceGetMemPool(&cur, 0) == cudaSuccess && cur == mine, "current is mine");
        void *r = NULL;
        CUdeviceptr d = 0;
        CHECK(cudaMallocAsync(&r, (5 << 20) + 3, s) == cudaSuccess, "async from the current pool");
        CHECK(cuMemAllocAsync(&d, 1 << 20, (CUstream)s) == CUDA_SUCCESS, "driver async from the current pool");
        printf("current own pool %d: own used %llu; default used %llu\n", round,
               (unsigned long long)rt_attr(mine, cudaMemPoolAttrUsedMemCurrent),
               (unsigned long long)rt_attr(pool, cudaMemPoolAttrUsedMemCurrent));
        cudaFreeAsync(r, s);
        cuMemFreeAsync(d, (CUstream)s);
        cudaStreamSynchronize(s);
        if (round == 0)
            CHECK(cudaDeviceSetMemPool(0, pool) == cudaSuccess, "default current again");
        else
            CHECK(cudaMemPoolDestroy(mine) == cudaSuccess, "destroy the current pool");
        CHECK(cudaMallocAsync(&r, 7 << 20, s) == cudaSuccess, "async after %d", round);
        printf("default current again (%s): own used %llu; default used %llu\n", round ? "destroyed" : "set",
               round ? 0ull : (unsigned long long)rt_attr(mine, cudaMemPoolAttrUsedMemCurrent),
               (unsigned long long)rt_attr(pool, cudaMemPoolAttrUsedMemCurrent));
        cudaFreeAsync(r, s);
        cudaStreamSynchronize(s);
    }
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
