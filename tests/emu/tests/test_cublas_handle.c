/* Emulated cuBLAS handles and ordering: the default workspace allocated
 * through the driver, stream / workspace / math / pointer modes and their
 * checks, versions and status strings; GEMMs run in stream order (not before
 * earlier work, result visible only after the stream's sync, after an async
 * H2D copy), alpha/beta read at the call in host pointer mode and when the
 * GEMM runs in device pointer mode; Sgemm reaches cublasLtMatmul; the
 * Set/Get Matrix/Vector copies. */
#include <cublas_v2.h>
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "emu.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { fprintf(stderr, "%s = %d\n", #x, (int)r_); exit(2); } } while (0)
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s = %d\n", #x, (int)s_); exit(3); } } while (0)

static CUstream stream;

static void *dev_alloc(size_t n)
{
    CUdeviceptr p;
    CU(cuMemAlloc(&p, n));
    return (void *)(uintptr_t)p;
}

/* A synchronous pageable H2D copy returns once the data is staged; the
 * legacy stream finishes it, and our stream is non-blocking (it must not wait
 * for the legacy stream in the gate test), so wait for the copy explicitly. */
static void upload(void *dst, const void *src, size_t n)
{
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, n));
    CU(cuStreamSynchronize(NULL));
}

/* A host function that holds the stream until the test opens the gate, then
 * optionally stores a value into device memory (as a kernel would). */
struct gate { int open; float *store_to; float value; };
static void CUDA_CB gate_fn(void *arg)
{
    struct gate *g = arg;
    for (int i = 0; i < 10000 && !__atomic_load_n(&g->open, __ATOMIC_ACQUIRE); i++) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (g->store_to) *g->store_to = g->value;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, ms * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static void test_handle_basics(void)
{
    uint64_t allocs = emuGetCounter("calls.cuMemAlloc_v2");
    cublasHandle_t h;
    CB(cublasCreate(&h));
    CHECK(emuGetCounter("calls.cuMemAlloc_v2") > allocs, "cublasCreate did not allocate its workspace through the driver");
    int v = 0;
    CB(cublasGetVersion(h, &v));
    CHECK(v == CUBLAS_VERSION, "version %d", v);
    CHECK(strcmp(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE") == 0, "status name");
    CHECK(strcmp(cublasGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED), "the functionality requested is not supported") == 0,
          "status string");
    cudaStream_t got = (cudaStream_t)1;
    CB(cublasGetStream(h, &got));
    CHECK(got == NULL, "default stream is %p", (void *)got);
    CB(cublasSetStream(h, (cudaStream_t)stream));
    CB(cublasGetStream(h, &got));
    CHECK(got == (cudaStream_t)stream, "stream not kept");
    cublasMath_t mm;
    CB(cublasGetMathMode(h, &mm));
    CHECK(mm == CUBLAS_DEFAULT_MATH, "default math mode %d", (int)mm);
    CB(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
    CB(cublasGetMathMode(h, &mm));
    CHECK(mm == CUBLAS_TF32_TENSOR_OP_MATH, "math mode %d", (int)mm);
    CHECK(cublasSetMathMode(h, (cublasMath_t)99) == CUBLAS_STATUS_INVALID_VALUE, "math mode 99 accepted");
    cublasPointerMode_t pm;
    CB(cublasGetPointerMode(h, &pm));
    CHECK(pm == CUBLAS_POINTER_MODE_HOST, "default pointer mode");
    CHECK(cublasSetPointerMode(h, (cublasPointerMode_t)5) == CUBLAS_STATUS_INVALID_VALUE, "pointer mode 5 accepted");
    char *ws = dev_alloc(1 << 20);
    CHECK(cublasSetWorkspace(h, ws + 8, 4096) == CUBLAS_STATUS_INVALID_VALUE, "misaligned workspace accepted");
    CU(cuMemsetD8((CUdeviceptr)(uintptr_t)ws, 0xab, 1 << 20));
    CU(cuStreamSynchronize(NULL));
    CB(cublasSetWorkspace(h, ws, 1 << 20));
    CHECK(cublasCreate(NULL) == CUBLAS_STATUS_INVALID_VALUE, "cublasCreate(NULL)");
    CHECK(cublasSetStream(NULL, NULL) == CUBLAS_STATUS_NOT_INITIALIZED, "SetStream(NULL handle)");

    /* GEMMs work with the user's workspace; Sgemm is a nested cublasLtMatmul, SgemmBatched is not */
    float *d = dev_alloc(4 * sizeof(float)), one = 1, zero = 0, hd[4] = {1, 2, 3, 4};
    upload(d, hd, sizeof hd);
    float **arr = dev_alloc(3 * sizeof(float *)), *harr[3] = {d, d, d};
    upload(arr, harr, sizeof harr);
    float *out = dev_alloc(4 * sizeof(float));
    uint64_t g0 = emuGetCounter("cublas.gemm"), lt0 = emuGetCounter("cublaslt.matmul");
    CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, 2, d, 2, &zero, out, 2));
    CHECK(emuGetCounter("cublas.gemm") - g0 == 1 && emuGetCounter("cublaslt.matmul") - lt0 == 1,
          "Sgemm: cublas.gemm +%llu cublaslt.matmul +%llu", (unsigned long long)(emuGetCounter("cublas.gemm") - g0),
          (unsigned long long)(emuGetCounter("cublaslt.matmul") - lt0));
    CU(cuStreamSynchronize(stream));
    CU(cuMemcpyDtoH(hd, (CUdeviceptr)(uintptr_t)out, sizeof hd));
    CHECK(hd[0] == 7 && hd[1] == 10 && hd[2] == 15 && hd[3] == 22, "2x2 square = %g %g %g %g", hd[0], hd[1], hd[2], hd[3]);
    /* the user's workspace is really used (as scratch) by the GEMM it was given to */
    unsigned char probe[64];
    CU(cuMemcpyDtoH(probe, (CUdeviceptr)(uintptr_t)ws, sizeof probe));
    int touched = 0;
    for (size_t i = 0; i < sizeof probe; i++) touched |= probe[i] != 0xab;
    CHECK(touched, "the GEMM did not use the workspace set by cublasSetWorkspace");
    CB(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, (const float *const *)arr, 2,
                          (const float *const *)arr, 2, &zero, (float *const *)arr, 2, 0));
    CHECK(emuGetCounter("cublaslt.matmul") - lt0 == 1, "pointer-array batch went through cublasLt");
    CU(cuStreamSynchronize(stream));
    CB(cublasDestroy(h));
    cuMemFree((CUdeviceptr)(uintptr_t)ws);
    cuMemFree((CUdeviceptr)(uintptr_t)d);
    cuMemFree((CUdeviceptr)(uintptr_t)out);
    cuMemFree((CUdeviceptr)(uintptr_t)arr);
}

