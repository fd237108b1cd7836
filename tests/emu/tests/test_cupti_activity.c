/* test_cupti_activity.c: the emulated CUPTI activity API records what the
 * emulated driver ran: one CUpti_ActivityKernel10 per kernel (name, times,
 * grid, block, stream, correlation) and one CUpti_ActivityMemcpy6 per copy
 * (copy kind, memory kinds, bytes, times), delivered at
 * cuptiActivityFlushAll through the client's buffers; disabled kinds are
 * not recorded; cuptiActivityGetNextRecord ends with
 * CUPTI_ERROR_MAX_LIMIT_REACHED.  libcupti.so.13 is opened with dlopen, as
 * profilers do. */
#include <cupti.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include "driver/exec_testutil.h"

static struct {
    __typeof__(&cuptiActivityRegisterCallbacks) register_callbacks;
    __typeof__(&cuptiActivityEnable) enable;
    __typeof__(&cuptiActivityDisable) disable;
    __typeof__(&cuptiActivityFlushAll) flush_all;
    __typeof__(&cuptiActivityGetNextRecord) next_record;
    __typeof__(&cuptiGetTimestamp) timestamp;
    __typeof__(&cuptiGetResultString) result_string;
    __typeof__(&cuptiSubscribe) subscribe;
    __typeof__(&cuptiUnsubscribe) unsubscribe;
    __typeof__(&cuptiEnableDomain) enable_domain;
} cupti;

#define MAX_SEEN 64
static CUpti_ActivityKernel10 kernels[MAX_SEEN];
static CUpti_ActivityMemcpy6 copies[MAX_SEEN];
static int nkernels, ncopies, nbuffers, nother;
/* room for one kernel record: a flush of several records needs several buffers */
static size_t buffer_bytes = (sizeof(CUpti_ActivityKernel10) + 15) & ~(size_t)7;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, buffer_bytes);
    *size = buffer_bytes;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx; (void)stream_id;
    EXPECT(valid <= size);
    nbuffers++;
    CUpti_Activity *rec = NULL;
    CUptiResult rc;
    while ((rc = cupti.next_record(buffer, valid, &rec)) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && nkernels < MAX_SEEN)
            kernels[nkernels++] = *(CUpti_ActivityKernel10 *)rec;
        else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY && ncopies < MAX_SEEN)
            copies[ncopies++] = *(CUpti_ActivityMemcpy6 *)rec;
        else
            nother++;
    }
    EXPECT(rc == CUPTI_ERROR_MAX_LIMIT_REACHED);
    free(buffer);
}

static char kernel_stub;
static void scale_impl(void **args, const emu_launch *l)
{
    float *x = *(float **)args[0];
    int n = *(int *)args[1];
    unsigned threads = l->grid.x * l->grid.y * l->block.x;
    for (unsigned i = 0; i < threads && (int)i < n; i++) x[i] *= 2.0f;
}

