/* A program that reaches CUDA only the way frameworks reach it behind a
 * preload's back: dlopen(RTLD_LOCAL) + dlsym (PyTorch's libcuda use, XLA's
 * cuda_stub.cc), cudaGetDriverEntryPointByVersion (PyTorch's expandable
 * segments) and cuGetProcAddress with the per-thread flag (CuPy's static
 * runtime).  It references no CUDA symbol, so test_interpose_dlopen.sh also
 * builds it with only -ldl: then no CUDA library is in the global scope at
 * all and the shim must find the real functions through the handles.
 *
 * Checks its own results; test_interpose_dlopen.sh compares its output with
 * and without the shim and checks that the hooks saw the calls.
 *
 *   test_interpose_dlopen            the scenario above
 *   test_interpose_dlopen missing    calls hooked NCCL / cuBLASLt symbols
 *                                    found with dlsym(RTLD_DEFAULT) while no
 *                                    such library is loaded: under the shim
 *                                    they must return the library's "not
 *                                    supported" code, not crash. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define EXPECT(cond) do { if (!(cond)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

static void *must_sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p) {
        printf("FAIL: dlsym(%s): %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

static int missing_symbols(void)
{
    /* Without the shim neither exists in this process. */
    int (*group_start)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "ncclGroupStart");
    int (*lt_matmul)(void *, void *, const void *, const void *, void *, const void *, void *, const void *,
                     const void *, void *, void *, void *, const void *, void *, size_t, void *) =
        (int (*)(void *, void *, const void *, const void *, void *, const void *, void *, const void *,
                 const void *, void *, void *, void *, const void *, void *, size_t, void *))
            dlsym(RTLD_DEFAULT, "cublasLtMatmul");
    /* A hooked symbol whose library is loaded only RTLD_LOCAL: under the shim
     * RTLD_DEFAULT finds the hook, and the shim's own failed RTLD_NEXT lookup
     * leaves no dlerror() message behind a successful dlsym. */
    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    (void)dlerror();
    void *mem_get_info = rt ? dlsym(RTLD_DEFAULT, "cudaMemGetInfo") : NULL;
    const char *err = dlerror();
    if (mem_get_info) printf("cudaMemGetInfo via RTLD_DEFAULT: found, dlerror %s\n", err ? err : "clean");
    if (!group_start || !lt_matmul) {
        printf("absent\n");
        return 0;
    }
    printf("ncclGroupStart -> %d\n", group_start());
    printf("cublasLtMatmul -> %d\n", lt_matmul(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                               NULL, NULL, NULL, 0, NULL));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "missing") == 0) return missing_symbols();
    enum { N = 1 << 16 };

    /* ---- the runtime through a private handle ---- */
    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!rt) { printf("FAIL: dlopen libcudart.so.13: %s\n", dlerror()); return 1; }
    /* The "clear, look up, check dlerror()" idiom: the shim's own lookups
     * (RTLD_NEXT finds nothing when the library is RTLD_LOCAL) must leave no
     * message behind. */
    (void)dlerror();
    cudaError_t (*rt_get_device)(int *) = (cudaError_t (*)(int *))dlsym(rt, "cudaGetDevice");
    int first_dev = -1;
    EXPECT(rt_get_device && rt_get_device(&first_dev) == cudaSuccess && first_dev == 0);
    const char *dl_err = dlerror();
    EXPECT(dl_err == NULL);
    if (dl_err) printf("stale dlerror: %s\n", dl_err);
    cudaError_t (*rt_malloc)(void **, size_t) = (cudaError_t (*)(void **, size_t))must_sym(rt, "cudaMalloc");
    cudaError_t (*rt_free)(void *) = (cudaError_t (*)(void *))must_sym(rt, "cudaFree");
    cudaError_t (*rt_memcpy)(void *, const void *, size_t, enum cudaMemcpyKind) =
        (cudaError_t (*)(void *, const void *, size_t, enum cudaMemcpyKind))must_sym(rt, "cudaMemcpy");
    cudaError_t (*rt_entry)(const char *, void **, unsigned int, unsigned long long,
                            enum cudaDriverEntryPointQueryResult *) =
        (cudaError_t (*)(const char *, void **, unsigned int, unsigned long long,
                         enum cudaDriverEntryPointQueryResult *))must_sym(rt, "cudaGetDriverEntryPointByVersion");

    unsigned char *src = malloc(N), *dst = malloc(N);
    for (int i = 0; i < N; i++) src[i] = (unsigned char)(i * 31 + 7);
    void *d = NULL;
    EXPECT(rt_malloc(&d, N) == cudaSuccess);
    EXPECT(rt_memcpy(d, src, N, cudaMemcpyHostToDevice) == cudaSuccess);
    memset(dst, 0, N);
    EXPECT(rt_memcpy(dst, d, N, cudaMemcpyDeviceToHost) == cudaSuccess);
    EXPECT(memcmp(src, dst, N) == 0);
    printf("runtime via dlsym: roundtrip %s\n", memcmp(src, dst, N) == 0 ? "ok" : "BAD");

    /* ---- driver entry points handed out by the runtime ---- */
    enum cudaDriverEntryPointQueryResult q;
    CUresult (*mem_alloc)(CUdeviceptr *, size_t) = NULL;
    CUresult (*mem_free)(CUdeviceptr) = NULL;
    CUresult (*htod)(CUdeviceptr, const void *, size_t) = NULL;
    CUresult (*dtoh)(void *, CUdeviceptr, size_t) = NULL;
    EXPECT(rt_entry("cuMemAlloc", (void **)&mem_alloc, 12000, cudaEnableDefault, &q) == cudaSuccess && mem_alloc);
    EXPECT(rt_entry("cuMemFree", (void **)&mem_free, 12000, cudaEnableDefault, &q) == cudaSuccess && mem_free);
    EXPECT(rt_entry("cuMemcpyHtoD", (void **)&htod, 12000, cudaEnableDefault, &q) == cudaSuccess && htod);
    EXPECT(rt_entry("cuMemcpyDtoH", (void **)&dtoh, 12000, cudaEnableDefault, &q) == cudaSuccess && dtoh);
    if (!mem_alloc || !mem_free || !htod || !dtoh) return 1;
    CUdeviceptr dd = 0;
    EXPECT(mem_alloc(&dd, N) == CUDA_SUCCESS);
    EXPECT(htod(dd, src, N) == CUDA_SUCCESS);
    memset(dst, 0, N);
    EXPECT(dtoh(dst, dd, N) == CUDA_SUCCESS);
    EXPECT(memcmp(src, dst, N) == 0);
    EXPECT(mem_free(dd) == CUDA_SUCCESS);
    printf("driver entry points: roundtrip %s\n", memcmp(src, dst, N) == 0 ? "ok" : "BAD");

    /* ---- the driver through its own private handle ---- */
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv) { printf("FAIL: dlopen libcuda.so.1: %s\n", dlerror()); return 1; }
    CUresult (*get_proc)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
        (CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))
            must_sym(drv, "cuGetProcAddress_v2");
    CUdriverProcAddressQueryResult st;
    CUresult (*htod_pt)(CUdeviceptr, const void *, size_t) = NULL;
    CUresult (*alloc_pt)(CUdeviceptr *, size_t) = NULL;
    EXPECT(get_proc("cuMemcpyHtoD", (void **)&htod_pt, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st) ==
           CUDA_SUCCESS && htod_pt);
    EXPECT(get_proc("cuMemAlloc", (void **)&alloc_pt, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st) ==
           CUDA_SUCCESS && alloc_pt);
    /* XLA's way: the versioned name straight from the handle. */
    CUresult (*free_direct)(CUdeviceptr) = (CUresult (*)(CUdeviceptr))must_sym(drv, "cuMemFree_v2");
    CUresult (*dtoh_direct)(void *, CUdeviceptr, size_t) =
        (CUresult (*)(void *, CUdeviceptr, size_t))must_sym(drv, "cuMemcpyDtoH_v2");
    if (!htod_pt || !alloc_pt) return 1;
    EXPECT(alloc_pt(&dd, N) == CUDA_SUCCESS);
    EXPECT(htod_pt(dd, src, N) == CUDA_SUCCESS);
    memset(dst, 0, N);
    EXPECT(dtoh_direct(dst, dd, N) == CUDA_SUCCESS);
    EXPECT(memcmp(src, dst, N) == 0);
    /* More variants by flag: the async twin, the legacy 4-argument lookup,
     * and a symbol trainshim does not hook (returned unchanged, still works). */
    CUresult (*htod_async_pt)(CUdeviceptr, const void *, size_t, CUstream) = NULL;
    CUresult (*get_proc_legacy)(const char *, void **, int, cuuint64_t) =
        (CUresult (*)(const char *, void **, int, cuuint64_t))must_sym(drv, "cuGetProcAddress");
    CUresult (*dtoh_legacy)(void *, CUdeviceptr, size_t) = NULL;
    CUresult (*ctx_sync)(void) = NULL;
    EXPECT(get_proc("cuMemcpyHtoDAsync", (void **)&htod_async_pt, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                    &st) == CUDA_SUCCESS && htod_async_pt);
    EXPECT(get_proc_legacy("cuMemcpyDtoH", (void **)&dtoh_legacy, 13000, CU_GET_PROC_ADDRESS_DEFAULT) == CUDA_SUCCESS &&
           dtoh_legacy);
    EXPECT(get_proc("cuCtxSynchronize", (void **)&ctx_sync, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st) == CUDA_SUCCESS &&
           ctx_sync);
    if (!htod_async_pt || !dtoh_legacy || !ctx_sync) return 1;
    for (int i = 0; i < N; i++) src[i] ^= 0x55;
    EXPECT(htod_async_pt(dd, src, N, 0) == CUDA_SUCCESS);
    EXPECT(ctx_sync() == CUDA_SUCCESS);
    memset(dst, 0, N);
    EXPECT(dtoh_legacy(dst, dd, N) == CUDA_SUCCESS);
    EXPECT(memcmp(src, dst, N) == 0);
    printf("driver variants by flag: roundtrip %s\n", memcmp(src, dst, N) == 0 ? "ok" : "BAD");
    EXPECT(free_direct(dd) == CUDA_SUCCESS);
    /* An error returned through a wrapped pointer is the driver's own. */
    CUresult bad = free_direct((CUdeviceptr)(uintptr_t)src);
    EXPECT(bad != CUDA_SUCCESS);
    printf("driver via cuGetProcAddress: roundtrip %s, bad free -> %d\n", memcmp(src, dst, N) == 0 ? "ok" : "BAD",
           (int)bad);

    EXPECT(rt_free(d) == cudaSuccess);
    free(src);
    free(dst);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
