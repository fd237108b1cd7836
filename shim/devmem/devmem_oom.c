/* devmem_oom.c: the report printed when the program sees a device allocation
 * fail while the pool serves its memory: what was asked, what the device and
 * the pool had, and the largest live blocks (what to look at first). */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "alloc/alloc.h"
#include "core/core.h"
#include "devmem/devmem.h"
#include "core/cuda_real.h"

static double gib(uint64_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

/* The last report printed: a request refused again with nothing allocated
 * or freed since (PyTorch retries once after synchronizing) is the same
 * situation, already explained: logged, not printed again. */
static pthread_mutex_t last_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int dev;
    uint64_t requested, allocs, frees;
} last = { -1, 0, 0, 0 };

static bool told_already(int dev, uint64_t requested, const ts_alloc_stats *st)
{
    pthread_mutex_lock(&last_lock);
    bool same = last.dev == dev && last.requested == requested && last.allocs == st->allocs
                && last.frees == st->frees;
    last.dev = dev;
    last.requested = requested;
    last.allocs = st->allocs;
    last.frees = st->frees;
    pthread_mutex_unlock(&last_lock);
    return same;
}

void ts_dev_oom_report(int dev, uint64_t requested)
{
    ts_alloc_stats st;
    memset(&st, 0, sizeof st);
    bool have = ts_dev_stats(dev, &st);
    if (have && told_already(dev, requested, &st)) {
        ts_ev_pool_oom(dev, ts_dev_pool_mode(dev), requested, st.reserved_bytes, st.allocated_bytes,
                       st.largest_free_block);
        return;
    }
    ts_oom_report rep;
    memset(&rep, 0, sizeof rep);
    /* The pool's own record of its last OOM names its largest live blocks. */
    bool have_rep = ts_dev_last_oom(dev, &rep);
    size_t dfree = 0, dtotal = 0;
    ts_cuda_fn_cuMemGetInfo_v2 info = TS_CUDA_REAL(cuMemGetInfo_v2);
    if (!info || info(&dfree, &dtotal) != CUDA_SUCCESS)
        dfree = dtotal = 0;
    char buf[2048];
    int n = snprintf(
        buf, sizeof buf,
        "trainshim: out of memory on device %d: requested %llu bytes (%.3f GiB); device free %.3f GiB of "
        "%.3f GiB; trainshim reserved %.3f GiB, allocated %.3f GiB, largest free block %llu bytes, "
        "fragmentation %.3f",
        dev, (unsigned long long)requested, gib(requested), gib(dfree), gib(dtotal), gib(st.reserved_bytes),
        gib(st.allocated_bytes),
        (unsigned long long)(have_rep ? rep.largest_free_block : st.largest_free_block),
        st.reserved_bytes ? 1.0 - (double)st.allocated_bytes / (double)st.reserved_bytes : 0.0);
    if (!have)
        n += snprintf(buf + n, sizeof buf - n, " (no pool on this device)");
    /* the limit, not the device, refused it: say so first */
    if (have_rep && rep.memory_limit && rep.reserved + requested > rep.memory_limit && n < (int)sizeof buf)
        n += snprintf(buf + n, sizeof buf - n,
                      "; TRAINSHIM_MEMORY_LIMIT caps the pool at %llu bytes (%.3f GiB)",
                      (unsigned long long)rep.memory_limit, gib(rep.memory_limit));
    if (have_rep && rep.ntop > 0 && n < (int)sizeof buf) {
        n += snprintf(buf + n, sizeof buf - n, "; largest live allocations:");
        for (int i = 0; i < rep.ntop && n < (int)sizeof buf; i++)
            n += snprintf(buf + n, sizeof buf - n, " %llu bytes at 0x%llx%s",
                          (unsigned long long)rep.top_size[i], (unsigned long long)rep.top_ptr[i],
                          i + 1 < rep.ntop ? "," : "");
    }
    fprintf(stderr, "%s\n", buf);
    if (have)
        ts_ev_pool_oom(dev, ts_dev_pool_mode(dev), requested, st.reserved_bytes, st.allocated_bytes,
                       have_rep ? rep.largest_free_block : st.largest_free_block);
}
