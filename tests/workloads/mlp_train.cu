// mlp_train: a small but real training job written against the CUDA runtime
// and cuBLAS the way a framework without its own caching allocator would: a
// two-layer MLP (in -> hidden, ReLU, hidden -> out) trained with SGD on a
// synthetic regression task (targets from a fixed random "teacher" network).
//
// Every step cudaMalloc()s its activations and gradients and cudaFree()s them
// at the end, copies the batch host->device from pageable memory, copies the
// loss device->host, and prints it.  GEMMs go through cuBLAS; the elementwise
// work is real CUDA kernels.  It runs unchanged on a GPU or on trainshim's
// emulator, where the kernels' CPU implementations are registered through
// emu.h (found with dlsym, so nothing is required on a real GPU).
//
// Usage: mlp_train [steps] [batch]      Output: one "step N loss X" line per
// step and a final "weights checksum" line (bit-exact, for differential tests).
//
// Data parallel: started by a launcher with a world size above 1 (mpirun sets
// OMPI_COMM_WORLD_SIZE/RANK/LOCAL_RANK, torchrun WORLD_SIZE/RANK/LOCAL_RANK),
// every rank generates the same global batch, trains on its own slice of
// batch/world samples, and averages its gradients with one ncclAllReduce
// (ncclAvg, on its stream) per step, so all ranks keep identical weights.  The
// NCCL id travels without MPI, like torch.distributed's file store: rank 0
// writes it to a file (MLP_RENDEZVOUS, or ${TMPDIR:-/tmp}/mlp_train.<job id>.ncclid
// with the launcher's job id) by atomic rename; the others poll for it for
// MLP_RENDEZVOUS_TIMEOUT seconds (60).  Output then: "rank R step N loss X"
// (the rank's own slice), and after every rank checked with an ncclAllGather
// that all weights checksums agree, rank 0's "weights checksum" line.
// RANK/WORLD_SIZE without MLP_RENDEZVOUS or torchrun's TORCHELASTIC_RUN_ID
// only name the process: it trains alone, as with no launcher.
//
// MLP_LOAD_MS (default 0): the host also waits that long for each batch
// before building it, standing for a data loader that reads from disk (the
// demo sets it, so that its report's GPU idle advice does not hang on how
// fast this machine builds a batch).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"

#define IN 64
#define HID 256
#define OUT 16

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "mlp_train: %s failed: %s (%d) at line %d\n", #call, cudaGetErrorString(e_), (int)e_, __LINE__); \
    exit(1); } } while (0)
#define CHECK_BLAS(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "mlp_train: %s failed: %d at line %d\n", #call, (int)s_, __LINE__); exit(1); } } while (0)
#define CHECK_NCCL(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { \
    fprintf(stderr, "mlp_train: %s failed: %s (%d) at line %d: %s\n", #call, ncclGetErrorString(r_), (int)r_, \
            __LINE__, ncclGetLastError(NULL)); exit(1); } } while (0)

// ---------------------------------------------------------------- kernels
__global__ void add_bias_relu(float *x, const float *b, int rows, int cols)
{   // x is rows x cols column-major; b has rows entries
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) { float v = x[i] + b[i % rows]; x[i] = v > 0.f ? v : 0.f; }
}
__global__ void add_bias(float *x, const float *b, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) x[i] += b[i % rows];
}
// d = (y - t) * 2/n; loss[0] = sum((y - t)^2) / n  (one block reduces, for determinism)
__global__ void mse_grad(const float *y, const float *t, float *d, float *loss, int n)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    float s = 0.f;
    for (int i = 0; i < n; i++) { float e = y[i] - t[i]; d[i] = 2.f * e / n; s += e * e; }
    loss[0] = s / n;
}
__global__ void relu_backward(float *d, const float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && a[i] <= 0.f) d[i] = 0.f;
}
// gb[r] = sum over columns of d[r, :]
__global__ void bias_grad(const float *d, float *gb, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) { float s = 0.f; for (int c = 0; c < cols; c++) s += d[r + c * rows]; gb[r] = s; }
}
__global__ void sgd(float *w, const float *g, float lr, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) w[i] -= lr * g[i];
}

