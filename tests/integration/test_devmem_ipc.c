/* test_devmem_ipc: legacy CUDA IPC between two processes (run by
 * test_devmem_ipc.sh in several modes; run directly it checks the emulator's
 * own legacy IPC with no shim at all).
 *
 * Process A (this program, role "exporter") allocates blocks with cudaMalloc,
 * among them one that does not start at a 2 MiB page and spans several pages
 * and a small one inside a page, writes a pattern, exports the blocks with
 * cudaIpcGetMemHandle and starts B (role "importer", with LD_PRELOAD set to
 * $TEST_IPC_SHIM when given) with the handles over a pipe.  B opens them
 * (a second open gives the same pointer), checks the exact bytes, writes a
 * new pattern by cudaMemcpy and a kernel, synchronizes, closes, and answers
 * over the pipe; A checks that it sees B's bytes.  Then A frees a block and
 * B opens its handle again: under the pool this must fail (trainshim's
 * handles die with their block) and the block still alive must open.
 * Finally a process without the shim (role "foreign") opens A's handle: it
 * must fail when A's memory is pooled, and work for the driver's own handle.
 *
 * Arguments of the exporter: "pooled" when A runs under the shim with the
 * expandable pool (the layout and after-free checks apply); else the memory
 * is the driver's (no shim, or TRAINSHIM_ALLOC=off); "caching": A under the
 * caching pool, whose blocks are refused. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "emu/emu.h"

static int failures;
static const char *role = "exporter";
#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (!(cond)) {                                     \
            printf("FAIL [%s]: %s: ", role, #cond);        \
            printf(__VA_ARGS__);                           \
            printf("\n");                                  \
            fflush(stdout);                                \
            failures++;                                    \
        }                                                  \
    } while (0)

#define NBLOCKS 3
#define PAGE (2u << 20)
struct msg_handles {
    cudaIpcMemHandle_t h[NBLOCKS];
    size_t size[NBLOCKS];
    unsigned seed;
    int pooled;
};

/* Byte k of block i in phase ph (0: A's pattern, 1: B's). */
static unsigned char pattern(int i, size_t k, unsigned seed, int ph)
{
    uint64_t x = (k + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)i << 56) ^ ((uint64_t)seed << 20) ^ (uint64_t)ph * 0x5bd1e995u;
    x ^= x >> 29;
    return (unsigned char)(x * 0xBF58476D1CE4E5B9ull >> 56);
}
static void fill(unsigned char *buf, int i, size_t n, unsigned seed, int ph)
{
    for (size_t k = 0; k < n; k++) buf[k] = pattern(i, k, seed, ph);
}
/* The kernel B runs over the opened memory: every byte ^= 0x5A. */
#define KERNEL_XOR 0x5A
static char xor_id;
static void xor_impl(void **args, const emu_launch *l)
{
    (void)l;
    unsigned char *p = *(unsigned char **)args[0];
    size_t n = *(size_t *)args[1];
    for (size_t k = 0; k < n; k++) p[k] ^= KERNEL_XOR;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}
static int read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Starts this program in `child_role` with pipes; preload: the shim or none. */
static pid_t spawn(const char *child_role, const char *preload, int *to_child, int *from_child)
{
    int down[2], up[2];
    if (pipe(down) || pipe(up)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        char rfd[16], wfd[16];
        snprintf(rfd, sizeof rfd, "%d", down[0]);
        snprintf(wfd, sizeof wfd, "%d", up[1]);
        if (preload && *preload) setenv("LD_PRELOAD", preload, 1);
        else unsetenv("LD_PRELOAD");
        unsetenv("TRAINSHIM_ALLOC");
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) _exit(127);
        self[n] = 0;
        char *argv[] = {self, (char *)child_role, rfd, wfd, NULL};
        execv(self, argv);
        _exit(127);
    }
    close(down[0]);
    close(up[1]);
    *to_child = down[1];
    *from_child = up[0];
    return pid;
}

static int wait_child(pid_t pid, const char *what)
{
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exited with status 0x%x", what, st);
    return st;
}

