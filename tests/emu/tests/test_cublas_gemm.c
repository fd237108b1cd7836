/* Emulated cuBLAS GEMMs: every entry point (S/D/H gemm, GemmEx, the strided
 * and pointer-array batched forms, and all their _64 variants) against a
 * naive double-precision reference, with all transpose combinations, padded
 * leading dimensions, alpha/beta, and fp32 / fp64 / fp16 / bf16 / int8
 * storage; plus the documented argument errors. */
#include <cublas_v2.h>
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu.h"
#include "cublas/emu_float16.h"

/* The half-precision entry points are declared only for C++ by cublas_api.h. */
typedef uint16_t half_t;
cublasStatus_t cublasHgemm(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const half_t *,
                           const half_t *, int, const half_t *, int, const half_t *, half_t *, int);
cublasStatus_t cublasHgemm_64(cublasHandle_t, cublasOperation_t, cublasOperation_t, int64_t, int64_t, int64_t,
                              const half_t *, const half_t *, int64_t, const half_t *, int64_t, const half_t *,
                              half_t *, int64_t);
cublasStatus_t cublasHgemmStridedBatched(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                         const half_t *, const half_t *, int, long long, const half_t *, int,
                                         long long, const half_t *, half_t *, int, long long, int);
cublasStatus_t cublasHgemmStridedBatched_64(cublasHandle_t, cublasOperation_t, cublasOperation_t, int64_t, int64_t,
                                            int64_t, const half_t *, const half_t *, int64_t, long long,
                                            const half_t *, int64_t, long long, const half_t *, half_t *, int64_t,
                                            long long, int64_t);
cublasStatus_t cublasHgemmBatched(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const half_t *,
                                  const half_t *const[], int, const half_t *const[], int, const half_t *,
                                  half_t *const[], int, int);
