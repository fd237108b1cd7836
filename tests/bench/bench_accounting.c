/* bench_accounting: per-call cost of GEMM and NCCL accounting.  Prints, in
 * one run, ns per call of
 *   - cublasSgemm_v2 (m=n=k=0: cuBLAS returns at once, so the figure is the
 *     call path, not the emulator's arithmetic) and
 *   - ncclAllReduce (1 float on a one-rank communicator)
 * made directly (no shim), through the hooks in passthrough (TRAINSHIM=0),
 * with the shim active and no GPU timing (TRAINSHIM_FLOP_SAMPLE=0: one log
 * record per call), and active with the default sampling (one call in 16
 * timed with two events).  The hooked runs are this program re-executed under
 * LD_PRELOAD (the shim is found through $B, default "build").
 *   LD_LIBRARY_PATH=build/emu build/bench/bench_accounting [calls] */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SYNC_EVERY 512 /* bounds the emulator's queue in every mode alike */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_accounting: %s failed (run with LD_LIBRARY_PATH=<build>/emu)\n", what);
    exit(1);
}

/* Best of 5 rounds of calls: the least disturbed by the machine. */
static void measure(const char *label, long calls)
{
    if (cudaSetDevice(0) != cudaSuccess) die("cudaSetDevice");
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) die("cudaStreamCreate");
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS)
        die("cublasCreate");
    ncclComm_t comm;
    if (ncclCommInitAll(&comm, 1, NULL) != ncclSuccess) die("ncclCommInitAll");
    float *buf;
    if (cudaMalloc((void **)&buf, 4096) != cudaSuccess) die("cudaMalloc");
    const float one = 1, zero = 0;
    double gemm = 1e30, nccl = 1e30;
    for (int round = 0; round < 5; round++) {
        double t0 = now_ns();
        for (long i = 0; i < calls; i++) {
            if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 0, 0, 0, &one, buf, 1, buf, 1, &zero, buf, 1) !=
                CUBLAS_STATUS_SUCCESS)
                die("cublasSgemm");
            if (i % SYNC_EVERY == SYNC_EVERY - 1 && cudaStreamSynchronize(s) != cudaSuccess) die("sync");
        }
        if (cudaStreamSynchronize(s) != cudaSuccess) die("sync");
        double per = (now_ns() - t0) / (double)calls;
        if (per < gemm) gemm = per;
        t0 = now_ns();
        for (long i = 0; i < calls; i++) {
            if (ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, s) != ncclSuccess) die("ncclAllReduce");
            if (i % SYNC_EVERY == SYNC_EVERY - 1 && cudaStreamSynchronize(s) != cudaSuccess) die("sync");
        }
        if (cudaStreamSynchronize(s) != cudaSuccess) die("sync");
        per = (now_ns() - t0) / (double)calls;
        if (per < nccl) nccl = per;
    }
    printf("  %-44s %9.1f %9.1f\n", label, gemm, nccl);
    fflush(stdout);
    ncclCommDestroy(comm);
    cublasDestroy(h);
    cudaFree(buf);
    cudaStreamDestroy(s);
}

static int run_child(char **argv, const char *shim, const char *logdir, const char *label, const char *trainshim,
                     const char *sample)
{
    pid_t pid = fork();
    if (pid == 0) {
        char log[4200];
        snprintf(log, sizeof log, "%s/bench.%%p.log", logdir);
        setenv("LD_PRELOAD", shim, 1);
        setenv("TRAINSHIM_LOG", log, 1);
        setenv("TRAINSHIM_LOG_BUFFER", "4MiB", 1);
        if (trainshim) setenv("TRAINSHIM", trainshim, 1); else unsetenv("TRAINSHIM");
        if (sample) setenv("TRAINSHIM_FLOP_SAMPLE", sample, 1); else unsetenv("TRAINSHIM_FLOP_SAMPLE");
        setenv("BENCH_ACCT_CHILD", label, 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 20000;
    if (calls <= 0) calls = 20000;
    const char *child = getenv("BENCH_ACCT_CHILD");
    if (child) {
        measure(child, calls);
        return 0;
    }
    const char *b = getenv("B");
    char shim[4096];
    if (!realpath(b ? b : "build", shim)) { fprintf(stderr, "bench_accounting: no build directory\n"); return 1; }
    strncat(shim, "/libtrainshim.so", sizeof shim - strlen(shim) - 1);
    if (access(shim, R_OK) != 0) { fprintf(stderr, "bench_accounting: %s not built\n", shim); return 1; }
    char logdir[] = "/tmp/bench_accounting_XXXXXX";
    if (!mkdtemp(logdir)) { perror("mkdtemp"); return 1; }
    printf("bench_accounting: %ld calls per round, best of 5; ns per call\n", calls);
    printf("  %-44s %9s %9s\n", "", "Sgemm", "AllReduce");
    fflush(stdout);
    measure("direct (no shim)", calls);
    int rc = run_child(argv, shim, logdir, "hooked, passthrough (TRAINSHIM=0)", "0", NULL);
    rc |= run_child(argv, shim, logdir, "accounting, no GPU timing (FLOP_SAMPLE=0)", NULL, "0");
    rc |= run_child(argv, shim, logdir, "accounting, 1 in 16 timed (default)", NULL, NULL);
    rc |= run_child(argv, shim, logdir, "accounting, every call timed (FLOP_SAMPLE=1)", NULL, "1");
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", logdir);
    if (system(cmd) != 0) fprintf(stderr, "bench_accounting: could not remove %s\n", logdir);
    return rc;
}