/* ---- B: a process with the shim ---------------------------------------------- */
static int importer(int rfd, int wfd)
{
    struct msg_handles m;
    if (read_all(rfd, &m, sizeof m)) { printf("FAIL [importer]: no handles\n"); return 1; }
    CHECK(cudaSetDevice(0) == cudaSuccess, "device 0");
    size_t sizes[2] = {sizeof(void *), sizeof(size_t)};
    CHECK(emuRegisterKernel(&xor_id, NULL, xor_impl, 2, sizes) == 0, "emuRegisterKernel");
    for (int i = 0; i < NBLOCKS; i++) {
        size_t n = m.size[i];
        void *p = NULL, *again = NULL;
        CHECK(cudaIpcOpenMemHandle(&p, m.h[i], 0) == cudaErrorInvalidValue, "block %d: flags 0 are refused", i);
        cudaError_t e = cudaIpcOpenMemHandle(&p, m.h[i], cudaIpcMemLazyEnablePeerAccess);
        CHECK(e == cudaSuccess && p, "block %d: open: %d", i, (int)e);
        if (e != cudaSuccess) continue;
        CHECK(cudaIpcOpenMemHandle(&again, m.h[i], cudaIpcMemLazyEnablePeerAccess) == cudaSuccess && again == p,
              "block %d: a second open gives the same pointer (%p, %p)", i, p, again);
        CHECK(cudaIpcCloseMemHandle(again) == cudaSuccess, "block %d: first close", i);
        /* the driver's entry points share the opening (same pointer, one more reference) */
        CUipcMemHandle dh;
        memcpy(&dh, &m.h[i], sizeof dh);
        CUdeviceptr dp = 0;
        CHECK(cuIpcOpenMemHandle(&dp, dh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS
              && dp == (CUdeviceptr)(uintptr_t)p, "block %d: cuIpcOpenMemHandle gives the same pointer", i);
        CHECK(cuIpcCloseMemHandle(dp) == CUDA_SUCCESS, "block %d: cuIpcCloseMemHandle", i);
        unsigned char *got = malloc(n), *want = malloc(n);
        memset(got, 0, n);
        CHECK(cudaMemcpy(got, p, n, cudaMemcpyDeviceToHost) == cudaSuccess, "block %d: read", i);
        fill(want, i, n, m.seed, 0);
        size_t bad = n;
        for (size_t k = 0; k < n && bad == n; k++) if (got[k] != want[k]) bad = k;
        CHECK(bad == n, "block %d (%zu bytes): byte %zu is %u, A wrote %u", i, n, bad, bad < n ? got[bad] : 0,
              bad < n ? want[bad] : 0);
        /* B's bytes: a copy, then a kernel over the opened memory */
        fill(want, i, n, m.seed, 1);
        for (size_t k = 0; k < n; k++) want[k] ^= KERNEL_XOR;
        CHECK(cudaMemcpy(p, want, n, cudaMemcpyHostToDevice) == cudaSuccess, "block %d: write", i);
        void *args[] = {&p, &n};
        dim3 one = {1, 1, 1};
        CHECK(cudaLaunchKernel(&xor_id, one, one, args, 0, 0) == cudaSuccess, "block %d: kernel", i);
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "block %d: sync", i);
        CHECK(cudaIpcCloseMemHandle(p) == cudaSuccess, "block %d: last close", i);
        CHECK(cudaIpcCloseMemHandle(p) != cudaSuccess, "block %d: closing a closed pointer fails", i);
        free(got);
        free(want);
    }
    char done = failures ? 'F' : 'D';
    write_all(wfd, &done, 1);
    /* A has freed blocks 1 and 2 and kept block 0 */
    char freed = 0;
    if (read_all(rfd, &freed, 1) || freed != 'X') { printf("FAIL [importer]: no free notice\n"); return 1; }
    void *p = NULL;
    if (m.pooled) {
        for (int i = 1; i <= 2; i++) {
            p = NULL;
            cudaError_t e = cudaIpcOpenMemHandle(&p, m.h[i], cudaIpcMemLazyEnablePeerAccess);
            CHECK(e == cudaErrorInvalidResourceHandle && p == NULL,
                  "opening the handle of block %d, which A freed, fails with cudaErrorInvalidResourceHandle: %d %p",
                  i, (int)e, p);
        }
    }
    p = NULL;
    CHECK(cudaIpcOpenMemHandle(&p, m.h[0], cudaIpcMemLazyEnablePeerAccess) == cudaSuccess && p,
          "block 0, still alive, opens again");
    if (p) {
        unsigned char first = 0, want = pattern(0, 0, m.seed, 1);
        CHECK(cudaMemcpy(&first, p, 1, cudaMemcpyDeviceToHost) == cudaSuccess && first == want,
              "block 0 reopened: %u, expected %u", first, want);
        CHECK(cudaIpcCloseMemHandle(p) == cudaSuccess, "close block 0 again");
    }
    done = failures ? 'F' : 'D';
    write_all(wfd, &done, 1);
    return failures ? 1 : 0;
}

