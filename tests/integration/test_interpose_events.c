/* The events the hooks report, read back from the event log.
 *
 * The test re-executes itself as a child under LD_PRELOAD=libtrainshim.so
 * (TS_EVENTS_CHILD=<file>); the child makes known runtime and driver calls
 * and writes the pointers and results it got to <file>; the parent reads the
 * child's log with the trainshim log reader (tools/read/logread.c, compiled in)
 * and checks every alloc/free/copy/error/device record against them:
 * API, size, pointer, stream, direction, host side pageable/pinned, sync or
 * async, result; and that nested calls (the runtime's own driver calls) are
 * not logged as the program's. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h" /* enum ts_copy_dir, ts_host_kind */
#include "../../tools/read/logread.c"

enum { N = 1 << 18 };

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                 cudaStream_t stream);

/* ---------------------------------------------------------------- child */

static int child(const char *facts_path)
{
    FILE *facts = fopen(facts_path, "w");
    if (!facts) return 2;
    int bad = 0;
    bad |= cudaSetDevice(0) != cudaSuccess;
    unsigned char *pageable = malloc(N), *pinned = NULL;
    memset(pageable, 7, N);
    void *d = NULL;
    bad |= cudaMalloc(&d, N) != cudaSuccess;
    void *first_d = d;
    bad |= cudaMemcpy(d, pageable, N, cudaMemcpyHostToDevice) != cudaSuccess;
    bad |= cudaMallocHost((void **)&pinned, N) != cudaSuccess;
    cudaStream_t s;
    bad |= cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess;
    bad |= cudaMemcpyAsync(pinned, d, N, cudaMemcpyDeviceToHost, s) != cudaSuccess;
    bad |= cudaStreamSynchronize(s) != cudaSuccess;
    bad |= cudaMemcpy(pageable, d, N / 2, cudaMemcpyDefault) != cudaSuccess;
    int on_stack;
    cudaError_t bogus = cudaFree(&on_stack);
    (void)cudaGetLastError();
    bad |= cudaFreeHost(pinned) != cudaSuccess;
    bad |= cudaFree(d) != cudaSuccess;
    CUdeviceptr dd = 0;
    bad |= cuMemAlloc(&dd, 4096) != CUDA_SUCCESS;
    bad |= cuMemcpyHtoD(dd, pageable, 4096) != CUDA_SUCCESS;
    bad |= cuMemFree(dd) != CUDA_SUCCESS;
    CUdeviceptr first_dd = dd;
    bad |= cudaStreamDestroy(s) != cudaSuccess;

    /* more allocation kinds, per-thread stream, 2D, unified driver copy, VMM */
    void *managed = NULL, *host = NULL;
    bad |= cudaMallocManaged(&managed, 8192, cudaMemAttachGlobal) != cudaSuccess;
    bad |= cudaHostAlloc(&host, 4096, cudaHostAllocDefault) != cudaSuccess;
    bad |= cudaMalloc(&d, N) != cudaSuccess;
    bad |= cudaMemcpyAsync_ptsz(pageable, d, 1024, cudaMemcpyDeviceToHost, 0) != cudaSuccess;
    bad |= cudaStreamSynchronize(cudaStreamPerThread) != cudaSuccess;
    bad |= cudaMemcpy2D(d, 256, pageable, 512, 100, 10, cudaMemcpyHostToDevice) != cudaSuccess;
    bad |= cuMemAlloc(&dd, 4096) != CUDA_SUCCESS;
    bad |= cuMemcpy(dd, (CUdeviceptr)(uintptr_t)host, 4096) != CUDA_SUCCESS;
    bad |= cuMemFree(dd) != CUDA_SUCCESS;
    void *pitched = NULL;
    size_t pitch = 0;
    bad |= cudaMallocPitch(&pitched, &pitch, 100, 10) != cudaSuccess;
    bad |= cudaMemcpyPeer(pitched, 0, d, 0, 512) != cudaSuccess;
    bad |= cudaFree(pitched) != cudaSuccess;
    bad |= cudaFree(d) != cudaSuccess;
    bad |= cudaFreeHost(host) != cudaSuccess;
    bad |= cudaFree(managed) != cudaSuccess;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CUmemGenericAllocationHandle handle = 0;
    bad |= cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS;
    bad |= cuMemCreate(&handle, gran, &prop, 0) != CUDA_SUCCESS;
    bad |= cuMemRelease(handle) != CUDA_SUCCESS;

    fprintf(facts, "%llx %llx %llx %llx %llx %d %d\n", (unsigned long long)(uintptr_t)first_d,
            (unsigned long long)(uintptr_t)pinned, (unsigned long long)(uintptr_t)s, (unsigned long long)first_dd,
            (unsigned long long)(uintptr_t)&on_stack, (int)bogus, bad);
    fprintf(facts, "%llx %llx %llx %llx %llx %zu\n", (unsigned long long)(uintptr_t)managed,
            (unsigned long long)(uintptr_t)host, (unsigned long long)handle, (unsigned long long)gran,
            (unsigned long long)(uintptr_t)pitched, pitch);
    fclose(facts);
    free(pageable);
    return bad ? 3 : 0;
}

