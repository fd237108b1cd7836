/* test_skip_compute.c: EMU_COMPUTE=skip.  GEMMs (cuBLAS and cuBLASLt),
 * collectives and memsets are still validated (bad arguments fail as in
 * full mode), ordered on their streams and counted (cublas.gemm, nccl.<op>,
 * plus gemm.skipped, nccl.skipped, memsets.skipped), but write nothing:
 * output buffers keep their bytes, and device pages nobody touched cost no
 * host memory (the process's resident set does not grow by the gigabyte a
 * skipped memset, device-to-device copy and GEMM cover).  Copies between
 * device memories are counted but move nothing; copies from and to the host
 * stay real.  Memsets, copies and collectives of at most 64 KiB still run
 * (frameworks steer by such small buffers).  Skipped work on host-located
 * VMM pages still charges the host link. */
#include <cublas_v2.h>
#include <nccl.h>
#include "driver/exec_testutil.h"

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (size_t)resident * 4096;
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}

static void test_memset_writes_nothing(void)
{
    enum { N = 1 << 20 };
    static unsigned char host[N];
    CUdeviceptr d;
    REQUIRE(cuMemAlloc(&d, N));
    memset(host, 0x7e, N);
    REQUIRE(cuMemcpyHtoD(d, host, N));                     /* copies are real */
    uint64_t before = emuGetCounter("memsets.skipped");
    OK(cuMemsetD8(d, 0, N));
    OK(cuMemsetD32Async(d, 0xffffffffu, N / 4, NULL));
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("memsets.skipped") == before + 2);
    memset(host, 0, N);
    OK(cuMemcpyDtoH(host, d, N));
    EXPECT(all_bytes(host, N, 0x7e));
    OK(cuMemsetD8(d, 0, 4096));                                       /* small: real */
    OK(cuMemcpyDtoD(d + 4096, d + 8192, 4096));
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("memsets.skipped") == before + 2);
    OK(cuMemcpyDtoH(host, d, 3 * 4096));
    EXPECT(all_bytes(host, 4096, 0) && all_bytes(host + 4096, 2 * 4096, 0x7e));
    EXPECT_RC(cuMemsetD32(d + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);   /* still validated */
    EXPECT_RC(cuMemsetD8(d, 0, N + 4096), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(d));
}

/* A 1 GiB memset and a GEMM over 3 x 64 MiB matrices, all skipped: the
 * memory stays uncommitted. */
