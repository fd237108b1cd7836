/* Emulated NCCL across processes: every collective, every reduction op and
 * every element type, with 2 and then 4 ranks, each rank a separate process
 * (this binary re-executed with NCCL_TEST_RANK/WORLD set and the unique id in
 * NCCL_TEST_ID).  Expected values are computed on the host; inputs are small
 * integers so that half and bfloat16 results are exact. */
#include <cuda.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "emu.h"
#include "cublas/emu_float16.h"

static int failures;
static int rank, world;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { fprintf(stderr, "rank %d: %s = %d\n", rank, #x, (int)r_); exit(2); } } while (0)
#define NC(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { fprintf(stderr, "rank %d: %s = %s\n", rank, #x, ncclGetErrorString(r_)); exit(3); } } while (0)

static const ncclDataType_t types[] = {ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64,
                                       ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3,
                                       ncclFloat8e5m2};
static const char *type_names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
                                   "bf16", "fp8e4m3", "fp8e5m2"};
static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
static const char *op_names[] = {"sum", "prod", "max", "min", "avg"};

static size_t tsize(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static int is_int(ncclDataType_t t) { return t <= ncclUint64; }

static void put(void *buf, size_t i, ncclDataType_t t, double v)
{
    switch (t) {
    case ncclInt8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case ncclUint8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case ncclUint32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case ncclInt64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case ncclUint64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case ncclFloat16: ((uint16_t *)buf)[i] = emu_float_to_half((float)v); break;
    case ncclFloat32: ((float *)buf)[i] = (float)v; break;
    case ncclFloat64: ((double *)buf)[i] = v; break;
    case ncclBfloat16: ((uint16_t *)buf)[i] = emu_float_to_bf16((float)v); break;
    case ncclFloat8e4m3: ((uint8_t *)buf)[i] = emu_float_to_fp8((float)v, 0); break;
    case ncclFloat8e5m2: ((uint8_t *)buf)[i] = emu_float_to_fp8((float)v, 1); break;
    default: break;
    }
}

static double get(const void *buf, size_t i, ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: return ((const int8_t *)buf)[i];
    case ncclUint8: return ((const uint8_t *)buf)[i];
    case ncclInt32: return ((const int32_t *)buf)[i];
    case ncclUint32: return ((const uint32_t *)buf)[i];
    case ncclInt64: return (double)((const int64_t *)buf)[i];
    case ncclUint64: return (double)((const uint64_t *)buf)[i];
    case ncclFloat16: return emu_half_to_float(((const uint16_t *)buf)[i]);
    case ncclFloat32: return ((const float *)buf)[i];
    case ncclFloat64: return ((const double *)buf)[i];
    case ncclBfloat16: return emu_bf16_to_float(((const uint16_t *)buf)[i]);
    case ncclFloat8e4m3: return emu_fp8_to_float(((const uint8_t *)buf)[i], 0);
    case ncclFloat8e5m2: return emu_fp8_to_float(((const uint8_t *)buf)[i], 1);
    default: return 0;
    }
}

/* Input of rank r at element i: 1..3, so products over 4 ranks stay <= 81. */
static double value(int r, size_t i) { return (double)(1 + (r + i) % 3); }

static double expected_reduce(size_t i, ncclRedOp_t op, ncclDataType_t t, size_t offset)
{
    double acc = value(0, i + offset);
    for (int r = 1; r < world; r++) {
        double v = value(r, i + offset);
        switch (op) {
        case ncclProd: acc *= v; break;
        case ncclMax: acc = v > acc ? v : acc; break;
        case ncclMin: acc = v < acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (op == ncclAvg) acc = is_int(t) ? (double)((long long)acc / world) : acc / world;
    return acc;
}

static CUstream stream;
static ncclComm_t comm;

static void *dev_alloc(size_t bytes)
{
    CUdeviceptr p;
    CU(cuMemAlloc(&p, bytes ? bytes : 1));
    return (void *)(uintptr_t)p;
}

static void to_dev(void *d, const void *h, size_t n) { CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)d, h, n)); }
static void to_host(void *h, const void *d, size_t n) { CU(cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)d, n)); }

