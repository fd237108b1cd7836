/* Emulated cuBLASLt: descriptor and layout attributes (set/get, sizes,
 * errors), preferences and the heuristic, cublasLtMatmul with transposes,
 * separate C and D, row-major layouts, strided batches, fp16 inputs with fp32
 * compute, device pointer mode, bias/ReLU/GELU epilogues, and invalid
 * problems. */
#include <cublasLt.h>
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu.h"
#include "cublas/emu_float16.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { fprintf(stderr, "%s = %d\n", #x, (int)r_); exit(2); } } while (0)
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, (int)s_); exit(3); } } while (0)

static CUstream stream;
static cublasLtHandle_t lt;

static void *dev_alloc(size_t n)
{
    CUdeviceptr p;
    CU(cuMemAlloc(&p, n));
    return (void *)(uintptr_t)p;
}

static void test_attributes(void)
{
    cublasLtMatmulDesc_t desc;
    CB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t v = -1;
    size_t written = 0;
    CB(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &v, sizeof v, &written));
    CHECK(v == CUBLAS_OP_N && written == sizeof v, "default TRANSA %d (%zu bytes)", v, written);
    int32_t t = CUBLAS_OP_T;
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &t, sizeof t));
    CB(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &v, sizeof v, &written));
    CHECK(v == CUBLAS_OP_T, "TRANSB %d", v);
    CB(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &v, sizeof v, NULL));
    CHECK(v == CUBLAS_COMPUTE_32F, "COMPUTE_TYPE %d", v);
    CB(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &v, sizeof v, NULL));
    CHECK(v == CUDA_R_32F, "SCALE_TYPE %d", v);
    uint32_t epi = 0;
    CB(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi, NULL));
    CHECK(epi == CUBLASLT_EPILOGUE_DEFAULT, "EPILOGUE %u", epi);
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, 8) == CUBLAS_STATUS_INVALID_VALUE, "wrong size accepted");
    CHECK(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, NULL, 0, &written) == CUBLAS_STATUS_SUCCESS &&
          written == sizeof(int32_t), "size query");
    CHECK(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, NULL, 0, NULL) == CUBLAS_STATUS_INVALID_VALUE,
          "size query without sizeWritten");
    CB(cublasLtMatmulDescDestroy(desc));

    cublasLtMatrixLayout_t l;
    CB(cublasLtMatrixLayoutCreate(&l, CUDA_R_16F, 3, 5, 4));
    uint64_t rows = 0, cols = 0;
    int64_t ld = 0, stride = -1;
    int32_t batch = 0, order = -1;
    uint32_t type = 0;
    CB(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows, NULL));
    CB(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols, NULL));
    CB(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld, NULL));
    CB(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch, NULL));
    CB(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride, NULL));
    CB(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order, NULL));
    CB(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof type, NULL));
    CHECK(rows == 3 && cols == 5 && ld == 4 && batch == 1 && stride == 0 && order == CUBLASLT_ORDER_COL && type == CUDA_R_16F,
          "layout %llu %llu %lld %d %lld %d %u", (unsigned long long)rows, (unsigned long long)cols, (long long)ld, batch,
          (long long)stride, order, type);
    batch = 0;
    CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch) == CUBLAS_STATUS_INVALID_VALUE,
          "batch count 0 accepted");
    CHECK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, 4, NULL) == CUBLAS_STATUS_INVALID_VALUE, "ROWS as 4 bytes");
    CB(cublasLtMatrixLayoutDestroy(l));

    /* Init in caller storage, and its size check */
    cublasLtMatrixLayoutOpaque_t storage;
    CB(cublasLtMatrixLayoutInit(&storage, CUDA_R_32F, 2, 2, 2));
    CHECK(cublasLtMatrixLayoutInit_internal(&storage, 8, CUDA_R_32F, 2, 2, 2) == CUBLAS_STATUS_ALLOC_FAILED, "tiny storage accepted");
    CHECK(cublasLtGetVersion() == CUBLAS_VERSION, "version %zu", cublasLtGetVersion());
}

/* Fills a layout-described matrix (col or row order) from f(i, j). */
static void fill(void *buf, cudaDataType t, int order, int64_t ld, int rows, int cols, int64_t off, double (*f)(int, int, int), int b)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            size_t at = (size_t)(off + (order == CUBLASLT_ORDER_COL ? i + j * ld : i * ld + j));
            double v = f(i, j, b);
            if (t == CUDA_R_16F) ((uint16_t *)buf)[at] = emu_float_to_half((float)v);
            else ((float *)buf)[at] = (float)v;
        }
}
static double fa(int i, int j, int b) { return ((i * 3 + j * 5 + b) % 9 - 4) / 4.0; }
static double fb(int i, int j, int b) { return ((i * 7 + j * 2 + 2 * b) % 11 - 5) / 8.0; }
static double fc(int i, int j, int b) { return ((i + j * 3 + b) % 5) - 2.0; }

