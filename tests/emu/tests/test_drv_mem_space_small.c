/* test_drv_mem_space_small.c: with little address space (as under TSan,
 * whose shadow takes most of it; here RLIMIT_AS leaves 320 GiB) the emulator
 * reserves a smaller device range instead of aborting, and ordinary and VMM
 * allocations, copies and the pointer queries still work. */
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include "driver/mem_testutil.h"

/* Address space in use now (a sanitizer's shadow counts too), in bytes. */
static unsigned long long vm_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb << 10;
}

int main(void)
{
    /* 320 GiB more than what is mapped already: no room for 4 TiB */
    unsigned long long limit = vm_size() + (320ull << 30);
    struct rlimit as = { limit, limit };
    if (setrlimit(RLIMIT_AS, &as) != 0) { perror("setrlimit"); return 1; }
    setenv("EMU_DEVICE_MEMORY", "16G", 1);
    mt_setup(0);
    CUdeviceptr p;
    REQUIRE(cuMemAlloc(&p, 64 << 20));
    EXPECT(emuIsDevicePointer((void *)(uintptr_t)p));
    char buf[256], back[256];
    memset(buf, 0x3c, sizeof buf);
    OK(cuMemcpyHtoD(p + 1000, buf, sizeof buf));
    OK(cuMemcpyDtoH(back, p + 1000, sizeof back));
    EXPECT(memcmp(buf, back, sizeof buf) == 0);
    /* most of the device memory in one allocation */
    CUdeviceptr big;
    OK(cuMemAlloc(&big, 12ull << 30));
    OK(cuMemFree(big));

    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    REQUIRE(cuMemAddressReserve(&va, 8ull << 30, 0, 0, 0));
    EXPECT(emuIsDevicePointer((void *)(uintptr_t)va));
    REQUIRE(cuMemCreate(&h, 4ull << 30, &prop, 0));
    OK(cuMemMap(va, 4ull << 30, 0, h, 0));
    CUmemAccessDesc rw = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    OK(cuMemSetAccess(va, 4ull << 30, &rw, 1));
    OK(cuMemcpyDtoD(va + (3ull << 30), p + 1000, sizeof buf));
    memset(back, 0, sizeof back);
    OK(cuMemcpyDtoH(back, va + (3ull << 30), sizeof back));
    EXPECT(memcmp(buf, back, sizeof buf) == 0);
    OK(cuMemUnmap(va, 4ull << 30));
    OK(cuMemRelease(h));
    OK(cuMemAddressFree(va, 8ull << 30));

    CUdeviceptr m;
    OK(cuMemAllocManaged(&m, 1 << 20, CU_MEM_ATTACH_GLOBAL));
    ((char *)(uintptr_t)m)[5] = 9;
    EXPECT(!emuIsDevicePointer((void *)(uintptr_t)m));
    OK(cuMemFree(m));
    OK(cuMemFree(p));
    return mt_finish("test_drv_mem_space_small");
}
