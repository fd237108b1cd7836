/* test_rt_peer_order: cudaMemcpyPeer is "serialized with respect to all
 * pending and future asynchronous work in to the current device, srcDevice,
 * and dstDevice" (cuda_runtime_api.h).  A pageable cudaMemcpy returns once
 * its source is staged, with the copy itself still queued on that device's
 * legacy stream; a peer copy issued right after (from another current
 * device) must still read the new data, and work issued after the peer copy
 * on the destination device must see its result.  Each case is forced with
 * a slow host function ahead of the first copy, then raced with varying
 * jitter and sizes. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "emu.h"

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
                                        failures++; } } while (0)
#define CHECK_RT(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        fprintf(stderr, "FAIL %s:%d: %s = %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
        failures++; } } while (0)

#define MAXN ((1u << 20) + 3)

static void CUDART_CB sleep_20ms(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 8));
}

/* src on device 1, dst on device 0.  issue_dev: the device current when
 * cudaMemcpyPeer is called; slow: a slow host function first on device 1's
 * legacy stream, so the H2D copy is certainly still queued. */
static int round_trip(unsigned char *src_d1, unsigned char *dst_d0, unsigned char *host, unsigned char *back,
                      size_t n, unsigned seed, int issue_dev, int slow)
{
    fill(host, n, seed);
    CHECK_RT(cudaSetDevice(1));
    if (slow) CHECK_RT(cudaLaunchHostFunc(0, sleep_20ms, NULL));
    CHECK_RT(cudaMemcpy(src_d1, host, n, cudaMemcpyHostToDevice));    /* pageable: staged, still queued */
    memset(host, 0xEE, n);                                              /* the caller may reuse it at once */
    CHECK_RT(cudaSetDevice(issue_dev));
    CHECK_RT(cudaMemcpyPeer(dst_d0, 0, src_d1, 1, n));
    CHECK_RT(cudaSetDevice(0));
    memset(back, 0, n);
    CHECK_RT(cudaMemcpy(back, dst_d0, n, cudaMemcpyDeviceToHost));    /* later work on the destination */
    fill(host, n, seed);
    if (memcmp(back, host, n) != 0) {
        size_t i = 0;
        while (back[i] == host[i]) i++;
        fprintf(stderr, "FAIL: n=%zu seed=%u issued on device %d slow=%d: byte %zu is %u, want %u\n",
                n, seed, issue_dev, slow, i, back[i], host[i]);
        failures++;
        return 0;
    }
    return 1;
}

int main(void)
{
    setenv("EMU_DEVICES", "2", 1);
    unsigned char *src_d1, *dst_d0, *host = malloc(MAXN), *back = malloc(MAXN);
    if (!host || !back) return 1;
    CHECK_RT(cudaSetDevice(1));
    CHECK_RT(cudaMalloc((void **)&src_d1, MAXN));
    CHECK_RT(cudaSetDevice(0));
    CHECK_RT(cudaMalloc((void **)&dst_d0, MAXN));
    if (failures) return 1;

    /* Forced: issued from the destination device (the copy must wait for
     * device 1's queued H2D), and from the source device (device 0's later
     * D2H must wait for the peer copy queued on device 1). */
    round_trip(src_d1, dst_d0, host, back, 4096, 1, 0, 1);
    round_trip(src_d1, dst_d0, host, back, 4096, 2, 1, 1);

    /* Raced: jitter, sizes and issuing device vary. */
    static const size_t sizes[] = {1, 100, 4096, 65536 + 7, MAXN};
    static const unsigned jitters[] = {0, 20, 50, 200};
    int ok = 0, total = 0;
    for (unsigned r = 0; r < 80; r++) {
        emuSetJitterUs(jitters[r % 4]);
        ok += round_trip(src_d1, dst_d0, host, back, sizes[(r / 4) % 5], r + 10, (int)(r / 20) % 2, 0);
        total++;
    }
    CHECK_RT(cudaDeviceSynchronize());
    CHECK_RT(cudaFree(dst_d0));
    CHECK_RT(cudaSetDevice(1));
    CHECK_RT(cudaFree(src_d1));
    free(host);
    free(back);
    if (failures) {
        fprintf(stderr, "test_rt_peer_order: %d failure(s) (%d of %d raced rounds correct)\n", failures, ok, total);
        return 1;
    }
    printf("test_rt_peer_order: ok\n");
    return 0;
}
