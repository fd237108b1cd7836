/* lt_internal.h: internals of the emulated cuBLASLt (build/emu/libcublasLt.so.13).
 *   lt_desc.c    handles, matmul descriptors, matrix layouts, preferences,
 *                heuristics, versions and status strings
 *   lt_matmul.c  cublasLtMatmul: validation and the stream-ordered CPU GEMM
 * Descriptors live in the caller-visible "semi-opaque" structs of cublasLt.h
 * (so cublasLt*Init_internal works on stack storage, as libcublas uses it). */
#ifndef LT_INTERNAL_H
#define LT_INTERNAL_H
#include <cublasLt.h>
#include <stdint.h>

#define LT_HANDLE_MAGIC 0x4c7448616e646c65ull
/* cublas/cublas_internal.h's CUBLAS_HANDLE_MAGIC: a cuBLAS handle is also a
 * valid cuBLASLt handle, as with the real libraries (PyTorch passes its
 * cublasHandle_t to cublasLtMatmul). */
#define LT_CUBLAS_HANDLE_MAGIC 0x63426c6173487831ull
#define LT_DESC_MAGIC 0x4c744465u
#define LT_LAYOUT_MAGIC 0x4c744c61u
#define LT_PREF_MAGIC 0x4c745072u
#define LT_ALGO_MAGIC 0x4c74416c676f3031ull

struct cublasLtContext {
    uint64_t magic;
    int device;
};

struct lt_desc {
    uint32_t magic;
    int32_t compute;                 /* cublasComputeType_t */
    int32_t scale;                   /* cudaDataType */
    int32_t pointer_mode;            /* cublasLtPointerMode_t */
    int32_t transa, transb, transc;
    int32_t fill;
    uint32_t epilogue;
    int32_t sm_count;
    int8_t fast_accum;
    int32_t bias_type;               /* cudaDataType, -1: D's type */
    const void *bias;
    int64_t bias_batch_stride;
};
_Static_assert(sizeof(struct lt_desc) <= sizeof(cublasLtMatmulDescOpaque_t), "desc fits the opaque storage");

struct lt_layout {
    uint32_t magic;
    uint32_t type;                   /* cudaDataType */
    int32_t order;                   /* cublasLtOrder_t */
    int32_t batch;
    uint64_t rows, cols;
    int64_t ld, stride, plane_offset;
    uint32_t batch_mode;
};
_Static_assert(sizeof(struct lt_layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout fits the opaque storage");

struct lt_pref {
    uint32_t magic;
    uint32_t search_mode;
    uint64_t max_workspace;
    uint64_t impl_mask;
    uint32_t reduction_mask;
    uint32_t align_a, align_b, align_c, align_d;
    float max_waves;
};
_Static_assert(sizeof(struct lt_pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "pref fits the opaque storage");

/* Checks a matmul problem and derives its shape; the answer of both
 * cublasLtMatmul and cublasLtMatmulAlgoGetHeuristic.  On success fills m, n,
 * k, batch, the scale type and the accumulator width. */
struct lt_problem {
    int64_t m, n, k, batch;
    cudaDataType scale;
    int wide;
    int relu, gelu, bias;            /* the epilogue */
    cudaDataType bias_type;
};
cublasStatus_t lt_check_problem(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                struct lt_problem *out);
int lt_valid_handle(cublasLtHandle_t h);
void lt_count(const char *name, uint64_t delta);
#endif
