/* cublas_internal.h: internals of the emulated cuBLAS (build/emu/libcublas.so.13).
 *   cublas_handle.c  handles: stream, workspace (a default one allocated through
 *                    the driver like the real library's), modes, versions,
 *                    status strings, and the link to cuBLASLt
 *   cublas_gemm.c    the GEMM entry points (S/D/H, Ex, batched, strided, _64)
 *   cublas_copy.c    Set/Get Vector/Matrix (sync, Async, _64) over the driver's 2D copies
 *   emu_gemm.h, emu_float16.h: the CPU GEMM and the 16/8-bit float conversions,
 *                    header-only, shared with cuBLASLt and NCCL
 */
#ifndef CUBLAS_INTERNAL_H
#define CUBLAS_INTERNAL_H
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cuda.h>
#include <stdint.h>

#define CUBLAS_HANDLE_MAGIC 0x63426c6173487831ull

struct cublasContext {
    uint64_t magic;
    CUstream stream;
    CUdeviceptr default_workspace;   /* owned: allocated at create, freed at destroy */
    size_t default_workspace_size;
    void *workspace;                 /* what GEMMs get: the default or the user's */
    size_t workspace_size;
    cublasPointerMode_t pointer_mode;
    cublasMath_t math_mode;
    cublasAtomicsMode_t atomics_mode;
    int sm_count_target;
    int device;
    cublasLtHandle_t lt;             /* created on first use, through dlopen of libcublasLt */
};

/* NULL or a destroyed handle: CUBLAS_STATUS_NOT_INITIALIZED. */
cublasStatus_t cublas_check_handle(cublasHandle_t h);
void cublas_count(const char *name, uint64_t delta);

/* cuBLASLt entry points as reached by the real libcublas: dlopen of
 * libcublasLt.so.13 and dlsym, so these are nested calls a preload can see
 * when it wraps dlsym.  NULL members if the library cannot be loaded. */
struct cublas_lt_api {
    __typeof__(&cublasLtCreate) create;
    __typeof__(&cublasLtDestroy) destroy;
    __typeof__(&cublasLtMatmul) matmul;
    __typeof__(&cublasLtMatmulDescInit_internal) desc_init;
    __typeof__(&cublasLtMatmulDescSetAttribute) desc_set;
    __typeof__(&cublasLtMatrixLayoutInit_internal) layout_init;
    __typeof__(&cublasLtMatrixLayoutSetAttribute) layout_set;
};
const struct cublas_lt_api *cublas_lt(void);
/* The handle's cuBLASLt handle (created lazily), or NULL. */
cublasLtHandle_t cublas_lt_handle(cublasHandle_t h);
#endif
