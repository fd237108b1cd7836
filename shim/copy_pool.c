/* copy_pool.c: TRAINSHIM_COPY_THREADS helper threads that split the host
 * side of a staging chunk (one big memcpy) so staging is not limited to the
 * bandwidth of one core.
 *
 * A call cuts its memcpy into parts, queues all but the first, copies the
 * first itself, then helps with queued parts (its own or another caller's)
 * until its own are done: a caller never sleeps while work it waits for sits
 * in the queue, so no interleaving of callers can deadlock.  Helpers start on
 * first use; after fork() the child starts its own. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "config.h"
#include "copy_engine.h"
#include "core.h"

enum {
    POOL_MAX_THREADS = 16,
    QUEUE_SLOTS = 64,             /* power of two */
    SPLIT_MIN = 1 << 20,          /* below this, one memcpy is as fast */
    PART_MIN = 512 << 10,
};

struct job {
    atomic_int remaining;   /* queued parts not yet copied */
};

struct part {
    char *dst;
    const char *src;
    size_t n;
    struct job *job;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cond = PTHREAD_COND_INITIALIZER;  /* a part was queued */
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;  /* a part was finished */
static struct part queue[QUEUE_SLOTS];
static unsigned q_head, q_tail;   /* q_tail - q_head parts are queued */
static int threads_started;       /* -1: could not start, 0: not yet */
static int n_threads;

static bool pop_locked(struct part *out)
{
    if (q_head == q_tail) return false;
    *out = queue[q_head++ % QUEUE_SLOTS];
    return true;
}

static void run_part(const struct part *p)
{
    memcpy(p->dst, p->src, p->n);
    if (atomic_fetch_sub_explicit(&p->job->remaining, 1, memory_order_acq_rel) == 1) {
        pthread_mutex_lock(&pool_lock);
        pthread_cond_broadcast(&done_cond);
        pthread_mutex_unlock(&pool_lock);
    }
}

static void *helper_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct part p;
        pthread_mutex_lock(&pool_lock);
        while (!pop_locked(&p)) pthread_cond_wait(&work_cond, &pool_lock);
        pthread_mutex_unlock(&pool_lock);
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
    threads_started = 0;
    n_threads = 0;
}

/* Under pool_lock. */
static void start_helpers_locked(void)
{
    static bool atfork_done;
    uint64_t want = ts_cfg()->copy_threads;
    if (want > POOL_MAX_THREADS) want = POOL_MAX_THREADS;
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
        if (pthread_create(&t, &attr, helper_main, NULL) != 0) break;
        n_threads++;
    }
    pthread_attr_destroy(&attr);
    threads_started = n_threads > 0 ? 1 : -1;
}

void ts_copy_pool_memcpy(void *dst, const void *src, size_t n)
{
    if (n < SPLIT_MIN || ts_cfg()->copy_threads == 0) {
        memcpy(dst, src, n);
        return;
    }
    pthread_mutex_lock(&pool_lock);
    if (threads_started == 0) start_helpers_locked();
    int helpers = n_threads;
    pthread_mutex_unlock(&pool_lock);
    size_t parts = (size_t)helpers + 1;
    if (parts > n / PART_MIN) parts = n / PART_MIN;
    if (helpers <= 0 || parts < 2) {
        memcpy(dst, src, n);
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
        queue[q_tail++ % QUEUE_SLOTS] = (struct part){(char *)dst + off, (const char *)src + off, len, &job};
        off += len;
    }
    pthread_cond_broadcast(&work_cond);
    pthread_mutex_unlock(&pool_lock);
    /* What did not fit in the queue is the caller's too. */
    memcpy(dst, src, first);
    if (off < n) memcpy((char *)dst + off, (const char *)src + off, n - off);
    pthread_mutex_lock(&pool_lock);
    while (atomic_load_explicit(&job.remaining, memory_order_acquire) > 0) {
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
