#include "driver_link.h"
#include "proc_version.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static get_proc_fn get_proc;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "emu: cannot load libcuda.so.1: %s\n", dlerror());
        abort();
    }
    get_proc = (get_proc_fn)dlsym(h, "cuGetProcAddress_v2");
    if (!get_proc) {
        fprintf(stderr, "emu: libcuda.so.1 has no cuGetProcAddress_v2\n");
        abort();
    }
}

/* Asked as the real libraries ask: the base name at the CUDA version that
 * made `name` its answer ("cuMemAlloc_v2" is "cuMemAlloc" at 3020), with the
 * per-thread flag for a _ptds/_ptsz form.  Names the table does not date
 * (the emu* control API) are passed through as they are. */
void *emu_driver_proc(const char *name)
{
    pthread_once(&once, load_driver);
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    const struct emu_proc_version *row = emu_proc_row_of(name);
    CUresult r = row
        ? get_proc(row->base, &fn, row->version ? row->version : 13000,
                   row->per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                   : CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st)
        : get_proc(name, &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    return r == CUDA_SUCCESS ? fn : NULL;
}
