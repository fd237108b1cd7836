/* test_devmem_ptds: stream-ordered allocation on per-thread default streams
 * (run by test_devmem_ptds.sh without and under the shim).  cudaStreamPerThread
 * is one handle but a different stream in every thread: memory freed on
 * thread A's stream behind a kernel that writes it late must not be handed
 * to thread B's stream before that kernel ran (CUDA orders nothing between
 * the two streams).  Thread B fills its allocation, waits until A's kernel
 * is surely over, and reads it back: every byte must be B's.  Rounds
 * alternate the explicit handle and the _ptsz entry points with stream 0;
 * each pair of threads is new (a thread's stream dies with it).  A thread
 * also reuses its own frees on its own stream. stdout must be identical
 * with and without the shim. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "emu/emu.h"

#include "check.h"

/* what nvcc --default-stream per-thread makes of cudaMallocAsync/cudaFreeAsync */
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);

#define BYTES ((size_t)4 << 20) /* the per-thread caches' largest */
#define ROUNDS 8
#define PAIRS 3

static int bad, own_reuse;

static char late_fill_id;
static void late_fill_impl(void **args, const emu_launch *l)
{
    (void)l;
    unsigned char *buf = *(unsigned char **)args[0];
    size_t n = *(size_t *)args[1];
    usleep(4000);
    memset(buf, 0xAA, n);
}

static pthread_barrier_t bar;

static cudaError_t alloc_on_own(void **p, size_t n, int round)
{
    return round % 2 ? cudaMallocAsync_ptsz(p, n, 0) : cudaMallocAsync(p, n, cudaStreamPerThread);
}

static cudaError_t free_on_own(void *p, int round)
{
    return round % 2 ? cudaFreeAsync_ptsz(p, 0) : cudaFreeAsync(p, cudaStreamPerThread);
}

/* Rounds alternate a block above and below the per-thread caches' 4 MiB. */
static size_t round_bytes(int round) { return round % 4 < 2 ? BYTES + ((size_t)2 << 20) : BYTES / 4; }

/* A: a late kernel on its stream writes x, then x is freed there. */
static void *thread_a(void *arg)
{
    (void)arg;
    for (int round = 0; round < ROUNDS; round++) {
        void *x = NULL, *again = NULL;
        size_t n = round_bytes(round);
        CHECK(alloc_on_own(&x, n, round) == cudaSuccess, "A alloc %d", round);
        void *args[] = { &x, &n };
        dim3 one = { 1, 1, 1 };
        CHECK(cudaLaunchKernel(&late_fill_id, one, one, args, 0, cudaStreamPerThread) == cudaSuccess, "A kernel");
        CHECK(free_on_own(x, round) == cudaSuccess, "A free %d", round);
        pthread_barrier_wait(&bar); /* B allocates now */
        pthread_barrier_wait(&bar); /* B has read */
        CHECK(cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess, "A sync");
        /* the same thread's stream takes its free back at once (stream order) */
        CHECK(alloc_on_own(&x, n, round) == cudaSuccess, "A own %d", round);
        CHECK(free_on_own(x, round) == cudaSuccess, "A free own %d", round);
        CHECK(alloc_on_own(&again, n, round) == cudaSuccess, "A again %d", round);
        if (again == x)
            __atomic_add_fetch(&own_reuse, 1, __ATOMIC_RELAXED);
        CHECK(free_on_own(again, round) == cudaSuccess, "A free again %d", round);
        CHECK(cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess, "A sync again");
    }
    return NULL;
}

/* B: allocates on its own stream while A's kernel may still run. */
static void *thread_b(void *arg)
{
    unsigned char *host = arg;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_wait(&bar);
        void *y = NULL;
        size_t n = round_bytes(round);
        CHECK(alloc_on_own(&y, n, round) == cudaSuccess, "B alloc %d", round);
        CHECK(cudaMemsetAsync(y, 0x11, n, cudaStreamPerThread) == cudaSuccess, "B fill");
        CHECK(cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess, "B sync");
        usleep(10000); /* A's kernel is over: a late write has landed */
        CHECK(cudaMemcpy(host, y, n, cudaMemcpyDeviceToHost) == cudaSuccess, "B read");
        for (size_t i = 0; i < n; i += 4093)
            if (host[i] != 0x11)
                __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
        CHECK(free_on_own(y, round) == cudaSuccess, "B free %d", round);
        CHECK(cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess, "B sync after free");
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

int main(void)
{
    size_t sizes[2] = { sizeof(void *), sizeof(size_t) };
    if (emuRegisterKernel(&late_fill_id, NULL, late_fill_impl, 2, sizes) != 0) {
        printf("FAIL: emuRegisterKernel\n");
        return 1;
    }
    static unsigned char host[BYTES + ((size_t)2 << 20)];
    CHECK(cudaSetDevice(0) == cudaSuccess && cudaFree(0) == cudaSuccess, "context");
    for (int pair = 0; pair < PAIRS; pair++) {
        pthread_barrier_init(&bar, NULL, 2);
        pthread_t a, b;
        pthread_create(&a, NULL, thread_a, NULL);
        pthread_create(&b, NULL, thread_b, host);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        pthread_barrier_destroy(&bar);
    }
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "device");
    printf("per-thread streams: %d pairs of threads, %d rounds each, %d bytes of another thread's stream seen, "
           "%d frees taken back at once by their own stream\n",
           PAIRS, ROUNDS, bad, own_reuse);
    return failures ? 1 : 0;
}
