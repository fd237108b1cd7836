/* test_compute_cupti: GEMMs of known shapes through cuBLAS on two streams
 * (single, strided-batched and pointer-array batched, FP32 and FP16), for
 * tests/integration/test_compute_cupti.sh, which runs it under the shim with
 * TRAINSHIM_CUPTI=1 and checks that COMPUTE timed every GEMM from the CUPTI
 * kernels.  Prints "facts calls=N" (the GEMM calls it made, all successful). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                                  \
    do {                                                                          \
        int rc_ = (int)(x);                                                       \
        if (rc_) {                                                                \
            fprintf(stderr, "FAIL: %s = %d at line %d\n", #x, rc_, __LINE__);      \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

int main(void)
{
    enum { N = 128 };
    float *a, *b, *c;
    uint16_t *ha, *hb, *hc;
    CHECK(cudaMalloc((void **)&a, 4 * N * N * sizeof(float)));
    CHECK(cudaMalloc((void **)&b, 4 * N * N * sizeof(float)));
    CHECK(cudaMalloc((void **)&c, 4 * N * N * sizeof(float)));
    CHECK(cudaMalloc((void **)&ha, N * N * sizeof(uint16_t)));
    CHECK(cudaMalloc((void **)&hb, N * N * sizeof(uint16_t)));
    CHECK(cudaMalloc((void **)&hc, N * N * sizeof(uint16_t)));
    CHECK(cudaMemset(a, 0, 4 * N * N * sizeof(float)));
    CHECK(cudaMemset(b, 0, 4 * N * N * sizeof(float)));
    CHECK(cudaMemset(ha, 0, N * N * sizeof(uint16_t)));
    CHECK(cudaMemset(hb, 0, N * N * sizeof(uint16_t)));
    cudaStream_t s[2];
    CHECK(cudaStreamCreate(&s[0]));
    CHECK(cudaStreamCreate(&s[1]));
    cublasHandle_t h;
    CHECK(cublasCreate(&h));
    const float one = 1, zero = 0;
    float *arr_a[2] = {a, a + N * N}, *arr_b[2] = {b, b + N * N}, *arr_c[2] = {c, c + N * N};
    float **darr;
    CHECK(cudaMalloc((void **)&darr, 6 * sizeof(float *)));
    CHECK(cudaMemcpy(darr, arr_a, sizeof arr_a, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(darr + 2, arr_b, sizeof arr_b, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(darr + 4, arr_c, sizeof arr_c, cudaMemcpyHostToDevice));
    int calls = 0;
    for (int it = 0; it < 3; it++) {
        CHECK(cublasSetStream(h, s[it % 2]));
        /* 64x32x16 FP32 NN */
        CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 64, 32, 16, &one, a, N, b, N, &zero, c, N));
        calls++;
        /* 128x64x32 FP16 TN (FP32 compute) */
        CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 128, 64, 32, &one, ha, CUDA_R_16F, N, hb, CUDA_R_16F, N, &zero,
                           hc, CUDA_R_16F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        calls++;
        /* 32x32x32 x4 FP32 strided batched */
        CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, 32, 32, 32, &one, a, N, N * N, b, N, N * N,
                                        &zero, c, N, N * N, 4));
        calls++;
        /* 16x16x16 x2 FP32 pointer-array batched (computed by cuBLAS itself) */
        CHECK(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 16, 16, 16, &one, (const float *const *)darr, N,
                                 (const float *const *)(darr + 2), N, &zero, darr + 4, N, 2));
        calls++;
    }
    CHECK(cudaDeviceSynchronize());
    CHECK(cublasDestroy(h));
    printf("facts calls=%d\n", calls);
    return 0;
}