static void set_batch(cublasLtMatrixLayout_t l, int32_t batch, int64_t stride)
{
    CB(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
    CB(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
}

/* D (fp32, col) = alpha * A^T (fp16, stored k x m col) * B (fp16, stored k x n ROW-major) + beta * C (fp32), batch 3 */
static void test_matmul(int device_scalars)
{
    const int m = 11, n = 7, k = 13, batch = 3;
    const int64_t lda = k + 2, ldb = n + 1, ldc = m, ldd = m + 3;
    const int64_t sa = lda * m, sb = ldb * k + 4, sc = ldc * n, sd = ldd * n;
    cublasLtMatmulDesc_t desc;
    CB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t ta = CUBLAS_OP_T, pm = device_scalars ? CUBLASLT_POINTER_MODE_DEVICE : CUBLASLT_POINTER_MODE_HOST;
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm));
    cublasLtMatrixLayout_t la, lb, lc, ld;
    CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, k, m, lda));
    CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, k, n, ldb));
    int32_t row = CUBLASLT_ORDER_ROW;
    CB(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof row));
    CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, ldc));
    CB(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd));
    set_batch(la, batch, sa);
    set_batch(lb, batch, sb);
    set_batch(lc, batch, sc);
    set_batch(ld, batch, sd);

    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = 1 << 20;
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t res[4];
    int nres = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 4, res, &nres));
    CHECK(nres == 1 && res[0].state == CUBLAS_STATUS_SUCCESS && res[0].workspaceSize <= ws, "heuristic: %d results", nres);
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 0, res, &nres) == CUBLAS_STATUS_INVALID_VALUE,
          "requestedAlgoCount 0 accepted");

    size_t nA = (size_t)(sa * batch), nB = (size_t)(sb * batch), nC = (size_t)(sc * batch), nD = (size_t)(sd * batch);
    uint16_t *hA = calloc(nA, 2), *hB = calloc(nB, 2);
    float *hC = calloc(nC, 4), *hD = calloc(nD, 4);
    for (int b = 0; b < batch; b++) {
        fill(hA, CUDA_R_16F, CUBLASLT_ORDER_COL, lda, k, m, b * sa, fa, b);   /* stored A is k x m */
        fill(hB, CUDA_R_16F, CUBLASLT_ORDER_ROW, ldb, k, n, b * sb, fb, b);
        fill(hC, CUDA_R_32F, CUBLASLT_ORDER_COL, ldc, m, n, b * sc, fc, b);
    }
    for (size_t i = 0; i < nD; i++) hD[i] = 12345.0f;
    void *dA = dev_alloc(nA * 2), *dB = dev_alloc(nB * 2), *dC = dev_alloc(nC * 4), *dD = dev_alloc(nD * 4);
    void *dWs = dev_alloc(ws);
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dA, hA, nA * 2));
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dB, hB, nB * 2));
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dC, hC, nC * 4));
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dD, hD, nD * 4));
    float scal[2] = {1.5f, -0.5f};
    const void *alpha = &scal[0], *beta = &scal[1];
    float *dScal = NULL;
    if (device_scalars) {
        dScal = dev_alloc(sizeof scal);
        CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dScal, scal, sizeof scal));
        alpha = dScal;
        beta = dScal + 1;
    }
    uint64_t c0 = emuGetCounter("cublaslt.matmul");
    CB(cublasLtMatmul(lt, desc, alpha, dA, la, dB, lb, beta, dC, lc, dD, ld, &res[0].algo, dWs, ws, (cudaStream_t)stream));
    CHECK(emuGetCounter("cublaslt.matmul") - c0 == 1, "cublaslt.matmul not counted");
    CU(cuStreamSynchronize(stream));
    CU(cuMemcpyDtoH(hD, (CUdeviceptr)(uintptr_t)dD, nD * 4));
    int bad = 0;
    for (int b = 0; b < batch && !bad; b++)
        for (int j = 0; j < n && !bad; j++) {
            for (int i = 0; i < m && !bad; i++) {
                double acc = 0;
                for (int l = 0; l < k; l++) acc += fa(l, i, b) * fb(l, j, b);
                double want = 1.5 * acc - 0.5 * fc(i, j, b), got = hD[b * sd + i + j * ldd];
                if (fabs(got - want) > 1e-4 * (1 + fabs(want))) {
                    CHECK(0, "%s matmul batch %d D(%d,%d) = %g want %g", device_scalars ? "device-scalar" : "host-scalar", b, i, j, got, want);
                    bad = 1;
                }
            }
            for (int i = m; i < ldd; i++)
                if (hD[b * sd + i + j * ldd] != 12345.0f) { CHECK(0, "matmul wrote D padding"); bad = 1; break; }
        }
    /* C stays untouched when D is separate */
    float *back = calloc(nC, 4);
    CU(cuMemcpyDtoH(back, (CUdeviceptr)(uintptr_t)dC, nC * 4));
    CHECK(memcmp(back, hC, nC * 4) == 0, "matmul modified C");
    free(back);

    /* invalid problems */
    cublasLtMatrixLayout_t wrong;
    CB(cublasLtMatrixLayoutCreate(&wrong, CUDA_R_32F, m + 1, n, m + 1));
    set_batch(wrong, batch, sd);
    CHECK(cublasLtMatmul(lt, desc, alpha, dA, la, dB, lb, beta, dC, lc, dD, wrong, NULL, NULL, 0, (cudaStream_t)stream) ==
          CUBLAS_STATUS_INVALID_VALUE, "D rows mismatch accepted");
    CHECK(cublasLtMatmul(NULL, desc, alpha, dA, la, dB, lb, beta, dC, lc, dD, ld, NULL, NULL, 0, (cudaStream_t)stream) ==
          CUBLAS_STATUS_NOT_INITIALIZED, "NULL handle accepted");
    CHECK(cublasLtMatmul(lt, desc, alpha, dA, la, dB, lb, beta, dC, lc, dD, ld, NULL, NULL, 64, (cudaStream_t)stream) ==
          CUBLAS_STATUS_INVALID_VALUE, "workspace size without workspace accepted");
    uint32_t relu_aux = CUBLASLT_EPILOGUE_RELU_AUX;   /* needs an auxiliary output: not emulated */
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu_aux, sizeof relu_aux));
    CHECK(cublasLtMatmul(lt, desc, alpha, dA, la, dB, lb, beta, dC, lc, dD, ld, NULL, NULL, 0, (cudaStream_t)stream) ==
          CUBLAS_STATUS_NOT_SUPPORTED, "RELU_AUX epilogue accepted");
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 1, res, &nres) == CUBLAS_STATUS_NOT_SUPPORTED && nres == 0,
          "heuristic for an unsupported epilogue");
    CU(cuStreamSynchronize(stream));

    CB(cublasLtMatrixLayoutDestroy(wrong));
    CB(cublasLtMatmulPreferenceDestroy(pref));
    CB(cublasLtMatrixLayoutDestroy(la));
    CB(cublasLtMatrixLayoutDestroy(lb));
    CB(cublasLtMatrixLayoutDestroy(lc));
    CB(cublasLtMatrixLayoutDestroy(ld));
    CB(cublasLtMatmulDescDestroy(desc));
    cuMemFree((CUdeviceptr)(uintptr_t)dA);
    cuMemFree((CUdeviceptr)(uintptr_t)dB);
    cuMemFree((CUdeviceptr)(uintptr_t)dC);
    cuMemFree((CUdeviceptr)(uintptr_t)dD);
    cuMemFree((CUdeviceptr)(uintptr_t)dWs);
    if (dScal) cuMemFree((CUdeviceptr)(uintptr_t)dScal);
    free(hA); free(hB); free(hC); free(hD);
}

