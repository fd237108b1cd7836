/* test_drv_mem_context: memory, copy and memset entry points check the
 * driver state first, as cuda.h documents: before cuInit every one returns
 * CUDA_ERROR_NOT_INITIALIZED; after it, those whose return list names
 * CUDA_ERROR_INVALID_CONTEXT (allocation, pinned host memory, copies,
 * memsets, stream-ordered allocation, legacy IPC) need a current context,
 * while VMM, pools and pointer queries (no context in their lists) work
 * without one. */
#include "driver/mem_testutil.h"

#include <pthread.h>
#include <stdint.h>

static char host[4096];

/* Every context-bound entry point must answer `want` (and touch nothing). */
static void expect_ctx_calls(CUresult want, CUdeviceptr dev, const char *when)
{
    CUdeviceptr d = 0;
    size_t pitch = 0, free_b = 0, total = 0;
    void *p = NULL;
    int before = et_failures;
    EXPECT_RC(cuMemAlloc(&d, 256), want);
    EXPECT(d == 0);
    EXPECT_RC(cuMemAllocPitch(&d, &pitch, 64, 4, 4), want);
    EXPECT_RC(cuMemGetInfo(&free_b, &total), want);
    EXPECT_RC(cuMemHostAlloc(&p, 4096, 0), want);
    EXPECT(p == NULL);
    EXPECT_RC(cuMemAllocHost(&p, 4096), want);
    EXPECT_RC(cuMemHostRegister(host, sizeof host, 0), want);
    EXPECT_RC(cuMemAllocManaged(&d, 4096, CU_MEM_ATTACH_GLOBAL), want);
    EXPECT_RC(cuMemAllocAsync(&d, 256, 0), want);
    EXPECT_RC(cuMemcpyHtoD(dev, host, 16), want);
    EXPECT_RC(cuMemcpyDtoH(host, dev, 16), want);
    EXPECT_RC(cuMemcpyDtoD(dev, dev + 64, 16), want);
    EXPECT_RC(cuMemcpyHtoDAsync(dev, host, 16, 0), want);
    EXPECT_RC(cuMemcpy(dev, dev + 64, 16), want);
    EXPECT_RC(cuMemcpyAsync(dev, dev + 64, 16, 0), want);
    EXPECT_RC(cuMemsetD8(dev, 1, 16), want);
    EXPECT_RC(cuMemsetD32Async(dev, 1, 4, 0), want);
    EXPECT_RC(cuMemsetD2D16(dev, 64, 1, 8, 2), want);
    CUDA_MEMCPY2D c2 = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = 16,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = 16,
                        .WidthInBytes = 16, .Height = 2};
    EXPECT_RC(cuMemcpy2D(&c2), want);
    CUipcMemHandle ih;
    EXPECT_RC(cuIpcGetMemHandle(&ih, dev), want);
    if (dev) {
        /* Freeing needs a context too: the block must survive the refusal. */
        EXPECT_RC(cuMemFree(dev), want);
        CUdeviceptr base = 0;
        EXPECT_RC(cuMemGetAddressRange(&base, NULL, dev), want);
    }
    if (et_failures != before) fprintf(stderr, "  (%s)\n", when);
}

/* VMM needs an initialized driver but no context. */
static void expect_vmm(CUresult want)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t gran = 0;
    EXPECT_RC(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), want);
    CUdeviceptr va = 0;
    EXPECT_RC(cuMemAddressReserve(&va, (size_t)2 << 20, 0, 0, 0), want);
    if (want == CUDA_SUCCESS) {
        EXPECT(gran == (size_t)2 << 20);
        CUmemGenericAllocationHandle h = 0;
        OK(cuMemCreate(&h, gran, &prop, 0));
        OK(cuMemMap(va, gran, 0, h, 0));
        OK(cuMemUnmap(va, gran));
        OK(cuMemRelease(h));
        OK(cuMemAddressFree(va, (size_t)2 << 20));
    }
}

struct thread_arg { CUdeviceptr dev; CUcontext ctx; };

/* A new thread has no current context until it sets one. */
static void *other_thread(void *p)
{
    struct thread_arg *a = p;
    expect_ctx_calls(CUDA_ERROR_INVALID_CONTEXT, a->dev, "thread without a context");
    expect_vmm(CUDA_SUCCESS);
    OK(cuCtxSetCurrent(a->ctx));
    OK(cuMemcpyHtoD(a->dev, host, 16));
    return NULL;
}

int main(void)
{
    expect_ctx_calls(CUDA_ERROR_NOT_INITIALIZED, 0, "before cuInit");
    expect_vmm(CUDA_ERROR_NOT_INITIALIZED);
    unsigned t;
    EXPECT_RC(cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)host),
              CUDA_ERROR_NOT_INITIALIZED);

    REQUIRE(cuInit(0));
    expect_ctx_calls(CUDA_ERROR_INVALID_CONTEXT, 0, "after cuInit, no context");
    expect_vmm(CUDA_SUCCESS);

    CUdevice devo;
    CUcontext ctx;
    REQUIRE(cuDeviceGet(&devo, 0));
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, devo));
    REQUIRE(cuCtxSetCurrent(ctx));
    CUdeviceptr d = 0;
    REQUIRE(cuMemAlloc(&d, 4096));
    for (unsigned i = 0; i < sizeof host; i++) host[i] = (char)i;

    pthread_t th;
    struct thread_arg a = {d, ctx};
    if (pthread_create(&th, NULL, other_thread, &a) != 0) { fprintf(stderr, "pthread_create\n"); return 1; }
    pthread_join(th, NULL);

    /* Unbinding the context makes this thread context-less again. */
    OK(cuCtxSetCurrent(NULL));
    expect_ctx_calls(CUDA_ERROR_INVALID_CONTEXT, d, "after cuCtxSetCurrent(NULL)");
    OK(cuCtxSetCurrent(ctx));
    char back[16] = {0};
    OK(cuMemcpyDtoH(back, d, sizeof back));
    EXPECT(back[0] == 0 && back[15] == 15);     /* the other thread's copy, after it set the context */
    OK(cuMemFree(d));
    return mt_finish("test_drv_mem_context");
}
