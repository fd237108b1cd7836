/* report_gemm_gpu.c: GPU time of each GEMM call from the CUPTI kernel records
 * of its log (report_gpu.h, gpu_match_gemms), so COMPUTE can time every GEMM
 * rather than the TRAINSHIM_FLOP_SAMPLE-sampled ones.
 *
 * The shim's GEMM records carry the stream handle, CUPTI's kernels a stream
 * id and no link to the call, so a call is matched by stream and time order:
 * its kernel is the first unmatched kernel named *gemm* on the same device
 * and stream that starts after the call was entered (a stream runs its work
 * in order).  A GEMM record is written when the call returns, and the kernel
 * may start before that, so "entered" is bounded by the previous GEMM record
 * of the same thread (the call began after that one had returned); kernels
 * skipped by that bound (graph replays, GEMMs nobody logged) stay unmatched.
 * Which CUPTI stream a handle is, is learnt from the first call on it: the
 * stream whose next GEMM kernel starts first. */
#include "report/report_gpu.h"

#include <stdlib.h>
#include <string.h>

#define MAX_STREAMS 1024 /* distinct (device, stream) pairs followed; more: unmatched */

struct kstream {
    uint32_t device, stream_id;
    size_t *kernels; /* indices into d->acts, by start */
    size_t n, cap, next;
    bool mapped; /* some handle is known to be this stream */
};

struct handle_map {
    int32_t device;
    uint64_t handle;
    int ks; /* index into the kstream table */
};

struct call_ref {
    uint64_t time_ns;
    size_t idx;
    uint64_t entered_ns; /* the call began after this (0: unknown) */
};

struct thread_last {
    uint32_t tid;
    uint64_t time_ns; /* the thread's latest GEMM record so far */
};

