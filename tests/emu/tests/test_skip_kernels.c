/* test_skip_kernels.c: EMU_UNKNOWN_KERNELS=skip.  A kernel the emulator has
 * no CPU function for (from a module or library loaded from any image, or a
 * runtime launch of an unregistered host stub) launches as an empty kernel:
 * the launch is still validated (bad configurations and handles fail as in
 * strict mode), ordered on its stream (it runs after earlier work), counted
 * by name (also each time a captured graph replays it), and it writes no
 * memory.  Function attribute and occupancy queries answer for it.  Strict
 * stays the default: without the variable the same launch fails. */
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>
#include "driver/exec_testutil.h"

static const char image[] = "not a real cubin: the emulator accepts any image";

/* Strict mode, in a child that never saw the variable. */
static int strict_child(void)
{
    unsetenv("EMU_UNKNOWN_KERNELS");
    et_setup(0);
    CUmodule m;
    CUfunction f;
    REQUIRE(cuModuleLoadData(&m, image));
    REQUIRE(cuModuleGetFunction(&f, m, "strict_kernel"));
    EXPECT_RC(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_NOT_FOUND);
    static const char host_stub = 0;
    EXPECT(cudaLaunchKernel(&host_stub, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, NULL) ==
           cudaErrorInvalidDeviceFunction);
    EXPECT(emuGetCounter("kernels.skipped") == 0);
    return et_failures ? 1 : 0;
}

static void test_module_kernel_is_ordered_counted_and_inert(void)
{
    CUmodule m;
    CUfunction f;
    REQUIRE(cuModuleLoadData(&m, image));
    REQUIRE(cuModuleGetFunction(&f, m, "_Z13vectorized_fillPfi"));
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    enum { N = 4096 };
    CUdeviceptr buf;
    REQUIRE(cuMemAlloc(&buf, N));
    REQUIRE(cuMemsetD8(buf, 0x5a, N));
    uint64_t launched = emuGetCounter("kernels.launched"), completed = emuGetCounter("kernels.completed");
    struct et_gate gate = {0};
    REQUIRE(cuLaunchHostFunc(s, et_gate_wait, &gate));
    int n = N;
    void *params[] = {&buf, &n};
    OK(cuLaunchKernel(f, 8, 1, 1, 128, 1, 1, 0, s, params, NULL));
    EXPECT(emuGetCounter("kernels.skipped") == 1);
    EXPECT(emuGetCounter("kernels.skipped._Z13vectorized_fillPfi") == 1);
    EXPECT(emuGetCounter("kernels.launched") == launched + 1);
    et_sleep_ms(20);
    EXPECT(emuGetCounter("kernels.completed") == completed);   /* behind the gate: ordered */
    et_gate_open(&gate);
    OK(cuStreamSynchronize(s));
    EXPECT(emuGetCounter("kernels.completed") == completed + 1);
    unsigned char host[N];
    OK(cuMemcpyDtoH(host, buf, N));
    int untouched = 1;
    for (int i = 0; i < N; i++) untouched &= host[i] == 0x5a;
    EXPECT(untouched);
    /* still validated: a 2048-thread block, too much shared memory, a bad stream */
    EXPECT_RC(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, s, params, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 1 << 20, s, params, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, s, params, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, s, params, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(emuGetCounter("kernels.skipped") == 1);
    /* cuLaunchKernelEx, as recent toolkits launch */
    CUlaunchConfig cfg = {.gridDimX = 2, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64, .blockDimY = 1,
                          .blockDimZ = 1, .hStream = s};
    OK(cuLaunchKernelEx(&cfg, f, params, NULL));
    OK(cuStreamSynchronize(s));
    EXPECT(emuGetCounter("kernels.skipped._Z13vectorized_fillPfi") == 2);
    OK(cuMemFree(buf));
    OK(cuStreamDestroy(s));
    OK(cuModuleUnload(m));
}

static void test_library_kernel_and_capture(void)
{
    CUlibrary lib;
    CUkernel k;
    CUfunction f;
    REQUIRE(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
    REQUIRE(cuLibraryGetKernel(&k, lib, "softmax_warp_forward"));
    REQUIRE(cuKernelGetFunction(&f, k));
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    uint64_t before = emuGetCounter("kernels.skipped.softmax_warp_forward");
    CUgraph g;
    CUgraphExec x;
    REQUIRE(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 1024, s, NULL, NULL));
    REQUIRE(cuStreamEndCapture(s, &g));
    EXPECT(emuGetCounter("kernels.skipped.softmax_warp_forward") == before);   /* captured, not run */
    REQUIRE(cuGraphInstantiateWithFlags(&x, g, 0));
    OK(cuGraphLaunch(x, s));
    OK(cuGraphLaunch(x, s));
    OK(cuStreamSynchronize(s));
    EXPECT(emuGetCounter("kernels.skipped.softmax_warp_forward") == before + 2);
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(g));
    OK(cuStreamDestroy(s));
    OK(cuLibraryUnload(lib));
}