cublasStatus_t cublasHgemmBatched_64(cublasHandle_t, cublasOperation_t, cublasOperation_t, int64_t, int64_t, int64_t,
                                     const half_t *, const half_t *const[], int64_t, const half_t *const[], int64_t,
                                     const half_t *, half_t *const[], int64_t, int64_t);

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { fprintf(stderr, "%s = %d\n", #x, (int)r_); exit(2); } } while (0)

static cublasHandle_t handle;
static CUstream stream;

static size_t esize(cudaDataType t)
{
    switch (t) {
    case CUDA_R_8I: return 1;
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    case CUDA_R_32F: case CUDA_R_32I: return 4;
    default: return 8;
    }
}

static void put(void *p, size_t i, cudaDataType t, double v)
{
    switch (t) {
    case CUDA_R_8I: ((int8_t *)p)[i] = (int8_t)v; break;
    case CUDA_R_16F: ((uint16_t *)p)[i] = emu_float_to_half((float)v); break;
    case CUDA_R_16BF: ((uint16_t *)p)[i] = emu_float_to_bf16((float)v); break;
    case CUDA_R_32F: ((float *)p)[i] = (float)v; break;
    case CUDA_R_32I: ((int32_t *)p)[i] = (int32_t)v; break;
    default: ((double *)p)[i] = v; break;
    }
}

static double get(const void *p, size_t i, cudaDataType t)
{
    switch (t) {
    case CUDA_R_8I: return ((const int8_t *)p)[i];
    case CUDA_R_16F: return emu_half_to_float(((const uint16_t *)p)[i]);
    case CUDA_R_16BF: return emu_bf16_to_float(((const uint16_t *)p)[i]);
    case CUDA_R_32F: return ((const float *)p)[i];
    case CUDA_R_32I: return ((const int32_t *)p)[i];
    default: return ((const double *)p)[i];
    }
}

static uint64_t rng = 88172645463325252ull;
/* Multiples of 1/8 in [-2, 2] (integers in [-4, 4] for int8): exact in every storage type. */
static double sample(cudaDataType t)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    int v = (int)(rng % 33) - 16;
    return t == CUDA_R_8I ? (double)(v / 4) : v / 8.0;
}

static void *dev_alloc(size_t n)
{
    CUdeviceptr p;
    CU(cuMemAlloc(&p, n ? n : 1));
    return (void *)(uintptr_t)p;
}

enum entry { E_S, E_D, E_H, E_EX, E_S_STRIDED, E_D_STRIDED, E_H_STRIDED, E_EX_STRIDED, E_S_BATCHED, E_D_BATCHED,
             E_H_BATCHED, E_EX_BATCHED };
static const char *entry_names[] = {"Sgemm", "Dgemm", "Hgemm", "GemmEx", "SgemmStridedBatched", "DgemmStridedBatched",
                                    "HgemmStridedBatched", "GemmStridedBatchedEx", "SgemmBatched", "DgemmBatched",
                                    "HgemmBatched", "GemmBatchedEx"};

struct gcase {
    enum entry e;
    int use64;
    cublasOperation_t ta, tb;
    int m, n, k, batch;
    cudaDataType at, ct;             /* B has A's type */
    cublasComputeType_t compute;
    double alpha, beta;
};

static cudaDataType scale_type(const struct gcase *c)
{
    switch (c->compute) {
    case CUBLAS_COMPUTE_16F: return CUDA_R_16F;
    case CUBLAS_COMPUTE_64F: return CUDA_R_64F;
    case CUBLAS_COMPUTE_32I: return CUDA_R_32I;
    default: return CUDA_R_32F;
    }
}

static cublasStatus_t call(const struct gcase *c, const void *alpha, const void *beta, void *A, int lda, long long sa,
                           void *B, int ldb, long long sb, void *C, int ldc, long long sc, void **Aa, void **Ba,
                           void **Ca)
{
    cublasHandle_t h = handle;
    int m = c->m, n = c->n, k = c->k, bc = c->batch;
    cublasOperation_t ta = c->ta, tb = c->tb;
    const void *const *Ac = (const void *const *)Aa, *const *Bc = (const void *const *)Ba;
    void *const *Cc = (void *const *)Ca;
    cublasGemmAlgo_t algo = CUBLAS_GEMM_DEFAULT;
    if (!c->use64) switch (c->e) {
    case E_S: return cublasSgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    case E_D: return cublasDgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    case E_H: return cublasHgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    case E_EX: return cublasGemmEx(h, ta, tb, m, n, k, alpha, A, c->at, lda, B, c->at, ldb, beta, C, c->ct, ldc, c->compute, algo);
    case E_S_STRIDED: return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, bc);
    case E_D_STRIDED: return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, bc);
    case E_H_STRIDED: return cublasHgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, bc);
    case E_EX_STRIDED: return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, c->at, lda, sa, B, c->at, ldb, sb, beta, C, c->ct, ldc, sc, bc, c->compute, algo);
    case E_S_BATCHED: return cublasSgemmBatched(h, ta, tb, m, n, k, alpha, (const float *const *)Ac, lda, (const float *const *)Bc, ldb, beta, (float *const *)Cc, ldc, bc);
    case E_D_BATCHED: return cublasDgemmBatched(h, ta, tb, m, n, k, alpha, (const double *const *)Ac, lda, (const double *const *)Bc, ldb, beta, (double *const *)Cc, ldc, bc);
    case E_H_BATCHED: return cublasHgemmBatched(h, ta, tb, m, n, k, alpha, (const half_t *const *)Ac, lda, (const half_t *const *)Bc, ldb, beta, (half_t *const *)Cc, ldc, bc);
    case E_EX_BATCHED: return cublasGemmBatchedEx(h, ta, tb, m, n, k, alpha, Ac, c->at, lda, Bc, c->at, ldb, beta, Cc, c->ct, ldc, bc, c->compute, algo);
    }
    int64_t M = m, N = n, K = k, LDA = lda, LDB = ldb, LDC = ldc, BC = bc;
    switch (c->e) {
    case E_S: return cublasSgemm_64(h, ta, tb, M, N, K, alpha, A, LDA, B, LDB, beta, C, LDC);
    case E_D: return cublasDgemm_64(h, ta, tb, M, N, K, alpha, A, LDA, B, LDB, beta, C, LDC);
    case E_H: return cublasHgemm_64(h, ta, tb, M, N, K, alpha, A, LDA, B, LDB, beta, C, LDC);
    case E_EX: return cublasGemmEx_64(h, ta, tb, M, N, K, alpha, A, c->at, LDA, B, c->at, LDB, beta, C, c->ct, LDC, c->compute, algo);
    case E_S_STRIDED: return cublasSgemmStridedBatched_64(h, ta, tb, M, N, K, alpha, A, LDA, sa, B, LDB, sb, beta, C, LDC, sc, BC);
    case E_D_STRIDED: return cublasDgemmStridedBatched_64(h, ta, tb, M, N, K, alpha, A, LDA, sa, B, LDB, sb, beta, C, LDC, sc, BC);
    case E_H_STRIDED: return cublasHgemmStridedBatched_64(h, ta, tb, M, N, K, alpha, A, LDA, sa, B, LDB, sb, beta, C, LDC, sc, BC);
    case E_EX_STRIDED: return cublasGemmStridedBatchedEx_64(h, ta, tb, M, N, K, alpha, A, c->at, LDA, sa, B, c->at, LDB, sb, beta, C, c->ct, LDC, sc, BC, c->compute, algo);
    case E_S_BATCHED: return cublasSgemmBatched_64(h, ta, tb, M, N, K, alpha, (const float *const *)Ac, LDA, (const float *const *)Bc, LDB, beta, (float *const *)Cc, LDC, BC);
    case E_D_BATCHED: return cublasDgemmBatched_64(h, ta, tb, M, N, K, alpha, (const double *const *)Ac, LDA, (const double *const *)Bc, LDB, beta, (double *const *)Cc, LDC, BC);
    case E_H_BATCHED: return cublasHgemmBatched_64(h, ta, tb, M, N, K, alpha, (const half_t *const *)Ac, LDA, (const half_t *const *)Bc, LDB, beta, (half_t *const *)Cc, LDC, BC);
    case E_EX_BATCHED: return cublasGemmBatchedEx_64(h, ta, tb, M, N, K, alpha, Ac, c->at, LDA, Bc, c->at, LDB, beta, Cc, c->ct, LDC, BC, c->compute, algo);
    }
    return CUBLAS_STATUS_INTERNAL_ERROR;
}

