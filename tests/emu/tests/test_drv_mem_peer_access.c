/* test_drv_mem_peer_access: access is per device, on two emulated devices.
 *   - VMM memory: cuMemSetAccess grants each device (location.id) its own
 *     right; a copy or memset is performed by its stream's device, which
 *     needs that right (read for a source, read-write for a destination); a
 *     cuMemcpyPeer reads the source as the source context's device and
 *     writes the destination as the destination context's; a kernel needs
 *     the right for every VMM range its pointer arguments point into.
 *     Peer access (cuCtxEnablePeerAccess) does not cover VMM memory.
 *   - pool memory (cuMemAllocAsync): the same per device, granted by
 *     cuMemPoolSetAccess; peer access does not cover it either.
 *   - cuMemAlloc memory: a kernel on device d touching device e's memory
 *     needs peer access from d to e; copies between devices do not.
 * A refused access is the sticky CUDA_ERROR_ILLEGAL_ADDRESS, as for an
 * unmapped range, so each case runs in its own process. */
#include "driver/mem_testutil.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define G (2ULL << 20)
#define N 1024

static CUcontext ctx[2];
static void register_sum(void);

static void setup(void)
{
    register_sum();
    ctx[0] = mt_setup(0);
    CUdevice d1;
    REQUIRE(cuDeviceGet(&d1, 1));
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx[1], d1));
}

/* A mapping of a handle of device `owner`, granted `grants[d]` per device
 * (only non-NONE grants are set, as a program would). */
static CUdeviceptr map_on(int owner, const CUmemAccess_flags grants[2])
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = owner;
    CUmemGenericAllocationHandle h;
    CUdeviceptr r;
    REQUIRE(cuMemCreate(&h, G, &prop, 0));
    REQUIRE(cuMemAddressReserve(&r, G, 0, 0, 0));
    REQUIRE(cuMemMap(r, G, 0, h, 0));
    for (int d = 0; d < 2; d++) {
        if (grants[d] == CU_MEM_ACCESS_FLAGS_PROT_NONE) continue;
        CUmemAccessDesc desc = { { CU_MEM_LOCATION_TYPE_DEVICE, d }, grants[d] };
        REQUIRE(cuMemSetAccess(r, G, &desc, 1));
    }
    return r;
}

static void fill(CUdeviceptr p, float v)
{
    static float buf[N];
    for (int i = 0; i < N; i++) buf[i] = v;
    REQUIRE(cuMemcpyHtoD(p, buf, sizeof buf));
    REQUIRE(cuCtxSynchronize());
}

/* The refused access surfaces at the call (synchronous copy) or at the next
 * synchronization, and stays. */
static void expect_sticky_fault(CUresult at_call)
{
    EXPECT(at_call == CUDA_ERROR_ILLEGAL_ADDRESS || at_call == CUDA_SUCCESS);
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT(emuGetCounter("faults.illegal_address") >= 1);
}

static void expect_no_fault(void)
{
    OK(cuCtxSynchronize());
    EXPECT(emuGetCounter("faults.illegal_address") == 0);
}

/* sum(in[0..n)) -> *out */
static char sum_key;
static void sum_impl(void **args, const emu_launch *l)
{
    (void)l;
    const float *in = *(const float **)args[0];
    float *out = *(float **)args[1];
    int n = *(int *)args[2];
    float s = 0;
    for (int i = 0; i < n; i++) s += in[i];
    *out = s;
}

static void register_sum(void)
{
    size_t sizes[] = {sizeof(float *), sizeof(float *), sizeof(int)};
    if (emuRegisterKernel(&sum_key, "sum", sum_impl, 3, sizes) != 0) {
        fprintf(stderr, "emuRegisterKernel failed\n");
        exit(1);
    }
}

static CUresult launch_sum(CUdeviceptr in, CUdeviceptr out)
{
    CUfunction f;
    if (emuGetFunction((void **)&f, &sum_key, NULL) != CUDA_SUCCESS) return CUDA_ERROR_NOT_FOUND;
    int n = N;
    void *args[] = {&in, &out, &n};
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL);
}

static float read_float(CUdeviceptr p)
{
    float v = -1;
    OK(cuMemcpyDtoH(&v, p, sizeof v));
    return v;
}

static const CUmemAccess_flags RW = CU_MEM_ACCESS_FLAGS_PROT_READWRITE, RD = CU_MEM_ACCESS_FLAGS_PROT_READ,
                              NONE = CU_MEM_ACCESS_FLAGS_PROT_NONE;

/* ---- VMM: copies and memsets by the stream's device ---- */

