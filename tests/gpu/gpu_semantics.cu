// gpu_semantics: real kernels produce and consume data on two racing streams
// around pageable copies, allocations and frees, the way a training step
// does; prints one checksum of everything the host saw, and how many kernels
// and copies it launched (for the CUPTI check).  Run with and without the
// shim, the output must be identical.
//
//   gpu_semantics [iterations] [max_mib]
//
// Per iteration: a fresh buffer A (cudaMalloc, size varies) is produced on
// stream 0; stream 1 waits for it and folds it into the accumulator B, copies
// A back to pageable memory and frees A (stream-ordered every other
// iteration, from cudaMallocAsync); stream 0 receives a pageable upload into C that the host
// overwrites as soon as cudaMemcpyAsync returns (legal: a pageable H2D has
// been staged by then), and folds C into B; a pageable D2H of B is read as
// soon as the call returns (legal: it is synchronous for the host).
#include "gpu_common.h"

__global__ void produce(uint32_t *a, int n, uint32_t seed)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { uint32_t x = (uint32_t)i * 2654435761u ^ seed; x ^= x >> 13; a[i] = x * 0x5bd1e995u; }
}
__global__ void fold(uint32_t *b, const uint32_t *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = (b[i] << 5 | b[i] >> 27) + a[i];
}

static void cpu_produce(void **args, const emu_launch *)
{
    uint32_t *a = ARG(uint32_t *, 0); int n = ARG(int, 1); uint32_t seed = ARG(uint32_t, 2);
    for (int i = 0; i < n; i++) { uint32_t x = (uint32_t)i * 2654435761u ^ seed; x ^= x >> 13; a[i] = x * 0x5bd1e995u; }
}
static void cpu_fold(void **args, const emu_launch *)
{
    uint32_t *b = ARG(uint32_t *, 0); const uint32_t *a = ARG(const uint32_t *, 1); int n = ARG(int, 2);
    for (int i = 0; i < n; i++) b[i] = (b[i] << 5 | b[i] >> 27) + a[i];
}

static void register_twins(void)
{
    gpu_reg_fn reg = emulator_register_fn();
    if (!reg) return;
    static const size_t pp[] = {8, 4, 4}, pf[] = {8, 8, 4};
    reg((const void *)produce, NULL, cpu_produce, 3, pp);
    reg((const void *)fold, NULL, cpu_fold, 3, pf);
}

static unsigned blocks(int n) { return (unsigned)((n + 255) / 256); }

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 24;
    size_t max = (argc > 2 ? strtoull(argv[2], NULL, 10) : 16) << 20;
    register_twins();
    CK(cudaSetDevice(0));
    cudaStream_t s0, s1;
    CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    cudaEvent_t produced, folded;
    CK(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&folded, cudaEventDisableTiming));
    int nmax = (int)(max / 4);
    uint32_t *b, *c;
    CK(cudaMalloc((void **)&b, max));
    CK(cudaMalloc((void **)&c, max));
    CK(cudaMemset(b, 0, max));
    CK(cudaDeviceSynchronize());
    uint32_t *up = (uint32_t *)malloc(max), *down = (uint32_t *)malloc(max), *seen = (uint32_t *)malloc(max);
    if (!up || !down || !seen) return 1;
    uint64_t h = FNV_INIT;
    long kernels = 0, h2d = 0, d2h = 0;
    unsigned long long h2d_bytes = 0, d2h_bytes = 0;
    for (int it = 0; it < iters; it++) {
        int n = nmax >> (it % 4);   // sizes vary: frees and allocations of different sizes interleave
        uint32_t *a;
        if (it % 2) CK(cudaMallocAsync((void **)&a, (size_t)n * 4, s0));   // stream-ordered pair
        else CK(cudaMalloc((void **)&a, (size_t)n * 4));
        produce<<<blocks(n), 256, 0, s0>>>(a, n, (uint32_t)it * 7919u);
        CK(cudaGetLastError());
        CK(cudaEventRecord(produced, s0));
        CK(cudaStreamWaitEvent(s1, produced, 0));
        fold<<<blocks(n), 256, 0, s1>>>(b, a, n);
        CK(cudaMemcpyAsync(seen, a, (size_t)n * 4, cudaMemcpyDeviceToHost, s1));
        kernels += 2; d2h++; d2h_bytes += (size_t)n * 4;
        h = fnv(h, seen, (size_t)n * 4);   // pageable D2H: complete when the call returns
        if (it % 2) CK(cudaFreeAsync(a, s1));
        else { CK(cudaStreamSynchronize(s1)); CK(cudaFree(a)); }
        CK(cudaEventRecord(folded, s1));
        for (int i = 0; i < n; i++) up[i] = (uint32_t)(i ^ it) * 40503u;
        CK(cudaStreamWaitEvent(s0, folded, 0));   // C is free: its last fold ran on s0 before
        CK(cudaMemcpyAsync(c, up, (size_t)n * 4, cudaMemcpyHostToDevice, s0));
        h2d++; h2d_bytes += (size_t)n * 4;
        memset(up, 0xA5, (size_t)n * 4);   // staged: the copy must still deliver the old contents
        fold<<<blocks(n), 256, 0, s0>>>(b, c, n);
        kernels++;
        CK(cudaEventRecord(folded, s0));
        CK(cudaStreamWaitEvent(s1, folded, 0));
    }
    CK(cudaMemcpyAsync(down, b, max, cudaMemcpyDeviceToHost, s1));
    d2h++; d2h_bytes += max;
    h = fnv(h, down, max);
    CK(cudaDeviceSynchronize());
    printf("checksum %016llx\n", (unsigned long long)h);
    printf("launched kernels=%ld produce=%d fold=%d h2d_copies=%ld d2h_copies=%ld h2d_bytes=%llu d2h_bytes=%llu\n",
           kernels, iters, 2 * iters, h2d, d2h, h2d_bytes, d2h_bytes);
    CK(cudaFree(b)); CK(cudaFree(c));
    free(up); free(down); free(seen);
    return 0;
}