static int is_batched_ptr(enum entry e) { return e >= E_S_BATCHED; }

/* Runs one case and compares every element of every batch with the reference. */
static void run_case(const struct gcase *c)
{
    int arows = c->ta == CUBLAS_OP_N ? c->m : c->k, acols = c->ta == CUBLAS_OP_N ? c->k : c->m;
    int brows = c->tb == CUBLAS_OP_N ? c->k : c->n, bcols = c->tb == CUBLAS_OP_N ? c->n : c->k;
    int lda = arows + 3, ldb = brows + 1, ldc = c->m + 2;   /* padded leading dimensions */
    long long sa = (long long)lda * acols + 5, sb = (long long)ldb * bcols, sc = (long long)ldc * c->n + 7;
    size_t ea = esize(c->at), ec = esize(c->ct);
    size_t na = (size_t)sa * c->batch, nb = (size_t)sb * c->batch, nc = (size_t)sc * c->batch;
    char *hA = calloc(na, ea), *hB = calloc(nb, ea), *hC = calloc(nc, ec), *out = calloc(nc, ec);
    for (size_t i = 0; i < na; i++) put(hA, i, c->at, sample(c->at));
    for (size_t i = 0; i < nb; i++) put(hB, i, c->at, sample(c->at));
    for (size_t i = 0; i < nc; i++) put(hC, i, c->ct, sample(c->ct));
    char *dA = dev_alloc(na * ea), *dB = dev_alloc(nb * ea), *dC = dev_alloc(nc * ec);
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dA, hA, na * ea));
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dB, hB, nb * ea));
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dC, hC, nc * ec));
    void **arrays = NULL, **dArr = NULL;
    if (is_batched_ptr(c->e)) {   /* device arrays of device pointers, batches in reverse order */
        arrays = malloc(3 * (size_t)c->batch * sizeof(void *));
        for (int b = 0; b < c->batch; b++) {
            int r = c->batch - 1 - b;
            arrays[b] = dA + (size_t)r * (size_t)sa * ea;
            arrays[c->batch + b] = dB + (size_t)r * (size_t)sb * ea;
            arrays[2 * c->batch + b] = dC + (size_t)r * (size_t)sc * ec;
        }
        dArr = dev_alloc(3 * (size_t)c->batch * sizeof(void *));
        CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dArr, arrays, 3 * (size_t)c->batch * sizeof(void *)));
    }
    unsigned char alpha[8], beta[8];
    put(alpha, 0, scale_type(c), c->alpha);
    put(beta, 0, scale_type(c), c->beta);
    cublasStatus_t st = call(c, alpha, beta, dA, lda, sa, dB, ldb, sb, dC, ldc, sc, dArr, dArr ? dArr + c->batch : NULL,
                             dArr ? dArr + 2 * c->batch : NULL);
    CHECK(st == CUBLAS_STATUS_SUCCESS, "%s%s: status %d", entry_names[c->e], c->use64 ? "_64" : "", (int)st);
    CU(cuStreamSynchronize(stream));
    CU(cuMemcpyDtoH(out, (CUdeviceptr)(uintptr_t)dC, nc * ec));
    double tol = c->ct == CUDA_R_16F ? 1e-2 : c->ct == CUDA_R_16BF ? 2e-2 : c->ct == CUDA_R_64F ? 1e-12 : 1e-5;
    int bad = 0;
    for (int b = 0; b < c->batch && !bad; b++) {
        const char *A = hA + (size_t)b * (size_t)sa * ea, *B = hB + (size_t)b * (size_t)sb * ea;
        size_t c0 = (size_t)b * (size_t)sc;
        for (int j = 0; j < c->n && !bad; j++)
            for (int i = 0; i < c->m && !bad; i++) {
                double acc = 0;
                for (int l = 0; l < c->k; l++) {
                    double a = c->ta == CUBLAS_OP_N ? get(A, (size_t)i + (size_t)l * lda, c->at) : get(A, (size_t)l + (size_t)i * lda, c->at);
                    double bv = c->tb == CUBLAS_OP_N ? get(B, (size_t)l + (size_t)j * ldb, c->at) : get(B, (size_t)j + (size_t)l * ldb, c->at);
                    acc += a * bv;
                }
                size_t at = c0 + (size_t)i + (size_t)j * ldc;
                double want = c->alpha * acc + c->beta * get(hC, at, c->ct), got = get(out, at, c->ct);
                if (fabs(got - want) > tol * (1 + fabs(want))) {
                    CHECK(0, "%s%s ta=%d tb=%d m=%d n=%d k=%d batch %d C(%d,%d) = %.8g, want %.8g", entry_names[c->e],
                          c->use64 ? "_64" : "", c->ta, c->tb, c->m, c->n, c->k, b, i, j, got, want);
                    bad = 1;
                }
            }
        /* padding rows between columns must be untouched */
        for (int j = 0; j < c->n && !bad; j++)
            for (int i = c->m; i < ldc; i++) {
                size_t at = c0 + (size_t)i + (size_t)j * ldc;
                if (get(out, at, c->ct) != get(hC, at, c->ct)) { CHECK(0, "%s wrote padding", entry_names[c->e]); bad = 1; break; }
            }
    }
    cuMemFree((CUdeviceptr)(uintptr_t)dA);
    cuMemFree((CUdeviceptr)(uintptr_t)dB);
    cuMemFree((CUdeviceptr)(uintptr_t)dC);
    if (dArr) cuMemFree((CUdeviceptr)(uintptr_t)dArr);
    free(arrays);
    free(hA); free(hB); free(hC); free(out);
}

