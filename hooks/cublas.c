/* cuBLAS and cuBLASLt hooks (libcublas.so.13, libcublasLt.so.13): every GEMM
 * entry point carrying a shape logs one TS_REC_GEMM per outermost call
 * (cublasSgemm_v2 reaching cublasLtMatmul inside cuBLAS counts once): m, n,
 * k, batch, data/output/compute types, transposes, stream and FLOPs; one
 * call in TRAINSHIM_FLOP_SAMPLE is also timed on its stream (shim/observe/compute.c).
 * The program's arguments and the real result pass through unchanged. */
#include "observe/compute.h"
#include "hooks.h"
#include "log/log.h"

struct gemm_acct {
    struct ts_rec_gemm r;
    struct ts_gpu_sample smp;
};

static uint64_t handle_stream(cublasHandle_t h)
{
    ts_fn_cublasGetStream_v2 get = TS_REAL(cublasGetStream_v2);
    cudaStream_t s = NULL;
    if (get && get(h, &s) == CUBLAS_STATUS_SUCCESS)
        return (uint64_t)(uintptr_t)s;
    return 0;
}

/* cublas<t>gemm have no compute-type argument: FP32 ones run on TF32
 * tensor cores when the handle's math mode allows it. */
static int handle_compute_type(cublasHandle_t h, int dtype)
{
    if (dtype != CUDA_R_32F && dtype != CUDA_C_32F)
        return -1;
    ts_fn_cublasGetMathMode get = TS_REAL(cublasGetMathMode);
    cublasMath_t mode = CUBLAS_DEFAULT_MATH;
    if (get && get(h, &mode) == CUBLAS_STATUS_SUCCESS && ((int)mode & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH)
        return CUBLAS_COMPUTE_32F_FAST_TF32;
    return -1;
}

static void gemm_prepare(struct gemm_acct *a, int api, uint64_t stream, int transa, int transb, int64_t m,
                         int64_t n, int64_t k, int64_t batch, int dtype, int out_type, int compute_type)
{
    struct ts_rec_gemm *r = &a->r;
    int dev = ts_current_device();
    ts_note_device(dev);
    r->api = api;
    r->device = dev;
    r->m = m, r->n = n, r->k = k, r->batch = batch;
    r->is_complex = ts_dtype_is_complex(dtype);
    r->flops = ts_gemm_flops(m, n, k, batch, r->is_complex);
    r->stream = stream;
    r->data_type = dtype;
    r->out_type = out_type;
    r->compute_type = compute_type;
    r->transa = (uint8_t)transa;
    r->transb = (uint8_t)transb;
    r->reserved0 = 0;
    r->reserved = 0;
    ts_sample_begin(&a->smp, stream);
}

static void gemm_finish(struct gemm_acct *a, int result)
{
    ts_sample_end(&a->smp, a->r.stream, TS_REC_GEMM, result == 0);
    a->r.sample_id = a->smp.id;
    a->r.result = result;
    ts_ev_gemm(&a->r);
}

/* A GEMM's operands as offload's step order sees them (each from its
 * pointer to the end of its block: a strided batch spans it); outermost calls
 * only, so cuBLAS reaching cublasLtMatmul counts once. */
static inline void gemm_touch(const void *a, const void *b, const void *c)
{
    if (ts_tls_depth == 0) {
        ts_offload_touch(a, 0, TS_TOUCH_GEMM);
        ts_offload_touch(b, 0, TS_TOUCH_GEMM);
        ts_offload_touch(c, 0, TS_TOUCH_GEMM);
    }
}

#define GEMM_BODY(base, api, args, stream_expr, ta, tb, m, n, k, batch, dt, odt, ct)                         \
    TS_HOOK_PROLOGUE(cublasStatus_t, base, api, args);                                                       \
    TS_OUTER_BEGIN(api);                                                                                     \
    struct gemm_acct acct_;                                                                                  \
    if (outer_)                                                                                              \
        gemm_prepare(&acct_, api, stream_expr, (int)(ta), (int)(tb), (int64_t)(m), (int64_t)(n),             \
                     (int64_t)(k), (int64_t)(batch), (int)(dt), (int)(odt), (int)(ct));                      \
    cublasStatus_t r_ = real_ args;                                                                          \
    if (outer_)                                                                                              \
        gemm_finish(&acct_, (int)r_);                                                                        \
    TS_OUTER_END(api, r_);                                                                                   \
    return r_

/* ---- cublas<t>gemm, <t>gemmBatched, <t>gemmStridedBatched ---------------- */
#define TYPED_GEMM(name, T, dt, I)                                                                           \
    static inline cublasStatus_t ts_body_##name(                                                             \
        int api, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, I m, I n, I k,   \
        const T *alpha, const T *A, I lda, const T *B, I ldb, const T *beta, T *C, I ldc)                    \
    {                                                                                                        \
        gemm_touch(A, B, C);                                                                                 \
        GEMM_BODY(name, api, (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc),         \
                  handle_stream(handle), transa, transb, m, n, k, 1, dt, dt,                                 \
                  handle_compute_type(handle, dt));                                                          \
    }
