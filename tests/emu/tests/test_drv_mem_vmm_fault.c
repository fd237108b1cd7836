/* test_drv_mem_vmm_fault: a VMM mapping is inaccessible until cuMemSetAccess:
 * a copy touching it faults on the device, which is the sticky
 * CUDA_ERROR_ILLEGAL_ADDRESS; read-only access refuses writes the same way.
 * Each case runs in its own process because the error is sticky. */
#include "driver/mem_testutil.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define G (2ULL << 20)

static CUdeviceptr map_one(CUmemAccess_flags access, bool set_access)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    CUdeviceptr r;
    REQUIRE(cuMemCreate(&h, G, &prop, 0));
    REQUIRE(cuMemAddressReserve(&r, G, 0, 0, 0));
    REQUIRE(cuMemMap(r, G, 0, h, 0));
    if (set_access) {
        CUmemAccessDesc d = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, access };
        REQUIRE(cuMemSetAccess(r, G, &d, 1));
    }
    return r;
}

/* The fault may surface at the copy (synchronous copy) or at the next
 * synchronization; after it, the context stays broken. */
static void expect_sticky_fault(CUresult at_copy)
{
    EXPECT(at_copy == CUDA_ERROR_ILLEGAL_ADDRESS || at_copy == CUDA_SUCCESS);
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);                        /* sticky */
}

static int case_no_access_write(void)
{
    mt_setup(0);
    CUdeviceptr r = map_one(CU_MEM_ACCESS_FLAGS_PROT_NONE, false);
    static char buf[4096];
    expect_sticky_fault(cuMemcpyHtoD(r, buf, sizeof buf));
    return mt_failures;
}

static int case_no_access_read(void)
{
    mt_setup(0);
    CUdeviceptr r = map_one(CU_MEM_ACCESS_FLAGS_PROT_NONE, false);
    static char buf[4096];
    expect_sticky_fault(cuMemcpyDtoH(buf, r + 4096, sizeof buf));
    return mt_failures;
}

static int case_read_only_write(void)
{
    mt_setup(0);
    CUdeviceptr r = map_one(CU_MEM_ACCESS_FLAGS_PROT_READ, true);
    static char buf[4096];
    OK(cuMemcpyDtoH(buf, r, sizeof buf));                                             /* reading is allowed */
    OK(cuCtxSynchronize());
    expect_sticky_fault(cuMemcpyHtoD(r, buf, sizeof buf));                            /* writing is not */
    return mt_failures;
}

static int case_after_set_access(void)
{
    mt_setup(0);
    CUdeviceptr r = map_one(CU_MEM_ACCESS_FLAGS_PROT_READWRITE, true);
    static char in[4096], out[4096];
    memset(in, 0x3c, sizeof in);
    OK(cuMemcpyHtoD(r + G - sizeof in, in, sizeof in));
    OK(cuMemcpyDtoH(out, r + G - sizeof in, sizeof out));
    OK(cuCtxSynchronize());
    EXPECT(memcmp(in, out, sizeof in) == 0);
    EXPECT_RC(cuMemcpyHtoD(r + G - 100, in, 200), CUDA_ERROR_INVALID_VALUE);          /* runs past the mapping */

    /* an expandable segment: two handles mapped back to back serve one copy */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h1, h2;
    CUdeviceptr seg;
    OK(cuMemCreate(&h1, G, &prop, 0));
    OK(cuMemCreate(&h2, G, &prop, 0));
    OK(cuMemAddressReserve(&seg, 4 * G, 0, 0, 0));
    OK(cuMemMap(seg, G, 0, h1, 0));
    OK(cuMemMap(seg + G, G, 0, h2, 0));
    CUmemAccessDesc d = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    OK(cuMemSetAccess(seg, 2 * G, &d, 1));
    OK(cuMemcpyHtoD(seg + G - 2048, in, sizeof in));                                  /* straddles the two handles */
    memset(out, 0, sizeof out);
    OK(cuMemcpyDtoH(out, seg + G - 2048, sizeof out));
    EXPECT(memcmp(in, out, sizeof in) == 0);
    EXPECT_RC(cuMemcpyHtoD(seg + 2 * G - 2048, in, sizeof in), CUDA_ERROR_INVALID_VALUE); /* into unmapped space */
    OK(cuMemUnmap(seg, 2 * G));
    OK(cuMemAddressFree(seg, 4 * G));
    OK(cuMemRelease(h1));
    OK(cuMemRelease(h2));
    return mt_failures;
}

static int run(const char *name, int (*fn)(void))
{
    pid_t pid = fork();
    if (pid == 0) _exit(fn() ? 1 : 0);
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
    mt_failures += run("no access, write", case_no_access_write);
    mt_failures += run("no access, read", case_no_access_read);
    mt_failures += run("read-only, write", case_read_only_write);
    mt_failures += run("after cuMemSetAccess", case_after_set_access);
    return mt_finish("test_drv_mem_vmm_fault");
}
