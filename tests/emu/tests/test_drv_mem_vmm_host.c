/* test_drv_mem_vmm_host: host-located VMM memory (cuMemCreate with location
 * HOST or HOST_NUMA) as cuda.h specifies it, the device memory limit that
 * counts device-located pages only, and the host-link model: copies,
 * memsets, kernels and collectives that touch host-located pages are
 * charged their bytes (link.host.bytes) and simulated time
 * (link.host.ns = bytes / EMU_HOST_LINK_GBPS, which defaults to
 * EMU_PINNED_GBPS).  Cases that need their own environment or end in the
 * sticky error run in forked processes that set it before cuInit. */
#include "driver/mem_testutil.h"

#include <cublas_v2.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define G (2ULL << 20)
#define MB (1ULL << 20)

static CUmemAllocationProp prop_at(CUmemLocationType type, int id, unsigned handle_types)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = type;
    p.location.id = id;
    p.requestedHandleTypes = (CUmemAllocationHandleType)handle_types;
    return p;
}

static CUmemAccessDesc access_for(CUmemLocationType type, int id, CUmemAccess_flags flags)
{
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = type;
    d.location.id = id;
    d.flags = flags;
    return d;
}

/* A reservation of npages pages; page i is host-located where host_mask bit
 * i is set, device-located otherwise; all read-write for device 0. */