static int case_vmm_copy_needs_grant(void)
{
    setup();
    CUdeviceptr r = map_on(0, (CUmemAccess_flags[]){RW, NONE});
    fill(r, 1.0f);                                            /* device 0 may */
    OK(cuCtxSetCurrent(ctx[1]));
    OK(cuCtxEnablePeerAccess(ctx[0], 0));                     /* covers cuMemAlloc memory, not VMM */
    static float buf[N];
    expect_sticky_fault(cuMemcpyDtoH(buf, r, sizeof buf));    /* device 1 was never granted */
    return mt_failures;
}

static int case_vmm_read_grant_reads_not_writes(void)
{
    setup();
    CUdeviceptr r = map_on(0, (CUmemAccess_flags[]){RW, RD});
    fill(r, 2.0f);
    OK(cuCtxSetCurrent(ctx[1]));
    static float buf[N];
    OK(cuMemcpyDtoH(buf, r, sizeof buf));                     /* device 1 may read */
    EXPECT(buf[0] == 2.0f && buf[N - 1] == 2.0f);
    expect_no_fault();
    unsigned long long flags = 99;
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 1};
    OK(cuMemGetAccess(&flags, &loc, r));
    EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READ);
    /* device 0's read-write grant does not extend to device 1 */
    expect_sticky_fault(cuMemcpyHtoD(r, buf, sizeof buf));
    return mt_failures;
}

static int case_vmm_memset_needs_write_grant(void)
{
    setup();
    CUdeviceptr r = map_on(0, (CUmemAccess_flags[]){RW, RD});
    OK(cuCtxSetCurrent(ctx[1]));
    expect_sticky_fault(cuMemsetD32(r, 7, N));
    return mt_failures;
}

static int case_vmm_grants_allow_device_1(void)
{
    setup();
    CUdeviceptr r = map_on(0, (CUmemAccess_flags[]){RW, RW});
    OK(cuCtxSetCurrent(ctx[1]));
    OK(cuMemsetD32(r, 0x40400000u, N));                       /* 3.0f, written by device 1 */
    static float buf[N];
    OK(cuMemcpyDtoH(buf, r, sizeof buf));
    EXPECT(buf[0] == 3.0f && buf[N - 1] == 3.0f);
    CUdeviceptr b;
    OK(cuMemAlloc(&b, sizeof buf));                           /* device 1 memory */
    OK(cuMemcpyDtoD(b, r, sizeof buf));                       /* VMM -> device 1, on device 1 */
    OK(cuMemcpyDtoH(buf, b, sizeof buf));
    EXPECT(buf[N - 1] == 3.0f);
    expect_no_fault();
    /* revoking device 1's access takes effect for later work */
    CUmemAccessDesc none = { { CU_MEM_LOCATION_TYPE_DEVICE, 1 }, NONE };
    OK(cuMemSetAccess(r, G, &none, 1));
    expect_sticky_fault(cuMemcpyDtoDAsync(b, r, sizeof buf, 0));
    return mt_failures;
}

/* A grant made after the copy was queued but before it runs counts: access
 * is checked when the device performs the access. */
static void gate_wait(void *p) { et_gate_wait(p); }
static int case_vmm_grant_before_copy_runs(void)
{
    setup();
    CUdeviceptr r = map_on(0, (CUmemAccess_flags[]){RW, NONE});
    fill(r, 4.0f);
    OK(cuCtxSetCurrent(ctx[1]));
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    struct et_gate gate = {0};
    OK(cuLaunchHostFunc(s, gate_wait, &gate));
    CUdeviceptr b;
    OK(cuMemAlloc(&b, N * sizeof(float)));
    OK(cuMemcpyDtoDAsync(b, r, N * sizeof(float), s));
    CUmemAccessDesc rd = { { CU_MEM_LOCATION_TYPE_DEVICE, 1 }, RD };
    OK(cuMemSetAccess(r, G, &rd, 1));
    et_gate_open(&gate);
    OK(cuStreamSynchronize(s));
    EXPECT(read_float(b + (N - 1) * sizeof(float)) == 4.0f);
    expect_no_fault();
    return mt_failures;
}

/* ---- VMM: cuMemcpyPeer reads as the source device, writes as the destination's ---- */

