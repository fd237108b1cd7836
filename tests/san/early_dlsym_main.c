/* dlsym called before trainshim's initializer (from early_dlsym_lib.c's
 * constructor) answers exactly what glibc answers, and the same calls made
 * after it answer as usual: a library-handle lookup of a hooked driver
 * symbol gives trainshim's hook once (and only once) its initializer has run.
 * Usage: early_dlsym_main shim|plain (whether trainshim is preloaded). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

extern void *early_next_malloc, *early_default_puts, *early_missing, *early_cuda_handle, *early_cuda_alloc;
extern int early_missing_has_error, early_ran;
void *late_next_malloc(void);

static int failures;
#define EXPECT(cond, ...)                                                    \
    do {                                                                     \
        if (!(cond)) {                                                       \
            printf("FAIL: " __VA_ARGS__);                                    \
            printf("\n");                                                    \
            failures++;                                                      \
        }                                                                    \
    } while (0)

/* File name (without directory) of the object defining p, or "?". */
static const char *object_of(const void *p)
{
    Dl_info info;
    if (!p || !dladdr(p, &info) || !info.dli_fname) return "?";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

int main(int argc, char **argv)
{
    int shim = argc > 1 && strcmp(argv[1], "shim") == 0;
    EXPECT(early_ran, "the library's constructor did not run");
    EXPECT(early_next_malloc && early_next_malloc == late_next_malloc(),
           "RTLD_NEXT from the library: early %p (%s), late %p", early_next_malloc,
           object_of(early_next_malloc), late_next_malloc());
    EXPECT(early_default_puts && early_default_puts == dlsym(RTLD_DEFAULT, "puts"),
           "RTLD_DEFAULT puts: early %p, late %p", early_default_puts, dlsym(RTLD_DEFAULT, "puts"));
    EXPECT(!early_missing && early_missing_has_error, "a missing symbol early: %p, dlerror %s",
           early_missing, early_missing_has_error ? "set" : "not set");
    EXPECT(early_cuda_handle, "dlopen(libcuda.so.1) failed early");
    EXPECT(strncmp(object_of(early_cuda_alloc), "libcuda.so", 10) == 0,
           "early handle lookup of cuMemAlloc_v2 came from %s, want the driver itself%s",
           object_of(early_cuda_alloc),
           shim ? " (trainshim hooked before its initializer, or the initializer ran first)" : "");
    void *late = early_cuda_handle ? dlsym(early_cuda_handle, "cuMemAlloc_v2") : NULL;
    const char *want = shim ? "libtrainshim.so" : "libcuda.so.1";
    EXPECT(strcmp(object_of(late), want) == 0, "late handle lookup of cuMemAlloc_v2 came from %s, want %s",
           object_of(late), want);
    printf("early dlsym: RTLD_NEXT malloc from %s, cuMemAlloc_v2 from %s early and %s late\n",
           object_of(early_next_malloc), object_of(early_cuda_alloc), object_of(late));
    return failures ? 1 : 0;
}
