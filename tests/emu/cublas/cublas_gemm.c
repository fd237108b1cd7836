/* GEMM entry points of the emulated cuBLAS, in int and _64 (int64_t) forms.
 *
 * All of them validate as cuBLAS documents (handle: NOT_INITIALIZED; bad
 * transpose, negative size, short leading dimension, NULL scalar:
 * INVALID_VALUE; unsupported type combination: NOT_SUPPORTED), then:
 *  - single and strided-batched GEMMs go through cublasLtMatmul, reached by
 *    dlopen("libcublasLt.so.13") + dlsym as the real libcublas does, with the
 *    handle's stream and workspace (a nested call a preload can observe);
 *  - pointer-array batched GEMMs (and everything, if cuBLASLt cannot be
 *    loaded) run here: a kernel launched on the handle's stream computes
 *    them (emu_gemm_kernel.h: named like cuBLAS's, so CUPTI reports them).
 * In host pointer mode alpha and beta are read at the call; in device pointer
 * mode when the GEMM runs, as on a GPU. */
#include "cublas_internal.h"
#include "common/driver_link.h"
#include "emu_gemm_kernel.h"
#include <stdio.h>
#include <stdlib.h>

struct gemm_call {
    cublasOperation_t ta, tb;
    int64_t m, n, k, batch;
    const void *alpha, *beta;
    const void *A, *B;
    void *C;
    const void *const *Aarr, *const *Barr;
    void *const *Carr;               /* pointer-array batch when non-NULL */
    cudaDataType at, bt, ct;
    int64_t lda, ldb, ldc;
    int64_t sa, sb, sc;              /* strided batch offsets (elements) */
    int compute;                     /* cublasComputeType_t */
};

/* GEMMs computed here (pointer-array batches) are kernels named like the
 * real cuBLAS's own ("ampere_sgemm_128x64_nn"). */
static struct emu_gemm_kernels kernels = {.prefix = "ampere_", .suffix = "_128x64"};
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;
static void kernels_init(void) { emu_gemm_kernels_register(&kernels); }

static void set_op(struct emu_mat *x, int trans, int64_t ld)
{
    x->rs = trans ? ld : 1;
    x->cs = trans ? 1 : ld;
}