/* Identity times B: C must equal alpha * B. */
static void test_stream_order(void)
{
    cublasHandle_t h;
    CB(cublasCreate(&h));
    CB(cublasSetStream(h, (cudaStream_t)stream));
    const int n = 32;
    size_t bytes = (size_t)n * n * sizeof(float);
    float *hA, *hB, *hC;
    CU(cuMemAllocHost((void **)&hA, bytes));
    CU(cuMemAllocHost((void **)&hB, bytes));
    CU(cuMemAllocHost((void **)&hC, bytes));
    for (int i = 0; i < n * n; i++) { hA[i] = (i % (n + 1)) == 0 ? 1.0f : 0.0f; hB[i] = (float)i; hC[i] = -1; }
    float *dA = dev_alloc(bytes), *dB = dev_alloc(bytes), *dC = dev_alloc(bytes);
    upload(dC, hC, bytes);

    /* 1. the GEMM sees data of async copies queued before it, and a copy queued after sees its result */
    float alpha = 2, beta = 0;
    CU(cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dA, hA, bytes, stream));
    CU(cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dB, hB, bytes, stream));
    CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, dA, n, dB, n, &beta, dC, n));
    alpha = 100;                     /* host pointer mode: the value at the call counts */
    CU(cuMemcpyDtoHAsync(hC, (CUdeviceptr)(uintptr_t)dC, bytes, stream));
    CU(cuStreamSynchronize(stream));
    for (int i = 0; i < n * n; i++)
        if (hC[i] != 2.0f * (float)i) { CHECK(0, "ordered GEMM C[%d] = %g", i, hC[i]); break; }

    /* 2. behind a held stream the GEMM has not run; after the sync its result is there */
    struct gate g = {0, NULL, 0};
    CU(cuLaunchHostFunc(stream, gate_fn, &g));
    alpha = 3;
    CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, dA, n, dB, n, &beta, dC, n));
    sleep_ms(20);
    CU(cuMemcpyDtoH(hC, (CUdeviceptr)(uintptr_t)dC, bytes));   /* legacy-stream copy: does not wait for a non-blocking stream */
    CHECK(hC[5] == 10.0f, "GEMM ran before the work queued ahead of it (C[5] = %g)", hC[5]);
    __atomic_store_n(&g.open, 1, __ATOMIC_RELEASE);
    CU(cuStreamSynchronize(stream));
    CU(cuMemcpyDtoH(hC, (CUdeviceptr)(uintptr_t)dC, bytes));
    for (int i = 0; i < n * n; i++)
        if (hC[i] != 3.0f * (float)i) { CHECK(0, "after sync C[%d] = %g", i, hC[i]); break; }

    /* 3. device pointer mode: alpha is read when the GEMM runs (written by work queued before it) */
    float *dScal = dev_alloc(2 * sizeof(float)), scal[2] = {5, 0};
    upload(dScal, scal, sizeof scal);
    CB(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
    struct gate g2 = {1, dScal, 7.0f};
    CU(cuLaunchHostFunc(stream, gate_fn, &g2));
    CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, dScal, dA, n, dB, n, dScal + 1, dC, n));
    CU(cuStreamSynchronize(stream));
    CU(cuMemcpyDtoH(hC, (CUdeviceptr)(uintptr_t)dC, bytes));
    for (int i = 0; i < n * n; i++)
        if (hC[i] != 7.0f * (float)i) { CHECK(0, "device pointer mode C[%d] = %g (want alpha 7)", i, hC[i]); break; }
    CB(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));

    CB(cublasDestroy(h));
    cuMemFree((CUdeviceptr)(uintptr_t)dA);
    cuMemFree((CUdeviceptr)(uintptr_t)dB);
    cuMemFree((CUdeviceptr)(uintptr_t)dC);
    cuMemFree((CUdeviceptr)(uintptr_t)dScal);
    cuMemFreeHost(hA);
    cuMemFreeHost(hB);
    cuMemFreeHost(hC);
}

