/* test_offload_pause: trainshim_pause / trainshim_resume under
 * TRAINSHIM_OFFLOAD=on (run by test_offload_pause.sh, under the shim).
 *
 *   pause     a 2 GiB working set allocated under tag 1 (8 x 256 MiB) plus a
 *             tag-2 buffer and an IPC-exported one: pause(1) frees at least
 *             95% of the working set's device memory (cudaMemGetInfo), moves
 *             neither the tag-2 nor the exported buffer (their pages stay
 *             device-located), a paused buffer stays usable (a memset and a
 *             copy of it work, over the host link), resume(1) brings the
 *             device memory back, and every byte is what it was; pause plus
 *             resume costs at most 1.1 x bytes / link rate of simulated link
 *             time (the emulator's link.host.ns)
 *             An NCCL-registered buffer (tag 3) does not move while registered
 *             and does after ncclCommDeregister.
 *   gate      a thread keeps copying inside the tag-1 working set (64 MiB)
 *             while the main thread pauses and resumes it 6 times: every
 *             copy succeeds (none runs on a page while it moves: the hooks'
 *             gate holds new work back) and the data is exact
 *   fault=SPEC  the same pause with the emulator's fault rule SPEC set just
 *             before it (a failing cuMemCreate, cuMemMap, cuMemUnmap or
 *             copy): pause reports failure or success, every byte is intact
 *             after resume, and after cudaDeviceReset the emulator's
 *             physical memory counters (device and host) are back at their
 *             values before the first allocation
 * Run bare (as tests/run.sh runs every test binary), it runs itself again
 * under build/libtrainshim.so with TRAINSHIM_OFFLOAD=on, a 4 GiB device and
 * a 25 GB/s host link (the 2 GiB case).  Prints "offload pause ok" on success. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "emu/emu.h"

#define MiB (1ull << 20)
#define NBUF 8
#define BUF_GATE_CHECK (8 * MiB)
static size_t BUF = 256 * MiB; /* 8 x 256 MiB: the 2 GiB working set (fault runs: 8 x 8 MiB) */

static int failures;
#define EXPECT(c)                                                                                            \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #c);                                \
            failures++;                                                                                      \
        }                                                                                                    \
    } while (0)
#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess) {                                                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));           \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

static int (*pause_fn)(unsigned);
static int (*resume_fn)(unsigned);
static unsigned (*tag_fn)(unsigned);

/* Each buffer: a byte value of its own, with a 1 MiB stripe of varied bytes
 * at an offset of its own (so a page that came back from the wrong place, or
 * zeroed, shows). */
static unsigned char stripe[MiB];
static size_t stripe_at(int i, size_t size) { return ((size_t)i * 24 * MiB) % (size - 2 * MiB) + 4096; }

static void fill(char *p, int i, size_t size)
{
    CHECK(cudaMemset(p, 0x11 * (i + 1), size));
    for (size_t k = 0; k < MiB; k++)
        stripe[k] = (unsigned char)(k * 131 + i * 7 + 1);
    CHECK(cudaMemcpy(p + stripe_at(i, size), stripe, MiB, cudaMemcpyHostToDevice));
}

static bool intact(const char *p, int i, size_t size)
{
    static unsigned char got[8 * MiB];
    bool ok = true;
    size_t soff = stripe_at(i, size);
    for (size_t off = 0; off < size && ok; off += sizeof got) {
        CHECK(cudaMemcpy(got, p + off, sizeof got, cudaMemcpyDeviceToHost));
        for (size_t k = 0; k < sizeof got && ok; k++) {
            size_t at = off + k;
            unsigned char want = at >= soff && at < soff + MiB ? (unsigned char)((at - soff) * 131 + i * 7 + 1)
                                                               : (unsigned char)(0x11 * (i + 1));
            ok = got[k] == want;
        }
    }
    return ok;
}

/* Where the page under p lives: CU_MEM_LOCATION_TYPE_DEVICE or a host type. */
static int location_of(const void *p)
{
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop;
    if (cuMemRetainAllocationHandle(&h, (void *)p) != CUDA_SUCCESS)
        return -1;
    int loc = cuMemGetAllocationPropertiesFromHandle(&prop, h) == CUDA_SUCCESS ? (int)prop.location.type : -1;
    cuMemRelease(h);
    return loc;
}

static size_t free_now(void)
{
    size_t f = 0, t = 0;
    CHECK(cudaMemGetInfo(&f, &t));
    return f;
}

/* Not under the shim: runs itself again under build/libtrainshim.so (next
 * to build/tests/), its event log in a directory removed afterwards. */
