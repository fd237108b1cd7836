/* test_drv_exec_fault: the fault guard of the emulated driver.  A kernel
 * touching device memory it may not access (a reserved, unmapped range) is
 * abandoned; the process survives; synchronizing calls report the sticky
 * CUDA_ERROR_ILLEGAL_ADDRESS, later work is refused with it, and a primary
 * context reset recovers.  A fault outside device memory still reaches the
 * program's own SIGSEGV handler, installed before the driver's. */
#include "driver/exec_testutil.h"

#include <setjmp.h>
#include <signal.h>

static sigjmp_buf program_jmp;
static volatile sig_atomic_t program_handler_calls;
static void program_handler(int sig, siginfo_t *info, void *uctx)
{
    (void)sig; (void)info; (void)uctx;
    program_handler_calls++;
    siglongjmp(program_jmp, 1);
}

static volatile int after_fault_ran;
static void poke_impl(void **args, const emu_launch *l)
{
    (void)l;
    volatile int *p = *(int **)args[0];
    *p = 1;                     /* faults: no access to this device range */
    after_fault_ran = 1;        /* never reached */
}
static void write_impl(void **args, const emu_launch *l)
{
    (void)l;
    **(int **)args[0] = 7;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = program_handler;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);

    et_setup(0);
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    static const char poke_stub = 0, write_stub = 0;
    size_t ptr_size = sizeof(void *);
    EXPECT(emuRegisterKernel(&poke_stub, NULL, poke_impl, 1, &ptr_size) == 0);
    EXPECT(emuRegisterKernel(&write_stub, NULL, write_impl, 1, &ptr_size) == 0);
    void *poke, *writek;
    EXPECT(emuGetFunction(&poke, &poke_stub, NULL) == CUDA_SUCCESS);
    EXPECT(emuGetFunction(&writek, &write_stub, NULL) == CUDA_SUCCESS);

    /* A non-device fault on the program's thread goes to its handler. */
    if (!sigsetjmp(program_jmp, 1)) {
        volatile uintptr_t addr = 16;   /* not known to the compiler */
        *(volatile int *)addr = 1;
    }
    EXPECT(program_handler_calls == 1);

    CUdeviceptr resv, good;
    size_t span = 2u << 20;
    REQUIRE(cuMemAddressReserve(&resv, span, 0, 0, 0));   /* no mapping: no access */
    REQUIRE(cuMemAlloc(&good, 64));
    EXPECT(emuIsDevicePointer((void *)(uintptr_t)resv));
    void *params[] = {&resv};
    OK(cuLaunchKernel((CUfunction)poke, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    EXPECT_RC(cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT(!after_fault_ran);                         /* the op was abandoned */
    EXPECT(program_handler_calls == 1);               /* the program's handler saw nothing */
    EXPECT(emuGetCounter("faults.illegal_address") == 1);
    /* Sticky: reported by every synchronizing call and refused for new work. */
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_RC(cuStreamSynchronize(NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_RC(cuStreamQuery(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    void *gparams[] = {&good};
    EXPECT_RC(cuLaunchKernel((CUfunction)writek, 1, 1, 1, 1, 1, 1, 0, s, gparams, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
    CUevent e;
    REQUIRE(cuEventCreate(&e, 0));
    EXPECT_RC(cuEventRecord(e, s), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_RC(cuEventSynchronize(e), CUDA_ERROR_ILLEGAL_ADDRESS);

    /* A reset recovers the context.  It also releases the context's memory
     * and destroys its streams and events: s is gone, a new stream works. */
    OK(cuDevicePrimaryCtxReset(0));
    OK(cuCtxSynchronize());
    EXPECT_RC(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    REQUIRE(cuStreamCreate(&s, 0));
    CUdeviceptr fresh;
    REQUIRE(cuMemAlloc(&fresh, 64));
    void *fparams[] = {&fresh};
    OK(cuLaunchKernel((CUfunction)writek, 1, 1, 1, 1, 1, 1, 0, s, fparams, NULL));
    OK(cuStreamSynchronize(s));
    EXPECT(*(int *)(uintptr_t)fresh == 7);
    OK(cuMemFree(fresh));
    EXPECT_RC(cuEventDestroy(e), CUDA_ERROR_INVALID_HANDLE); /* the reset destroyed it too */
    OK(cuStreamDestroy(s));
    return et_finish("test_drv_exec_fault");
}
