/* Training-step detection.  Two parts:
 *  - the period finder of the report (tools/report/report_compute.c, compiled in
 *    here) on synthetic shape sequences: exact periods, warm-up prefixes,
 *    trailing non-repeating work, no period at all;
 *  - a "training loop" for test_compute_steps.sh: one warm-up-only GEMM, then
 *    STEPS steps of three GEMM shapes with a pause of PAUSE_US after each, so
 *    the report must find STEPS steps of period 3 after one extra GEMM, each
 *    step at least PAUSE_US long. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <unistd.h>

#include "../../shim/core/rates.c" /* the report parses peaks with it */
#include "../../tools/read/logread.c"
#include "../../tools/report/report_compute.c"
#include "../../tools/report/report_spans.c" /* the step table asks it */
/* report_compute.c reads a log's CUPTI kernels for its GEMM times
 * (tools/report/report_gpu.c); the period finder tested here never gets there:
 * doubles that say "no CUPTI records". */
int gpu_load(const struct tslog *log, struct gpu_data *d)
{
    (void)log;
    memset(d, 0, sizeof *d);
    return -1;
}
void gpu_free(struct gpu_data *d) { memset(d, 0, sizeof *d); }
long gpu_match_gemms(const struct tslog *log, const struct gpu_data *d, uint64_t *gpu_ns)
{
    (void)log, (void)d, (void)gpu_ns;
    return -1;
}

enum { STEPS = 6, PAUSE_US = 3000 };

static int failures;
#define EXPECT(cond) do { if (!(cond)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

static void period_case(const char *pattern, size_t want_p, size_t want_start, size_t want_end)
{
    uint64_t seq[256];
    size_t n = strlen(pattern), a = 99, e = 99;
    for (size_t i = 0; i < n; i++)
        seq[i] = (uint64_t)(unsigned char)pattern[i];
    size_t p = acct_find_period(seq, n, &a, &e);
    if (p != want_p || (p && (a != want_start || e != want_end))) {
        printf("FAIL: period of \"%s\" = %zu [%zu, %zu), want %zu [%zu, %zu)\n", pattern, p, a, e, want_p,
               want_start, want_end);
        failures++;
    }
}

static void synthetic(void)
{
    period_case("ABCABCABCABC", 3, 0, 12);
    period_case("XABCABCABCABC", 3, 1, 13);          /* warm-up GEMM before the loop */
    period_case("ABABABABZZZQ", 2, 0, 8);            /* evaluation work after the loop */
    period_case("AAAAAAAA", 1, 0, 8);
    period_case("ABCDEFGH", 0, 0, 0);                /* nothing repeats */
    period_case("ABCDABCE", 0, 0, 0);                /* one repetition is not a loop */
    period_case("AABAABAABAAB", 3, 0, 12);           /* not fooled by the AA pairs */
    period_case("WWABCDABCDABCDABCD", 4, 2, 18);
    /* a long loop: the scan is bounded, the stretch still reaches the end */
    static uint64_t big[200000];
    for (size_t i = 0; i < 200000; i++)
        big[i] = 1 + i % 7;
    size_t a = 0, e = 0;
    EXPECT(acct_find_period(big, 200000, &a, &e) == 7 && a == 0 && e == 200000);
    EXPECT(acct_find_period(big, 0, &a, &e) == 0);
}

int main(void)
{
    synthetic();
    EXPECT(cudaSetDevice(0) == cudaSuccess);
    float *A, *B, *C;
    EXPECT(cudaMalloc((void **)&A, 64 * 64 * 4) == cudaSuccess);
    EXPECT(cudaMalloc((void **)&B, 64 * 64 * 4) == cudaSuccess);
    EXPECT(cudaMalloc((void **)&C, 64 * 64 * 4) == cudaSuccess);
    EXPECT(cudaMemset(A, 0, 64 * 64 * 4) == cudaSuccess);
    EXPECT(cudaMemset(B, 0, 64 * 64 * 4) == cudaSuccess);
    cublasHandle_t h;
    EXPECT(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    const float one = 1, zero = 0;
    const cublasOperation_t N = CUBLAS_OP_N;
    /* warm-up only: a shape the loop never uses */
    EXPECT(cublasSgemm(h, N, N, 32, 32, 32, &one, A, 64, B, 64, &zero, C, 64) == CUBLAS_STATUS_SUCCESS);
    for (int s = 0; s < STEPS; s++) {
        EXPECT(cublasSgemm(h, N, N, 16, 8, 4, &one, A, 64, B, 64, &zero, C, 64) == CUBLAS_STATUS_SUCCESS);
        EXPECT(cublasSgemm(h, N, N, 8, 16, 4, &one, A, 64, B, 64, &zero, C, 64) == CUBLAS_STATUS_SUCCESS);
        EXPECT(cublasSgemm(h, CUBLAS_OP_T, N, 8, 8, 16, &one, A, 64, B, 64, &zero, C, 64) == CUBLAS_STATUS_SUCCESS);
        EXPECT(cudaDeviceSynchronize() == cudaSuccess);
        usleep(PAUSE_US);
    }
    EXPECT(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    printf("steps %d pause_us %d step_flops %d\n", STEPS, PAUSE_US, 2 * (16 * 8 * 4 + 8 * 16 * 4 + 8 * 8 * 16));
    return failures ? 1 : 0;
}
