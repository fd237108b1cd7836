/* test_advice_comm_overlap.c: GPU work for test_advice_comm_overlap.sh, run
 * under the shim with TRAINSHIM_CUPTI=1: STEPS steps of two compute kernels
 * on one stream (the last layer's gradients, 1 ms, then the rest of the
 * backward, 40 ms) and a 4 ms kernel named as NCCL's all-reduce kernel on
 * another stream, which waits for an event on the compute stream.  The emulator's NCCL runs a collective as a host function on
 * its stream, which CUPTI does not record, so a kernel under the name NCCL's
 * device code has on a GPU stands in for it.
 *
 *   serial   the event follows the whole backward, as one all-reduce of
 *            every gradient after it: no compute beside the NCCL kernel.
 *   overlap  the event follows the first 1 ms kernel, as a gradient bucket
 *            reduced once ready: the NCCL kernel runs inside the 40 ms one,
 *            which the compute stream's worker starts as soon as the first
 *            ends.
 *
 * Prints "facts steps=N compute_ms=40 nccl_ms=4".  Every run checks the
 * order the event promises (the NCCL kernel starts after the kernel the
 * event follows ends) from the kernels' own clock reads; without an
 * argument it runs both modes that way, without the shim. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu.h"

#define STEPS 5
#define COMPUTE_MS 40
#define NCCL_MS 4

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* when the last compute kernels ended (1 ms: the first, else the rest) and
 * the last NCCL kernel started, as the kernels saw it */
static uint64_t first_end, rest_end, nccl_start;

static void k_compute(void **args, const emu_launch *l)
{
    (void)l;
    int ms = *(int *)args[0];
    sleep_ms(ms);
    __atomic_store_n(ms == 1 ? &first_end : &rest_end, now_ns(), __ATOMIC_RELEASE);
}

static void k_nccl(void **args, const emu_launch *l)
{
    (void)args;
    (void)l;
    __atomic_store_n(&nccl_start, now_ns(), __ATOMIC_RELEASE);
    sleep_ms(NCCL_MS);
}

#define CHECK(call)                                                                         \
    do {                                                                                    \
        CUresult r_ = (call);                                                               \
        if (r_ != CUDA_SUCCESS) {                                                           \
            fprintf(stderr, "%s:%d: %s failed with %d\n", __FILE__, __LINE__, #call, (int)r_); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static char compute_stub, nccl_stub;

static void run(CUfunction fc, CUfunction fn, int serial)
{
    CUstream compute, comm;
    CUevent done;
    CHECK(cuStreamCreate(&compute, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&comm, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    int first_ms = 1, rest_ms = COMPUTE_MS;
    void *first[] = { &first_ms }, *rest[] = { &rest_ms };
    for (int s = 0; s < STEPS; s++) {
        CHECK(cuLaunchKernel(fc, 1, 1, 1, 32, 1, 1, 0, compute, first, NULL));
        if (!serial)
            CHECK(cuEventRecord(done, compute));
        CHECK(cuLaunchKernel(fc, 1, 1, 1, 32, 1, 1, 0, compute, rest, NULL));
        if (serial)
            CHECK(cuEventRecord(done, compute));
        CHECK(cuStreamWaitEvent(comm, done, 0));
        CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, comm, NULL, NULL));
        CHECK(cuStreamSynchronize(comm));
        CHECK(cuStreamSynchronize(compute));
        uint64_t after = serial ? rest_end : first_end;
        if (nccl_start < after) {
            fprintf(stderr, "%s step %d: the NCCL kernel started %.3f ms before the event's kernel ended\n",
                    serial ? "serial" : "overlap", s, (double)(after - nccl_start) / 1e6);
            exit(1);
        }
    }
    CHECK(cuEventDestroy(done));
    CHECK(cuStreamDestroy(comm));
    CHECK(cuStreamDestroy(compute));
}

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "serial") && strcmp(argv[1], "overlap"))) {
        fprintf(stderr, "usage: test_advice_comm_overlap [serial|overlap]\n");
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    if (emuRegisterKernel(&compute_stub, "_Z12backward_mlpi", k_compute, 1, (const size_t[]){ sizeof(int) }) ||
        emuRegisterKernel(&nccl_stub, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", k_nccl, 0, NULL)) {
        fprintf(stderr, "emuRegisterKernel failed\n");
        return 1;
    }
    CUfunction fc, fn;
    CHECK((CUresult)emuGetFunction((void **)&fc, &compute_stub, NULL));
    CHECK((CUresult)emuGetFunction((void **)&fn, &nccl_stub, NULL));
    if (argc == 2)
        run(fc, fn, !strcmp(argv[1], "serial"));
    else
        run(fc, fn, 1), run(fc, fn, 0);
    printf("facts steps=%d compute_ms=%d nccl_ms=%d\n", STEPS, COMPUTE_MS, NCCL_MS);
    return 0;
}
