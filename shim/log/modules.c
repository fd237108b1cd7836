/* modules.c: TS_REC_MODULES records (shim/log/logfmt.h) from dl_iterate_phdr.
 *
 * Checking for a change costs one dl_iterate_phdr step: its callback reads
 * the loader's adds/subs counters from the first module and stops.  Only a
 * change takes the mutex and walks every module (rare: at the first stack
 * and after a dlopen/dlclose). */
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "log/log.h"
#include "log/modules.h"

struct load_counters {
    unsigned long long adds, subs;
    int have;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t g_generation;
static _Atomic unsigned long long g_adds, g_subs;

static int counters_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct load_counters *c = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        c->adds = info->dlpi_adds;
        c->subs = info->dlpi_subs;
        c->have = 1;
    }
    return 1; /* the counters are the same in every callback: stop at the first */
}

static void segment_range(const struct dl_phdr_info *info, uint64_t *lo, uint64_t *hi)
{
    *lo = UINT64_MAX;
    *hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD)
            continue;
        uint64_t s = info->dlpi_addr + p->p_vaddr, e = s + p->p_memsz;
        if (s < *lo)
            *lo = s;
        if (e > *hi)
            *hi = e;
    }
    if (*lo > *hi)
        *lo = *hi = 0;
}

/* The GNU build-id note of a loaded module (its notes are mapped), or 0. */
static uint32_t build_id_of(const struct dl_phdr_info *info, const unsigned char **id)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_NOTE)
            continue;
        const unsigned char *n = (const unsigned char *)(info->dlpi_addr + p->p_vaddr);
        const unsigned char *end = n + p->p_memsz;
        while (n + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)n;
            const unsigned char *name = n + sizeof *nh;
            const unsigned char *desc = name + ((nh->n_namesz + 3) & ~3u);
            const unsigned char *next = desc + ((nh->n_descsz + 3) & ~3u);
            if (next > end)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4)
                && nh->n_descsz <= 64) {
                *id = desc;
                return nh->n_descsz;
            }
            n = next;
        }
    }
    return 0;
}

struct record_buf {
    unsigned char *p;
    size_t len, cap;
    uint32_t count;
    int failed;
};

static void *buf_grow(struct record_buf *b, size_t more)
{
    if (b->failed)
        return NULL;
    if (b->len + more > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->len + more)
            cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return NULL;
        }
        memset(p + b->cap, 0, cap - b->cap);
        b->p = p;
        b->cap = cap;
    }
    void *at = b->p + b->len;
    b->len += more;
    return at;
}

static int add_module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct record_buf *b = arg;
    char exe[4096];
    const char *path = info->dlpi_name;
    if (!path || !path[0]) {
        /* the main executable is listed first with no name */
        if (b->count != 0)
            return 0;
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        path = exe;
    }
    const unsigned char *id = NULL;
    uint32_t id_len = build_id_of(info, &id);
    size_t path_len = strnlen(path, 4095);
    size_t bytes = ts_rec_align((uint32_t)(sizeof(struct ts_module_entry) + path_len + id_len));
    unsigned char *at = buf_grow(b, bytes);
    if (!at)
        return 1;
    struct ts_module_entry e = { .base = info->dlpi_addr,
                                 .path_len = (uint32_t)path_len,
                                 .build_id_len = id_len };
    segment_range(info, &e.start, &e.end);
    memcpy(at, &e, sizeof e);
    memcpy(at + sizeof e, path, path_len);
    if (id_len)
        memcpy(at + sizeof e + path_len, id, id_len);
    b->count++;
    return 0;
}

/* Under g_mu. */
static int log_modules(uint32_t generation)
{
    struct record_buf b = { 0 };
    if (!buf_grow(&b, sizeof(struct ts_rec_modules)))
        return -1;
    dl_iterate_phdr(add_module_cb, &b);
    int rc = -1;
    if (!b.failed && b.len <= TS_REC_MAX_LEN) {
        struct ts_rec_modules *r = (struct ts_rec_modules *)b.p;
        r->h.len = (uint32_t)b.len;
        r->h.type = TS_REC_MODULES;
        r->generation = generation;
        r->count = b.count;
        rc = ts_log_write_record(&r->h);
    }
    free(b.p);
    return rc;
}

uint32_t ts_modules_current(void)
{
    struct load_counters now = { 0 };
    dl_iterate_phdr(counters_cb, &now);
    uint32_t gen = atomic_load_explicit(&g_generation, memory_order_acquire);
    if (gen && now.have && now.adds == atomic_load_explicit(&g_adds, memory_order_relaxed)
        && now.subs == atomic_load_explicit(&g_subs, memory_order_relaxed))
        return gen;
    pthread_mutex_lock(&g_mu);
    gen = atomic_load(&g_generation);
    /* without counters (an old loader) the first map is all we can know */
    if (!gen || (now.have && (now.adds != atomic_load(&g_adds) || now.subs != atomic_load(&g_subs)))) {
        if (log_modules(gen + 1) == 0) {
            atomic_store(&g_adds, now.adds);
            atomic_store(&g_subs, now.subs);
            atomic_store_explicit(&g_generation, gen + 1, memory_order_release);
            gen++;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return gen;
}

struct range_query {
    uint64_t addr, lo, hi;
    int index, found_index;
};

static int range_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct range_query *q = arg;
    uint64_t lo, hi;
    segment_range(info, &lo, &hi);
    if (q->addr >= lo && q->addr < hi) {
        q->lo = lo;
        q->hi = hi;
        q->found_index = q->index;
        return 1;
    }
    q->index++;
    return 0;
}

int ts_modules_range_of(const void *addr, uint64_t *lo, uint64_t *hi, int *is_main)
{
    struct range_query q = { .addr = (uint64_t)(uintptr_t)addr, .found_index = -1 };
    dl_iterate_phdr(range_cb, &q);
    if (q.found_index < 0)
        return 0;
    *lo = q.lo;
    *hi = q.hi;
    *is_main = q.found_index == 0;
    return 1;
}
