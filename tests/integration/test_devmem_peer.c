/* test_devmem_peer: peer access on pooled device memory (run by
 * test_devmem_peer.sh with EMU_DEVICES=2, without and under the shim).
 * Device 1 enables peer access to device 0, then copies device 0's buffer
 * with cudaMemcpyPeer and runs a kernel on device 1 that reads it.  A pooled
 * buffer lives in VMM pages, which a peer may touch only after cuMemSetAccess
 * for it: under the pool (argument "pool") the test also checks, with
 * cuMemGetAccess, that device 1 has read-write access to device 0's pages
 * mapped before the enable and to pages mapped after it.  stdout carries
 * only what must be identical with and without the shim. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/emu.h"

#include "check.h"
#include "two_devices.h"

static char sum_id;
static void sum_impl(void **args, const emu_launch *l)
{
    (void)l;
    const float *a = *(const float **)args[0];
    double *out = *(double **)args[1];
    size_t n = *(size_t *)args[2];
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i];
    *out = s;
}

static unsigned peer_flags(const void *ptr, int dev)
{
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
    unsigned long long flags = 0;
    if (cuMemGetAccess(&flags, &loc, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS) return 999;
    return (unsigned)flags;
}

int main(int argc, char **argv)
{
    int pool = argc > 1 && !strcmp(argv[1], "pool");
    if (!two_devices(argv))
        return 1;
    size_t sizes[3] = {sizeof(float *), sizeof(double *), sizeof(size_t)};
    if (emuRegisterKernel(&sum_id, NULL, sum_impl, 3, sizes) != 0) {
        printf("FAIL: emuRegisterKernel\n");
        return 1;
    }
    const size_t n = (size_t)1 << 20, bytes = n * sizeof(float);
    float *ones = malloc(bytes), *back = malloc(bytes);
    for (size_t i = 0; i < n; i++) ones[i] = 1.0f;

    /* device 0's buffer, mapped before peer access is enabled */
    float *a = NULL, *late = NULL;
    CHECK(cudaSetDevice(0) == cudaSuccess, "device 0");
    CHECK(cudaMalloc((void **)&a, bytes) == cudaSuccess, "a on device 0");
    CHECK(cudaMemcpy(a, ones, bytes, cudaMemcpyHostToDevice) == cudaSuccess, "fill a");
    /* a pageable copy may return before its data lands (cuda docs) */
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync device 0");

    /* a plain cross-device cudaMemcpy, without peer access, issued from
     * either device: CUDA copies cudaMalloc memory between devices; pooled
     * VMM pages must then be accessible to the other device too */
    float *c = NULL;
    CHECK(cudaSetDevice(1) == cudaSuccess, "device 1 for c");
    CHECK(cudaMalloc((void **)&c, bytes) == cudaSuccess, "c on device 1");
    for (int from = 0; from < 2; from++) {
        CHECK(cudaSetDevice(from) == cudaSuccess, "device %d issues", from);
        CHECK(cudaMemset(c, 0, bytes) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, "clear c");
        cudaError_t ec = cudaMemcpy(c, a, bytes, from ? cudaMemcpyDeviceToDevice : cudaMemcpyDefault);
        cudaError_t es = cudaDeviceSynchronize();
        memset(back, 0, bytes);
        cudaError_t eb = cudaMemcpy(back, c, bytes, cudaMemcpyDeviceToHost);
        printf("cross-device memcpy from device %d: %d %d %d same %d\n", from, (int)ec, (int)es, (int)eb,
               !memcmp(back, ones, bytes));
    }
    CHECK(cudaSetDevice(1) == cudaSuccess && cudaFree(c) == cudaSuccess, "free c");

    CHECK(cudaSetDevice(1) == cudaSuccess, "device 1");
    cudaError_t er = cudaDeviceEnablePeerAccess(0, 0);
    printf("enable-peer %d\n", (int)er);
    float *b = NULL;
    double *sum = NULL;
    CHECK(cudaMalloc((void **)&b, bytes) == cudaSuccess, "b on device 1");
    CHECK(cudaMalloc((void **)&sum, sizeof(double)) == cudaSuccess, "sum on device 1");

    /* pages of device 0 mapped after the enable */
    CHECK(cudaSetDevice(0) == cudaSuccess, "device 0 again");
    CHECK(cudaMalloc((void **)&late, 64 << 20) == cudaSuccess, "late on device 0");
    CHECK(cudaMemcpy(late, ones, bytes, cudaMemcpyHostToDevice) == cudaSuccess, "fill late");
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync device 0 again");
    if (pool) {
        CHECK(peer_flags(a, 1) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "device 1 access to a: %u", peer_flags(a, 1));
        CHECK(peer_flags(late, 1) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "device 1 access to late: %u",
              peer_flags(late, 1));
        CHECK(peer_flags((char *)late + (48 << 20), 1) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
              "device 1 access to the end of late: %u", peer_flags((char *)late + (48 << 20), 1));
    }

    CHECK(cudaSetDevice(1) == cudaSuccess, "device 1 again");
    CHECK(cudaMemcpyPeer(b, 1, a, 0, bytes) == cudaSuccess, "memcpy peer");
    memset(back, 0, bytes);
    CHECK(cudaMemcpy(back, b, bytes, cudaMemcpyDeviceToHost) == cudaSuccess, "read b");
    printf("memcpy-peer same %d\n", !memcmp(back, ones, bytes));
    for (int k = 0; k < 2; k++) {
        float *src = k ? late : a;
        void *args[] = {&src, &sum, (void *)&n};
        dim3 one = {1, 1, 1};
        CHECK(cudaLaunchKernel(&sum_id, one, one, args, 0, 0) == cudaSuccess, "kernel on device 1");
        double got = 0;
        CHECK(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess, "read sum");
        printf("peer-kernel %d sum %.0f\n", k, got);
        CHECK(got == (double)n, "kernel on device 1 over device 0's buffer %d: %.1f", k, got);
    }
    CHECK(cudaFree(b) == cudaSuccess && cudaFree(sum) == cudaSuccess, "free on device 1");
    CHECK(cudaSetDevice(0) == cudaSuccess && cudaFree(a) == cudaSuccess && cudaFree(late) == cudaSuccess,
          "free on device 0");
    free(ones);
    free(back);
    printf("done\n");
    return failures ? 1 : 0;
}