static void test_untouched_pages_cost_nothing(void)
{
    size_t rss0 = rss_bytes();
    CUdeviceptr big, a, b, c;
    REQUIRE(cuMemAlloc(&big, (size_t)1 << 30));
    OK(cuMemsetD8(big, 1, (size_t)1 << 30));
    /* a device-to-device copy moves nothing either: reading the untouched
     * source would commit it (the arena is shared memory) */
    uint64_t d2d = emuGetCounter("bytes.d2d"), skipped = emuGetCounter("copies.skipped");
    OK(cuMemcpyDtoD(big + ((size_t)512 << 20), big, (size_t)512 << 20));
    OK(cuCtxSynchronize());   /* a device-to-device copy is asynchronous */
    EXPECT(emuGetCounter("bytes.d2d") == d2d + ((size_t)512 << 20));   /* counted as any copy */
    EXPECT(emuGetCounter("copies.skipped") == skipped + 1);
    const int n = 4096;
    REQUIRE(cuMemAlloc(&a, (size_t)n * n * 4));
    REQUIRE(cuMemAlloc(&b, (size_t)n * n * 4));
    REQUIRE(cuMemAlloc(&c, (size_t)n * n * 4));
    cublasHandle_t h;
    EXPECT(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    float one = 1, zero = 0;
    EXPECT(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, (float *)a, n, (float *)b, n, &zero,
                       (float *)c, n) == CUBLAS_STATUS_SUCCESS);
    OK(cuCtxSynchronize());
    size_t grown = rss_bytes() - rss0;
    EXPECT(grown < ((size_t)128 << 20));
    if (grown >= ((size_t)128 << 20)) fprintf(stderr, "resident set grew by %zu MiB\n", grown >> 20);
    EXPECT(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
    OK(cuMemFree(a));
    OK(cuMemFree(b));
    OK(cuMemFree(c));
    OK(cuMemFree(big));
}

static void test_gemm_counted_not_computed(void)
{
    const int m = 64, n = 32, k = 16;
    CUdeviceptr a, b, c;
    REQUIRE(cuMemAlloc(&a, (size_t)m * k * 4));
    REQUIRE(cuMemAlloc(&b, (size_t)k * n * 4));
    REQUIRE(cuMemAlloc(&c, (size_t)m * n * 4));
    REQUIRE(cuMemsetD32(a, 0x3f800000u, (size_t)m * k));   /* skipped too: a stays as allocated */
    static unsigned char host[64 * 32 * 4];
    memset(host, 0x42, sizeof host);
    REQUIRE(cuMemcpyHtoD(c, host, sizeof host));
    cublasHandle_t h;
    EXPECT(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    uint64_t gemms = emuGetCounter("cublas.gemm"), skipped = emuGetCounter("gemm.skipped");
    float one = 1, zero = 0;
    EXPECT(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, (float *)a, m, (float *)b, k, &zero,
                       (float *)c, m) == CUBLAS_STATUS_SUCCESS);
    EXPECT(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, (float *)a, m - 1, (float *)b, k, &zero,
                       (float *)c, m) == CUBLAS_STATUS_INVALID_VALUE);   /* lda < m: still rejected */
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("cublas.gemm") == gemms + 1);
    EXPECT(emuGetCounter("gemm.skipped") == skipped + 1);
    memset(host, 0, sizeof host);
    OK(cuMemcpyDtoH(host, c, sizeof host));
    EXPECT(all_bytes(host, sizeof host, 0x42));
    EXPECT(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
    OK(cuMemFree(a));
    OK(cuMemFree(b));
    OK(cuMemFree(c));
}

/* Skipping the arithmetic does not skip the transfer: a skipped memset and
 * a skipped GEMM over a host-located VMM page are charged its bytes to the
 * host link (link.host.bytes) as when they compute. */
static void test_skipped_work_charges_host_link(void)
{
    enum { N = 256, GRAN = 2 << 20 };
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    CUdeviceptr r, b, c;
    CUmemGenericAllocationHandle hnd;
    REQUIRE(cuMemAddressReserve(&r, GRAN, 0, 0, 0));
    REQUIRE(cuMemCreate(&hnd, GRAN, &p, 0));
    REQUIRE(cuMemMap(r, GRAN, 0, hnd, 0));
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    REQUIRE(cuMemSetAccess(r, GRAN, &d, 1));
    REQUIRE(cuMemAlloc(&b, (size_t)N * N * 4));
    REQUIRE(cuMemAlloc(&c, (size_t)N * N * 4));
    OK(cuCtxSynchronize());
    uint64_t link = emuGetCounter("link.host.bytes"), memsets = emuGetCounter("memsets.skipped");
    OK(cuMemsetD8(r, 0, 1 << 20));
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("memsets.skipped") == memsets + 1);
    EXPECT(emuGetCounter("link.host.bytes") == link + (1 << 20));
    cublasHandle_t h;
    EXPECT(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    uint64_t gemms = emuGetCounter("gemm.skipped");
    link = emuGetCounter("link.host.bytes");
    float one = 1, zero = 0;
    EXPECT(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, (float *)r, N, (float *)b, N, &zero,
                       (float *)c, N) == CUBLAS_STATUS_SUCCESS);   /* A on the host page */
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("gemm.skipped") == gemms + 1);
    EXPECT(emuGetCounter("link.host.bytes") == link + (uint64_t)N * N * 4);
    EXPECT(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
    OK(cuMemFree(b));
    OK(cuMemFree(c));
    OK(cuMemUnmap(r, GRAN));
    OK(cuMemRelease(hnd));
    OK(cuMemAddressFree(r, GRAN));
}

