/* test_devmem_multidev: stream-ordered allocation with two devices driven
 * from one thread (run by test_devmem_multidev.sh with EMU_DEVICES=2,
 * without and under the shim).  CUDA documents that cudaMallocAsync takes
 * its memory from the pool of the stream's device, whichever device is
 * current, and that a free may be ordered on any stream.  So the program:
 *   - allocates on device 1's stream while device 0 is current, and reads
 *     the device of each pointer back;
 *   - frees device 0's buffers on device 1's stream, behind a kernel there
 *     that writes them late (peer access), then reuses the memory on device
 *     0's stream: the reuse must wait for that stream's work;
 *   - frees device 1's buffers synchronously while device 0 is current;
 *   - allocates from a pool of its own on device 1, device 0 current.
 * stdout carries only what must be identical with and without the shim; any
 * failed call is a FAIL line. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/emu.h"

#include "check.h"
#include "two_devices.h"

#define ROUNDS 40
#define BYTES ((size_t)3 << 20)

static int device_of(const void *p)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess)
        return -9;
    return a.device;
}

/* late_fill(buf, n, value): sleeps, then fills buf: a kernel whose writes
 * land well after its launch. */
static char late_fill_id;
static void late_fill_impl(void **args, const emu_launch *l)
{
    (void)l;
    unsigned char *buf = *(unsigned char **)args[0];
    size_t n = *(size_t *)args[1];
    int value = *(int *)args[2];
    usleep(2000);
    memset(buf, value, n);
}

/* Allocations on device 1's stream while device 0 is current: each on
 * device 1, written from pageable memory, filled in part, and read back
 * into pinned and pageable memory, all on that stream. */
static void on_other_device(cudaStream_t s1, unsigned char *host)
{
    int wrong = 0, bad = 0;
    unsigned char *pageable = malloc(BYTES);
    CHECK(pageable != NULL, "pageable buffer");
    if (!pageable)
        return;
    CHECK(cudaSetDevice(0) == cudaSuccess, "device 0 current");
    for (int k = 0; k < ROUNDS; k++) {
        size_t n = BYTES - (size_t)k * 4099;
        unsigned char *p = NULL;
        CHECK(cudaMallocAsync((void **)&p, n, s1) == cudaSuccess, "alloc %d on device 1's stream", k);
        wrong += device_of(p) != 1;
        memset(pageable, k + 2, n);
        CHECK(cudaMemcpyAsync(p, pageable, n, cudaMemcpyHostToDevice, s1) == cudaSuccess, "write %d", k);
        CHECK(cudaMemsetAsync(p, k + 1, n / 2, s1) == cudaSuccess, "memset %d", k);
        CHECK(cudaMemcpyAsync(host, p, n, cudaMemcpyDeviceToHost, s1) == cudaSuccess, "read %d", k);
        CHECK(cudaMemcpyAsync(pageable, p, n, cudaMemcpyDeviceToHost, s1) == cudaSuccess, "read %d", k);
        CHECK(cudaFreeAsync(p, s1) == cudaSuccess, "free %d on device 1's stream", k);
        CHECK(cudaStreamSynchronize(s1) == cudaSuccess, "sync %d", k);
        for (size_t i = 0; i < n; i += 4093) {
            unsigned char want = (unsigned char)(i < n / 2 ? k + 1 : k + 2);
            bad += (host[i] != want) + (pageable[i] != want);
        }
    }
    free(pageable);
    printf("device 1 stream, device 0 current: %d allocations, %d on another device, %d bad bytes\n", ROUNDS,
           wrong, bad);
    /* the legacy stream is the current device's */
    void *p = NULL;
    CHECK(cudaSetDevice(1) == cudaSuccess, "device 1 current");
    CHECK(cudaMallocAsync(&p, 1 << 20, 0) == cudaSuccess, "alloc on the legacy stream");
    printf("legacy stream, device 1 current: device %d\n", device_of(p));
    CHECK(cudaFreeAsync(p, 0) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, "free legacy");
}

/* Device 0's buffers freed on device 1's stream behind a late kernel
 * writing them; the memory is then reused on device 0's stream, whose data
 * must not be overwritten by that kernel. */
