/* test_devmem_streams: stream-safe reuse of freed device memory.  A slow
 * kernel (a CPU kernel that sleeps, then sums its input) is still queued on
 * stream s1 when its input is freed and another allocation is made and
 * overwritten on stream s2.  Without the shim the real cudaFree waits for the
 * device; under trainshim's pool the freed block must not be handed out
 * before the kernel is done (cudaFree: fences on every stream; cudaFreeAsync:
 * reuse at once on the same stream only).  Every sum must be exact.
 *
 * Case 4 runs the kernel on a stream created through the driver API
 * (cuStreamCreate): the pool must fence it too.
 *
 * Argument "pool": also checks that a block freed with cudaFreeAsync on a
 * stream is reused at once by the next cudaMallocAsync of that stream. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/emu.h"

#include "check.h"

static char slow_sum_id;
/* out[0] = sum of a[0..n) read after a pause, so frees and new allocations
 * of the host thread happen while it is still queued or running. */
static void slow_sum_impl(void **args, const emu_launch *l)
{
    (void)l;
    const float *a = *(const float **)args[0];
    double *out = *(double **)args[1];
    size_t n = *(size_t *)args[2];
    usleep(15000);
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i];
    *out = s;
}

static void launch_sum(float *a, double *out, size_t n, cudaStream_t s)
{
    void *args[] = {&a, &out, &n};
    dim3 one = {1, 1, 1};
    CHECK(cudaLaunchKernel(&slow_sum_id, one, one, args, 0, s) == cudaSuccess, "launch");
}

enum { ITERS = 8 };

int main(int argc, char **argv)
{
    bool pool = argc > 1 && !strcmp(argv[1], "pool");
    size_t sizes[3] = {sizeof(size_t), sizeof(size_t), sizeof(size_t)};
    sizes[0] = sizeof(float *);
    sizes[1] = sizeof(double *);
    if (emuRegisterKernel(&slow_sum_id, NULL, slow_sum_impl, 3, sizes) != 0) {
        printf("FAIL: emuRegisterKernel\n");
        return 1;
    }
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess, "s1");
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess, "s2");
    CUstream s3 = NULL;
    CHECK(cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "s3 (driver API)");
    double *sums = NULL;
    CHECK(cudaMalloc((void **)&sums, 4 * ITERS * sizeof(double)) == cudaSuccess, "sums");
    size_t maxn = (size_t)3 << 20;
    float *ones = malloc(maxn * sizeof(float));
    for (size_t i = 0; i < maxn; i++) ones[i] = 1.0f;
    int overlaps = 0, same_stream_reuse = 0;
    for (int it = 0; it < ITERS; it++) {
        size_t n = (size_t)(1 + it % 3) << 18;   /* 1, 2, 3 MiB of floats */
        size_t bytes = n * sizeof(float);

        /* 1. cudaFree while the kernel on s1 still reads; allocate and
         *    overwrite on s2 */
        float *a = NULL, *b = NULL;
        CHECK(cudaMalloc((void **)&a, bytes) == cudaSuccess, "a");
        /* filled on s1: a cudaMemcpy from pageable memory may return before
         * the data lands, and the legacy stream does not order s1 */
        CHECK(cudaMemcpyAsync(a, ones, bytes, cudaMemcpyHostToDevice, s1) == cudaSuccess, "fill a");
        launch_sum(a, sums + 4 * it, n, s1);
        CHECK(cudaFree(a) == cudaSuccess, "free a");
        CHECK(cudaMalloc((void **)&b, bytes) == cudaSuccess, "b");
        overlaps += b == a;
        CHECK(cudaMemsetAsync(b, 0xff, bytes, s2) == cudaSuccess, "clobber b");

        /* 2. cudaFreeAsync on s1, cudaMallocAsync on s2 */
        float *c = NULL, *d = NULL;
        CHECK(cudaMallocAsync((void **)&c, bytes, s1) == cudaSuccess, "c");
        CHECK(cudaMemcpyAsync(c, ones, bytes, cudaMemcpyHostToDevice, s1) == cudaSuccess, "fill c");
        launch_sum(c, sums + 4 * it + 1, n, s1);
        CHECK(cudaFreeAsync(c, s1) == cudaSuccess, "free c");
        CHECK(cudaMallocAsync((void **)&d, bytes, s2) == cudaSuccess, "d");
        overlaps += d == c;
        CHECK(cudaMemsetAsync(d, 0xff, bytes, s2) == cudaSuccess, "clobber d");

        /* 3. same stream: stream order makes immediate reuse safe */
        float *e = NULL, *f = NULL;
        CHECK(cudaMallocAsync((void **)&e, bytes, s1) == cudaSuccess, "e");
        CHECK(cudaMemcpyAsync(e, ones, bytes, cudaMemcpyHostToDevice, s1) == cudaSuccess, "fill e");
        launch_sum(e, sums + 4 * it + 2, n, s1);
        CHECK(cudaFreeAsync(e, s1) == cudaSuccess, "free e");
        CHECK(cudaMallocAsync((void **)&f, bytes, s1) == cudaSuccess, "f");
        same_stream_reuse += f == e;
        CHECK(cudaMemsetAsync(f, 0xff, bytes, s1) == cudaSuccess, "clobber f");

        /* 4. cudaFree while the kernel on a driver-API stream still reads */
        float *g = NULL, *h = NULL;
        CHECK(cudaMalloc((void **)&g, bytes) == cudaSuccess, "g");
        CHECK(cudaMemcpyAsync(g, ones, bytes, cudaMemcpyHostToDevice, (cudaStream_t)s3) == cudaSuccess, "fill g");
        launch_sum(g, sums + 4 * it + 3, n, (cudaStream_t)s3);
        CHECK(cudaFree(g) == cudaSuccess, "free g");
        CHECK(cudaMalloc((void **)&h, bytes) == cudaSuccess, "h");
        overlaps += h == g;
        CHECK(cudaMemsetAsync(h, 0xff, bytes, s2) == cudaSuccess, "clobber h");
        CHECK(cudaFree(h) == cudaSuccess, "free h");

        CHECK(cudaFree(b) == cudaSuccess, "free b");
        CHECK(cudaFreeAsync(d, s2) == cudaSuccess, "free d");
        CHECK(cudaFreeAsync(f, s1) == cudaSuccess, "free f");
    }
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync");
    double got[4 * ITERS];
    CHECK(cudaMemcpy(got, sums, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess, "read sums");
    for (int it = 0; it < ITERS; it++) {
        double want = (double)((size_t)(1 + it % 3) << 18);
        for (int k = 0; k < 4; k++) {
            printf("iter %d case %d sum %.0f\n", it, k, got[4 * it + k]);
            CHECK(got[4 * it + k] == want, "iter %d case %d: sum %.1f, want %.0f", it, k, got[4 * it + k], want);
        }
    }
    fprintf(stderr, "cross-stream reuse of a still-read block: %d; same-stream reuse: %d of %d\n", overlaps,
            same_stream_reuse, ITERS);
    if (pool) CHECK(same_stream_reuse == ITERS, "same-stream reuse %d of %d", same_stream_reuse, ITERS);
    CHECK(cudaFree(sums) == cudaSuccess, "free sums");
    CHECK(cudaStreamDestroy(s1) == cudaSuccess && cudaStreamDestroy(s2) == cudaSuccess, "destroy");
    CHECK(cuStreamDestroy(s3) == CUDA_SUCCESS, "destroy s3");
    free(ones);
    return failures ? 1 : 0;
}