/* --------------------------------------------------------------- parent */

static int failures;
#define EXPECT(cond, ...) do { if (!(cond)) { printf("FAIL: " __VA_ARGS__); printf("  [%s]\n", #cond); failures++; } } while (0)

static const struct tslog *g_log;

static const char *api_of(const struct tslog_event *e)
{
    static char buf[64];
    return tslog_api_name(g_log, e->api, buf, sizeof buf);
}

/* The n-th (0-based) event of type with this api name, or NULL. */
static const struct tslog_event *find(uint16_t type, const char *api, int nth)
{
    for (size_t i = 0; i < g_log->n_events; i++) {
        const struct tslog_event *e = &g_log->events[i];
        if (e->type == type && strcmp(api_of(e), api) == 0 && nth-- == 0) return e;
    }
    return NULL;
}

static int count(uint16_t type, const char *api)
{
    int n = 0;
    while (find(type, api, n)) n++;
    return n;
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *facts_env = getenv("TS_EVENTS_CHILD");
    if (facts_env) return child(facts_env);

    const char *b = getenv("B");
    char shim[4096], dir[] = "/tmp/ts_events_XXXXXX", logpath[4200], facts_path[4200];
    if (!realpath(b ? b : "build", shim)) { printf("FAIL: no build directory %s\n", b ? b : "build"); return 1; }
    strncat(shim, "/libtrainshim.so", sizeof shim - strlen(shim) - 1);
    if (access(shim, R_OK) != 0) { printf("FAIL: %s not built\n", shim); return 1; }
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(logpath, sizeof logpath, "%s/child.log", dir);
    snprintf(facts_path, sizeof facts_path, "%s/facts", dir);

    pid_t pid = fork();
    if (pid == 0) {
        setenv("LD_PRELOAD", shim, 1);
        setenv("TRAINSHIM_LOG", logpath, 1);
        setenv("TS_EVENTS_CHILD", facts_path, 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { printf("FAIL: child under the shim: status %d\n", status); return 1; }

    unsigned long long d, pinned, stream, dd, stack;
    int bogus, bad;
    FILE *f = fopen(facts_path, "r");
    unsigned long long managed, host, handle, gran, pitched;
    size_t pitch;
    if (!f || fscanf(f, "%llx %llx %llx %llx %llx %d %d", &d, &pinned, &stream, &dd, &stack, &bogus, &bad) != 7 ||
        fscanf(f, "%llx %llx %llx %llx %llx %zu", &managed, &host, &handle, &gran, &pitched, &pitch) != 6) {
        printf("FAIL: child facts unreadable\n");
        return 1;
    }
    fclose(f);

    struct tslog log;
    if (tslog_read_file(logpath, &log) != 0) { printf("FAIL: cannot read %s: %s\n", logpath, log.error); return 1; }
    g_log = &log;
    EXPECT(!log.truncated, "log truncated: %s\n", log.note);

    /* device record: once, for device 0 */
    int dev0 = 0;
    for (size_t i = 0; i < log.n_devices; i++)
        if (log.devices[i].ordinal == 0) {
            dev0++;
            EXPECT(log.devices[i].name[0] && log.devices[i].total_mem > 0 && log.devices[i].sm_count > 0,
                   "device 0 record incomplete: '%s' %llu B %d SMs\n", log.devices[i].name,
                   (unsigned long long)log.devices[i].total_mem, log.devices[i].sm_count);
        }
    EXPECT(dev0 == 1, "%d device records for device 0, want 1\n", dev0);

    /* allocations: the program's own, with their sizes, pointers, devices */
    const struct tslog_event *e = find(TS_REC_ALLOC, "cudaMalloc", 0);
    EXPECT(e && e->ptr == d && e->bytes == N && e->device == 0 && e->result == 0, "cudaMalloc alloc event\n");
    e = find(TS_REC_ALLOC, "cudaMallocHost", 0);
    EXPECT(e && e->ptr == pinned && e->bytes == N && e->device == -1 && e->result == 0, "cudaMallocHost alloc event\n");
    e = find(TS_REC_ALLOC, "cuMemAlloc_v2", 0);
    EXPECT(e && e->ptr == dd && e->bytes == 4096 && e->device == 0 && e->result == 0, "cuMemAlloc_v2 alloc event\n");
    /* the runtime's cuMemAlloc_v2 under cudaMalloc is nested: not the program's */
    EXPECT(count(TS_REC_ALLOC, "cuMemAlloc_v2") == 2, "%d cuMemAlloc_v2 alloc events, want 2 (nested ones logged?)\n",
           count(TS_REC_ALLOC, "cuMemAlloc_v2"));
    EXPECT(count(TS_REC_ALLOC, "cuMemAllocHost_v2") == 0, "nested cuMemAllocHost_v2 logged\n");

    /* frees, including the failed one */
    e = find(TS_REC_FREE, "cudaFree", 0);
    EXPECT(e && e->ptr == stack && e->result == bogus && bogus != 0, "failed cudaFree event\n");
    e = find(TS_REC_FREE, "cudaFree", 1);
    EXPECT(e && e->ptr == d && e->result == 0, "cudaFree event\n");
    e = find(TS_REC_FREE, "cudaFreeHost", 0);
    EXPECT(e && e->ptr == pinned && e->result == 0, "cudaFreeHost event\n");
    e = find(TS_REC_FREE, "cuMemFree_v2", 0);
    EXPECT(e && e->ptr == dd && e->result == 0 && count(TS_REC_FREE, "cuMemFree_v2") == 2, "cuMemFree_v2 event\n");

    /* copies: direction, host side, sync/async, stream, bytes */
    e = find(TS_REC_COPY, "cudaMemcpy", 0);
    EXPECT(e && e->dir == TS_H2D && e->host_kind == TS_HOST_PAGEABLE && !e->async && e->bytes == N && e->result == 0,
           "cudaMemcpy H2D pageable event (dir %d host %d async %d)\n", e ? e->dir : -1, e ? e->host_kind : -1,
           e ? e->async : -1);
    e = find(TS_REC_COPY, "cudaMemcpyAsync", 0);
    EXPECT(e && e->dir == TS_D2H && e->host_kind == TS_HOST_PINNED && e->async && e->stream == stream &&
               e->bytes == N && e->result == 0,
           "cudaMemcpyAsync D2H pinned event (dir %d host %d async %d)\n", e ? e->dir : -1, e ? e->host_kind : -1,
           e ? e->async : -1);
    e = find(TS_REC_COPY, "cudaMemcpy", 1);
    EXPECT(e && e->dir == TS_D2H && e->host_kind == TS_HOST_PAGEABLE && e->bytes == N / 2,
           "cudaMemcpy(Default) classified D2H pageable (dir %d host %d)\n", e ? e->dir : -1, e ? e->host_kind : -1);
    e = find(TS_REC_COPY, "cuMemcpyHtoD_v2", 0);
    EXPECT(e && e->dir == TS_H2D && e->host_kind == TS_HOST_PAGEABLE && e->bytes == 4096 && !e->async,
           "cuMemcpyHtoD_v2 event\n");
    EXPECT(count(TS_REC_COPY, "cuMemcpyHtoD_v2") == 1 && count(TS_REC_COPY, "cuMemcpyDtoHAsync_v2") == 0,
           "nested driver copies logged\n");

    /* more kinds */
    e = find(TS_REC_ALLOC, "cudaMallocManaged", 0);
    EXPECT(e && e->ptr == managed && e->bytes == 8192 && e->device == 0, "cudaMallocManaged alloc event\n");
    e = find(TS_REC_FREE, "cudaFree", 4);
    EXPECT(e && e->ptr == managed, "cudaFree of the managed buffer\n");
    e = find(TS_REC_ALLOC, "cudaMallocPitch", 0);
    EXPECT(e && e->ptr == pitched && pitch >= 100 && e->bytes == pitch * 10, "cudaMallocPitch alloc event (pitch x rows)\n");
    e = find(TS_REC_FREE, "cudaFree", 2);
    EXPECT(e && e->ptr == pitched, "cudaFree of the pitched buffer\n");
    e = find(TS_REC_COPY, "cudaMemcpyPeer", 0);
    EXPECT(e && e->dir == TS_PEER && e->host_kind == TS_HOST_NONE && e->bytes == 512 && e->result == 0,
           "cudaMemcpyPeer event\n");
    e = find(TS_REC_ALLOC, "cudaHostAlloc", 0);
    EXPECT(e && e->ptr == host && e->bytes == 4096 && e->device == -1, "cudaHostAlloc alloc event\n");
    e = find(TS_REC_COPY, "cudaMemcpyAsync_ptsz", 0);
    EXPECT(e && e->stream == (uint64_t)(uintptr_t)cudaStreamPerThread && e->dir == TS_D2H &&
               e->host_kind == TS_HOST_PAGEABLE && e->async && e->bytes == 1024,
           "cudaMemcpyAsync_ptsz on stream 0 logged as the per-thread stream (stream %llx)\n",
           e ? (unsigned long long)e->stream : 0ull);
    e = find(TS_REC_COPY, "cudaMemcpy2D", 0);
    EXPECT(e && e->bytes == 1000 && e->dir == TS_H2D && e->host_kind == TS_HOST_PAGEABLE, "cudaMemcpy2D event\n");
    e = find(TS_REC_COPY, "cuMemcpy", 0);
    EXPECT(e && e->bytes == 4096 && e->dir == TS_H2D && e->host_kind == TS_HOST_PINNED,
           "unified cuMemcpy from pinned host classified H2D pinned (dir %d host %d)\n", e ? e->dir : -1,
           e ? e->host_kind : -1);
    EXPECT(count(TS_REC_COPY, "cuMemcpy2D_v2") == 0, "the runtime's nested cuMemcpy2D_v2 logged\n");
    e = find(TS_REC_ALLOC, "cuMemCreate", 0);
    EXPECT(e && e->ptr == handle && e->bytes == gran && e->device == 0 && e->result == 0, "cuMemCreate event\n");
    e = find(TS_REC_FREE, "cuMemRelease", 0);
    EXPECT(e && e->ptr == handle && e->result == 0, "cuMemRelease event\n");

    /* errors returned to the program */
    e = find(TS_REC_ERROR, "cudaFree", 0);
    EXPECT(e && e->result == bogus, "cudaFree error event\n");
    int errors = 0;
    for (size_t i = 0; i < log.n_events; i++) errors += log.events[i].type == TS_REC_ERROR;
    EXPECT(errors == 1, "%d error events, want 1\n", errors);

    tslog_free(&log);
    unlink(logpath);
    unlink(facts_path);
    rmdir(dir);
    printf("%s\n", failures ? "FAILED" : "ok: alloc/free/copy/error/device events as the program made them");
    return failures ? 1 : 0;
}
