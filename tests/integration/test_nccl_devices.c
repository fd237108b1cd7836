/* test_nccl_devices: NCCL's single-process, single-thread use of several
 * GPUs (ncclCommInitAll as the program's first CUDA call, then grouped
 * all-reduces over every device's stream with device 0 current, as NCCL's
 * own example does).  Run by test_nccl_devices.sh on two emulated devices:
 * the sums are checked here; under the shim with every call timed, the
 * report must time every rank's calls (a timing event must belong to the
 * stream's context, not the current one). */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NDEV 2
#define COUNT (1 << 18)
#define ROUNDS 10

int main(int argc, char **argv)
{
    if (!getenv("EMU_DEVICES")) {
        setenv("EMU_DEVICES", "2", 1); /* run by tests/run.sh directly */
        execv("/proc/self/exe", argv);
        printf("FAIL: re-exec with EMU_DEVICES=2\n");
        return 1;
    }
    (void)argc;
    int devs[NDEV] = { 0, 1 }, failures = 0;
    ncclComm_t comms[NDEV];
    cudaStream_t s[NDEV];
    float *buf[NDEV];
    static float host[COUNT];
    if (ncclCommInitAll(comms, NDEV, devs) != ncclSuccess) {
        printf("FAIL: ncclCommInitAll as the first CUDA call\n");
        return 1;
    }
    for (int i = 0; i < NDEV; i++) {
        for (int k = 0; k < COUNT; k++)
            host[k] = (float)(i + 1);
        if (cudaSetDevice(i) || cudaStreamCreate(&s[i]) || cudaMalloc((void **)&buf[i], COUNT * sizeof(float))
            || cudaMemcpy(buf[i], host, COUNT * sizeof(float), cudaMemcpyHostToDevice)) {
            printf("FAIL: device %d setup\n", i);
            return 1;
        }
    }
    cudaSetDevice(0);
    for (int r = 0; r < ROUNDS; r++) {
        failures += ncclGroupStart() != ncclSuccess;
        for (int i = 0; i < NDEV; i++)
            failures += ncclAllReduce(buf[i], buf[i], COUNT, ncclFloat, ncclSum, comms[i], s[i]) != ncclSuccess;
        failures += ncclGroupEnd() != ncclSuccess;
    }
    /* 1 + 2, doubled by every later round */
    float want = 3.0f;
    for (int r = 1; r < ROUNDS; r++)
        want *= 2.0f;
    for (int i = 0; i < NDEV; i++) {
        cudaSetDevice(i);
        failures += cudaStreamSynchronize(s[i]) != cudaSuccess;
        failures += cudaMemcpy(host, buf[i], COUNT * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess;
        for (int k = 0; k < COUNT; k += 997)
            failures += host[k] != want;
        cudaFree(buf[i]);
        ncclCommDestroy(comms[i]);
    }
    printf("%d ranks, %d rounds of %d floats: %s\n", NDEV, ROUNDS, COUNT, failures ? "FAILED" : "sums right");
    return failures ? 1 : 0;
}
