/* two_devices.h: a program that drives two emulated devices runs itself
 * again with EMU_DEVICES=2 when tests/run.sh runs it directly, then checks
 * that both devices are there (false, after a FAIL line, when not). */
#ifndef TRAINSHIM_TESTS_TWO_DEVICES_H
#define TRAINSHIM_TESTS_TWO_DEVICES_H
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>

#include "reexec.h"

static inline bool two_devices(char **argv)
{
    reexec_with(argv, "EMU_DEVICES", "2");
    int n = 0;
    if (cudaGetDeviceCount(&n) == cudaSuccess && n >= 2)
        return true;
    printf("FAIL: two devices (EMU_DEVICES=2): %d\n", n);
    return false;
}
#endif