static cublasStatus_t run_local(cublasHandle_t h, const struct gemm_call *c, cudaDataType scale, int wide)
{
    struct emu_gemm_job *j = calloc(1, sizeof *j);
    if (!j) return CUBLAS_STATUS_ALLOC_FAILED;
    struct emu_gemm *g = &j->g;
    g->m = c->m;
    g->n = c->n;
    g->k = c->k;
    g->batch = c->batch;
    g->a = (struct emu_mat){c->A, c->Aarr, c->at, 0, 0, c->sa};
    g->b = (struct emu_mat){c->B, c->Barr, c->bt, 0, 0, c->sb};
    g->c = (struct emu_mat){c->C, (const void *const *)c->Carr, c->ct, 0, 0, c->sc};
    set_op(&g->a, c->ta != CUBLAS_OP_N, c->lda);
    set_op(&g->b, c->tb != CUBLAS_OP_N, c->ldb);
    set_op(&g->c, 0, c->ldc);
    g->d = g->c;
    g->wide = wide;
    g->scale_type = scale;
    g->device_scalars = h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
    g->alpha_ptr = c->alpha;
    g->beta_ptr = c->beta;
    if (!g->device_scalars) {
        g->alpha = emu_load(c->alpha, scale);
        g->beta = emu_load(c->beta, scale);
    }
    /* Only a workspace the user set is scratch: the default one is shared by
     * every stream the handle is switched to, and must not create races. */
    if (h->workspace != (void *)(uintptr_t)h->default_workspace) {
        g->scratch = h->workspace;
        g->scratch_bytes = h->workspace_size;
    }
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (EMU_DRV(cuStreamIsCapturing)(h->stream, &cs) != CUDA_SUCCESS) cs = CU_STREAM_CAPTURE_STATUS_NONE;
    j->persistent = cs != CU_STREAM_CAPTURE_STATUS_NONE;
    if (emu_gemm_launch(&kernels, &kernels_once, kernels_init, h->stream, c->ta, c->tb, j) != CUDA_SUCCESS) {
        free(j);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    cublas_count("cublas.gemm", 1);
    return CUBLAS_STATUS_SUCCESS;
}

/* Describes the call to cuBLASLt with descriptors in stack storage
 * (cublasLt*Init_internal), as the real library avoids a heap allocation per
 * GEMM. */
static cublasStatus_t run_lt(cublasHandle_t h, const struct gemm_call *c, cudaDataType scale, int *used)
{
    const struct cublas_lt_api *lt = cublas_lt();
    cublasLtHandle_t lth = lt ? cublas_lt_handle(h) : NULL;
    *used = lth != NULL;
    if (!lth) return CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulDescOpaque_t desc;
    cublasLtMatrixLayoutOpaque_t la, lb, lc;
    int32_t ta = c->ta, tb = c->tb, pm = h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
    int32_t batch = (int32_t)c->batch;
    cublasStatus_t st = lt->desc_init(&desc, sizeof desc, (cublasComputeType_t)c->compute, scale);
    if (st == CUBLAS_STATUS_SUCCESS) st = lt->desc_set(&desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (st == CUBLAS_STATUS_SUCCESS) st = lt->desc_set(&desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (st == CUBLAS_STATUS_SUCCESS) st = lt->desc_set(&desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm);
    const struct { cublasLtMatrixLayoutOpaque_t *l; cudaDataType t; int64_t rows, cols, ld, stride; } mats[3] = {
        {&la, c->at, c->ta == CUBLAS_OP_N ? c->m : c->k, c->ta == CUBLAS_OP_N ? c->k : c->m, c->lda, c->sa},
        {&lb, c->bt, c->tb == CUBLAS_OP_N ? c->k : c->n, c->tb == CUBLAS_OP_N ? c->n : c->k, c->ldb, c->sb},
        {&lc, c->ct, c->m, c->n, c->ldc, c->sc},
    };
    for (int i = 0; i < 3 && st == CUBLAS_STATUS_SUCCESS; i++) {
        st = lt->layout_init(mats[i].l, sizeof *mats[i].l, mats[i].t, (uint64_t)mats[i].rows, (uint64_t)mats[i].cols, mats[i].ld);
        if (st == CUBLAS_STATUS_SUCCESS)
            st = lt->layout_set(mats[i].l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
        if (st == CUBLAS_STATUS_SUCCESS)
            st = lt->layout_set(mats[i].l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &mats[i].stride, sizeof(int64_t));
    }
    if (st != CUBLAS_STATUS_SUCCESS) return CUBLAS_STATUS_INTERNAL_ERROR;
    /* The default workspace is not handed on (see run_local); a user workspace is. */
    int user_ws = h->workspace != (void *)(uintptr_t)h->default_workspace;
    return lt->matmul(lth, &desc, c->alpha, c->A, &la, c->B, &lb, c->beta, c->C, &lc, c->C, &lc, NULL,
                      user_ws ? h->workspace : NULL, user_ws ? h->workspace_size : 0, (cudaStream_t)h->stream);
}

static cublasStatus_t gemm(cublasHandle_t h, const struct gemm_call *c)
{
    cublasStatus_t st = cublas_check_handle(h);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if ((unsigned)c->ta > CUBLAS_OP_C || (unsigned)c->tb > CUBLAS_OP_C) return CUBLAS_STATUS_INVALID_VALUE;
    if (c->m < 0 || c->n < 0 || c->k < 0 || c->batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
    int64_t arows = c->ta == CUBLAS_OP_N ? c->m : c->k, brows = c->tb == CUBLAS_OP_N ? c->k : c->n;
    if (c->lda < (arows > 1 ? arows : 1) || c->ldb < (brows > 1 ? brows : 1) || c->ldc < (c->m > 1 ? c->m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    cudaDataType scale;
    int wide;
    int ts = emu_gemm_types(c->compute, c->at, c->bt, c->ct, &scale, &wide);
    if (ts) return (cublasStatus_t)ts;
    if (!c->alpha || !c->beta) return CUBLAS_STATUS_INVALID_VALUE;
    if (c->m == 0 || c->n == 0 || c->batch == 0) return CUBLAS_STATUS_SUCCESS;
    int arrays = c->Aarr || c->Barr || c->Carr;
    if (arrays ? !c->Aarr || !c->Barr || !c->Carr : (!c->C || (c->k > 0 && (!c->A || !c->B))))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!arrays && c->batch <= INT32_MAX) {
        int used;
        st = run_lt(h, c, scale, &used);
        if (used) return st;
    }
    return run_local(h, c, scale, wide);
}

static int f32_compute(cublasHandle_t h)
{
    return h && h->magic == CUBLAS_HANDLE_MAGIC && (h->math_mode & 0xf) == CUBLAS_PEDANTIC_MATH
               ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
}

#define CALL(...) do { struct gemm_call c_ = {__VA_ARGS__}; return gemm(handle, &c_); } while (0)

/* The same twelve entry points for 32-bit (SUF empty) and 64-bit (_64) sizes. */
#define GEMM_FAMILY(SUF, I)                                                                                        \
cublasStatus_t cublasSgemm_v2##SUF(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,     \
        I m, I n, I k, const float *alpha, const float *A, I lda, const float *B, I ldb, const float *beta,       \
        float *C, I ldc)                                                                                          \
{ CALL(.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .batch = 1, .alpha = alpha, .beta = beta, .A = A,     \
       .B = B, .C = C, .at = CUDA_R_32F, .bt = CUDA_R_32F, .ct = CUDA_R_32F, .lda = lda, .ldb = ldb, .ldc = ldc,  \
       .compute = f32_compute(handle)); }                                                                         \
cublasStatus_t cublasDgemm_v2##SUF(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,     \
        I m, I n, I k, const double *alpha, const double *A, I lda, const double *B, I ldb, const double *beta,   \
        double *C, I ldc)                                                                                         \
{ CALL(.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .batch = 1, .alpha = alpha, .beta = beta, .A = A,     \
       .B = B, .C = C, .at = CUDA_R_64F, .bt = CUDA_R_64F, .ct = CUDA_R_64F, .lda = lda, .ldb = ldb, .ldc = ldc,  \
       .compute = CUBLAS_COMPUTE_64F); }                                                                          \
cublasStatus_t cublasHgemm##SUF(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,        \
        I m, I n, I k, const uint16_t *alpha, const uint16_t *A, I lda, const uint16_t *B, I ldb,                 \
        const uint16_t *beta, uint16_t *C, I ldc);                                                                \
cublasStatus_t cublasHgemm##SUF(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,        \
        I m, I n, I k, const uint16_t *alpha, const uint16_t *A, I lda, const uint16_t *B, I ldb,                 \
        const uint16_t *beta, uint16_t *C, I ldc)                                                                 \
{ CALL(.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .batch = 1, .alpha = alpha, .beta = beta, .A = A,     \
       .B = B, .C = C, .at = CUDA_R_16F, .bt = CUDA_R_16F, .ct = CUDA_R_16F, .lda = lda, .ldb = ldb, .ldc = ldc,  \
       .compute = CUBLAS_COMPUTE_16F); }                                                                          \
cublasStatus_t cublasGemmEx##SUF(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,       \
        I m, I n, I k, const void *alpha, const void *A, cudaDataType Atype, I lda, const void *B,                \
        cudaDataType Btype, I ldb, const void *beta, void *C, cudaDataType Ctype, I ldc,                          \
        cublasComputeType_t computeType, cublasGemmAlgo_t algo)                                                   \
{ (void)algo;                                                                                                     \
  CALL(.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .batch = 1, .alpha = alpha, .beta = beta, .A = A,     \
       .B = B, .C = C, .at = Atype, .bt = Btype, .ct = Ctype, .lda = lda, .ldb = ldb, .ldc = ldc,                 \
       .compute = computeType); }                                                                                 \
cublasStatus_t cublasSgemmStridedBatched##SUF(cublasHandle_t handle, cublasOperation_t transa,                    \
        cublasOperation_t transb, I m, I n, I k, const float *alpha, const float *A, I lda, long long strideA,    \
        const float *B, I ldb, long long strideB, const float *beta, float *C, I ldc, long long strideC,          \
        I batchCount)                                                                                             \
{ CALL(.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .batch = batchCount, .alpha = alpha, .beta = beta,    \
       .A = A, .B = B, .C = C, .at = CUDA_R_32F, .bt = CUDA_R_32F, .ct = CUDA_R_32F, .lda = lda, .ldb = ldb,      \
       .ldc = ldc, .sa = strideA, .sb = strideB, .sc = strideC, .compute = f32_compute(handle)); }                \
