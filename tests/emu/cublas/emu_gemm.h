/* emu_gemm.h: the CPU GEMM shared by the emulated cuBLAS and cuBLASLt
 * (header-only: each library carries its own copy, neither exports it).
 *
 * D = alpha * op(A) * op(B) + beta * C for a batch of matrices.  Every matrix
 * is described by a row stride and a column stride in elements, so column-
 * major, row-major and transposed operands are the same code: element (i, j)
 * of op(X) is at ptr + i*rs + j*cs.  Storage types are widened to float (or
 * double for 64F and 32I compute) for the dot products and rounded back once
 * per output element, as tensor-core GEMMs do.  When beta is 0, C is not read
 * (BLAS semantics: it may hold NaNs); when alpha is 0, A and B are not read.
 * cuBLASLt's bias / ReLU / GELU epilogues apply after beta * C.  The packed
 * operands live in the caller's workspace when one is given and is large
 * enough (so the GEMM really uses it, as on a GPU), else in host memory. */
#ifndef EMU_GEMM_H
#define EMU_GEMM_H
#include <library_types.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "emu_float16.h"

struct emu_mat {
    const void *ptr;                 /* base of batch 0 (when array == NULL) */
    const void *const *array;        /* pointer-array batch: device array of device pointers, read when run */
    cudaDataType type;
    int64_t rs, cs;                  /* element strides of rows and columns of op(X) */
    int64_t batch_stride;            /* elements between consecutive matrices */
};

struct emu_gemm {
    int64_t m, n, k, batch;
    struct emu_mat a, b, c, d;       /* op(A): m x k, op(B): k x n, C and D: m x n */
    int wide;                        /* accumulate in double (64F, 32I compute) */
    cudaDataType scale_type;         /* type of alpha and beta */
    int device_scalars;              /* alpha_ptr/beta_ptr are read when the GEMM runs */
    const void *alpha_ptr, *beta_ptr;
    double alpha, beta;              /* host pointer mode: read at the call */
    int relu, gelu;                  /* cuBLASLt epilogues, applied after the bias */
    const void *bias;                /* cuBLASLt BIAS epilogue: one value per row of D */
    cudaDataType bias_type;
    int64_t bias_batch_stride;
    void *scratch;                   /* the caller's workspace (device memory), used for packing */
    size_t scratch_bytes;            /* when large enough, so its lifetime matters as on a GPU */
};

static inline size_t emu_type_size(cudaDataType t)
{
    switch (t) {
    case CUDA_R_8I: case CUDA_R_8U: return 1;
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    case CUDA_R_32F: case CUDA_R_32I: case CUDA_R_32U: return 4;
    case CUDA_R_64F: return 8;
    default: return 0;
    }
}

static inline double emu_load(const void *p, cudaDataType t)
{
    switch (t) {
    case CUDA_R_8I: return *(const int8_t *)p;
    case CUDA_R_8U: return *(const uint8_t *)p;
    case CUDA_R_16F: return emu_half_to_float(*(const uint16_t *)p);
    case CUDA_R_16BF: return emu_bf16_to_float(*(const uint16_t *)p);
    case CUDA_R_32F: return *(const float *)p;
    case CUDA_R_32I: return *(const int32_t *)p;
    case CUDA_R_32U: return *(const uint32_t *)p;
    case CUDA_R_64F: return *(const double *)p;
    default: return 0;
    }
}

static inline int32_t emu_sat_i32(double v)
{
    if (v != v) return 0;
    if (v >= 2147483647.0) return INT32_MAX;
    if (v <= -2147483648.0) return INT32_MIN;
    return (int32_t)__builtin_rint(v);
}

static inline void emu_store(void *p, cudaDataType t, double v)
{
    switch (t) {
    case CUDA_R_8I: { double r = __builtin_rint(v); *(int8_t *)p = (int8_t)(r > 127 ? 127 : r < -128 ? -128 : r); break; }
    case CUDA_R_8U: { double r = __builtin_rint(v); *(uint8_t *)p = (uint8_t)(r > 255 ? 255 : r < 0 ? 0 : r); break; }
    case CUDA_R_16F: *(uint16_t *)p = emu_float_to_half((float)v); break;
    case CUDA_R_16BF: *(uint16_t *)p = emu_float_to_bf16((float)v); break;
    case CUDA_R_32F: *(float *)p = (float)v; break;
    case CUDA_R_32I: *(int32_t *)p = emu_sat_i32(v); break;
    case CUDA_R_32U: *(uint32_t *)p = (uint32_t)emu_sat_i32(v); break;
    case CUDA_R_64F: *(double *)p = v; break;
    default: break;
    }
}

static inline const char *emu_mat_base(const struct emu_mat *x, int64_t b)
{
    if (x->array) return (const char *)x->array[b];
    return (const char *)x->ptr + (size_t)(b * x->batch_stride) * emu_type_size(x->type);
}

static inline const char *emu_elem(const struct emu_mat *x, const char *base, int64_t i, int64_t j)
{
    return base + (size_t)(i * x->rs + j * x->cs) * emu_type_size(x->type);
}

/* The scale type (of alpha and beta) and accumulator width for a compute
 * type and operand types, following the table of cublasGemmEx; 0 when the
 * combination is one cuBLAS supports, else CUBLAS_STATUS_NOT_SUPPORTED (15). */