static int run_under_shim(char **argv)
{
    char self[4096], shim[4200], dir[] = "/tmp/test_offload_pause.XXXXXX", log[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char *cut = n > 0 ? (self[n] = 0, strstr(self, "/tests/integration/")) : NULL;
    if (!cut || getenv("TEST_OFFLOAD_REEXEC") || !mkdtemp(dir)) {
        fprintf(stderr, "trainshim_pause/resume/tag not found: run under the shim\n");
        return 1;
    }
    snprintf(shim, sizeof shim, "%.*s/libtrainshim.so", (int)(cut - self), self);
    snprintf(log, sizeof log, "%s/trainshim.log", dir);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("LD_PRELOAD", shim, 1);
        setenv("TEST_OFFLOAD_REEXEC", "1", 1);
        setenv("TRAINSHIM_OFFLOAD", "on", 1);
        setenv("EMU_DEVICE_MEMORY", "4G", 1);
        setenv("EMU_HOST_LINK_GBPS", "25", 1);
        setenv("TRAINSHIM_LOG", log, 1);
        execv(self, argv);
        perror("execv");
        _exit(127);
    }
    int status = 1;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        status = 1;
    unlink(log);
    rmdir(dir);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* The gate case: the worker copies a MiB of each buffer over another of the
 * same buffer and rewrites a third with the buffer's own byte (the data
 * stays what it was), on its own stream, until told to stop. */
static volatile int stop_worker;
static char *gate_buf[NBUF];
static void *copy_worker(void *arg)
{
    long *copies = arg;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int k = 0; !__atomic_load_n(&stop_worker, __ATOMIC_ACQUIRE); k++) {
        char *a = gate_buf[k % NBUF];
        CHECK(cudaMemcpyAsync(a + 6 * MiB, a + 5 * MiB, MiB, cudaMemcpyDeviceToDevice, s));
        CHECK(cudaMemsetAsync(a + 7 * MiB, 0x11 * (k % NBUF + 1), MiB, s));
        CHECK(cudaStreamSynchronize(s));
        (*copies)++;
    }
    CHECK(cudaStreamDestroy(s));
    return NULL;
}

