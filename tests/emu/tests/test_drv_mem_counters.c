/* test_drv_mem_counters.c: the phys.* counters across emuResetCounters, and
 * the cost of a cuMemAlloc+cuMemFree pair (counters are resolved once per
 * call site, not looked up by name on every call). */
#include <time.h>
#include "driver/mem_testutil.h"

/* CPU time of this thread: a loaded machine (the suite runs beside
 * builds) preempts the loop, which wall time would count. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* emuResetCounters while memory is allocated keeps phys.current (the memory
 * is still there) and restarts phys.peak from it; the later free brings
 * phys.current back to exactly what it was before, with no wrap-around. */
static void test_reset_keeps_current(void)
{
    uint64_t base = emuGetCounter("phys.current"), base0 = emuGetCounter("phys.current.0");
    CUdeviceptr a, b;
    REQUIRE(cuMemAlloc(&a, 1 << 20));
    REQUIRE(cuMemAlloc(&b, 3 << 20));
    uint64_t held = emuGetCounter("phys.current") - base;
    EXPECT(held >= (4u << 20));
    emuResetCounters();
    EXPECT(emuGetCounter("phys.current") == base + held);
    EXPECT(emuGetCounter("phys.current.0") == base0 + held);
    EXPECT(emuGetCounter("phys.peak") == base + held);
    EXPECT(emuGetCounter("phys.peak.0") == base0 + held);
    EXPECT(emuGetCounter("calls.cuMemAlloc_v2") == 0);   /* other counters do restart */
    OK(cuMemFree(b));
    EXPECT(emuGetCounter("phys.current") == base + held - (3u << 20));
    EXPECT(emuGetCounter("phys.peak") == base + held);   /* a free does not move the peak */
    OK(cuMemFree(a));
    EXPECT(emuGetCounter("phys.current") == base);
    EXPECT(emuGetCounter("phys.current.0") == base0);
    /* the peak grows again from the exact total */
    REQUIRE(cuMemAlloc(&a, 8 << 20));
    EXPECT(emuGetCounter("phys.peak") >= base + (8u << 20));
    EXPECT(emuGetCounter("phys.peak") < (1ull << 50));
    OK(cuMemFree(a));
    EXPECT(emuGetCounter("phys.current") == base);
}

/* The emulator's share of an allocator benchmark: a pair must stay well
 * under a microsecond (it was ~1 us with name lookups on every call). */
static void test_pair_cost(void)
{
    enum { WARM = 2000, N = 200000 };
    CUdeviceptr p;
    for (int i = 0; i < WARM; i++) { REQUIRE(cuMemAlloc(&p, 4096)); REQUIRE(cuMemFree(p)); }
    uint64_t best = UINT64_MAX;
    for (int round = 0; round < 5; round++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < N; i++) {
            if (cuMemAlloc(&p, 4096) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS) {
                EXPECT(!"cuMemAlloc/cuMemFree failed");
                return;
            }
        }
        uint64_t per = (now_ns() - t0) / N;
        if (per < best) best = per;
    }
    printf("cuMemAlloc+cuMemFree (4 KiB): %llu ns (thread CPU time) per pair\n", (unsigned long long)best);
    /* printed, not asserted: speed is for benchmarks, never timed tests */
}

int main(void)
{
    mt_setup(0);
    test_reset_keeps_current();
    test_pair_cost();
    return mt_finish("test_drv_mem_counters");
}