/* Two ranks of one process (ncclCommInitAll): both all-reduces run, meet,
 * are counted, and leave the receive buffers as they were. */
static void test_collectives_counted_not_computed(void)
{
    ncclComm_t comms[2];
    int devs[2] = {0, 1};
    if (ncclCommInitAll(comms, 2, devs) != ncclSuccess) { EXPECT(!"ncclCommInitAll"); return; }
    CUcontext ctx[2];
    CUstream st[2];
    CUdeviceptr buf[2];
    enum { COUNT = 1 << 16, SMALL = 16 };
    static float host[COUNT];
    for (int r = 0; r < 2; r++) {
        ctx[r] = et_setup(r);
        REQUIRE(cuStreamCreate(&st[r], CU_STREAM_NON_BLOCKING));
        REQUIRE(cuMemAlloc(&buf[r], sizeof host));
        for (int i = 0; i < COUNT; i++) host[i] = (float)(r + 1);
        REQUIRE(cuMemcpyHtoD(buf[r], host, sizeof host));
        /* A pageable cuMemcpyHtoD may return before its DMA lands, and st[r]
         * does not wait for the legacy stream: finish it first. */
        REQUIRE(cuCtxSynchronize());
    }
    uint64_t calls = emuGetCounter("nccl.allreduce"), skipped = emuGetCounter("nccl.skipped");
    EXPECT(ncclGroupStart() == ncclSuccess);
    for (int r = 0; r < 2; r++)
        EXPECT(ncclAllReduce((void *)buf[r], (void *)buf[r], COUNT, ncclFloat32, ncclSum, comms[r], st[r]) ==
               ncclSuccess);
    EXPECT(ncclGroupEnd() == ncclSuccess);
    /* 64 bytes: computed, as a framework's metadata exchange must be */
    EXPECT(ncclGroupStart() == ncclSuccess);
    for (int r = 0; r < 2; r++)
        EXPECT(ncclAllReduce((void *)(buf[r] + sizeof host - SMALL * 4), (void *)(buf[r] + sizeof host - SMALL * 4),
                             SMALL, ncclFloat32, ncclSum, comms[r], st[r]) == ncclSuccess);
    EXPECT(ncclGroupEnd() == ncclSuccess);
    EXPECT(ncclAllReduce((void *)buf[0], (void *)buf[0], COUNT, (ncclDataType_t)99, ncclSum, comms[0], st[0]) ==
           ncclInvalidArgument);
    for (int r = 0; r < 2; r++) {
        OK(cuCtxSetCurrent(ctx[r]));
        OK(cuStreamSynchronize(st[r]));
        OK(cuMemcpyDtoH(host, buf[r], sizeof host));
        EXPECT(host[0] == (float)(r + 1) && host[COUNT - SMALL - 1] == (float)(r + 1));   /* not summed */
        EXPECT(host[COUNT - SMALL] == 3.0f && host[COUNT - 1] == 3.0f);                  /* summed */
    }
    EXPECT(emuGetCounter("nccl.allreduce") == calls + 4);
    EXPECT(emuGetCounter("nccl.skipped") == skipped + 2);
    for (int r = 0; r < 2; r++) {
        OK(cuCtxSetCurrent(ctx[r]));
        OK(cuMemFree(buf[r]));
        OK(cuStreamDestroy(st[r]));
        EXPECT(ncclCommDestroy(comms[r]) == ncclSuccess);
    }
    OK(cuCtxSetCurrent(ctx[0]));
}

int main(void)
{
    setenv("EMU_COMPUTE", "skip", 1);
    setenv("EMU_DEVICES", "2", 1);
    et_setup(0);
    test_memset_writes_nothing();
    test_gemm_counted_not_computed();
    test_untouched_pages_cost_nothing();
    test_collectives_counted_not_computed();
    test_skipped_work_charges_host_link();
    return et_finish("test_skip_compute");
}
