/* cublasSet/GetVector and cublasSet/GetMatrix (sync, Async, _64): strided
 * host <-> device copies, made as the real library makes them, with the
 * driver's 2D copy (cuMemcpy2D / cuMemcpy2DAsync on the given stream), so a
 * preload sees nested driver copies.  Bad sizes or strides:
 * CUBLAS_STATUS_INVALID_VALUE; a failed copy: CUBLAS_STATUS_MAPPING_ERROR. */
#include "cublas_internal.h"
#include "common/driver_link.h"
#include <string.h>

/* height blocks of width bytes, src_pitch / dst_pitch apart. */
static cublasStatus_t copy2d(int to_device, const void *src, size_t spitch, void *dst, size_t dpitch, size_t width,
                             size_t height, int async, cudaStream_t stream)
{
    if (width == 0 || height == 0) return CUBLAS_STATUS_SUCCESS;
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = to_device ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    c.dstMemoryType = to_device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (to_device) { c.srcHost = src; c.dstDevice = (CUdeviceptr)(uintptr_t)dst; }
    else { c.srcDevice = (CUdeviceptr)(uintptr_t)src; c.dstHost = dst; }
    c.srcPitch = spitch;
    c.dstPitch = dpitch;
    c.WidthInBytes = width;
    c.Height = height;
    CUresult r = async ? EMU_DRV(cuMemcpy2DAsync_v2)(&c, (CUstream)stream) : EMU_DRV(cuMemcpy2D_v2)(&c);
    return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_MAPPING_ERROR;
}

static cublasStatus_t vector(int to_device, int64_t n, int64_t es, const void *x, int64_t incx, void *y, int64_t incy,
                             int async, cudaStream_t stream)
{
    if (n < 0 || es <= 0 || incx <= 0 || incy <= 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (n > 0 && (!x || !y)) return CUBLAS_STATUS_INVALID_VALUE;
    if (incx == 1 && incy == 1)      /* contiguous: one row of n elements */
        return copy2d(to_device, x, (size_t)(n * es), y, (size_t)(n * es), (size_t)(n * es), 1, async, stream);
    return copy2d(to_device, x, (size_t)(incx * es), y, (size_t)(incy * es), (size_t)es, (size_t)n, async, stream);
}

static cublasStatus_t matrix(int to_device, int64_t rows, int64_t cols, int64_t es, const void *a, int64_t lda,
                             void *b, int64_t ldb, int async, cudaStream_t stream)
{
    if (rows < 0 || cols < 0 || es <= 0 || lda <= 0 || ldb <= 0 || lda < rows || ldb < rows)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (rows > 0 && cols > 0 && (!a || !b)) return CUBLAS_STATUS_INVALID_VALUE;
    return copy2d(to_device, a, (size_t)(lda * es), b, (size_t)(ldb * es), (size_t)(rows * es), (size_t)cols, async, stream);
}

cublasStatus_t cublasSetVector(int n, int elemSize, const void *x, int incx, void *devicePtr, int incy)
{ return vector(1, n, elemSize, x, incx, devicePtr, incy, 0, NULL); }
cublasStatus_t cublasGetVector(int n, int elemSize, const void *x, int incx, void *y, int incy)
{ return vector(0, n, elemSize, x, incx, y, incy, 0, NULL); }
cublasStatus_t cublasSetVector_64(int64_t n, int64_t elemSize, const void *x, int64_t incx, void *devicePtr, int64_t incy)
{ return vector(1, n, elemSize, x, incx, devicePtr, incy, 0, NULL); }
cublasStatus_t cublasGetVector_64(int64_t n, int64_t elemSize, const void *x, int64_t incx, void *y, int64_t incy)
{ return vector(0, n, elemSize, x, incx, y, incy, 0, NULL); }
cublasStatus_t cublasSetVectorAsync(int n, int elemSize, const void *hostPtr, int incx, void *devicePtr, int incy,
                                    cudaStream_t stream)
{ return vector(1, n, elemSize, hostPtr, incx, devicePtr, incy, 1, stream); }
cublasStatus_t cublasGetVectorAsync(int n, int elemSize, const void *devicePtr, int incx, void *hostPtr, int incy,
                                    cudaStream_t stream)
{ return vector(0, n, elemSize, devicePtr, incx, hostPtr, incy, 1, stream); }
cublasStatus_t cublasSetVectorAsync_64(int64_t n, int64_t elemSize, const void *hostPtr, int64_t incx, void *devicePtr,
                                       int64_t incy, cudaStream_t stream)
{ return vector(1, n, elemSize, hostPtr, incx, devicePtr, incy, 1, stream); }
cublasStatus_t cublasGetVectorAsync_64(int64_t n, int64_t elemSize, const void *devicePtr, int64_t incx, void *hostPtr,
                                       int64_t incy, cudaStream_t stream)
{ return vector(0, n, elemSize, devicePtr, incx, hostPtr, incy, 1, stream); }

cublasStatus_t cublasSetMatrix(int rows, int cols, int elemSize, const void *A, int lda, void *B, int ldb)
{ return matrix(1, rows, cols, elemSize, A, lda, B, ldb, 0, NULL); }
cublasStatus_t cublasGetMatrix(int rows, int cols, int elemSize, const void *A, int lda, void *B, int ldb)
{ return matrix(0, rows, cols, elemSize, A, lda, B, ldb, 0, NULL); }
cublasStatus_t cublasSetMatrix_64(int64_t rows, int64_t cols, int64_t elemSize, const void *A, int64_t lda, void *B,
                                  int64_t ldb)
{ return matrix(1, rows, cols, elemSize, A, lda, B, ldb, 0, NULL); }
cublasStatus_t cublasGetMatrix_64(int64_t rows, int64_t cols, int64_t elemSize, const void *A, int64_t lda, void *B,
                                  int64_t ldb)
{ return matrix(0, rows, cols, elemSize, A, lda, B, ldb, 0, NULL); }
cublasStatus_t cublasSetMatrixAsync(int rows, int cols, int elemSize, const void *A, int lda, void *B, int ldb,
                                    cudaStream_t stream)
{ return matrix(1, rows, cols, elemSize, A, lda, B, ldb, 1, stream); }
cublasStatus_t cublasGetMatrixAsync(int rows, int cols, int elemSize, const void *A, int lda, void *B, int ldb,
                                    cudaStream_t stream)
{ return matrix(0, rows, cols, elemSize, A, lda, B, ldb, 1, stream); }
cublasStatus_t cublasSetMatrixAsync_64(int64_t rows, int64_t cols, int64_t elemSize, const void *A, int64_t lda,
                                       void *B, int64_t ldb, cudaStream_t stream)
{ return matrix(1, rows, cols, elemSize, A, lda, B, ldb, 1, stream); }
cublasStatus_t cublasGetMatrixAsync_64(int64_t rows, int64_t cols, int64_t elemSize, const void *A, int64_t lda,
                                       void *B, int64_t ldb, cudaStream_t stream)
{ return matrix(0, rows, cols, elemSize, A, lda, B, ldb, 1, stream); }
