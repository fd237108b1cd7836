/* mem_arena.c: cuMemAlloc-style allocations carved from one memfd per device
 * (mapped once, MAP_SHARED, at the start of the device's range), so that
 * legacy IPC can share any allocation by (pid, fd, offset) and an alloc/free
 * pair costs no system call in the common case.
 *
 * The arena is cut into 2 MiB chunks.  Requests up to 1 MiB come from slab
 * chunks of one size class (48 classes: 256-byte steps to 4 KiB, then four
 * per doubling); larger ones take a run of whole chunks (first fit over a
 * sorted, coalesced array of free runs) and give their host pages back with
 * FALLOC_FL_PUNCH_HOLE when freed (after a stay in a small cache of runs for
 * recycled sizes).  The chunk table lets lookups find the
 * allocation holding any address without a lock. */
#include "mem_space.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NCHUNKS     (EMU_ARENA_SPAN / EMU_GRANULARITY)
#define SLAB_MAX    (1u << 20)
#define NCLASSES    48
#define SLOT_OWNER_SHIFT 28          /* slot word: requested size | owner << 28 */
#define SLOT_SIZE_MASK ((1u << SLOT_OWNER_SHIFT) - 1)

enum chunk_kind { CHUNK_FREE = 0, CHUNK_SLAB = 1, CHUNK_HEAD = 2, CHUNK_BODY = 3 };

struct chunk {
    uint32_t kind;        /* enum chunk_kind, atomic (published last) */
    uint32_t slot_size;   /* slab */
    uint32_t head;        /* body: index of the head chunk */
    uint32_t owner;       /* head */
    uint64_t nchunks;     /* head */
    uint64_t size;        /* head: requested size, atomic; 0 once freed */
    uint64_t id;          /* head: serial of the allocation */
    uint32_t *slots;      /* slab: one word per slot, 0 = free */
    uint64_t *slot_ids;   /* slab: serial of each slot's allocation */
};

struct run { uint64_t start, len; };   /* in chunks */

struct slot_stack { uintptr_t *v; size_t n, cap; };

/* Freed large runs kept, pages and all, for a request of the same chunk count:
 * a recycled size then costs no system call.  Bounded; evicted runs have
 * their pages punched out. */
#define RUN_CACHE_SLOTS 32
#define RUN_CACHE_CHUNKS 256            /* 512 MiB in all */
#define RUN_CACHE_MAX_RUN 16            /* runs over 32 MiB are released at once */

struct arena {
    pthread_mutex_t lock;
    bool ready;           /* atomic */
    int fd;
    uintptr_t base;
    struct chunk *chunks;
    struct run *runs;
    size_t nruns, runs_cap;
    struct slot_stack free_slots[NCLASSES];
    uint64_t next_id;
    uint64_t hwm;         /* chunks below this index have been used */
    struct run cached[RUN_CACHE_SLOTS];
    size_t ncached;
    uint64_t cached_chunks;
};

static struct arena arenas[EMU_MAX_DEVICES] = {
    [0 ... EMU_MAX_DEVICES - 1] = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 }
};

static unsigned class_of(size_t size, uint32_t *slot_size)
{
    if (size <= 4096) {
        unsigned idx = (unsigned)((size + 255) / 256) - 1;
        *slot_size = (idx + 1) * 256;
        return idx;
    }
    unsigned p = 63 - (unsigned)__builtin_clzll(size - 1);   /* 2^p < size <= 2^(p+1) */
    size_t step = (size_t)1 << (p - 2);
    size_t slot = emu_round_up(size, step);
    *slot_size = (uint32_t)slot;
    return 16 + (p - 12) * 4 + (unsigned)(slot / step - 5);
}

static bool arena_setup(struct arena *a, int dev)
{
    if (__atomic_load_n(&a->ready, __ATOMIC_ACQUIRE)) return true;
    char name[32];
    snprintf(name, sizeof name, "emu-device%d", dev);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)EMU_ARENA_SPAN) != 0) goto fail;
    void *m = mmap((void *)emu_dev_base(dev), EMU_ARENA_SPAN, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED, fd, 0);
    if (m == MAP_FAILED) goto fail;
    void *t = mmap(NULL, NCHUNKS * sizeof(struct chunk), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t == MAP_FAILED) goto fail;
    a->runs = malloc(64 * sizeof *a->runs);
    if (!a->runs) goto fail;
    a->runs_cap = 64;
    a->runs[0] = (struct run){ 0, NCHUNKS };
    a->nruns = 1;
    a->fd = fd;
    a->base = emu_dev_base(dev);
    a->chunks = t;
    __atomic_store_n(&a->ready, true, __ATOMIC_RELEASE);
    return true;
