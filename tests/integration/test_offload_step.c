/* test_offload_step: a training-like loop for step-order placement
 * (TRAINSHIM_OFFLOAD=on, run by test_offload_step.sh under the shim).
 *
 * Four 8 MiB buffers B0..B3, allocated in that order, and a 1 MiB scratch
 * buffer; every step reads each 2 MiB page of one "hot" buffer three times
 * (a 64 KiB kernel over it and two 64 KiB device-to-device copies into the
 * scratch buffer), writes the scratch chunk into the next buffer, and ends
 * with a stream synchronization.  The kernel is launched with
 * cudaLaunchKernel, so the shim learns its arguments from the parameter
 * sizes (and must leave cudaGetLastError clean).  At the end every buffer
 * is checksummed (FNV-1a, printed).
 *
 *   steady   the hot buffer is B3 every step: on a device that cannot hold
 *            all four, B3 (allocated last) is backed by the host at the
 *            out-of-memory; the previous step's order says it is used most,
 *            so it is promoted in place of a buffer no step uses
 *   coll     as steady, but the hot buffer is reached only by an in-place
 *            ncclAllReduce over a one-rank communicator (collective
 *            buffers count as uses too)
 *   rotate   the hot buffer is B(step mod 4): the previous step's order is
 *            always wrong, every boundary moves a buffer's pages for a step
 *            that reads a few hundred KiB (thrashing)
 *
 * Usage: test_offload_step [steady|coll|rotate] [steps].  Run bare (no argument),
 * as tests/run.sh runs every binary, it runs the steady loop for 3 steps
 * without anything else and checks it completes. */
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "emu.h"

#define MiB (1024u * 1024u)
#define BUF (8u * MiB)
#define PAGE (2u * MiB)
#define CHUNK (64u * 1024u)
#define NBUF 4

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess) {                                                                             \
            fprintf(stderr, "test_offload_step: %s failed: %s at line %d\n", #call, cudaGetErrorString(e_),  \
                    __LINE__);                                                                               \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

/* The kernel: adds 1 to each of the first n bytes of p (a CPU function on
 * the emulator; its address is the stub cudaLaunchKernel takes). */
static void bump_impl(void **args, const emu_launch *l)
{
    (void)l;
    unsigned char *p = *(unsigned char **)args[0];
    unsigned n = *(unsigned *)args[1];
    for (unsigned i = 0; i < n; i++)
        p[i]++;
}
static char bump_id;

static uint64_t checksum(unsigned char *dev[NBUF])
{
    unsigned char *h = malloc(BUF);
    uint64_t sum = 1469598103934665603ull;
    for (int b = 0; b < NBUF; b++) {
        CHECK(cudaMemcpy(h, dev[b], BUF, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < BUF; i++) {
            sum ^= h[i];
            sum *= 1099511628211ull;
        }
    }
    free(h);
    return sum;
}

static void step(unsigned char *buf[NBUF], unsigned char *scratch, int hot, int k, cudaStream_t s)
{
    dim3 one = { 1, 1, 1 };
    unsigned n = CHUNK;
    for (unsigned p = 0; p < BUF / PAGE; p++) {
        unsigned char *src = buf[hot] + p * PAGE + (unsigned)(k % 16) * CHUNK;
        void *args[] = { &src, &n };
        CHECK(cudaLaunchKernel(&bump_id, one, one, args, 0, s));
        for (int r = 0; r < 2; r++)
            CHECK(cudaMemcpyAsync(scratch + (p * 2 + (unsigned)r) * CHUNK, src + (unsigned)r * 4096, CHUNK,
                                  cudaMemcpyDeviceToDevice, s));
        CHECK(cudaMemcpyAsync(buf[(hot + 1) % NBUF] + p * PAGE, scratch + p * 2 * CHUNK, CHUNK,
                              cudaMemcpyDeviceToDevice, s));
    }
    CHECK(cudaStreamSynchronize(s));
}

/* coll: the hot buffer's only use is an in-place sum over one rank (the
 * identity), then a copy of its first chunk into the next buffer. */
static void coll_step(unsigned char *buf[NBUF], int hot, ncclComm_t comm, cudaStream_t s)
{
    if (ncclAllReduce(buf[hot], buf[hot], BUF, ncclUint8, ncclSum, comm, s) != ncclSuccess) {
        fprintf(stderr, "test_offload_step: ncclAllReduce failed\n");
        exit(1);
    }
    CHECK(cudaMemcpyAsync(buf[(hot + 1) % NBUF], buf[hot], CHUNK, cudaMemcpyDeviceToDevice, s));
    CHECK(cudaStreamSynchronize(s));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "steady";
    int steps = argc > 2 ? atoi(argv[2]) : 3;
    bool rotate = !strcmp(mode, "rotate");
    size_t psizes[2] = { sizeof(void *), sizeof(unsigned) };
    if (emuRegisterKernel(&bump_id, NULL, bump_impl, 2, psizes) != 0) {
        fprintf(stderr, "test_offload_step: emuRegisterKernel failed\n");
        return 1;
    }
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    unsigned char *buf[NBUF], *scratch, *h = malloc(BUF);
    for (int b = 0; b < NBUF; b++) {
        CHECK(cudaMalloc((void **)&buf[b], BUF));
        for (size_t i = 0; i < BUF; i++)
            h[i] = (unsigned char)(i * 31u + (unsigned)b * 7u);
        CHECK(cudaMemcpy(buf[b], h, BUF, cudaMemcpyHostToDevice));
    }
    free(h);
    CHECK(cudaMalloc((void **)&scratch, MiB));
    ncclComm_t comm = NULL;
    int dev0 = 0;
    if (!strcmp(mode, "coll") && ncclCommInitAll(&comm, 1, &dev0) != ncclSuccess) {
        fprintf(stderr, "test_offload_step: ncclCommInitAll failed\n");
        return 1;
    }
    for (int k = 0; k < steps; k++) {
        if (comm)
            coll_step(buf, NBUF - 1, comm, s);
        else
            step(buf, scratch, rotate ? k % NBUF : NBUF - 1, k, s);
    }
    if (comm)
        ncclCommDestroy(comm);
    /* the shim's own questions about the kernel leave no error behind */
    CHECK(cudaGetLastError());
    printf("%s %d steps: checksum %016llx\n", mode, steps, (unsigned long long)checksum(buf));
    for (int b = 0; b < NBUF; b++)
        CHECK(cudaFree(buf[b]));
    CHECK(cudaFree(scratch));
    CHECK(cudaStreamDestroy(s));
    if (argc == 1)
        printf("offload step program ok\n");
    return 0;
}
