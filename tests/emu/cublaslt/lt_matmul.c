/* cublasLtMatmul of the emulated cuBLASLt: D = alpha * op(A) op(B) + beta * C,
 * batched, computed on the CPU by a kernel launched on the caller's stream
 * (emu_gemm_kernel.h), so it runs after the stream's earlier work and CUPTI
 * sees it, as on a GPU. */
#include "lt_internal.h"
#include "common/driver_link.h"
#include "../cublas/emu_gemm_kernel.h"
#include <stdio.h>
#include <stdlib.h>

/* Matmuls are kernels named like cuBLASLt's ("sm80_xmma_sgemm_..._nn"), with
 * the A type and the transposes in the name. */
static struct emu_gemm_kernels kernels = {.prefix = "sm80_xmma_", .suffix = "_128x128x32_stage3_warpsize2x2x1"};
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;
static void kernels_init(void) { emu_gemm_kernels_register(&kernels); }

/* Strides of element (i, j) of op(X) for a stored layout and a transpose. */
static void set_mat(struct emu_mat *x, const void *ptr, const struct lt_layout *l, int trans)
{
    int64_t rs = l->order == CUBLASLT_ORDER_ROW ? l->ld : 1;
    int64_t cs = l->order == CUBLASLT_ORDER_ROW ? 1 : l->ld;
    x->ptr = ptr;
    x->array = NULL;
    x->type = (cudaDataType)l->type;
    x->rs = trans ? cs : rs;
    x->cs = trans ? rs : cs;
    x->batch_stride = l->stride;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,
                              const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream)
{
    struct lt_problem p;
    cublasStatus_t st = lt_check_problem(lightHandle, computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    if (algo && algo->data[0] != LT_ALGO_MAGIC) return CUBLAS_STATUS_INVALID_VALUE;
    if (workspaceSizeInBytes > 0 && !workspace) return CUBLAS_STATUS_INVALID_VALUE;
    const struct lt_desc *ds = (const struct lt_desc *)computeDesc;
    int device_scalars = ds->pointer_mode == CUBLASLT_POINTER_MODE_DEVICE;
    double a = device_scalars ? 0 : emu_load(alpha, p.scale), b = device_scalars ? 0 : emu_load(beta, p.scale);
    int empty = p.m == 0 || p.n == 0 || p.batch == 0;
    if (!empty && !D) return CUBLAS_STATUS_INVALID_VALUE;
    if (!empty && p.k > 0 && (!A || !B)) return CUBLAS_STATUS_INVALID_VALUE;
    if (p.bias && !ds->bias) return CUBLAS_STATUS_INVALID_VALUE;
    if (!C) {
        if (device_scalars || b != 0) return CUBLAS_STATUS_INVALID_VALUE;
        C = D;
        Cdesc = Ddesc;
    }
    lt_count("cublaslt.matmul", 1);
    lt_count("cublas.gemm", 1);
    if (empty) return CUBLAS_STATUS_SUCCESS;

    struct emu_gemm_job *j = calloc(1, sizeof *j);
    if (!j) return CUBLAS_STATUS_ALLOC_FAILED;
    struct emu_gemm *g = &j->g;
    g->m = p.m;
    g->n = p.n;
    g->k = p.k;
    g->batch = p.batch;
    set_mat(&g->a, A, (const struct lt_layout *)Adesc, ds->transa != CUBLAS_OP_N);
    set_mat(&g->b, B, (const struct lt_layout *)Bdesc, ds->transb != CUBLAS_OP_N);
    set_mat(&g->c, C, (const struct lt_layout *)Cdesc, 0);
    set_mat(&g->d, D, (const struct lt_layout *)Ddesc, 0);
    g->wide = p.wide;
    g->scale_type = p.scale;
    g->device_scalars = device_scalars;
    g->alpha_ptr = alpha;
    g->beta_ptr = beta;
    g->alpha = a;
    g->beta = b;
    g->relu = p.relu;
    g->gelu = p.gelu;
    g->bias = p.bias ? ds->bias : NULL;
    g->bias_type = p.bias_type;
    g->bias_batch_stride = ds->bias_batch_stride;
    g->scratch = workspace;
    g->scratch_bytes = workspace ? workspaceSizeInBytes : 0;

    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (EMU_DRV(cuStreamIsCapturing)((CUstream)stream, &cs) != CUDA_SUCCESS) cs = CU_STREAM_CAPTURE_STATUS_NONE;
    j->persistent = cs != CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult cr = emu_gemm_launch(&kernels, &kernels_once, kernels_init, (CUstream)stream, ds->transa, ds->transb, j);
    if (cr != CUDA_SUCCESS) {
        free(j);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}
