/* core.c: the emulated driver's core: EMU_* configuration, named counters,
 * entry accounting and fault injection, cuInit and version, error names
 * and strings, the sticky error and seeded randoms.  Devices and contexts
 * live in exec_context.c, cuGetProcAddress in core_proc.c. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "exec_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

struct emu_config emu_cfg;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_done;   /* fast path flag, set after init_once ran */

/* ------------------------------------------------------------ environment */
static long long env_ll(const char *name, long long dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    long long x = strtoll(v, &end, 0);
    if (*end) { emu_warn("%s=%s is not a number; using %lld", name, v, dflt); return dflt; }
    return x;
}

static double env_double(const char *name, double dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    double x = strtod(v, &end);
    if (*end || x < 0) { emu_warn("%s=%s is not a rate; ignored", name, v); return dflt; }
    return x;
}

/* "80G", "512M", "1048576": binary suffixes K, M, G, T (optional trailing B/iB). */
static size_t parse_size(const char *v, size_t dflt)
{
    if (!v || !*v) return dflt;
    char *end;
    double x = strtod(v, &end);
    if (end == v || x <= 0) return dflt;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1024.0; end++; break;
    case 'M': mult = 1024.0 * 1024; end++; break;
    case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end) { emu_warn("EMU_DEVICE_MEMORY=%s not understood; using default", v); return dflt; }
    return (size_t)(x * mult);
}

static int set_fault_rules(const char *spec);
static void after_fork_child(void);