static CUdeviceptr map_pages(int npages, unsigned host_mask, CUmemGenericAllocationHandle *handles)
{
    CUdeviceptr r;
    REQUIRE(cuMemAddressReserve(&r, (size_t)npages * G, 0, 0, 0));
    for (int i = 0; i < npages; i++) {
        CUmemAllocationProp p = (host_mask >> i) & 1 ? prop_at(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, 0)
                                                     : prop_at(CU_MEM_LOCATION_TYPE_DEVICE, 0, 0);
        REQUIRE(cuMemCreate(&handles[i], G, &p, 0));
        REQUIRE(cuMemMap(r + (size_t)i * G, G, 0, handles[i], 0));
    }
    CUmemAccessDesc d = access_for(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    REQUIRE(cuMemSetAccess(r, (size_t)npages * G, &d, 1));
    return r;
}

static void unmap_pages(CUdeviceptr r, int npages, CUmemGenericAllocationHandle *handles)
{
    OK(cuMemUnmap(r, (size_t)npages * G));
    for (int i = 0; i < npages; i++) OK(cuMemRelease(handles[i]));
    OK(cuMemAddressFree(r, (size_t)npages * G));
}

/* ---- creation rules (cuda.h, cuMemCreate) ---- */

static void test_create_rules(void)
{
    int v = -1;
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    EXPECT(v == 1);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0));
    EXPECT(v == 0);
    size_t g = 0;
    CUmemAllocationProp host = prop_at(CU_MEM_LOCATION_TYPE_HOST, 7, 0);   /* id ignored */
    CUmemAllocationProp numa = prop_at(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, 0);
    OK(cuMemGetAllocationGranularity(&g, &host, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    EXPECT(g == G);
    OK(cuMemGetAllocationGranularity(&g, &numa, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    EXPECT(g == G);
    CUmemGenericAllocationHandle h;
    OK(cuMemCreate(&h, G, &host, 0));
    CUmemAllocationProp back;
    OK(cuMemGetAllocationPropertiesFromHandle(&back, h));
    EXPECT(back.location.type == CU_MEM_LOCATION_TYPE_HOST);
    OK(cuMemRelease(h));
    OK(cuMemCreate(&h, 2 * G, &numa, 0));
    OK(cuMemRelease(h));
    EXPECT_RC(cuMemCreate(&h, G + 4096, &numa, 0), CUDA_ERROR_INVALID_VALUE);       /* granularity multiple */
    CUmemAllocationProp host_fd = prop_at(CU_MEM_LOCATION_TYPE_HOST, 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    EXPECT_RC(cuMemCreate(&h, G, &host_fd, 0), CUDA_ERROR_INVALID_VALUE);          /* HOST is not IPC capable */
    CUmemAllocationProp bad_node = prop_at(CU_MEM_LOCATION_TYPE_HOST_NUMA, 3, 0);
    EXPECT_RC(cuMemCreate(&h, G, &bad_node, 0), CUDA_ERROR_INVALID_VALUE);          /* one NUMA node: 0 */
    CUmemAllocationProp current = prop_at(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 0, 0);
    EXPECT_RC(cuMemCreate(&h, G, &current, 0), CUDA_ERROR_INVALID_VALUE);           /* cuda.h: not for cuMemCreate */
    CUmemAllocationProp none = prop_at(CU_MEM_LOCATION_TYPE_NONE, 0, 0);
    EXPECT_RC(cuMemCreate(&h, G, &none, 0), CUDA_ERROR_INVALID_VALUE);

    /* HOST_NUMA may be exported; the import is host-located too */
    CUmemAllocationProp numa_fd = prop_at(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    OK(cuMemCreate(&h, G, &numa_fd, 0));
    int fd = -1;
    OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUmemGenericAllocationHandle imp;
    OK(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    OK(cuMemGetAllocationPropertiesFromHandle(&back, imp));
    EXPECT(back.location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA);
    close(fd);
    OK(cuMemRelease(imp));
    OK(cuMemRelease(h));
}

/* ---- EMU_DEVICE_MEMORY counts device-located pages only (limit 64 MiB) ---- */

static int case_device_limit(void)
{
    setenv("EMU_DEVICE_MEMORY", "64M", 1);
    mt_setup(0);
    size_t total = 0, free0 = 0, free1 = 0, t = 0;
    OK(cuDeviceTotalMem(&total, 0));
    EXPECT(total == 64 * MB);
    OK(cuMemGetInfo(&free0, &t));
    EXPECT(t == 64 * MB);
    uint64_t phys0 = emuGetCounter("phys.current"), host0 = emuGetCounter("phys.host.current");
    CUmemGenericAllocationHandle hosts[64], dev[32];
    CUmemAllocationProp numa = prop_at(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, 0);
    for (int i = 0; i < 64; i++) OK(cuMemCreate(&hosts[i], G, &numa, 0));   /* 128 MiB on the host */
    OK(cuMemGetInfo(&free1, &t));
    EXPECT(free1 == free0);
    EXPECT(emuGetCounter("phys.current") == phys0);
    EXPECT(emuGetCounter("phys.host.current") == host0 + 64 * G);
    EXPECT(emuGetCounter("phys.host.peak") >= host0 + 64 * G);
    CUmemAllocationProp devp = prop_at(CU_MEM_LOCATION_TYPE_DEVICE, 0, 0);
    int made = 0;
    while (made < 32 && cuMemCreate(&dev[made], G, &devp, 0) == CUDA_SUCCESS) made++;
    EXPECT(made == (int)((free0 / G) < 32 ? free0 / G : 32));   /* the device fills up regardless */
    EXPECT_RC(cuMemCreate(&dev[0 + (made < 32 ? made : 0)], G, &devp, 0), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemGetInfo(&free1, &t));
    EXPECT(free1 == free0 - (size_t)made * G);
    for (int i = 0; i < made; i++) OK(cuMemRelease(dev[i]));
    for (int i = 0; i < 64; i++) OK(cuMemRelease(hosts[i]));
    EXPECT(emuGetCounter("phys.current") == phys0);
    EXPECT(emuGetCounter("phys.host.current") == host0);
    return mt_failures;
}

/* ---- access: the device through cuMemSetAccess, the CPU through HOST_NUMA ---- */

static void test_access(void)
{
    CUmemGenericAllocationHandle hs[2];
    CUdeviceptr r = map_pages(2, 0x1, hs);   /* page 0 host, page 1 device */
    CUmemAccessDesc cpu = access_for(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    EXPECT_RC(cuMemSetAccess(r + G, G, &cpu, 1), CUDA_ERROR_INVALID_VALUE);   /* device-located page */
    EXPECT_RC(cuMemSetAccess(r, 2 * G, &cpu, 1), CUDA_ERROR_INVALID_VALUE);   /* any of the range */
    OK(cuMemSetAccess(r, G, &cpu, 1));
    unsigned long long flags = 0;
    CUmemLocation where = { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 };
    OK(cuMemGetAccess(&flags, &where, r));
    EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    where.type = CU_MEM_LOCATION_TYPE_DEVICE;
    OK(cuMemGetAccess(&flags, &where, r));
    EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CUdeviceptr base;
    size_t size;
    OK(cuMemGetAddressRange(&base, &size, r + 100));   /* a mapping like any other */
    EXPECT(base == r && size == G);
    unmap_pages(r, 2, hs);
}

/* ---- the host-link model ---- */

static void fill_kernel(void **args, const emu_launch *l)
{
    (void)l;
    uint32_t *p = *(uint32_t **)args[0];
    size_t n = *(size_t *)args[1];
    for (size_t i = 0; i < n; i++) p[i] = (uint32_t)(i * 2654435761u);
}
static char fill_stub;

static void test_link_copies_and_kernels(double gbps)
{
    CUmemGenericAllocationHandle hs[4];
    CUdeviceptr r = map_pages(4, 0x6, hs);   /* device, host, host, device */
    static unsigned char in[3 * MB], out[3 * MB];
    for (size_t i = 0; i < sizeof in; i++) in[i] = (unsigned char)(i * 31 + 7);
    emuResetCounters();
    /* 3 MiB from the middle of page 0 (device) into pages 1 and 2 (host):
     * 2 MiB of it lands on the host */
    OK(cuMemcpyHtoD(r + G - MB, in, sizeof in));
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("link.host.bytes") == 2 * MB);
    OK(cuMemcpyDtoH(out, r + G - MB, sizeof out));
    EXPECT(memcmp(in, out, sizeof in) == 0);
    EXPECT(emuGetCounter("link.host.bytes") == 4 * MB);
    /* device to device: the host-located side is charged */
    OK(cuMemcpyDtoD(r + 3 * G, r + G, MB));
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("link.host.bytes") == 5 * MB);
    /* a memset of host-located pages */
    OK(cuMemsetD8(r + 2 * G, 0, G));
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("link.host.bytes") == 5 * MB + G);
    /* device-only traffic costs nothing on the link */
    OK(cuMemcpyDtoD(r + 3 * G, r, MB));
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("link.host.bytes") == 5 * MB + G);

    /* a kernel: the argument is charged the host-located run from it (to
     * the device-located page 3), its result is exact */
    size_t sizes[] = { sizeof(void *), sizeof(size_t) };
    emuRegisterKernel(&fill_stub, "fill_u32", fill_kernel, 2, sizes);
    CUfunction f;
    REQUIRE((CUresult)emuGetFunction((void **)&f, &fill_stub, "fill_u32"));
    CUdeviceptr arg = r + G + 4096;
    size_t n = MB / 4;
    void *params[] = { &arg, &n };
    uint64_t before = emuGetCounter("link.host.bytes");
    OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, NULL));
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("link.host.bytes") == before + 2 * G - 4096);
    uint32_t *words = (uint32_t *)out;
    OK(cuMemcpyDtoH(out, arg, MB));
    bool same = true;
    for (size_t i = 0; i < n; i++) same &= words[i] == (uint32_t)(i * 2654435761u);
    EXPECT(same);
    before = emuGetCounter("link.host.bytes");
    arg = r + 3 * G;   /* a device-located argument: free */
    OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, NULL));
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("link.host.bytes") == before);

    /* simulated time: exactly bytes / rate */
    uint64_t bytes = emuGetCounter("link.host.bytes"), ns = emuGetCounter("link.host.ns");
    if (gbps > 0) {
        double want = (double)bytes / gbps;
        EXPECT(ns + 16 >= (uint64_t)want && ns <= (uint64_t)want + 16);   /* per-charge rounding */
    } else {
        EXPECT(ns == 0);
    }
    EXPECT(emuGetCounter("link.host.ops") >= 6);
    unmap_pages(r, 4, hs);
}

