/* Handles, descriptors, layouts, preferences, heuristics and versions of the
 * emulated cuBLASLt.  Attribute get/set follow cublasLt.h: the size passed
 * must equal the attribute's size (else CUBLAS_STATUS_INVALID_VALUE); a get
 * with sizeInBytes 0 reports the size needed in *sizeWritten. */
#include "lt_internal.h"
#include "common/driver_link.h"
#include "emu.h"
#include "../cublas/emu_gemm.h"
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void lt_count(const char *name, uint64_t delta)
{
    void (*add)(const char *, uint64_t) = EMU_DRV(emuAddCounter);
    if (add) add(name, delta);
}

int lt_valid_handle(cublasLtHandle_t h)
{
    return h && (h->magic == LT_HANDLE_MAGIC || h->magic == LT_CUBLAS_HANDLE_MAGIC);
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    if (!lightHandle) return CUBLAS_STATUS_INVALID_VALUE;
    struct cublasLtContext *h = calloc(1, sizeof *h);
    if (!h) return CUBLAS_STATUS_ALLOC_FAILED;
    h->magic = LT_HANDLE_MAGIC;
    CUdevice dev = 0;
    if (EMU_DRV(cuCtxGetDevice)(&dev) != CUDA_SUCCESS) dev = 0;
    h->device = (int)dev;
    *lightHandle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    if (!lightHandle || lightHandle->magic != LT_HANDLE_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    lightHandle->magic = 0;
    free(lightHandle);
    return CUBLAS_STATUS_SUCCESS;
}

size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }
size_t cublasLtGetCudartVersion(void) { return 13000; }

cublasStatus_t cublasLtGetProperty(libraryPropertyType type, int *value)
{
    if (!value) return CUBLAS_STATUS_INVALID_VALUE;
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
}

const char *cublasLtGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *cublasLtGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "the functionality requested requires some license";
    default: return "unknown error";
    }
}

/* ------------------------------------------------------------ attributes */
struct attr { int id; size_t offset, size; };