/* Bias (per row of D, per batch through the bias batch stride), ReLU and GELU epilogues. */
static void test_epilogues(void)
{
    const int m = 5, n = 3, k = 2, batch = 2;
    const uint32_t epis[] = {CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_RELU_BIAS,
                             CUBLASLT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU_BIAS};
    float hA[5 * 2 * 2], hB[2 * 3 * 2], hBias[5 * 2], hD[5 * 3 * 2];
    for (int i = 0; i < m * k * batch; i++) hA[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < k * n * batch; i++) hB[i] = (float)(i % 4) - 1.5f;
    for (int i = 0; i < m * batch; i++) hBias[i] = (float)i - 4.0f;
    float *dA = dev_alloc(sizeof hA), *dB = dev_alloc(sizeof hB), *dBias = dev_alloc(sizeof hBias), *dD = dev_alloc(sizeof hD);
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dA, hA, sizeof hA));
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dB, hB, sizeof hB));
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dBias, hBias, sizeof hBias));
    cublasLtMatrixLayout_t la, lb, ld;
    CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
    CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k));
    CB(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
    set_batch(la, batch, m * k);
    set_batch(lb, batch, k * n);
    set_batch(ld, batch, m * n);
    float one = 1, zero = 0;
    for (size_t e = 0; e < sizeof epis / sizeof *epis; e++) {
        cublasLtMatmulDesc_t desc;
        CB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epis[e], sizeof epis[e]));
        int has_bias = (epis[e] & CUBLASLT_EPILOGUE_BIAS) != 0;
        if (has_bias) {
            CHECK(cublasLtMatmul(lt, desc, &one, dA, la, dB, lb, &zero, NULL, ld, dD, ld, NULL, NULL, 0, (cudaStream_t)stream) ==
                  CUBLAS_STATUS_INVALID_VALUE, "bias epilogue without a bias pointer accepted");
            const void *bp = dBias;
            int64_t bstride = m;
            CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp));
            CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bstride, sizeof bstride));
        }
        CB(cublasLtMatmul(lt, desc, &one, dA, la, dB, lb, &zero, NULL, ld, dD, ld, NULL, NULL, 0, (cudaStream_t)stream));
        CU(cuStreamSynchronize(stream));
        CU(cuMemcpyDtoH(hD, (CUdeviceptr)(uintptr_t)dD, sizeof hD));
        int bad = 0;
        for (int b = 0; b < batch && !bad; b++)
            for (int j = 0; j < n && !bad; j++)
                for (int i = 0; i < m && !bad; i++) {
                    double v = 0;
                    for (int l = 0; l < k; l++) v += hA[b * m * k + i + l * m] * hB[b * k * n + l + j * k];
                    if (has_bias) v += hBias[b * m + i];
                    if ((epis[e] & CUBLASLT_EPILOGUE_RELU) && v < 0) v = 0;
                    if (epis[e] & CUBLASLT_EPILOGUE_GELU) v = 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
                    double got = hD[b * m * n + i + j * m];
                    if (fabs(got - v) > 1e-5 * (1 + fabs(v))) {
                        CHECK(0, "epilogue %u batch %d D(%d,%d) = %g want %g", epis[e], b, i, j, got, v);
                        bad = 1;
                    }
                }
        CB(cublasLtMatmulDescDestroy(desc));
    }
    CB(cublasLtMatrixLayoutDestroy(la));
    CB(cublasLtMatrixLayoutDestroy(lb));
    CB(cublasLtMatrixLayoutDestroy(ld));
    cuMemFree((CUdeviceptr)(uintptr_t)dA);
    cuMemFree((CUdeviceptr)(uintptr_t)dB);
    cuMemFree((CUdeviceptr)(uintptr_t)dBias);
    cuMemFree((CUdeviceptr)(uintptr_t)dD);
}