static int case_vmm_peer_copy_each_side_own_device(void)
{
    setup();
    CUdeviceptr src = map_on(0, (CUmemAccess_flags[]){RW, NONE});   /* device 0 only */
    fill(src, 5.0f);
    OK(cuCtxSetCurrent(ctx[1]));
    CUdeviceptr dst = map_on(1, (CUmemAccess_flags[]){NONE, RW});   /* device 1 only */
    OK(cuMemcpyPeer(dst, ctx[1], src, ctx[0], N * sizeof(float)));
    static float buf[N];
    OK(cuMemcpyDtoH(buf, dst, sizeof buf));
    EXPECT(buf[0] == 5.0f && buf[N - 1] == 5.0f);
    OK(cuMemcpyPeerAsync(dst, ctx[1], src, ctx[0], N * sizeof(float), 0));
    expect_no_fault();
    /* the same pointers in a plain copy: device 1 performs it and may not read src */
    expect_sticky_fault(cuMemcpyDtoD(dst, src, sizeof buf));
    return mt_failures;
}

static int case_vmm_peer_copy_destination_device_needs_grant(void)
{
    setup();
    CUdeviceptr src = map_on(0, (CUmemAccess_flags[]){RW, NONE});
    fill(src, 6.0f);
    /* a device-1 handle that only device 0 was granted */
    CUdeviceptr dst = map_on(1, (CUmemAccess_flags[]){RW, NONE});
    OK(cuCtxSetCurrent(ctx[1]));
    expect_sticky_fault(cuMemcpyPeer(dst, ctx[1], src, ctx[0], N * sizeof(float)));
    return mt_failures;
}

/* ---- VMM: kernels (pointer arguments) ---- */

static int case_vmm_kernel_needs_grant(void)
{
    setup();
    CUdeviceptr r = map_on(0, (CUmemAccess_flags[]){RW, NONE});
    fill(r, 1.0f);
    OK(cuCtxSetCurrent(ctx[1]));
    OK(cuCtxEnablePeerAccess(ctx[0], 0));                     /* does not cover VMM memory */
    CUdeviceptr out;
    OK(cuMemAlloc(&out, sizeof(float)));
    OK(cuMemsetD32(out, 0, 1));
    OK(cuCtxSynchronize());
    uint64_t done = emuGetCounter("kernels.completed");
    OK(launch_sum(r, out));
    expect_sticky_fault(CUDA_SUCCESS);
    EXPECT(emuGetCounter("kernels.completed") == done);       /* the kernel did not run */
    return mt_failures;
}

static int case_vmm_kernel_with_grant(void)
{
    setup();
    CUdeviceptr r = map_on(0, (CUmemAccess_flags[]){RW, RD});
    fill(r, 1.0f);
    OK(cuCtxSetCurrent(ctx[1]));
    CUdeviceptr out;
    OK(cuMemAlloc(&out, sizeof(float)));
    OK(launch_sum(r, out));
    expect_no_fault();
    EXPECT(read_float(out) == (float)N);
    return mt_failures;
}

/* ---- cuMemAlloc memory: kernels need peer access, copies do not ---- */

static int case_alloc_kernel_needs_peer_access(void)
{
    setup();
    CUdeviceptr a;
    OK(cuMemAlloc(&a, N * sizeof(float)));                    /* device 0 */
    fill(a, 1.0f);
    OK(cuCtxSetCurrent(ctx[1]));
    CUdeviceptr out, b;
    OK(cuMemAlloc(&out, sizeof(float)));
    OK(cuMemAlloc(&b, N * sizeof(float)));
    OK(cuMemcpyDtoD(b, a, N * sizeof(float)));                /* a copy across devices needs no peer access */
    OK(cuMemcpyPeer(b, ctx[1], a, ctx[0], N * sizeof(float)));
    OK(launch_sum(b, out));                                   /* device 1's own memory */
    expect_no_fault();
    EXPECT(read_float(out) == (float)N);
    OK(launch_sum(a, out));                                   /* device 0's memory, no peer access */
    expect_sticky_fault(CUDA_SUCCESS);
    return mt_failures;
}

static int case_alloc_kernel_with_peer_access(void)
{
    setup();
    CUdeviceptr a;
    OK(cuMemAlloc(&a, N * sizeof(float)));
    fill(a, 2.0f);
    OK(cuCtxSetCurrent(ctx[1]));
    CUdeviceptr out;
    OK(cuMemAlloc(&out, sizeof(float)));
    OK(cuCtxEnablePeerAccess(ctx[0], 0));
    OK(launch_sum(a, out));
    expect_no_fault();
    EXPECT(read_float(out) == 2.0f * N);
    /* one direction only: device 0 may not touch device 1's memory */
    OK(cuCtxSetCurrent(ctx[0]));
    OK(launch_sum(a, out));
    expect_sticky_fault(CUDA_SUCCESS);
    return mt_failures;
}