fail:
    emu_warn("cannot set up device %d memory arena: %m", dev);
    if (fd >= 0) close(fd);
    return false;
}

/* First fit over the free runs; returns the first chunk index or -1. */
static int64_t take_run(struct arena *a, uint64_t n)
{
    for (size_t i = 0; i < a->nruns; i++) {
        if (a->runs[i].len < n) continue;
        uint64_t start = a->runs[i].start;
        a->runs[i].start += n;
        a->runs[i].len -= n;
        if (a->runs[i].len == 0) {
            memmove(&a->runs[i], &a->runs[i + 1], (a->nruns - i - 1) * sizeof *a->runs);
            a->nruns--;
        }
        return (int64_t)start;
    }
    return -1;
}

static void give_run(struct arena *a, uint64_t start, uint64_t len)
{
    size_t lo = 0, hi = a->nruns;               /* first run after start */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->runs[mid].start < start) lo = mid + 1; else hi = mid;
    }
    bool join_prev = lo > 0 && a->runs[lo - 1].start + a->runs[lo - 1].len == start;
    bool join_next = lo < a->nruns && start + len == a->runs[lo].start;
    if (join_prev && join_next) {
        a->runs[lo - 1].len += len + a->runs[lo].len;
        memmove(&a->runs[lo], &a->runs[lo + 1], (a->nruns - lo - 1) * sizeof *a->runs);
        a->nruns--;
    } else if (join_prev) {
        a->runs[lo - 1].len += len;
    } else if (join_next) {
        a->runs[lo].start = start;
        a->runs[lo].len += len;
    } else {
        if (a->nruns == a->runs_cap) {
            struct run *r = realloc(a->runs, 2 * a->runs_cap * sizeof *r);
            if (!r) { emu_warn("arena: out of host memory; %llu chunks leaked", (unsigned long long)len); return; }
            a->runs = r;
            a->runs_cap *= 2;
        }
        memmove(&a->runs[lo + 1], &a->runs[lo], (a->nruns - lo) * sizeof *a->runs);
        a->runs[lo] = (struct run){ start, len };
        a->nruns++;
    }
}

static int64_t take_cached(struct arena *a, uint64_t n)
{
    for (size_t i = a->ncached; i-- > 0;) {
        if (a->cached[i].len != n) continue;
        int64_t c = (int64_t)a->cached[i].start;
        a->cached[i] = a->cached[--a->ncached];
        a->cached_chunks -= n;
        return c;
    }
    return -1;
}

static void release_run(struct arena *a, uint64_t start, uint64_t len)
{
    if (fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(start * EMU_GRANULARITY),
                  (off_t)(len * EMU_GRANULARITY)) != 0)
        EMU_WARN_ONCE("arena: cannot release host pages: %m");
    give_run(a, start, len);
}

/* Evicts the oldest `count` cached runs (caller holds the lock; rare). */
static void flush_cache(struct arena *a, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        release_run(a, a->cached[i].start, a->cached[i].len);
        a->cached_chunks -= a->cached[i].len;
    }
    memmove(&a->cached[0], &a->cached[count], (a->ncached - count) * sizeof a->cached[0]);
    a->ncached -= count;
}

static void cache_run(struct arena *a, uint64_t start, uint64_t len)
{
    if (len > RUN_CACHE_MAX_RUN) {
        release_run(a, start, len);
        return;
    }
    while (a->ncached && (a->ncached == RUN_CACHE_SLOTS || a->cached_chunks + len > RUN_CACHE_CHUNKS))
        flush_cache(a, 1);
    a->cached[a->ncached++] = (struct run){ start, len };
    a->cached_chunks += len;
}

static bool stack_push(struct slot_stack *s, uintptr_t v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        uintptr_t *nv = realloc(s->v, cap * sizeof *nv);
        if (!nv) return false;
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = v;
    return true;
}

/* A fresh slab chunk for a class: all its slots go on the class's stack,
 * lowest address on top. */