// ------------------------------------------- CPU implementations (emulator)
#define ARG(T, i) (*(T *)args[i])
// The emulator's host-link model: each implementation charges the exact
// bytes of every buffer it touches (emuKernelChargesLink), so kernels over
// memory offload put on host-backed pages cost what they would cost on a GPU.
typedef uint64_t (*link_fn)(const void *, size_t);
static link_fn emu_link;
static void charge_link(const void *p, long bytes) { if (emu_link) emu_link(p, (size_t)bytes); }
static void cpu_add_bias_relu(void **args, const emu_launch *)
{
    float *x = ARG(float *, 0); const float *b = ARG(const float *, 1);
    int rows = ARG(int, 2), cols = ARG(int, 3);
    charge_link(x, 4L * rows * cols); charge_link(b, 4L * rows);
    for (int i = 0; i < rows * cols; i++) { float v = x[i] + b[i % rows]; x[i] = v > 0.f ? v : 0.f; }
}
static void cpu_add_bias(void **args, const emu_launch *)
{
    float *x = ARG(float *, 0); const float *b = ARG(const float *, 1);
    int rows = ARG(int, 2), cols = ARG(int, 3);
    charge_link(x, 4L * rows * cols); charge_link(b, 4L * rows);
    for (int i = 0; i < rows * cols; i++) x[i] += b[i % rows];
}
static void cpu_mse_grad(void **args, const emu_launch *)
{
    const float *y = ARG(const float *, 0), *t = ARG(const float *, 1);
    float *d = ARG(float *, 2), *loss = ARG(float *, 3); int n = ARG(int, 4);
    charge_link(y, 4L * n); charge_link(t, 4L * n); charge_link(d, 4L * n); charge_link(loss, 4);
    float s = 0.f;
    for (int i = 0; i < n; i++) { float e = y[i] - t[i]; d[i] = 2.f * e / n; s += e * e; }
    loss[0] = s / n;
}
static void cpu_relu_backward(void **args, const emu_launch *)
{
    float *d = ARG(float *, 0); const float *a = ARG(const float *, 1); int n = ARG(int, 2);
    charge_link(d, 4L * n); charge_link(a, 4L * n);
    for (int i = 0; i < n; i++) if (a[i] <= 0.f) d[i] = 0.f;
}
static void cpu_bias_grad(void **args, const emu_launch *)
{
    const float *d = ARG(const float *, 0); float *gb = ARG(float *, 1);
    int rows = ARG(int, 2), cols = ARG(int, 3);
    charge_link(d, 4L * rows * cols); charge_link(gb, 4L * rows);
    for (int r = 0; r < rows; r++) { float s = 0.f; for (int c = 0; c < cols; c++) s += d[r + c * rows]; gb[r] = s; }
}
static void cpu_sgd(void **args, const emu_launch *)
{
    float *w = ARG(float *, 0); const float *g = ARG(const float *, 1);
    float lr = ARG(float, 2); int n = ARG(int, 3);
    charge_link(w, 4L * n); charge_link(g, 4L * n);
    for (int i = 0; i < n; i++) w[i] -= lr * g[i];
}

