#include "driver_link.h"
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

void *emu_driver_proc(const char *name)
{
    pthread_once(&once, load_driver);
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    if (get_proc(name, &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS)
        return NULL;
    return fn;
}
