/* A training loop that starves the GPU, for test_input_stall.sh: each of
 * STEPS steps "loads" its batch on the host (a sleep of LOAD_MS, then the
 * batch written into pageable memory), copies it with cudaMemcpyAsync and
 * runs three GEMM shapes on it (the last accumulating into g); nothing synchronizes inside the loop, so
 * the GPU finishes a step's GEMMs early in the next step's load and waits.
 *     test_input_stall LOAD_MS
 * Prints the steps, the load time and a checksum of the result. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { STEPS = 8, N = 128 };

#define CHECK(x)                                                                                             \
    do {                                                                                                     \
        if (!(x)) {                                                                                          \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #x);                                     \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)

int main(int argc, char **argv)
{
    long load_ms = argc > 1 ? atol(argv[1]) : 0;
    float *x = malloc(N * N * sizeof *x), *out = malloc(N * N * sizeof *out), *dx, *w, *h, *y, *g;
    CHECK(x && out);
    CHECK(cudaSetDevice(0) == cudaSuccess);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(cudaMalloc((void **)&dx, N * N * 4) == cudaSuccess && cudaMalloc((void **)&w, N * N * 4) == cudaSuccess);
    CHECK(cudaMalloc((void **)&g, N * N * 4) == cudaSuccess && cudaMemset(g, 0, N * N * 4) == cudaSuccess);
    CHECK(cudaMalloc((void **)&h, N * N * 4) == cudaSuccess && cudaMalloc((void **)&y, N * N * 4) == cudaSuccess);
    for (int i = 0; i < N * N; i++)
        out[i] = (float)(i % 7) / 64.0f;
    CHECK(cudaMemcpy(w, out, N * N * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    cublasHandle_t hb;
    CHECK(cublasCreate(&hb) == CUBLAS_STATUS_SUCCESS && cublasSetStream(hb, s) == CUBLAS_STATUS_SUCCESS);
    const float one = 1.0f, zero = 0.0f;
    for (int step = 0; step < STEPS; step++) {
        struct timespec t = { load_ms / 1000, (load_ms % 1000) * 1000000 };
        nanosleep(&t, NULL); /* the data loader's work */
        for (int i = 0; i < N * N; i++)
            x[i] = (float)((i + step) % 5) / 32.0f;
        CHECK(cudaMemcpyAsync(dx, x, N * N * 4, cudaMemcpyHostToDevice, s) == cudaSuccess);
        CHECK(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dx, N, w, N, &zero, h, N) == 0);
        CHECK(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, N, N / 2, N, &one, h, N, w, N, &zero, y, N) == 0);
        CHECK(cublasSgemm(hb, CUBLAS_OP_T, CUBLAS_OP_N, N, N, N / 2, &one, dx, N, y, N, &one, g, N) == 0);
    }
    CHECK(cudaMemcpyAsync(out, g, N * N * 4, cudaMemcpyDeviceToHost, s) == cudaSuccess);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    double sum = 0;
    for (int i = 0; i < N * N; i++)
        sum += out[i];
    printf("steps %d load_ms %ld checksum %.6e\n", STEPS, load_ms, sum);
    cublasDestroy(hb);
    return 0;
}