// Registers the CPU implementations when the emulator answers; on a real GPU
// libcuda.so.1 has no emuRegisterKernel and nothing happens.
static void register_emulated_kernels(void)
{
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!drv) drv = dlopen("libcuda.so.1", RTLD_LAZY);
    if (!drv) return;
    typedef int (*reg_fn)(const void *, const char *, emu_kernel_fn, int, const size_t *);
    reg_fn reg = (reg_fn)dlsym(drv, "emuRegisterKernel");
    if (!reg) return;
    static const size_t p4[] = {8, 8, 4, 4}, p5[] = {8, 8, 8, 8, 4}, p3[] = {8, 8, 4};
    static const size_t psgd[] = {8, 8, 4, 4};
    reg((const void *)add_bias_relu, NULL, cpu_add_bias_relu, 4, p4);
    reg((const void *)add_bias, NULL, cpu_add_bias, 4, p4);
    reg((const void *)mse_grad, NULL, cpu_mse_grad, 5, p5);
    reg((const void *)relu_backward, NULL, cpu_relu_backward, 3, p3);
    reg((const void *)bias_grad, NULL, cpu_bias_grad, 4, p4);
    reg((const void *)sgd, NULL, cpu_sgd, 4, psgd);
    typedef int (*self_fn)(const void *, const char *);
    self_fn self = (self_fn)dlsym(drv, "emuKernelChargesLink");
    emu_link = (link_fn)dlsym(drv, "emuHostLinkCharge");
    if (self && emu_link) {
        const void *const all[] = {(const void *)add_bias_relu, (const void *)add_bias, (const void *)mse_grad,
                                   (const void *)relu_backward, (const void *)bias_grad, (const void *)sgd};
        for (const void *k : all) self(k, NULL);
    }
}

// MLP_EMU_COUNTERS=1 (under the emulator): after each step and at the end,
// the host link's simulated nanoseconds and bytes so far on stderr
// ("emu step N link.host.ns X link.host.bytes Y"), for tests that compare
// them with trainshim's predicted link time.  Silent on a real GPU.
static void print_emu_link(const char *what, int step)
{
    static uint64_t (*get)(const char *);
    static int looked;
    if (!looked) {
        looked = 1;
        const char *on = getenv("MLP_EMU_COUNTERS");
        void *drv = on && *on && strcmp(on, "0") ? dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD) : NULL;
        if (drv) get = (uint64_t (*)(const char *))dlsym(drv, "emuGetCounter");
    }
    if (!get) return;
    fprintf(stderr, "emu %s %d link.host.ns %llu link.host.bytes %llu\n", what, step,
            (unsigned long long)get("link.host.ns"), (unsigned long long)get("link.host.bytes"));
}

// ---------------------------------------------------------------- host side
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void)   // deterministic uniform in [-1, 1)
{
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

static float *device_init(int n, float scale)
{
    float *h = (float *)malloc(n * sizeof(float)), *d;
    for (int i = 0; i < n; i++) h[i] = frand() * scale;
    CHECK(cudaMalloc((void **)&d, n * sizeof(float)));
    CHECK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    free(h);
    return d;
}

static unsigned blocks(int n) { return (unsigned)((n + 255) / 256); }

// ------------------------------------------------------------ data parallel
struct dist {
    int rank, world, local_rank;
    ncclComm_t comm;             // NULL when world == 1
    char rendezvous[4096];       // the NCCL id's file when world > 1
};

// A non-negative integer from the environment, or -1 when unset; exits on junk.
static int env_index(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 0 || x > 1 << 20) {
        fprintf(stderr, "mlp_train: %s=\"%s\" is not a non-negative integer\n", name, v);
        exit(1);
    }
    return (int)x;
}

// Where rank 0 leaves the NCCL id: MLP_RENDEZVOUS, else a name in TMPDIR built
// from the job id the launcher gives every rank of one launch.  0 or -1.
static int rendezvous_path(char *out, size_t n)
{
    const char *explicit_path = getenv("MLP_RENDEZVOUS");
    if (explicit_path && *explicit_path)
        return snprintf(out, n, "%s", explicit_path) < (int)n ? 0 : -1;
    static const char *const job_vars[] = {"OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
                                           "TORCHELASTIC_RUN_ID"};
    for (unsigned i = 0; i < sizeof job_vars / sizeof job_vars[0]; i++) {
        const char *job = getenv(job_vars[i]);
        if (!job || !*job) continue;
        const char *tmp = getenv("TMPDIR");
        int len = snprintf(out, n, "%s/mlp_train.", tmp && *tmp ? tmp : "/tmp");
        for (const char *c = job; *c && len + 8 < (int)n; c++)   // a job id may hold '/' or spaces
            out[len++] = (*c == '/' || *c == ' ') ? '_' : *c;
        return snprintf(out + len, n - len, ".ncclid") < (int)(n - len) ? 0 : -1;
    }
    return -1;
}

