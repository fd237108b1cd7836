/* Emulated runtime memory kinds: cudaPointerGetAttributes on pageable,
 * pinned (cudaMallocHost, cudaHostAlloc, cudaHostRegister), device and
 * managed memory; host flags and mapped device pointers; managed memory with
 * the CUDA 13 cudaMemLocation prefetch/advise signatures; legacy IPC handles
 * within the process. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/wait.h>
#include "emu.h"

extern char **environ;

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)
#define CHECK_RT(call, want) do { cudaError_t e_ = (call); if (e_ != (want)) { \
        fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #call, (int)e_, \
                cudaGetErrorName(e_), (int)(want)); failures++; } } while (0)

static void test_attributes(void)
{
    struct cudaPointerAttributes a;

    /* pageable host memory: success, "unregistered" (CUDA 11+) */
    char *pageable = malloc(4096);
    memset(pageable, 0, 4096);
    memset(&a, 0x5c, sizeof a);
    CHECK_RT(cudaPointerGetAttributes(&a, pageable), cudaSuccess);
    CHECK(a.type == cudaMemoryTypeUnregistered);
    CHECK(a.devicePointer == NULL);
    int stack_var = 0;
    CHECK_RT(cudaPointerGetAttributes(&a, &stack_var), cudaSuccess);
    CHECK(a.type == cudaMemoryTypeUnregistered);

    /* device memory, including an interior pointer */
    char *d = NULL;
    CHECK_RT(cudaMalloc((void **)&d, 1 << 20), cudaSuccess);
    CHECK_RT(cudaPointerGetAttributes(&a, d + 100), cudaSuccess);
    CHECK(a.type == cudaMemoryTypeDevice);
    CHECK(a.device == 0);
    CHECK(a.devicePointer == d + 100);
    CHECK(a.hostPointer == NULL);

    /* pinned: cudaMallocHost */
    char *ph = NULL;
    CHECK_RT(cudaMallocHost((void **)&ph, 8192), cudaSuccess);
    CHECK_RT(cudaPointerGetAttributes(&a, ph), cudaSuccess);
    CHECK(a.type == cudaMemoryTypeHost);
    CHECK(a.hostPointer == ph);
    CHECK(a.devicePointer != NULL);

    /* cudaHostAlloc with flags */
    char *mapped = NULL;
    CHECK_RT(cudaHostAlloc((void **)&mapped, 8192, cudaHostAllocMapped | cudaHostAllocPortable), cudaSuccess);
    unsigned flags = 0;
    CHECK_RT(cudaHostGetFlags(&flags, mapped), cudaSuccess);
    CHECK(flags & cudaHostAllocMapped);
    CHECK(flags & cudaHostAllocPortable);
    void *dev_alias = NULL;
    CHECK_RT(cudaHostGetDevicePointer(&dev_alias, mapped, 0), cudaSuccess);
    CHECK(dev_alias != NULL);
    CHECK_RT(cudaPointerGetAttributes(&a, mapped + 10), cudaSuccess);
    CHECK(a.type == cudaMemoryTypeHost);
    CHECK_RT(cudaHostAlloc((void **)&mapped, 64, 0x80), cudaErrorInvalidValue);
    CHECK_RT(cudaHostGetFlags(&flags, pageable), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    /* cudaHostRegister: pageable becomes pinned, and back */
    CHECK_RT(cudaHostRegister(pageable, 4096, cudaHostRegisterDefault), cudaSuccess);
    CHECK_RT(cudaPointerGetAttributes(&a, pageable), cudaSuccess);
    CHECK(a.type == cudaMemoryTypeHost);
    CHECK_RT(cudaHostRegister(pageable, 4096, cudaHostRegisterDefault), cudaErrorHostMemoryAlreadyRegistered);
    CHECK_RT(cudaHostUnregister(pageable), cudaSuccess);
    CHECK_RT(cudaPointerGetAttributes(&a, pageable), cudaSuccess);
    CHECK(a.type == cudaMemoryTypeUnregistered);
    CHECK_RT(cudaHostUnregister(pageable), cudaErrorHostMemoryNotRegistered);
    (void)cudaGetLastError();

    /* managed */
    char *m = NULL;
    CHECK_RT(cudaMallocManaged((void **)&m, 1 << 20, cudaMemAttachGlobal), cudaSuccess);
    CHECK_RT(cudaPointerGetAttributes(&a, m), cudaSuccess);
    CHECK(a.type == cudaMemoryTypeManaged);
    CHECK(a.devicePointer == m && a.hostPointer == m);
    CHECK_RT(cudaMallocManaged((void **)&m, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
    CHECK_RT(cudaPointerGetAttributes(NULL, d), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    CHECK_RT(cudaFree(d), cudaSuccess);
    CHECK_RT(cudaFreeHost(ph), cudaSuccess);
    CHECK_RT(cudaFreeHost(mapped), cudaSuccess);
    CHECK_RT(cudaFree(m), cudaSuccess);
    /* freed device memory is no longer device memory */
    CHECK_RT(cudaPointerGetAttributes(&a, d), cudaSuccess);
    CHECK(a.type != cudaMemoryTypeDevice);
    free(pageable);
}

static void test_managed_prefetch(void)
{
    const size_t n = 4 << 20;
    unsigned char *m = NULL;
    CHECK_RT(cudaMallocManaged((void **)&m, n, cudaMemAttachGlobal), cudaSuccess);
    memset(m, 0x12, n);                       /* host touch */
    cudaStream_t s;
    CHECK_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    struct cudaMemLocation dev0 = { .type = cudaMemLocationTypeDevice, .id = 0 };
    struct cudaMemLocation host = { .type = cudaMemLocationTypeHost, .id = 0 };
    emuResetCounters();
    CHECK_RT(cudaMemPrefetchAsync(m, n, dev0, 0, s), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(emuGetCounter("managed.migrations.h2d") > 0);
    /* device work sees the data; the host copy back migrates */
    unsigned char *out = malloc(n);
    CHECK_RT(cudaMemcpy(out, m, n, cudaMemcpyDefault), cudaSuccess);
    CHECK(out[0] == 0x12 && out[n - 1] == 0x12);
    CHECK_RT(cudaMemAdvise(m, n, cudaMemAdviseSetPreferredLocation, host), cudaSuccess);
    CHECK_RT(cudaMemAdvise(m, n, cudaMemAdviseSetAccessedBy, dev0), cudaSuccess);
    CHECK_RT(cudaMemPrefetchAsync(m, n, host, 0, s), cudaSuccess);
    CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(emuGetCounter("managed.migrations.d2h") > 0);
    CHECK(m[12345] == 0x12);
    /* prefetching device memory that is not managed is an error */
    void *d = NULL;
    CHECK_RT(cudaMalloc(&d, 4096), cudaSuccess);
    cudaError_t e = cudaMemPrefetchAsync(d, 4096, dev0, 0, s);
    CHECK(e == cudaErrorInvalidValue);
    (void)cudaGetLastError();
    CHECK_RT(cudaFree(d), cudaSuccess);
    CHECK_RT(cudaFree(m), cudaSuccess);
    CHECK_RT(cudaStreamDestroy(s), cudaSuccess);
    free(out);
}

/* The importing side, run as a separate process: opens the handle, checks
 * the exporter's bytes, writes its own, closes. */
static int ipc_child(const char *hex)
{
    cudaIpcMemHandle_t h;
    if (strlen(hex) != 2 * sizeof h)
        return 2;
    for (size_t i = 0; i < sizeof h; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return 2;
        ((unsigned char *)&h)[i] = (unsigned char)v;
    }
    void *d = NULL;
    CHECK_RT(cudaIpcOpenMemHandle(&d, h, cudaIpcMemLazyEnablePeerAccess), cudaSuccess);
    if (!d)
        return 3;
    unsigned char buf[4096];
    CHECK_RT(cudaMemcpy(buf, d, sizeof buf, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(buf[0] == 0xa5 && buf[4095] == 0xa5);
    CHECK_RT(cudaMemset(d, 0x5a, 16), cudaSuccess);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
    CHECK_RT(cudaIpcCloseMemHandle(d), cudaSuccess);
    return failures ? 1 : 0;
}

static void test_ipc(void)
{
    void *d = NULL;
    CHECK_RT(cudaMalloc(&d, 1 << 20), cudaSuccess);
    CHECK_RT(cudaMemset(d, 0xa5, 1 << 20), cudaSuccess);
    CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
    cudaIpcMemHandle_t h;
    memset(&h, 0, sizeof h);
    CHECK_RT(cudaIpcGetMemHandle(&h, d), cudaSuccess);
    int nonzero = 0;
    for (size_t i = 0; i < sizeof h.reserved; i++)
        nonzero |= h.reserved[i];
    CHECK(nonzero);
    char host[16] = {0};
    CHECK_RT(cudaIpcGetMemHandle(&h, host), cudaErrorInvalidValue);
    CHECK_RT(cudaIpcGetMemHandle(&h, d), cudaSuccess);
    /* the exporting process cannot open its own handle */
    void *self = NULL;
    CHECK_RT(cudaIpcOpenMemHandle(&self, h, cudaIpcMemLazyEnablePeerAccess), cudaErrorDeviceUninitialized);
    (void)cudaGetLastError();

    char hex[2 * sizeof h + 1];
    for (size_t i = 0; i < sizeof h; i++)
        snprintf(hex + 2 * i, 3, "%02x", ((unsigned char *)&h)[i]);
    char *argv[] = { "test_rt_pointer", "--ipc-child", hex, NULL };
    pid_t pid;
    CHECK(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) == 0);
    int status = -1;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the importer's write is visible here: the same physical memory */
    unsigned char back[32];
    CHECK_RT(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(back[0] == 0x5a && back[15] == 0x5a && back[16] == 0xa5);
    CHECK_RT(cudaFree(d), cudaSuccess);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--ipc-child") == 0)
        return ipc_child(argv[2]);
    test_attributes();
    test_managed_prefetch();
    test_ipc();
    if (failures) {
        fprintf(stderr, "test_rt_pointer: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_rt_pointer: ok\n");
    return 0;
}