static void freed_on_other_device(cudaStream_t s0, cudaStream_t s1, unsigned char *host)
{
    int bad = 0, late = 0xEE;
    size_t n = BYTES;
    dim3 one = { 1, 1, 1 };
    for (int k = 0; k < ROUNDS; k++) {
        void *q = NULL, *r = NULL;
        CHECK(cudaSetDevice(0) == cudaSuccess, "device 0 current");
        CHECK(cudaMallocAsync(&q, BYTES, s0) == cudaSuccess, "q %d on device 0", k);
        CHECK(cudaStreamSynchronize(s0) == cudaSuccess, "q ready");
        CHECK(cudaSetDevice(1) == cudaSuccess, "device 1 current");
        void *args[] = { &q, &n, &late };
        CHECK(cudaLaunchKernel(&late_fill_id, one, one, args, 0, s1) == cudaSuccess, "late kernel %d", k);
        CHECK(cudaFreeAsync(q, s1) == cudaSuccess, "free q %d on device 1's stream", k);
        CHECK(cudaSetDevice(0) == cudaSuccess, "device 0 current again");
        CHECK(cudaMallocAsync(&r, BYTES, s0) == cudaSuccess, "r %d on device 0", k);
        CHECK(cudaMemsetAsync(r, k + 1, BYTES, s0) == cudaSuccess, "fill r %d", k);
        cudaError_t e0 = cudaStreamSynchronize(s0), e1 = cudaStreamSynchronize(s1);
        CHECK(e0 == cudaSuccess && e1 == cudaSuccess, "sync round %d: %d %d", k, (int)e0, (int)e1);
        CHECK(cudaMemcpy(host, r, BYTES, cudaMemcpyDeviceToHost) == cudaSuccess, "read r %d", k);
        for (size_t i = 0; i < BYTES; i += 4093)
            bad += host[i] != (unsigned char)(k + 1);
        CHECK(cudaFreeAsync(r, s0) == cudaSuccess, "free r %d", k);
    }
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync device 0");
    printf("device 0 buffers freed on device 1's stream: %d rounds, %d bad bytes\n", ROUNDS, bad);
}

/* Device 1's buffers freed by cudaFree while device 0 is current, then
 * allocated again on device 1. */
static void sync_free_elsewhere(cudaStream_t s1)
{
    void *p[8];
    CHECK(cudaSetDevice(1) == cudaSuccess, "device 1 current");
    for (int i = 0; i < 8; i++)
        CHECK(cudaMalloc(&p[i], (size_t)(i + 1) << 20) == cudaSuccess, "cudaMalloc %d on device 1", i);
    CHECK(cudaSetDevice(0) == cudaSuccess, "device 0 current");
    for (int i = 0; i < 8; i++)
        CHECK(cudaFree(p[i]) == cudaSuccess, "cudaFree %d of device 1 from device 0", i);
    int wrong = 0;
    for (int i = 0; i < 8; i++) {
        CHECK(cudaMallocAsync(&p[i], (size_t)(i + 1) << 20, s1) == cudaSuccess, "again %d", i);
        wrong += device_of(p[i]) != 1;
    }
    for (int i = 0; i < 8; i++)
        CHECK(cudaFreeAsync(p[i], s1) == cudaSuccess, "free again %d", i);
    CHECK(cudaStreamSynchronize(s1) == cudaSuccess, "sync s1");
    printf("device 1 buffers freed from device 0: %d on another device after\n", wrong);
}

/* A pool of device 1's own, allocated from on device 1's stream while
 * device 0 is current (the program's pool: the driver's, logged on device 1). */
static void own_pool_elsewhere(cudaStream_t s1)
{
    struct cudaMemPoolProps props = { .allocType = cudaMemAllocationTypePinned,
                                      .location = { .type = cudaMemLocationTypeDevice, .id = 1 } };
    cudaMemPool_t mine = NULL;
    void *p = NULL;
    CHECK(cudaSetDevice(0) == cudaSuccess && cudaMemPoolCreate(&mine, &props) == cudaSuccess, "device 1's pool");
    CHECK(cudaMallocFromPoolAsync(&p, 5 << 20, mine, s1) == cudaSuccess, "from device 1's pool");
    printf("own pool of device 1, device 0 current: device %d\n", device_of(p));
    CHECK(cudaFreeAsync(p, s1) == cudaSuccess && cudaStreamSynchronize(s1) == cudaSuccess, "free it");
    CHECK(cudaMemPoolDestroy(mine) == cudaSuccess, "destroy device 1's pool");
}

