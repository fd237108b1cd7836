// mlp_train: a small but real training job written against the CUDA runtime
// and cuBLAS the way a framework without its own caching allocator would: a
// two-layer MLP (in -> hidden, ReLU, hidden -> out) trained with SGD on a
// synthetic regression task (targets from a fixed random "teacher" network).
//
// Every step cudaMalloc()s its activations and gradients and cudaFree()s them
// at the end, copies the batch host->device from pageable memory, copies the
// loss device->host, and prints it.  GEMMs go through cuBLAS; the elementwise
// work is real CUDA kernels.  It runs unchanged on a GPU or on trainshim's
// emulator, where the kernels' CPU implementations are registered through
// emu.h (found with dlsym, so nothing is required on a real GPU).
//
// Usage: mlp_train [steps] [batch]      Output: one "step N loss X" line per
// step and a final "weights checksum" line (bit-exact, for differential tests).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

#define IN 64
#define HID 256
#define OUT 16

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "mlp_train: %s failed: %s (%d) at line %d\n", #call, cudaGetErrorString(e_), (int)e_, __LINE__); \
    exit(1); } } while (0)
#define CHECK_BLAS(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "mlp_train: %s failed: %d at line %d\n", #call, (int)s_, __LINE__); exit(1); } } while (0)

// ---------------------------------------------------------------- kernels
__global__ void add_bias_relu(float *x, const float *b, int rows, int cols)
{   // x is rows x cols column-major; b has rows entries
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) { float v = x[i] + b[i % rows]; x[i] = v > 0.f ? v : 0.f; }
}
__global__ void add_bias(float *x, const float *b, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) x[i] += b[i % rows];
}
// d = (y - t) * 2/n; loss[0] = sum((y - t)^2) / n  (one block reduces, for determinism)
__global__ void mse_grad(const float *y, const float *t, float *d, float *loss, int n)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    float s = 0.f;
    for (int i = 0; i < n; i++) { float e = y[i] - t[i]; d[i] = 2.f * e / n; s += e * e; }
    loss[0] = s / n;
}
__global__ void relu_backward(float *d, const float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && a[i] <= 0.f) d[i] = 0.f;
}
// gb[r] = sum over columns of d[r, :]
__global__ void bias_grad(const float *d, float *gb, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) { float s = 0.f; for (int c = 0; c < cols; c++) s += d[r + c * rows]; gb[r] = s; }
}
__global__ void sgd(float *w, const float *g, float lr, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) w[i] -= lr * g[i];
}

// ------------------------------------------- CPU implementations (emulator)
#define ARG(T, i) (*(T *)args[i])
static void cpu_add_bias_relu(void **args, const emu_launch *)
{
    float *x = ARG(float *, 0); const float *b = ARG(const float *, 1);
    int rows = ARG(int, 2), cols = ARG(int, 3);
    for (int i = 0; i < rows * cols; i++) { float v = x[i] + b[i % rows]; x[i] = v > 0.f ? v : 0.f; }
}
static void cpu_add_bias(void **args, const emu_launch *)
{
    float *x = ARG(float *, 0); const float *b = ARG(const float *, 1);
    int rows = ARG(int, 2), cols = ARG(int, 3);
    for (int i = 0; i < rows * cols; i++) x[i] += b[i % rows];
}
static void cpu_mse_grad(void **args, const emu_launch *)
{
    const float *y = ARG(const float *, 0), *t = ARG(const float *, 1);
    float *d = ARG(float *, 2), *loss = ARG(float *, 3); int n = ARG(int, 4);
    float s = 0.f;
    for (int i = 0; i < n; i++) { float e = y[i] - t[i]; d[i] = 2.f * e / n; s += e * e; }
    loss[0] = s / n;
}
static void cpu_relu_backward(void **args, const emu_launch *)
{
    float *d = ARG(float *, 0); const float *a = ARG(const float *, 1); int n = ARG(int, 2);
    for (int i = 0; i < n; i++) if (a[i] <= 0.f) d[i] = 0.f;
}
static void cpu_bias_grad(void **args, const emu_launch *)
{
    const float *d = ARG(const float *, 0); float *gb = ARG(float *, 1);
    int rows = ARG(int, 2), cols = ARG(int, 3);
    for (int r = 0; r < rows; r++) { float s = 0.f; for (int c = 0; c < cols; c++) s += d[r + c * rows]; gb[r] = s; }
}
static void cpu_sgd(void **args, const emu_launch *)
{
    float *w = ARG(float *, 0); const float *g = ARG(const float *, 1);
    float lr = ARG(float, 2); int n = ARG(int, 3);
    for (int i = 0; i < n; i++) w[i] -= lr * g[i];
}

