/* Emulated NCCL communicators: ncclCommInitAll over 2 devices in one process
 * (EMU_DEVICES=2), ncclCommInitRank for several ranks from one thread inside
 * a group, ncclCommSplit across 4 processes, and the argument checks and
 * small entry points (versions, errors, ncclMemAlloc, registration, abort). */
#include <cuda.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "emu.h"

static int failures, rank = -1;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { fprintf(stderr, "%s = %d\n", #x, (int)r_); exit(2); } } while (0)
#define NC(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { fprintf(stderr, "rank %d: %s = %s\n", rank, #x, ncclGetErrorString(r_)); exit(3); } } while (0)

static void set_device(int d)
{
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, d));
    CU(cuCtxSetCurrent(ctx));
}

static float *dev_floats(size_t n)
{
    CUdeviceptr p;
    CU(cuMemAlloc(&p, n * sizeof(float)));
    return (float *)(uintptr_t)p;
}

/* ---------------------------------------------------------- one process, 2 devices */
static void test_init_all(void)
{
    int ndev = 0;
    CU(cuDeviceGetCount(&ndev));
    CHECK(ndev == 2, "EMU_DEVICES=2 gives %d devices", ndev);
    ncclComm_t comms[2];
    int devs[2] = {0, 1};
    NC(ncclCommInitAll(comms, 2, devs));
    CUstream streams[2];
    float *send[2], *recv[2];
    const size_t count = 5000;
    float *h = malloc(count * sizeof *h);
    for (int d = 0; d < 2; d++) {
        int dev = -1, r = -1, n = -1;
        NC(ncclCommCuDevice(comms[d], &dev));
        NC(ncclCommUserRank(comms[d], &r));
        NC(ncclCommCount(comms[d], &n));
        CHECK(dev == d && r == d && n == 2, "comm %d: device %d rank %d count %d", d, dev, r, n);
        set_device(d);
        CU(cuStreamCreate(&streams[d], CU_STREAM_DEFAULT));
        send[d] = dev_floats(count * 2);
        recv[d] = dev_floats(count * 2);
        for (size_t i = 0; i < count; i++) h[i] = (float)(d + 1) * (float)i;
        CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)send[d], h, count * sizeof *h));
    }
    /* one thread drives both ranks: only possible inside a group */
    NC(ncclGroupStart());
    for (int d = 0; d < 2; d++) NC(ncclAllReduce(send[d], recv[d], count, ncclFloat32, ncclSum, comms[d], streams[d]));
    NC(ncclGroupEnd());
    for (int d = 0; d < 2; d++) {
        CU(cuStreamSynchronize(streams[d]));
        CU(cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)recv[d], count * sizeof *h));
        for (size_t i = 0; i < count; i++)
            if (h[i] != 3.0f * (float)i) { CHECK(0, "initall allreduce dev %d [%zu] = %g", d, i, h[i]); break; }
    }
    /* the legacy default stream of each device, from one thread: ncclGroupEnd runs with
     * device 1 current, yet each rank's work must go to its own device's stream */
    NC(ncclGroupStart());
    for (int d = 0; d < 2; d++) {
        set_device(d);
        NC(ncclAllReduce(send[d], recv[d], count, ncclFloat32, ncclMax, comms[d], NULL));
    }
    NC(ncclGroupEnd());
    for (int d = 0; d < 2; d++) {
        set_device(d);
        CU(cuCtxSynchronize());
        CU(cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)recv[d], count * sizeof *h));
        for (size_t i = 0; i < count; i++)
            if (h[i] != 2.0f * (float)i) { CHECK(0, "legacy-stream allreduce dev %d [%zu] = %g", d, i, h[i]); break; }
    }
    set_device(0);

    /* all-gather then a swap with send/recv, both in groups */
    NC(ncclGroupStart());
    for (int d = 0; d < 2; d++) NC(ncclAllGather(send[d], recv[d], count, ncclFloat32, comms[d], streams[d]));
    NC(ncclGroupEnd());
    NC(ncclGroupStart());
    for (int d = 0; d < 2; d++) {
        NC(ncclSend(send[d], count, ncclFloat32, 1 - d, comms[d], streams[d]));
        NC(ncclRecv(recv[d] + count, count, ncclFloat32, 1 - d, comms[d], streams[d]));
    }
    NC(ncclGroupEnd());
    for (int d = 0; d < 2; d++) {
        CU(cuStreamSynchronize(streams[d]));
        float *all = malloc(2 * count * sizeof *all);
        CU(cuMemcpyDtoH(all, (CUdeviceptr)(uintptr_t)recv[d], 2 * count * sizeof *all));
        /* block 0 = rank 0's data from the all-gather; block 1 = the peer's data from the swap */
        for (size_t i = 0; i < count; i++) {
            if (all[i] != (float)i) { CHECK(0, "initall allgather dev %d [%zu] = %g", d, i, all[i]); break; }
            if (all[count + i] != (float)(2 - d) * (float)i) { CHECK(0, "initall swap dev %d [%zu] = %g", d, i, all[count + i]); break; }
        }
        free(all);
    }
    for (int d = 0; d < 2; d++) {
        NC(ncclCommDestroy(comms[d]));
        CU(cuStreamDestroy(streams[d]));
        cuMemFree((CUdeviceptr)(uintptr_t)send[d]);
        cuMemFree((CUdeviceptr)(uintptr_t)recv[d]);
    }
    free(h);
    set_device(0);
}

