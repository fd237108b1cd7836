/* test_devmem_current_device: the runtime's allocations land on the current
 * device however it was made current (run by test_devmem_current_device.sh
 * with EMU_DEVICES=2, without and under the shim).  trainshim keeps each
 * thread's current device between the calls that can change it
 * (core/cuda_real.h ts_current_device_kept), so the program switches through
 * every one of them, back and forth, and after each allocates with
 * cudaMalloc and with cudaMallocAsync on the legacy and the per-thread
 * stream, printing the device each pointer is on:
 *   - cudaSetDevice;
 *   - cuCtxSetCurrent, cuCtxPushCurrent/PopCurrent (and their CUDA 3 names),
 *     called by symbol;
 *   - cuCtxSetCurrent through cuGetProcAddress, cudaGetDriverEntryPointByVersion and
 *     dlsym on the driver's handle;
 *   - another thread's own switches, which leave this one's alone;
 *   - cudaDeviceReset of the current device.
 * stdout carries only what must be identical with and without the shim; any
 * failed call is a FAIL line.  With TEST_ASKS_FILE set, it then makes 1000
 * allocations without a switch and writes how many times the driver was
 * asked for the current device (cuCtxGetDevice) into that file. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "emu/emu.h"

#include "check.h"
#include "two_devices.h"

/* the CUDA 3.2 names, which cuda.h maps onto their _v2 */
#undef cuCtxPushCurrent
#undef cuCtxPopCurrent
CUresult cuCtxPushCurrent(CUcontext ctx);
CUresult cuCtxPopCurrent(CUcontext *pctx);

typedef CUresult (*set_current_fn)(CUcontext);

static CUcontext primary[2];

static int device_of(const void *p)
{
    struct cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess)
        return -9;
    return a.device;
}

/* One allocation of each kind, freed at once: the devices they are on. */
static void allocate(const char *how)
{
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK(cudaMalloc(&a, 3 << 20) == cudaSuccess, "%s: cudaMalloc", how);
    CHECK(cudaMallocAsync(&b, 1 << 20, 0) == cudaSuccess, "%s: legacy stream", how);
    CHECK(cudaMallocAsync(&c, 5 << 20, cudaStreamPerThread) == cudaSuccess, "%s: per-thread stream", how);
    printf("%-28s %d %d %d\n", how, device_of(a), device_of(b), device_of(c));
    CHECK(cudaFreeAsync(c, cudaStreamPerThread) == cudaSuccess && cudaFreeAsync(b, 0) == cudaSuccess, "%s", how);
    CHECK(cudaFree(a) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, "%s: free", how);
}

static void switch_by_set_device(void)
{
    for (int k = 0; k < 2; k++)
        for (int dev = 1; dev >= 0; dev--) {
            CHECK(cudaSetDevice(dev) == cudaSuccess, "cudaSetDevice(%d)", dev);
            allocate(dev ? "cudaSetDevice(1)" : "cudaSetDevice(0)");
        }
}

static void switch_by_context_calls(void)
{
    CHECK(cuCtxSetCurrent(primary[1]) == CUDA_SUCCESS, "cuCtxSetCurrent");
    allocate("cuCtxSetCurrent(1)");
    CHECK(cuCtxPushCurrent_v2(primary[0]) == CUDA_SUCCESS, "push");
    allocate("cuCtxPushCurrent_v2(0)");
    CHECK(cuCtxPopCurrent_v2(NULL) == CUDA_SUCCESS, "pop");
    allocate("cuCtxPopCurrent_v2");
    CHECK(cuCtxPushCurrent(primary[0]) == CUDA_SUCCESS, "push (3.2)");
    allocate("cuCtxPushCurrent(0)");
    CHECK(cuCtxPopCurrent(NULL) == CUDA_SUCCESS, "pop (3.2)");
    allocate("cuCtxPopCurrent");
    CHECK(cuCtxSetCurrent(primary[0]) == CUDA_SUCCESS, "cuCtxSetCurrent back");
    allocate("cuCtxSetCurrent(0)");
}

/* cuCtxSetCurrent as a framework reaches it: not by its symbol. */
static void switch_through(const char *how, set_current_fn set)
{
    CHECK(set != NULL, "%s: no pointer", how);
    if (!set)
        return;
    char line[64];
    for (int dev = 1; dev >= 0; dev--) {
        CHECK(set(primary[dev]) == CUDA_SUCCESS, "%s(%d)", how, dev);
        snprintf(line, sizeof line, "%s(%d)", how, dev);
        allocate(line);
    }
}

static void switch_through_entry_points(void)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    CHECK(cuGetProcAddress_v2("cuCtxSetCurrent", &p, 12000, 0, &st) == CUDA_SUCCESS, "cuGetProcAddress");
    switch_through("cuGetProcAddress", (set_current_fn)p);
    enum cudaDriverEntryPointQueryResult rst;
    p = NULL;
    CHECK(cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", &p, 12000, cudaEnableDefault, &rst) == cudaSuccess,
          "entry point");
    switch_through("cudaGetDriverEntryPoint", (set_current_fn)p);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, "dlopen libcuda.so.1");
    if (h) {
        switch_through("dlsym", (set_current_fn)dlsym(h, "cuCtxSetCurrent"));
        dlclose(h);
    }
}

/* Another thread makes device 1 current for itself and allocates there;
 * this thread's device 0 stays current. */
static void *other_thread(void *arg)
{
    (void)arg;
    CHECK(cudaSetDevice(1) == cudaSuccess, "other thread: device 1");
    allocate("other thread, device 1");
    return NULL;
}

static void switch_in_another_thread(void)
{
    CHECK(cudaSetDevice(0) == cudaSuccess, "device 0");
    allocate("this thread, device 0");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0, "thread");
    pthread_join(t, NULL);
    allocate("this thread, after it");
}

static void reset_current_device(void)
{
    CHECK(cudaSetDevice(1) == cudaSuccess, "device 1");
    allocate("before cudaDeviceReset(1)");
    CHECK(cudaDeviceReset() == cudaSuccess, "reset");
    allocate("after cudaDeviceReset(1)");
    CHECK(cudaSetDevice(0) == cudaSuccess, "device 0");
    allocate("then cudaSetDevice(0)");
}

/* 1000 allocations on the legacy stream, no switch: the driver's answers. */
static void count_asks(const char *path)
{
    void *p = NULL;
    uint64_t before = emuGetCounter("calls.cuCtxGetDevice");
    for (int k = 0; k < 1000; k++) {
        CHECK(cudaMallocAsync(&p, 4096, 0) == cudaSuccess, "alloc %d", k);
        CHECK(cudaFreeAsync(p, 0) == cudaSuccess, "free %d", k);
    }
    uint64_t asks = emuGetCounter("calls.cuCtxGetDevice") - before;
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "open %s", path);
    if (f) {
        fprintf(f, "%llu\n", (unsigned long long)asks);
        fclose(f);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    if (!two_devices(argv))
        return 1;
    CHECK(cudaFree(NULL) == cudaSuccess, "runtime init");
    for (int dev = 0; dev < 2; dev++)
        CHECK(cuDevicePrimaryCtxRetain(&primary[dev], dev) == CUDA_SUCCESS, "retain %d", dev);
    switch_by_set_device();
    switch_by_context_calls();
    switch_through_entry_points();
    switch_in_another_thread();
    reset_current_device();
    const char *asks = getenv("TEST_ASKS_FILE");
    if (asks && *asks)
        count_asks(asks);
    for (int dev = 0; dev < 2; dev++)
        cuDevicePrimaryCtxRelease(dev);
    return failures != 0;
}