static void fill(void *host, size_t count, ncclDataType_t t, int r, size_t offset)
{
    for (size_t i = 0; i < count; i++) put(host, i, t, value(r, i + offset));
}

static void test_allreduce_all_types_ops(void)
{
    const size_t count = 1031;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        ncclDataType_t t = types[ti];
        size_t bytes = count * tsize(t);
        char *h = malloc(bytes), *out = malloc(bytes);
        void *send = dev_alloc(bytes), *recv = dev_alloc(bytes);
        fill(h, count, t, rank, 0);
        to_dev(send, h, bytes);
        for (size_t oi = 0; oi < sizeof ops / sizeof *ops; oi++) {
            NC(ncclAllReduce(send, recv, count, t, ops[oi], comm, stream));
            CU(cuStreamSynchronize(stream));
            to_host(out, recv, bytes);
            int bad = 0;
            for (size_t i = 0; i < count && !bad; i++) {
                /* the exact result rounded once to the type (exact except fp8 products) */
                unsigned char w[8];
                put(w, 0, t, expected_reduce(i, ops[oi], t, 0));
                double want = get(w, 0, t), got = get(out, i, t);
                if (got != want) {
                    CHECK(0, "allreduce %s %s [%zu] = %g, want %g", type_names[ti], op_names[oi], i, got, want);
                    bad = 1;
                }
            }
        }
        cuMemFree((CUdeviceptr)(uintptr_t)send);
        cuMemFree((CUdeviceptr)(uintptr_t)recv);
        free(h);
        free(out);
    }
}

/* Larger than the 1 MiB staging slot: exercises chunking; also in place. */
static void test_allreduce_large_inplace(void)
{
    const size_t count = 600000;
    float *h = malloc(count * sizeof *h);
    float *buf = dev_alloc(count * sizeof *h);
    fill(h, count, ncclFloat32, rank, 0);
    to_dev(buf, h, count * sizeof *h);
    NC(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, stream));
    CU(cuStreamSynchronize(stream));
    to_host(h, buf, count * sizeof *h);
    for (size_t i = 0; i < count; i++)
        if (h[i] != expected_reduce(i, ncclSum, ncclFloat32, 0)) {
            CHECK(0, "large in-place allreduce [%zu] = %g", i, h[i]);
            break;
        }
    cuMemFree((CUdeviceptr)(uintptr_t)buf);
    free(h);
}

static void test_broadcast_reduce(void)
{
    const size_t count = 777;
    const ncclDataType_t ts[] = {ncclInt8, ncclFloat16, ncclFloat64, ncclBfloat16, ncclUint64};
    for (size_t ti = 0; ti < sizeof ts / sizeof *ts; ti++) {
        ncclDataType_t t = ts[ti];
        size_t bytes = count * tsize(t);
        char *h = malloc(bytes), *out = malloc(bytes);
        void *send = dev_alloc(bytes), *recv = dev_alloc(bytes);
        int root = world - 1;
        fill(h, count, t, rank, 0);
        to_dev(send, h, bytes);
        memset(out, 0x5a, bytes);
        to_dev(recv, out, bytes);
        NC(ncclBroadcast(send, recv, count, t, root, comm, stream));
        CU(cuStreamSynchronize(stream));
        to_host(out, recv, bytes);
        for (size_t i = 0; i < count; i++)
            if (get(out, i, t) != value(root, i)) { CHECK(0, "broadcast type %d [%zu] = %g", (int)t, i, get(out, i, t)); break; }

        /* ncclBcast: in place, from root 0 */
        to_dev(recv, h, bytes);
        NC(ncclBcast(recv, count, t, 0, comm, stream));
        CU(cuStreamSynchronize(stream));
        to_host(out, recv, bytes);
        for (size_t i = 0; i < count; i++)
            if (get(out, i, t) != value(0, i)) { CHECK(0, "bcast type %d [%zu] = %g", (int)t, i, get(out, i, t)); break; }

        for (int oi = 0; oi < 5; oi++) {
            memset(out, 0x5a, bytes);
            to_dev(recv, out, bytes);
            NC(ncclReduce(send, recv, count, t, ops[oi], root, comm, stream));
            CU(cuStreamSynchronize(stream));
            to_host(out, recv, bytes);
            for (size_t i = 0; i < count; i++) {
                int ok = rank == root ? get(out, i, t) == expected_reduce(i, ops[oi], t, 0)
                                      : ((unsigned char *)out)[i * tsize(t)] == 0x5a;   /* untouched off root */
                if (!ok) { CHECK(0, "reduce %s type %d [%zu] = %g", op_names[oi], (int)t, i, get(out, i, t)); break; }
            }
        }
        cuMemFree((CUdeviceptr)(uintptr_t)send);
        cuMemFree((CUdeviceptr)(uintptr_t)recv);
        free(h);
        free(out);
    }
}