/* The documented way to create several ranks from one thread. */
static void test_init_rank_in_group(void)
{
    ncclUniqueId id;
    NC(ncclGetUniqueId(&id));
    ncclComm_t comms[2];
    NC(ncclGroupStart());
    for (int d = 0; d < 2; d++) {
        set_device(d);
        NC(ncclCommInitRank(&comms[d], 2, id, d));
    }
    NC(ncclGroupEnd());
    CUstream s[2];
    float *buf[2], v[2] = {0, 0};
    for (int d = 0; d < 2; d++) {
        set_device(d);
        int dev = -1;
        NC(ncclCommCuDevice(comms[d], &dev));
        CHECK(dev == d, "init-rank-in-group comm %d on device %d", d, dev);
        CU(cuStreamCreate(&s[d], CU_STREAM_DEFAULT));
        buf[d] = dev_floats(1);
        float x = (float)(10 * (d + 1));
        CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)buf[d], &x, sizeof x));
    }
    NC(ncclGroupStart());
    for (int d = 0; d < 2; d++) NC(ncclAllReduce(buf[d], buf[d], 1, ncclFloat32, ncclMax, comms[d], s[d]));
    NC(ncclGroupEnd());
    for (int d = 0; d < 2; d++) {
        CU(cuStreamSynchronize(s[d]));
        CU(cuMemcpyDtoH(&v[d], (CUdeviceptr)(uintptr_t)buf[d], sizeof(float)));
        CHECK(v[d] == 20.0f, "group-initialized comm %d max = %g", d, v[d]);
        NC(ncclCommDestroy(comms[d]));
        CU(cuStreamDestroy(s[d]));
        cuMemFree((CUdeviceptr)(uintptr_t)buf[d]);
    }
    set_device(0);
}