/* ---- a process without the shim ---------------------------------------------- */
static int foreign(int rfd, int wfd)
{
    struct msg_handles m;
    if (read_all(rfd, &m, sizeof m)) { printf("FAIL [foreign]: no handles\n"); return 1; }
    CHECK(cudaSetDevice(0) == cudaSuccess, "device 0");
    void *p = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, m.h[0], cudaIpcMemLazyEnablePeerAccess);
    if (m.pooled) {
        CHECK(e != cudaSuccess && p == NULL, "a process without the shim gets an error, not memory: %d %p", (int)e, p);
    } else {
        CHECK(e == cudaSuccess && p, "the driver's own handle opens without the shim: %d", (int)e);
        unsigned char first = 0;
        if (p) {
            CHECK(cudaMemcpy(&first, p, 1, cudaMemcpyDeviceToHost) == cudaSuccess
                  && first == pattern(0, 0, m.seed, 1), "foreign read: %u", first);
            CHECK(cudaIpcCloseMemHandle(p) == cudaSuccess, "foreign close");
        }
    }
    char done = failures ? 'F' : 'D';
    write_all(wfd, &done, 1);
    return failures ? 1 : 0;
}

/* ---- A -------------------------------------------------------------------- */
static int exporter(int pooled)
{
    const char *shim = getenv("TEST_IPC_SHIM");
    const char *seed_env = getenv("EMU_SEED");
    struct msg_handles m;
    memset(&m, 0, sizeof m);
    m.seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 10) : 7;
    m.pooled = pooled;
    CHECK(cudaSetDevice(0) == cudaSuccess, "device 0");
    /* fillers put block 0 mid-page in the arena of blocks over 4 MiB (the
     * step plan's; without it, the large arena) and block 1 mid-page in the
     * small one; block 2 is a plain 8 MiB block.  Block 0 follows its filler
     * (the lowest free range before a plan; without a plan, starting in the
     * filler's last page maps fewer new pages than starting on a page of
     * its own) */
    void *filler_large = NULL, *filler_small = NULL, *blk[NBLOCKS] = {NULL, NULL, NULL};
    m.size[0] = (4u << 20) + 4096;
    m.size[1] = 64u << 10;
    m.size[2] = 8u << 20;
    CHECK(cudaMalloc(&filler_large, 5u << 20) == cudaSuccess, "filler large");
    CHECK(cudaMalloc(&filler_small, 100u << 10) == cudaSuccess, "filler small");
    for (int i = 0; i < NBLOCKS; i++) CHECK(cudaMalloc(&blk[i], m.size[i]) == cudaSuccess, "block %d", i);
    if (pooled) {
        uintptr_t b0 = (uintptr_t)blk[0], b1 = (uintptr_t)blk[1];
        CHECK(b0 % PAGE != 0 && (b0 + m.size[0] - 1) / PAGE - b0 / PAGE >= 2,
              "block 0 (%p) starts inside a page and spans at least 3 pages", blk[0]);
        CHECK(b1 % PAGE != 0, "block 1 (%p) starts inside a page", blk[1]);
    }
    for (int i = 0; i < NBLOCKS; i++) {
        unsigned char *buf = malloc(m.size[i]);
        fill(buf, i, m.size[i], m.seed, 0);
        CHECK(cudaMemcpy(blk[i], buf, m.size[i], cudaMemcpyHostToDevice) == cudaSuccess, "write block %d", i);
        free(buf);
    }
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync after writing");
    for (int i = 0; i < NBLOCKS; i++) {
        cudaError_t e = cudaIpcGetMemHandle(&m.h[i], blk[i]);
        CHECK(e == cudaSuccess, "export block %d: %d", i, (int)e);
    }
    /* an interior pointer names its whole allocation: the same handle */
    cudaIpcMemHandle_t inner;
    CHECK(cudaIpcGetMemHandle(&inner, (char *)blk[0] + 4096) == cudaSuccess
          && !memcmp(&inner, &m.h[0], sizeof inner), "interior pointer gives block 0's handle");
    /* the driver's entry point gives the same handle */
    CUipcMemHandle dh;
    CHECK(cuIpcGetMemHandle(&dh, (CUdeviceptr)(uintptr_t)blk[0]) == CUDA_SUCCESS && !memcmp(&dh, &m.h[0], sizeof dh),
          "cuIpcGetMemHandle gives block 0's handle");
    /* stream-ordered memory is not legacy-IPC capable, pooled or not */
    void *async = NULL;
    CHECK(cudaMallocAsync(&async, 1u << 20, 0) == cudaSuccess && cudaStreamSynchronize(0) == cudaSuccess, "async block");
    cudaIpcMemHandle_t ah;
    cudaGetLastError();
    CHECK(cudaIpcGetMemHandle(&ah, async) == cudaErrorInvalidValue, "cudaMallocAsync memory is refused");
    cudaError_t last = cudaGetLastError();
    CHECK(last == cudaErrorInvalidValue, "the refusal is the runtime's last error too: %d", (int)last);
    CHECK(cudaFreeAsync(async, 0) == cudaSuccess && cudaStreamSynchronize(0) == cudaSuccess, "free async block");
    /* the exporting process cannot open its own handle */
    void *self = NULL;
    CHECK(cudaIpcOpenMemHandle(&self, m.h[0], cudaIpcMemLazyEnablePeerAccess) != cudaSuccess,
          "opening its own handle fails");

    int to_b, from_b;
    pid_t b = spawn("importer", shim, &to_b, &from_b);
    CHECK(b > 0, "start the importer");
    if (b <= 0) return 1;
    char done = 0;
    CHECK(write_all(to_b, &m, sizeof m) == 0, "send handles");
    CHECK(read_all(from_b, &done, 1) == 0 && done == 'D', "importer phase 1: %c", done);
    /* B synchronized before answering: its bytes are visible to A now */
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync before reading B's bytes");
    for (int i = 0; i < NBLOCKS; i++) {
        size_t n = m.size[i];
        unsigned char *got = malloc(n), *want = malloc(n);
        CHECK(cudaMemcpy(got, blk[i], n, cudaMemcpyDeviceToHost) == cudaSuccess, "read block %d", i);
        fill(want, i, n, m.seed, 1);
        size_t bad = n;
        for (size_t k = 0; k < n && bad == n; k++) if (got[k] != want[k]) bad = k;
        CHECK(bad == n, "block %d: A sees B's byte %zu as %u, B wrote %u", i, bad, bad < n ? got[bad] : 0,
              bad < n ? want[bad] : 0);
        free(got);
        free(want);
    }
    /* Blocks 1 (small: its free would go to the thread cache, which hands
     * the same address to the next allocation of its size, were it not
     * exported) and 2 are freed, and blocks of their sizes allocated: the
     * freed handles must not open them. */
    void *reuse[3] = {NULL, NULL, NULL};
    for (int i = 1; i <= 2; i++) {
        CHECK(cudaFree(blk[i]) == cudaSuccess, "free block %d", i);
        blk[i] = NULL;
        CHECK(cudaMalloc(&reuse[i], m.size[i]) == cudaSuccess, "allocation after freeing block %d", i);
    }
    char x = 'X';
    CHECK(write_all(to_b, &x, 1) == 0, "free notice");
    done = 0;
    CHECK(read_all(from_b, &done, 1) == 0 && done == 'D', "importer phase 2: %c", done);
    close(to_b);
    close(from_b);
    wait_child(b, "importer");

    int to_f, from_f;
    pid_t f = spawn("foreign", NULL, &to_f, &from_f);
    CHECK(f > 0, "start the process without the shim");
    if (f > 0) {
        CHECK(write_all(to_f, &m, sizeof m) == 0, "send handles to the foreign process");
        done = 0;
        CHECK(read_all(from_f, &done, 1) == 0 && done == 'D', "foreign process: %c", done);
        close(to_f);
        close(from_f);
        wait_child(f, "foreign process");
    }
    cudaFree(reuse[1]);
    cudaFree(reuse[2]);
    for (int i = 0; i < NBLOCKS; i++) if (blk[i]) CHECK(cudaFree(blk[i]) == cudaSuccess, "free block %d", i);
    cudaFree(filler_large);
    cudaFree(filler_small);
    if (!failures) printf("ipc ok (%s)\n", pooled ? "pooled" : "driver memory");
    return failures ? 1 : 0;
}

