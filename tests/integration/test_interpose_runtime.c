/* A small CUDA runtime program, linked against the real toolkit's
 * libcudart.so (versioned references), that checks its own results.
 * Standalone it is a plain emulator test; test_interpose_runtime.sh runs it
 * with and without LD_PRELOAD=libtrainshim.so and requires identical output
 * and the expected hook counts (TRAINSHIM_DEBUG_COUNTS).
 *
 * Covers: device selection, cudaMalloc (incl. size 0), pageable and pinned
 * copies (sync, async, 2D), the per-thread-default-stream twins
 * cudaMemcpy_ptds / cudaMemcpyAsync_ptsz, memset, stream-ordered
 * allocation, an error returned to the program, and threads calling hooks
 * concurrently (first calls race on the lazy real-function resolution). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The twins a --default-stream per-thread build calls; the header declares
 * them only in that mode. */
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                 cudaStream_t stream);

static int failures;
#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        printf("FAIL %s:%d: %s = %d\n", __FILE__, __LINE__, #call, (int)e_); failures++; } } while (0)
#define EXPECT(cond) do { if (!(cond)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

static uint64_t checksum(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

enum { THREADS = 4, ROUNDS = 50 };   /* test_interpose_runtime.sh counts on these */

/* Each thread: allocate, copy a thread-specific pattern there and back,
 * free; returns the number of mismatches. */
static void *thread_main(void *arg)
{
    uintptr_t id = (uintptr_t)arg, bad = 0;
    unsigned char in[4096], out[4096];
    if (cudaSetDevice(0) != cudaSuccess) return (void *)(uintptr_t)1;
    for (int r = 0; r < ROUNDS; r++) {
        memset(in, (int)(id * 16 + (uintptr_t)r), sizeof in);
        void *d = NULL;
        bad += cudaMalloc(&d, sizeof in) != cudaSuccess;
        bad += cudaMemcpy(d, in, sizeof in, cudaMemcpyHostToDevice) != cudaSuccess;
        bad += cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost) != cudaSuccess;
        bad += memcmp(in, out, sizeof in) != 0;
        bad += cudaFree(d) != cudaSuccess;
    }
    return (void *)bad;
}

int main(void)
{
    enum { N = 1 << 20 };
    /* threads first: their first calls race on resolving the real functions */
    pthread_t th[THREADS];
    for (uintptr_t t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, thread_main, (void *)t);
    uintptr_t thread_bad = 0;
    for (int t = 0; t < THREADS; t++) {
        void *r;
        pthread_join(th[t], &r);
        thread_bad += (uintptr_t)r;
    }
    EXPECT(thread_bad == 0);
    printf("threads: %d x %d roundtrips, %lu bad\n", THREADS, ROUNDS, (unsigned long)thread_bad);

    int count = 0, dev = -1;
    CHECK(cudaGetDeviceCount(&count));
    EXPECT(count >= 1);
    CHECK(cudaSetDevice(0));
    CHECK(cudaGetDevice(&dev));
    EXPECT(dev == 0);
    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("devices %d major %d\n", count, prop.major);

    unsigned char *pageable = malloc(N), *back = malloc(N), *pinned = NULL;
    for (size_t i = 0; i < N; i++) pageable[i] = (unsigned char)(i * 7 + 3);
    void *d1 = NULL, *d2 = NULL, *dz = (void *)1;
    CHECK(cudaMalloc(&d1, N));
    CHECK(cudaMalloc(&d2, N));
    CHECK(cudaMalloc(&dz, 0));
    EXPECT(dz == NULL);

    /* pageable sync copies */
    CHECK(cudaMemcpy(d1, pageable, N, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d2, d1, N, cudaMemcpyDeviceToDevice));
    memset(back, 0, N);
    CHECK(cudaMemcpy(back, d2, N, cudaMemcpyDeviceToHost));
    EXPECT(memcmp(back, pageable, N) == 0);
    printf("pageable roundtrip %016llx\n", (unsigned long long)checksum(back, N));

    /* pinned async copies on a stream */
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMallocHost((void **)&pinned, N));
    for (size_t i = 0; i < N; i++) pinned[i] = (unsigned char)(i * 13 + 1);
    CHECK(cudaMemcpyAsync(d1, pinned, N, cudaMemcpyHostToDevice, s));
    CHECK(cudaMemsetAsync(d2, 0x5a, N / 2, s));
    CHECK(cudaMemcpyAsync((char *)d2 + N / 2, d1, N / 2, cudaMemcpyDefault, s));
    CHECK(cudaStreamSynchronize(s));
    memset(pinned, 0, N);
    CHECK(cudaMemcpyAsync(pinned, d2, N, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    int ok = 1;
    for (size_t i = 0; i < N / 2; i++) ok &= pinned[i] == 0x5a && pinned[N / 2 + i] == (unsigned char)(i * 13 + 1);
    EXPECT(ok);
    printf("pinned async %016llx\n", (unsigned long long)checksum(pinned, N));

    /* per-thread default stream twins */
    CHECK(cudaMemcpy_ptds(d1, pageable, N, cudaMemcpyHostToDevice));
    memset(back, 0, N);
    CHECK(cudaMemcpyAsync_ptsz(back, d1, N, cudaMemcpyDeviceToHost, 0));
    CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    EXPECT(memcmp(back, pageable, N) == 0);
    printf("per-thread %016llx\n", (unsigned long long)checksum(back, N));

    /* 2D: 64 rows of 100 bytes out of a 256-byte pitch */
    CHECK(cudaMemcpy2D(d1, 128, pageable, 256, 100, 64, cudaMemcpyHostToDevice));
    memset(back, 0, N);
    CHECK(cudaMemcpy2D(back, 100, d1, 128, 100, 64, cudaMemcpyDeviceToHost));
    ok = 1;
    for (int r = 0; r < 64; r++) ok &= memcmp(back + r * 100, pageable + r * 256, 100) == 0;
    EXPECT(ok);
    printf("2d %016llx\n", (unsigned long long)checksum(back, 6400));

    /* stream-ordered allocation */
    void *da = NULL;
    CHECK(cudaMallocAsync(&da, 4096, s));
    CHECK(cudaMemsetAsync(da, 1, 4096, s));
    CHECK(cudaMemcpyAsync(back, da, 4096, cudaMemcpyDeviceToHost, s));
    CHECK(cudaFreeAsync(da, s));
    CHECK(cudaStreamSynchronize(s));
    ok = 1;
    for (int i = 0; i < 4096; i++) ok &= back[i] == 1;
    EXPECT(ok);

    /* an error returned to the program, unchanged by the shim */
    int bogus_on_stack;
    cudaError_t e = cudaFree(&bogus_on_stack);
    EXPECT(e != cudaSuccess);
    printf("free of a host pointer -> %d, last error %d\n", (int)e, (int)cudaGetLastError());

    CHECK(cudaFreeHost(pinned));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d1));
    CHECK(cudaFree(d2));
    CHECK(cudaFree(NULL));
    CHECK(cudaDeviceSynchronize());
    free(pageable);
    free(back);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