cublasStatus_t cublasDgemmStridedBatched##SUF(cublasHandle_t handle, cublasOperation_t transa,                    \
        cublasOperation_t transb, I m, I n, I k, const double *alpha, const double *A, I lda, long long strideA,  \
        const double *B, I ldb, long long strideB, const double *beta, double *C, I ldc, long long strideC,       \
        I batchCount)                                                                                             \
{ CALL(.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .batch = batchCount, .alpha = alpha, .beta = beta,    \
       .A = A, .B = B, .C = C, .at = CUDA_R_64F, .bt = CUDA_R_64F, .ct = CUDA_R_64F, .lda = lda, .ldb = ldb,      \
       .ldc = ldc, .sa = strideA, .sb = strideB, .sc = strideC, .compute = CUBLAS_COMPUTE_64F); }                 \
cublasStatus_t cublasHgemmStridedBatched##SUF(cublasHandle_t handle, cublasOperation_t transa,                    \
        cublasOperation_t transb, I m, I n, I k, const uint16_t *alpha, const uint16_t *A, I lda,                 \
        long long strideA, const uint16_t *B, I ldb, long long strideB, const uint16_t *beta, uint16_t *C, I ldc, \
        long long strideC, I batchCount);                                                                         \
cublasStatus_t cublasHgemmStridedBatched##SUF(cublasHandle_t handle, cublasOperation_t transa,                    \
        cublasOperation_t transb, I m, I n, I k, const uint16_t *alpha, const uint16_t *A, I lda,                 \
        long long strideA, const uint16_t *B, I ldb, long long strideB, const uint16_t *beta, uint16_t *C, I ldc, \
        long long strideC, I batchCount)                                                                          \
{ CALL(.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .batch = batchCount, .alpha = alpha, .beta = beta,    \
       .A = A, .B = B, .C = C, .at = CUDA_R_16F, .bt = CUDA_R_16F, .ct = CUDA_R_16F, .lda = lda, .ldb = ldb,      \
       .ldc = ldc, .sa = strideA, .sb = strideB, .sc = strideC, .compute = CUBLAS_COMPUTE_16F); }                 \