// Rank, size and local rank come from one launcher's set of variables, so a
// stray RANK in an mpirun job's environment cannot mix with Open MPI's.
// RANK/WORLD_SIZE alone, with no rendezvous (MLP_RENDEZVOUS, or torchrun's
// TORCHELASTIC_RUN_ID), only name the process (trainshim's %r): it trains
// alone, as a one-process job, and says so.
static struct dist dist_from_env(void)
{
    static const char *const sets[][3] = {
        {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},   // mpirun
        {"WORLD_SIZE", "RANK", "LOCAL_RANK"},                                            // torchrun
    };
    struct dist d = {0, 1, 0, NULL, ""};
    for (unsigned i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        int world = env_index(sets[i][0]);
        if (world < 0) continue;
        int rank = env_index(sets[i][1]), local = env_index(sets[i][2]);
        if (world < 1 || rank < 0 || rank >= world) {
            fprintf(stderr, "mlp_train: %s=%d needs %s in [0, %d) (got %d)\n", sets[i][0], world, sets[i][1],
                    world, rank);
            exit(1);
        }
        if (world > 1 && rendezvous_path(d.rendezvous, sizeof d.rendezvous) != 0) {
            if (i == 0) {   // mpirun always gives a job id: something is wrong
                fprintf(stderr, "mlp_train: rank %d of %d: no launcher job id (OMPI_MCA_ess_base_jobid, "
                        "PMIX_NAMESPACE) to name the rendezvous file: set MLP_RENDEZVOUS to a path all ranks "
                        "share\n", rank, world);
                exit(1);
            }
            fprintf(stderr, "mlp_train: %s=%d but no MLP_RENDEZVOUS or TORCHELASTIC_RUN_ID to meet the other "
                    "ranks: training alone\n", sets[i][0], world);
            break;
        }
        d.world = world;
        d.rank = rank;
        d.local_rank = local >= 0 ? local : rank;
        break;
    }
    return d;
}

#define RENDEZVOUS_MAGIC "mlp_train-ncclid-v1"

static void write_unique_id(const char *path, int world, const ncclUniqueId *id)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) { fprintf(stderr, "mlp_train: rank 0: cannot write %s: %s\n", tmp, strerror(errno)); exit(1); }
    fprintf(f, "%s world %d\n", RENDEZVOUS_MAGIC, world);
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) fprintf(f, "%02x", (unsigned char)id->internal[i]);
    fputc('\n', f);
    // readers see either no file or the whole id: rename is atomic
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "mlp_train: rank 0: cannot publish %s: %s\n", path, strerror(errno));
        unlink(tmp);
        exit(1);
    }
}

// 1 with *id filled from a complete, current file; 0 if not there (yet).
static int read_unique_id(const char *path, int rank, int world, time_t started, ncclUniqueId *id)
{
    struct stat st;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    // a file written long before this rank started is a crashed job's leftover
    int ok = fstat(fileno(f), &st) == 0 && st.st_mtime >= started - 60;
    char magic[64] = "";
    int file_world = -1;
    ok = ok && fscanf(f, "%63s world %d ", magic, &file_world) == 2 && !strcmp(magic, RENDEZVOUS_MAGIC);
    for (int i = 0; ok && i < NCCL_UNIQUE_ID_BYTES; i++) {
        unsigned v;
        ok = fscanf(f, "%2x", &v) == 1;
        id->internal[i] = (char)v;
    }
    fclose(f);
    if (ok && file_world != world) {
        fprintf(stderr, "mlp_train: rank %d: %s is for %d ranks, this job has %d\n", rank, path, file_world, world);
        exit(1);
    }
    return ok;
}

