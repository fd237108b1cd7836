/* A library the test program links (tests/san/test_early_dlsym.sh): being a
 * dependency of the program, its constructor runs before the preloaded
 * trainshim's, like a sanitizer runtime resolving its interceptors or a
 * program's own early dlsym interposer.  It records what dlsym answered
 * then, for the program to compare with the answers after trainshim's
 * initializer has run. */
#include <dlfcn.h>
#include <stddef.h>

void *early_next_malloc;    /* dlsym(RTLD_NEXT, "malloc") from this library */
void *early_default_puts;   /* dlsym(RTLD_DEFAULT, "puts") */
void *early_missing;        /* dlsym(RTLD_DEFAULT, <no such symbol>) */
int early_missing_has_error;
void *early_cuda_handle;    /* dlopen("libcuda.so.1") */
void *early_cuda_alloc;     /* dlsym(that handle, "cuMemAlloc_v2") */
int early_ran;

/* RTLD_NEXT answers depend on the caller: the same question asked from this
 * library after main has started. */
void *late_next_malloc(void) { return dlsym(RTLD_NEXT, "malloc"); }

__attribute__((constructor)) static void early_lookups(void)
{
    early_next_malloc = dlsym(RTLD_NEXT, "malloc");
    early_default_puts = dlsym(RTLD_DEFAULT, "puts");
    (void)dlerror();
    early_missing = dlsym(RTLD_DEFAULT, "ts_early_no_such_symbol");
    early_missing_has_error = dlerror() != NULL;
    early_cuda_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (early_cuda_handle) early_cuda_alloc = dlsym(early_cuda_handle, "cuMemAlloc_v2");
    early_ran = 1;
}