cublasStatus_t cublasGemmStridedBatchedEx##SUF(cublasHandle_t handle, cublasOperation_t transa,                   \
        cublasOperation_t transb, I m, I n, I k, const void *alpha, const void *A, cudaDataType Atype, I lda,     \
        long long strideA, const void *B, cudaDataType Btype, I ldb, long long strideB, const void *beta,         \
        void *C, cudaDataType Ctype, I ldc, long long strideC, I batchCount, cublasComputeType_t computeType,     \
        cublasGemmAlgo_t algo)                                                                                    \
{ (void)algo;                                                                                                     \
  CALL(.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .batch = batchCount, .alpha = alpha, .beta = beta,    \
       .A = A, .B = B, .C = C, .at = Atype, .bt = Btype, .ct = Ctype, .lda = lda, .ldb = ldb, .ldc = ldc,         \
       .sa = strideA, .sb = strideB, .sc = strideC, .compute = computeType); }                                    \
cublasStatus_t cublasSgemmBatched##SUF(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, \
        I m, I n, I k, const float *alpha, const float *const Aarray[], I lda, const float *const Barray[],       \
        I ldb, const float *beta, float *const Carray[], I ldc, I batchCount)                                     \
{ CALL(.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .batch = batchCount, .alpha = alpha, .beta = beta,    \
       .Aarr = (const void *const *)Aarray, .Barr = (const void *const *)Barray, .Carr = (void *const *)Carray,   \
       .at = CUDA_R_32F, .bt = CUDA_R_32F, .ct = CUDA_R_32F, .lda = lda, .ldb = ldb, .ldc = ldc,                  \
       .compute = f32_compute(handle)); }                                                                         \
