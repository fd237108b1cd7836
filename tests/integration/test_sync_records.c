/* The host synchronization records (TS_REC_HOST_SYNC), read back from the
 * event log.
 *
 * The test re-executes itself as a child under LD_PRELOAD=libtrainshim.so
 * with TRAINSHIM_STACKS=8 (TS_SYNC_CHILD=<file>); the child calls every
 * hooked synchronization of the runtime and the driver, some with work
 * still queued (a host function sleeping on the stream), some with nothing
 * to wait for, and writes its stream and event handles to <file>.  The
 * parent reads the child's log with the trainshim log reader and checks
 * one record per call, in order: API, kind, handle, whether work was
 * pending, a stack, the result; the runtime's own driver calls inside a
 * runtime synchronize are not recorded. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../tools/read/logread.c"

cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
CUresult cuStreamSynchronize_ptsz(CUstream stream);

/* Keeps the stream busy long after the synchronize that follows is called. */
static void CUDART_CB sleep_host(void *arg)
{
    (void)arg;
    struct timespec t = { 0, 300 * 1000 * 1000 };
    nanosleep(&t, NULL);
}

static int child(const char *facts_path)
{
    int bad = 0;
    cudaStream_t s;
    cudaEvent_t e;
    bad |= cudaSetDevice(0) != cudaSuccess;
    bad |= cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess;
    bad |= cudaEventCreate(&e) != cudaSuccess;
    /* runtime */
    bad |= cudaLaunchHostFunc(s, sleep_host, NULL) != cudaSuccess;
    bad |= cudaStreamSynchronize(s) != cudaSuccess; /* pending */
    bad |= cudaStreamSynchronize(s) != cudaSuccess; /* idle */
    bad |= cudaLaunchHostFunc(s, sleep_host, NULL) != cudaSuccess;
    bad |= cudaEventRecord(e, s) != cudaSuccess;
    bad |= cudaEventSynchronize(e) != cudaSuccess; /* pending */
    bad |= cudaDeviceSynchronize() != cudaSuccess;
    bad |= cudaStreamSynchronize_ptsz(NULL) != cudaSuccess; /* the per-thread stream, idle */
    /* driver */
    bad |= cuLaunchHostFunc((CUstream)s, sleep_host, NULL) != CUDA_SUCCESS;
    bad |= cuStreamSynchronize((CUstream)s) != CUDA_SUCCESS; /* pending */
    bad |= cuEventSynchronize((CUevent)e) != CUDA_SUCCESS;   /* idle */
    bad |= cuCtxSynchronize() != CUDA_SUCCESS;
    CUcontext ctx = NULL;
    bad |= cuCtxGetCurrent(&ctx) != CUDA_SUCCESS;
    bad |= cuCtxSynchronize_v2(ctx) != CUDA_SUCCESS;
    bad |= cuStreamSynchronize_ptsz(NULL) != CUDA_SUCCESS;
    FILE *facts = fopen(facts_path, "w");
    if (!facts)
        return 2;
    fprintf(facts, "%llx %llx %d\n", (unsigned long long)(uintptr_t)s, (unsigned long long)(uintptr_t)e, bad);
    fclose(facts);
    bad |= cudaEventDestroy(e) != cudaSuccess;
    bad |= cudaStreamDestroy(s) != cudaSuccess;
    return bad;
}

/* ---------------------------------------------------------------- parent */

static int fails;
#define EXPECT(cond, ...)                                                                                    \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            printf("FAIL: " __VA_ARGS__);                                                                    \
            fails++;                                                                                         \
        }                                                                                                    \
    } while (0)

struct want {
    const char *api;
    unsigned kind, pending;
    uint64_t handle;
};