static inline int emu_gemm_types(int compute, cudaDataType at, cudaDataType bt, cudaDataType ct,
                                 cudaDataType *scale, int *wide)
{
    *wide = 0;
    switch (compute) {
    case 64: case 65:                /* CUBLAS_COMPUTE_16F[_PEDANTIC] */
        *scale = CUDA_R_16F;
        return at == CUDA_R_16F && bt == CUDA_R_16F && ct == CUDA_R_16F ? 0 : 15;
    case 68: case 69: case 78:       /* 32F, 32F_PEDANTIC, 32F_EMULATED_16BFX9 */
        *scale = CUDA_R_32F;
        if (at != bt) return 15;
        if (at == CUDA_R_32F) return ct == CUDA_R_32F ? 0 : 15;
        if (at == CUDA_R_16F || at == CUDA_R_16BF) return ct == at || ct == CUDA_R_32F ? 0 : 15;
        if (at == CUDA_R_8I) return ct == CUDA_R_32F ? 0 : 15;
        return 15;
    case 74: case 75: case 77:       /* 32F_FAST_16F, 32F_FAST_16BF, 32F_FAST_TF32 */
        *scale = CUDA_R_32F;
        return at == CUDA_R_32F && bt == CUDA_R_32F && ct == CUDA_R_32F ? 0 : 15;
    case 70: case 71: case 79:       /* 64F, 64F_PEDANTIC, 64F_EMULATED_FIXEDPOINT */
        *scale = CUDA_R_64F;
        *wide = 1;
        return at == CUDA_R_64F && bt == CUDA_R_64F && ct == CUDA_R_64F ? 0 : 15;
    case 72: case 73:                /* 32I[_PEDANTIC] */
        *scale = CUDA_R_32I;
        *wide = 1;
        return at == CUDA_R_8I && bt == CUDA_R_8I && ct == CUDA_R_32I ? 0 : 15;
    default:
        return 7;                    /* not a compute type: CUBLAS_STATUS_INVALID_VALUE */
    }
}

/* bias, then ReLU or GELU (the tanh form cuBLASLt documents). */
static inline double emu_epilogue(const struct emu_gemm *g, int64_t batch, int64_t row, double v)
{
    if (g->bias) {
        size_t es = emu_type_size(g->bias_type);
        v += emu_load((const char *)g->bias + (size_t)(batch * g->bias_batch_stride + row) * es, g->bias_type);
    }
    if (g->relu && v < 0) v = 0;
    if (g->gelu) v = 0.5 * v * (1.0 + __builtin_tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    return v;
}

#define EMU_GEMM_ROW_BLOCK 64

/* ACC is float or double.  Packs op(B) column by column (n x k, contiguous k)
 * and op(A) by blocks of rows, so every dot product runs over contiguous
 * memory. */
#define EMU_GEMM_BODY(ACC) do { \
    size_t nb_ = (size_t)(g->n * g->k + 1), na_ = (size_t)(EMU_GEMM_ROW_BLOCK * g->k + 1); \
    int own_ = sizeof(ACC) * (nb_ + na_) > g->scratch_bytes || !g->scratch || (uintptr_t)g->scratch % 8u; \
    ACC *bp = own_ ? malloc(sizeof(ACC) * nb_) : (ACC *)g->scratch; \
    ACC *ap = own_ ? malloc(sizeof(ACC) * na_) : (ACC *)g->scratch + nb_; \
    if (!bp || !ap) { if (own_) { free(bp); free(ap); } return -1; } \
    for (int64_t bi = 0; bi < g->batch; bi++) { \
        const char *A = emu_mat_base(&g->a, bi), *B = emu_mat_base(&g->b, bi); \
        const char *C = emu_mat_base(&g->c, bi); \
        char *D = (char *)emu_mat_base(&g->d, bi); \
        for (int64_t j = 0; use_ab && j < g->n; j++) \
            for (int64_t l = 0; l < g->k; l++) bp[j * g->k + l] = (ACC)emu_load(emu_elem(&g->b, B, l, j), g->b.type); \
        for (int64_t i0 = 0; i0 < g->m; i0 += EMU_GEMM_ROW_BLOCK) { \
            int64_t i1 = i0 + EMU_GEMM_ROW_BLOCK < g->m ? i0 + EMU_GEMM_ROW_BLOCK : g->m; \
            for (int64_t i = i0; use_ab && i < i1; i++) \
                for (int64_t l = 0; l < g->k; l++) \
                    ap[(i - i0) * g->k + l] = (ACC)emu_load(emu_elem(&g->a, A, i, l), g->a.type); \
            for (int64_t j = 0; j < g->n; j++) { \
                const ACC *bc = bp + j * g->k; \
                for (int64_t i = i0; i < i1; i++) { \
                    const ACC *ar = ap + (i - i0) * g->k; \
                    ACC acc = 0; \
                    for (int64_t l = 0; use_ab && l < g->k; l++) acc += ar[l] * bc[l]; \
                    ACC v = use_ab ? (ACC)alpha * acc : 0; \
                    if (beta != 0) v += (ACC)beta * (ACC)emu_load(emu_elem(&g->c, C, i, j), g->c.type); \
                    if (g->bias || g->relu || g->gelu) v = (ACC)emu_epilogue(g, bi, i, (double)v); \
                    emu_store((void *)emu_elem(&g->d, D, i, j), g->d.type, (double)v); \
                } \
            } \
        } \
    } \
    if (own_) { free(bp); free(ap); } } while (0)

/* Runs the GEMM now (on a stream worker).  Returns 0, or -1 if host memory
 * for the packed operands ran out. */
static inline int emu_gemm_run(const struct emu_gemm *g)
{
    double alpha = g->alpha, beta = g->beta;
    if (g->device_scalars) {
        alpha = emu_load(g->alpha_ptr, g->scale_type);
        beta = emu_load(g->beta_ptr, g->scale_type);
    }
    if (g->m <= 0 || g->n <= 0 || g->batch <= 0) return 0;
    int use_ab = alpha != 0 && g->k > 0;   /* alpha == 0: A and B are not read */
    if (g->wide) EMU_GEMM_BODY(double);
    else EMU_GEMM_BODY(float);
    return 0;
}
#endif
