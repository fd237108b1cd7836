/* devmem_hooks.h: bodies of the device-memory hooks (hooks/devmem_hooks.c),
 * which serve the program's device allocations from trainshim's pool
 * (shim/devmem/devmem.h).  runtime.c and driver.c include this header so that the
 * OWN hooks they generate (hooks_gen.h) find these ts_body_* functions. */
#ifndef TRAINSHIM_DEVMEM_HOOKS_H
#define TRAINSHIM_DEVMEM_HOOKS_H
#include "hooks.h"

cudaError_t ts_body_cudaMalloc(int api, void **devPtr, size_t size);
cudaError_t ts_body_cudaFree(int api, void *devPtr);
cudaError_t ts_body_cudaMallocAsync(int api, void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t ts_body_cudaFreeAsync(int api, void *devPtr, cudaStream_t hStream);
cudaError_t ts_body_cudaMemGetInfo(int api, size_t *free, size_t *total);
cudaError_t ts_body_cudaMemPoolGetAttribute(int api, cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                            void *value);
cudaError_t ts_body_cudaMemPoolSetAttribute(int api, cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                            void *value);
cudaError_t ts_body_cudaMemPoolTrimTo(int api, cudaMemPool_t memPool, size_t minBytesToKeep);
CUresult ts_body_cuMemPoolGetAttribute(int api, CUmemoryPool pool, CUmemPool_attribute attr, void *value);
CUresult ts_body_cuMemPoolSetAttribute(int api, CUmemoryPool pool, CUmemPool_attribute attr, void *value);
CUresult ts_body_cuMemPoolTrimTo(int api, CUmemoryPool pool, size_t minBytesToKeep);
/* legacy IPC (hooks/ipc_hooks.c) */
cudaError_t ts_body_cudaIpcGetMemHandle(int api, cudaIpcMemHandle_t *handle, void *devPtr);
cudaError_t ts_body_cudaIpcOpenMemHandle(int api, void **devPtr, cudaIpcMemHandle_t handle,
                                         unsigned int flags);
cudaError_t ts_body_cudaIpcCloseMemHandle(int api, void *devPtr);
CUresult ts_body_cuIpcGetMemHandle(int api, CUipcMemHandle *pHandle, CUdeviceptr dptr);
CUresult ts_body_cuIpcOpenMemHandle_v2(int api, CUdeviceptr *pdptr, CUipcMemHandle handle,
                                       unsigned int Flags);
CUresult ts_body_cuIpcCloseMemHandle(int api, CUdeviceptr dptr);
/* A (void) OWN entry expands to ts_body_x(api, ) (hooks.h): a macro takes
 * the empty argument. */
cudaError_t ts_dm_cudaDeviceReset(int api);
#define ts_body_cudaDeviceReset(api, ...) ts_dm_cudaDeviceReset(api)
cudaError_t ts_body_cudaStreamCreate(int api, cudaStream_t *pStream);
cudaError_t ts_body_cudaStreamCreateWithFlags(int api, cudaStream_t *pStream, unsigned int flags);
cudaError_t ts_body_cudaStreamCreateWithPriority(int api, cudaStream_t *pStream, unsigned int flags,
                                                 int priority);
cudaError_t ts_body_cudaStreamDestroy(int api, cudaStream_t stream);
cudaError_t ts_body_cudaDeviceEnablePeerAccess(int api, int peerDevice, unsigned int flags);
cudaError_t ts_body_cudaStreamBeginCapture(int api, cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t ts_body_cudaStreamEndCapture(int api, cudaStream_t stream, cudaGraph_t *pGraph);

CUresult ts_body_cuMemAlloc_v2(int api, CUdeviceptr *dptr, size_t bytesize);
CUresult ts_body_cuMemFree_v2(int api, CUdeviceptr dptr);
CUresult ts_body_cuMemAllocAsync(int api, CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult ts_body_cuMemFreeAsync(int api, CUdeviceptr dptr, CUstream hStream);
CUresult ts_body_cuMemGetInfo_v2(int api, size_t *free, size_t *total);
CUresult ts_body_cuMemGetAddressRange_v2(int api, CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr);
cudaError_t ts_body_cudaDeviceSetMemPool(int api, int device, cudaMemPool_t memPool);
cudaError_t ts_body_cudaMemPoolDestroy(int api, cudaMemPool_t memPool);
CUresult ts_body_cuDeviceSetMemPool(int api, CUdevice dev, CUmemoryPool pool);
CUresult ts_body_cuMemPoolDestroy(int api, CUmemoryPool pool);
CUresult ts_body_cuPointerGetAttribute(int api, void *data, CUpointer_attribute attribute, CUdeviceptr ptr);
CUresult ts_body_cuPointerGetAttributes(int api, unsigned int numAttributes, CUpointer_attribute *attributes,
                                        void **data, CUdeviceptr ptr);
CUresult ts_body_cuStreamCreate(int api, CUstream *phStream, unsigned int Flags);
CUresult ts_body_cuStreamCreateWithPriority(int api, CUstream *phStream, unsigned int flags, int priority);
CUresult ts_body_cuStreamDestroy_v2(int api, CUstream hStream);
CUresult ts_body_cuCtxDestroy_v2(int api, CUcontext ctx);
CUresult ts_body_cuDevicePrimaryCtxReset_v2(int api, CUdevice dev);
CUresult ts_body_cuDevicePrimaryCtxRelease_v2(int api, CUdevice dev);
CUresult ts_body_cuDevicePrimaryCtxReset(int api, CUdevice dev);
CUresult ts_body_cuDevicePrimaryCtxRelease(int api, CUdevice dev);
CUresult ts_body_cuStreamDestroy(int api, CUstream hStream);
CUresult ts_body_cuCtxDestroy(int api, CUcontext ctx);
CUresult ts_body_cuCtxDetach(int api, CUcontext ctx);
CUresult ts_body_cuCtxSetCurrent(int api, CUcontext ctx);
CUresult ts_body_cuCtxPushCurrent_v2(int api, CUcontext ctx);
CUresult ts_body_cuCtxPopCurrent_v2(int api, CUcontext *pctx);
CUresult ts_body_cuCtxPushCurrent(int api, CUcontext ctx);
CUresult ts_body_cuCtxPopCurrent(int api, CUcontext *pctx);
CUresult ts_body_cuCtxCreate(int api, CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult ts_body_cuCtxCreate_v2(int api, CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult ts_body_cuCtxCreate_v3(int api, CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                unsigned int flags, CUdevice dev);
CUresult ts_body_cuCtxCreate_v4(int api, CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                unsigned int flags, CUdevice dev);
CUresult ts_body_cuStreamBeginCapture_v2(int api, CUstream hStream, CUstreamCaptureMode mode);
CUresult ts_body_cuStreamEndCapture(int api, CUstream hStream, CUgraph *phGraph);
CUresult ts_body_cuStreamBeginCaptureToGraph(int api, CUstream hStream, CUgraph hGraph,
                                             const CUgraphNode *dependencies,
                                             const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                             CUstreamCaptureMode mode);
cudaError_t ts_body_cudaStreamBeginCaptureToGraph(int api, cudaStream_t stream, cudaGraph_t graph,
                                                  const cudaGraphNode_t *dependencies,
                                                  const cudaGraphEdgeData *dependencyData,
                                                  size_t numDependencies, enum cudaStreamCaptureMode mode);

#endif