/* Every cuMemCreate handle is a memfd, and a replayed 80 GiB trace maps
 * ~40k 2 MiB handles: raise the open-file limit as far as allowed, silently
 * (as a process may always raise its soft limit to the hard one; with
 * CAP_SYS_RESOURCE both may go up to fs.nr_open). */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t want = (rlim_t)1 << 20;
    FILE *f = fopen("/proc/sys/fs/nr_open", "re");
    if (f) {
        unsigned long long v;
        if (fscanf(f, "%llu", &v) == 1 && v > 0) want = (rlim_t)v;
        fclose(f);
    }
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
        struct rlimit up = { want, want };
        if (setrlimit(RLIMIT_NOFILE, &up) == 0) return;   /* privileged */
    }
    if (rl.rlim_cur != rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void do_init(void)
{
    emu_cfg.devices = (int)env_ll("EMU_DEVICES", 1);
    if (emu_cfg.devices < 1) emu_cfg.devices = 1;
    if (emu_cfg.devices > EMU_MAX_DEVICES) emu_cfg.devices = EMU_MAX_DEVICES;
    emu_cfg.device_memory = parse_size(getenv("EMU_DEVICE_MEMORY"), (size_t)80 << 30);
    long long j = env_ll("EMU_JITTER_US", 0);
    emu_cfg.jitter_us = j < 0 ? 0 : (unsigned)j;
    emu_cfg.seed = (uint64_t)env_ll("EMU_SEED", 1);
    emu_cfg.pinned_gbps = env_double("EMU_PINNED_GBPS", 0);
    emu_cfg.pageable_gbps = env_double("EMU_PAGEABLE_GBPS", 0);
    emu_cfg.nvlink_gbps = env_double("EMU_LINK_GBPS", 0);
    emu_cfg.host_link_gbps = env_double("EMU_HOST_LINK_GBPS", emu_cfg.pinned_gbps);
    emu_cfg.host_vmm = env_ll("EMU_HOST_VMM", 1) != 0;
    emu_cfg.proc_internal = env_ll("EMU_PROC_INTERNAL", 0) != 0;
    const char *trace = getenv("EMU_LINK_TRACE");
    emu_cfg.link_trace_fd = trace && *trace ? open(trace, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
    const char *name = getenv("EMU_DEVICE_NAME");
    snprintf(emu_cfg.device_name, sizeof emu_cfg.device_name, "%s",
             name && *name ? name : "NVIDIA H100 80GB HBM3");
    const char *fail = getenv("EMU_FAIL");
    if (fail && *fail && set_fault_rules(fail) != 0)
        emu_warn("EMU_FAIL=%s is not a valid fault spec (entry:N:ERROR or entry:pF:ERROR)", fail);
    emu_fault_install();
    raise_fd_limit();
    pthread_atfork(NULL, NULL, after_fork_child);
    __atomic_store_n(&init_done, 1, __ATOMIC_RELEASE);
}

void emu_init(void)
{
    if (__atomic_load_n(&init_done, __ATOMIC_ACQUIRE)) return;
    pthread_once(&init_once, do_init);
}

void emu_warn(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "emu: %s\n", buf);
}

/* --------------------------------------------------------------- counters */
/* Open addressing over a fixed table: names are interned once (CAS of the
 * name pointer), values are plain atomics, so reads and adds never lock.
 * An entry point's calls.<name> counter is also sharded (see call shards
 * below): `shard` is its column there plus one, 0 for a plain counter. */
#define COUNTER_SLOTS 4096
struct counter { const char *name; uint64_t value; int shard; };
static struct counter counters[COUNTER_SLOTS];

/* Call shards.  Every driver call counts itself, so a shared atomic add per
 * call would charge the shim (which calls cuCtxGetDevice per allocation) a
 * locked instruction the real driver does not have.  Instead each thread
 * adds to a shard of its own with a plain load and store (relaxed atomics:
 * one writer at a time, readers anywhere), and a read sums the counter's
 * value and its column of every shard.  Shards are never freed: a thread
 * that exits hands its shard to the next thread that needs one (release,
 * then acquire when adopted), so no count is ever moved, and a read is
 * exact whenever no call is in flight, across threads and in a fork child
 * (which inherits every shard's memory as it was).  A reset stores minus
 * the shards' sum in the counter's value. */
#define MAX_ENTRY_COUNTERS 1024
struct call_shard {
    struct call_shard *next;   /* push-only list */
    int owned;                 /* a live thread adds to it */
    uint64_t calls[MAX_ENTRY_COUNTERS];
};
static struct call_shard *call_shards;
static int n_entry_counters;
static pthread_mutex_t entry_id_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t shard_key;
static pthread_once_t shard_key_once = PTHREAD_ONCE_INIT;
static __thread struct call_shard *my_shard;

static void release_shard(void *arg)
{
    struct call_shard *s = arg;
    my_shard = NULL;   /* a later call of this thread adopts one again */
    __atomic_store_n(&s->owned, 0, __ATOMIC_RELEASE);
}

static void make_shard_key(void) { pthread_key_create(&shard_key, release_shard); }

/* The calling thread's shard: a released one if any, else a new one; NULL
 * when none can be had (the caller then adds to the counter itself). */
static __attribute__((noinline)) struct call_shard *adopt_shard(void)
{
    pthread_once(&shard_key_once, make_shard_key);
    struct call_shard *s = __atomic_load_n(&call_shards, __ATOMIC_ACQUIRE);
    for (; s; s = __atomic_load_n(&s->next, __ATOMIC_ACQUIRE)) {
        int free_ = 0;
        if (!__atomic_load_n(&s->owned, __ATOMIC_RELAXED) &&
            __atomic_compare_exchange_n(&s->owned, &free_, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            break;
    }
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) return NULL;
        s->owned = 1;
        struct call_shard *head = __atomic_load_n(&call_shards, __ATOMIC_RELAXED);
        do s->next = head;
        while (!__atomic_compare_exchange_n(&call_shards, &head, s, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    }
    if (pthread_setspecific(shard_key, s) != 0) {
        __atomic_store_n(&s->owned, 0, __ATOMIC_RELEASE);
        return NULL;
    }
    my_shard = s;
    return s;
}

/* One call of the counter in column `col` by this thread. */
static inline void count_call(struct counter *c, int col)
{
    struct call_shard *s = my_shard;
    if (__builtin_expect(!s, 0) && !(s = adopt_shard())) {
        __atomic_fetch_add(&c->value, 1, __ATOMIC_RELAXED);
        return;
    }
    uint64_t *v = &s->calls[col];
    __atomic_store_n(v, __atomic_load_n(v, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* Sum of column `col` over every shard. */
static uint64_t shard_sum(int col)
{
    uint64_t n = 0;
    for (struct call_shard *s = __atomic_load_n(&call_shards, __ATOMIC_ACQUIRE); s;
         s = __atomic_load_n(&s->next, __ATOMIC_ACQUIRE))
        n += __atomic_load_n(&s->calls[col], __ATOMIC_RELAXED);
    return n;
}

/* The counter's value as read: its own plus its shards' column. */
static uint64_t counter_read(struct counter *c)
{
    uint64_t v = __atomic_load_n(&c->value, __ATOMIC_RELAXED);
    int shard = __atomic_load_n(&c->shard, __ATOMIC_ACQUIRE);
    return shard ? v + shard_sum(shard - 1) : v;
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static struct counter *counter_find(const char *name, bool create)
{
    uint64_t h = hash_name(name);
    char *mine = NULL;
    for (unsigned i = 0; i < COUNTER_SLOTS; i++) {
        struct counter *c = &counters[(h + i) & (COUNTER_SLOTS - 1)];
        const char *n = __atomic_load_n(&c->name, __ATOMIC_ACQUIRE);
        if (!n) {
            if (!create) return NULL;
            if (!mine && !(mine = strdup(name))) return NULL;
            const char *expect = NULL;
            if (__atomic_compare_exchange_n(&c->name, &expect, mine, false,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return c;
            n = expect;
        }
        if (strcmp(n, name) == 0) { free(mine); return c; }
    }
    free(mine);
    EMU_WARN_ONCE("counter table full; counter %s dropped", name);
    return NULL;
}

/* Where a counter that did not fit the table goes: adds still work. */
static uint64_t dropped_counter;

uint64_t *emu_counter_ref(const char *name)
{
    struct counter *c = counter_find(name, true);
    return c ? &c->value : &dropped_counter;
}

void emu_counter_max_ref(uint64_t *ref, uint64_t value)
{
    uint64_t cur = __atomic_load_n(ref, __ATOMIC_RELAXED);
    while (cur < value && !__atomic_compare_exchange_n(ref, &cur, value, true,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

void emu_counter_add(const char *name, uint64_t delta)
{
    struct counter *c = counter_find(name, true);
    if (c) __atomic_fetch_add(&c->value, delta, __ATOMIC_RELAXED);
}

void emu_counter_max(const char *name, uint64_t value)
{
    struct counter *c = counter_find(name, true);
    if (!c) return;
    uint64_t cur = __atomic_load_n(&c->value, __ATOMIC_RELAXED);
    while (cur < value && !__atomic_compare_exchange_n(&c->value, &cur, value, true,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

uint64_t emuGetCounter(const char *name)
{
    if (!name) return 0;
    struct counter *c = counter_find(name, false);
    return c ? counter_read(c) : 0;
}

/* phys.current* describe memory that is still allocated: zeroing them would
 * make the next free wrap them around.  They are kept, and phys.peak*
 * restart from them (emu_phys_reset_peaks). */
void emuResetCounters(void)
{
    for (unsigned i = 0; i < COUNTER_SLOTS; i++) {
        const char *n = __atomic_load_n(&counters[i].name, __ATOMIC_ACQUIRE);
        if (n && strncmp(n, "phys.", 5) == 0) continue;
        int shard = __atomic_load_n(&counters[i].shard, __ATOMIC_ACQUIRE);
        __atomic_store_n(&counters[i].value, shard ? 0 - shard_sum(shard - 1) : 0, __ATOMIC_RELAXED);
    }
    emu_phys_reset_peaks();
}

void emuAddCounter(const char *name, uint64_t delta)
{
    if (name) emu_counter_add(name, delta);
}

/* ---------------------------------------------------------- error names */
struct err_entry { int code; const char *name; const char *text; };
static const struct err_entry err_table[] = {
#include "exec_errors.inc"
};
#define N_ERR (sizeof err_table / sizeof err_table[0])

/* The short strings the real driver prints for the common codes. */
static const char *short_text(int code)
{
    switch (code) {
    case CUDA_SUCCESS: return "no error";
    case CUDA_ERROR_INVALID_VALUE: return "invalid argument";
    case CUDA_ERROR_OUT_OF_MEMORY: return "out of memory";
    case CUDA_ERROR_NOT_INITIALIZED: return "initialization error";
    case CUDA_ERROR_INVALID_DEVICE: return "invalid device ordinal";
    case CUDA_ERROR_INVALID_CONTEXT: return "invalid device context";
    case CUDA_ERROR_INVALID_HANDLE: return "invalid resource handle";
    case CUDA_ERROR_NOT_FOUND: return "named symbol not found";
    case CUDA_ERROR_NOT_READY: return "device not ready";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "an illegal memory access was encountered";
    case CUDA_ERROR_NOT_SUPPORTED: return "operation not supported";
    default: return NULL;
    }
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    EMU_ENTRY(cuGetErrorString);
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    const char *s = short_text(error);
    if (s) { *pStr = s; return CUDA_SUCCESS; }
    for (size_t i = 0; i < N_ERR; i++)
        if (err_table[i].code == (int)error) { *pStr = err_table[i].text; return CUDA_SUCCESS; }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    EMU_ENTRY(cuGetErrorName);
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < N_ERR; i++)
        if (err_table[i].code == (int)error) { *pStr = err_table[i].name; return CUDA_SUCCESS; }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* CUresult by name ("CUDA_ERROR_OUT_OF_MEMORY") or number; -1 if unknown. */
static int parse_error(const char *s)
{
    if (isdigit((unsigned char)*s)) {
        char *end;
        long v = strtol(s, &end, 0);
        return *end ? -1 : (int)v;
    }
    for (size_t i = 0; i < N_ERR; i++)
        if (strcmp(err_table[i].name, s) == 0) return err_table[i].code;
    return -1;
}

/* ----------------------------------------------------- sticky and random */
static int sticky_error;

void emu_set_sticky(CUresult err)
{
    int expect = 0;
    __atomic_compare_exchange_n(&sticky_error, &expect, (int)err, false,
                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
CUresult emu_sticky(void) { return (CUresult)__atomic_load_n(&sticky_error, __ATOMIC_ACQUIRE); }
void emu_clear_sticky(void) { __atomic_store_n(&sticky_error, 0, __ATOMIC_RELEASE); }

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Each thread gets its own stream of numbers: seed mixed with the order in
 * which threads first ask, so a run is reproducible for a given EMU_SEED as
 * far as thread creation order is. */
uint64_t emu_rand(void)
{
    static __thread uint64_t state;
    static __thread int seeded;
    static unsigned thread_counter;
    if (!seeded) {
        emu_init();
        uint64_t s = emu_cfg.seed * 0x2545f4914f6cdd1dull +
                     __atomic_fetch_add(&thread_counter, 1, __ATOMIC_RELAXED);
        state = splitmix(&s);
        seeded = 1;
    }
    return splitmix(&state);
}

unsigned emuJitterUs(void)
{
    emu_init();
    return __atomic_load_n(&emu_cfg.jitter_us, __ATOMIC_RELAXED);
}

unsigned emuSetJitterUs(unsigned us)
{
    emu_init();
    return __atomic_exchange_n(&emu_cfg.jitter_us, us, __ATOMIC_RELAXED);
}

/* -------------------------------------------- entry accounting and faults */
/* calls: the calls.<name> counter, counted in its shard column `col` (-1:
 * no column left, counted by an atomic add). */
struct emu_entry_slot { struct counter *calls; int col; const char *name; bool works_after_fork; };

/* c's shard column, given on its first entry slot. */
static int entry_column(struct counter *c)
{
    pthread_mutex_lock(&entry_id_mu);
    int shard = c->shard;
    if (!shard && n_entry_counters < MAX_ENTRY_COUNTERS) {
        shard = ++n_entry_counters;
        __atomic_store_n(&c->shard, shard, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&entry_id_mu);
    return shard - 1;
}

/* A child forked (without exec) after cuInit has no usable CUDA state: as on
 * a real driver, every entry point but the few that need no context answers
 * CUDA_ERROR_NOT_INITIALIZED.  Set by the atfork handler, checked in
 * emu_entry (one load on the hot path). */
static int forked_after_init;
static void after_fork_child(void)
{
    if (emu_driver_initialized()) __atomic_store_n(&forked_after_init, 1, __ATOMIC_RELAXED);
}

static bool works_after_fork(const char *name)
{
    static const char *const ok[] = { "cuGetErrorString", "cuGetErrorName", "cuDriverGetVersion",
                                      "cuGetProcAddress", "cuGetProcAddress_v2", "cuGetExportTable" };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(ok[i], name)) return true;
    return false;
}

#define MAX_FAULT_RULES 32
struct fault_rule {
    char entry[96];
    uint64_t nth;        /* 0: probabilistic */
    double p;
    int err;
    uint64_t seen;       /* matching calls since the rule was set */
    uint64_t rng;
};
static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fault_rule fault_rules[MAX_FAULT_RULES];
static int n_fault_rules;   /* atomic reads on the hot path */

/* "cuMemAlloc" matches cuMemAlloc, cuMemAlloc_v2, cuMemAlloc_v2_ptds... */
static bool rule_matches(const char *rule, const char *entry)
{
    size_t n = strlen(rule);
    if (strncmp(rule, entry, n) != 0) return false;
    const char *rest = entry + n;
    if (!*rest) return true;
    if (rest[0] == '_' && rest[1] == 'v' && isdigit((unsigned char)rest[2])) {
        rest += 2;
        while (isdigit((unsigned char)*rest)) rest++;
    }
    return !*rest || !strcmp(rest, "_ptds") || !strcmp(rest, "_ptsz");
}

static __attribute__((noinline)) CUresult fault_check(const char *name)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&fault_mu);
    for (int i = 0; i < n_fault_rules && rc == CUDA_SUCCESS; i++) {
        struct fault_rule *r = &fault_rules[i];
        if (!rule_matches(r->entry, name)) continue;
        r->seen++;
        if (r->nth ? r->seen == r->nth
                   : (double)(splitmix(&r->rng) >> 11) / 9007199254740992.0 < r->p)
            rc = (CUresult)r->err;
    }
    pthread_mutex_unlock(&fault_mu);
    return rc;
}

/* The call site's slot, made by its first call (out of line: the hot path
 * saves no registers for it). */
static __attribute__((noinline)) struct emu_entry_slot *new_slot(struct emu_entry_slot **slotp,
                                                                 const char *name)
{
    emu_init();
    struct emu_entry_slot *fresh = malloc(sizeof *fresh);
    if (!fresh) return NULL;
    char cname[160];
    snprintf(cname, sizeof cname, "calls.%s", name);
    fresh->calls = counter_find(cname, true);
    fresh->col = fresh->calls ? entry_column(fresh->calls) : -1;
    fresh->name = name;
    fresh->works_after_fork = works_after_fork(name);
    struct emu_entry_slot *expect = NULL;
    if (__atomic_compare_exchange_n(slotp, &expect, fresh, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return fresh;
    free(fresh);
    return expect;
}

CUresult emu_entry(struct emu_entry_slot **slotp, const char *name)
{
    struct emu_entry_slot *slot = __atomic_load_n(slotp, __ATOMIC_ACQUIRE);
    if (__builtin_expect(!slot, 0) && !(slot = new_slot(slotp, name)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (__builtin_expect(slot->col >= 0, 1)) count_call(slot->calls, slot->col);
    else if (slot->calls) __atomic_fetch_add(&slot->calls->value, 1, __ATOMIC_RELAXED);
    if (__builtin_expect(__atomic_load_n(&forked_after_init, __ATOMIC_RELAXED), 0) &&
        !slot->works_after_fork)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (__builtin_expect(__atomic_load_n(&n_fault_rules, __ATOMIC_ACQUIRE) != 0, 0))
        return fault_check(name);
    return CUDA_SUCCESS;
}

int emuSetFault(const char *spec)
{
    emu_init();
    return set_fault_rules(spec);
}

static int set_fault_rules(const char *spec)
{
    if (!spec) return -1;
    struct fault_rule parsed[MAX_FAULT_RULES];
    int n = 0;
    char *copy = strdup(spec), *save = NULL;
    if (!copy) return -1;
    int bad = 0;
    for (char *item = strtok_r(copy, ",", &save); item && !bad; item = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*item)) item++;
        if (!*item) continue;
        char *c1 = strchr(item, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c1 || !c2 || c1 == item || n == MAX_FAULT_RULES || (size_t)(c1 - item) >= sizeof parsed[0].entry) {
            bad = 1;
            break;
        }
        struct fault_rule *r = &parsed[n];
        memset(r, 0, sizeof *r);
        memcpy(r->entry, item, (size_t)(c1 - item));
        *c2 = 0;
        char *end;
        if (c1[1] == 'p') {
            r->p = strtod(c1 + 2, &end);
            if (end == c1 + 2 || *end || r->p < 0 || r->p > 1) bad = 1;
        } else {
            long long v = strtoll(c1 + 1, &end, 10);
            if (end == c1 + 1 || *end || v < 1) bad = 1;
            r->nth = (uint64_t)v;
        }
        char *es = c2 + 1;
        size_t el = strlen(es);
        while (el && isspace((unsigned char)es[el - 1])) es[--el] = 0;
        r->err = parse_error(es);
        if (r->err <= 0) bad = 1;
        r->rng = emu_cfg.seed ^ (hash_name(r->entry) + (uint64_t)n);
        n++;
    }
    free(copy);
    if (bad) return -1;
    pthread_mutex_lock(&fault_mu);
    memcpy(fault_rules, parsed, sizeof parsed[0] * (size_t)n);
    __atomic_store_n(&n_fault_rules, n, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fault_mu);
    return 0;
}

/* --------------------------------------------------- init and versions */
static int driver_initialized;
bool emu_driver_initialized(void) { return __atomic_load_n(&driver_initialized, __ATOMIC_ACQUIRE); }

CUresult cuInit(unsigned int Flags)
{
    EMU_ENTRY(cuInit);
    if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    __atomic_store_n(&driver_initialized, 1, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    EMU_ENTRY(cuDriverGetVersion);
    if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = 13000;
    return CUDA_SUCCESS;
}
