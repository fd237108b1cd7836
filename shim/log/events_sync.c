/* events_sync.c: the TS_REC_HOST_SYNC record (log.h ts_ev_host_sync), built
 * in the calling thread's buffer like every per-event record: no lock,
 * syscall or malloc.  The stack is captured first because a stack seen for
 * the first time writes its own records. */
#include "log/log.h"
#include "log/stacks.h"

void ts_ev_host_sync(int api, unsigned kind, unsigned pending, uint64_t handle, uint64_t blocked_ns,
                     int result)
{
    uint32_t stack = ts_stack_capture();
    struct ts_rec_host_sync *r = (struct ts_rec_host_sync *)ts_log_reserve(sizeof *r, TS_REC_HOST_SYNC);
    if (!r)
        return;
    r->api = api;
    r->kind = (uint8_t)kind;
    r->pending = (uint8_t)pending;
    r->reserved0 = 0;
    r->handle = handle;
    r->blocked_ns = blocked_ns;
    r->stack_id = stack;
    r->result = result;
    ts_log_commit(&r->h);
}
