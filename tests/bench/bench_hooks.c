/* bench_hooks: cost of a hooked call.  Prints, in one run, ns per call of
 * the same real function (cudaGetDevice) made
 *   - directly (no shim loaded),
 *   - through the hook in passthrough (LD_PRELOAD=libtrainshim.so TRAINSHIM=0),
 *   - through the hook with the shim active (outermost-call accounting).
 * The two hooked runs are this program re-executed under LD_PRELOAD (the
 * shim is located through $B, default "build").  Run on the emulator:
 *   LD_LIBRARY_PATH=build/emu build/bench/bench_hooks [calls] */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Best of 5 rounds: the least disturbed by the machine. */
static double measure(long calls)
{
    int dev = -1;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaSetDevice(0) != cudaSuccess) {
        fprintf(stderr, "bench_hooks: no CUDA device (run with LD_LIBRARY_PATH=<build>/emu)\n");
        exit(1);
    }
    double best = 1e30;
    for (int round = 0; round < 5; round++) {
        double t0 = now_ns();
        for (long i = 0; i < calls; i++) {
            if (cudaGetDevice(&dev) != cudaSuccess) exit(1);
            __asm__ volatile("" ::: "memory");
        }
        double per = (now_ns() - t0) / (double)calls;
        if (per < best) best = per;
    }
    return best;
}

static int run_child(char **argv, const char *shim, const char *trainshim, const char *logdir)
{
    pid_t pid = fork();
    if (pid == 0) {
        char log[4200];
        snprintf(log, sizeof log, "%s/bench.%%p.log", logdir);
        setenv("LD_PRELOAD", shim, 1);
        setenv("TRAINSHIM_LOG", log, 1);
        if (trainshim) setenv("TRAINSHIM", trainshim, 1); else unsetenv("TRAINSHIM");
        setenv("BENCH_HOOKS_CHILD", trainshim ? "hooked, passthrough (TRAINSHIM=0)" : "hooked, active", 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 2000000;
    if (calls <= 0) calls = 2000000;
    const char *child = getenv("BENCH_HOOKS_CHILD");
    if (child) {
        printf("  %-36s %7.1f ns/call\n", child, measure(calls));
        return 0;
    }
    const char *b = getenv("B");
    char shim[4096];
    if (!realpath(b ? b : "build", shim)) { fprintf(stderr, "bench_hooks: no build directory\n"); return 1; }
    strncat(shim, "/libtrainshim.so", sizeof shim - strlen(shim) - 1);
    if (access(shim, R_OK) != 0) { fprintf(stderr, "bench_hooks: %s not built\n", shim); return 1; }
    char logdir[] = "/tmp/bench_hooks_XXXXXX";
    if (!mkdtemp(logdir)) { perror("mkdtemp"); return 1; }

    printf("bench_hooks: cudaGetDevice, %ld calls per round, best of 5\n", calls);
    printf("  %-36s %7.1f ns/call\n", "direct (no shim)", measure(calls));
    fflush(stdout);
    int rc = run_child(argv, shim, "0", logdir) | run_child(argv, shim, NULL, logdir);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", logdir);
    if (system(cmd) != 0) fprintf(stderr, "bench_hooks: could not remove %s\n", logdir);
    return rc;
}