static void test_all_entry_points(void)
{
    const struct { enum entry e; cudaDataType at, ct; cublasComputeType_t compute; } kinds[] = {
        {E_S, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
        {E_D, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F},
        {E_H, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F},
        {E_EX, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
        {E_EX, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32},
        {E_EX, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F},
        {E_EX, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
        {E_EX, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F},
        {E_EX, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F},
        {E_EX, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F},
        {E_EX, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F},
        {E_EX, CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I},
        {E_S_STRIDED, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
        {E_D_STRIDED, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F},
        {E_H_STRIDED, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F},
        {E_EX_STRIDED, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F},
        {E_EX_STRIDED, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16BF},
        {E_S_BATCHED, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
        {E_D_BATCHED, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F},
        {E_H_BATCHED, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F},
        {E_EX_BATCHED, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
        {E_EX_BATCHED, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F},
    };
    const cublasOperation_t tr[2] = {CUBLAS_OP_N, CUBLAS_OP_T};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        for (int use64 = 0; use64 < 2; use64++)
            for (int t = 0; t < 4; t++) {
                int batched = kinds[i].e >= E_S_STRIDED;
                struct gcase c = {kinds[i].e, use64, tr[t & 1], tr[t >> 1], 13 + t, 9, 21 - 3 * t, batched ? 3 : 1,
                                  kinds[i].at, kinds[i].ct, kinds[i].compute, 0, 0};
                /* alpha/beta vary; 16F compute keeps them exactly representable */
                c.alpha = t == 3 ? 1.0 : 0.5 * (t + 1);
                c.beta = t == 0 ? 0.0 : t == 2 ? 1.0 : -0.25;
                if (kinds[i].at == CUDA_R_8I) { c.alpha = t + 1; c.beta = t == 0 ? 0 : 2; }
                run_case(&c);
            }
    /* CUBLAS_OP_C on real types is a plain transpose */
    struct gcase conj = {E_S, 0, CUBLAS_OP_C, CUBLAS_OP_C, 7, 5, 3, 1, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 1, 0};
    run_case(&conj);
    /* alpha = 0: only beta * C remains */
    struct gcase zero = {E_S, 0, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, 1, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 0, 2};
    run_case(&zero);
    /* a bigger one: several row blocks of the CPU kernel */
    struct gcase big = {E_EX, 0, CUBLAS_OP_T, CUBLAS_OP_N, 150, 70, 200, 1, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 1, 0};
    run_case(&big);
}

static void test_beta_zero_ignores_nan(void)
{
    const int n = 4;
    float hA[16], hB[16], hC[16];
    for (int i = 0; i < 16; i++) { hA[i] = 1; hB[i] = 2; hC[i] = NAN; }
    float *dA = dev_alloc(sizeof hA), *dB = dev_alloc(sizeof hB), *dC = dev_alloc(sizeof hC);
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dA, hA, sizeof hA));
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dB, hB, sizeof hB));
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dC, hC, sizeof hC));
    float one = 1, zero = 0;
    CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, dA, n, dB, n, &zero, dC, n) == CUBLAS_STATUS_SUCCESS, "sgemm");
    CU(cuStreamSynchronize(stream));
    CU(cuMemcpyDtoH(hC, (CUdeviceptr)(uintptr_t)dC, sizeof hC));
    for (int i = 0; i < 16; i++) CHECK(hC[i] == 8.0f, "beta=0 C[%d] = %g (C must not be read)", i, hC[i]);
    cuMemFree((CUdeviceptr)(uintptr_t)dA);
    cuMemFree((CUdeviceptr)(uintptr_t)dB);
    cuMemFree((CUdeviceptr)(uintptr_t)dC);
}

