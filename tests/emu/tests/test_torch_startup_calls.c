/* test_torch_startup_calls.c: driver and runtime entry points PyTorch calls
 * that the emulator answered "not supported" before: the driver log API
 * (torch registers a callback at start-up; the emulated log is always
 * empty), graph memory attributes (the cudaMallocAsync backend reads them;
 * emulated graphs hold no memory), cuGraphGetNodes (torch counts a captured
 * graph's nodes), and NCCL 2.30's exports (a library missing any of them
 * does not load under torch; the unimplemented ones answer ncclInvalidUsage). */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <unistd.h>
#include "driver/exec_testutil.h"

static void CUDA_CB on_log(void *data, CUlogLevel level, char *message, size_t length)
{
    (void)level; (void)message; (void)length;
    ++*(int *)data;
}

static void test_logs(void)
{
    int calls = 0;
    CUlogsCallbackHandle h1 = NULL, h2 = NULL;
    OK(cuLogsRegisterCallback(on_log, &calls, &h1));
    OK(cuLogsRegisterCallback(on_log, &calls, &h2));
    EXPECT(h1 && h2 && h1 != h2);
    EXPECT_RC(cuLogsRegisterCallback(NULL, NULL, &h1), CUDA_ERROR_INVALID_VALUE);
    CUlogIterator it = 7;
    OK(cuLogsCurrent(&it, 0));
    EXPECT(it == 0);
    EXPECT_RC(cuLogsCurrent(&it, 1), CUDA_ERROR_INVALID_VALUE);
    char buf[64];
    memset(buf, 'x', sizeof buf);
    size_t size = sizeof buf;
    OK(cuLogsDumpToMemory(&it, buf, &size, 0));
    EXPECT(size == 0 && buf[0] == '\0');
    char path[] = "/tmp/emu-logs-XXXXXX";
    int fd = mkstemp(path);
    EXPECT(fd >= 0);
    if (fd >= 0) close(fd);
    OK(cuLogsDumpToFile(NULL, path, 0));
    unlink(path);
    OK(cuLogsUnregisterCallback(h1));
    EXPECT_RC(cuLogsUnregisterCallback(h1), CUDA_ERROR_INVALID_VALUE);
    OK(cuLogsUnregisterCallback(h2));
    EXPECT(calls == 0);
}

static void test_graph_memory(void)
{
    cuuint64_t v = 99;
    for (int a = CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT; a <= CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH; a++) {
        v = 99;
        OK(cuDeviceGetGraphMemAttribute(0, (CUgraphMem_attribute)a, &v));
        EXPECT(v == 0);
    }
    EXPECT_RC(cuDeviceGetGraphMemAttribute(0, (CUgraphMem_attribute)42, &v), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuDeviceGetGraphMemAttribute(5, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v), CUDA_ERROR_INVALID_DEVICE);
    v = 0;
    OK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v));
    EXPECT_RC(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v), CUDA_ERROR_INVALID_VALUE);
    v = 1;
    EXPECT_RC(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &v), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGraphMemTrim(0));
    /* the runtime forms, as torch's cudaMallocAsync backend calls them */
    size_t used = 5;
    EXPECT(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &used) == cudaSuccess && used == 0);
    EXPECT(cudaDeviceGetGraphMemAttribute(3, cudaGraphMemAttrUsedMemHigh, &used) == cudaErrorInvalidDevice);
    EXPECT(cudaDeviceGraphMemTrim(0) == cudaSuccess);
}

static void test_graph_nodes(void)
{
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    REQUIRE(cuMemAlloc(&d, 4096));
    CUgraph g, empty;
    REQUIRE(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuMemsetD8Async(d, 1, 4096, s));
    OK(cuMemsetD8Async(d, 2, 2048, s));
    OK(cuMemsetD32Async(d, 3, 16, s));
    REQUIRE(cuStreamEndCapture(s, &g));
    size_t n = 0;
    OK(cuGraphGetNodes(g, NULL, &n));
    EXPECT(n == 3);
    CUgraphNode nodes[5] = {0};
    n = 5;
    OK(cuGraphGetNodes(g, nodes, &n));
    EXPECT(n == 3 && nodes[0] && nodes[1] && nodes[2] && nodes[0] != nodes[1] && !nodes[3]);
    n = 2;
    OK(cuGraphGetNodes(g, nodes, &n));
    EXPECT(n == 2);
    REQUIRE(cuGraphCreate(&empty, 0));
    EXPECT(cudaGraphGetNodes((cudaGraph_t)empty, NULL, &n) == cudaSuccess && n == 0);
    EXPECT_RC(cuGraphGetNodes(g, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphDestroy(g));
    OK(cuGraphDestroy(empty));
    EXPECT_RC(cuGraphGetNodes(g, NULL, &n), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(d));
    OK(cuStreamDestroy(s));
}

/* Names NCCL 2.30 added (symbols/nccl.txt is its wheel's export list):
 * present, and answering ncclInvalidUsage without touching arguments. */
static void test_nccl_exports(void)
{
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    EXPECT(lib != NULL);
    if (!lib) return;
    static const char *const added[] = {"ncclCommResume", "ncclCommSuspend", "ncclCommGrow", "ncclCommMemStats",
                                        "ncclCommQueryProperties", "ncclParamGet", "pncclCommResume"};
    for (size_t i = 0; i < sizeof added / sizeof *added; i++) {
        int (*f)(void *) = (int (*)(void *))dlsym(lib, added[i]);
        EXPECT(f != NULL);
        if (f) EXPECT(f(NULL) == ncclInvalidUsage);
    }
    int (*version)(int *) = (int (*)(int *))dlsym(lib, "ncclGetVersion");
    int v = 0;
    EXPECT(version && version(&v) == ncclSuccess && v > 0);
    dlclose(lib);
}

int main(void)
{
    et_setup(0);
    test_logs();
    test_graph_memory();
    test_graph_nodes();
    test_nccl_exports();
    return et_finish("test_torch_startup_calls");
}