static int case_alloc_kernel_after_disable(void)
{
    setup();
    CUdeviceptr a;
    OK(cuMemAlloc(&a, N * sizeof(float)));
    OK(cuCtxSetCurrent(ctx[1]));
    CUdeviceptr out;
    OK(cuMemAlloc(&out, sizeof(float)));
    OK(cuCtxEnablePeerAccess(ctx[0], 0));
    OK(cuCtxDisablePeerAccess(ctx[0]));
    OK(launch_sum(a, out));
    expect_sticky_fault(CUDA_SUCCESS);
    return mt_failures;
}

/* ---- pool memory: cuMemPoolSetAccess, not peer access ---- */

static CUdeviceptr pool_alloc_on_0(float v)
{
    CUdeviceptr p;
    REQUIRE(cuMemAllocAsync(&p, N * sizeof(float), 0));
    fill(p, v);
    return p;
}

static int case_pool_kernel_needs_pool_access(void)
{
    setup();
    CUdeviceptr p = pool_alloc_on_0(1.0f);
    OK(cuCtxSetCurrent(ctx[1]));
    OK(cuCtxEnablePeerAccess(ctx[0], 0));                     /* does not cover pool memory */
    CUdeviceptr out;
    OK(cuMemAlloc(&out, sizeof(float)));
    OK(launch_sum(p, out));
    expect_sticky_fault(CUDA_SUCCESS);
    return mt_failures;
}

static int case_pool_copy_needs_pool_access(void)
{
    setup();
    CUdeviceptr p = pool_alloc_on_0(1.0f);
    OK(cuCtxSetCurrent(ctx[1]));
    static float buf[N];
    expect_sticky_fault(cuMemcpyDtoH(buf, p, sizeof buf));
    return mt_failures;
}

static int case_pool_with_pool_access(void)
{
    setup();
    CUdeviceptr p = pool_alloc_on_0(3.0f);
    CUmemoryPool pool;
    OK(cuDeviceGetDefaultMemPool(&pool, 0));
    CUmemAccessDesc rd = { { CU_MEM_LOCATION_TYPE_DEVICE, 1 }, RD };
    OK(cuMemPoolSetAccess(pool, &rd, 1));
    OK(cuCtxSetCurrent(ctx[1]));
    CUdeviceptr out;
    OK(cuMemAlloc(&out, sizeof(float)));
    OK(launch_sum(p, out));
    static float buf[N];
    OK(cuMemcpyDtoH(buf, p, sizeof buf));
    EXPECT(buf[N - 1] == 3.0f);
    expect_no_fault();
    EXPECT(read_float(out) == 3.0f * N);
    expect_sticky_fault(cuMemsetD32(p, 0, N));                /* read-only for device 1 */
    return mt_failures;
}

static int run(const char *name, int (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        mt_failures = 0;   /* the parent's count of failed cases is not this case's */
        _exit(fn() ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "case %s failed (status %#x)\n", name, status);
        return 1;
    }
    return 0;
}

int main(void)
{
    setenv("EMU_DEVICES", "2", 1);
    mt_failures += run("vmm copy needs a grant", case_vmm_copy_needs_grant);
    mt_failures += run("vmm read grant", case_vmm_read_grant_reads_not_writes);
    mt_failures += run("vmm memset", case_vmm_memset_needs_write_grant);
    mt_failures += run("vmm grants for device 1", case_vmm_grants_allow_device_1);
    mt_failures += run("vmm grant before the copy runs", case_vmm_grant_before_copy_runs);
    mt_failures += run("vmm peer copy", case_vmm_peer_copy_each_side_own_device);
    mt_failures += run("vmm peer copy destination", case_vmm_peer_copy_destination_device_needs_grant);
    mt_failures += run("vmm kernel without grant", case_vmm_kernel_needs_grant);
    mt_failures += run("vmm kernel with grant", case_vmm_kernel_with_grant);
    mt_failures += run("cuMemAlloc kernel without peer access", case_alloc_kernel_needs_peer_access);
    mt_failures += run("cuMemAlloc kernel with peer access", case_alloc_kernel_with_peer_access);
    mt_failures += run("cuMemAlloc kernel after disable", case_alloc_kernel_after_disable);
    mt_failures += run("pool kernel without pool access", case_pool_kernel_needs_pool_access);
    mt_failures += run("pool copy without pool access", case_pool_copy_needs_pool_access);
    mt_failures += run("pool with pool access", case_pool_with_pool_access);
    return mt_finish("test_drv_mem_peer_access");
}