/* A under the caching pool: a pooled block sits inside a cuMemAlloc segment
 * whose legacy handle would open the whole segment: both entry points
 * refuse it (never a handle to the wrong memory). */
static int caching_exporter(void)
{
    void *a = NULL, *b = NULL;
    CHECK(cudaSetDevice(0) == cudaSuccess, "device 0");
    CHECK(cudaMalloc(&a, 4096) == cudaSuccess && cudaMalloc(&b, 4096) == cudaSuccess, "two small blocks");
    cudaIpcMemHandle_t h;
    CHECK(cudaIpcGetMemHandle(&h, b) == cudaErrorInvalidValue, "cudaIpcGetMemHandle refuses a caching-pool block");
    CUipcMemHandle dh;
    CHECK(cuIpcGetMemHandle(&dh, (CUdeviceptr)(uintptr_t)b) == CUDA_ERROR_INVALID_VALUE,
          "cuIpcGetMemHandle refuses a caching-pool block");
    cudaFree(a);
    cudaFree(b);
    if (!failures) printf("ipc ok (caching pool: refused)\n");
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);   /* a peer that died is reported, not fatal */
    if (argc >= 4 && (!strcmp(argv[1], "importer") || !strcmp(argv[1], "foreign"))) {
        role = argv[1];
        int rfd = atoi(argv[2]), wfd = atoi(argv[3]);
        return !strcmp(role, "importer") ? importer(rfd, wfd) : foreign(rfd, wfd);
    }
    if (argc > 1 && !strcmp(argv[1], "caching")) return caching_exporter();
    return exporter(argc > 1 && !strcmp(argv[1], "pooled"));
}
