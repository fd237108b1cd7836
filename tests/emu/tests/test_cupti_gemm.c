/* test_cupti_gemm.c: emulated cuBLAS and cuBLASLt GEMMs are kernels the
 * emulated CUPTI reports, as on a GPU: one CONCURRENT_KERNEL record per GEMM
 * call, named like cuBLAS's kernels with "gemm", the A type and the
 * transposes in the name ("sm80_xmma_sgemm_..._nt" for GEMMs cuBLAS hands to
 * cuBLASLt, "ampere_sgemm_128x64_nn" for the pointer-array batches cuBLAS
 * computes itself), on the stream the handle was set to (cudaStreamGetId),
 * device 0, a distinct correlation id each, in stream order; the GEMMs still
 * compute the right result. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define EXPECT(c) do { if (!(c)) { fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)
#define REQUIRE(x) do { int rc_ = (int)(x); if (rc_) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, rc_); exit(1); } } while (0)

#define MAX_SEEN 64
static CUpti_ActivityKernel10 kernels[MAX_SEEN];
static char names[MAX_SEEN][128];
static int nkernels;
static __typeof__(&cuptiActivityGetNextRecord) next_record;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *size = 1 << 16;
    *buffer = aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx, (void)stream_id, (void)size;
    CUpti_Activity *rec = NULL;
    while (next_record(buffer, valid, &rec) == CUPTI_SUCCESS)
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && nkernels < MAX_SEEN) {
            kernels[nkernels] = *(CUpti_ActivityKernel10 *)rec;
            snprintf(names[nkernels], sizeof names[0], "%s", kernels[nkernels].name ? kernels[nkernels].name : "");
            nkernels++;
        }
    free(buffer);
}

int main(void)
{
    void *h = dlopen("libcupti.so.13", RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen libcupti.so.13: %s\n", dlerror()); return 1; }
    __typeof__(&cuptiActivityRegisterCallbacks) reg = (__typeof__(reg))dlsym(h, "cuptiActivityRegisterCallbacks");
    __typeof__(&cuptiActivityEnable) enable = (__typeof__(enable))dlsym(h, "cuptiActivityEnable");
    __typeof__(&cuptiActivityFlushAll) flush = (__typeof__(flush))dlsym(h, "cuptiActivityFlushAll");
    next_record = (__typeof__(next_record))dlsym(h, "cuptiActivityGetNextRecord");
    if (!reg || !enable || !flush || !next_record) { fprintf(stderr, "libcupti lacks an entry point\n"); return 1; }
    REQUIRE(reg(buffer_requested, buffer_completed));
    REQUIRE(enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));

    enum { N = 8 };
    float ha[N * N], hb[N * N], hc[N * N];
    for (int i = 0; i < N * N; i++) ha[i] = (float)(i % 5), hb[i] = (float)(i % 3) - 1;
    float *a, *b, *c, **arr;
    REQUIRE(cudaMalloc((void **)&a, sizeof ha));
    REQUIRE(cudaMalloc((void **)&b, sizeof hb));
    REQUIRE(cudaMalloc((void **)&c, 4 * sizeof hc));
    REQUIRE(cudaMalloc((void **)&arr, 6 * sizeof(float *)));
    float *harr[6] = {a, a, b, b, c, c + N * N};
    REQUIRE(cudaMemcpy(a, ha, sizeof ha, cudaMemcpyHostToDevice));
    REQUIRE(cudaMemcpy(b, hb, sizeof hb, cudaMemcpyHostToDevice));
    REQUIRE(cudaMemcpy(arr, harr, sizeof harr, cudaMemcpyHostToDevice));
    cudaStream_t s1, s2;
    REQUIRE(cudaStreamCreate(&s1));
    REQUIRE(cudaStreamCreate(&s2));
    unsigned long long id1 = 0, id2 = 0;
    REQUIRE(cudaStreamGetId(s1, &id1));
    REQUIRE(cudaStreamGetId(s2, &id2));
    cublasHandle_t hd;
    REQUIRE(cublasCreate(&hd));
    const float one = 1, zero = 0;
    REQUIRE(cublasSetStream(hd, s1));
    REQUIRE(cublasSgemm(hd, CUBLAS_OP_N, CUBLAS_OP_T, N, N, N, &one, a, N, b, N, &zero, c + 2 * N * N, N));
    REQUIRE(cublasGemmEx(hd, CUBLAS_OP_T, CUBLAS_OP_N, N, N, N, &one, a, CUDA_R_32F, N, b, CUDA_R_32F, N, &zero,
                         c + 3 * N * N, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    REQUIRE(cublasSetStream(hd, s2));
    REQUIRE(cublasSgemmBatched(hd, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, (const float *const *)arr, N,
                               (const float *const *)(arr + 2), N, &zero, arr + 4, N, 2));
    REQUIRE(cudaDeviceSynchronize());
    REQUIRE(cudaMemcpy(hc, c, sizeof hc, cudaMemcpyDeviceToHost));
    /* the batched GEMM's first matrix is A*B into c: one element against the CPU */
    float want = 0;
    for (int k = 0; k < N; k++) want += ha[3 + k * N] * hb[k + 5 * N];
    EXPECT(hc[3 + 5 * N] == want);
    REQUIRE(flush(0));

    EXPECT(nkernels == 3);
    /* two streams: records arrive in completion order; correlation ids are in issue order */
    for (int i = 1; i < nkernels; i++)
        for (int j = i; j > 0 && kernels[j].correlationId < kernels[j - 1].correlationId; j--) {
            CUpti_ActivityKernel10 t = kernels[j];
            kernels[j] = kernels[j - 1];
            kernels[j - 1] = t;
            char n[128];
            memcpy(n, names[j], sizeof n);
            memcpy(names[j], names[j - 1], sizeof n);
            memcpy(names[j - 1], n, sizeof n);
        }
    if (nkernels == 3) {
        EXPECT(!strcmp(names[0], "sm80_xmma_sgemm_128x128x32_stage3_warpsize2x2x1_nt"));
        EXPECT(!strcmp(names[1], "sm80_xmma_sgemm_128x128x32_stage3_warpsize2x2x1_tn"));
        EXPECT(!strcmp(names[2], "ampere_sgemm_128x64_nn"));
        EXPECT(kernels[0].streamId == id1 && kernels[1].streamId == id1 && kernels[2].streamId == id2);
        EXPECT(kernels[0].end <= kernels[1].start); /* one stream: in order */
        for (int i = 0; i < 3; i++) {
            EXPECT(strstr(names[i], "gemm") != NULL);
            EXPECT(kernels[i].deviceId == 0);
            EXPECT(kernels[i].correlationId != 0);
            EXPECT(kernels[i].start > 0 && kernels[i].start <= kernels[i].end);
            EXPECT(kernels[i].gridX >= 1 && kernels[i].blockX == 256);
            for (int j = 0; j < i; j++)
                EXPECT(kernels[i].correlationId != kernels[j].correlationId);
        }
        EXPECT(kernels[2].gridZ == 2); /* the batch */
    }
    REQUIRE(cublasDestroy(hd));
    if (failures) { fprintf(stderr, "test_cupti_gemm: %d failures\n", failures); return 1; }
    printf("test_cupti_gemm: ok\n");
    return 0;
}
