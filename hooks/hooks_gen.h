/* hooks_gen.h: defines the exported hooks of the libraries a family file
 * selects.  Usage, at the end of hooks/<family>.c, after its ts_body_* :
 *     #define TS_GEN_LIB_cudart(...) TS_GEN_HOOK(__VA_ARGS__)
 *     #include "hooks_gen.h"
 * Included once per family file (no include guard on purpose). */
#ifndef TS_GEN_LIB_cudart
#define TS_GEN_LIB_cudart(...)
#endif
#ifndef TS_GEN_LIB_cuda
#define TS_GEN_LIB_cuda(...)
#endif
#ifndef TS_GEN_LIB_nccl
#define TS_GEN_LIB_nccl(...)
#endif
#ifndef TS_GEN_LIB_cublas
#define TS_GEN_LIB_cublas(...)
#endif
#ifndef TS_GEN_LIB_cublasLt
#define TS_GEN_LIB_cublasLt(...)
#endif
#define TS_SYM(lib, ...) TS_GEN_LIB_##lib(lib, __VA_ARGS__)
#include "hooks.def"
#undef TS_SYM