static void load_cupti(void)
{
    void *h = dlopen("libcupti.so.13", RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen libcupti.so.13: %s\n", dlerror()); exit(1); }
#define SYM(field, name) if (!(cupti.field = (__typeof__(cupti.field))dlsym(h, #name))) { \
        fprintf(stderr, "no %s\n", #name); exit(1); }
    SYM(register_callbacks, cuptiActivityRegisterCallbacks);
    SYM(enable, cuptiActivityEnable);
    SYM(disable, cuptiActivityDisable);
    SYM(flush_all, cuptiActivityFlushAll);
    SYM(next_record, cuptiActivityGetNextRecord);
    SYM(timestamp, cuptiGetTimestamp);
    SYM(result_string, cuptiGetResultString);
    SYM(subscribe, cuptiSubscribe);
    SYM(unsubscribe, cuptiUnsubscribe);
    SYM(enable_domain, cuptiEnableDomain);
}

static const CUpti_ActivityMemcpy6 *find_copy(int copy_kind, int src, int dst, uint64_t bytes)
{
    for (int i = 0; i < ncopies; i++)
        if (copies[i].copyKind == copy_kind && copies[i].srcKind == src && copies[i].dstKind == dst &&
            copies[i].bytes == bytes)
            return &copies[i];
    return NULL;
}

static void check_misc(void)
{
    const char *s = NULL;
    EXPECT(cupti.result_string(CUPTI_ERROR_MAX_LIMIT_REACHED, &s) == CUPTI_SUCCESS &&
           s && !strcmp(s, "CUPTI_ERROR_MAX_LIMIT_REACHED"));
    CUpti_SubscriberHandle sub, sub2;
    EXPECT(cupti.subscribe(&sub, NULL, NULL) == CUPTI_SUCCESS);
    EXPECT(cupti.subscribe(&sub2, NULL, NULL) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    EXPECT(cupti.enable_domain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS);
    EXPECT(cupti.enable_domain(1, sub, CUPTI_CB_DOMAIN_INVALID) == CUPTI_ERROR_INVALID_PARAMETER);
    EXPECT(cupti.unsubscribe(sub) == CUPTI_SUCCESS);
    EXPECT(cupti.unsubscribe(sub) == CUPTI_ERROR_INVALID_PARAMETER);
    uint8_t empty[8] = {0};
    CUpti_Activity *rec = NULL;
    EXPECT(cupti.next_record(empty, 0, &rec) == CUPTI_ERROR_MAX_LIMIT_REACHED);
}

int main(void)
{
    load_cupti();
    et_setup(0);
    check_misc();
    EXPECT(cupti.register_callbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS);
    EXPECT(cupti.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS);
    EXPECT(cupti.enable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS);

    size_t sizes[2] = { sizeof(float *), sizeof(int) };
    EXPECT(emuRegisterKernel(&kernel_stub, "_Z5scalePfi", scale_impl, 2, sizes) == 0);
    CUfunction f;
    REQUIRE((CUresult)emuGetFunction((void **)&f, &kernel_stub, NULL));
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    unsigned long long sid = 0;
    REQUIRE(cuStreamGetId(s, &sid));

    enum { N = 384 };
    float host[N], *pinned;
    for (int i = 0; i < N; i++) host[i] = (float)i;
    REQUIRE(cuMemHostAlloc((void **)&pinned, sizeof host, 0));
    CUdeviceptr d, d2;
    REQUIRE(cuMemAlloc(&d, sizeof host));
    REQUIRE(cuMemAlloc(&d2, sizeof host));

    uint64_t t0;
    EXPECT(cupti.timestamp(&t0) == CUPTI_SUCCESS);
    OK(cuMemcpyHtoDAsync(d, host, sizeof host, s));              /* pageable -> device */
    int n = N;
    void *params[] = { &d, &n };
    OK(cuLaunchKernel(f, 3, 2, 1, 64, 1, 1, 0, s, params, NULL));
    OK(cuMemcpyDtoDAsync(d2, d, sizeof host, s));                /* device -> device */
    OK(cuMemcpyDtoHAsync(pinned, d2, 100, s));                   /* device -> pinned */
    OK(cuStreamSynchronize(s));
    uint64_t t1;
    EXPECT(cupti.timestamp(&t1) == CUPTI_SUCCESS);
    EXPECT(pinned[10] == 20.0f);

    EXPECT(nbuffers == 0);   /* nothing is delivered before the flush */
    EXPECT(cupti.flush_all(0) == CUPTI_SUCCESS);
    EXPECT(nbuffers >= 2);   /* 4 records do not fit one buffer */
    EXPECT(nkernels == 1);
    EXPECT(ncopies == 3);
    EXPECT(nother == 0);
    if (nkernels == 1) {
        const CUpti_ActivityKernel10 *k = &kernels[0];
        EXPECT(k->name && !strcmp(k->name, "_Z5scalePfi"));
        EXPECT(k->gridX == 3 && k->gridY == 2 && k->gridZ == 1);
        EXPECT(k->blockX == 64 && k->blockY == 1 && k->blockZ == 1);
        EXPECT(k->streamId == (uint32_t)sid);
        EXPECT(t0 <= k->start && k->start <= k->end && k->end <= t1);
        EXPECT(k->correlationId != 0);
    }
    const CUpti_ActivityMemcpy6 *h2d = find_copy(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                                                 CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, sizeof host);
    const CUpti_ActivityMemcpy6 *d2d = find_copy(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                                                 CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, sizeof host);
    const CUpti_ActivityMemcpy6 *d2h = find_copy(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                                                 CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 100);
    EXPECT(h2d && d2d && d2h);
    if (h2d && d2d && d2h && nkernels == 1) {
        /* one stream: the records are in issue order, with distinct correlations */
        EXPECT(h2d->end <= kernels[0].start && kernels[0].end <= d2d->start && d2d->end <= d2h->start);
        EXPECT(h2d->correlationId < kernels[0].correlationId && kernels[0].correlationId < d2d->correlationId &&
               d2d->correlationId < d2h->correlationId);
        EXPECT(h2d->streamId == (uint32_t)sid && d2h->streamId == (uint32_t)sid);
        EXPECT(t0 <= h2d->start && h2d->start <= h2d->end && d2h->end <= t1);
    }

    /* A second flush has nothing more; disabled kinds are not recorded. */
    nkernels = ncopies = nbuffers = 0;
    EXPECT(cupti.flush_all(0) == CUPTI_SUCCESS);
    EXPECT(nbuffers == 0);
    EXPECT(cupti.disable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS);
    OK(cuMemcpyHtoDAsync(d, host, sizeof host, s));
    OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
    OK(cuStreamSynchronize(s));
    EXPECT(cupti.flush_all(0) == CUPTI_SUCCESS);
    EXPECT(nkernels == 1 && ncopies == 0);
    EXPECT(cupti.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS);
    nkernels = 0;
    OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
    OK(cuStreamSynchronize(s));
    EXPECT(cupti.flush_all(0) == CUPTI_SUCCESS);
    EXPECT(nkernels == 0);

    OK(cuMemFree(d));
    OK(cuMemFree(d2));
    OK(cuMemFreeHost(pinned));
    OK(cuStreamDestroy(s));
    if (et_failures) { fprintf(stderr, "test_cupti_activity: %d check(s) failed\n", et_failures); return 1; }
    printf("test_cupti_activity: ok\n");
    return 0;
}
