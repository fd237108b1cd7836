/* __device__ and __constant__ variables: nvcc registers each one with
 * __cudaRegisterVar (its host shadow's address, size, device name).  The
 * emulator gives a variable device storage on each device at first use
 * (zero-filled: initializers live only in the fatbinary, which the emulator
 * does not parse), so cudaGetSymbolAddress/Size and
 * cudaMemcpyTo/FromSymbol[Async] (and their per-thread forms) work on it.
 * A kernel's CPU implementation reaches the variable through an address the
 * host passes it (cudaGetSymbolAddress). */
#include <pthread.h>
#include "rt_internal.h"

struct rt_symbol {
    const void *host_shadow;          /* key */
    size_t size;
    int constant;
    CUdeviceptr storage[RT_MAX_DEVICES];   /* per device, 0 until first use */
};

#define RT_SYMBOL_SLOTS 8192u   /* power of two */
static struct rt_symbol rt_symbols[RT_SYMBOL_SLOTS];
static pthread_mutex_t rt_symbol_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned rt_symbol_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ULL;
    x ^= x >> 29;
    return (unsigned)x & (RT_SYMBOL_SLOTS - 1);
}

/* Registration runs in constructors before main; lookups are lock-free. */
void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global);
void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global)
{
    (void)fatCubinHandle; (void)deviceAddress; (void)deviceName; (void)ext; (void)global;
    if (!hostVar)
        return;
    pthread_mutex_lock(&rt_symbol_lock);
    unsigned i = rt_symbol_hash(hostVar);
    for (unsigned n = 0; n < RT_SYMBOL_SLOTS; n++, i = (i + 1) & (RT_SYMBOL_SLOTS - 1)) {
        struct rt_symbol *s = &rt_symbols[i];
        if (s->host_shadow == hostVar)
            break;   /* registered twice (several modules): keep the first */
        if (!s->host_shadow) {
            s->size = size;
            s->constant = constant;
            __atomic_store_n(&s->host_shadow, (const void *)hostVar, __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&rt_symbol_lock);
}

static struct rt_symbol *rt_symbol_lookup(const void *symbol)
{
    if (!symbol)
        return NULL;
    unsigned i = rt_symbol_hash(symbol);
    for (unsigned n = 0; n < RT_SYMBOL_SLOTS; n++, i = (i + 1) & (RT_SYMBOL_SLOTS - 1)) {
        const void *k = __atomic_load_n(&rt_symbols[i].host_shadow, __ATOMIC_ACQUIRE);
        if (k == symbol)
            return &rt_symbols[i];
        if (!k)
            return NULL;
    }
    return NULL;
}

/* The variable's storage on the calling thread's current device. */
static cudaError_t rt_symbol_storage(const void *symbol, struct rt_symbol **out, CUdeviceptr *ptr)
{
    struct rt_symbol *s = rt_symbol_lookup(symbol);
    if (!s)
        return cudaErrorInvalidSymbol;
    int dev = rt_tls.device;
    CUdeviceptr p = __atomic_load_n(&s->storage[dev], __ATOMIC_ACQUIRE);
    if (!p) {
        pthread_mutex_lock(&rt_symbol_lock);
        p = s->storage[dev];
        CUresult r = CUDA_SUCCESS;
        if (!p) {
            r = EMU_DRV(cuMemAlloc_v2)(&p, s->size ? s->size : 1);
            if (r == CUDA_SUCCESS)
                r = EMU_DRV(cuMemsetD8_v2)(p, 0, s->size ? s->size : 1);
            if (r == CUDA_SUCCESS)
                r = EMU_DRV(cuCtxSynchronize)();
            if (r == CUDA_SUCCESS)
                __atomic_store_n(&s->storage[dev], p, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&rt_symbol_lock);
        if (r != CUDA_SUCCESS)
            return rt_map(r);
    }
    *out = s;
    *ptr = p;
    return cudaSuccess;
}

void rt_symbols_forget_device(int dev)
{
    /* cudaDeviceReset released the storage with the context. */
    pthread_mutex_lock(&rt_symbol_lock);
    for (unsigned i = 0; i < RT_SYMBOL_SLOTS; i++)
        if (rt_symbols[i].host_shadow)
            __atomic_store_n(&rt_symbols[i].storage[dev], 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&rt_symbol_lock);
}

cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
    if (!devPtr)
        return rt_set(cudaErrorInvalidValue);
    RT_ENTER();
    struct rt_symbol *s;
    CUdeviceptr p;
    cudaError_t e = rt_symbol_storage(symbol, &s, &p);
    if (e != cudaSuccess)
        return rt_set(e);
    *devPtr = (void *)(uintptr_t)p;
    return cudaSuccess;
}

cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol)
{
    if (!size)
        return rt_set(cudaErrorInvalidValue);
    struct rt_symbol *s = rt_symbol_lookup(symbol);
    if (!s)
        return rt_set(cudaErrorInvalidSymbol);
    *size = s->size;
    return cudaSuccess;
}

/* Checks a symbol copy and resolves the device address of [offset, +count). */
static cudaError_t rt_symbol_range(const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind,
                                   int to_symbol, void **where)
{
    int host_side_ok = to_symbol ? kind == cudaMemcpyHostToDevice : kind == cudaMemcpyDeviceToHost;
    if (!host_side_ok && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    struct rt_symbol *s;
    CUdeviceptr p;
    cudaError_t e = rt_symbol_storage(symbol, &s, &p);
    if (e != cudaSuccess)
        return e;
    if (offset > s->size || count > s->size - offset)
        return cudaErrorInvalidValue;
    *where = (void *)(uintptr_t)(p + offset);
    return cudaSuccess;
}

cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind)
{
    RT_ENTER();
    void *dst;
    cudaError_t e = rt_symbol_range(symbol, count, offset, kind, 1, &dst);
    if (e != cudaSuccess)
        return rt_set(e);
    return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
                                 enum cudaMemcpyKind kind)
{
    RT_ENTER();
    void *src;
    cudaError_t e = rt_symbol_range(symbol, count, offset, kind, 0, &src);
    if (e != cudaSuccess)
        return rt_set(e);
    return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_ENTER();
    void *dst;
    cudaError_t e = rt_symbol_range(symbol, count, offset, kind, 1, &dst);
    if (e != cudaSuccess)
        return rt_set(e);
    return cudaMemcpyAsync(dst, src, count, kind, stream);
}

cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_ENTER();
    void *src;
    cudaError_t e = rt_symbol_range(symbol, count, offset, kind, 0, &src);
    if (e != cudaSuccess)
        return rt_set(e);
    return cudaMemcpyAsync(dst, src, count, kind, stream);
}

/* ---- per-thread default stream variants ---------------------------------- */
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);

cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind)
{
    RT_ENTER();
    void *dst;
    cudaError_t e = rt_symbol_range(symbol, count, offset, kind, 1, &dst);
    if (e != cudaSuccess)
        return rt_set(e);
    return cudaMemcpy_ptds(dst, src, count, kind);
}

cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind)
{
    RT_ENTER();
    void *src;
    cudaError_t e = rt_symbol_range(symbol, count, offset, kind, 0, &src);
    if (e != cudaSuccess)
        return rt_set(e);
    return cudaMemcpy_ptds(dst, src, count, kind);
}

cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count, size_t offset,
                                         enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count, size_t offset,
                                         enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return cudaMemcpyToSymbolAsync(symbol, src, count, offset, kind, rt_ptsz(stream));
}

cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count, size_t offset,
                                           enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count, size_t offset,
                                           enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return cudaMemcpyFromSymbolAsync(dst, symbol, count, offset, kind, rt_ptsz(stream));
}
