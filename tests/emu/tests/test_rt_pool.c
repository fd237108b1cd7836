/* Emulated runtime stream-ordered allocation: cudaMallocAsync/cudaFreeAsync
 * on the device's default pool (the attributes PyTorch's cudaMallocAsync
 * backend reads), explicit pools with cudaMallocFromPoolAsync, trimming, the
 * device's current pool, and the _ptsz forms. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)
#define CHECK_RT(call, want) do { cudaError_t e_ = (call); if (e_ != (want)) { \
        fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #call, (int)e_, \
                cudaGetErrorName(e_), (int)(want)); failures++; } } while (0)

cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t s);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t s);

static uint64_t attr64(cudaMemPool_t pool, enum cudaMemPoolAttr a)
{
    uint64_t v = 0;
    CHECK_RT(cudaMemPoolGetAttribute(pool, a, &v), cudaSuccess);
    return v;
}

static void test_default_pool(void)
{
    cudaMemPool_t pool = NULL, cur = NULL;
    CHECK_RT(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    CHECK(pool != NULL);
    CHECK_RT(cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
    CHECK(cur == pool);
    CHECK_RT(cudaDeviceGetDefaultMemPool(&pool, 3), cudaErrorInvalidDevice);
    (void)cudaGetLastError();
    CHECK_RT(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    /* the CUDA 13 location-based form names the same pool */
    struct cudaMemLocation loc = { .type = cudaMemLocationTypeDevice, .id = 0 };
    cudaMemPool_t by_loc = NULL;
    CHECK_RT(cudaMemGetDefaultMemPool(&by_loc, &loc, cudaMemAllocationTypePinned), cudaSuccess);
    CHECK(by_loc == pool);

    /* PyTorch's setup */
    uint64_t threshold = UINT64_MAX;
    CHECK_RT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), cudaSuccess);
    int one = 1;
    CHECK_RT(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseFollowEventDependencies, &one), cudaSuccess);
    CHECK_RT(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &one), cudaSuccess);
    CHECK_RT(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &one), cudaSuccess);
    CHECK(attr64(pool, cudaMemPoolAttrReleaseThreshold) == UINT64_MAX);

    cudaStream_t s;
    CHECK_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    uint64_t used0 = attr64(pool, cudaMemPoolAttrUsedMemCurrent);
    void *a = NULL, *b = NULL;
    CHECK_RT(cudaMallocAsync(&a, 1 << 20, s), cudaSuccess);
    CHECK_RT(cudaMallocAsync(&b, 3 << 20, s), cudaSuccess);
    CHECK(a && b && a != b);
    CHECK(attr64(pool, cudaMemPoolAttrUsedMemCurrent) >= used0 + (4 << 20));
    CHECK(attr64(pool, cudaMemPoolAttrReservedMemCurrent) >= (4 << 20));
    CHECK_RT(cudaMemsetAsync(a, 0x11, 1 << 20, s), cudaSuccess);
    unsigned char probe[16];
    CHECK_RT(cudaMemcpyAsync(probe, a, sizeof probe, cudaMemcpyDeviceToHost, s), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(probe[0] == 0x11 && probe[15] == 0x11);
    struct cudaPointerAttributes pa;
    CHECK_RT(cudaPointerGetAttributes(&pa, b), cudaSuccess);
    CHECK(pa.type == cudaMemoryTypeDevice);
    CHECK_RT(cudaFreeAsync(a, s), cudaSuccess);
    CHECK_RT(cudaFreeAsync(b, s), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(attr64(pool, cudaMemPoolAttrUsedMemCurrent) == used0);
    CHECK(attr64(pool, cudaMemPoolAttrUsedMemHigh) >= used0 + (4 << 20));
    /* empty_cache: trim everything unused */
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
    CHECK_RT(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    CHECK(attr64(pool, cudaMemPoolAttrReservedMemCurrent) <= attr64(pool, cudaMemPoolAttrUsedMemCurrent) + (2 << 20));

    /* size 0 and NULL */
    void *z = (void *)1;
    CHECK_RT(cudaMallocAsync(&z, 0, s), cudaSuccess);
    CHECK(z == NULL);
    CHECK_RT(cudaFreeAsync(NULL, s), cudaSuccess);
    CHECK_RT(cudaMallocAsync(NULL, 16, s), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    /* per-thread stream forms */
    void *c = NULL;
    CHECK_RT(cudaMallocAsync_ptsz(&c, 4096, 0), cudaSuccess);
    CHECK(c != NULL);
    CHECK_RT(cudaFreeAsync_ptsz(c, 0), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
    CHECK_RT(cudaStreamDestroy(s), cudaSuccess);
}

static void test_explicit_pool(void)
{
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool = NULL;
    CHECK_RT(cudaMemPoolCreate(&pool, &props), cudaSuccess);
    CHECK(pool != NULL);
    void *p = NULL;
    CHECK_RT(cudaMallocFromPoolAsync(&p, 1 << 20, pool, 0), cudaSuccess);
    CHECK(p != NULL);
    CHECK(attr64(pool, cudaMemPoolAttrUsedMemCurrent) >= (1 << 20));
    struct cudaMemLocation loc = { .type = cudaMemLocationTypeDevice, .id = 0 };
    enum cudaMemAccessFlags f = cudaMemAccessFlagsProtNone;
    CHECK_RT(cudaMemPoolGetAccess(&f, pool, &loc), cudaSuccess);
    CHECK(f == cudaMemAccessFlagsProtReadWrite);
    CHECK_RT(cudaFreeAsync(p, 0), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(0), cudaSuccess);
    CHECK(attr64(pool, cudaMemPoolAttrUsedMemCurrent) == 0);

    /* the device's current pool serves cudaMallocAsync */
    cudaMemPool_t def = NULL, cur = NULL;
    CHECK_RT(cudaDeviceGetDefaultMemPool(&def, 0), cudaSuccess);
    CHECK_RT(cudaDeviceSetMemPool(0, pool), cudaSuccess);
    CHECK_RT(cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
    CHECK(cur == pool);
    CHECK_RT(cudaMallocAsync(&p, 1 << 20, 0), cudaSuccess);
    CHECK(attr64(pool, cudaMemPoolAttrUsedMemCurrent) >= (1 << 20));
    CHECK_RT(cudaFreeAsync(p, 0), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(0), cudaSuccess);
    CHECK_RT(cudaDeviceSetMemPool(0, def), cudaSuccess);
    /* the CUDA 13 location-based forms see and set the same current pool */
    struct cudaMemLocation dev0 = { .type = cudaMemLocationTypeDevice, .id = 0 };
    CHECK_RT(cudaMemSetMemPool(&dev0, cudaMemAllocationTypePinned, pool), cudaSuccess);
    CHECK_RT(cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
    CHECK(cur == pool);
    cudaMemPool_t by_loc = NULL;
    CHECK_RT(cudaMemGetMemPool(&by_loc, &dev0, cudaMemAllocationTypePinned), cudaSuccess);
    CHECK(by_loc == pool);
    CHECK_RT(cudaDeviceSetMemPool(0, def), cudaSuccess);
    CHECK_RT(cudaMemPoolDestroy(pool), cudaSuccess);
}

int main(void)
{
    test_default_pool();
    test_explicit_pool();
    if (failures) {
        fprintf(stderr, "test_rt_pool: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_rt_pool: ok\n");
    return 0;
}