static cublasStatus_t attr_set(void *obj, const struct attr *tab, size_t n, int id, const void *buf, size_t size)
{
    for (size_t i = 0; i < n; i++) {
        if (tab[i].id != id) continue;
        if (!buf || size != tab[i].size) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy((char *)obj + tab[i].offset, buf, size);
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

static cublasStatus_t attr_get(const void *obj, const struct attr *tab, size_t n, int id, void *buf, size_t size,
                               size_t *written)
{
    for (size_t i = 0; i < n; i++) {
        if (tab[i].id != id) continue;
        if (size == 0) {
            if (!written) return CUBLAS_STATUS_INVALID_VALUE;
            *written = tab[i].size;
            return CUBLAS_STATUS_SUCCESS;
        }
        if (!buf || size != tab[i].size) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(buf, (const char *)obj + tab[i].offset, size);
        if (written) *written = size;
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

#define A_(id, type, field) {id, offsetof(type, field), sizeof(((type *)0)->field)}

/* ------------------------------------------------------------ matmul desc */
static const struct attr desc_attrs[] = {
    A_(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, struct lt_desc, compute),
    A_(CUBLASLT_MATMUL_DESC_SCALE_TYPE, struct lt_desc, scale),
    A_(CUBLASLT_MATMUL_DESC_POINTER_MODE, struct lt_desc, pointer_mode),
    A_(CUBLASLT_MATMUL_DESC_TRANSA, struct lt_desc, transa),
    A_(CUBLASLT_MATMUL_DESC_TRANSB, struct lt_desc, transb),
    A_(CUBLASLT_MATMUL_DESC_TRANSC, struct lt_desc, transc),
    A_(CUBLASLT_MATMUL_DESC_FILL_MODE, struct lt_desc, fill),
    A_(CUBLASLT_MATMUL_DESC_EPILOGUE, struct lt_desc, epilogue),
    A_(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, struct lt_desc, sm_count),
    A_(CUBLASLT_MATMUL_DESC_FAST_ACCUM, struct lt_desc, fast_accum),
    A_(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, struct lt_desc, bias_type),
    A_(CUBLASLT_MATMUL_DESC_BIAS_POINTER, struct lt_desc, bias),
    A_(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, struct lt_desc, bias_batch_stride),
};

static int desc_ok(cublasLtMatmulDesc_t d) { return d && ((const struct lt_desc *)d)->magic == LT_DESC_MAGIC; }

cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t matmulDesc, size_t size,
                                               cublasComputeType_t computeType, cudaDataType_t scaleType)
{
    if (!matmulDesc) return CUBLAS_STATUS_INVALID_VALUE;
    if (size < sizeof(struct lt_desc)) return CUBLAS_STATUS_ALLOC_FAILED;
    struct lt_desc *d = (struct lt_desc *)matmulDesc;
    memset(d, 0, sizeof *d);
    d->magic = LT_DESC_MAGIC;
    d->compute = (int32_t)computeType;
    d->scale = (int32_t)scaleType;
    d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d->transa = d->transb = d->transc = CUBLAS_OP_N;
    d->fill = CUBLAS_FILL_MODE_FULL;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->bias_type = -1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType)
{
    if (!matmulDesc) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulDesc_t d = calloc(1, sizeof *d);
    if (!d) return CUBLAS_STATUS_ALLOC_FAILED;
    cublasLtMatmulDescInit_internal(d, sizeof *d, computeType, scaleType);
    *matmulDesc = d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    if (!matmulDesc) return CUBLAS_STATUS_SUCCESS;
    if (!desc_ok(matmulDesc)) return CUBLAS_STATUS_INVALID_VALUE;
    ((struct lt_desc *)matmulDesc)->magic = 0;
    free(matmulDesc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t sizeInBytes)
{
    if (!desc_ok(matmulDesc)) return CUBLAS_STATUS_INVALID_VALUE;
    struct lt_desc tmp = *(struct lt_desc *)matmulDesc;
    cublasStatus_t st = attr_set(&tmp, desc_attrs, sizeof desc_attrs / sizeof *desc_attrs, (int)attr, buf, sizeInBytes);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if ((unsigned)tmp.transa > CUBLAS_OP_C || (unsigned)tmp.transb > CUBLAS_OP_C || (unsigned)tmp.transc > CUBLAS_OP_C ||
        (unsigned)tmp.pointer_mode > 4)
        return CUBLAS_STATUS_INVALID_VALUE;
    *(struct lt_desc *)matmulDesc = tmp;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              void *buf, size_t sizeInBytes, size_t *sizeWritten)
{
    if (!desc_ok(matmulDesc)) return CUBLAS_STATUS_INVALID_VALUE;
    return attr_get(matmulDesc, desc_attrs, sizeof desc_attrs / sizeof *desc_attrs, (int)attr, buf, sizeInBytes, sizeWritten);
}

/* ------------------------------------------------------------ layouts */
static const struct attr layout_attrs[] = {
    A_(CUBLASLT_MATRIX_LAYOUT_TYPE, struct lt_layout, type),
    A_(CUBLASLT_MATRIX_LAYOUT_ORDER, struct lt_layout, order),
    A_(CUBLASLT_MATRIX_LAYOUT_ROWS, struct lt_layout, rows),
    A_(CUBLASLT_MATRIX_LAYOUT_COLS, struct lt_layout, cols),
    A_(CUBLASLT_MATRIX_LAYOUT_LD, struct lt_layout, ld),
    A_(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, struct lt_layout, batch),
    A_(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, struct lt_layout, stride),
    A_(CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, struct lt_layout, plane_offset),
    A_(CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, struct lt_layout, batch_mode),
};

static int layout_ok(cublasLtMatrixLayout_t l) { return l && ((const struct lt_layout *)l)->magic == LT_LAYOUT_MAGIC; }

cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t matLayout, size_t size, cudaDataType type,
                                                 uint64_t rows, uint64_t cols, int64_t ld)
{
    if (!matLayout) return CUBLAS_STATUS_INVALID_VALUE;
    if (size < sizeof(struct lt_layout)) return CUBLAS_STATUS_ALLOC_FAILED;
    struct lt_layout *l = (struct lt_layout *)matLayout;
    memset(l, 0, sizeof *l);
    l->magic = LT_LAYOUT_MAGIC;
    l->type = (uint32_t)type;
    l->order = CUBLASLT_ORDER_COL;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
    l->batch = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld)
{
    if (!matLayout) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatrixLayout_t l = calloc(1, sizeof *l);
    if (!l) return CUBLAS_STATUS_ALLOC_FAILED;
    cublasLtMatrixLayoutInit_internal(l, sizeof *l, type, rows, cols, ld);
    *matLayout = l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    if (!matLayout) return CUBLAS_STATUS_SUCCESS;
    if (!layout_ok(matLayout)) return CUBLAS_STATUS_INVALID_VALUE;
    ((struct lt_layout *)matLayout)->magic = 0;
    free(matLayout);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes)
{
    if (!layout_ok(matLayout)) return CUBLAS_STATUS_INVALID_VALUE;
    struct lt_layout tmp = *(struct lt_layout *)matLayout;
    cublasStatus_t st = attr_set(&tmp, layout_attrs, sizeof layout_attrs / sizeof *layout_attrs, (int)attr, buf, sizeInBytes);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (tmp.batch < 1 || tmp.order < CUBLASLT_ORDER_COL || tmp.order > 6) return CUBLAS_STATUS_INVALID_VALUE;
    *(struct lt_layout *)matLayout = tmp;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                void *buf, size_t sizeInBytes, size_t *sizeWritten)
{
    if (!layout_ok(matLayout)) return CUBLAS_STATUS_INVALID_VALUE;
    return attr_get(matLayout, layout_attrs, sizeof layout_attrs / sizeof *layout_attrs, (int)attr, buf, sizeInBytes, sizeWritten);
}

/* ------------------------------------------------------------ preferences */
static const struct attr pref_attrs[] = {
    A_(CUBLASLT_MATMUL_PREF_SEARCH_MODE, struct lt_pref, search_mode),
    A_(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, struct lt_pref, max_workspace),
    A_(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, struct lt_pref, reduction_mask),
    A_(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, struct lt_pref, align_a),
    A_(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, struct lt_pref, align_b),
    A_(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, struct lt_pref, align_c),
    A_(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, struct lt_pref, align_d),
    A_(CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, struct lt_pref, max_waves),
    A_(CUBLASLT_MATMUL_PREF_IMPL_MASK, struct lt_pref, impl_mask),
};

static int pref_ok(cublasLtMatmulPreference_t p) { return p && ((const struct lt_pref *)p)->magic == LT_PREF_MAGIC; }

cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref, size_t size)
{
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    if (size < sizeof(struct lt_pref)) return CUBLAS_STATUS_ALLOC_FAILED;
    struct lt_pref *p = (struct lt_pref *)pref;
    memset(p, 0, sizeof *p);
    p->magic = LT_PREF_MAGIC;
    p->reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
    p->align_a = p->align_b = p->align_c = p->align_d = 256;
    p->impl_mask = UINT64_MAX;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulPreference_t p = calloc(1, sizeof *p);
    if (!p) return CUBLAS_STATUS_ALLOC_FAILED;
    cublasLtMatmulPreferenceInit_internal(p, sizeof *p);
    *pref = p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    if (!pref) return CUBLAS_STATUS_SUCCESS;
    if (!pref_ok(pref)) return CUBLAS_STATUS_INVALID_VALUE;
    ((struct lt_pref *)pref)->magic = 0;
    free(pref);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t sizeInBytes)
{
    if (!pref_ok(pref)) return CUBLAS_STATUS_INVALID_VALUE;
    return attr_set(pref, pref_attrs, sizeof pref_attrs / sizeof *pref_attrs, (int)attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void *buf,
                                                    size_t sizeInBytes, size_t *sizeWritten)
{
    if (!pref_ok(pref)) return CUBLAS_STATUS_INVALID_VALUE;
    return attr_get(pref, pref_attrs, sizeof pref_attrs / sizeof *pref_attrs, (int)attr, buf, sizeInBytes, sizeWritten);
}

/* ------------------------------------------------------------ problem check */
cublasStatus_t lt_check_problem(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                struct lt_problem *out)
{
    if (!lt_valid_handle(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!desc_ok(desc) || !layout_ok(a) || !layout_ok(b) || !layout_ok(c) || !layout_ok(d))
        return CUBLAS_STATUS_INVALID_VALUE;
    const struct lt_desc *ds = (const struct lt_desc *)desc;
    const struct lt_layout *la = (const void *)a, *lb = (const void *)b, *lc = (const void *)c, *ld = (const void *)d;
    /* Epilogues without auxiliary outputs or gradients: bias, ReLU, GELU. */
    switch (ds->epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: case CUBLASLT_EPILOGUE_RELU: case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_RELU_BIAS: case CUBLASLT_EPILOGUE_GELU: case CUBLASLT_EPILOGUE_GELU_BIAS:
        break;
    default:
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (ds->transc != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (ds->pointer_mode != CUBLASLT_POINTER_MODE_HOST && ds->pointer_mode != CUBLASLT_POINTER_MODE_DEVICE)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const struct lt_layout *all[4] = {la, lb, lc, ld};
    for (int i = 0; i < 4; i++) {
        if (all[i]->order != CUBLASLT_ORDER_COL && all[i]->order != CUBLASLT_ORDER_ROW) return CUBLAS_STATUS_NOT_SUPPORTED;
        if (all[i]->batch_mode != 0 || all[i]->plane_offset != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
        uint64_t lead = all[i]->order == CUBLASLT_ORDER_COL ? all[i]->rows : all[i]->cols;
        if (all[i]->ld < 1 || (uint64_t)all[i]->ld < lead) return CUBLAS_STATUS_INVALID_VALUE;
    }
    int ta = ds->transa != CUBLAS_OP_N, tb = ds->transb != CUBLAS_OP_N;
    uint64_t m = ld->rows, n = ld->cols;
    uint64_t am = ta ? la->cols : la->rows, ak = ta ? la->rows : la->cols;
    uint64_t bk = tb ? lb->cols : lb->rows, bn = tb ? lb->rows : lb->cols;
    if (lc->rows != m || lc->cols != n || am != m || bn != n || ak != bk) return CUBLAS_STATUS_INVALID_VALUE;
    if (lc->type != ld->type) return CUBLAS_STATUS_NOT_SUPPORTED;
    int batch = ld->batch;
    if (la->batch != batch || lb->batch != batch || lc->batch != batch) return CUBLAS_STATUS_INVALID_VALUE;
    cudaDataType scale;
    int wide;
    int st = emu_gemm_types(ds->compute, (cudaDataType)la->type, (cudaDataType)lb->type, (cudaDataType)lc->type, &scale, &wide);
    if (st) return (cublasStatus_t)st;
    /* The scale type may be the compute's (or float for half compute, as cuBLASLt allows). */
    if ((cudaDataType)ds->scale != scale && !(scale == CUDA_R_16F && ds->scale == CUDA_R_32F))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    out->m = (int64_t)m;
    out->n = (int64_t)n;
    out->k = (int64_t)ak;
    out->batch = batch;
    out->scale = (cudaDataType)ds->scale;
    out->wide = wide;
    out->relu = ds->epilogue == CUBLASLT_EPILOGUE_RELU || ds->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
    out->gelu = ds->epilogue == CUBLASLT_EPILOGUE_GELU || ds->epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
    out->bias = (ds->epilogue & CUBLASLT_EPILOGUE_BIAS) != 0;
    out->bias_type = ds->bias_type == -1 ? (cudaDataType)ld->type : (cudaDataType)ds->bias_type;
    if (out->bias && emu_type_size(out->bias_type) == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
    return CUBLAS_STATUS_SUCCESS;
}

/* One algorithm fits every supported problem: the CPU GEMM needs no workspace. */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount)
{
    if (!lt_valid_handle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requestedAlgoCount < 1 || !heuristicResultsArray || !returnAlgoCount || !pref_ok(preference))
        return CUBLAS_STATUS_INVALID_VALUE;
    *returnAlgoCount = 0;
    struct lt_problem p;
    cublasStatus_t st = lt_check_problem(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    cublasLtMatmulHeuristicResult_t *r = &heuristicResultsArray[0];
    memset(r, 0, sizeof *r);
    r->algo.data[0] = LT_ALGO_MAGIC;
    r->algo.data[1] = 0;             /* algo id */
    r->workspaceSize = 0;
    r->state = CUBLAS_STATUS_SUCCESS;
    r->wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}