/* Streams made and destroyed in turn on the two devices, each allocated
 * from with the other device current: the driver may hand a destroyed
 * stream's handle to the next stream, of the other device, whose memory
 * must still come from its own device.  Streams destroyed one by one, then
 * streams that die with their device's reset (no stream destroy).  Last in
 * the program: the resets end everything else. */
#define HANDLE_ROUNDS 12
static void reused_handles(void)
{
    int wrong = 0, reused[2] = { 0, 0 };
    uintptr_t seen[2 * HANDLE_ROUNDS];
    for (int k = 0; k < 2 * HANDLE_ROUNDS; k++) {
        int dev = k % 2;
        cudaStream_t s = NULL;
        void *p = NULL;
        CHECK(cudaSetDevice(dev) == cudaSuccess && cudaStreamCreate(&s) == cudaSuccess, "stream %d", k);
        seen[k] = (uintptr_t)s;
        for (int j = k - 1; j >= 0; j -= 2) /* the other device's streams */
            if (seen[j] == seen[k]) {
                reused[k >= HANDLE_ROUNDS]++;
                break;
            }
        CHECK(cudaSetDevice(1 - dev) == cudaSuccess && cudaMallocAsync(&p, 1 << 20, s) == cudaSuccess, "alloc");
        wrong += device_of(p) != dev;
        CHECK(cudaFreeAsync(p, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess, "free");
        if (k < HANDLE_ROUNDS)
            CHECK(cudaStreamDestroy(s) == cudaSuccess, "destroy");
        else
            CHECK(cudaSetDevice(dev) == cudaSuccess && cudaDeviceReset() == cudaSuccess, "reset");
        usleep(2000); /* time for the stream's worker to retire it: its handle is free */
    }
    /* without a handle of the other device's reused, the case is not tested */
    CHECK(reused[0] && reused[1], "handles of the other device's destroyed streams reused: %d, after resets %d",
          reused[0], reused[1]);
    printf("streams on alternate devices, the other current: %d of %d allocations on another device\n", wrong,
           2 * HANDLE_ROUNDS);
}

int main(int argc, char **argv)
{
    (void)argc;
    if (!two_devices(argv))
        return 1;
    size_t sizes[3] = { sizeof(void *), sizeof(size_t), sizeof(int) };
    if (emuRegisterKernel(&late_fill_id, NULL, late_fill_impl, 3, sizes) != 0) {
        printf("FAIL: emuRegisterKernel\n");
        return 1;
    }
    cudaStream_t s0, s1;
    unsigned char *host = NULL;
    /* device 1's kernels write device 0's memory: peer access, and for
     * memory from device 0's pool, the pool's access granted to device 1 */
    CHECK(cudaSetDevice(1) == cudaSuccess && cudaDeviceEnablePeerAccess(0, 0) == cudaSuccess, "peer access");
    cudaMemPool_t pool0;
    struct cudaMemAccessDesc to1 = { { cudaMemLocationTypeDevice, 1 }, cudaMemAccessFlagsProtReadWrite };
    CHECK(cudaDeviceGetDefaultMemPool(&pool0, 0) == cudaSuccess && cudaMemPoolSetAccess(pool0, &to1, 1) == cudaSuccess,
          "device 0's pool open to device 1");
    CHECK(cudaSetDevice(1) == cudaSuccess && cudaStreamCreate(&s1) == cudaSuccess, "device 1's stream");
    CHECK(cudaSetDevice(0) == cudaSuccess && cudaStreamCreate(&s0) == cudaSuccess, "device 0's stream");
    CHECK(cudaMallocHost((void **)&host, BYTES) == cudaSuccess, "pinned host buffer");
    if (failures)
        return 1;
    on_other_device(s1, host);
    freed_on_other_device(s0, s1, host);
    sync_free_elsewhere(s1);
    own_pool_elsewhere(s1);
    CHECK(cudaFreeHost(host) == cudaSuccess, "free host");
    CHECK(cudaStreamDestroy(s0) == cudaSuccess, "destroy s0");
    CHECK(cudaSetDevice(1) == cudaSuccess && cudaStreamDestroy(s1) == cudaSuccess, "destroy s1");
    reused_handles();
    printf("done\n");
    return failures ? 1 : 0;
}
