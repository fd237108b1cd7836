/* test_drv_mem_vmm_fdlimit.c: exportable handles (POSIX fd requested) are
 * each their own memfd here, while a real driver makes a descriptor only at
 * export.  So they are refused (CUDA_ERROR_OUT_OF_MEMORY) before they would
 * leave the program fewer than an eighth of its open-file limit (at least
 * 64): the program can still open files, and a caller falling back to
 * non-exportable handles (trainshim's pool does) can still create, map and
 * use them, from the device's shared backing memfd, opened before the
 * descriptors ran short.  (A 64 GiB cudaMalloc under the shim stopped at
 * 39 GiB on a 20000-descriptor machine, and the shim's own log could not
 * be created after it.) */
#include <sys/resource.h>
#include <unistd.h>
#include "driver/mem_testutil.h"

#define GRAN (2ull << 20)
#define MAX_HANDLES 1024

int main(void)
{
    mt_setup(0);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemGenericAllocationHandle first;
    OK(cuMemCreate(&first, GRAN, &prop, 0)); /* the first exportable handle */

    /* a few descriptors left: exportable handles run out of them */
    struct rlimit lim;
    getrlimit(RLIMIT_NOFILE, &lim);
    int probe = dup(0);
    REQUIRE(probe >= 0 ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN);
    close(probe);
    struct rlimit low = { (rlim_t)probe + 200, lim.rlim_max };
    REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0 ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN);
    CUmemGenericAllocationHandle h[MAX_HANDLES];
    int made = 0;
    CUresult rc = CUDA_SUCCESS;
    while (made < MAX_HANDLES && (rc = cuMemCreate(&h[made], GRAN, &prop, 0)) == CUDA_SUCCESS)
        made++;
    EXPECT(made > 0 && made < MAX_HANDLES && rc == CUDA_ERROR_OUT_OF_MEMORY);
    /* descriptors are left to the program */
    int fds[32], nfd = 0;
    while (nfd < 32 && (fds[nfd] = dup(0)) >= 0)
        nfd++;
    EXPECT(nfd == 32);
    while (nfd > 0)
        close(fds[--nfd]);

    /* the fallback: a non-exportable handle, mapped and used */
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    CUmemGenericAllocationHandle plain;
    OK(cuMemCreate(&plain, GRAN, &prop, 0));
    CUdeviceptr va;
    OK(cuMemAddressReserve(&va, GRAN, 0, 0, 0));
    OK(cuMemMap(va, GRAN, 0, plain, 0));
    CUmemAccessDesc rw = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    OK(cuMemSetAccess(va, GRAN, &rw, 1));
    unsigned char v = 0x3c, back = 0;
    OK(cuMemcpyHtoD(va + 4096, &v, 1));
    OK(cuMemcpyDtoH(&back, va + 4096, 1));
    EXPECT(back == 0x3c);
    OK(cuMemUnmap(va, GRAN));
    OK(cuMemAddressFree(va, GRAN));
    OK(cuMemRelease(plain));
    for (int i = 0; i < made; i++)
        OK(cuMemRelease(h[i]));
    OK(cuMemRelease(first));
    setrlimit(RLIMIT_NOFILE, &lim);
    printf("%d exportable handles under a limit of %ld descriptors, then a non-exportable one\n", made,
           (long)low.rlim_cur);
    return mt_finish("test_drv_mem_vmm_fdlimit");
}
