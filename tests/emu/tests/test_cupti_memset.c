/* test_cupti_memset.c: with CUPTI_ACTIVITY_KIND_MEMSET enabled the emulated
 * CUPTI records each memset the driver ran as a CUpti_ActivityMemset4: value
 * (as given), bytes, memory kind (device 3, pinned 2), stream
 * (cudaStreamGetId), device, a distinct correlation id, start <= end; a
 * memset while the kind is disabled is not recorded. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define EXPECT(c) do { if (!(c)) { fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)
#define REQUIRE(x) do { int rc_ = (int)(x); if (rc_) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, rc_); exit(1); } } while (0)

static CUpti_ActivityMemset4 sets[16];
static int nsets, nother;
static __typeof__(&cuptiActivityGetNextRecord) next_record;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *size = 1 << 14;
    *buffer = aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx, (void)stream_id, (void)size;
    CUpti_Activity *rec = NULL;
    while (next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET && nsets < 16)
            sets[nsets++] = *(CUpti_ActivityMemset4 *)rec;
        else
            nother++;
    }
    free(buffer);
}

int main(void)
{
    void *h = dlopen("libcupti.so.13", RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen libcupti.so.13: %s\n", dlerror()); return 1; }
    __typeof__(&cuptiActivityRegisterCallbacks) reg = (__typeof__(reg))dlsym(h, "cuptiActivityRegisterCallbacks");
    __typeof__(&cuptiActivityEnable) enable = (__typeof__(enable))dlsym(h, "cuptiActivityEnable");
    __typeof__(&cuptiActivityDisable) disable = (__typeof__(disable))dlsym(h, "cuptiActivityDisable");
    __typeof__(&cuptiActivityFlushAll) flush = (__typeof__(flush))dlsym(h, "cuptiActivityFlushAll");
    next_record = (__typeof__(next_record))dlsym(h, "cuptiActivityGetNextRecord");
    if (!reg || !enable || !disable || !flush || !next_record) { fprintf(stderr, "libcupti lacks an entry point\n"); return 1; }
    REQUIRE(reg(buffer_requested, buffer_completed));

    void *d, *pinned;
    REQUIRE(cudaMalloc(&d, 4096));
    REQUIRE(cudaMallocHost(&pinned, 256));
    cudaStream_t s;
    REQUIRE(cudaStreamCreate(&s));
    unsigned long long sid = 0;
    REQUIRE(cudaStreamGetId(s, &sid));

    REQUIRE(cudaMemsetAsync(d, 1, 64, s)); /* ran before the kind was enabled: no record */
    REQUIRE(cudaStreamSynchronize(s));
    REQUIRE(enable(CUPTI_ACTIVITY_KIND_MEMSET));
    REQUIRE(cudaMemsetAsync(d, 7, 1000, s));
    REQUIRE(cuMemsetD32Async((CUdeviceptr)d, 0xdeadbeef, 100, (CUstream)s));
    REQUIRE(cudaMemsetAsync(pinned, 3, 256, s));
    REQUIRE(cudaStreamSynchronize(s));
    unsigned char back[1000];
    REQUIRE(cudaMemcpy(back, (char *)d + 400, 8, cudaMemcpyDeviceToHost));
    EXPECT(back[0] == 7 && ((unsigned char *)pinned)[255] == 3);
    REQUIRE(flush(0));
    REQUIRE(disable(CUPTI_ACTIVITY_KIND_MEMSET));
    REQUIRE(cudaMemsetAsync(d, 9, 64, s));
    REQUIRE(cudaStreamSynchronize(s));
    REQUIRE(flush(0));

    EXPECT(nother == 0);
    EXPECT(nsets == 3);
    if (nsets == 3) {
        EXPECT(sets[0].value == 7 && sets[0].bytes == 1000 && sets[0].memoryKind == 3);
        EXPECT(sets[1].value == 0xdeadbeef && sets[1].bytes == 400 && sets[1].memoryKind == 3);
        EXPECT(sets[2].value == 3 && sets[2].bytes == 256 && sets[2].memoryKind == 2);
        for (int i = 0; i < 3; i++) {
            EXPECT(sets[i].kind == CUPTI_ACTIVITY_KIND_MEMSET);
            EXPECT(sets[i].streamId == sid && sets[i].deviceId == 0);
            EXPECT(sets[i].correlationId != 0 && sets[i].start > 0 && sets[i].start <= sets[i].end);
            if (i) EXPECT(sets[i].correlationId > sets[i - 1].correlationId && sets[i - 1].end <= sets[i].start);
        }
    }
    if (failures) { fprintf(stderr, "test_cupti_memset: %d failures\n", failures); return 1; }
    printf("test_cupti_memset: ok\n");
    return 0;
}