#define TYPED_BATCHED(name, T, dt, I)                                                                        \
    static inline cublasStatus_t ts_body_##name(                                                             \
        int api, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, I m, I n, I k,   \
        const T *alpha, const T *const Aarray[], I lda, const T *const Barray[], I ldb, const T *beta,       \
        T *const Carray[], I ldc, I batchCount)                                                              \
    {                                                                                                        \
        GEMM_BODY(name, api,                                                                                 \
                  (handle, transa, transb, m, n, k, alpha, Aarray, lda, Barray, ldb, beta, Carray, ldc,      \
                   batchCount),                                                                              \
                  handle_stream(handle), transa, transb, m, n, k, batchCount, dt, dt,                        \
                  handle_compute_type(handle, dt));                                                          \
    }
#define TYPED_STRIDED(name, T, dt, I)                                                                        \
    static inline cublasStatus_t ts_body_##name(                                                             \
        int api, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, I m, I n, I k,   \
        const T *alpha, const T *A, I lda, long long int strideA, const T *B, I ldb, long long int strideB,  \
        const T *beta, T *C, I ldc, long long int strideC, I batchCount)                                     \
    {                                                                                                        \
        gemm_touch(A, B, C);                                                                                 \
        GEMM_BODY(name, api,                                                                                 \
                  (handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,   \
                   strideC, batchCount),                                                                     \
                  handle_stream(handle), transa, transb, m, n, k, batchCount, dt, dt,                        \
                  handle_compute_type(handle, dt));                                                          \
    }
