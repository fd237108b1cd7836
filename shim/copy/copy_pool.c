/* copy_pool.c: helper threads that split the host side of a staging piece
 * (one big memcpy) so staging is not limited to the bandwidth of one core.
 *
 * A call cuts its memcpy into parts, queues all but the first, copies the
 * first itself, then helps with queued parts (its own or another caller's)
 * until its own are done: a caller never sleeps while work it waits for sits
 * in the queue, so no interleaving of callers can deadlock.  Helpers start on
 * first use: TRAINSHIM_COPY_THREADS of them, at most one fewer than the CPUs
 * the process may run on (the caller copies too); after fork() the child
 * starts its own.
 *
 * The pieces of one copy come tens to hundreds of microseconds apart, about
 * what waking a thread blocked on a condition variable costs (more on a
 * loaded machine).  So a helper that ran out of parts, and a caller waiting
 * for its last parts, first spin for up to SPIN_NS before they sleep: back to
 * back pieces then find the helpers awake.  A helper whose last wait for work
 * was longer than SPIN_NS (slow pieces: a slow link, or no copy at all) spins
 * only SPIN_IDLE_NS next time, so an idle or slow pool does not keep CPUs
 * busy that the program could use.  Nobody spins unless the process may use
 * at least two CPUs beyond the caller and the helpers: with fewer, a
 * spinning caller holds the very CPU its sleeping helper needs (and the
 * driver's own threads need one). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/config.h"
#include "copy/copy_engine.h"
#include "core/core.h"

enum {
    POOL_MAX_THREADS = TS_COPY_THREADS_MAX,
    QUEUE_SLOTS = 64,      /* power of two */
    SPLIT_MIN = 512 << 10, /* below this, one memcpy is as fast */
    PART_MIN = 256 << 10,
    SPIN_NS = 200000,
    SPIN_IDLE_NS = 5000,
};

struct job {
    atomic_uint remaining; /* queued parts not yet copied */
};

struct part {
    char *dst;
    const char *src;
    size_t n;
    struct job *job;
    bool stream_dst; /* non-temporal stores (ts_copy_pool_memcpy_out) */
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cond = PTHREAD_COND_INITIALIZER; /* a part was queued */
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER; /* a part was finished */
static struct part queue[QUEUE_SLOTS];
static unsigned q_head, q_tail; /* q_tail - q_head parts are queued */
static atomic_uint n_queued;    /* the same, read by spinning threads without the lock */
static int threads_started;     /* -1: could not start, 0: not yet */
static int n_threads;
static bool spin_ok; /* CPUs to spare for spinning (see above) */

static bool pop_locked(struct part *out)
{
    if (q_head == q_tail)
        return false;
    *out = queue[q_head++ % QUEUE_SLOTS];
    atomic_fetch_sub_explicit(&n_queued, 1, memory_order_relaxed);
    return true;
}

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spins until *v is zero (want_zero) or non-zero, at most limit_ns; true if
 * it got there. */
static bool spin_until(atomic_uint *v, bool want_zero, uint64_t limit_ns)
{
    if (!__atomic_load_n(&spin_ok, __ATOMIC_RELAXED))
        limit_ns = 0;
    uint64_t deadline = 0;
    for (unsigned i = 0;; i++) {
        if ((atomic_load_explicit(v, memory_order_acquire) == 0) == want_zero)
            return true;
        if ((i & 63) == 0) {
            uint64_t now = mono_ns();
            if (!deadline)
                deadline = now + limit_ns;
            else if (now >= deadline)
                return false;
        }
        cpu_relax();
    }
}

/* memcpy with non-temporal stores to dst: a big destination the copy will
 * not read again soon (a D2H copy-out) skips the read-for-ownership of every
 * line and does not evict the staging chunk and the program's working set;
 * glibc's memcpy streams only above a threshold near the cache size, far
 * above a chunk.  Measured here: 2 MiB chunks into a large buffer 5.5-6.3
 * GB/s with memcpy, 7.1-7.6 streamed (one 256 MiB memcpy: 7.8). */
static void copy_streaming(char *dst, const char *src, size_t n)
{
#ifdef __SSE2__
    size_t head = (size_t)(-(uintptr_t)dst & 63);
    if (n < 4096 || head >= n) {
        memcpy(dst, src, n);
        return;
    }
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    size_t body = n & ~(size_t)63;
    for (size_t i = 0; i < body; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(src + i)),
                b = _mm_loadu_si128((const __m128i *)(src + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32)),
                d = _mm_loadu_si128((const __m128i *)(src + i + 48));
        _mm_stream_si128((__m128i *)(dst + i), a);
        _mm_stream_si128((__m128i *)(dst + i + 16), b);
        _mm_stream_si128((__m128i *)(dst + i + 32), c);
        _mm_stream_si128((__m128i *)(dst + i + 48), d);
    }
    _mm_sfence(); /* streamed stores are weakly ordered: visible before we report the part done */
    memcpy(dst + body, src + body, n - body);
#else
    memcpy(dst, src, n);
#endif
}

static void copy_part(const struct part *p)
{
    if (p->stream_dst)
        copy_streaming(p->dst, p->src, p->n);
    else
        memcpy(p->dst, p->src, p->n);
}

