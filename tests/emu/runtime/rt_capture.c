/* Stream capture and graphs: capture state and modes, instantiation, launch
 * and destruction.  The driver owns capture (what is legal, what gets
 * recorded); enum values (capture status, capture mode) share their
 * numbering with the driver's. */
#include "rt_internal.h"

_Static_assert(sizeof(cudaGraphEdgeData) == sizeof(CUgraphEdgeData), "edge data layouts differ");

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuStreamBeginCapture_v2)((CUstream)stream, (CUstreamCaptureMode)mode));
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    if (!pGraph)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuStreamEndCapture)((CUstream)stream, (CUgraph *)pGraph));
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    if (!pCaptureStatus)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = EMU_DRV(cuStreamIsCapturing)((CUstream)stream, &st);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *pCaptureStatus = (enum cudaStreamCaptureStatus)st;
    return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
                                     unsigned long long *id_out, cudaGraph_t *graph_out,
                                     const cudaGraphNode_t **dependencies_out,
                                     const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    if (!captureStatus_out)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUresult r = EMU_DRV(cuStreamGetCaptureInfo_v3)((CUstream)stream, &st, id_out ? &id : NULL,
                                                    (CUgraph *)graph_out,
                                                    (const CUgraphNode **)dependencies_out,
                                                    (const CUgraphEdgeData **)edgeData_out,
                                                    numDependencies_out);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *captureStatus_out = (enum cudaStreamCaptureStatus)st;
    if (id_out)
        *id_out = id;
    return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    if (!mode)
        return rt_set(cudaErrorInvalidValue);
    cudaError_t e = rt_init_driver();
    if (e != cudaSuccess)
        return rt_set(e);
    CUstreamCaptureMode m = (CUstreamCaptureMode)*mode;
    CUresult r = EMU_DRV(cuThreadExchangeStreamCaptureMode)(&m);
    if (r != CUDA_SUCCESS)
        return rt_drv(r);
    *mode = (enum cudaStreamCaptureMode)m;
    return cudaSuccess;
}

/* ---- graphs ---------------------------------------------------------------- */
cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
    if (!pGraph)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    return rt_drv(EMU_DRV(cuGraphCreate)((CUgraph *)pGraph, flags));
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
    if (!pGraphExec)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    /* cudaGraphInstantiateFlag* equal CUDA_GRAPH_INSTANTIATE_FLAG_* bits. */
    return rt_drv(EMU_DRV(cuGraphInstantiateWithFlags)((CUgraphExec *)pGraphExec, (CUgraph)graph, flags));
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
    return cudaGraphInstantiateWithFlags(pGraphExec, graph, flags);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuGraphLaunch)((CUgraphExec)graphExec, (CUstream)stream));
}

cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuGraphUpload)((CUgraphExec)graphExec, (CUstream)stream));
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuGraphExecDestroy)((CUgraphExec)graphExec));
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuGraphDestroy)((CUgraph)graph));
}

/* ---- per-thread default stream variants ---------------------------------- */
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    return cudaStreamBeginCapture(rt_ptsz(s), mode);
}

cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *pGraph);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *pGraph)
{
    return cudaStreamEndCapture(rt_ptsz(s), pGraph);
}

cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st);
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
    return cudaStreamIsCapturing(rt_ptsz(s), st);
}

cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id,
                                          cudaGraph_t *g, const cudaGraphNode_t **deps,
                                          const cudaGraphEdgeData **edges, size_t *ndeps);
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id,
                                          cudaGraph_t *g, const cudaGraphNode_t **deps,
                                          const cudaGraphEdgeData **edges, size_t *ndeps)
{
    return cudaStreamGetCaptureInfo(rt_ptsz(s), st, id, g, deps, edges, ndeps);
}

cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t s)
{
    return cudaGraphLaunch(exec, rt_ptsz(s));
}

cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t exec, cudaStream_t s)
{
    return cudaGraphUpload(exec, rt_ptsz(s));
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
    RT_ENTER();
    return rt_drv(EMU_DRV(cuGraphGetNodes)((CUgraph)graph, (CUgraphNode *)nodes, numNodes));
}
