// gpu_alloc: allocator and VMM costs for make gpu-check.
//
//   gpu_alloc pairs      mean host us of one cudaMalloc + cudaFree pair per
//                        size (under the shim: the shim's pair), first pair
//                        and steady state
//   gpu_alloc vmm        mean host us of cuMemCreate, cuMemMap, cuMemSetAccess,
//                        cuMemUnmap and cuMemRelease per size (the driver calls
//                        the shim's allocator makes when it grows or shrinks)
//   gpu_alloc hostvmm    host-backed VMM for offload: the device attributes,
//                        then (when supported) 1 GiB of host-backed pages
//                        mapped for the device: a kernel reading them (GB/s,
//                        beside the same kernel on device memory) and the time
//                        to move 1 GiB each way between device memory and them
//
// One "key=value ..." line per figure; a data check fails the run.
#include <cuda.h>

#include "gpu_common.h"

#define CKD(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { const char *s_ = "?"; \
    cuGetErrorString(r_, &s_); fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call, s_, \
    (int)r_); exit(1); } } while (0)

__global__ void sum_words(const uint64_t *p, size_t n, unsigned long long *out)
{
    uint64_t s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += p[i];
    atomicAdd(out, (unsigned long long)s);
}
static void cpu_sum_words(void **args, const emu_launch *)
{
    const uint64_t *p = ARG(const uint64_t *, 0); size_t n = ARG(size_t, 1);
    unsigned long long *out = ARG(unsigned long long *, 2), s = 0;
    for (size_t i = 0; i < n; i++) s += p[i];
    *out += s;
}

static void register_twins(void)
{
    gpu_reg_fn reg = emulator_register_fn();
    static const size_t ps[] = {8, 8, 8};
    if (reg) reg((const void *)sum_words, NULL, cpu_sum_words, 3, ps);
}

static int pairs(void)
{
    static const size_t sizes[] = {512, 1u << 20, 2u << 20, 64u << 20, 1u << 30};
    for (int k = 0; k < 5; k++) {
        size_t n = sizes[k];
        int reps = n >= (1u << 30) ? 20 : 500;
        void *p;
        double t0 = now_s();
        CK(cudaMalloc(&p, n));
        CK(cudaFree(p));
        double first = (now_s() - t0) * 1e6;
        t0 = now_s();
        for (int r = 0; r < reps; r++) { CK(cudaMalloc(&p, n)); CK(cudaFree(p)); }
        printf("alloc size=%zu first_pair_us=%.2f pair_us=%.3f\n", n, first, (now_s() - t0) / reps * 1e6);
    }
    return 0;
}

static CUmemAllocationProp device_prop(int dev)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    return prop;
}

