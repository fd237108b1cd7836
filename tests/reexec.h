/* reexec.h: a test program that needs a variable set before the emulator
 * reads it (EMU_DEVICES=2) sets it and runs itself again when tests/run.sh
 * runs it directly, without it; a variable already set is left alone. */
#ifndef TRAINSHIM_TESTS_REEXEC_H
#define TRAINSHIM_TESTS_REEXEC_H
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void reexec_with(char **argv, const char *name, const char *value)
{
    if (getenv(name))
        return;
    setenv(name, value, 1);
    execv("/proc/self/exe", argv);
    printf("FAIL: re-exec with %s=%s\n", name, value);
    exit(1);
}
#endif