static bool new_slab(struct arena *a, unsigned cls, uint32_t slot_size)
{
    uint32_t nslots = (uint32_t)(EMU_GRANULARITY / slot_size);
    uint32_t *slots = calloc(nslots, sizeof *slots);
    uint64_t *ids = calloc(nslots, sizeof *ids);
    int64_t c = slots && ids ? take_run(a, 1) : -1;
    if (c < 0) { free(slots); free(ids); return false; }
    struct slot_stack *s = &a->free_slots[cls];
    uintptr_t start = a->base + (uintptr_t)c * EMU_GRANULARITY;
    for (uint32_t i = nslots; i-- > 0;) {
        if (!stack_push(s, start + (uintptr_t)i * slot_size)) {
            s->n -= nslots - 1 - i;
            give_run(a, (uint64_t)c, 1);
            free(slots);
            free(ids);
            return false;
        }
    }
    struct chunk *ch = &a->chunks[c];
    ch->slot_size = slot_size;
    ch->slots = slots;
    ch->slot_ids = ids;
    __atomic_store_n(&ch->kind, CHUNK_SLAB, __ATOMIC_RELEASE);
    return true;
}

/* Allocation serials: unique per process (device in the top bits), never
 * reused, for BUFFER_ID and legacy IPC handles. */
static uint64_t dev_serial(struct arena *a, int dev)
{
    return ((uint64_t)dev << 56) | ++a->next_id;
}

uintptr_t emu_arena_alloc(int dev, size_t size, enum emu_arena_owner owner)
{
    emu_mem_init();
    struct arena *a = &arenas[dev];
    size_t charged = emu_round_up(size, EMU_ALIGN);
    if (size == 0 || size > EMU_ARENA_SPAN || !emu_phys_charge(dev, charged)) return 0;
    uintptr_t p = 0;
    pthread_mutex_lock(&a->lock);
    if (!arena_setup(a, dev)) goto out;
    if (size <= SLAB_MAX) {
        uint32_t slot_size;
        unsigned cls = class_of(size, &slot_size);
        struct slot_stack *s = &a->free_slots[cls];
        if (s->n == 0 && !new_slab(a, cls, slot_size)) goto out;
        p = s->v[--s->n];
        uintptr_t off = p - a->base;
        struct chunk *ch = &a->chunks[off / EMU_GRANULARITY];
        uint32_t slot = (uint32_t)((off % EMU_GRANULARITY) / ch->slot_size);
        ch->slot_ids[slot] = dev_serial(a, dev);
        __atomic_store_n(&ch->slots[slot], (uint32_t)size | (uint32_t)owner << SLOT_OWNER_SHIFT,
                         __ATOMIC_RELEASE);
    } else {
        uint64_t n = emu_round_up(size, EMU_GRANULARITY) / EMU_GRANULARITY;
        int64_t c = take_cached(a, n);
        if (c < 0) c = take_run(a, n);
        if (c < 0 && a->ncached) {
            flush_cache(a, a->ncached);
            c = take_run(a, n);
        }
        if (c < 0) goto out;
        if ((uint64_t)c + n > a->hwm) a->hwm = (uint64_t)c + n;
        for (uint64_t i = 1; i < n; i++) {
            a->chunks[c + i].head = (uint32_t)c;
            __atomic_store_n(&a->chunks[c + i].kind, CHUNK_BODY, __ATOMIC_RELEASE);
        }
        struct chunk *h = &a->chunks[c];
        h->owner = owner;
        h->nchunks = n;
        h->id = dev_serial(a, dev);
        __atomic_store_n(&h->size, size, __ATOMIC_RELEASE);
        __atomic_store_n(&h->kind, CHUNK_HEAD, __ATOMIC_RELEASE);
        p = a->base + (uintptr_t)c * EMU_GRANULARITY;
    }
out:
    pthread_mutex_unlock(&a->lock);
    if (!p) emu_phys_uncharge(dev, charged);
    return p;
}

bool emu_arena_free(uintptr_t p, enum emu_arena_owner owner)
{
    int dev = emu_range_device(p);
    if (dev < 0) return false;
    struct arena *a = &arenas[dev];
    if (!__atomic_load_n(&a->ready, __ATOMIC_ACQUIRE) || p - a->base >= EMU_ARENA_SPAN) return false;
    uintptr_t off = p - a->base;
    uint64_t c = off / EMU_GRANULARITY;
    struct chunk *ch = &a->chunks[c];
    size_t size = 0;
    uint64_t run_len = 0;
    pthread_mutex_lock(&a->lock);
    if (ch->kind == CHUNK_SLAB) {
        uint32_t within = (uint32_t)(off % EMU_GRANULARITY);
        uint32_t slot = within / ch->slot_size;
        uint32_t w = ch->slots[slot];
        if (within % ch->slot_size == 0 && slot < EMU_GRANULARITY / ch->slot_size && w &&
            (!owner || w >> SLOT_OWNER_SHIFT == owner)) {
            uint32_t sz;
            unsigned cls = class_of(ch->slot_size, &sz);
            if (stack_push(&a->free_slots[cls], p)) {
                size = w & SLOT_SIZE_MASK;
                __atomic_store_n(&ch->slots[slot], 0, __ATOMIC_RELEASE);
            }
        }
    } else if (ch->kind == CHUNK_HEAD && off % EMU_GRANULARITY == 0 && (!owner || ch->owner == owner)) {
        size = ch->size;
        run_len = ch->nchunks;
        __atomic_store_n(&ch->size, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&ch->kind, CHUNK_FREE, __ATOMIC_RELEASE);
        cache_run(a, c, run_len);
    }
    pthread_mutex_unlock(&a->lock);
    if (!size) return false;
    emu_phys_uncharge(dev, emu_round_up(size, EMU_ALIGN));
    return true;
}

