/* Emulated runtime, sticky errors and driver error mapping: a kernel that
 * touches unmapped device memory makes cudaErrorIllegalAddress sticky
 * (cudaGetLastError returns it every time, device calls fail with it) until
 * cudaDeviceReset; injected driver errors reach the caller as their runtime
 * equivalents. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu.h"

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)
#define CHECK_RT(call, want) do { cudaError_t e_ = (call); if (e_ != (want)) { \
        fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #call, (int)e_, \
                cudaGetErrorName(e_), (int)(want)); failures++; } } while (0)

/* A pure-C program's kernel: any unique address stands for the host stub. */
static const char poke_kernel_id = 0;
static void poke_impl(void **args, const emu_launch *launch)
{
    (void)launch;
    volatile int *p = *(int **)args[0];
    *p = 1;
}

static void test_sticky_illegal_address(void)
{
    size_t sz = sizeof(int *);
    CHECK(emuRegisterKernel(&poke_kernel_id, NULL, poke_impl, 1, &sz) == 0);
    char *d = NULL;
    CHECK_RT(cudaMalloc((void **)&d, 1 << 20), cudaSuccess);
    /* a legal launch first */
    int *ok_target = (int *)d;
    void *args[] = { &ok_target };
    dim3 one = {1, 1, 1};
    CHECK_RT(cudaLaunchKernel(&poke_kernel_id, one, one, args, 0, 0), cudaSuccess);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
    int v = 0;
    CHECK_RT(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(v == 1);

    CHECK_RT(cudaFree(d), cudaSuccess);

    /* Mapped device memory without access rights (cuMemMap before
     * cuMemSetAccess): touching it faults on a GPU. */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    CHECK(cuMemCreate(&h, gran, &prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemAddressReserve(&va, gran, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va, gran, 0, h, 0) == CUDA_SUCCESS);
    int *bad = (int *)(uintptr_t)va;
    void *bad_args[] = { &bad };
    CHECK_RT(cudaLaunchKernel(&poke_kernel_id, one, one, bad_args, 0, 0), cudaSuccess);   /* asynchronous */
    CHECK_RT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    CHECK_RT(cudaGetLastError(), cudaErrorIllegalAddress);
    CHECK_RT(cudaGetLastError(), cudaErrorIllegalAddress);   /* sticky: not cleared */
    CHECK_RT(cudaPeekAtLastError(), cudaErrorIllegalAddress);
    void *p = NULL;
    CHECK_RT(cudaMalloc(&p, 64), cudaErrorIllegalAddress);
    CHECK_RT(cudaStreamSynchronize(0), cudaErrorIllegalAddress);
    /* queries that do not touch the device still answer */
    int n = 0;
    CHECK_RT(cudaGetDeviceCount(&n), cudaSuccess);
    CHECK(strcmp(cudaGetErrorString(cudaErrorIllegalAddress), "an illegal memory access was encountered") == 0);

    /* reset recovers the device */
    CHECK_RT(cudaDeviceReset(), cudaSuccess);
    CHECK_RT(cudaGetLastError(), cudaSuccess);
    CHECK_RT(cudaMalloc(&p, 64), cudaSuccess);
    v = 7;
    CHECK_RT(cudaMemcpy(p, &v, sizeof v, cudaMemcpyHostToDevice), cudaSuccess);
    v = 0;
    CHECK_RT(cudaMemcpy(&v, p, sizeof v, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(v == 7);
    CHECK_RT(cudaFree(p), cudaSuccess);
}

static void test_reset_releases_allocations(void)
{
    size_t free0 = 0, total = 0, free1 = 0, free2 = 0;
    CHECK_RT(cudaMemGetInfo(&free0, &total), cudaSuccess);
    void *p = NULL;
    CHECK_RT(cudaMalloc(&p, 256 << 20), cudaSuccess);
    CHECK_RT(cudaMemGetInfo(&free1, &total), cudaSuccess);
    CHECK(free1 + (256 << 20) <= free0);
    CHECK_RT(cudaDeviceReset(), cudaSuccess);
    CHECK_RT(cudaMemGetInfo(&free2, &total), cudaSuccess);
    CHECK(free2 >= free0);
    /* the old pointer is gone with the context */
    struct cudaPointerAttributes a;
    CHECK_RT(cudaPointerGetAttributes(&a, p), cudaSuccess);
    CHECK(a.type != cudaMemoryTypeDevice);
}

static void test_injected_errors(void)
{
    void *p = NULL;
    CHECK(emuSetFault("cuMemAlloc_v2:1:CUDA_ERROR_OUT_OF_MEMORY") == 0);
    CHECK_RT(cudaMalloc(&p, 64), cudaErrorMemoryAllocation);
    CHECK_RT(cudaGetLastError(), cudaErrorMemoryAllocation);
    CHECK_RT(cudaMalloc(&p, 64), cudaSuccess);   /* only the first call failed */
    CHECK_RT(cudaFree(p), cudaSuccess);
    CHECK(emuSetFault("cuStreamCreate:1:CUDA_ERROR_INVALID_VALUE") == 0);
    cudaStream_t s;
    CHECK_RT(cudaStreamCreate(&s), cudaErrorInvalidValue);
    CHECK(emuSetFault("cuEventCreate:1:CUDA_ERROR_NOT_INITIALIZED") == 0);
    cudaEvent_t e;
    CHECK_RT(cudaEventCreate(&e), cudaErrorInitializationError);
    CHECK(emuSetFault("cuStreamQuery:1:CUDA_ERROR_NOT_READY") == 0);
    CHECK_RT(cudaStreamQuery(0), cudaErrorNotReady);
    CHECK(emuSetFault("") == 0);
    (void)cudaGetLastError();
}

int main(void)
{
    test_sticky_illegal_address();
    test_reset_releases_allocations();
    test_injected_errors();
    if (failures) {
        fprintf(stderr, "test_rt_sticky: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_rt_sticky: ok\n");
    return 0;
}
