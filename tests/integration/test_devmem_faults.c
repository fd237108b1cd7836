/* test_devmem_faults: device memory exhaustion and driver failures.  Run by
 * test_devmem_faults.sh with EMU_DEVICE_MEMORY=256MiB, with and without the
 * shim and with faults injected into the calls only the pool makes
 * (cuMemCreate, cuMemMap): the program sees the same results (how many
 * 16 MiB buffers fit, the error code and last error at exhaustion, the data
 * it wrote) in every run, and after it frees everything and resets the
 * device no physical memory is left.
 *
 * Argument: "faults" injects the driver failures given in argv[2] (an
 * emuSetFault spec) after warm-up; "limit" expects TRAINSHIM_MEMORY_LIMIT to
 * stop it at 4 buffers. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/emu.h"

#include "check.h"

enum { MAXBUF = 64 };
#define BUF ((size_t)16 << 20)

/* Fills buffers until the device refuses; returns how many fit. */
static int fill(void **buf, int tag)
{
    int n = 0;
    for (; n < MAXBUF; n++) {
        cudaError_t r = cudaMalloc(&buf[n], BUF);
        if (r != cudaSuccess) {
            cudaError_t last = cudaGetLastError();
            printf("exhausted after %d buffers: %d (last error %d)\n", n, (int)r, (int)last);
            break;
        }
        /* both ends: the first and the last page of each buffer hold data */
        CHECK(cudaMemset(buf[n], (n + tag) & 0xff, 4096) == cudaSuccess, "memset head %d", n);
        CHECK(cudaMemset((char *)buf[n] + BUF - 4096, (n + tag) & 0xff, 4096) == cudaSuccess, "memset tail %d", n);
    }
    return n;
}

static void verify_free(void **buf, int n, int tag)
{
    unsigned char probe[4];
    for (int i = 0; i < n; i++) {
        CHECK(cudaMemcpy(probe, (char *)buf[i] + BUF - 4, 4, cudaMemcpyDeviceToHost) == cudaSuccess, "read %d", i);
        CHECK(probe[3] == ((i + tag) & 0xff), "buffer %d tail holds %d", i, probe[3]);
        CHECK(cudaMemcpy(probe, buf[i], 4, cudaMemcpyDeviceToHost) == cudaSuccess, "read head %d", i);
        CHECK(probe[0] == ((i + tag) & 0xff), "buffer %d head holds %d", i, probe[0]);
        CHECK(cudaFree(buf[i]) == cudaSuccess, "free %d", i);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "plain";
    void *buf[MAXBUF];
    /* warm-up: small allocations create the pool */
    void *w[16];
    for (int i = 0; i < 16; i++) CHECK(cudaMalloc(&w[i], 100000 + i) == cudaSuccess, "warm %d", i);
    for (int i = 0; i < 16; i++) CHECK(cudaFree(w[i]) == cudaSuccess, "warm free %d", i);
    if (!strcmp(mode, "faults") && argc > 2) CHECK(emuSetFault(argv[2]) == 0, "fault spec %s", argv[2]);

    for (int round = 0; round < 3; round++) {
        int n = fill(buf, round);
        printf("round %d: %d buffers\n", round, n);
        if (!strcmp(mode, "limit")) CHECK(n == 4, "limit: %d buffers", n);
        verify_free(buf, n, round);
        /* mixed sizes after exhaustion: fragmentation must not lose memory */
        void *s[8];
        for (int i = 0; i < 8; i++) CHECK(cudaMalloc(&s[i], (size_t)(i + 1) << 20) == cudaSuccess, "small %d", i);
        for (int i = 0; i < 8; i++) CHECK(cudaFree(s[i]) == cudaSuccess, "small free %d", i);
    }
    emuSetFault("");
    CHECK(cudaDeviceReset() == cudaSuccess, "reset");
    CHECK(emuGetCounter("phys.current") == 0, "phys.current after freeing everything and reset: %llu",
          (unsigned long long)emuGetCounter("phys.current"));
    fprintf(stderr, "%s: cuMemCreate %llu cuMemMap %llu cuMemAlloc_v2 %llu\n", mode,
            (unsigned long long)emuGetCounter("calls.cuMemCreate"), (unsigned long long)emuGetCounter("calls.cuMemMap"),
            (unsigned long long)emuGetCounter("calls.cuMemAlloc_v2"));
    printf("done\n");
    return failures ? 1 : 0;
}