static void check(const struct tslog *log, const struct want *w, size_t n)
{
    EXPECT(log->n_syncs == n, "%zu sync records, want %zu (one per call, none nested)\n", log->n_syncs, n);
    for (size_t i = 0; i < n && i < log->n_syncs; i++) {
        const struct tslog_sync *s = &log->syncs[i];
        char buf[32];
        const char *api = tslog_api_name(log, s->api, buf, sizeof buf);
        EXPECT(!strcmp(api, w[i].api), "record %zu: api %s, want %s\n", i, api, w[i].api);
        EXPECT(s->kind == w[i].kind, "record %zu (%s): kind %u, want %u\n", i, api, s->kind, w[i].kind);
        EXPECT(s->pending == w[i].pending, "record %zu (%s): pending %u, want %u\n", i, api, s->pending,
               w[i].pending);
        EXPECT(s->handle == w[i].handle, "record %zu (%s): handle %llx, want %llx\n", i, api,
               (unsigned long long)s->handle, (unsigned long long)w[i].handle);
        EXPECT(s->result == 0, "record %zu (%s): result %d\n", i, api, s->result);
        EXPECT(s->stack_id != 0, "record %zu (%s): no stack\n", i, api);
        EXPECT(s->blocked_ns > 0 && s->blocked_ns < s->time_ns, "record %zu (%s): blocked %llu ns\n", i, api,
               (unsigned long long)s->blocked_ns);
        if (w[i].pending == TS_SYNC_PENDING) /* the 300 ms host function ran inside the call */
            EXPECT(s->blocked_ns > 1000000, "record %zu (%s): blocked only %llu ns\n", i, api,
                   (unsigned long long)s->blocked_ns);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *facts_env = getenv("TS_SYNC_CHILD");
    if (facts_env)
        return child(facts_env);
    const char *b = getenv("B");
    char shim[4096], dir[] = "/tmp/ts_sync_XXXXXX", logpath[4200], facts_path[4200];
    if (!realpath(b ? b : "build", shim)) {
        printf("FAIL: no build directory %s\n", b ? b : "build");
        return 1;
    }
    strncat(shim, "/libtrainshim.so", sizeof shim - strlen(shim) - 1);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(logpath, sizeof logpath, "%s/child.log", dir);
    snprintf(facts_path, sizeof facts_path, "%s/facts", dir);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("LD_PRELOAD", shim, 1);
        setenv("TRAINSHIM_LOG", logpath, 1);
        setenv("TRAINSHIM_STACKS", "8", 1);
        setenv("TS_SYNC_CHILD", facts_path, 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status = 0, bad = 1;
    waitpid(pid, &status, 0);
    unsigned long long s = 0, e = 0;
    FILE *f = fopen(facts_path, "r");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !f || fscanf(f, "%llx %llx %d", &s, &e, &bad) != 3) {
        printf("FAIL: child under the shim: status %d\n", status);
        return 1;
    }
    fclose(f);
    struct tslog log;
    if (tslog_read_file(logpath, &log) != 0) {
        printf("FAIL: cannot read %s: %s\n", logpath, log.error);
        return 1;
    }
    EXPECT(!log.truncated && log.complete, "log incomplete: %s\n", log.note);
    const struct want w[] = {
        { "cudaStreamSynchronize", TS_SYNC_STREAM, TS_SYNC_PENDING, s },
        { "cudaStreamSynchronize", TS_SYNC_STREAM, TS_SYNC_IDLE, s },
        { "cudaEventSynchronize", TS_SYNC_EVENT, TS_SYNC_PENDING, e },
        { "cudaDeviceSynchronize", TS_SYNC_DEVICE, TS_SYNC_UNKNOWN, 0 },
        { "cudaStreamSynchronize_ptsz", TS_SYNC_STREAM, TS_SYNC_IDLE, (uint64_t)(uintptr_t)cudaStreamPerThread },
        { "cuStreamSynchronize", TS_SYNC_STREAM, TS_SYNC_PENDING, s },
        { "cuEventSynchronize", TS_SYNC_EVENT, TS_SYNC_IDLE, e },
        { "cuCtxSynchronize", TS_SYNC_DEVICE, TS_SYNC_UNKNOWN, 0 },
        { "cuCtxSynchronize_v2", TS_SYNC_DEVICE, TS_SYNC_UNKNOWN, 0 },
        { "cuStreamSynchronize_ptsz", TS_SYNC_STREAM, TS_SYNC_IDLE, (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD },
    };
    check(&log, w, sizeof w / sizeof w[0]);
    tslog_free(&log);
    unlink(logpath);
    unlink(facts_path);
    rmdir(dir);
    if (fails)
        return 1;
    printf("PASS: one host sync record per synchronize call (runtime, driver, per-thread), with kind, handle, "
           "pending work, stack and time blocked\n");
    return 0;
}
