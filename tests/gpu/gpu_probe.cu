// gpu_probe: which device answers (make gpu-check picks GPU or emulator mode
// from it) and a tiny kernel proving the code runs there.
#include "gpu_common.h"

__global__ void square(int *x) { x[threadIdx.x] *= x[threadIdx.x]; }
static void cpu_square(void **args, const emu_launch *l)
{
    int *x = ARG(int *, 0);
    for (unsigned i = 0; i < l->block.x; i++) x[i] *= x[i];
}

int main(void)
{
    gpu_reg_fn reg = emulator_register_fn();
    static const size_t p[] = {8};
    if (reg) reg((const void *)square, NULL, cpu_square, 1, p);
    int n = 0, drv = 0, rt = 0;
    CK(cudaGetDeviceCount(&n));
    if (n < 1) { fprintf(stderr, "gpu_probe: no device\n"); return 1; }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    int h[64], *d;
    for (int i = 0; i < 64; i++) h[i] = i;
    CK(cudaMalloc((void **)&d, sizeof h));
    CK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    square<<<1, 64>>>(d);
    CK(cudaGetLastError());
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++)
        if (h[i] != i * i) { fprintf(stderr, "gpu_probe: kernel result wrong at %d\n", i); return 1; }
    printf("device count=%d cc=%d.%d mem_gib=%.1f sms=%d driver=%d runtime=%d emulator=%d name=%s\n", n, prop.major,
           prop.minor, (double)prop.totalGlobalMem / (1 << 30), prop.multiProcessorCount, drv, rt, reg != NULL,
           prop.name);
    return 0;
}
