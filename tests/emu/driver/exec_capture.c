/* exec_capture.c: stream capture and graphs.  While a stream captures, the
 * ops enqueued on it (and on streams that joined its capture through
 * cuStreamWaitEvent) are appended to one list; a graph is that list, and a
 * launch replays it in order as a single op on the launch stream.  Replaying
 * in capture order keeps every dependency the capture expressed.  The rules
 * on "potentially unsafe" calls follow the three capture modes. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "exec_internal.h"

#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { CUresult rc_ = (x); if (rc_ != CUDA_SUCCESS) return rc_; } while (0)
#define GRAPH_MAGIC 0x47524150u
#define EXEC_MAGIC 0x47455845u
#define MAX_JOINED 64

struct graph_op { emu_op_fn fn; void *arg; void (*free_arg)(void *); const char *name; };
struct op_list {                 /* shared by a graph and its executables */
    int refs;
    size_t n, cap;
    struct graph_op *ops;
};
/* Graph and executable handles are recycled, never freed, so a destroyed
 * handle reads as invalid instead of as freed memory. */
struct emu_graph { unsigned magic; struct op_list *ops; struct emu_graph *next_free; };
struct emu_graph_exec { unsigned magic; struct op_list *ops; struct emu_graph_exec *next_free; };
static pthread_mutex_t handles_mu = PTHREAD_MUTEX_INITIALIZER;
static struct emu_graph *free_graphs;
static struct emu_graph_exec *free_execs;

static struct emu_graph *graph_alloc(void)
{
    pthread_mutex_lock(&handles_mu);
    struct emu_graph *g = free_graphs;
    if (g) free_graphs = g->next_free;
    pthread_mutex_unlock(&handles_mu);
    if (!g && !(g = malloc(sizeof *g))) return NULL;
    g->magic = 0;
    g->ops = NULL;
    g->next_free = NULL;
    return g;
}

static void graph_release(struct emu_graph *g)
{
    __atomic_store_n(&g->magic, 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&handles_mu);
    g->next_free = free_graphs;
    free_graphs = g;
    pthread_mutex_unlock(&handles_mu);
}

static struct emu_graph_exec *exec_alloc(void)
{
    pthread_mutex_lock(&handles_mu);
    struct emu_graph_exec *x = free_execs;
    if (x) free_execs = x->next_free;
    pthread_mutex_unlock(&handles_mu);
    if (!x && !(x = malloc(sizeof *x))) return NULL;
    x->next_free = NULL;
    return x;
}

static void exec_release(struct emu_graph_exec *x)
{
    __atomic_store_n(&x->magic, 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&handles_mu);
    x->next_free = free_execs;
    free_execs = x;
    pthread_mutex_unlock(&handles_mu);
}

struct emu_capture {
    int mode;
    pthread_t owner;
    int dev;
    uint64_t id;                 /* 0 once ended */
    bool invalidated;
    struct emu_stream *origin;
    struct emu_graph *graph;
    int njoined;
    struct emu_stream *joined[MAX_JOINED];   /* origin included */
    int nblocking;               /* joined streams that are blocking */
    struct emu_capture *next;
};

static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static struct emu_capture *captures;       /* active ones */
static uint64_t next_capture_id = 1;
static int n_strict;                        /* active non-relaxed captures (atomic) */
static int dev_active[EMU_MAX_DEVICES];     /* active captures per device (atomic) */
static int dev_blocking[EMU_MAX_DEVICES];   /* blocking streams capturing (atomic) */
static __thread int thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* --------------------------------------------------------------- op lists */
static struct op_list *list_new(void)
{
    struct op_list *l = calloc(1, sizeof *l);
    if (l) l->refs = 1;
    return l;
}

