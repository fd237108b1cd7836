/* cuBLAS and cuBLASLt hooks (libcublas.so.13, libcublasLt.so.13): the GEMM
 * entry points carrying shapes, all generated passthrough for now with
 * outermost-call accounting (cuBLAS calling cublasLtMatmul counts once).
 * FLOP accounting comes in a later issue. */
#include "hooks.h"

#define TS_GEN_LIB_cublas(...) TS_GEN_HOOK(__VA_ARGS__)
#define TS_GEN_LIB_cublasLt(...) TS_GEN_HOOK(__VA_ARGS__)
#include "hooks_gen.h"
