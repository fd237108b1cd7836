/* test_drv_core_fork.c: a child forked (without exec) after cuInit has no
 * usable CUDA state: every driver entry point that needs one refuses with
 * CUDA_ERROR_NOT_INITIALIZED, as real CUDA does, so a child cannot allocate
 * device memory aliasing its parent's.  Forking before cuInit is fine. */
#include <sys/wait.h>
#include <unistd.h>
#include "driver/mem_testutil.h"

/* Runs body in a forked child; the child's exit status is its failure count. */
static void in_child(const char *what, void (*body)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(1); }
    if (pid == 0) {
        body();
        _exit(mt_failures > 100 ? 100 : mt_failures);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: child failed (status %#x)\n", what, status);
        mt_failures++;
    }
}

/* Before the parent called cuInit: the child starts CUDA itself. */
static void child_before_init(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));
    OK(cuMemAlloc(&p, 1 << 20));
    OK(cuMemFree(p));
}

static void child_after_init(void)
{
    CUdeviceptr p = 0;
    EXPECT_RC(cuMemAlloc(&p, 1 << 20), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT(p == 0);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h = 0;
    EXPECT_RC(cuMemCreate(&h, 2 << 20, &prop, 0), CUDA_ERROR_NOT_INITIALIZED);
    CUstream s = NULL;
    EXPECT_RC(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuInit(0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_NOT_INITIALIZED);
    void *host = NULL;
    EXPECT_RC(cuMemHostAlloc(&host, 4096, 0), CUDA_ERROR_NOT_INITIALIZED);
    CUdeviceptr m = 0;
    EXPECT_RC(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_NOT_INITIALIZED);
    /* calls that need no context still answer */
    int version = 0;
    OK(cuDriverGetVersion(&version));
    EXPECT(version >= 13000);
    const char *name = NULL;
    OK(cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &name));
    EXPECT(name != NULL);
}

int main(void)
{
    in_child("fork before cuInit", child_before_init);
    mt_setup(0);
    CUdeviceptr p;
    REQUIRE(cuMemAlloc(&p, 1 << 20));
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    REQUIRE(cuMemsetD8Async(p, 7, 1 << 20, s));   /* a worker thread is running */
    in_child("fork after cuInit", child_after_init);
    /* the parent is unaffected */
    CUdeviceptr q;
    OK(cuMemAlloc(&q, 1 << 20));
    OK(cuStreamSynchronize(s));
    unsigned char b = 0;
    OK(cuMemcpyDtoH(&b, p + 12345, 1));
    EXPECT(b == 7);
    OK(cuMemFree(q));
    OK(cuMemFree(p));
    OK(cuStreamDestroy(s));
    return mt_finish("test_drv_core_fork");
}