cublasStatus_t cublasDgemmBatched##SUF(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, \
        I m, I n, I k, const double *alpha, const double *const Aarray[], I lda, const double *const Barray[],    \
        I ldb, const double *beta, double *const Carray[], I ldc, I batchCount)                                   \
{ CALL(.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .batch = batchCount, .alpha = alpha, .beta = beta,    \
       .Aarr = (const void *const *)Aarray, .Barr = (const void *const *)Barray, .Carr = (void *const *)Carray,   \
       .at = CUDA_R_64F, .bt = CUDA_R_64F, .ct = CUDA_R_64F, .lda = lda, .ldb = ldb, .ldc = ldc,                  \
       .compute = CUBLAS_COMPUTE_64F); }                                                                          \
cublasStatus_t cublasHgemmBatched##SUF(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, \
        I m, I n, I k, const uint16_t *alpha, const uint16_t *const Aarray[], I lda,                              \
        const uint16_t *const Barray[], I ldb, const uint16_t *beta, uint16_t *const Carray[], I ldc,             \
        I batchCount);                                                                                            \
cublasStatus_t cublasHgemmBatched##SUF(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, \
        I m, I n, I k, const uint16_t *alpha, const uint16_t *const Aarray[], I lda,                              \
        const uint16_t *const Barray[], I ldb, const uint16_t *beta, uint16_t *const Carray[], I ldc,             \
        I batchCount)                                                                                             \
{ CALL(.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .batch = batchCount, .alpha = alpha, .beta = beta,    \
       .Aarr = (const void *const *)Aarray, .Barr = (const void *const *)Barray, .Carr = (void *const *)Carray,   \
       .at = CUDA_R_16F, .bt = CUDA_R_16F, .ct = CUDA_R_16F, .lda = lda, .ldb = ldb, .ldc = ldc,                  \
       .compute = CUBLAS_COMPUTE_16F); }                                                                          \
cublasStatus_t cublasGemmBatchedEx##SUF(cublasHandle_t handle, cublasOperation_t transa,                          \
        cublasOperation_t transb, I m, I n, I k, const void *alpha, const void *const Aarray[],                   \
        cudaDataType Atype, I lda, const void *const Barray[], cudaDataType Btype, I ldb, const void *beta,       \
        void *const Carray[], cudaDataType Ctype, I ldc, I batchCount, cublasComputeType_t computeType,           \
        cublasGemmAlgo_t algo)                                                                                    \
{ (void)algo;                                                                                                     \
  CALL(.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .batch = batchCount, .alpha = alpha, .beta = beta,    \
       .Aarr = Aarray, .Barr = Barray, .Carr = Carray, .at = Atype, .bt = Btype, .ct = Ctype, .lda = lda,         \
       .ldb = ldb, .ldc = ldc, .compute = computeType); }

GEMM_FAMILY(, int)
GEMM_FAMILY(_64, int64_t)
