/* test_drv_mem_vmm_scale.c: VMM at the scale of a replayed 80 GiB trace:
 * 30000 handles of 2 MiB created, mapped, made accessible, unmapped and
 * released in a few seconds (lookups stay logarithmic), each handle's memfd
 * fitting under the open-file limit the emulator raised at init, and the
 * process's mapping count staying under vm.max_map_count. */
#include <dirent.h>
#include <sys/resource.h>
#include <time.h>
#include "driver/mem_testutil.h"

#define GRAN (2ull << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    long n = 0;
    int c;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

static long count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    long n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

static long read_long(const char *path, long dflt)
{
    FILE *f = fopen(path, "r");
    long v = dflt;
    if (f) { if (fscanf(f, "%ld", &v) != 1) v = dflt; fclose(f); }
    return v;
}

int main(void)
{
    setenv("EMU_DEVICE_MEMORY", "80G", 1);
    struct rlimit before;
    getrlimit(RLIMIT_NOFILE, &before);
    mt_setup(0);
    struct rlimit after;
    getrlimit(RLIMIT_NOFILE, &after);
    /* init raised the soft limit to at least the hard limit it found */
    EXPECT(after.rlim_cur >= before.rlim_max || before.rlim_max == RLIM_INFINITY);
    /* More handles than this machine's RLIMIT_NOFILE (20000, no
     * CAP_SYS_RESOURCE to raise it): non-exportable handles share a memfd. */
    const size_t n = 30000;
    long fds_before = count_fds();
    long max_maps = read_long("/proc/sys/vm/max_map_count", 65530);
    long maps_before = count_maps();

    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle *h = calloc(n, sizeof *h);
    REQUIRE(h ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY);
    CUdeviceptr base;
    REQUIRE(cuMemAddressReserve(&base, n * GRAN, 0, 0, 0));
    CUmemAccessDesc rw = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };

    double t0 = now_s();
    size_t made = 0;
    for (; made < n; made++) {
        CUresult rc = cuMemCreate(&h[made], GRAN, &prop, 0);
        if (rc != CUDA_SUCCESS) { fprintf(stderr, "cuMemCreate #%zu: %d\n", made, (int)rc); mt_failures++; break; }
        rc = cuMemMap(base + made * GRAN, GRAN, 0, h[made], 0);
        if (rc != CUDA_SUCCESS) { fprintf(stderr, "cuMemMap #%zu: %d\n", made, (int)rc); mt_failures++; break; }
        rc = cuMemSetAccess(base + made * GRAN, GRAN, &rw, 1);
        if (rc != CUDA_SUCCESS) { fprintf(stderr, "cuMemSetAccess #%zu: %d\n", made, (int)rc); mt_failures++; break; }
    }
    double t_map = now_s() - t0;
    long maps_peak = count_maps();
    long fds_peak = count_fds();
    EXPECT(fds_peak < fds_before + 16);
    EXPECT(maps_peak > 0 && maps_peak < max_maps);
    EXPECT(emuGetCounter("phys.current.0") >= made * GRAN);
    /* lookups in the middle of the crowd work (a copy into the last handle) */
    if (made == n) {
        unsigned char v = 0x5a, back = 0;
        OK(cuMemcpyHtoD(base + (n - 1) * GRAN + 7, &v, 1));
        OK(cuMemcpyDtoH(&back, base + (n - 1) * GRAN + 7, 1));
        EXPECT(back == 0x5a);
        CUdeviceptr rb; size_t rs;
        OK(cuMemGetAddressRange(&rb, &rs, base + (n / 2) * GRAN + 100));
        EXPECT(rb == base + (n / 2) * GRAN && rs == GRAN);
    }
    /* unmap and release in an interleaved order (not just from one end) */
    t0 = now_s();
    for (size_t k = 0; k < made; k++) {
        size_t i = (k * 7919) % made;   /* 7919 is prime, coprime with made unless a multiple */
        if (made % 7919 == 0) i = k;
        if (cuMemUnmap(base + i * GRAN, GRAN) != CUDA_SUCCESS) { fprintf(stderr, "cuMemUnmap #%zu\n", i); mt_failures++; break; }
        if (cuMemRelease(h[i]) != CUDA_SUCCESS) { fprintf(stderr, "cuMemRelease #%zu\n", i); mt_failures++; break; }
    }
    double t_unmap = now_s() - t0;
    OK(cuMemAddressFree(base, n * GRAN));
    long maps_end = count_maps();
    printf("%zu handles: create+map+access %.2f s, unmap+release %.2f s; maps %ld -> %ld -> %ld (max %ld)\n",
           made, t_map, t_unmap, maps_before, maps_peak, maps_end, max_maps);
    EXPECT(made == n);
    EXPECT(t_map < 8.0 && t_unmap < 8.0);
    EXPECT(maps_end <= maps_before + 100);   /* a sanitizer's allocator maps a few more */
    EXPECT(emuGetCounter("phys.current.0") == 0);
    free(h);
    return mt_finish("test_drv_mem_vmm_scale");
}