/* ---------------------------------------------------------- errors and small calls */
static void test_errors(void)
{
    /* every public entry point is the profiling name's alias, like NCCL's PMPI-style interface */
    const char *names[] = {"ncclAllReduce", "ncclBcast", "ncclBroadcast", "ncclSend", "ncclGroupEnd", "ncclCommInitRank",
                           "ncclCommSplit", "ncclMemAlloc", "ncclGetVersion"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char p[64];
        snprintf(p, sizeof p, "p%s", names[i]);
        void *pub = dlsym(RTLD_DEFAULT, names[i]), *prof = dlsym(RTLD_DEFAULT, p);
        CHECK(pub && pub == prof, "%s (%p) is not an alias of %s (%p)", names[i], pub, p, prof);
    }

    int v = 0;
    NC(ncclGetVersion(&v));
    CHECK(v == NCCL_VERSION(2, 28, 9) && v == 22809, "version %d", v);
    CHECK(ncclGetVersion(NULL) == ncclInvalidArgument, "GetVersion(NULL)");
    CHECK(strcmp(ncclGetErrorString(ncclInvalidUsage), "invalid usage (run with NCCL_DEBUG=WARN for details)") == 0,
          "error string: %s", ncclGetErrorString(ncclInvalidUsage));

    ncclComm_t comm = NULL;
    ncclUniqueId bogus;
    memset(&bogus, 0x41, sizeof bogus);
    CHECK(ncclCommInitRank(&comm, 1, bogus, 0) == ncclInvalidArgument && comm == NULL, "bogus id accepted");
    ncclUniqueId id;
    NC(ncclGetUniqueId(&id));
    CHECK(ncclCommInitRank(&comm, 0, id, 0) == ncclInvalidArgument, "nranks 0 accepted");
    CHECK(ncclCommInitRank(&comm, 2, id, 2) == ncclInvalidArgument, "rank 2 of 2 accepted");
    ncclConfig_t bad_config;
    memset(&bad_config, 0, sizeof bad_config);
    CHECK(ncclCommInitRankConfig(&comm, 1, id, 0, &bad_config) == ncclInvalidArgument, "uninitialized config accepted");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    NC(ncclCommInitRankConfig(&comm, 1, id, 0, &config));

    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    float *buf = dev_floats(16);
    float h[16];
    for (int i = 0; i < 16; i++) h[i] = (float)i;
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)buf, h, sizeof h));

    CHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, NULL, s) == ncclInvalidArgument, "NULL comm");
    CHECK(ncclAllReduce(buf, buf, 16, (ncclDataType_t)99, ncclSum, comm, s) == ncclInvalidArgument, "bad type");
    CHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, (ncclRedOp_t)42, comm, s) == ncclInvalidArgument, "bad op");
    CHECK(strlen(ncclGetLastError(comm)) > 0, "no last error message");
    CHECK(ncclAllReduce(NULL, buf, 16, ncclFloat32, ncclSum, comm, s) == ncclInvalidArgument, "NULL sendbuff");
    CHECK(ncclBroadcast(buf, buf, 16, ncclFloat32, 1, comm, s) == ncclInvalidArgument, "root out of range");
    CHECK(ncclSend(buf, 16, ncclFloat32, -1, comm, s) == ncclInvalidArgument, "peer -1");
    CHECK(ncclRecv(buf, 16, ncclFloat32, 1, comm, s) == ncclInvalidArgument, "peer 1 of 1");
    CHECK(ncclGroupEnd() == ncclInvalidUsage, "GroupEnd without GroupStart");
    /* an invalid call inside a group fails the group: nothing of it runs */
    float marker = 42.0f, seen = 0;
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)buf, &marker, sizeof marker));
    NC(ncclGroupStart());
    NC(ncclAllReduce(buf, buf + 1, 1, ncclFloat32, ncclSum, comm, s));
    CHECK(ncclSend(buf, 1, ncclFloat32, 3, comm, s) == ncclInvalidArgument, "bad peer in a group");
    CHECK(ncclGroupEnd() == ncclInvalidArgument, "GroupEnd after an invalid call in the group");
    CU(cuStreamSynchronize(s));
    CU(cuMemcpyDtoH(&seen, (CUdeviceptr)(uintptr_t)(buf + 1), sizeof seen));
    CHECK(seen == 1.0f, "the failed group still ran its all-reduce (buf[1] = %g)", seen);
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)buf, h, sizeof h));   /* back to 0..15 */
    CHECK(ncclRedOpDestroy(ncclSum, comm) == ncclInvalidArgument, "destroying a built-in op");

    /* a 1-rank communicator still runs collectives (copies), and ncclBcast is counted as a broadcast */
    uint64_t b0 = emuGetCounter("nccl.broadcast");
    NC(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclProd, comm, s));
    NC(ncclBcast(buf, 16, ncclFloat32, 0, comm, s));
    CU(cuStreamSynchronize(s));
    CHECK(emuGetCounter("nccl.broadcast") - b0 == 1, "ncclBcast did not reach ncclBroadcast");
    CU(cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)buf, sizeof h));
    for (int i = 0; i < 16; i++) CHECK(h[i] == (float)i, "1-rank allreduce [%d] = %g", i, h[i]);

    /* EMU_LINK_GBPS (set to 0.01 by main): 1 MiB takes >= 0.1 s on the simulated link */
    float *big = dev_floats(1 << 18);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    NC(ncclAllReduce(big, big, 1 << 18, ncclFloat32, ncclSum, comm, s));
    CU(cuStreamSynchronize(s));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(secs >= 0.095, "1 MiB over a 0.01 GB/s link took %.3f s", secs);
    cuMemFree((CUdeviceptr)(uintptr_t)big);

    /* self send/recv inside a group */
    float *other = dev_floats(16);
    NC(ncclGroupStart());
    NC(ncclSend(buf, 16, ncclFloat32, 0, comm, s));
    NC(ncclRecv(other, 16, ncclFloat32, 0, comm, s));
    NC(ncclGroupEnd());
    CU(cuStreamSynchronize(s));
    CU(cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)other, sizeof h));
    for (int i = 0; i < 16; i++) CHECK(h[i] == (float)i, "self send/recv [%d] = %g", i, h[i]);

    void *mem = NULL, *handle = NULL;
    NC(ncclMemAlloc(&mem, 1 << 20));
    CHECK(mem && emuIsDevicePointer(mem), "ncclMemAlloc did not return device memory");
    NC(ncclCommRegister(comm, mem, 1 << 20, &handle));
    CHECK(handle != NULL, "NULL registration handle");
    CHECK(ncclCommDeregister(comm, h) == ncclInvalidArgument, "deregistering a bogus handle");
    NC(ncclCommDeregister(comm, handle));
    NC(ncclMemFree(mem));
    NC(ncclMemFree(NULL));

    ncclResult_t async = ncclInternalError;
    NC(ncclCommGetAsyncError(comm, &async));
    CHECK(async == ncclSuccess, "async error %d", (int)async);
    NC(ncclCommAbort(comm));
    cuMemFree((CUdeviceptr)(uintptr_t)buf);
    cuMemFree((CUdeviceptr)(uintptr_t)other);
    CU(cuStreamDestroy(s));
}

