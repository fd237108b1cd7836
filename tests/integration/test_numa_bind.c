/* NUMA placement as a program sees it; test_numa_bind.sh runs it with and
 * without the shim under a fake two-node sysfs (TRAINSHIM_SYSFS_ROOT) and
 * checks what TRAINSHIM_NUMA did.
 *
 *   test_numa_bind DEVICE
 *
 * stdout, "data:" lines: results that must not depend on the shim (a
 * pageable round trip through the device, big enough for the copy engine's
 * staging ring).  stdout, "numa:" lines: what placement the kernel reports:
 *   numa: thread-before cpus L   affinity of a thread started before CUDA
 *   numa: main cpus L            the main thread's affinity after CUDA began
 *   numa: placed-vmas-before N   mappings with a preferred/bind policy
 *   numa: placed-vmas-after N    the same after the staged copies
 *   numa: host-alloc policy P nodes L   get_mempolicy on a cudaHostAlloc block
 * The memory lines give the policy requested for a range, not where its
 * pages physically are: a one-node machine places every page on node 0
 * whatever the policy, so the policy is what a test can observe. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { N = 8 << 20 };
#define MPOL_F_ADDR_ (1 << 1)

static void fail(const char *what, int e)
{
    printf("FAIL: %s = %d\n", what, e);
    exit(1);
}
#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess)                                                                               \
            fail(#call, (int)e_);                                                                            \
    } while (0)

static void list(const cpu_set_t *s, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (int c = 0; c < CPU_SETSIZE && len + 16 < n; c++)
        if (CPU_ISSET(c, s))
            len += (size_t)snprintf(buf + len, n - len, "%s%d", len ? "," : "", c);
}

static void print_affinity(const char *who)
{
    cpu_set_t s;
    char b[4096];
    if (sched_getaffinity(0, sizeof s, &s))
        fail("sched_getaffinity", 0);
    list(&s, b, sizeof b);
    printf("numa: %s cpus %s\n", who, b);
}

/* A thread that exists before the first CUDA call: binding must reach it. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int go;
static void *early_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!go)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    print_affinity("thread-before");
    return NULL;
}

/* Mappings whose policy is a preference or a binding (numa_maps' second field). */
static int placed_vmas(void)
{
    FILE *f = fopen("/proc/self/numa_maps", "r");
    char line[4096];
    int n = 0;
    if (!f)
        fail("open /proc/self/numa_maps", 0);
    while (fgets(line, sizeof line, f)) {
        char *sp = strchr(line, ' ');
        if (sp && (!strncmp(sp + 1, "prefer", 6) || !strncmp(sp + 1, "bind", 4)))
            n++;
    }
    fclose(f);
    return n;
}

static void round_trip(void)
{
    unsigned char *src = malloc(N), *dst = malloc(N);
    void *d;
    unsigned long sum = 0;
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 131 + 7);
    CHECK(cudaMalloc(&d, N));
    CHECK(cudaMemcpy(d, src, N, cudaMemcpyHostToDevice));
    memset(dst, 0, N);
    CHECK(cudaMemcpy(dst, d, N, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        sum = sum * 31 + dst[i];
    bool same = memcmp(src, dst, N) == 0;
    printf("data: round trip %s, checksum %lx\n", same ? "identical" : "differs", sum);
    if (!same)
        fail("round trip", 0);
    CHECK(cudaFree(d));
    free(src);
    free(dst);
}

static void host_alloc_policy(void)
{
    void *h;
    int mode = -1;
    unsigned long mask[16] = { 0 };
    CHECK(cudaHostAlloc(&h, 1 << 20, cudaHostAllocDefault));
    memset(h, 1, 1 << 20);
    printf("data: host block written\n");
    if (syscall(SYS_get_mempolicy, &mode, mask, 1024, h, MPOL_F_ADDR_) != 0)
        fail("get_mempolicy", 0);
    cpu_set_t nodes; /* same text form as a CPU list */
    CPU_ZERO(&nodes);
    for (int i = 0; i < 1024 && i < CPU_SETSIZE; i++)
        if ((mask[i / 64] >> (i % 64)) & 1)
            CPU_SET(i, &nodes);
    char b[256];
    list(&nodes, b, sizeof b);
    printf("numa: host-alloc policy %d nodes %s\n", mode, b[0] ? b : "-");
    CHECK(cudaFreeHost(h));
}

int main(int argc, char **argv)
{
    int dev = argc > 1 ? atoi(argv[1]) : 0;
    pthread_t t;
    pthread_create(&t, NULL, early_thread, NULL);
    printf("numa: placed-vmas-before %d\n", placed_vmas());
    CHECK(cudaSetDevice(dev));
    round_trip();
    printf("numa: placed-vmas-after %d\n", placed_vmas());
    host_alloc_policy();
    print_affinity("main");
    pthread_mutex_lock(&mu);
    go = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    return 0;
}