/* Set/GetMatrix and Set/GetVector: strided copies both ways, sync and on a stream. */
static void test_copies(void)
{
    enum { R = 5, C = 4, LDA = 7, LDB = 6 };
    double hA[LDA * C], back[LDA * C];
    for (int i = 0; i < LDA * C; i++) { hA[i] = i + 0.5; back[i] = -1; }
    double *d = dev_alloc(LDB * C * sizeof(double));
    CB(cublasSetMatrix(R, C, sizeof(double), hA, LDA, d, LDB));
    CB(cublasGetMatrix_64(R, C, sizeof(double), d, LDB, back, LDA));
    for (int j = 0; j < C; j++)
        for (int i = 0; i < LDA; i++)
            CHECK(back[i + j * LDA] == (i < R ? hA[i + j * LDA] : -1), "GetMatrix (%d,%d) = %g", i, j, back[i + j * LDA]);
    float hx[12], hy[12];
    for (int i = 0; i < 12; i++) { hx[i] = (float)i; hy[i] = -1; }
    float *dv = dev_alloc(12 * sizeof(float));
    CB(cublasSetVectorAsync(4, sizeof(float), hx, 3, dv, 2, (cudaStream_t)stream));   /* x[0,3,6,9] -> y[0,2,4,6] */
    CB(cublasGetVectorAsync(4, sizeof(float), dv, 2, hy, 1, (cudaStream_t)stream));
    CU(cuStreamSynchronize(stream));
    for (int i = 0; i < 4; i++) CHECK(hy[i] == (float)(3 * i), "strided vector [%d] = %g", i, hy[i]);
    CHECK(hy[4] == -1, "GetVector wrote past n");
    CHECK(cublasSetMatrix(R, C, sizeof(double), hA, R - 1, d, LDB) == CUBLAS_STATUS_INVALID_VALUE, "lda < rows accepted");
    CHECK(cublasSetVector(4, sizeof(float), hx, 0, dv, 1) == CUBLAS_STATUS_INVALID_VALUE, "incx 0 accepted");
    CHECK(cublasGetVector(4, 0, dv, 1, hy, 1) == CUBLAS_STATUS_INVALID_VALUE, "elemSize 0 accepted");
    cuMemFree((CUdeviceptr)(uintptr_t)d);
    cuMemFree((CUdeviceptr)(uintptr_t)dv);
}

int main(void)
{
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    test_handle_basics();
    test_stream_order();
    test_copies();
    CU(cuStreamDestroy(stream));
    if (failures) { printf("test_cublas_handle: %d FAILED\n", failures); return 1; }
    printf("test_cublas_handle: ok\n");
    return 0;
}