/* The queries torch makes before launching (cudaFuncGetAttributes,
 * occupancy): answered as for a simple sm_90 kernel. */
static void test_queries(void)
{
    CUmodule m;
    CUfunction f;
    REQUIRE(cuModuleLoadData(&m, image));
    REQUIRE(cuModuleGetFunction(&f, m, "reduce_kernel"));
    int v = 0;
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    EXPECT(v == 1024);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    EXPECT(v > 0 && v <= 255);
    int blocks = 0;
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0));
    EXPECT(blocks == 8);                         /* 2048 threads per SM / 256 */
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 1024, 100 * 1024));
    EXPECT(blocks == 2);                         /* 233472 / (102400 + 1024) */
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, f, 32, 0, 0));
    EXPECT(blocks == 32);                        /* the per-SM block limit */
    EXPECT_RC(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, NULL, 256, 0), CUDA_ERROR_INVALID_HANDLE);
    int grid = 0, block = 0;
    OK(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, NULL, 0, 0));
    EXPECT(block > 0 && block % 32 == 0 && block <= 1024 && grid == 132 * (2048 / block));
    OK(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, NULL, 0, 128));
    EXPECT(block == 128 && grid == 132 * 16);
    size_t dyn = 0;
    OK(cuOccupancyAvailableDynamicSMemPerBlock(&dyn, f, 2, 256));
    EXPECT(dyn == 233472 / 2 - 1024);
    OK(cuModuleUnload(m));
}

/* A runtime launch of a kernel known by name only (what nvcc's registration
 * gives the runtime for every kernel of a fat binary). */
static const char named_stub = 0;
static void test_runtime_launch(void)
{
    EXPECT(emuRegisterKernel(&named_stub, "_Z20elementwise_kernelILi128ELi4EEviT1_", NULL, -1, NULL) == 0);
    cudaStream_t s;
    EXPECT(cudaStreamCreate(&s) == cudaSuccess);
    float *d = NULL;
    EXPECT(cudaMalloc((void **)&d, 256) == cudaSuccess);
    EXPECT(cudaMemset(d, 0x11, 256) == cudaSuccess);
    void *args[] = {&d};
    EXPECT(cudaLaunchKernel(&named_stub, (dim3){4, 1, 1}, (dim3){128, 1, 1}, args, 0, s) == cudaSuccess);
    EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
    EXPECT(emuGetCounter("kernels.skipped._Z20elementwise_kernelILi128ELi4EEviT1_") == 1);
    unsigned char host[256];
    EXPECT(cudaMemcpy(host, d, 256, cudaMemcpyDeviceToHost) == cudaSuccess);
    EXPECT(host[0] == 0x11 && host[255] == 0x11);
    EXPECT(cudaLaunchKernel(&named_stub, (dim3){1, 1, 1}, (dim3){1025, 1, 1}, args, 0, s) ==
           cudaErrorInvalidConfiguration);
    struct cudaFuncAttributes fa;
    EXPECT(cudaFuncGetAttributes(&fa, &named_stub) == cudaSuccess);
    EXPECT(fa.maxThreadsPerBlock == 1024 && fa.binaryVersion == 90);
    int blocks = 0;
    EXPECT(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &named_stub, 512, 0) == cudaSuccess);
    EXPECT(blocks == 4);
    EXPECT(cudaFree(d) == cudaSuccess);
    EXPECT(cudaStreamDestroy(s) == cudaSuccess);
}

int main(void)
{
    pid_t child = fork();
    if (child == 0) _exit(strict_child());
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    setenv("EMU_UNKNOWN_KERNELS", "skip", 1);
    et_setup(0);
    test_module_kernel_is_ordered_counted_and_inert();
    test_library_kernel_and_capture();
    test_queries();
    test_runtime_launch();
    return et_finish("test_skip_kernels");
}
