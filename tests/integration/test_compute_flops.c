/* GEMMs of known shapes through every cuBLAS / cuBLASLt entry point that
 * carries a shape (section 9 of the reference: <t>gemm, <t>gemmBatched,
 * <t>gemmStridedBatched, GemmEx, GemmBatchedEx, GemmStridedBatchedEx, each
 * with its _64 twin, and cublasLtMatmul plain and transposed), plus one
 * invalid call, and one GEMM captured into a CUDA graph.  The program works out, from the status of every call, the
 * totals the shim must log and prints them on its last line:
 *     expect calls=<ok calls> failed=<failed calls> flops=<FLOPs> misaligned=<FLOPs>
 * test_compute_flops.sh runs it under the shim and compares the report's JSON
 * with that line.  Run alone it checks that the calls the emulator implements
 * succeed. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

/* cublas_api.h declares the half-precision GEMMs for C++ only; same ABI. */
struct __half;
cublasStatus_t cublasHgemm(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const struct __half *,
                           const struct __half *, int, const struct __half *, int, const struct __half *,
                           struct __half *, int);
cublasStatus_t cublasHgemm_64(cublasHandle_t, cublasOperation_t, cublasOperation_t, int64_t, int64_t, int64_t,
                              const struct __half *, const struct __half *, int64_t, const struct __half *, int64_t,
                              const struct __half *, struct __half *, int64_t);
cublasStatus_t cublasHgemmStridedBatched(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                         const struct __half *, const struct __half *, int, long long int,
                                         const struct __half *, int, long long int, const struct __half *,
                                         struct __half *, int, long long int, int);
cublasStatus_t cublasHgemmStridedBatched_64(cublasHandle_t, cublasOperation_t, cublasOperation_t, int64_t, int64_t,
                                            int64_t, const struct __half *, const struct __half *, int64_t,
                                            long long int, const struct __half *, int64_t, long long int,
                                            const struct __half *, struct __half *, int64_t, long long int, int64_t);
cublasStatus_t cublasHgemmBatched(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                  const struct __half *, const struct __half *const[], int,
                                  const struct __half *const[], int, const struct __half *,
                                  struct __half *const[], int, int);

static int failures;
#define EXPECT(cond) do { if (!(cond)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

static uint64_t calls, failed, flops, misaligned;

/* One GEMM's outcome: its FLOPs count only when it succeeded.  align: the
 * tensor-core multiple its type asks for (0: none). */
static void account(const char *what, int status, int64_t m, int64_t n, int64_t k, int64_t batch, int cplx,
                    int align, int must_work)
{
    uint64_t f = 2ull * (uint64_t)(m * n * k * batch) * (cplx ? 4 : 1);
    if (status == 0) {
        calls++;
        flops += f;
        if (align && (m % align || n % align || k % align))
            misaligned += f;
    } else {
        failed++;
    }
    printf("%-34s status %2d  %lldx%lldx%lld x%lld\n", what, status, (long long)m, (long long)n, (long long)k,
           (long long)batch);
    if (must_work && status != 0) {
        printf("FAIL: %s returned %d\n", what, status);
        failures++;
    }
}

#define LD 64
#define STRIDE ((long long)LD * LD)