static void test_gather_family(void)
{
    const size_t count = 300001;     /* per rank: with 4 ranks the n-way split chunks */
    const ncclDataType_t t = ncclInt32;
    size_t es = tsize(t), bytes = count * es, all = bytes * (size_t)world;
    int32_t *h = malloc(all), *out = malloc(all);
    void *send = dev_alloc(all), *recv = dev_alloc(all);
    /* per-rank payload: element i of rank r is r * 1000003 + i (distinct everywhere) */
    for (size_t i = 0; i < count * (size_t)world; i++) h[i] = (int32_t)(rank * 1000003 + (int32_t)i);
    to_dev(send, h, all);

    NC(ncclAllGather(send, recv, count, t, comm, stream));
    CU(cuStreamSynchronize(stream));
    to_host(out, recv, all);
    for (int r = 0; r < world; r++)
        for (size_t i = 0; i < count; i++)
            if (out[(size_t)r * count + i] != (int32_t)(r * 1000003 + (int32_t)i)) {
                CHECK(0, "allgather [%d][%zu] = %d", r, i, out[(size_t)r * count + i]);
                r = world;
                break;
            }

    NC(ncclAlltoAll(send, recv, count, t, comm, stream));
    CU(cuStreamSynchronize(stream));
    to_host(out, recv, all);
    /* block j of my output = block `rank` of rank j's input */
    for (int j = 0; j < world; j++)
        for (size_t i = 0; i < count; i++)
            if (out[(size_t)j * count + i] != (int32_t)(j * 1000003 + (int32_t)((size_t)rank * count + i))) {
                CHECK(0, "alltoall [%d][%zu] = %d", j, i, out[(size_t)j * count + i]);
                j = world;
                break;
            }

    int root = world > 1 ? 1 : 0;
    memset(out, 0, all);
    to_dev(recv, out, all);
    NC(ncclGather(send, recv, count, t, root, comm, stream));
    CU(cuStreamSynchronize(stream));
    to_host(out, recv, all);
    if (rank == root)
        for (int r = 0; r < world; r++)
            if (out[(size_t)r * count + 5] != (int32_t)(r * 1000003 + 5)) CHECK(0, "gather block %d", r);

    NC(ncclScatter(send, recv, count, t, root, comm, stream));
    CU(cuStreamSynchronize(stream));
    to_host(out, recv, bytes);
    for (size_t i = 0; i < count; i++)
        if (out[i] != (int32_t)(root * 1000003 + (int32_t)((size_t)rank * count + i))) {
            CHECK(0, "scatter [%zu] = %d", i, out[i]);
            break;
        }
    cuMemFree((CUdeviceptr)(uintptr_t)send);
    cuMemFree((CUdeviceptr)(uintptr_t)recv);
    free(h);
    free(out);
}

static void test_reduce_scatter(void)
{
    const size_t count = 513;
    const ncclDataType_t ts[] = {ncclFloat32, ncclBfloat16, ncclInt64, ncclFloat16};
    for (size_t ti = 0; ti < sizeof ts / sizeof *ts; ti++) {
        ncclDataType_t t = ts[ti];
        size_t es = tsize(t), all = count * es * (size_t)world;
        char *h = malloc(all), *out = malloc(count * es);
        void *send = dev_alloc(all), *recv = dev_alloc(count * es);
        fill(h, count * (size_t)world, t, rank, 0);
        to_dev(send, h, all);
        for (int oi = 0; oi < 5; oi++) {
            NC(ncclReduceScatter(send, recv, count, t, ops[oi], comm, stream));
            CU(cuStreamSynchronize(stream));
            to_host(out, recv, count * es);
            for (size_t i = 0; i < count; i++)
                if (get(out, i, t) != expected_reduce(i, ops[oi], t, (size_t)rank * count)) {
                    CHECK(0, "reducescatter %s type %d [%zu] = %g", op_names[oi], (int)t, i, get(out, i, t));
                    break;
                }
        }
        cuMemFree((CUdeviceptr)(uintptr_t)send);
        cuMemFree((CUdeviceptr)(uintptr_t)recv);
        free(h);
        free(out);
    }
}