/* In place (C == D), no C pointer needed when beta is 0, and fp16 output. */
static void test_inplace_half(void)
{
    const int m = 4, n = 4, k = 4;
    cublasLtMatmulDesc_t desc;
    CB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t l;
    CB(cublasLtMatrixLayoutCreate(&l, CUDA_R_16F, m, n, m));
    uint16_t h[16], out[16];
    for (int i = 0; i < 16; i++) h[i] = emu_float_to_half((float)(i % 4 == i / 4));   /* identity */
    uint16_t *dI = dev_alloc(sizeof h), *dX = dev_alloc(sizeof h);
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dI, h, sizeof h));
    for (int i = 0; i < 16; i++) h[i] = emu_float_to_half((float)i * 0.5f);
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dX, h, sizeof h));
    float one = 1, zero = 0, two = 2;
    uint16_t *dY = dev_alloc(sizeof h);
    CB(cublasLtMatmul(lt, desc, &one, dI, l, dX, l, &zero, NULL, l, dY, l, NULL, NULL, 0, (cudaStream_t)stream));
    CB(cublasLtMatmul(lt, desc, &one, dI, l, dX, l, &two, dY, l, dY, l, NULL, NULL, 0, (cudaStream_t)stream));
    CU(cuStreamSynchronize(stream));
    CU(cuMemcpyDtoH(out, (CUdeviceptr)(uintptr_t)dY, sizeof out));
    for (int i = 0; i < 16; i++)
        CHECK(emu_half_to_float(out[i]) == 1.5f * (float)i, "in-place half [%d] = %g", i, emu_half_to_float(out[i]));
    CHECK(cublasLtMatmul(lt, desc, &one, dI, l, dX, l, &two, NULL, l, dY, l, NULL, NULL, 0, (cudaStream_t)stream) ==
          CUBLAS_STATUS_INVALID_VALUE, "NULL C with beta != 0 accepted");
    (void)k;
    CB(cublasLtMatrixLayoutDestroy(l));
    CB(cublasLtMatmulDescDestroy(desc));
    cuMemFree((CUdeviceptr)(uintptr_t)dI);
    cuMemFree((CUdeviceptr)(uintptr_t)dX);
    cuMemFree((CUdeviceptr)(uintptr_t)dY);
}

int main(void)
{
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    CU(cuStreamCreate(&stream, CU_STREAM_DEFAULT));
    CB(cublasLtCreate(&lt));
    test_attributes();
    test_matmul(0);
    test_matmul(1);
    test_inplace_half();
    test_epilogues();
    CB(cublasLtDestroy(lt));
    CU(cuStreamDestroy(stream));
    if (failures) { printf("test_cublaslt_matmul: %d FAILED\n", failures); return 1; }
    printf("test_cublaslt_matmul: ok\n");
    return 0;
}