/* A collective on a host-located buffer is charged its send and receive
 * bytes (one rank: the data is unchanged). */
static void test_link_collective(void)
{
    CUmemGenericAllocationHandle hs[2];
    CUdeviceptr r = map_pages(2, 0x1, hs);   /* host, device */
    ncclComm_t comm;
    int devs[1] = { 0 };
    if (ncclCommInitAll(&comm, 1, devs) != ncclSuccess) {
        EXPECT(!"ncclCommInitAll");
        unmap_pages(r, 2, hs);
        return;
    }
    static float in[1024], out[1024];
    for (int i = 0; i < 1024; i++) in[i] = (float)i;
    OK(cuMemcpyHtoD(r, in, sizeof in));
    OK(cuCtxSynchronize());
    uint64_t before = emuGetCounter("link.host.bytes");
    EXPECT(ncclAllReduce((void *)r, (void *)(r + G), 1024, ncclFloat, ncclSum, comm, 0) == ncclSuccess);
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("link.host.bytes") == before + sizeof in);   /* the send side only */
    OK(cuMemcpyDtoH(out, r + G, sizeof out));
    EXPECT(memcmp(in, out, sizeof in) == 0);
    ncclCommDestroy(comm);
    unmap_pages(r, 2, hs);
}

/* A GEMM reading A from a host-located page is charged A's extent and
 * computes what the same GEMM computes from device-located memory. */