/* ---------------------------------------------------------- split across 4 processes */
static int split_rank(int world, const char *hex)
{
    ncclUniqueId id;
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
        unsigned x;
        sscanf(hex + 2 * i, "%2x", &x);
        id.internal[i] = (char)x;
    }
    ncclComm_t comm, sub = NULL, none = (ncclComm_t)1;
    NC(ncclCommInitRank(&comm, world, id, rank));
    /* colors: even / odd; keys reverse the order inside each color */
    NC(ncclCommSplit(comm, rank % 2, world - rank, &sub, NULL));
    int n = -1, r = -1;
    NC(ncclCommCount(sub, &n));
    NC(ncclCommUserRank(sub, &r));
    int members = (world + 1 - rank % 2) / 2, higher = 0;
    for (int q = rank % 2; q < world; q += 2) if (q > rank) higher++;
    CHECK(n == members && r == higher, "split: count %d rank %d, want %d %d", n, r, members, higher);
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    float *buf = dev_floats(1), x = (float)rank;
    CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)buf, &x, sizeof x));
    NC(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, sub, s));
    CU(cuStreamSynchronize(s));
    CU(cuMemcpyDtoH(&x, (CUdeviceptr)(uintptr_t)buf, sizeof x));
    float want = 0;
    for (int q = rank % 2; q < world; q += 2) want += (float)q;
    CHECK(x == want, "split allreduce = %g want %g", x, want);
    /* a second split where the last rank opts out */
    NC(ncclCommSplit(comm, rank == world - 1 ? NCCL_SPLIT_NOCOLOR : 0, 0, &none, NULL));
    if (rank == world - 1) CHECK(none == NULL, "NOCOLOR rank got a communicator");
    else {
        NC(ncclCommCount(none, &n));
        CHECK(n == world - 1, "second split count %d", n);
        NC(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclMin, none, s));
        CU(cuStreamSynchronize(s));
        NC(ncclCommDestroy(none));
    }
    NC(ncclCommDestroy(sub));
    NC(ncclCommDestroy(comm));
    cuMemFree((CUdeviceptr)(uintptr_t)buf);
    CU(cuStreamDestroy(s));
    return failures ? 1 : 0;
}

