/* alloc_blockmap.c: address -> live block record.  64 shards, each an
 * open-addressing table (linear probing, backward-shift deletion).  Writers
 * (the pool's slow paths) take the shard's spinlock and bump its sequence
 * around each change; the free fast path reads without any atomic
 * read-modify-write (seqlock: retry if the sequence moved).  Table slots are
 * accessed with relaxed atomics, and arrays replaced by a resize are kept
 * until destruction, so a racing reader never touches freed memory. */
#include <stdlib.h>
#include <string.h>
#include "alloc/alloc_internal.h"

void ts_spin_lock(int *l)
{
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(l, __ATOMIC_RELAXED))
            __builtin_ia32_pause();
}

void ts_spin_unlock(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

static inline uint64_t mix(uint64_t k)
{
    k >>= 9; /* blocks are 512-aligned */
    k ^= k >> 31;
    k *= 0x9e3779b97f4a7c15ull;
    return k ^ (k >> 29);
}

int ts_map_init(ts_block_map *m)
{
    memset(m, 0, sizeof *m);
    return 0;
}

void ts_map_destroy(ts_block_map *m)
{
    for (int i = 0; i < TS_MAP_SHARDS; i++) {
        free(m->shards[i].keys);
        free(m->shards[i].vals);
        for (int k = 0; k < m->shards[i].nretired; k++)
            free(m->shards[i].retired[k]);
    }
    memset(m, 0, sizeof *m);
}

static ts_map_shard *shard_of(ts_block_map *m, uint64_t key)
{
    return &m->shards[(mix(key) >> 58) & (TS_MAP_SHARDS - 1)];
}

ts_map_shard *ts_map_lock(ts_block_map *m, uint64_t key)
{
    ts_map_shard *s = shard_of(m, key);
    ts_spin_lock(&s->lock);
    return s;
}

void ts_map_unlock(ts_map_shard *s) { ts_spin_unlock(&s->lock); }

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

static int64_t find_slot(ts_map_shard *s, uint64_t key)
{
    if (!s->cap)
        return -1;
    uint32_t mask = s->cap - 1;
    for (uint32_t i = (uint32_t)mix(key) & mask;; i = (i + 1) & mask) {
        uint64_t k = LD(s->keys[i]);
        if (k == key)
            return i;
        if (!k)
            return -1;
    }
}

static void write_begin(ts_map_shard *s)
{
    ST(s->seq, s->seq + 1);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static void write_end(ts_map_shard *s) { __atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE); }

ts_block *ts_map_find(ts_block_map *m, uint64_t key)
{
    ts_map_shard *s = shard_of(m, key);
    for (;;) {
        unsigned v = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        if (v & 1) {
            __builtin_ia32_pause();
            continue;
        }
        /* cap is published after the arrays it describes */
        uint32_t cap = __atomic_load_n(&s->cap, __ATOMIC_ACQUIRE);
        uint64_t *keys = LD(s->keys);
        ts_block **vals = LD(s->vals);
        ts_block *b = NULL;
        if (cap) {
            uint32_t mask = cap - 1, i = (uint32_t)mix(key) & mask;
            for (uint32_t n = 0; n < cap; n++, i = (i + 1) & mask) {
                uint64_t k = LD(keys[i]);
                if (k == key) {
                    b = LD(vals[i]);
                    break;
                }
                if (!k)
                    break;
            }
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (LD(s->seq) == v)
            return b;
    }
}

/* Writer side, shard lock held and inside write_begin/write_end. */
static int grow(ts_map_shard *s)
{
    uint32_t ncap = s->cap ? s->cap * 2 : 64;
    if (s->cap && s->nretired + 2 > TS_MAP_RETIRED)
        return -1;
    uint64_t *nk = calloc(ncap, sizeof *nk);
    ts_block **nv = calloc(ncap, sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -1;
    }
    for (uint32_t i = 0; i < s->cap; i++)
        if (s->keys[i]) {
            uint32_t j = (uint32_t)mix(s->keys[i]) & (ncap - 1);
            while (nk[j])
                j = (j + 1) & (ncap - 1);
            nk[j] = s->keys[i];
            nv[j] = s->vals[i];
        }
    if (s->keys) {
        s->retired[s->nretired++] = s->keys;
        s->retired[s->nretired++] = s->vals;
    }
    ST(s->keys, nk);
    ST(s->vals, nv);
    __atomic_store_n(&s->cap, ncap, __ATOMIC_RELEASE);
    return 0;
}

int ts_map_put(ts_block_map *m, uint64_t key, ts_block *b)
{
    ts_map_shard *s = ts_map_lock(m, key);
    int rc = 0;
    write_begin(s);
    if ((s->count + 1) * 4 > s->cap * 3 && grow(s) < 0) {
        rc = -1;
    } else {
        uint32_t mask = s->cap - 1, i = (uint32_t)mix(key) & mask;
        while (s->keys[i] && s->keys[i] != key)
            i = (i + 1) & mask;
        if (!s->keys[i])
            s->count++;
        ST(s->vals[i], b);
        ST(s->keys[i], key);
    }
    write_end(s);
    ts_map_unlock(s);
    return rc;
}

ts_block *ts_map_get_locked(ts_map_shard *s, uint64_t key)
{
    int64_t i = find_slot(s, key);
    return i < 0 ? NULL : s->vals[i];
}

ts_block *ts_map_take_locked(ts_map_shard *s, uint64_t key)
{
    int64_t i = find_slot(s, key);
    if (i < 0)
        return NULL;
    ts_block *b = s->vals[i];
    uint32_t mask = s->cap - 1, hole = (uint32_t)i;
    write_begin(s);
    /* backward shift: move later entries of the run into the hole */
    for (uint32_t j = (hole + 1) & mask; s->keys[j]; j = (j + 1) & mask) {
        uint32_t home = (uint32_t)mix(s->keys[j]) & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            ST(s->keys[hole], s->keys[j]);
            ST(s->vals[hole], s->vals[j]);
            hole = j;
        }
    }
    ST(s->keys[hole], (uint64_t)0);
    ST(s->vals[hole], (ts_block *)NULL);
    s->count--;
    write_end(s);
    return b;
}

ts_block *ts_map_get(ts_block_map *m, uint64_t key)
{
    ts_map_shard *s = ts_map_lock(m, key);
    ts_block *b = ts_map_get_locked(s, key);
    ts_map_unlock(s);
    return b;
}

ts_block *ts_map_take(ts_block_map *m, uint64_t key)
{
    ts_map_shard *s = ts_map_lock(m, key);
    ts_block *b = ts_map_take_locked(s, key);
    ts_map_unlock(s);
    return b;
}
