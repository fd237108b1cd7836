/* NCCL accounting across two ranks (two processes through the emulated
 * NCCL).  Run without arguments it starts both ranks (this program again,
 * with RANK / WORLD_SIZE / NCCL_TEST_ID set) and checks they succeed; under
 * the shim (test_nccl_accounting.sh) each rank writes its own log.
 *
 * Each rank: ncclCommInitRank, then STEPS steps of
 *     one GEMM, AllReduce(AR_COUNT floats), AllGather(AG_COUNT floats),
 *     ReduceScatter(RS_COUNT floats), Broadcast(BC_COUNT int32),
 *     a grouped Send/Recv exchange of P2P_COUNT floats;
 * rank 1 sleeps SLOW_US before each step (the straggler).  Then a split
 * (both ranks, one color) with one AllReduce on the child, destroy of the
 * child, finalize and destroy of the parent.  The last line prints the
 * constants for the script. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { STEPS = 5, AR_COUNT = 1 << 16, AG_COUNT = 1024, RS_COUNT = 512, BC_COUNT = 100, P2P_COUNT = 256,
       CHILD_COUNT = 4096, SLOW_US = 40000 };  /* well above scheduling noise of a loaded 2-core CI machine */

static int rank, world, failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "rank %d: FAIL %s:%d: %s\n", rank, __FILE__, __LINE__, #c); failures++; } } while (0)
#define NC(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { fprintf(stderr, "rank %d: %s = %d\n", rank, #x, (int)r_); exit(3); } } while (0)

static int run_rank(void)
{
    ncclUniqueId id;
    const char *hex = getenv("NCCL_TEST_ID");
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        id.internal[i] = (char)v;
    }
    CHECK(cudaSetDevice(0) == cudaSuccess);
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s) == cudaSuccess);
    float *buf, *out, *A;
    CHECK(cudaMalloc((void **)&buf, AR_COUNT * sizeof(float) * 2) == cudaSuccess);
    CHECK(cudaMalloc((void **)&out, AR_COUNT * sizeof(float) * 2) == cudaSuccess);
    CHECK(cudaMalloc((void **)&A, 64 * 64 * sizeof(float)) == cudaSuccess);
    CHECK(cudaMemset(buf, 0, AR_COUNT * sizeof(float) * 2) == cudaSuccess);
    CHECK(cudaMemset(A, 0, 64 * 64 * sizeof(float)) == cudaSuccess);
    cublasHandle_t h;
    CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS);
    ncclComm_t comm;
    NC(ncclCommInitRank(&comm, world, id, rank));
    const float one = 1, zero = 0;
    int peer = (rank + 1) % world;
    for (int step = 0; step < STEPS; step++) {
        if (rank == 1)
            usleep(SLOW_US);
        CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 32, 32, 32, &one, A, 64, A, 64, &zero, A, 64) ==
              CUBLAS_STATUS_SUCCESS);
        NC(ncclAllReduce(buf, out, AR_COUNT, ncclFloat32, ncclSum, comm, s));
        NC(ncclAllGather(buf, out, AG_COUNT, ncclFloat32, comm, s));
        NC(ncclReduceScatter(buf, out, RS_COUNT, ncclFloat32, ncclSum, comm, s));
        NC(ncclBroadcast(buf, out, BC_COUNT, ncclInt32, 0, comm, s));
        NC(ncclGroupStart());
        NC(ncclSend(buf, P2P_COUNT, ncclFloat32, peer, comm, s));
        NC(ncclRecv(out, P2P_COUNT, ncclFloat32, peer, comm, s));
        NC(ncclGroupEnd());
    }
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    ncclComm_t child;
    NC(ncclCommSplit(comm, 0, rank, &child, NULL));
    NC(ncclAllReduce(buf, out, CHILD_COUNT, ncclFloat32, ncclSum, child, s));
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    NC(ncclCommDestroy(child));
    NC(ncclCommFinalize(comm));
    NC(ncclCommDestroy(comm));
    CHECK(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
    cudaStreamDestroy(s);
    return failures ? 1 : 0;
}

int main(void)
{
    if (getenv("NCCL_TEST_ID")) {
        rank = atoi(getenv("RANK"));
        world = atoi(getenv("WORLD_SIZE"));
        return run_rank();
    }
    ncclUniqueId id;
    NC(ncclGetUniqueId(&id));
    char hex[2 * NCCL_UNIQUE_ID_BYTES + 1];
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
        sprintf(hex + 2 * i, "%02x", (unsigned char)id.internal[i]);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            char rs[16];
            snprintf(rs, sizeof rs, "%d", r);
            setenv("RANK", rs, 1);
            setenv("WORLD_SIZE", "2", 1);
            setenv("NCCL_TEST_ID", hex, 1);
            execl("/proc/self/exe", "test_nccl_accounting", (char *)NULL);
            _exit(127);
        }
    }
    int bad = 0;
    for (int r = 0; r < 2; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d failed (status 0x%x)\n", r, st);
            bad = 1;
        }
    }
    printf("steps %d ar %d ag %d rs %d bc %d p2p %d child %d slow_us %d\n", STEPS, AR_COUNT, AG_COUNT, RS_COUNT,
           BC_COUNT, P2P_COUNT, CHILD_COUNT, SLOW_US);
    return bad;
}
