// gpu_probe: which device answers (make gpu-check picks GPU or emulator mode
// from it) and a tiny kernel proving the code runs there.  It also counts
// the driver's context calls whose cuGetProcAddress answer is their export's
// address: trainshim wraps such answers in its hooks, and keeps each thread's
// current device only while every context call handed out is wrapped
// (shim/core/cuda_real.h ts_current_device_kept).
#include <cuda.h>

#include "gpu_common.h"

// Of the context calls a program may reach through cuGetProcAddress, how
// many the driver answers with the address of one of its exports of that
// name (whichever version the answer is: cuCtxCreate at 12000 is _v2).
static int proc_exports(int *asked)
{
    static const char *const names[] = {"cuCtxSetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent",
                                        "cuCtxCreate", "cuCtxDestroy", "cuDevicePrimaryCtxRelease",
                                        "cuDevicePrimaryCtxReset"};
    int same = 0;
    *asked = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        void *p = NULL;
        CUdriverProcAddressQueryResult st;
        if (cuGetProcAddress(names[i], &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS || !p)
            continue;
        (*asked)++;
        Dl_info info;
        size_t n = strlen(names[i]);
        same += dladdr(p, &info) && info.dli_saddr == p && info.dli_sname && strncmp(info.dli_sname, names[i], n) == 0
                && (info.dli_sname[n] == 0 || info.dli_sname[n] == '_');
    }
    return same;
}

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
    int asked = 0, same = proc_exports(&asked);
    printf("device count=%d cc=%d.%d mem_gib=%.1f sms=%d driver=%d runtime=%d emulator=%d proc_exports=%d/%d "
           "name=%s\n",
           n, prop.major, prop.minor, (double)prop.totalGlobalMem / (1 << 30), prop.multiProcessorCount, drv, rt,
           reg != NULL, same, asked, prop.name);
    return 0;
}