static void run_part(const struct part *p)
{
    copy_part(p);
    if (atomic_fetch_sub_explicit(&p->job->remaining, 1, memory_order_acq_rel) == 1) {
        pthread_mutex_lock(&pool_lock);
        pthread_cond_broadcast(&done_cond);
        pthread_mutex_unlock(&pool_lock);
    }
}

static void *helper_main(void *arg)
{
    (void)arg;
    uint64_t spin_ns = SPIN_NS;
    for (;;) {
        struct part p;
        uint64_t t0 = mono_ns();
        spin_until(&n_queued, false, spin_ns);
        pthread_mutex_lock(&pool_lock);
        while (!pop_locked(&p))
            pthread_cond_wait(&work_cond, &pool_lock);
        pthread_mutex_unlock(&pool_lock);
        spin_ns = mono_ns() - t0 <= SPIN_NS ? SPIN_NS : SPIN_IDLE_NS;
        run_part(&p);
    }
    return NULL;
}

static void after_fork_child(void)
{
    /* The helpers did not survive the fork; whatever they were doing belonged
     * to the parent's callers. */
    pthread_mutex_init(&pool_lock, NULL);
    pthread_cond_init(&work_cond, NULL);
    pthread_cond_init(&done_cond, NULL);
    q_head = q_tail = 0;
    atomic_store(&n_queued, 0);
    threads_started = 0;
    n_threads = 0;
}

/* Under pool_lock. */
static void start_helpers_locked(void)
{
    static bool atfork_done;
    uint64_t want = ts_cfg()->copy_threads;
    if (want > POOL_MAX_THREADS)
        want = POOL_MAX_THREADS;
    /* A memcpy split over more threads than CPUs only adds switches: the
     * caller is one of them.  The CPUs are those this process may use (a
     * launcher that binds each rank to some cores gets helpers to match). */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) >= 1)
        cpus = CPU_COUNT(&allowed);
    if (cpus >= 1 && want > (uint64_t)(cpus - 1))
        want = (uint64_t)(cpus - 1);
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, after_fork_child);
        atfork_done = true;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 << 10);
    for (uint64_t i = 0; i < want; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, helper_main, NULL) != 0)
            break;
        n_threads++;
    }
    pthread_attr_destroy(&attr);
    __atomic_store_n(&spin_ok, cpus >= (long)n_threads + 3, __ATOMIC_RELAXED);
    threads_started = n_threads > 0 ? 1 : -1;
}

/* Copies queued parts (any caller's) until job's parts are all done; spins
 * briefly for the helpers' last parts before sleeping. */
static void help_until_done(struct job *job)
{
    for (;;) {
        struct part p;
        pthread_mutex_lock(&pool_lock);
        bool got = pop_locked(&p);
        pthread_mutex_unlock(&pool_lock);
        if (got)
            run_part(&p);
        else if (spin_until(&job->remaining, true, SPIN_NS))
            return;
        else
            break;
    }
    pthread_mutex_lock(&pool_lock);
    while (atomic_load_explicit(&job->remaining, memory_order_acquire) > 0) {
        struct part p;
        if (pop_locked(&p)) {
            pthread_mutex_unlock(&pool_lock);
            run_part(&p);
            pthread_mutex_lock(&pool_lock);
        } else {
            pthread_cond_wait(&done_cond, &pool_lock);
        }
    }
    pthread_mutex_unlock(&pool_lock);
}

static void pool_copy(void *dst, const void *src, size_t n, bool stream_dst)
{
    struct part whole = { dst, src, n, NULL, stream_dst };
    if (n < SPLIT_MIN || ts_cfg()->copy_threads == 0) {
        copy_part(&whole);
        return;
    }
    pthread_mutex_lock(&pool_lock);
    if (threads_started == 0)
        start_helpers_locked();
    int helpers = n_threads;
    pthread_mutex_unlock(&pool_lock);
    size_t parts = (size_t)helpers + 1;
    if (parts > n / PART_MIN)
        parts = n / PART_MIN;
    if (helpers <= 0 || parts < 2) {
        copy_part(&whole);
        return;
    }
    /* Parts are cache-line multiples so helpers never share a line. */
    size_t part = (n / parts + 63) & ~(size_t)63;
    struct job job;
    atomic_init(&job.remaining, 0);
    size_t first = part, off = part;
    pthread_mutex_lock(&pool_lock);
    while (off < n && q_tail - q_head < QUEUE_SLOTS) {
        size_t len = n - off < part ? n - off : part;
        atomic_fetch_add_explicit(&job.remaining, 1, memory_order_relaxed);
        queue[q_tail++ % QUEUE_SLOTS] =
            (struct part){ (char *)dst + off, (const char *)src + off, len, &job, stream_dst };
        atomic_fetch_add_explicit(&n_queued, 1, memory_order_relaxed);
        off += len;
    }
    pthread_cond_broadcast(&work_cond);
    pthread_mutex_unlock(&pool_lock);
    /* What did not fit in the queue is the caller's too. */
    copy_part(&(struct part){ dst, src, first, NULL, stream_dst });
    if (off < n)
        copy_part(&(struct part){ (char *)dst + off, (const char *)src + off, n - off, NULL, stream_dst });
    help_until_done(&job);
}

void ts_copy_pool_memcpy(void *dst, const void *src, size_t n) { pool_copy(dst, src, n, false); }
void ts_copy_pool_memcpy_out(void *dst, const void *src, size_t n) { pool_copy(dst, src, n, true); }
