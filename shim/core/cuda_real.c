/* The shim's real-CUDA table (see cuda_real.h). */
#include "core/cuda_real.h"

#include <stddef.h>

void *ts_cuda_slots[TS_CUDA_COUNT];

static ts_cuda_resolver resolver;

void ts_cuda_set_resolver(ts_cuda_resolver resolve)
{
    __atomic_store_n(&resolver, resolve, __ATOMIC_RELEASE);
}

void *ts_cuda_resolve(int id)
{
    ts_cuda_resolver resolve = __atomic_load_n(&resolver, __ATOMIC_ACQUIRE);
    if (id < 0 || id >= TS_CUDA_COUNT || !resolve)
        return NULL;
    void *p = resolve(id);
    if (!p)
        return NULL;
    void *expected = NULL;
    /* First answer wins; the resolver answers the same address every time. */
    __atomic_compare_exchange_n(&ts_cuda_slots[id], &expected, p, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&ts_cuda_slots[id], __ATOMIC_ACQUIRE);
}

int ts_current_device(void)
{
    ts_cuda_fn_cuCtxGetDevice get = TS_CUDA_REAL(cuCtxGetDevice);
    CUdevice d = -1;
    if (!get || get(&d) != CUDA_SUCCESS)
        return -1;
    return (int)d;
}

/* The current device's answer kept per thread (ts_current_device_kept): it
 * is of a generation of streams_generation below, 0 when forgotten.  A call
 * of the driver costs ~30 ns in torch's allocation path (its data and code
 * are cold there), 2% of the churn benchmark's time per tensor. */
static __thread struct current_dev {
    uint64_t generation;
    int dev;
} tls_current_dev __attribute__((tls_model("initial-exec")));
static bool current_device_unseen; /* ts_current_device_unkept */

void ts_current_context_changed(void) { tls_current_dev.generation = 0; }

void ts_current_device_unkept(void) { __atomic_store_n(&current_device_unseen, true, __ATOMIC_RELEASE); }

/* A created stream's device never changes while it lives, so each thread
 * keeps the last answers (a few streams, by handle) and asks the driver once
 * per stream: the answer is on every stream-ordered allocation's path.  A
 * handle may name another stream once its stream is destroyed, so every
 * destruction the hooks see (a stream, a context with its streams, a device
 * reset) starts a new generation, which no kept answer is of. */
#define STREAM_DEV_WAYS 4
static uint64_t streams_generation = 1; /* 0: no answer kept */
static __thread struct stream_dev {
    uint64_t stream, generation;
    int dev;
} tls_stream_dev[STREAM_DEV_WAYS] __attribute__((tls_model("initial-exec")));

void ts_streams_destroyed(void) { __atomic_add_fetch(&streams_generation, 1, __ATOMIC_RELEASE); }

/* Out of line: the kept answer's path saves no registers. */
static __attribute__((noinline)) int ask_stream_device(uint64_t stream, struct stream_dev *e, uint64_t gen)
{
    ts_cuda_fn_cuStreamGetDevice get = TS_CUDA_REAL(cuStreamGetDevice);
    CUdevice d = -1;
    if (!get) /* a driver before 12.8: the current device, as before */
        return ts_current_device();
    if (get((CUstream)(uintptr_t)stream, &d) != CUDA_SUCCESS)
        return -1;
    *e = (struct stream_dev){ .stream = stream, .generation = gen, .dev = (int)d };
    return (int)d;
}

int ts_stream_device(uint64_t stream)
{
    if (ts_stream_is_default(stream))
        return ts_current_device();
    /* the generation before the question: a destruction during it makes the
     * answer kept stale at once */
    uint64_t gen = __atomic_load_n(&streams_generation, __ATOMIC_ACQUIRE);
    struct stream_dev *e = &tls_stream_dev[(stream >> 4) % STREAM_DEV_WAYS];
    if (e->stream == stream && e->generation == gen)
        return e->dev;
    return ask_stream_device(stream, e, gen);
}

int ts_current_device_kept(void)
{
    /* the generation before the question, as in ts_stream_device */
    uint64_t gen = __atomic_load_n(&streams_generation, __ATOMIC_ACQUIRE);
    struct current_dev *e = &tls_current_dev;
    if (e->generation == gen && !__atomic_load_n(&current_device_unseen, __ATOMIC_ACQUIRE))
        return e->dev;
    int dev = ts_current_device();
    *e = (struct current_dev){ .generation = dev >= 0 ? gen : 0, .dev = dev };
    return dev;
}

CUcontext ts_stream_context(uint64_t stream)
{
    ts_cuda_fn_cuStreamGetCtx get = TS_CUDA_REAL(cuStreamGetCtx);
    CUcontext ctx = NULL;
    if (ts_stream_is_default(stream) || !get || get((CUstream)(uintptr_t)stream, &ctx) != CUDA_SUCCESS)
        return NULL;
    return ctx;
}