static int call_by_time(const void *a, const void *b)
{
    const struct call_ref *x = a, *y = b;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Position of the first kernel of k from i on starting at or after t. */
static size_t first_from(const struct gpu_data *d, const struct kstream *k, size_t i, uint64_t t)
{
    while (i < k->n && d->acts[k->kernels[i]].start_ns < t)
        i++;
    return i;
}

/* True when a kernel name carries the call's transposes as cuBLAS names do
 * ("ampere_sgemm_128x64_tn", "..._gemm_f16f16_f32_nt_n_..."): "_" + op(A) +
 * op(B) as a whole word. */
static bool name_has_ops(const char *name, int ta, int tb)
{
    static const char op[3] = { 'n', 't', 'c' };
    if (ta < 0 || ta > 2 || tb < 0 || tb > 2)
        return false;
    for (const char *p = name; (p = strchr(p, '_')) != NULL; p++)
        if ((p[1] | 0x20) == op[ta] && (p[2] | 0x20) == op[tb] && (p[3] == '_' || !p[3]))
            return true;
    return false;
}

#define PROBE_CALLS 64 /* a new handle's calls tried against each stream */

/* The stream of the handle of calls[c] (seen for the first time): the one on
 * which most of the handle's next PROBE_CALLS calls would find their kernels
 * (a stream whose first kernel merely started first may be another handle's,
 * delayed work reorders streams); on a tie the one where more of those
 * kernels' names carry the calls' transposes, then a stream no handle has
 * yet, then the one whose next kernel starts first.  -1 when no stream has a kernel. */
static int choose_stream(const struct tslog *log, const struct gpu_data *d, const struct kstream *ks,
                         size_t nks, const struct call_ref *calls, size_t ncalls, size_t c)
{
    const struct tslog_gemm *g = &log->gemms[calls[c].idx];
    int best = -1;
    size_t best_hits = 0, best_named = 0;
    bool best_free = false;
    char nb[32];
    uint64_t best_start = UINT64_MAX;
    for (size_t k = 0; k < nks; k++) {
        if (g->device >= 0 && ks[k].device != (uint32_t)g->device)
            continue;
        size_t at = first_from(d, &ks[k], ks[k].next, calls[c].entered_ns);
        if (at >= ks[k].n)
            continue;
        uint64_t start = d->acts[ks[k].kernels[at]].start_ns;
        size_t hits = 0, named = 0, cur = ks[k].next;
        for (size_t i = c, tried = 0; i < ncalls && tried < PROBE_CALLS; i++) {
            const struct tslog_gemm *o = &log->gemms[calls[i].idx];
            if (o->stream != g->stream || o->device != g->device)
                continue;
            tried++;
            size_t p = first_from(d, &ks[k], cur, calls[i].entered_ns);
            if (p < ks[k].n) {
                hits++;
                cur = p + 1;
                const struct gpu_activity *a = &d->acts[ks[k].kernels[p]];
                named += name_has_ops(gpu_kernel_name(d, a->name_id, nb, sizeof nb), o->transa, o->transb);
            }
        }
        bool is_free = !ks[k].mapped;
        if (hits > best_hits
            || (hits == best_hits
                && (named > best_named
                    || (named == best_named
                        && (is_free > best_free || (is_free == best_free && start < best_start)))))) {
            best = (int)k;
            best_hits = hits;
            best_named = named;
            best_free = is_free;
            best_start = start;
        }
    }
    return best;
}

/* The GEMM kernels by (device, stream), each stream's in start order; -1
 * when out of memory. */
static int group_gemm_kernels(const struct gpu_data *d, struct kstream *ks, size_t *nks)
{
    char nb[32];
    for (size_t i = 0; i < d->n_acts; i++) {
        const struct gpu_activity *a = &d->acts[i];
        if (a->is_copy || !a->name_id || !gpu_is_gemm_name(gpu_kernel_name(d, a->name_id, nb, sizeof nb)))
            continue;
        size_t s = 0;
        while (s < *nks && (ks[s].device != a->device || ks[s].stream_id != a->stream_id))
            s++;
        if (s == *nks) {
            if (*nks == MAX_STREAMS)
                continue;
            ks[(*nks)++] = (struct kstream){ .device = a->device, .stream_id = a->stream_id };
        }
        size_t *slot = tslog_push_item((void **)&ks[s].kernels, &ks[s].n, &ks[s].cap, sizeof *slot);
        if (!slot)
            return -1;
        *slot = i; /* acts are sorted by start */
    }
    return 0;
}

long gpu_match_gemms(const struct tslog *log, const struct gpu_data *d, uint64_t *gpu_ns)
{
    memset(gpu_ns, 0, (log->n_gemms ? log->n_gemms : 1) * sizeof *gpu_ns);
    struct kstream *ks = calloc(MAX_STREAMS, sizeof *ks);
    struct handle_map *hm = calloc(MAX_STREAMS, sizeof *hm);
    struct call_ref *calls = malloc((log->n_gemms ? log->n_gemms : 1) * sizeof *calls);
    struct thread_last *tl = calloc(MAX_STREAMS, sizeof *tl);
    size_t nks = 0, nhm = 0, ncalls = 0, ntl = 0;
    long matched = -1;
    if (!ks || !hm || !calls || !tl)
        goto out;
    if (group_gemm_kernels(d, ks, &nks))
        goto out;
    for (size_t i = 0; i < log->n_gemms; i++)
        if (log->gemms[i].result == 0)
            calls[ncalls++] = (struct call_ref){ log->gemms[i].time_ns, i, 0 };
    qsort(calls, ncalls, sizeof *calls, call_by_time);
    for (size_t c = 0; c < ncalls; c++) { /* when each call was entered, at the latest */
        const struct tslog_gemm *g = &log->gemms[calls[c].idx];
        size_t t = 0;
        while (t < ntl && tl[t].tid != g->tid)
            t++;
        calls[c].entered_ns = t < ntl ? tl[t].time_ns : 0;
        if (t < ntl)
            tl[t].time_ns = g->time_ns;
        else if (ntl < MAX_STREAMS)
            tl[ntl++] = (struct thread_last){ g->tid, g->time_ns };
    }
    matched = 0;
    for (size_t c = 0; c < ncalls && nks; c++) {
        const struct tslog_gemm *g = &log->gemms[calls[c].idx];
        size_t h = 0;
        while (h < nhm && (hm[h].device != g->device || hm[h].handle != g->stream))
            h++;
        int s = h < nhm ? hm[h].ks : choose_stream(log, d, ks, nks, calls, ncalls, c);
        if (s < 0)
            continue;
        if (h == nhm && nhm < MAX_STREAMS) {
            hm[nhm++] = (struct handle_map){ g->device, g->stream, s };
            ks[s].mapped = true;
        }
        struct kstream *k = &ks[s];
        size_t at = first_from(d, k, k->next, calls[c].entered_ns);
        if (at >= k->n)
            continue;
        const struct gpu_activity *a = &d->acts[k->kernels[at]];
        gpu_ns[calls[c].idx] = a->end_ns > a->start_ns ? a->end_ns - a->start_ns : 1;
        k->next = at + 1;
        matched++;
    }
out:
    for (size_t s = 0; ks && s < nks; s++)
        free(ks[s].kernels);
    free(ks);
    free(hm);
    free(calls);
    free(tl);
    return matched;
}
