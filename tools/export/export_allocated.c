/* export_allocated.c: the allocated bytes of each device over a log's run,
 * replayed from its alloc and free events in time order (for the chrome
 * trace's counters and the SVG timeline). */
#include <stdlib.h>

#include "export/export.h"

int export_allocated_walk(const struct tslog *log, export_allocated_fn fn, void *arg)
{
    size_t n = 0;
    const struct tslog_event **ev = sites_sorted_events(log, &n);
    size_t cap = 2;
    while (cap < n * 2 + 2)
        cap *= 2;
    /* by pointer; a freed slot keeps its pointer (size 0): the table is sized
     * for every pointer ever allocated */
    struct {
        uint64_t ptr, size;
        int dev;
    } *live = calloc(cap, sizeof *live);
    int rc = ev && live ? 0 : -1;
    uint64_t cur[64] = { 0 };
    for (size_t i = 0; i < n && !rc; i++) {
        const struct tslog_event *e = ev[i];
        size_t s = (size_t)ts_rec_mix64(e->ptr) & (cap - 1);
        while (live[s].ptr && live[s].ptr != e->ptr)
            s = (s + 1) & (cap - 1);
        int dev;
        if (e->type == TS_REC_ALLOC) {
            if (live[s].ptr == e->ptr && live[s].size) /* handed out again without a free we saw */
                cur[live[s].dev] -= live[s].size;
            dev = e->device >= 0 && e->device < 64 ? e->device : 0;
            live[s].ptr = e->ptr;
            live[s].size = e->bytes;
            live[s].dev = dev;
            cur[dev] += e->bytes;
        } else {
            if (live[s].ptr != e->ptr || !live[s].size)
                continue;
            dev = live[s].dev;
            cur[dev] -= live[s].size;
            live[s].size = 0;
        }
        rc = fn(arg, e->time_ns, dev, cur[dev]);
    }
    free(live);
    free(ev);
    return rc;
}
