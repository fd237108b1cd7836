/* Several NCCL ranks in one process, in the two shapes of nccl-tests:
 *   g2: one thread drives both ranks (ncclCommInitAll over 2 devices) and
 *       issues each step's all-reduces inside ncclGroupStart/ncclGroupEnd
 *       (all_reduce_perf -g 2);
 *   t2: two threads, each with its own rank (ncclCommInitRank), each step an
 *       all-reduce wrapped in a group of one, as torch issues it
 *       (all_reduce_perf -t 2).
 * Each rank also takes NCCL-owned memory with ncclMemAlloc (MEMALLOC_BYTES,
 * freed at the end).  Every all-reduce's result is checked.  Run without
 * arguments it runs both shapes (this program again with EMU_DEVICES=2);
 * test_nccl_multirank.sh runs each under the shim and checks the report.
 * The last line prints the constants for the script. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* enough steps that collectives take most of the run: two ranks' times
 * added up would then be well above 100% of it */
enum { STEPS = 120, COUNT = 1 << 15, MEMALLOC_BYTES = 3 << 20 };

static int failures;
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;
#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            pthread_mutex_lock(&fail_mu);                                                                    \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                                     \
            failures++;                                                                                      \
            pthread_mutex_unlock(&fail_mu);                                                                  \
        }                                                                                                    \
    } while (0)
#define NC(x) CHECK((x) == ncclSuccess)

struct rank_bufs {
    float *send, *recv, *host;
    void *nccl_mem;
    cudaStream_t stream;
};

static void setup_rank(int dev, struct rank_bufs *b)
{
    CHECK(cudaSetDevice(dev) == cudaSuccess);
    CHECK(cudaStreamCreate(&b->stream) == cudaSuccess);
    CHECK(cudaMalloc((void **)&b->send, COUNT * sizeof(float)) == cudaSuccess);
    CHECK(cudaMalloc((void **)&b->recv, COUNT * sizeof(float)) == cudaSuccess);
    b->host = malloc(COUNT * sizeof(float));
    for (int i = 0; i < COUNT; i++)
        b->host[i] = (float)(dev + 1) + (float)(i % 7);
    CHECK(cudaMemcpy(b->send, b->host, COUNT * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    NC(ncclMemAlloc(&b->nccl_mem, MEMALLOC_BYTES));
}

/* recv = sum over the 2 ranks of (rank + 1 + i % 7), checked after the
 * last step; the steps before only wait for their stream. */
static void check_result(int dev, struct rank_bufs *b, int step)
{
    CHECK(cudaSetDevice(dev) == cudaSuccess);
    CHECK(cudaStreamSynchronize(b->stream) == cudaSuccess);
    if (step != STEPS - 1)
        return;
    CHECK(cudaMemcpy(b->host, b->recv, COUNT * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    int bad = 0;
    for (int i = 0; i < COUNT; i++)
        bad += b->host[i] != 3.0f + 2.0f * (float)(i % 7);
    CHECK(bad == 0);
}

static void teardown_rank(int dev, struct rank_bufs *b)
{
    CHECK(cudaSetDevice(dev) == cudaSuccess);
    NC(ncclMemFree(b->nccl_mem));
    CHECK(cudaFree(b->send) == cudaSuccess);
    CHECK(cudaFree(b->recv) == cudaSuccess);
    CHECK(cudaStreamDestroy(b->stream) == cudaSuccess);
    free(b->host);
}

static void run_g2(void)
{
    ncclComm_t comms[2];
    int devs[2] = { 0, 1 };
    struct rank_bufs b[2];
    for (int d = 0; d < 2; d++)
        setup_rank(d, &b[d]);
    NC(ncclCommInitAll(comms, 2, devs));
    for (int s = 0; s < STEPS; s++) {
        NC(ncclGroupStart());
        for (int d = 0; d < 2; d++) {
            CHECK(cudaSetDevice(d) == cudaSuccess);
            NC(ncclAllReduce(b[d].send, b[d].recv, COUNT, ncclFloat, ncclSum, comms[d], b[d].stream));
        }
        NC(ncclGroupEnd());
        for (int d = 0; d < 2; d++)
            check_result(d, &b[d], s);
    }
    for (int d = 0; d < 2; d++) {
        NC(ncclCommDestroy(comms[d]));
        teardown_rank(d, &b[d]);
    }
}

struct thread_arg {
    int rank;
    ncclUniqueId id;
};

static void *t2_rank(void *p)
{
    struct thread_arg *a = p;
    struct rank_bufs b;
    ncclComm_t comm;
    setup_rank(a->rank, &b);
    NC(ncclCommInitRank(&comm, 2, a->id, a->rank));
    for (int s = 0; s < STEPS; s++) {
        NC(ncclGroupStart());
        NC(ncclAllReduce(b.send, b.recv, COUNT, ncclFloat, ncclSum, comm, b.stream));
        NC(ncclGroupEnd());
        check_result(a->rank, &b, s);
    }
    NC(ncclCommDestroy(comm));
    teardown_rank(a->rank, &b);
    return NULL;
}

static void run_t2(void)
{
    struct thread_arg a[2];
    pthread_t t[2];
    NC(ncclGetUniqueId(&a[0].id));
    a[1].id = a[0].id;
    for (int r = 0; r < 2; r++) {
        a[r].rank = r;
        CHECK(pthread_create(&t[r], NULL, t2_rank, &a[r]) == 0);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(t[r], NULL);
}

static int run_self(const char *self, const char *mode)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("EMU_DEVICES", "2", 1);
        execl(self, self, mode, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        int bad = run_self(argv[0], "g2") + run_self(argv[0], "t2");
        printf(bad ? "FAIL\n" : "ok: g2 and t2 all-reduce results\n");
        return bad ? 1 : 0;
    }
    if (!strcmp(argv[1], "g2"))
        run_g2();
    else if (!strcmp(argv[1], "t2"))
        run_t2();
    else
        return 2;
    printf("steps %d count %d memalloc %d\n", STEPS, COUNT, MEMALLOC_BYTES);
    return failures ? 1 : 0;
}