// Joins the job's communicator (collective: returns once every rank joined).
static void dist_init(struct dist *d)
{
    int ndev = 0;
    CHECK(cudaGetDeviceCount(&ndev));
    CHECK(cudaSetDevice(d->local_rank % ndev));
    const char *path = d->rendezvous;
    ncclUniqueId id;
    if (d->rank == 0) {
        CHECK_NCCL(ncclGetUniqueId(&id));
        write_unique_id(path, d->world, &id);
    } else {
        time_t started = time(NULL);
        int timeout = env_index("MLP_RENDEZVOUS_TIMEOUT");
        if (timeout < 0) timeout = 60;
        struct timespec t0, now;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (!read_unique_id(path, d->rank, d->world, started, &id)) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - t0.tv_sec + (now.tv_nsec - t0.tv_nsec) / 1e9 >= timeout) {
                fprintf(stderr, "mlp_train: rank %d of %d: no NCCL id from rank 0 in %s after %d s (is rank 0 "
                        "running? ranks on several hosts need MLP_RENDEZVOUS on a shared filesystem; "
                        "MLP_RENDEZVOUS_TIMEOUT sets the wait)\n", d->rank, d->world, path, timeout);
                exit(1);
            }
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    CHECK_NCCL(ncclCommInitRank(&d->comm, d->world, id, d->rank));
    if (d->rank == 0) unlink(path);   // every rank has joined: the id is no longer needed
}