static void test_link_gemm(void)
{
    enum { N = 64 };
    CUmemGenericAllocationHandle hs[2];
    CUdeviceptr r = map_pages(2, 0x1, hs);   /* host, device */
    CUdeviceptr a_host = r, a_dev = r + G, b = r + G + 64 * 1024, c1 = b + 64 * 1024, c2 = c1 + 64 * 1024;
    static float a[N * N], bm[N * N], out1[N * N], out2[N * N];
    for (int i = 0; i < N * N; i++) { a[i] = (float)(i % 13) - 6.0f; bm[i] = (float)(i % 7) * 0.25f; }
    OK(cuMemcpyHtoD(a_host, a, sizeof a));
    OK(cuMemcpyHtoD(a_dev, a, sizeof a));
    OK(cuMemcpyHtoD(b, bm, sizeof bm));
    cublasHandle_t hb;
    EXPECT(cublasCreate(&hb) == CUBLAS_STATUS_SUCCESS);
    float alpha = 1.0f, beta = 0.0f;
    OK(cuCtxSynchronize());
    uint64_t before = emuGetCounter("link.host.bytes");
    EXPECT(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &alpha, (const float *)a_host, N, (const float *)b, N,
                       &beta, (float *)c1, N) == CUBLAS_STATUS_SUCCESS);
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("link.host.bytes") == before + sizeof a);
    EXPECT(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &alpha, (const float *)a_dev, N, (const float *)b, N,
                       &beta, (float *)c2, N) == CUBLAS_STATUS_SUCCESS);
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("link.host.bytes") == before + sizeof a);
    OK(cuMemcpyDtoH(out1, c1, sizeof out1));
    OK(cuMemcpyDtoH(out2, c2, sizeof out2));
    EXPECT(memcmp(out1, out2, sizeof out1) == 0);
    cublasDestroy(hb);
    unmap_pages(r, 2, hs);
}

static int case_rates_default(void)
{
    setenv("EMU_PINNED_GBPS", "50", 1);
    unsetenv("EMU_HOST_LINK_GBPS");
    mt_setup(0);
    test_link_copies_and_kernels(50);
    return mt_failures;
}

static int case_rates_own(void)
{
    setenv("EMU_PINNED_GBPS", "50", 1);
    setenv("EMU_HOST_LINK_GBPS", "200", 1);
    mt_setup(0);
    test_link_copies_and_kernels(200);
    return mt_failures;
}

/* ---- unavailable: EMU_HOST_VMM=0 ---- */

static int case_unsupported(void)
{
    setenv("EMU_HOST_VMM", "0", 1);
    mt_setup(0);
    int v = -1;
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    EXPECT(v == 0);
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp numa = prop_at(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, 0);
    CUmemAllocationProp host = prop_at(CU_MEM_LOCATION_TYPE_HOST, 0, 0);
    EXPECT_RC(cuMemCreate(&h, G, &numa, 0), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_RC(cuMemCreate(&h, G, &host, 0), CUDA_ERROR_NOT_SUPPORTED);
    return mt_failures;
}

/* ---- the sticky illegal address, as for device-located pages ---- */

static int case_unmapped_host_page_faults(void)
{
    mt_setup(0);
    CUmemGenericAllocationHandle hs[1];
    CUdeviceptr r = map_pages(1, 0x1, hs);
    OK(cuMemUnmap(r, G));   /* the reservation stays, the page is gone */
    size_t sizes[] = { sizeof(void *), sizeof(size_t) };
    emuRegisterKernel(&fill_stub, "fill_u32", fill_kernel, 2, sizes);
    CUfunction f;
    REQUIRE((CUresult)emuGetFunction((void **)&f, &fill_stub, "fill_u32"));
    size_t n = 16;
    void *params[] = { &r, &n };
    CUresult at = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, NULL);
    EXPECT(at == CUDA_SUCCESS || at == CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);   /* sticky */
    EXPECT(emuGetCounter("faults.illegal_address") == 1);
    return mt_failures;
}

static int run(const char *name, int (*fn)(void))
{
    pid_t pid = fork();
    if (pid == 0) _exit(fn() ? 1 : 0);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "case %s failed (status %#x)\n", name, status);
        return 1;
    }
    return 0;
}

int main(void)
{
    int failed = 0;
    failed += run("device_limit", case_device_limit);
    failed += run("rates_default", case_rates_default);
    failed += run("rates_own", case_rates_own);
    failed += run("unsupported", case_unsupported);
    failed += run("unmapped_host_page_faults", case_unmapped_host_page_faults);
    mt_setup(0);
    test_create_rules();
    test_access();
    test_link_collective();
    test_link_gemm();
    mt_failures += failed;
    return mt_finish("test_drv_mem_vmm_host");
}