static int vmm(void)
{
    CUmemAllocationProp prop = device_prop(0);
    size_t gran = 0;
    CKD(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    printf("vmm granularity=%zu\n", gran);
    static const size_t sizes[] = {2u << 20, 64u << 20, 1u << 30};
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (int k = 0; k < 3; k++) {
        size_t n = sizes[k] < gran ? gran : sizes[k];
        int reps = n >= (1u << 30) ? 3 : 20;
        CUdeviceptr va;
        CKD(cuMemAddressReserve(&va, n, 0, 0, 0));
        double t_create = 0, t_map = 0, t_access = 0, t_unmap = 0, t_release = 0;
        for (int r = 0; r < reps; r++) {
            CUmemGenericAllocationHandle hnd;
            double t0 = now_s();
            CKD(cuMemCreate(&hnd, n, &prop, 0));
            double t1 = now_s();
            CKD(cuMemMap(va, n, 0, hnd, 0));
            double t2 = now_s();
            CKD(cuMemSetAccess(va, n, &acc, 1));
            double t3 = now_s();
            CKD(cuMemUnmap(va, n));
            double t4 = now_s();
            CKD(cuMemRelease(hnd));
            double t5 = now_s();
            t_create += t1 - t0; t_map += t2 - t1; t_access += t3 - t2; t_unmap += t4 - t3; t_release += t5 - t4;
        }
        CKD(cuMemAddressFree(va, n));
        printf("vmm size=%zu create_us=%.2f map_us=%.2f set_access_us=%.2f unmap_us=%.2f release_us=%.2f\n", n,
               t_create / reps * 1e6, t_map / reps * 1e6, t_access / reps * 1e6, t_unmap / reps * 1e6,
               t_release / reps * 1e6);
    }
    return 0;
}

static double read_gbps(const uint64_t *p, size_t words, unsigned long long *out, unsigned long long want)
{
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    double best = 0;
    for (int r = 0; r < 3; r++) {
        CK(cudaMemset(out, 0, 8));
        CK(cudaDeviceSynchronize());
        double t0 = now_s();
        sum_words<<<sms * 4, 512>>>(p, words, out);
        CK(cudaDeviceSynchronize());
        double g = (double)words * 8 / (now_s() - t0) / 1e9;
        if (g > best) best = g;
        unsigned long long got = 0;
        CK(cudaMemcpy(&got, out, 8, cudaMemcpyDeviceToHost));
        if (got != want) { fprintf(stderr, "gpu_alloc: kernel read %llx, want %llx\n", got, want); exit(1); }
    }
    return best;
}

static double move_s(void *dst, const void *src, size_t n)
{
    CK(cudaMemcpy(dst, src, n, cudaMemcpyDefault));
    CK(cudaDeviceSynchronize());
    double t0 = now_s();
    CK(cudaMemcpy(dst, src, n, cudaMemcpyDefault));
    CK(cudaDeviceSynchronize());
    return now_s() - t0;
}

static int host_vmm(size_t mib)
{
    CUdevice dev;
    CK(cudaFree(0));
    CKD(cuCtxGetDevice(&dev));
    int numa_id = -1, host_numa = 0, host_vmm = 0, vmm_ok = 0;
    CKD(cuDeviceGetAttribute(&vmm_ok, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
    cuDeviceGetAttribute(&numa_id, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev);
    cuDeviceGetAttribute(&host_numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
    cuDeviceGetAttribute(&host_vmm, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
    printf("hostvmm vmm=%d host_numa_id=%d host_numa_vmm=%d host_vmm=%d\n", vmm_ok, numa_id, host_numa, host_vmm);
    if (!host_numa && !host_vmm) { printf("hostvmm supported=0\n"); return 0; }
    // HOST where the device takes it, else HOST_NUMA; a refusal is a figure, not a crash
    CUmemAllocationProp prop = device_prop(0);
    CUmemGenericAllocationHandle hnd;
    size_t gran = 0, n = mib << 20;
    double t_create = 0;
    int ok = 0;
    for (int k = 0; k < 2 && !ok; k++) {
        if (k == 0 && !host_vmm) continue;
        if (k == 1 && !host_numa) continue;
        prop.location.type = k == 0 ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_HOST_NUMA;
        prop.location.id = k == 0 ? 0 : numa_id < 0 ? 0 : numa_id;
        if (cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) continue;
        n = ((mib << 20) + gran - 1) / gran * gran;
        double t0 = now_s();
        CUresult r = cuMemCreate(&hnd, n, &prop, 0);
        t_create = now_s() - t0;
        if (r == CUDA_SUCCESS) ok = 1;
        else printf("hostvmm create_failed location=%s error=%d\n", k == 0 ? "host" : "host_numa", (int)r);
    }
    if (!ok) { printf("hostvmm supported=0\n"); return 0; }
    host_vmm = prop.location.type == CU_MEM_LOCATION_TYPE_HOST;
    CUdeviceptr va;
    CKD(cuMemAddressReserve(&va, n, 0, 0, 0));
    CKD(cuMemMap(va, n, 0, hnd, 0));
    CUmemAccessDesc acc[2];
    memset(acc, 0, sizeof acc);
    acc[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc[0].location.id = (int)dev;
    acc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CKD(cuMemSetAccess(va, n, acc, 1));
    size_t words = n / 8;
    uint64_t *host = (uint64_t *)malloc(n), *dmem, *hmem = (uint64_t *)(uintptr_t)va;
    unsigned long long *out, want = 0;
    for (size_t i = 0; i < words; i++) { host[i] = i * 0x9E3779B97F4A7C15ull; want += host[i]; }
    CK(cudaMalloc((void **)&dmem, n));
    CK(cudaMalloc((void **)&out, 8));
    CK(cudaMemcpy(dmem, host, n, cudaMemcpyHostToDevice));
    double to_host = move_s(hmem, dmem, n), to_dev = move_s(dmem, hmem, n);
    double g_host = read_gbps(hmem, words, out, want), g_dev = read_gbps(dmem, words, out, want);
    printf("hostvmm supported=1 location=%s size=%zu create_ms=%.2f kernel_read_host_gbps=%.3f "
           "kernel_read_device_gbps=%.3f move_to_host_ms=%.3f move_to_device_ms=%.3f\n",
           host_vmm ? "host" : "host_numa", n, t_create * 1e3, g_host, g_dev, to_host * 1e3, to_dev * 1e3);
    CK(cudaFree(dmem)); CK(cudaFree(out));
    CKD(cuMemUnmap(va, n)); CKD(cuMemAddressFree(va, n)); CKD(cuMemRelease(hnd));
    free(host);
    return 0;
}

int main(int argc, char **argv)
{
    register_twins();
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    if (argc >= 2 && !strcmp(argv[1], "pairs")) return pairs();
    if (argc >= 2 && !strcmp(argv[1], "vmm")) return vmm();
    if (argc >= 2 && !strcmp(argv[1], "hostvmm")) return host_vmm(argc > 2 ? strtoull(argv[2], NULL, 10) : 1024);
    fprintf(stderr, "usage: gpu_alloc pairs | vmm | hostvmm [MiB]\n");
    return 2;
}
