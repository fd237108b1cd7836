/* test_devmem_semantics: what a program sees of device allocations is the
 * same with and without trainshim's allocator (run by test_devmem_semantics.sh
 * plain, under the shim in each mode, and with TRAINSHIM_ALLOC=off).
 *
 * stdout carries only what must be identical in every run (error codes,
 * checksums, attributes); the argument says which allocator the run must
 * have used, checked through the emulator's counters:
 *   plain   every allocation reached the driver (cuMemAlloc_v2 per request)
 *   pool    served from the pool (no cuMemAlloc_v2, few cuMemCreate)
 *   caching served from cached segments (few cuMemAlloc_v2)
 * Exit 0 when every check holds; each failed check prints FAIL. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/emu.h"

#include "check.h"

enum { ROUNDS = 10, NBUF = 100 };

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* Allocation churn: buffers of mixed sizes written with a pattern, read back
 * after others were freed and reallocated. */
static uint64_t churn(uint64_t *allocs)
{
    void *buf[NBUF] = {0};
    size_t len[NBUF] = {0};
    unsigned char *host = malloc(4 << 20), *back = malloc(4 << 20);
    uint64_t h = 1469598103934665603ull;
    unsigned seed = 12345;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < NBUF; i++) {
            seed = seed * 1103515245u + 12345u;
            if (buf[i] && (seed >> 16) % 3 == 0) {
                /* read back what was written before the churn around it */
                CHECK(cudaMemcpy(back, buf[i], len[i], cudaMemcpyDeviceToHost) == cudaSuccess, "readback %d", i);
                h = fnv(h, back, len[i]);
                CHECK(cudaFree(buf[i]) == cudaSuccess, "free %d", i);
                buf[i] = NULL;
            }
            if (!buf[i]) {
                seed = seed * 1103515245u + 12345u;
                len[i] = (seed >> 8) % 3 == 0 ? 1 + (seed >> 4) % (3 << 20) : 1 + (seed >> 4) % 70000;
                CHECK(cudaMalloc(&buf[i], len[i]) == cudaSuccess, "malloc %zu", len[i]);
                (*allocs)++;
                for (size_t k = 0; k < len[i]; k++) host[k] = (unsigned char)(k * 7 + i + r);
                CHECK(cudaMemcpy(buf[i], host, len[i], cudaMemcpyHostToDevice) == cudaSuccess, "fill %d", i);
            }
        }
    }
    for (int i = 0; i < NBUF; i++) {
        CHECK(cudaMemcpy(back, buf[i], len[i], cudaMemcpyDeviceToHost) == cudaSuccess, "final readback %d", i);
        h = fnv(h, back, len[i]);
        CHECK(cudaFree(buf[i]) == cudaSuccess, "final free %d", i);
    }
    free(host);
    free(back);
    return h;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "plain";
    CHECK(cudaFree(NULL) == cudaSuccess, "cudaFree(NULL)");
    void *p = (void *)1;
    cudaError_t m0 = cudaMalloc(&p, 0);
    printf("malloc0 %d %p\n", (int)m0, p);
    printf("free-unknown %d\n", (int)cudaFree((void *)(uintptr_t)0x1234));
    printf("lasterror %d\n", (int)cudaGetLastError());
    int hostvar = 0;
    printf("free-host %d\n", (int)cudaFree(&hostvar));
    cudaGetLastError();

    size_t free0 = 0, total0 = 0;
    CHECK(cudaMemGetInfo(&free0, &total0) == cudaSuccess, "meminfo");
    emuResetCounters();
    uint64_t allocs = 0;
    uint64_t h = churn(&allocs);
    printf("churn %016llx\n", (unsigned long long)h);
    uint64_t drv_allocs = emuGetCounter("calls.cuMemAlloc_v2"), creates = emuGetCounter("calls.cuMemCreate");
    fprintf(stderr, "%s: %llu allocations -> cuMemAlloc_v2 %llu cuMemCreate %llu phys.peak %llu\n", mode,
            (unsigned long long)allocs, (unsigned long long)drv_allocs, (unsigned long long)creates,
            (unsigned long long)emuGetCounter("phys.peak"));
    if (!strcmp(mode, "plain")) {
        CHECK(drv_allocs == allocs, "every cudaMalloc reaches the driver: %llu of %llu", (unsigned long long)drv_allocs,
              (unsigned long long)allocs);
    } else if (!strcmp(mode, "pool")) {
        CHECK(drv_allocs == 0, "pool mode calls cuMemAlloc_v2 %llu times", (unsigned long long)drv_allocs);
        CHECK(creates > 0 && creates * 4 < allocs, "pool pages: %llu cuMemCreate for %llu allocations",
              (unsigned long long)creates, (unsigned long long)allocs);
    } else {
        CHECK(drv_allocs > 0 && drv_allocs * 4 < allocs, "caching segments: %llu cuMemAlloc_v2 for %llu allocations",
              (unsigned long long)drv_allocs, (unsigned long long)allocs);
    }

    /* cudaMemGetInfo honesty: memory the pool holds idle counts as free. */
    size_t free1 = 0, total1 = 0;
    CHECK(cudaMemGetInfo(&free1, &total1) == cudaSuccess, "meminfo after");
    CHECK(free1 == free0 && total1 == total0, "free before %zu after %zu (total %zu %zu)", free0, free1, total0, total1);
    size_t dfree = 0, dtotal = 0;
    CHECK(cuMemGetInfo(&dfree, &dtotal) == CUDA_SUCCESS && dfree == free0, "cuMemGetInfo free %zu want %zu", dfree, free0);

    /* pointer queries on a live allocation */
    void *q = NULL;
    CHECK(cudaMalloc(&q, 1000) == cudaSuccess, "malloc 1000");
    struct cudaPointerAttributes at;
    memset(&at, 0, sizeof at);
    cudaError_t ar = cudaPointerGetAttributes(&at, q);
    printf("attributes %d type %d device %d devptr-ok %d\n", (int)ar, (int)at.type, at.device, at.devicePointer == q);
    CUdeviceptr base = 0;
    size_t rsize = 0;
    CUresult rr = cuMemGetAddressRange(&base, &rsize, (CUdeviceptr)(uintptr_t)q);
    printf("range %d base-ok %d size %zu\n", (int)rr, base == (CUdeviceptr)(uintptr_t)q, rsize);
    /* the allocation's range from an address inside it, as every query
     * names it (NCCL, UCX and MPI find a buffer's allocation this way) */
    CUdeviceptr inside = (CUdeviceptr)(uintptr_t)q + 700;
    base = 0;
    rsize = 0;
    rr = cuMemGetAddressRange(&base, &rsize, inside);
    printf("interior range %d base-ok %d size %zu\n", (int)rr, base == (CUdeviceptr)(uintptr_t)q, rsize);
    CUdeviceptr abase = 0;
    size_t asize = 0;
    CUresult pa = cuPointerGetAttribute(&abase, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside);
    CUresult pb = cuPointerGetAttribute(&asize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside);
    printf("range attribute %d %d base-ok %d size %zu\n", (int)pa, (int)pb, abase == (CUdeviceptr)(uintptr_t)q, asize);
    CUpointer_attribute which[3] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                     CU_POINTER_ATTRIBUTE_RANGE_SIZE };
    unsigned mtype = 0;
    abase = 0;
    asize = 0;
    void *vals[3] = { &mtype, &abase, &asize };
    pa = cuPointerGetAttributes(3, which, vals, inside);
    printf("range attributes %d type %u base-ok %d size %zu\n", (int)pa, mtype, abase == (CUdeviceptr)(uintptr_t)q,
           asize);
    /* IPC: the expandable pool exports the block itself (a trainshim handle,
     * test_devmem_ipc opens it in another process); the caching pool has no
     * handle naming just the block and refuses rather than hand out a handle
     * to the wrong memory */
    cudaIpcMemHandle_t ipc;
    cudaError_t ir = cudaIpcGetMemHandle(&ipc, q);
    cudaGetLastError();
    if (!strcmp(mode, "plain")) CHECK(ir == cudaSuccess, "IPC handle without the pool: %d", (int)ir);
    else if (!strcmp(mode, "caching")) CHECK(ir == cudaErrorInvalidValue, "IPC handle of a caching-pool block: %d", (int)ir);
    else CHECK(ir == cudaSuccess, "IPC handle of an expandable-pool block: %d", (int)ir);
    /* a refused free leaves the runtime's last error as the real call does */
    cudaError_t fi = cudaFree((char *)q + 512);
    cudaError_t li = cudaGetLastError(), li2 = cudaGetLastError();   /* the error, then reset */
    printf("interior-free %d last %d last-again %d\n", (int)fi, (int)li, (int)li2);
    cudaError_t f1 = cudaFree(q), f2 = cudaFree(q);
    cudaError_t lf = cudaGetLastError();
    printf("double-free %d %d last %d\n", (int)f1, (int)f2, (int)lf);

    /* driver API */
    CUdeviceptr d = 0;
    printf("cuMemAlloc %d\n", (int)cuMemAlloc(&d, 5000));
    printf("cuMemsetD8 %d\n", (int)cuMemsetD8(d, 0x5a, 5000));
    unsigned char hb[5000];
    CUresult c1 = cuMemcpyDtoH(hb, d, 5000);
    printf("cuMemcpyDtoH %d byte %d\n", (int)c1, hb[4999]);
    CUresult c2 = cuMemFree(d), c3 = cuMemFree(d);
    printf("cuMemFree %d again %d\n", (int)c2, (int)c3);
    printf("cuMemAlloc0 %d\n", (int)cuMemAlloc(&d, 0));

    /* stream-ordered */
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s) == cudaSuccess, "stream");
    void *a = NULL;
    printf("mallocAsync %d\n", (int)cudaMallocAsync(&a, 3 << 20, s));
    printf("memsetAsync %d\n", (int)cudaMemsetAsync(a, 3, 3 << 20, s));
    printf("freeAsync %d\n", (int)cudaFreeAsync(a, s));
    printf("sync %d\n", (int)cudaStreamSynchronize(s));
    CHECK(cudaStreamDestroy(s) == cudaSuccess, "stream destroy");

    /* too large for the device: the real error, and the runtime's last error */
    void *huge = NULL;
    cudaError_t hr = cudaMalloc(&huge, (size_t)1 << 50);
    printf("huge %d last %d\n", (int)hr, (int)cudaGetLastError());
    /* asked again at once (as PyTorch retries), then after other work: the
     * shim's report is printed for the first and the third (the script
     * counts them) */
    hr = cudaMalloc(&huge, (size_t)1 << 50);
    printf("huge again %d last %d\n", (int)hr, (int)cudaGetLastError());
    void *small = NULL;
    CHECK(cudaMalloc(&small, 4096) == cudaSuccess && cudaFree(small) == cudaSuccess, "small between");
    hr = cudaMalloc(&huge, (size_t)1 << 50);
    printf("huge after other work %d last %d\n", (int)hr, (int)cudaGetLastError());

    /* device reset releases everything */
    CHECK(cudaDeviceReset() == cudaSuccess, "reset");
    CHECK(emuGetCounter("phys.current") == 0, "phys.current after reset %llu",
          (unsigned long long)emuGetCounter("phys.current"));
    void *after = NULL;
    CHECK(cudaMalloc(&after, 4096) == cudaSuccess && after, "malloc after reset");
    CHECK(cudaFree(after) == cudaSuccess, "free after reset");
    printf("done\n");
    return failures ? 1 : 0;
}