static void list_unref(void *p)
{
    struct op_list *l = p;
    if (!l || __atomic_sub_fetch(&l->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (size_t i = 0; i < l->n; i++)
        if (l->ops[i].free_arg) l->ops[i].free_arg(l->ops[i].arg);
    free(l->ops);
    free(l);
}

static void run_list(void *p)
{
    struct op_list *l = p;
    for (size_t i = 0; i < l->n; i++) {
        if (i) emu_jitter_sleep();
        if (l->ops[i].fn) l->ops[i].fn(l->ops[i].arg);
    }
}

static bool is_blocking(const struct emu_stream *st)
{
    return st->kind != EMU_STREAM_USER || !(st->flags & CU_STREAM_NON_BLOCKING);
}

/* --------------------------------------------------------- engine hooks */
CUresult emu_capture_record(struct emu_stream *st, emu_op_fn fn, void *arg,
                            void (*free_arg)(void *), const char *name, bool *recorded)
{
    pthread_mutex_lock(&cap_mu);
    struct emu_capture *c = st->capture;
    CUresult rc = CUDA_SUCCESS;
    *recorded = c != NULL;
    if (!c) rc = CUDA_SUCCESS;
    else if (c->invalidated) rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else {
        struct op_list *l = c->graph->ops;
        if (l->n == l->cap) {
            size_t ncap = l->cap ? l->cap * 2 : 16;
            struct graph_op *no = realloc(l->ops, ncap * sizeof *no);
            if (!no) rc = CUDA_ERROR_OUT_OF_MEMORY;
            else { l->ops = no; l->cap = ncap; }
        }
        if (rc == CUDA_SUCCESS) l->ops[l->n++] = (struct graph_op){fn, arg, free_arg, name};
        else *recorded = false;
    }
    pthread_mutex_unlock(&cap_mu);
    return rc;
}

void emu_capture_invalidate(struct emu_capture *c)
{
    if (!c) return;
    pthread_mutex_lock(&cap_mu);
    c->invalidated = true;
    pthread_mutex_unlock(&cap_mu);
}

void emu_capture_invalidate_dev(int dev)
{
    pthread_mutex_lock(&cap_mu);
    for (struct emu_capture *c = captures; c; c = c->next)
        if (c->dev == dev) c->invalidated = true;
    pthread_mutex_unlock(&cap_mu);
}

int emu_capture_active_on(int dev)
{
    return dev >= 0 && dev < EMU_MAX_DEVICES ? __atomic_load_n(&dev_active[dev], __ATOMIC_ACQUIRE) : 0;
}

uint64_t emu_capture_id(struct emu_capture *c)
{
    pthread_mutex_lock(&cap_mu);
    uint64_t id = c->id;
    pthread_mutex_unlock(&cap_mu);
    return id;
}

CUresult emu_capture_check_legacy(int dev)
{
    if (__atomic_load_n(&dev_blocking[dev], __ATOMIC_ACQUIRE) == 0) return CUDA_SUCCESS;
    pthread_mutex_lock(&cap_mu);
    bool hit = false;
    for (struct emu_capture *c = captures; c; c = c->next)
        if (c->dev == dev && c->nblocking) { c->invalidated = true; hit = true; }
    pthread_mutex_unlock(&cap_mu);
    return hit ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

CUresult emu_capture_check_unsafe(void)
{
    if (__atomic_load_n(&n_strict, __ATOMIC_ACQUIRE) == 0) return CUDA_SUCCESS;
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
    pthread_t self = pthread_self();
    bool hit = false;
    pthread_mutex_lock(&cap_mu);
    for (struct emu_capture *c = captures; c; c = c->next) {
        if (c->mode == CU_STREAM_CAPTURE_MODE_RELAXED) continue;
        bool mine = pthread_equal(c->owner, self);
        /* Prohibited: this thread's own strict captures; in global mode
         * also any other thread's global-mode capture. */
        if (mine || (thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            c->invalidated = true;
            hit = true;
        }
    }
    pthread_mutex_unlock(&cap_mu);
    return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* Caller holds cap_mu. */
static void attach_locked(struct emu_capture *c, struct emu_stream *st)
{
    c->joined[c->njoined++] = st;
    if (is_blocking(st)) {
        c->nblocking++;
        __atomic_fetch_add(&dev_blocking[st->dev], 1, __ATOMIC_ACQ_REL);
    }
    __atomic_store_n(&st->capture, c, __ATOMIC_RELEASE);
}

CUresult emu_capture_join(struct emu_stream *st, struct emu_capture *c)
{
    pthread_mutex_lock(&cap_mu);
    CUresult rc = CUDA_SUCCESS;
    if (!c->id) rc = CUDA_SUCCESS;                     /* capture over: nothing to join */
    else if (st->capture == c) rc = CUDA_SUCCESS;
    else if (st->capture) rc = CUDA_ERROR_STREAM_CAPTURE_MERGE;
    else if (st->kind == EMU_STREAM_LEGACY) { c->invalidated = true; rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; }
    else if (c->njoined == MAX_JOINED) rc = CUDA_ERROR_OUT_OF_MEMORY;
    else attach_locked(c, st);
    pthread_mutex_unlock(&cap_mu);
    return rc;
}

/* ----------------------------------------------------------- begin / end */
static CUresult begin_capture(CUstream h, int mode, bool pt)
{
    if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->kind == EMU_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    struct emu_capture *c = calloc(1, sizeof *c);
    struct emu_graph *g = graph_alloc();
    struct op_list *l = list_new();
    if (!c || !g || !l) { free(c); if (g) graph_release(g); free(l); return CUDA_ERROR_OUT_OF_MEMORY; }
    g->magic = GRAPH_MAGIC;
    g->ops = l;
    c->mode = mode;
    c->owner = pthread_self();
    c->dev = st->dev;
    c->origin = st;
    c->graph = g;
    pthread_mutex_lock(&cap_mu);
    if (st->capture) {
        pthread_mutex_unlock(&cap_mu);
        free(c); graph_release(g); free(l);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    c->id = next_capture_id++;
    c->next = captures;
    captures = c;
    attach_locked(c, st);
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED) __atomic_fetch_add(&n_strict, 1, __ATOMIC_ACQ_REL);
    __atomic_fetch_add(&dev_active[c->dev], 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&cap_mu);
    return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{ EMU_ENTRY_INIT(cuStreamBeginCapture_v2); return begin_capture(hStream, (int)mode, false); }
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{ EMU_ENTRY_INIT(cuStreamBeginCapture_v2_ptsz); return begin_capture(hStream, (int)mode, true); }
CUresult cuStreamBeginCapture(CUstream hStream)
{ EMU_ENTRY_INIT(cuStreamBeginCapture); return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, false); }
CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{ EMU_ENTRY_INIT(cuStreamBeginCapture_ptsz); return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, true); }

static CUresult end_capture(CUstream h, CUgraph *phGraph, bool pt)
{
    if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&cap_mu);
    struct emu_capture *c = st->capture;
    if (!c) { pthread_mutex_unlock(&cap_mu); return CUDA_ERROR_ILLEGAL_STATE; }
    if (c->origin != st) {
        c->invalidated = true;
        pthread_mutex_unlock(&cap_mu);
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->owner, pthread_self())) {
        pthread_mutex_unlock(&cap_mu);
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    for (int i = 0; i < c->njoined; i++) {
        if (is_blocking(c->joined[i])) __atomic_fetch_sub(&dev_blocking[c->dev], 1, __ATOMIC_ACQ_REL);
        __atomic_store_n(&c->joined[i]->capture, NULL, __ATOMIC_RELEASE);
    }
    for (struct emu_capture **pp = &captures; *pp; pp = &(*pp)->next)
        if (*pp == c) { *pp = c->next; break; }
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) __atomic_fetch_sub(&n_strict, 1, __ATOMIC_ACQ_REL);
    __atomic_fetch_sub(&dev_active[c->dev], 1, __ATOMIC_ACQ_REL);
    c->id = 0;   /* the struct stays: events may still point at it */
    bool invalid = c->invalidated;
    struct emu_graph *g = c->graph;
    pthread_mutex_unlock(&cap_mu);
    if (invalid) {
        list_unref(g->ops);
        graph_release(g);
        *phGraph = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{ EMU_ENTRY_INIT(cuStreamEndCapture); return end_capture(hStream, phGraph, false); }
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{ EMU_ENTRY_INIT(cuStreamEndCapture_ptsz); return end_capture(hStream, phGraph, true); }

/* -------------------------------------------------------------- queries */
static CUresult capture_info(CUstream h, bool pt, CUstreamCaptureStatus *status, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps, const CUgraphEdgeData **edges,
                             size_t *ndeps)
{
    if (!status) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->kind == EMU_STREAM_LEGACY) CHECK(emu_capture_check_legacy(st->dev));
    pthread_mutex_lock(&cap_mu);
    struct emu_capture *c = st->capture;
    *status = !c ? CU_STREAM_CAPTURE_STATUS_NONE
                 : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (id) *id = c ? c->id : 0;
    if (graph) *graph = c ? (CUgraph)c->graph : NULL;
    /* Nodes are not modelled: the capture's frontier is reported empty. */
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (ndeps) *ndeps = 0;
    pthread_mutex_unlock(&cap_mu);
    return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{ EMU_ENTRY_INIT(cuStreamIsCapturing); return capture_info(hStream, false, captureStatus, NULL, NULL, NULL, NULL, NULL); }
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{ EMU_ENTRY_INIT(cuStreamIsCapturing_ptsz); return capture_info(hStream, true, captureStatus, NULL, NULL, NULL, NULL, NULL); }

CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
                                   CUgraph *graph_out, const CUgraphNode **dependencies_out,
                                   const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    EMU_ENTRY_INIT(cuStreamGetCaptureInfo_v3);
    return capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out);
}
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
                                        CUgraph *graph_out, const CUgraphNode **dependencies_out,
                                        const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    EMU_ENTRY_INIT(cuStreamGetCaptureInfo_v3_ptsz);
    return capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out);
}
CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
                                   CUgraph *graph_out, const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    EMU_ENTRY_INIT(cuStreamGetCaptureInfo_v2);
    return capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out);
}
CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
                                        CUgraph *graph_out, const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    EMU_ENTRY_INIT(cuStreamGetCaptureInfo_v2_ptsz);
    return capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out);
}
CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out)
{
    EMU_ENTRY_INIT(cuStreamGetCaptureInfo);
    return capture_info(hStream, false, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}
CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out)
{
    EMU_ENTRY_INIT(cuStreamGetCaptureInfo_ptsz);
    return capture_info(hStream, true, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    EMU_ENTRY_INIT(cuThreadExchangeStreamCaptureMode);
    if (!mode || (int)*mode < CU_STREAM_CAPTURE_MODE_GLOBAL || (int)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    int old = thread_mode;
    thread_mode = (int)*mode;
    *mode = (CUstreamCaptureMode)old;
    return CUDA_SUCCESS;
}

/* ----------------------------------------------------------------- graphs */
static struct emu_graph *graph_of(CUgraph h)
{
    struct emu_graph *g = (struct emu_graph *)h;
    return (uintptr_t)g >= 4096 && __atomic_load_n(&g->magic, __ATOMIC_ACQUIRE) == GRAPH_MAGIC ? g : NULL;
}
static struct emu_graph_exec *exec_of(CUgraphExec h)
{
    struct emu_graph_exec *x = (struct emu_graph_exec *)h;
    return (uintptr_t)x >= 4096 && __atomic_load_n(&x->magic, __ATOMIC_ACQUIRE) == EXEC_MAGIC ? x : NULL;
}

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    EMU_ENTRY_INIT(cuGraphCreate);
    if (!phGraph || flags) return CUDA_ERROR_INVALID_VALUE;
    struct emu_graph *g = graph_alloc();
    struct op_list *l = list_new();
    if (!g || !l) { if (g) graph_release(g); free(l); return CUDA_ERROR_OUT_OF_MEMORY; }
    g->magic = GRAPH_MAGIC;
    g->ops = l;
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
    EMU_ENTRY_INIT(cuGraphDestroy);
    struct emu_graph *g = graph_of(hGraph);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    list_unref(g->ops);
    graph_release(g);
    return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *out, CUgraph hGraph, unsigned long long flags)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    struct emu_graph *g = graph_of(hGraph);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                               CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
                               CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    if (flags & ~known) return CUDA_ERROR_INVALID_VALUE;
    struct emu_graph_exec *x = exec_alloc();
    if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
    x->magic = EXEC_MAGIC;
    x->ops = g->ops;
    __atomic_fetch_add(&g->ops->refs, 1, __ATOMIC_ACQ_REL);
    *out = (CUgraphExec)x;
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{ EMU_ENTRY_INIT(cuGraphInstantiateWithFlags); return instantiate(phGraphExec, hGraph, flags); }
CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                            char *logBuffer, size_t bufferSize)
{
    EMU_ENTRY_INIT(cuGraphInstantiate);
    (void)phErrorNode;
    if (logBuffer && bufferSize) logBuffer[0] = 0;
    return instantiate(phGraphExec, hGraph, 0);
}
CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize)
{
    EMU_ENTRY_INIT(cuGraphInstantiate_v2);
    (void)phErrorNode;
    if (logBuffer && bufferSize) logBuffer[0] = 0;
    return instantiate(phGraphExec, hGraph, 0);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    EMU_ENTRY_INIT(cuGraphExecDestroy);
    struct emu_graph_exec *x = exec_of(hGraphExec);
    if (!x) return CUDA_ERROR_INVALID_VALUE;
    list_unref(x->ops);   /* launches still queued hold their own reference */
    exec_release(x);
    return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec hGraphExec, CUstream h, bool pt)
{
    struct emu_graph_exec *x = exec_of(hGraphExec);
    if (!x) return CUDA_ERROR_INVALID_VALUE;
    struct emu_stream *st = emu_stream_resolve(h, pt);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    __atomic_fetch_add(&x->ops->refs, 1, __ATOMIC_ACQ_REL);
    CUresult rc = emu_stream_enqueue_on(st, run_list, x->ops, list_unref, "graph", NULL, NULL);
    if (rc != CUDA_SUCCESS) list_unref(x->ops);
    return rc;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{ EMU_ENTRY_INIT(cuGraphLaunch); return graph_launch(hGraphExec, hStream, false); }
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{ EMU_ENTRY_INIT(cuGraphLaunch_ptsz); return graph_launch(hGraphExec, hStream, true); }

/* Uploading is a no-op here (nothing to copy to a device), but the handles
 * are checked as the real call does. */
static CUresult graph_upload(CUgraphExec hGraphExec, CUstream h, bool pt)
{
    if (!exec_of(hGraphExec)) return CUDA_ERROR_INVALID_VALUE;
    if (!emu_stream_resolve(h, pt)) return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}
CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{ EMU_ENTRY_INIT(cuGraphUpload); return graph_upload(hGraphExec, hStream, false); }
CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{ EMU_ENTRY_INIT(cuGraphUpload_ptsz); return graph_upload(hGraphExec, hStream, true); }

/* A graph is the chain of operations captured (or none, for cuGraphCreate);
 * each is one node.  The handles identify nodes (distinct, stable while the
 * graph lives); the node-level APIs are not emulated. */
CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    EMU_ENTRY_INIT(cuGraphGetNodes);
    struct emu_graph *g = graph_of(hGraph);
    if (!g || !numNodes) return CUDA_ERROR_INVALID_VALUE;
    size_t n = g->ops->n;
    if (nodes) {
        size_t k = *numNodes < n ? *numNodes : n;
        for (size_t i = 0; i < k; i++) nodes[i] = (CUgraphNode)(void *)&g->ops->ops[i];
        for (size_t i = k; i < *numNodes; i++) nodes[i] = NULL;
        if (*numNodes > n) *numNodes = n;
    } else {
        *numNodes = n;
    }
    return CUDA_SUCCESS;
}