/* ---------------------------------------------------------- a peer that dies */
/* Rank 1 joins and exits without taking part: rank 0's all-reduce must not
 * hang the job but end with ncclRemoteError as the communicator's async
 * error (NCCL's answer to a lost peer). */
static int dead_peer_rank(const char *hex)
{
    ncclUniqueId id;
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
        unsigned x;
        sscanf(hex + 2 * i, "%2x", &x);
        id.internal[i] = (char)x;
    }
    ncclComm_t comm;
    NC(ncclCommInitRankScalable(&comm, 2, rank, 1, &id, NULL));
    if (rank == 1) _exit(0);
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    float *buf = dev_floats(256);
    NC(ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, comm, s));
    CU(cuStreamSynchronize(s));
    ncclResult_t async = ncclSuccess;
    NC(ncclCommGetAsyncError(comm, &async));
    CHECK(async == ncclRemoteError, "async error after a peer died: %d", (int)async);
    NC(ncclCommAbort(comm));
    cuMemFree((CUdeviceptr)(uintptr_t)buf);
    CU(cuStreamDestroy(s));
    return failures ? 1 : 0;
}

static int launch_ranks(int world, const char *mode)
{
    ncclUniqueId id;
    NC(ncclGetUniqueId(&id));
    char hex[2 * NCCL_UNIQUE_ID_BYTES + 1];
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) sprintf(hex + 2 * i, "%02x", (unsigned char)id.internal[i]);
    pid_t pids[8];
    for (int r = 0; r < world; r++) {
        if ((pids[r] = fork()) == 0) {
            char rs[16];
            snprintf(rs, sizeof rs, "%d", r);
            setenv("NCCL_TEST_RANK", rs, 1);
            setenv("NCCL_TEST_ID", hex, 1);
            execl("/proc/self/exe", "test_nccl_comm", mode, (char *)NULL);
            _exit(127);
        }
    }
    int bad = 0;
    for (int r = 0; r < world; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) { fprintf(stderr, "%s rank %d failed (0x%x)\n", mode, r, st); bad = 1; }
    }
    return bad;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        rank = atoi(getenv("NCCL_TEST_RANK"));
        CU(cuInit(0));
        set_device(0);
        if (strcmp(argv[1], "dead") == 0) return dead_peer_rank(getenv("NCCL_TEST_ID"));
        return split_rank(4, getenv("NCCL_TEST_ID"));
    }
    /* The device count is read when the emulator initializes: re-execute with it set. */
    const char *devs = getenv("EMU_DEVICES");
    if (!devs || strcmp(devs, "2") != 0) {
        setenv("EMU_DEVICES", "2", 1);
        execl("/proc/self/exe", "test_nccl_comm", (char *)NULL);
        perror("execl");
        return 127;
    }
    setenv("EMU_LINK_GBPS", "0.01", 1);   /* read by the emulated NCCL at its first collective */
    CU(cuInit(0));
    set_device(0);
    test_errors();
    test_init_all();
    test_init_rank_in_group();
    int bad = launch_ranks(4, "split") | launch_ranks(2, "dead");
    if (failures || bad) { printf("test_nccl_comm: FAILED\n"); return 1; }
    printf("test_nccl_comm: ok\n");
    return 0;
}