/* Everyone sends to the next rank and receives from the previous one inside
 * one group (a ring larger than the p2p ring buffer: must not deadlock). */
static void test_sendrecv_ring(void)
{
    const size_t count = 100000;
    float *h = malloc(count * sizeof *h);
    float *send = dev_alloc(count * sizeof *h), *recv = dev_alloc(count * sizeof *h);
    for (size_t i = 0; i < count; i++) h[i] = (float)(rank * 7 + (int)(i % 1000));
    to_dev(send, h, count * sizeof *h);
    int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    NC(ncclGroupStart());
    NC(ncclSend(send, count, ncclFloat32, next, comm, stream));
    NC(ncclRecv(recv, count, ncclFloat32, prev, comm, stream));
    NC(ncclGroupEnd());
    CU(cuStreamSynchronize(stream));
    to_host(h, recv, count * sizeof *h);
    for (size_t i = 0; i < count; i++)
        if (h[i] != (float)(prev * 7 + (int)(i % 1000))) { CHECK(0, "ring recv [%zu] = %g", i, h[i]); break; }
    cuMemFree((CUdeviceptr)(uintptr_t)send);
    cuMemFree((CUdeviceptr)(uintptr_t)recv);
    free(h);
}

/* The collective runs after a preceding async copy on the stream and before
 * a following one: nothing synchronizes in between. */
static void test_stream_order(void)
{
    const size_t count = 4096;
    double *in, *out;
    CU(cuMemAllocHost((void **)&in, count * sizeof *in));
    CU(cuMemAllocHost((void **)&out, count * sizeof *out));
    double *buf = dev_alloc(count * sizeof *in);
    for (size_t i = 0; i < count; i++) { in[i] = rank + 1.0 + (double)i; out[i] = -1; }
    CU(cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)buf, in, count * sizeof *in, stream));
    NC(ncclAllReduce(buf, buf, count, ncclFloat64, ncclMax, comm, stream));
    CU(cuMemcpyDtoHAsync(out, (CUdeviceptr)(uintptr_t)buf, count * sizeof *in, stream));
    CU(cuStreamSynchronize(stream));
    for (size_t i = 0; i < count; i++)
        if (out[i] != world + (double)i) { CHECK(0, "stream order [%zu] = %g", i, out[i]); break; }
    cuMemFree((CUdeviceptr)(uintptr_t)buf);
    cuMemFreeHost(in);
    cuMemFreeHost(out);
}

