/* sync.c: the host synchronization records (sync.h).  The query before the
 * wait tells a sync that drained queued work from one that found the GPU
 * already done with the stream (the second half of torch's copy-and-sync,
 * for one): only the first costs the GPU a drained queue.  A query is one
 * driver call, small beside the wait it precedes, and legal wherever the
 * synchronize it precedes is (under a stream capture neither is, or both). */
#include "observe/sync.h"

#include "core/cuda_real.h"
#include "log/log.h"

static unsigned pending_of(CUresult r)
{
    if (r == CUDA_SUCCESS)
        return TS_SYNC_IDLE;
    return r == CUDA_ERROR_NOT_READY ? TS_SYNC_PENDING : TS_SYNC_UNKNOWN;
}

unsigned ts_sync_stream_pending(uint64_t stream)
{
    ts_cuda_fn_cuStreamQuery query = TS_CUDA_REAL(cuStreamQuery);
    return query ? pending_of(query((CUstream)(uintptr_t)stream)) : TS_SYNC_UNKNOWN;
}

unsigned ts_sync_event_pending(const void *event)
{
    ts_cuda_fn_cuEventQuery query = TS_CUDA_REAL(cuEventQuery);
    return query && event ? pending_of(query((CUevent)(uintptr_t)event)) : TS_SYNC_UNKNOWN;
}

void ts_sync_record(int api, unsigned kind, unsigned pending, uint64_t handle, uint64_t blocked_ns,
                    int result)
{
    ts_ev_host_sync(api, kind, pending, handle, blocked_ns, result);
}