// Every rank's checksum must equal every other's; 1 if they do.
static int weights_agree(const struct dist *d, cudaStream_t stream, uint64_t mine)
{
    uint64_t *dev_mine, *dev_all, *all = (uint64_t *)malloc(sizeof mine * d->world);
    if (!all) { fprintf(stderr, "mlp_train: out of host memory\n"); exit(1); }
    CHECK(cudaMalloc((void **)&dev_mine, sizeof mine));
    CHECK(cudaMalloc((void **)&dev_all, sizeof mine * d->world));
    CHECK(cudaMemcpy(dev_mine, &mine, sizeof mine, cudaMemcpyHostToDevice));
    CHECK_NCCL(ncclAllGather(dev_mine, dev_all, 1, ncclUint64, d->comm, stream));
    CHECK(cudaMemcpyAsync(all, dev_all, sizeof mine * d->world, cudaMemcpyDeviceToHost, stream));
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaFree(dev_mine));
    CHECK(cudaFree(dev_all));
    int agree = 1;
    for (int r = 0; r < d->world; r++)
        if (all[r] != mine) {
            fprintf(stderr, "mlp_train: rank %d: weights differ: rank %d has checksum %016llx, rank %d has %016llx\n",
                    d->rank, d->rank, (unsigned long long)mine, r, (unsigned long long)all[r]);
            agree = 0;
        }
    free(all);
    return agree;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 30;
    int batch = argc > 2 ? atoi(argv[2]) : 512;   // the global batch, split over the ranks
    const float lr = 1.0f;
    register_emulated_kernels();

    struct dist dist = dist_from_env();
    const int parallel = dist.world > 1;
    if (parallel && (batch < dist.world || batch % dist.world)) {
        fprintf(stderr, "mlp_train: batch %d does not split evenly over %d ranks\n", batch, dist.world);
        return 1;
    }
    const int local = batch / dist.world;          // this rank's samples: [rank * local, (rank + 1) * local)
    const int nparams = HID * IN + HID + OUT * HID + OUT;
    if (parallel) {
        dist_init(&dist);
        if (dist.rank == 0) {
            printf("data parallel: %d ranks x %d samples, %d parameters all-reduced per step\n", dist.world, local,
                   nparams);
            fflush(stdout);
        }
    }

    cublasHandle_t blas;
    CHECK_BLAS(cublasCreate(&blas));
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    CHECK_BLAS(cublasSetStream(blas, stream));

    // teacher (host) and student (device) parameters; every rank draws the
    // same numbers, so the replicas start identical
    float teacher_w[OUT * IN];
    for (int i = 0; i < OUT * IN; i++) teacher_w[i] = frand() * 0.5f;
    float *w1 = device_init(HID * IN, 0.125f), *b1 = device_init(HID, 0.0f);
    float *w2 = device_init(OUT * HID, 0.0625f), *b2 = device_init(OUT, 0.0f);

    // pageable host batch buffers (the global batch), refilled every step
    float *hx = (float *)malloc(sizeof(float) * IN * batch);
    float *ht = (float *)malloc(sizeof(float) * OUT * batch);
    const float *my_hx = hx + (size_t)IN * local * dist.rank, *my_ht = ht + (size_t)OUT * local * dist.rank;
    const float one = 1.f, zero = 0.f;

    const int load_ms = env_index("MLP_LOAD_MS");
    for (int step = 0; step < steps; step++) {
        if (load_ms > 0) {
            struct timespec wait = {load_ms / 1000, (long)(load_ms % 1000) * 1000000L};
            nanosleep(&wait, NULL);
        }
        for (int c = 0; c < batch; c++) {
            for (int i = 0; i < IN; i++) hx[i + c * IN] = frand();
            for (int o = 0; o < OUT; o++) {
                float s = 0.f;
                for (int i = 0; i < IN; i++) s += teacher_w[o + i * OUT] * hx[i + c * IN];
                ht[o + c * OUT] = s > 0.f ? s : 0.1f * s;
            }
        }
        float *x, *t, *h, *y, *dy, *dh, *gw1, *gb1, *gw2, *gb2, *loss, *grads = NULL;
        CHECK(cudaMalloc((void **)&x, sizeof(float) * IN * local));
        CHECK(cudaMalloc((void **)&t, sizeof(float) * OUT * local));
        CHECK(cudaMalloc((void **)&h, sizeof(float) * HID * local));
        CHECK(cudaMalloc((void **)&y, sizeof(float) * OUT * local));
        CHECK(cudaMalloc((void **)&dy, sizeof(float) * OUT * local));
        CHECK(cudaMalloc((void **)&dh, sizeof(float) * HID * local));
        if (parallel) {
            // one flat buffer, one all-reduce: the way DDP buckets gradients
            CHECK(cudaMalloc((void **)&grads, sizeof(float) * nparams));
            gw1 = grads; gb1 = gw1 + HID * IN; gw2 = gb1 + HID; gb2 = gw2 + OUT * HID;
        } else {
            CHECK(cudaMalloc((void **)&gw1, sizeof(float) * HID * IN));
            CHECK(cudaMalloc((void **)&gb1, sizeof(float) * HID));
            CHECK(cudaMalloc((void **)&gw2, sizeof(float) * OUT * HID));
            CHECK(cudaMalloc((void **)&gb2, sizeof(float) * OUT));
        }
        CHECK(cudaMalloc((void **)&loss, sizeof(float)));
        // pageable host -> device: the call returns once the source is staged,
        // so refilling hx next step is safe
        CHECK(cudaMemcpyAsync(x, my_hx, sizeof(float) * IN * local, cudaMemcpyHostToDevice, stream));
        CHECK(cudaMemcpyAsync(t, my_ht, sizeof(float) * OUT * local, cudaMemcpyHostToDevice, stream));

        // forward: h = relu(W1 x + b1); y = W2 h + b2
        CHECK_BLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, HID, local, IN, &one, w1, HID, x, IN, &zero, h, HID));
        add_bias_relu<<<blocks(HID * local), 256, 0, stream>>>(h, b1, HID, local);
        CHECK_BLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, OUT, local, HID, &one, w2, OUT, h, HID, &zero, y, OUT));
        add_bias<<<blocks(OUT * local), 256, 0, stream>>>(y, b2, OUT, local);
        mse_grad<<<1, 1, 0, stream>>>(y, t, dy, loss, OUT * local);

        // backward
        CHECK_BLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, OUT, HID, local, &one, dy, OUT, h, HID, &zero, gw2, OUT));
        bias_grad<<<blocks(OUT), 256, 0, stream>>>(dy, gb2, OUT, local);
        CHECK_BLAS(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, HID, local, OUT, &one, w2, OUT, dy, OUT, &zero, dh, HID));
        relu_backward<<<blocks(HID * local), 256, 0, stream>>>(dh, h, HID * local);
        CHECK_BLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, HID, IN, local, &one, dh, HID, x, IN, &zero, gw1, HID));
        bias_grad<<<blocks(HID), 256, 0, stream>>>(dh, gb1, HID, local);

        // each rank's gradient is the mean over its slice: their average is
        // the gradient of the global batch's mean loss
        if (parallel)
            CHECK_NCCL(ncclAllReduce(grads, grads, nparams, ncclFloat32, ncclAvg, dist.comm, stream));

        // update
        sgd<<<blocks(HID * IN), 256, 0, stream>>>(w1, gw1, lr, HID * IN);
        sgd<<<blocks(HID), 256, 0, stream>>>(b1, gb1, lr, HID);
        sgd<<<blocks(OUT * HID), 256, 0, stream>>>(w2, gw2, lr, OUT * HID);
        sgd<<<blocks(OUT), 256, 0, stream>>>(b2, gb2, lr, OUT);
        CHECK(cudaGetLastError());

        // device -> pageable host: complete when the call returns
        float hloss = -1.f;
        CHECK(cudaMemcpyAsync(&hloss, loss, sizeof(float), cudaMemcpyDeviceToHost, stream));
        CHECK(cudaStreamSynchronize(stream));
        if (parallel)
            printf("rank %d step %d loss %.6f\n", dist.rank, step, hloss);
        else
            printf("step %d loss %.6f\n", step, hloss);
        fflush(stdout);
        print_emu_link("step", step);

        // per-step frees right after queuing work: cudaFree waits for the device
        float *tmp[] = {x, t, h, y, dy, dh, gw1, gb1, gw2, gb2, loss};
        unsigned ntmp = sizeof tmp / sizeof tmp[0];
        if (parallel) { tmp[6] = grads; tmp[7] = loss; ntmp = 8; }
        for (unsigned i = 0; i < ntmp; i++) CHECK(cudaFree(tmp[i]));
    }

    // bit-exact checksum of the trained weights (FNV-1a over the bytes)
    float *params[] = {w1, b1, w2, b2};
    int sizes[] = {HID * IN, HID, OUT * HID, OUT};
    uint64_t sum = 1469598103934665603ull;
    for (int p = 0; p < 4; p++) {
        float *hw = (float *)malloc(sizeof(float) * sizes[p]);
        CHECK(cudaMemcpy(hw, params[p], sizeof(float) * sizes[p], cudaMemcpyDeviceToHost));
        const unsigned char *bytes = (const unsigned char *)hw;
        for (size_t i = 0; i < sizeof(float) * sizes[p]; i++) { sum ^= bytes[i]; sum *= 1099511628211ull; }
        free(hw);
        CHECK(cudaFree(params[p]));
    }
    print_emu_link("end", steps);
    int status = 0;
    if (parallel && !weights_agree(&dist, stream, sum)) status = 1;
    else if (dist.rank == 0) printf("weights checksum %016llx\n", (unsigned long long)sum);
    free(hx); free(ht);
    CHECK_BLAS(cublasDestroy(blas));
    if (parallel) CHECK_NCCL(ncclCommDestroy(dist.comm));
    CHECK(cudaStreamDestroy(stream));
    return status;
}