int main(void)
{
    EXPECT(cudaSetDevice(0) == cudaSuccess);
    cudaStream_t s;
    EXPECT(cudaStreamCreate(&s) == cudaSuccess);
    size_t bytes = (size_t)8 * STRIDE * sizeof(double) * 2; /* room for 8 batches of complex doubles */
    void *A, *B, *C;
    EXPECT(cudaMalloc(&A, bytes) == cudaSuccess);
    EXPECT(cudaMalloc(&B, bytes) == cudaSuccess);
    EXPECT(cudaMalloc(&C, bytes) == cudaSuccess);
    EXPECT(cudaMemset(A, 0, bytes) == cudaSuccess);
    EXPECT(cudaMemset(B, 0, bytes) == cudaSuccess);
    EXPECT(cudaMemset(C, 0, bytes) == cudaSuccess);
    /* batched calls take device arrays of pointers */
    void *hp[3][2];
    for (int b = 0; b < 2; b++) {
        hp[0][b] = (char *)A + (size_t)b * STRIDE * 8;
        hp[1][b] = (char *)B + (size_t)b * STRIDE * 8;
        hp[2][b] = (char *)C + (size_t)b * STRIDE * 8;
    }
    void **dp;
    EXPECT(cudaMalloc((void **)&dp, sizeof hp) == cudaSuccess);
    EXPECT(cudaMemcpy(dp, hp, sizeof hp, cudaMemcpyHostToDevice) == cudaSuccess);
    void **Aa = dp, **Ba = dp + 2, **Ca = dp + 4;

    cublasHandle_t h;
    EXPECT(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    EXPECT(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS);
    const float f1 = 1, f0 = 0;
    const double d1 = 1, d0 = 0;
    const uint16_t h1 = 0x3c00, h0 = 0; /* half 1.0, 0.0 */
    const cuComplex c1 = {1, 0}, c0 = {0, 0};
    const cuDoubleComplex z1 = {1, 0}, z0 = {0, 0};
    const struct __half *ha = (const void *)&h1, *hb = (const void *)&h0;
    const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
    int st;

    /* ---- typed GEMMs ---- */
    st = cublasSgemm_v2(h, N, N, 8, 6, 5, &f1, A, LD, B, LD, &f0, C, LD);
    account("cublasSgemm_v2", st, 8, 6, 5, 1, 0, 0, 1);
    st = cublasSgemm_v2_64(h, N, T, 16, 4, 8, &f1, A, LD, B, LD, &f0, C, LD);
    account("cublasSgemm_v2_64", st, 16, 4, 8, 1, 0, 0, 1);
    st = cublasDgemm_v2(h, T, N, 4, 4, 4, &d1, A, LD, B, LD, &d0, C, LD);
    account("cublasDgemm_v2", st, 4, 4, 4, 1, 0, 0, 1);
    st = cublasDgemm_v2_64(h, N, N, 3, 5, 7, &d1, A, LD, B, LD, &d0, C, LD);
    account("cublasDgemm_v2_64", st, 3, 5, 7, 1, 0, 0, 1);
    st = cublasHgemm(h, N, N, 12, 8, 16, ha, A, LD, B, LD, hb, C, LD);
    account("cublasHgemm", st, 12, 8, 16, 1, 0, 8, 1);
    st = cublasHgemm_64(h, N, N, 16, 8, 8, ha, A, LD, B, LD, hb, C, LD);
    account("cublasHgemm_64", st, 16, 8, 8, 1, 0, 8, 1);
    /* complex: x4 FLOPs (the emulator may not implement them: then failed) */
    st = cublasCgemm_v2(h, N, N, 2, 3, 4, &c1, A, LD, B, LD, &c0, C, LD);
    account("cublasCgemm_v2", st, 2, 3, 4, 1, 1, 0, 0);
    st = cublasZgemm_v2_64(h, N, N, 2, 2, 2, &z1, A, LD, B, LD, &z0, C, LD);
    account("cublasZgemm_v2_64", st, 2, 2, 2, 1, 1, 0, 0);

    /* ---- strided batched ---- */
    st = cublasSgemmStridedBatched(h, N, N, 4, 4, 4, &f1, A, LD, STRIDE, B, LD, STRIDE, &f0, C, LD, STRIDE, 3);
    account("cublasSgemmStridedBatched", st, 4, 4, 4, 3, 0, 0, 1);
    st = cublasSgemmStridedBatched_64(h, N, N, 2, 3, 4, &f1, A, LD, STRIDE, B, LD, STRIDE, &f0, C, LD, STRIDE, 5);
    account("cublasSgemmStridedBatched_64", st, 2, 3, 4, 5, 0, 0, 1);
    st = cublasDgemmStridedBatched(h, N, N, 5, 3, 2, &d1, A, LD, STRIDE, B, LD, STRIDE, &d0, C, LD, STRIDE, 2);
    account("cublasDgemmStridedBatched", st, 5, 3, 2, 2, 0, 0, 1);
    st = cublasHgemmStridedBatched(h, N, N, 8, 8, 8, ha, A, LD, STRIDE, B, LD, STRIDE, hb, C, LD, STRIDE, 2);
    account("cublasHgemmStridedBatched", st, 8, 8, 8, 2, 0, 8, 1);
    st = cublasHgemmStridedBatched_64(h, N, N, 8, 4, 8, ha, A, LD, STRIDE, B, LD, STRIDE, hb, C, LD, STRIDE, 2);
    account("cublasHgemmStridedBatched_64", st, 8, 4, 8, 2, 0, 8, 1);

    /* ---- batched (arrays of pointers) ---- */
    st = cublasSgemmBatched(h, N, N, 4, 4, 4, &f1, (const float *const *)Aa, LD, (const float *const *)Ba, LD, &f0,
                            (float *const *)Ca, LD, 2);
    account("cublasSgemmBatched", st, 4, 4, 4, 2, 0, 0, 1);
    st = cublasSgemmBatched_64(h, N, N, 4, 2, 6, &f1, (const float *const *)Aa, LD, (const float *const *)Ba, LD,
                               &f0, (float *const *)Ca, LD, 2);
    account("cublasSgemmBatched_64", st, 4, 2, 6, 2, 0, 0, 1);
    st = cublasDgemmBatched(h, N, N, 3, 3, 3, &d1, (const double *const *)Aa, LD, (const double *const *)Ba, LD, &d0,
                            (double *const *)Ca, LD, 2);
    account("cublasDgemmBatched", st, 3, 3, 3, 2, 0, 0, 1);
    st = cublasHgemmBatched(h, N, N, 8, 8, 4, ha, (const struct __half *const *)Aa, LD,
                            (const struct __half *const *)Ba, LD, hb, (struct __half *const *)Ca, LD, 2);
    account("cublasHgemmBatched", st, 8, 8, 4, 2, 0, 8, 1);

    /* ---- the Ex family: types as arguments ---- */
    st = cublasGemmEx(h, N, N, 24, 16, 10, &f1, A, CUDA_R_16F, LD, B, CUDA_R_16F, LD, &f0, C, CUDA_R_16F, LD,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    account("cublasGemmEx (fp16)", st, 24, 16, 10, 1, 0, 8, 1);
    st = cublasGemmEx_64(h, N, N, 8, 8, 8, &f1, A, CUDA_R_32F, LD, B, CUDA_R_32F, LD, &f0, C, CUDA_R_32F, LD,
                         CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
    account("cublasGemmEx_64 (tf32)", st, 8, 8, 8, 1, 0, 0, 1);
    st = cublasGemmStridedBatchedEx(h, N, N, 4, 8, 2, &f1, A, CUDA_R_32F, LD, STRIDE, B, CUDA_R_32F, LD, STRIDE, &f0,
                                    C, CUDA_R_32F, LD, STRIDE, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    account("cublasGemmStridedBatchedEx", st, 4, 8, 2, 4, 0, 0, 1);
    st = cublasGemmStridedBatchedEx_64(h, N, N, 4, 4, 4, &f1, A, CUDA_R_32F, LD, STRIDE, B, CUDA_R_32F, LD, STRIDE,
                                       &f0, C, CUDA_R_32F, LD, STRIDE, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    account("cublasGemmStridedBatchedEx_64", st, 4, 4, 4, 2, 0, 0, 1);
    st = cublasGemmBatchedEx(h, N, N, 4, 4, 4, &f1, (const void *const *)Aa, CUDA_R_32F, LD,
                             (const void *const *)Ba, CUDA_R_32F, LD, &f0, (void *const *)Ca, CUDA_R_32F, LD, 2,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    account("cublasGemmBatchedEx", st, 4, 4, 4, 2, 0, 0, 1);
    st = cublasGemmBatchedEx_64(h, N, N, 6, 4, 4, &f1, (const void *const *)Aa, CUDA_R_32F, LD,
                                (const void *const *)Ba, CUDA_R_32F, LD, &f0, (void *const *)Ca, CUDA_R_32F, LD, 2,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    account("cublasGemmBatchedEx_64", st, 6, 4, 4, 2, 0, 0, 1);

    /* ---- an invalid call: logged as failed, no FLOPs ---- */
    st = cublasSgemm_v2(h, N, N, -1, 4, 4, &f1, A, LD, B, LD, &f0, C, LD);
    EXPECT(st != CUBLAS_STATUS_SUCCESS);
    account("cublasSgemm_v2 m=-1", st, 0, 4, 4, 1, 0, 0, 0);

    /* ---- cuBLASLt: shapes from the descriptors ---- */
    cublasLtHandle_t lt;
    EXPECT(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulDesc_t desc;
    EXPECT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatrixLayout_t la, lb, lc;
    /* D(8x4) = A(8x6) B(6x4) */
    EXPECT(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 8, 6, LD) == CUBLAS_STATUS_SUCCESS);
    EXPECT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 6, 4, LD) == CUBLAS_STATUS_SUCCESS);
    EXPECT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, 8, 4, LD) == CUBLAS_STATUS_SUCCESS);
    st = cublasLtMatmul(lt, desc, &f1, A, la, B, lb, &f0, C, lc, C, lc, NULL, NULL, 0, s);
    account("cublasLtMatmul", st, 8, 4, 6, 1, 0, 0, 1);
    /* transposed A: A is stored k x m (6x4), D is 4x4, k = rows(A) */
    cublasLtMatmulDesc_t desc_t;
    cublasLtMatrixLayout_t lat, lct;
    int32_t trans = CUBLAS_OP_T;
    EXPECT(cublasLtMatmulDescCreate(&desc_t, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
    EXPECT(cublasLtMatmulDescSetAttribute(desc_t, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans) ==
           CUBLAS_STATUS_SUCCESS);
    EXPECT(cublasLtMatrixLayoutCreate(&lat, CUDA_R_32F, 6, 4, LD) == CUBLAS_STATUS_SUCCESS);
    EXPECT(cublasLtMatrixLayoutCreate(&lct, CUDA_R_32F, 4, 4, LD) == CUBLAS_STATUS_SUCCESS);
    st = cublasLtMatmul(lt, desc_t, &f1, A, lat, B, lb, &f0, C, lct, C, lct, NULL, NULL, 0, s);
    account("cublasLtMatmul transa=T", st, 4, 4, 6, 1, 0, 0, 1);

    /* ---- a GEMM captured into a graph: counted once (at capture), never
     * timed (an event would become a graph node), and the graph still runs ---- */
    cudaStream_t cs;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    EXPECT(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) == cudaSuccess);
    EXPECT(cublasSetStream(h, cs) == CUBLAS_STATUS_SUCCESS);
    EXPECT(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal) == cudaSuccess);
    st = cublasSgemm_v2(h, N, N, 8, 8, 24, &f1, A, LD, B, LD, &f0, C, LD);
    account("cublasSgemm_v2 (captured)", st, 8, 8, 24, 1, 0, 0, 1);
    EXPECT(cudaStreamEndCapture(cs, &graph) == cudaSuccess);
    EXPECT(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    EXPECT(cudaGraphLaunch(exec, cs) == cudaSuccess);
    EXPECT(cudaGraphLaunch(exec, cs) == cudaSuccess);
    EXPECT(cudaStreamSynchronize(cs) == cudaSuccess);
    EXPECT(cudaGraphExecDestroy(exec) == cudaSuccess);
    EXPECT(cudaGraphDestroy(graph) == cudaSuccess);
    EXPECT(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS);
    EXPECT(cudaStreamDestroy(cs) == cudaSuccess);

    EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(lat);
    cublasLtMatrixLayoutDestroy(lct);
    cublasLtMatmulDescDestroy(desc);
    cublasLtMatmulDescDestroy(desc_t);
    cublasLtDestroy(lt);
    EXPECT(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
    cudaFree(dp);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    cudaStreamDestroy(s);
    printf("expect calls=%llu failed=%llu flops=%llu misaligned=%llu\n", (unsigned long long)calls,
           (unsigned long long)failed, (unsigned long long)flops, (unsigned long long)misaligned);
    return failures ? 1 : 0;
}