#define TYPED_ALL(S, T, dt)                                                                                  \
    TYPED_GEMM(cublas##S##gemm_v2, T, dt, int)                                                               \
    TYPED_GEMM(cublas##S##gemm_v2_64, T, dt, int64_t)                                                        \
    TYPED_BATCHED(cublas##S##gemmBatched, T, dt, int)                                                        \
    TYPED_BATCHED(cublas##S##gemmBatched_64, T, dt, int64_t)                                                 \
    TYPED_STRIDED(cublas##S##gemmStridedBatched, T, dt, int)                                                 \
    TYPED_STRIDED(cublas##S##gemmStridedBatched_64, T, dt, int64_t)

TYPED_ALL(S, float, CUDA_R_32F)
TYPED_ALL(D, double, CUDA_R_64F)
TYPED_ALL(C, cuComplex, CUDA_C_32F)
TYPED_ALL(Z, cuDoubleComplex, CUDA_C_64F)
/* Hgemm has no _v2 suffix */
TYPED_GEMM(cublasHgemm, struct __half, CUDA_R_16F, int)
TYPED_GEMM(cublasHgemm_64, struct __half, CUDA_R_16F, int64_t)
TYPED_BATCHED(cublasHgemmBatched, struct __half, CUDA_R_16F, int)
TYPED_BATCHED(cublasHgemmBatched_64, struct __half, CUDA_R_16F, int64_t)
TYPED_STRIDED(cublasHgemmStridedBatched, struct __half, CUDA_R_16F, int)
TYPED_STRIDED(cublasHgemmStridedBatched_64, struct __half, CUDA_R_16F, int64_t)

/* ---- cublasGemmEx, GemmBatchedEx, GemmStridedBatchedEx -------------------- */
#define EX_GEMM(name, I)                                                                                     \
    static inline cublasStatus_t ts_body_##name(                                                             \
        int api, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, I m, I n, I k,   \
        const void *alpha, const void *A, cudaDataType Atype, I lda, const void *B, cudaDataType Btype,      \
        I ldb, const void *beta, void *C, cudaDataType Ctype, I ldc, cublasComputeType_t computeType,        \
        cublasGemmAlgo_t algo)                                                                               \
    {                                                                                                        \
        gemm_touch(A, B, C);                                                                                 \
        GEMM_BODY(name, api,                                                                                 \
                  (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype,     \
                   ldc, computeType, algo),                                                                  \
                  handle_stream(handle), transa, transb, m, n, k, 1, Atype, Ctype, computeType);             \
    }
#define EX_BATCHED(name, I)                                                                                  \
    static inline cublasStatus_t ts_body_##name(                                                             \
        int api, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, I m, I n, I k,   \
        const void *alpha, const void *const Aarray[], cudaDataType Atype, I lda,                            \
        const void *const Barray[], cudaDataType Btype, I ldb, const void *beta, void *const Carray[],       \
        cudaDataType Ctype, I ldc, I batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo)     \
    {                                                                                                        \
        GEMM_BODY(name, api,                                                                                 \
                  (handle, transa, transb, m, n, k, alpha, Aarray, Atype, lda, Barray, Btype, ldb, beta,     \
                   Carray, Ctype, ldc, batchCount, computeType, algo),                                       \
                  handle_stream(handle), transa, transb, m, n, k, batchCount, Atype, Ctype, computeType);    \
    }
#define EX_STRIDED(name, I)                                                                                  \
    static inline cublasStatus_t ts_body_##name(                                                             \
        int api, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, I m, I n, I k,   \
        const void *alpha, const void *A, cudaDataType Atype, I lda, long long int strideA, const void *B,   \
        cudaDataType Btype, I ldb, long long int strideB, const void *beta, void *C, cudaDataType Ctype,     \
        I ldc, long long int strideC, I batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo)  \
    {                                                                                                        \
        gemm_touch(A, B, C);                                                                                 \
        GEMM_BODY(name, api,                                                                                 \
                  (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB,   \
                   beta, C, Ctype, ldc, strideC, batchCount, computeType, algo),                             \
                  handle_stream(handle), transa, transb, m, n, k, batchCount, Atype, Ctype, computeType);    \
    }
EX_GEMM(cublasGemmEx, int)
EX_GEMM(cublasGemmEx_64, int64_t)
EX_BATCHED(cublasGemmBatchedEx, int)
EX_BATCHED(cublasGemmBatchedEx_64, int64_t)
EX_STRIDED(cublasGemmStridedBatchedEx, int)
EX_STRIDED(cublasGemmStridedBatchedEx_64, int64_t)

/* ---- cublasLtMatmul: the shape lives in the descriptors ------------------ */
struct lt_shape {
    int64_t m, n, k, batch;
    int dtype, out_type, compute_type, transa, transb;
};

static void lt_read_shape(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
                          cublasLtMatrixLayout_t Ddesc, struct lt_shape *s)
{
    ts_fn_cublasLtMatrixLayoutGetAttribute lay = TS_REAL(cublasLtMatrixLayoutGetAttribute);
    ts_fn_cublasLtMatmulDescGetAttribute dsc = TS_REAL(cublasLtMatmulDescGetAttribute);
    uint64_t rows_d = 0, cols_d = 0, rows_a = 0, cols_a = 0;
    int32_t batch = 1, ct = -1, ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    uint32_t at = 0, dt = 0;
    size_t w;
    s->dtype = s->out_type = -1;
    /* The program's descriptors are only read, and never when absent: the
     * real call reports that error itself. */
    if (!Adesc || !Ddesc)
        lay = NULL;
    if (!desc)
        dsc = NULL;
    if (lay) {
        if (lay(Ddesc, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows_d, sizeof rows_d, &w) != 0)
            rows_d = 0;
        if (lay(Ddesc, CUBLASLT_MATRIX_LAYOUT_COLS, &cols_d, sizeof cols_d, &w) != 0)
            cols_d = 0;
        if (lay(Adesc, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows_a, sizeof rows_a, &w) != 0)
            rows_a = 0;
        if (lay(Adesc, CUBLASLT_MATRIX_LAYOUT_COLS, &cols_a, sizeof cols_a, &w) != 0)
            cols_a = 0;
        if (lay(Ddesc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch, &w) != 0)
            batch = 1;
        if (lay(Adesc, CUBLASLT_MATRIX_LAYOUT_TYPE, &at, sizeof at, &w) == 0)
            s->dtype = (int)at;
        if (lay(Ddesc, CUBLASLT_MATRIX_LAYOUT_TYPE, &dt, sizeof dt, &w) == 0)
            s->out_type = (int)dt;
    }
    if (dsc) {
        if (dsc(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &ct, sizeof ct, &w) != 0)
            ct = -1;
        if (dsc(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta, &w) != 0)
            ta = CUBLAS_OP_N;
        if (dsc(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb, &w) != 0)
            tb = CUBLAS_OP_N;
    }
    s->m = (int64_t)rows_d;
    s->n = (int64_t)cols_d;
    s->k = (int64_t)(ta == CUBLAS_OP_N ? cols_a : rows_a);
    s->batch = batch > 0 ? batch : 1;
    s->compute_type = ct;
    s->transa = ta;
    s->transb = tb;
}

static inline cublasStatus_t ts_body_cublasLtMatmul(
    int api, cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha, const void *A,
    cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
    const void *C, cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
    const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)
{
    TS_HOOK_PROLOGUE(cublasStatus_t, cublasLtMatmul, api,
                     (lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
                      workspace, workspaceSizeInBytes, stream));
    TS_OUTER_BEGIN(api);
    struct gemm_acct acct;
    if (outer_) {
        const void *operands[] = { A, B, C, D != C ? D : NULL };
        for (int i = 0; i < 4; i++)
            ts_offload_touch(operands[i], 0, TS_TOUCH_GEMM);
        struct lt_shape s;
        lt_read_shape(computeDesc, Adesc, Ddesc, &s);
        gemm_prepare(&acct, api, (uint64_t)(uintptr_t)stream, s.transa, s.transb, s.m, s.n, s.k, s.batch,
                     s.dtype, s.out_type, s.compute_type);
    }
    cublasStatus_t r = real_(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc,
                             algo, workspace, workspaceSizeInBytes, stream);
    if (outer_)
        gemm_finish(&acct, (int)r);
    TS_OUTER_END(api, r);
    return r;
}

#define TS_GEN_LIB_cublas(...) TS_GEN_HOOK(__VA_ARGS__)
#define TS_GEN_LIB_cublasLt(...) TS_GEN_HOOK(__VA_ARGS__)
#include "hooks_gen.h"