static void test_invalid_arguments(void)
{
    float one = 1;
    float *d = dev_alloc(64 * sizeof(float));
    CHECK(cublasSgemm(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, 2, d, 2, &one, d, 2) == CUBLAS_STATUS_NOT_INITIALIZED, "NULL handle");
    CHECK(cublasSgemm(handle, (cublasOperation_t)7, CUBLAS_OP_N, 2, 2, 2, &one, d, 2, d, 2, &one, d, 2) == CUBLAS_STATUS_INVALID_VALUE, "bad transa");
    CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, -1, 2, 2, &one, d, 2, d, 2, &one, d, 2) == CUBLAS_STATUS_INVALID_VALUE, "m < 0");
    CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 2, &one, d, 3, d, 2, &one, d, 4) == CUBLAS_STATUS_INVALID_VALUE, "lda < m");
    CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, 4, 2, 5, &one, d, 4, d, 5, &one, d, 4) == CUBLAS_STATUS_INVALID_VALUE, "lda < k with transa");
    CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 4, &one, d, 2, d, 3, &one, d, 2) == CUBLAS_STATUS_INVALID_VALUE, "ldb < k");
    CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 2, &one, d, 4, d, 2, &one, d, 3) == CUBLAS_STATUS_INVALID_VALUE, "ldc < m");
    CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, NULL, d, 2, d, 2, &one, d, 2) == CUBLAS_STATUS_INVALID_VALUE, "NULL alpha");
    CHECK(cublasSgemm_64(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, -5, 2, &one, d, 2, d, 2, &one, d, 2) == CUBLAS_STATUS_INVALID_VALUE, "_64 n < 0");
    CHECK(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, 2, 4, d, 2, 4, &one, d, 2, 4, -1) == CUBLAS_STATUS_INVALID_VALUE, "batch < 0");
    CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, CUDA_R_16F, 2, d, CUDA_R_32F, 2, &one, d, CUDA_R_32F, 2,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_NOT_SUPPORTED, "mixed A/B types");
    CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, CUDA_R_32F, 2, d, CUDA_R_32F, 2, &one, d, CUDA_R_16F, 2,
                       CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_NOT_SUPPORTED, "64F compute on fp32");
    /* empty problems succeed without touching anything */
    CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 0, 2, 2, &one, NULL, 1, NULL, 2, &one, NULL, 1) == CUBLAS_STATUS_SUCCESS, "m == 0");
    CHECK(cublasSgemmBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, NULL, 2, NULL, 2, &one, NULL, 2, 0) == CUBLAS_STATUS_SUCCESS, "batch == 0");
    cuMemFree((CUdeviceptr)(uintptr_t)d);
}

int main(void)
{
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    CU(cuStreamCreate(&stream, CU_STREAM_DEFAULT));
    CHECK(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
    CHECK(cublasSetStream(handle, (cudaStream_t)stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
    test_all_entry_points();
    test_beta_zero_ignores_nan();
    test_invalid_arguments();
    CHECK(cublasDestroy(handle) == CUBLAS_STATUS_SUCCESS, "cublasDestroy");
    CU(cuStreamDestroy(stream));
    if (failures) { printf("test_cublas_gemm: %d FAILED\n", failures); return 1; }
    printf("test_cublas_gemm: ok\n");
    return 0;
}