static int gate_case(void)
{
    BUF = 8 * MiB;
    tag_fn(1);
    for (int i = 0; i < NBUF; i++) {
        CHECK(cudaMalloc((void **)&gate_buf[i], BUF));
        CHECK(cudaMemset(gate_buf[i], 0x11 * (i + 1), BUF));
    }
    tag_fn(0);
    CHECK(cudaDeviceSynchronize());
    long copies = 0;
    pthread_t t;
    pthread_create(&t, NULL, copy_worker, &copies);
    int failed = 0;
    for (int r = 0; r < 6; r++) {
        failed += pause_fn(1) != 0;
        failed += resume_fn(1) != 0;
    }
    __atomic_store_n(&stop_worker, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    EXPECT(failed == 0);
    EXPECT(copies > 0);
    static unsigned char got[BUF_GATE_CHECK];
    bool same = true;
    for (int i = 0; i < NBUF; i++) {
        CHECK(cudaMemcpy(got, gate_buf[i], sizeof got, cudaMemcpyDeviceToHost));
        for (size_t k = 0; k < sizeof got; k++)
            same &= got[k] == (unsigned char)(0x11 * (i + 1));
    }
    EXPECT(same);
    printf("gate: %ld copies while pausing and resuming 6 times\n", copies);
    if (failures)
        return 1;
    printf("offload pause ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    const char *fault = argc > 1 && strncmp(argv[1], "fault=", 6) == 0 ? argv[1] + 6 : NULL;
    pause_fn = (int (*)(unsigned))dlsym(RTLD_DEFAULT, "trainshim_pause");
    resume_fn = (int (*)(unsigned))dlsym(RTLD_DEFAULT, "trainshim_resume");
    tag_fn = (unsigned (*)(unsigned))dlsym(RTLD_DEFAULT, "trainshim_tag");
    if (!pause_fn || !resume_fn || !tag_fn)
        return run_under_shim(argv);
    if (argc > 1 && !strcmp(argv[1], "gate"))
        return gate_case();
    if (fault)
        BUF = 8 * MiB;
    CHECK(cudaFree(0));
    uint64_t phys0 = emuGetCounter("phys.current"), host0 = emuGetCounter("phys.host.current");
    char *buf[NBUF], *other, *exported;
    unsigned old = tag_fn(1);
    EXPECT(old == 0);
    for (int i = 0; i < NBUF; i++) {
        CHECK(cudaMalloc((void **)&buf[i], BUF));
        fill(buf[i], i, BUF);
    }
    tag_fn(2);
    CHECK(cudaMalloc((void **)&other, 64 * MiB));
    fill(other, 8, 64 * MiB);
    tag_fn(3);
    char *reg;
    CHECK(cudaMalloc((void **)&reg, 8 * MiB));
    fill(reg, 9, 8 * MiB);
    tag_fn(0);
    CHECK(cudaMalloc((void **)&exported, 8 * MiB));
    CHECK(cudaMemset(exported, 0x5a, 8 * MiB));
    cudaIpcMemHandle_t ipc;
    CHECK(cudaIpcGetMemHandle(&ipc, exported));
    CHECK(cudaDeviceSynchronize());

    size_t free0 = free_now();
    uint64_t ns0 = emuGetCounter("link.host.ns");
    if (fault)
        EXPECT(emuSetFault(fault) == 0);
    int prc = pause_fn(1);
    if (fault)
        emuSetFault("");
    size_t free1 = free_now();
    if (!fault) {
        EXPECT(prc == 0);
        EXPECT(free1 >= free0 + (size_t)(0.95 * NBUF * BUF));
        EXPECT(location_of(buf[3]) != CU_MEM_LOCATION_TYPE_DEVICE);
        EXPECT(location_of(other) == CU_MEM_LOCATION_TYPE_DEVICE);    /* another tag */
        EXPECT(location_of(exported) == CU_MEM_LOCATION_TYPE_DEVICE); /* IPC-exported: never moves */
        EXPECT(pause_fn(1) == 0);                                     /* nothing more to move */
        /* paused memory is slow, not gone */
        uint64_t link0 = emuGetCounter("link.host.bytes");
        CHECK(cudaMemset(buf[5] + 100 * MiB, 0x66, MiB));
        CHECK(cudaMemset(buf[5] + 100 * MiB, 0x11 * 6, MiB));
        CHECK(cudaDeviceSynchronize());
        EXPECT(emuGetCounter("link.host.bytes") == link0 + 2 * MiB);
    } else {
        printf("pause with fault %s: %s\n", fault, prc == 0 ? "completed" : "failed (rolled back)");
    }
    int rrc = resume_fn(1);
    EXPECT(rrc == 0);
    size_t free2 = free_now();
    if (!(free2 <= free0 + 2 * MiB && free2 + 2 * MiB >= free0))
        fprintf(stderr, "free before pause %zu, paused %zu, resumed %zu\n", free0, free1, free2);
    EXPECT(free2 <= free0 + 2 * MiB && free2 + 2 * MiB >= free0);
    EXPECT(location_of(buf[3]) == CU_MEM_LOCATION_TYPE_DEVICE);
    if (!fault) {
        /* 2 x 2 GiB over the link, plus the two 1 MiB memsets */
        double rate = atof(getenv("EMU_HOST_LINK_GBPS") ? getenv("EMU_HOST_LINK_GBPS") : "0");
        double ideal = rate > 0 ? (2.0 * NBUF * BUF + 2 * MiB) / rate : 0;
        uint64_t ns = emuGetCounter("link.host.ns") - ns0;
        printf("pause+resume of %d MiB: simulated link time %.1f ms, bytes/rate %.1f ms\n", (int)(NBUF * BUF / MiB),
               ns / 1e6, ideal / 1e6);
        EXPECT(rate <= 0 || ns <= 1.1 * ideal);
    }
    for (int i = 0; i < NBUF; i++)
        EXPECT(intact(buf[i], i, BUF));
    EXPECT(intact(other, 8, 64 * MiB));
    char probe[4];
    CHECK(cudaMemcpy(probe, exported + 5 * MiB, sizeof probe, cudaMemcpyDeviceToHost));
    EXPECT(memcmp(probe, "ZZZZ", 4) == 0);

    if (!fault) {
        ncclComm_t comm;
        int devs[1] = { 0 };
        void *rh = NULL;
        EXPECT(ncclCommInitAll(&comm, 1, devs) == ncclSuccess);
        EXPECT(ncclCommRegister(comm, reg, 8 * MiB, &rh) == ncclSuccess);
        EXPECT(pause_fn(3) == 0);
        EXPECT(location_of(reg + 4 * MiB) == CU_MEM_LOCATION_TYPE_DEVICE); /* registered: never moves */
        EXPECT(ncclCommDeregister(comm, rh) == ncclSuccess);
        EXPECT(pause_fn(3) == 0);
        EXPECT(location_of(reg + 4 * MiB) != CU_MEM_LOCATION_TYPE_DEVICE); /* now it may */
        EXPECT(resume_fn(3) == 0);
        EXPECT(location_of(reg + 4 * MiB) == CU_MEM_LOCATION_TYPE_DEVICE);
        ncclCommDestroy(comm);
    }
    EXPECT(intact(reg, 9, 8 * MiB));
    CHECK(cudaFree(reg));
    for (int i = 0; i < NBUF; i++)
        CHECK(cudaFree(buf[i]));
    CHECK(cudaFree(other));
    CHECK(cudaFree(exported));
    CHECK(cudaDeviceReset());
    EXPECT(emuGetCounter("phys.current") == phys0);
    EXPECT(emuGetCounter("phys.host.current") == host0);
    if (failures) {
        fprintf(stderr, "test_offload_pause: %d check(s) failed\n", failures);
        return 1;
    }
    printf("offload pause ok\n");
    return 0;
}
