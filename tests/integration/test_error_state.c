/* test_error_state: misuse of the runtime API, one case per line: the return
 * code, then cudaPeekAtLastError and cudaGetLastError right after it.  Run by
 * test_error_state.sh without and with the shim (every allocator mode): the
 * lines must be identical, because an error trainshim returns in place of the
 * real function must leave the runtime's last-error state exactly as the real
 * call would, and a call trainshim serves must not touch it.
 *
 * Sizes are 1 MiB so pageable copies go through the copy engine and
 * allocations through the pool.  Every case leaves the device usable (no
 * sticky errors), so the cases are independent. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)
static int data_ok; /* the copies' round trip; standalone, the exit status */

static void report(const char *name, cudaError_t r)
{
    cudaError_t peek = cudaPeekAtLastError();
    cudaError_t last = cudaGetLastError();
    printf("%-28s rc=%d peek=%d last=%d after=%d\n", name, (int)r, (int)peek, (int)last,
           (int)cudaGetLastError());
}

static void *dev_buffer(void)
{
    void *p = NULL;
    if (cudaMalloc(&p, MiB) != cudaSuccess) {
        printf("setup: cudaMalloc failed\n");
        exit(1);
    }
    return p;
}

static void device_cases(void)
{
    void *p = NULL;
    report("malloc_null_out", cudaMalloc(NULL, MiB));
    cudaError_t r = cudaMalloc(&p, 0);
    report(p ? "malloc_zero_nonnull" : "malloc_zero", r);
    p = NULL;
    r = cudaMalloc(&p, (size_t)1 << 60);
    report(p ? "malloc_huge_nonnull" : "malloc_huge", r);
    report("free_null", cudaFree(NULL));
    report("free_bogus", cudaFree((void *)(uintptr_t)0x1234000));
    p = dev_buffer();
    report("free_interior", cudaFree((char *)p + 4096));
    report("free_first", cudaFree(p));
    report("free_double", cudaFree(p));
    p = NULL;
    report("malloc_async", cudaMallocAsync(&p, MiB, 0));
    report("free_async", cudaFreeAsync(p, 0));
    report("sync_after_free_async", cudaStreamSynchronize(0));
    report("free_async_bogus", cudaFreeAsync((void *)(uintptr_t)0x1234000, 0));
    report("sync_after_bogus", cudaStreamSynchronize(0));
    report("memset_bogus", cudaMemset((void *)(uintptr_t)0x1000, 0, 16));
    report("memgetinfo_null", cudaMemGetInfo(NULL, NULL));
}

static void host_cases(void)
{
    void *h = NULL;
    char stack_buf[64];
    report("mallochost_null_out", cudaMallocHost(NULL, MiB));
    report("mallochost", cudaMallocHost(&h, MiB));
    report("freehost_first", cudaFreeHost(h));
    report("freehost_double", cudaFreeHost(h));
    report("freehost_null", cudaFreeHost(NULL));
    report("freehost_stack", cudaFreeHost(stack_buf));
    void *d = dev_buffer();
    report("freehost_device_ptr", cudaFreeHost(d));
    report("free_dev", cudaFree(d));
    h = NULL;
    report("hostalloc_bad_flags", cudaHostAlloc(&h, MiB, 0xff00u));
    if (h)
        cudaFreeHost(h);
    h = NULL;
    report("hostalloc", cudaHostAlloc(&h, MiB, cudaHostAllocPortable));
    report("freehost_hostalloc", cudaFreeHost(h));
    report("freehost_hostalloc_double", cudaFreeHost(h));
}

static void copy_cases(void)
{
    char *src = malloc(MiB), *dst = malloc(MiB);
    memset(src, 7, MiB);
    void *d = dev_buffer();
    report("memcpy_bad_kind", cudaMemcpy(d, src, MiB, (enum cudaMemcpyKind)42));
    report("memcpy_null_dst", cudaMemcpy(NULL, src, MiB, cudaMemcpyHostToDevice));
    report("memcpy_null_src", cudaMemcpy(dst, NULL, MiB, cudaMemcpyDeviceToHost));
    report("memcpy_h2d_ok", cudaMemcpy(d, src, MiB, cudaMemcpyHostToDevice));
    report("memcpy_d2h_ok", cudaMemcpy(dst, d, MiB, cudaMemcpyDeviceToHost));
    report("memcpy_wrong_dir", cudaMemcpy(d, src, MiB, cudaMemcpyDeviceToHost));
    report("memcpy2d_bad_pitch", cudaMemcpy2D(d, 256, src, 512, 512, 4, cudaMemcpyHostToDevice));
    report("memcpy2d_one_row", cudaMemcpy2D(d, MiB, src, MiB, MiB, 1, cudaMemcpyHostToDevice));
    cudaStream_t s;
    cudaStreamCreate(&s);
    report("memcpy_async_bad_kind", cudaMemcpyAsync(d, src, MiB, (enum cudaMemcpyKind)42, s));
    report("memcpy_async_ok", cudaMemcpyAsync(dst, d, MiB, cudaMemcpyDeviceToHost, s));
    report("stream_sync", cudaStreamSynchronize(s));
    cudaStreamDestroy(s);
    data_ok = !memcmp(src, dst, MiB);
    report("check_data", data_ok ? cudaSuccess : cudaErrorUnknown);
    cudaFree(d);
    free(src);
    free(dst);
}

/* An error stays the last error until read, across calls the shim serves. */
static void sticky_cases(void)
{
    void *p = NULL, *h = NULL;
    cudaMalloc(NULL, MiB);
    cudaError_t r1 = cudaMalloc(&p, MiB);
    cudaError_t r2 = cudaFree(p);
    cudaError_t r3 = cudaMallocHost(&h, MiB);
    cudaError_t r4 = cudaFreeHost(h);
    char *buf = malloc(MiB);
    void *d = dev_buffer();
    cudaError_t r5 = cudaMemcpy(d, buf, MiB, cudaMemcpyHostToDevice);
    cudaError_t peek = cudaPeekAtLastError();
    printf("sticky served=%d,%d,%d,%d,%d peek=%d\n", (int)r1, (int)r2, (int)r3, (int)r4, (int)r5, (int)peek);
    report("sticky_read", cudaSuccess);
    cudaFree(d);
    free(buf);
}

/* The first call of the process, before any context: a runtime allocation
 * above TRAINSHIM_MEMORY_LIMIT (the script sets 64 MiB) fails like a real
 * out-of-memory, last error included; one under it is served. */
static int limit_case(void)
{
    void *p = NULL;
    report("limit_first_100MiB", cudaMalloc(&p, 100 * MiB));
    report("limit_then_16MiB", cudaMalloc(&p, 16 * MiB));
    report("limit_free", cudaFree(p));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "limit"))
        return limit_case();
    report("init", cudaFree(NULL));
    device_cases();
    host_cases();
    copy_cases();
    sticky_cases();
    report("device_sync", cudaDeviceSynchronize());
    return data_ok ? 0 : 1;
}
