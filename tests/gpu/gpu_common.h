// Shared by the tests/gpu programs (make gpu-check): error checks, clocks,
// and the registration of CPU twins of their kernels when they run on the
// emulator (libcuda.so.1 then exports emuRegisterKernel; on a real GPU the
// lookup finds nothing and the kernels run on the device).
#pragma once
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu.h"

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_), (int)e_); \
    exit(1); } } while (0)

static inline double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef int (*gpu_reg_fn)(const void *, const char *, emu_kernel_fn, int, const size_t *);

// emuRegisterKernel of the emulated driver, or NULL on a real GPU.
static inline gpu_reg_fn emulator_register_fn(void)
{
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!drv) drv = dlopen("libcuda.so.1", RTLD_LAZY);
    return drv ? (gpu_reg_fn)dlsym(drv, "emuRegisterKernel") : NULL;
}

static inline int on_emulator(void) { return emulator_register_fn() != NULL; }

#define ARG(T, i) (*(T *)args[i])

// FNV-1a over bytes, chained.
static inline uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
    return h;
}
#define FNV_INIT 0xcbf29ce484222325ull
