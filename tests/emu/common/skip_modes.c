#include "skip_modes.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 when `var` says "skip", 0 when unset or `normal`; anything else is
 * named once on stderr and means `normal` (strict stays the default). */
static bool read_mode(const char *var, const char *normal)
{
    const char *v = getenv(var);
    if (!v || !*v || !strcmp(v, normal)) return false;
    if (!strcmp(v, "skip")) return true;
    fprintf(stderr, "emu: %s=%s is not understood (%s or skip); using %s\n", var, v, normal, normal);
    return false;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool unknown_kernels_skip, compute_skip;

static void read_modes(void)
{
    unknown_kernels_skip = read_mode("EMU_UNKNOWN_KERNELS", "strict");
    compute_skip = read_mode("EMU_COMPUTE", "full");
}

bool emu_unknown_kernels_skipped(void)
{
    pthread_once(&once, read_modes);
    return unknown_kernels_skip;
}

bool emu_compute_skipped(void)
{
    pthread_once(&once, read_modes);
    return compute_skip;
}

bool emu_compute_skipped_for(unsigned long long bytes)
{
    return bytes > EMU_SKIP_SMALL_BYTES && emu_compute_skipped();
}