// Registers the CPU implementations when the emulator answers; on a real GPU
// libcuda.so.1 has no emuRegisterKernel and nothing happens.
static void register_emulated_kernels(void)
{
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!drv) drv = dlopen("libcuda.so.1", RTLD_LAZY);
    if (!drv) return;
    typedef int (*reg_fn)(const void *, const char *, emu_kernel_fn, int, const size_t *);
    reg_fn reg = (reg_fn)dlsym(drv, "emuRegisterKernel");
    if (!reg) return;
    static const size_t p4[] = {8, 8, 4, 4}, p5[] = {8, 8, 8, 8, 4}, p3[] = {8, 8, 4};
    static const size_t psgd[] = {8, 8, 4, 4};
    reg((const void *)add_bias_relu, NULL, cpu_add_bias_relu, 4, p4);
    reg((const void *)add_bias, NULL, cpu_add_bias, 4, p4);
    reg((const void *)mse_grad, NULL, cpu_mse_grad, 5, p5);
    reg((const void *)relu_backward, NULL, cpu_relu_backward, 3, p3);
    reg((const void *)bias_grad, NULL, cpu_bias_grad, 4, p4);
    reg((const void *)sgd, NULL, cpu_sgd, 4, psgd);
}

// ---------------------------------------------------------------- host side
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void)   // deterministic uniform in [-1, 1)
{
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

static float *device_init(int n, float scale)
{
    float *h = (float *)malloc(n * sizeof(float)), *d;
    for (int i = 0; i < n; i++) h[i] = frand() * scale;
    CHECK(cudaMalloc((void **)&d, n * sizeof(float)));
    CHECK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    free(h);
    return d;
}

static unsigned blocks(int n) { return (unsigned)((n + 255) / 256); }

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 30;
    int batch = argc > 2 ? atoi(argv[2]) : 512;
    const float lr = 1.0f;
    register_emulated_kernels();

    cublasHandle_t blas;
    CHECK_BLAS(cublasCreate(&blas));
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    CHECK_BLAS(cublasSetStream(blas, stream));

    // teacher (host) and student (device) parameters
    float teacher_w[OUT * IN];
    for (int i = 0; i < OUT * IN; i++) teacher_w[i] = frand() * 0.5f;
    float *w1 = device_init(HID * IN, 0.125f), *b1 = device_init(HID, 0.0f);
    float *w2 = device_init(OUT * HID, 0.0625f), *b2 = device_init(OUT, 0.0f);

    // pageable host batch buffers, refilled every step
    float *hx = (float *)malloc(sizeof(float) * IN * batch);
    float *ht = (float *)malloc(sizeof(float) * OUT * batch);
    const float one = 1.f, zero = 0.f;

    for (int step = 0; step < steps; step++) {
        for (int c = 0; c < batch; c++) {
            for (int i = 0; i < IN; i++) hx[i + c * IN] = frand();
            for (int o = 0; o < OUT; o++) {
                float s = 0.f;
                for (int i = 0; i < IN; i++) s += teacher_w[o + i * OUT] * hx[i + c * IN];
                ht[o + c * OUT] = s > 0.f ? s : 0.1f * s;
            }
        }
        float *x, *t, *h, *y, *dy, *dh, *gw1, *gb1, *gw2, *gb2, *loss;
        CHECK(cudaMalloc((void **)&x, sizeof(float) * IN * batch));
        CHECK(cudaMalloc((void **)&t, sizeof(float) * OUT * batch));
        CHECK(cudaMalloc((void **)&h, sizeof(float) * HID * batch));
        CHECK(cudaMalloc((void **)&y, sizeof(float) * OUT * batch));
        CHECK(cudaMalloc((void **)&dy, sizeof(float) * OUT * batch));
        CHECK(cudaMalloc((void **)&dh, sizeof(float) * HID * batch));
        CHECK(cudaMalloc((void **)&gw1, sizeof(float) * HID * IN));
        CHECK(cudaMalloc((void **)&gb1, sizeof(float) * HID));
        CHECK(cudaMalloc((void **)&gw2, sizeof(float) * OUT * HID));
        CHECK(cudaMalloc((void **)&gb2, sizeof(float) * OUT));
        CHECK(cudaMalloc((void **)&loss, sizeof(float)));
        // pageable host -> device: the call returns once the source is staged,
        // so refilling hx next step is safe
        CHECK(cudaMemcpyAsync(x, hx, sizeof(float) * IN * batch, cudaMemcpyHostToDevice, stream));
        CHECK(cudaMemcpyAsync(t, ht, sizeof(float) * OUT * batch, cudaMemcpyHostToDevice, stream));

        // forward: h = relu(W1 x + b1); y = W2 h + b2
        CHECK_BLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, HID, batch, IN, &one, w1, HID, x, IN, &zero, h, HID));
        add_bias_relu<<<blocks(HID * batch), 256, 0, stream>>>(h, b1, HID, batch);
        CHECK_BLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, OUT, batch, HID, &one, w2, OUT, h, HID, &zero, y, OUT));
        add_bias<<<blocks(OUT * batch), 256, 0, stream>>>(y, b2, OUT, batch);
        mse_grad<<<1, 1, 0, stream>>>(y, t, dy, loss, OUT * batch);

        // backward
        CHECK_BLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, OUT, HID, batch, &one, dy, OUT, h, HID, &zero, gw2, OUT));
        bias_grad<<<blocks(OUT), 256, 0, stream>>>(dy, gb2, OUT, batch);
        CHECK_BLAS(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, HID, batch, OUT, &one, w2, OUT, dy, OUT, &zero, dh, HID));
        relu_backward<<<blocks(HID * batch), 256, 0, stream>>>(dh, h, HID * batch);
        CHECK_BLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, HID, IN, batch, &one, dh, HID, x, IN, &zero, gw1, HID));
        bias_grad<<<blocks(HID), 256, 0, stream>>>(dh, gb1, HID, batch);

        // update
        sgd<<<blocks(HID * IN), 256, 0, stream>>>(w1, gw1, lr, HID * IN);
        sgd<<<blocks(HID), 256, 0, stream>>>(b1, gb1, lr, HID);
        sgd<<<blocks(OUT * HID), 256, 0, stream>>>(w2, gw2, lr, OUT * HID);
        sgd<<<blocks(OUT), 256, 0, stream>>>(b2, gb2, lr, OUT);
        CHECK(cudaGetLastError());

        // device -> pageable host: complete when the call returns
        float hloss = -1.f;
        CHECK(cudaMemcpyAsync(&hloss, loss, sizeof(float), cudaMemcpyDeviceToHost, stream));
        CHECK(cudaStreamSynchronize(stream));
        printf("step %d loss %.6f\n", step, hloss);
        fflush(stdout);

        // per-step frees right after queuing work: cudaFree waits for the device
        float *tmp[] = {x, t, h, y, dy, dh, gw1, gb1, gw2, gb2, loss};
        for (unsigned i = 0; i < sizeof tmp / sizeof tmp[0]; i++) CHECK(cudaFree(tmp[i]));
    }

    // bit-exact checksum of the trained weights (FNV-1a over the bytes)
    float *params[] = {w1, b1, w2, b2};
    int sizes[] = {HID * IN, HID, OUT * HID, OUT};
    uint64_t sum = 1469598103934665603ull;
    for (int p = 0; p < 4; p++) {
        float *hw = (float *)malloc(sizeof(float) * sizes[p]);
        CHECK(cudaMemcpy(hw, params[p], sizeof(float) * sizes[p], cudaMemcpyDeviceToHost));
        const unsigned char *bytes = (const unsigned char *)hw;
        for (size_t i = 0; i < sizeof(float) * sizes[p]; i++) { sum ^= bytes[i]; sum *= 1099511628211ull; }
        free(hw);
        CHECK(cudaFree(params[p]));
    }
    printf("weights checksum %016llx\n", (unsigned long long)sum);
    free(hx); free(ht);
    CHECK_BLAS(cublasDestroy(blas));
    CHECK(cudaStreamDestroy(stream));
    return 0;
}