bool emu_arena_lookup(uintptr_t p, struct emu_arena_block *out)
{
    int dev = emu_range_device(p);
    if (dev < 0) return false;
    struct arena *a = &arenas[dev];
    if (!__atomic_load_n(&a->ready, __ATOMIC_ACQUIRE) || p - a->base >= EMU_ARENA_SPAN) return false;
    uintptr_t off = p - a->base;
    uint64_t c = off / EMU_GRANULARITY;
    struct chunk *ch = &a->chunks[c];
    uint32_t kind = __atomic_load_n(&ch->kind, __ATOMIC_ACQUIRE);
    if (kind == CHUNK_SLAB) {
        uint32_t slot = (uint32_t)((off % EMU_GRANULARITY) / ch->slot_size);
        if (slot >= EMU_GRANULARITY / ch->slot_size) return false;
        uint32_t w = __atomic_load_n(&ch->slots[slot], __ATOMIC_ACQUIRE);
        uintptr_t start = a->base + c * EMU_GRANULARITY + (uintptr_t)slot * ch->slot_size;
        if (!w || p >= start + (w & SLOT_SIZE_MASK)) return false;
        *out = (struct emu_arena_block){ start, w & SLOT_SIZE_MASK,
                                         (enum emu_arena_owner)(w >> SLOT_OWNER_SHIFT),
                                         dev, a->fd, start - a->base, ch->slot_ids[slot] };
        return true;
    }
    if (kind == CHUNK_BODY) {
        c = ch->head;
        ch = &a->chunks[c];
        if (__atomic_load_n(&ch->kind, __ATOMIC_ACQUIRE) != CHUNK_HEAD) return false;
    } else if (kind != CHUNK_HEAD) {
        return false;
    }
    size_t size = __atomic_load_n(&ch->size, __ATOMIC_ACQUIRE);
    uintptr_t start = a->base + c * EMU_GRANULARITY;
    if (!size || p >= start + size) return false;
    *out = (struct emu_arena_block){ start, size, (enum emu_arena_owner)ch->owner, dev, a->fd,
                                     start - a->base, ch->id };
    return true;
}

size_t emu_arena_reset(int dev)
{
    struct arena *a = &arenas[dev];
    if (!__atomic_load_n(&a->ready, __ATOMIC_ACQUIRE)) return 0;
    size_t freed = 0, bytes = 0;
    pthread_mutex_lock(&a->lock);
    for (uint64_t c = 0; c < a->hwm; c++) {
        struct chunk *ch = &a->chunks[c];
        if (ch->kind == CHUNK_SLAB) {
            uint32_t nslots = (uint32_t)(EMU_GRANULARITY / ch->slot_size), sz;
            unsigned cls = class_of(ch->slot_size, &sz);
            for (uint32_t i = 0; i < nslots; i++) {
                uint32_t w = ch->slots[i];
                if (!w || !stack_push(&a->free_slots[cls], a->base + c * EMU_GRANULARITY + (uintptr_t)i * ch->slot_size))
                    continue;
                bytes += emu_round_up(w & SLOT_SIZE_MASK, EMU_ALIGN);
                freed++;
                __atomic_store_n(&ch->slots[i], 0, __ATOMIC_RELEASE);
            }
        } else if (ch->kind == CHUNK_HEAD) {
            bytes += emu_round_up(ch->size, EMU_ALIGN);
            freed++;
            __atomic_store_n(&ch->size, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&ch->kind, CHUNK_FREE, __ATOMIC_RELEASE);
            release_run(a, c, ch->nchunks);
        }
    }
    pthread_mutex_unlock(&a->lock);
    if (bytes) emu_phys_uncharge(dev, bytes);
    return freed;
}