static void test_premulsum(void)
{
    const size_t count = 64;
    float *h = malloc(count * sizeof *h);
    float *buf = dev_alloc(count * sizeof *h);
    for (size_t i = 0; i < count; i++) h[i] = (float)i;
    to_dev(buf, h, count * sizeof *h);
    float scalar = (float)(rank + 1);
    ncclRedOp_t op;
    NC(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
    NC(ncclAllReduce(buf, buf, count, ncclFloat32, op, comm, stream));
    NC(ncclRedOpDestroy(op, comm));
    CU(cuStreamSynchronize(stream));
    to_host(h, buf, count * sizeof *h);
    float factor = (float)(world * (world + 1) / 2);
    for (size_t i = 0; i < count; i++)
        if (h[i] != factor * (float)i) { CHECK(0, "premulsum [%zu] = %g want %g", i, h[i], factor * (float)i); break; }
    /* device-resident scalar, read when the collective runs: rank + 2, written after the call */
    for (size_t i = 0; i < count; i++) h[i] = (float)i;
    to_dev(buf, h, count * sizeof *h);
    double *dscal = dev_alloc(sizeof(double)), zero = 0, mine = rank + 2.0;
    to_dev(dscal, &zero, sizeof zero);
    NC(ncclRedOpCreatePreMulSum(&op, dscal, ncclFloat64, ncclScalarDevice, comm));
    CHECK(ncclAllReduce(buf, buf, count, ncclFloat32, op, comm, stream) == ncclInvalidArgument,
          "PreMulSum op of type double used on floats");
    double *dd = dev_alloc(count * sizeof(double)), *hd = malloc(count * sizeof(double));
    for (size_t i = 0; i < count; i++) hd[i] = (double)i;
    to_dev(dd, hd, count * sizeof(double));
    CU(cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dscal, &mine, sizeof mine, stream));
    NC(ncclAllReduce(dd, dd, count, ncclFloat64, op, comm, stream));
    CU(cuStreamSynchronize(stream));
    NC(ncclRedOpDestroy(op, comm));
    to_host(hd, dd, count * sizeof(double));
    double dfactor = 0;
    for (int r = 0; r < world; r++) dfactor += r + 2.0;
    for (size_t i = 0; i < count; i++)
        if (hd[i] != dfactor * (double)i) { CHECK(0, "device premulsum [%zu] = %g want %g", i, hd[i], dfactor * (double)i); break; }
    cuMemFree((CUdeviceptr)(uintptr_t)dd);
    cuMemFree((CUdeviceptr)(uintptr_t)dscal);
    free(hd);
    cuMemFree((CUdeviceptr)(uintptr_t)buf);
    free(h);
}

static int run_rank(void)
{
    ncclUniqueId id;
    const char *hex = getenv("NCCL_TEST_ID");
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        id.internal[i] = (char)v;
    }
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    CU(cuStreamCreate(&stream, CU_STREAM_DEFAULT));
    NC(ncclCommInitRank(&comm, world, id, rank));
    int n = -1, r = -1;
    NC(ncclCommCount(comm, &n));
    NC(ncclCommUserRank(comm, &r));
    CHECK(n == world && r == rank, "count %d rank %d", n, r);
    uint64_t before = emuGetCounter("nccl.allreduce");
    test_allreduce_all_types_ops();
    CHECK(emuGetCounter("nccl.allreduce") - before == 60, "nccl.allreduce counted %llu calls, want 60",
          (unsigned long long)(emuGetCounter("nccl.allreduce") - before));
    test_allreduce_large_inplace();
    test_broadcast_reduce();
    test_gather_family();
    test_reduce_scatter();
    test_sendrecv_ring();
    test_stream_order();
    test_premulsum();
    ncclResult_t async = ncclInternalError;
    NC(ncclCommGetAsyncError(comm, &async));
    CHECK(async == ncclSuccess, "async error %d", (int)async);
    NC(ncclCommFinalize(comm));
    NC(ncclCommDestroy(comm));
    CU(cuStreamDestroy(stream));
    return failures ? 1 : 0;
}

static int launch(const char *self, int nranks)
{
    ncclUniqueId id;
    NC(ncclGetUniqueId(&id));
    char hex[2 * NCCL_UNIQUE_ID_BYTES + 1];
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) sprintf(hex + 2 * i, "%02x", (unsigned char)id.internal[i]);
    pid_t pids[8];
    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            char rs[16], ws[16];
            snprintf(rs, sizeof rs, "%d", r);
            snprintf(ws, sizeof ws, "%d", nranks);
            setenv("NCCL_TEST_RANK", rs, 1);
            setenv("NCCL_TEST_WORLD", ws, 1);
            setenv("NCCL_TEST_ID", hex, 1);
            execl(self, self, (char *)NULL);
            _exit(127);
        }
    }
    int bad = 0;
    for (int r = 0; r < nranks; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "world %d: rank %d failed (status 0x%x)\n", nranks, r, st);
            bad = 1;
        }
    }
    return bad;
}

int main(void)
{

    if (getenv("NCCL_TEST_RANK")) {
        rank = atoi(getenv("NCCL_TEST_RANK"));
        world = atoi(getenv("NCCL_TEST_WORLD"));
        return run_rank();
    }
    int bad = launch("/proc/self/exe", 2) | launch("/proc/self/exe", 4);
    printf("%s\n", bad ? "test_nccl_collectives: FAILED" : "test_nccl_collectives: ok");
    return bad;
}
