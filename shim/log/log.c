/* log.c: the event log writer.
 *
 * Each logging thread owns a buffer (TRAINSHIM_LOG_BUFFER bytes) and appends
 * whole records to it with no lock, syscall or malloc: it writes the bytes,
 * then publishes them by a release store of `committed`.  A background writer
 * thread write(2)s the committed ranges of every buffer (full ones at once,
 * partly filled ones every FLUSH_PERIOD_MS so a killed process loses little),
 * and recycles full ones.  Whoever writes a range first claims the buffer
 * (`busy`, a CAS), so the writer thread, the async-signal-safe flush and the
 * final shutdown flush never write the same bytes twice.  Buffers are never
 * freed while the process lives: they sit in a push-only list that a signal
 * handler may walk.
 *
 * The file is created by the first record (so a process that never logs
 * writes nothing) and starts with the preamble, the header record and the API
 * name table, written before any buffer can be flushed.  Because only whole
 * records are ever written, a log cut anywhere reads up to its last complete
 * record. */
#include "log/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log/clock.h"
#include "log/logcap.h"
#include "core/config.h"
#include "core/core.h"

#define FLUSH_PERIOD_MS 200
#define BUF_MIN TS_LOG_BUFFER_MIN
#define BUF_MAX TS_LOG_BUFFER_MAX
/* Buffers beyond the per-thread ones exist only while the writer thread lags;
 * past this total an owner writes its own full buffer synchronously.  A
 * thread's first buffer is not held to it (at TRAINSHIM_LOG_BUFFER's
 * largest, one buffer is the whole total), only to BUF_COUNT_MAX. */
#define BUF_TOTAL_MAX_BYTES (64ull << 20)
#define BUF_COUNT_MAX 4096

enum log_state { ST_NEW, ST_OPEN, ST_OFF, ST_CLOSING, ST_CLOSED, ST_CHILD };
_Static_assert(ST_OPEN == TS_LOG_OPEN, "log.h's inline reserve");
enum buf_state { BUF_OWNED, BUF_FULL, BUF_FREE };

/* struct ts_log_buf: log.h (the fast path is inline there) */
_Atomic int ts_log_state = ST_NEW;
static pthread_mutex_t g_open_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_fd = -1;
static char g_path[PATH_MAX];
static uint32_t g_buf_cap;
static _Atomic(struct ts_log_buf *) g_bufs;
static _Atomic int g_nbufs;
static _Atomic uint64_t g_buf_bytes;
static _Atomic uint64_t g_written; /* records written to the file */
static _Atomic uint64_t g_dropped; /* events that could not be logged */
static _Atomic int g_inflight;     /* direct writers between check and write */
static _Atomic int g_write_failed;
static _Atomic int g_write_errno;     /* why the first failed write failed */
static _Atomic int g_failure_told;    /* the run-time warning was printed */
static _Atomic uint64_t g_lost;       /* records never written after a failed write */
static _Atomic uint64_t g_file_bytes; /* bytes of whole records in the file */
static _Atomic int g_fallocate = 1;   /* 0: the file system has no fallocate */
static _Atomic int g_writing_end;     /* the end record goes into the room kept for it */
static uint64_t g_file_limit;         /* RLIMIT_FSIZE at open (UINT64_MAX: none) */
static sem_t g_wake;
static pthread_t g_writer;
static bool g_writer_running;
static _Atomic int g_writer_stop;
static pthread_key_t g_key;
static bool g_key_made;
static struct ts_rec_hdr *g_api_rec; /* API names waiting for the header (under g_open_mu) */

/* initial-exec: no __tls_get_addr call on the fast path of the preloaded library */
__thread struct ts_log_buf *ts_log_tls_buf __attribute__((tls_model("initial-exec")));
__thread struct ts_log_run ts_log_tls_run __attribute__((tls_model("initial-exec")));
static __thread uint32_t tls_tid __attribute__((tls_model("initial-exec")));
static __thread bool tls_opening;
static __thread bool tls_in_signal; /* inside the signal-time flush */
/* A thread that found no buffer after waiting drops its records (counted)
 * without waiting again until this CLOCK_MONOTONIC time. */
static __thread uint64_t tls_starved_until;

/* ------------------------------------------------------------ small helpers */
static inline uint32_t my_tid(void)
{
    if (ts_unlikely(!tls_tid))
        tls_tid = (uint32_t)syscall(SYS_gettid);
    return tls_tid;
}

/* Room kept allocated past the end of the file (fallocate, KEEP_SIZE) so
 * that the end record, with its count of lost records, still fits when the
 * disk fills. */
#define TAIL_RESERVE 4096u

static void write_failed(int err)
{
    int z = 0;
    if (atomic_compare_exchange_strong(&g_write_failed, &z, 1))
        atomic_store(&g_write_errno, err);
}

/* Before appending n bytes: the blocks for them and for the tail reserve
 * must be allocatable.  A file system without fallocate just writes. */
static bool room_for(int fd, size_t n)
{
    if (atomic_load(&g_writing_end))
        return true;
    uint64_t end = atomic_load(&g_file_bytes);
    if (end + n + TAIL_RESERVE > g_file_limit) {
        write_failed(EFBIG);
        return false;
    }
    if (!atomic_load(&g_fallocate))
        return true;
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)end, (off_t)(n + TAIL_RESERVE)) == 0)
        return true;
    if (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL) {
        atomic_store(&g_fallocate, 0);
        return true;
    }
    write_failed(errno);
    return false;
}

/* write(2) all of it; async-signal-safe.  After a failure nothing more is
 * written, and a partly written record is cut off again, so the file never
 * holds a hole or a record after a partial one. */
static bool write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    size_t left = n;
    if (atomic_load(&g_write_failed) || !room_for(fd, n))
        return false;
    while (left) {
        ssize_t w = write(fd, c, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            write_failed(w < 0 ? errno : ENOSPC);
            if (left < n && ftruncate(fd, (off_t)atomic_load(&g_file_bytes)) != 0) {
                /* nothing more to do: a reader stops at the partial record */
            }
            return false;
        }
        c += w;
        left -= (size_t)w;
    }
    atomic_fetch_add(&g_file_bytes, n);
    return true;
}

/* The one run-time warning about a log that stopped growing; from a normal
 * thread, never from the signal-time flush. */
static void tell_write_failure(void)
{
    int z = 0;
    if (atomic_load(&g_write_failed) && atomic_compare_exchange_strong(&g_failure_told, &z, 1))
        ts_warn("cannot write event log '%s': %s; later events are counted as dropped, not logged", g_path,
                strerror(atomic_load(&g_write_errno)));
}

/* Convert the times of every record in a committed range about to be
 * written from clock readings (shim/log/clock.h) to CLOCK_MONOTONIC ns, set
 * their checks, and count them.  Done here, by whoever writes the range
 * (writer thread, owner, exit or signal flush: arithmetic only), not on the
 * logging thread's fast path: the bytes are committed and never change
 * again, and nothing reads them before they are written.  An ALLOC_STACK
 * record carries its ALLOC record's time in its body (shim/log/stacks.c copies
 * the reading): converted the same way, the two stay equal. */
static uint64_t seal_records(char *p, uint32_t n)
{
    uint64_t k = 0;
    for (uint32_t off = 0; off + sizeof(struct ts_rec_hdr) <= n;) {
        struct ts_rec_hdr *h = (struct ts_rec_hdr *)(p + off);
        if (h->len < sizeof *h || h->len > n - off)
            break; /* cannot happen: only whole records are committed */
        h->time_ns = ts_clock_to_ns(h->time_ns);
        if (h->type == TS_REC_ALLOC_STACK && h->len >= sizeof(struct ts_rec_alloc_stack)) {
            struct ts_rec_alloc_stack *s = (struct ts_rec_alloc_stack *)h;
            s->alloc_time_ns = ts_clock_to_ns(s->alloc_time_ns);
        }
        h->check = ts_rec_check(h, h->len);
        off += h->len;
        k++;
    }
    return k;
}

/* ------------------------------------------------------------ path template */
/* The first of the variables that holds a whole number (the options' own
 * parser, ts_parse_count) up to INT_MAX; -1 if none does. */
static int env_int(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        uint64_t x;
        if (v && !ts_parse_count(v, &x) && x <= INT_MAX)
            return (int)x;
    }
    return -1;
}

/* The innermost launcher wins: torchrun's RANK, then the MPI launchers'
 * variables, and Slurm's last, because mpirun or torchrun started inside an
 * srun step or batch script inherit its SLURM_PROCID (the same for every rank
 * they start). */
int ts_log_env_rank(void)
{
    static const char *const v[] = { "RANK",     "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                     "PMI_RANK", "SLURM_PROCID",         NULL };
    return env_int(v);
}

int ts_log_env_local_rank(void)
{
    static const char *const v[] = { "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                     "SLURM_LOCALID", NULL };
    return env_int(v);
}

int ts_log_env_world_size(void)
{
    static const char *const v[] = { "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", NULL };
    return env_int(v);
}

#define DEFAULT_TEMPLATE "trainshim.%h.%p.log"
#define DEFAULT_TEMPLATE_RANKED "trainshim.%h.%p.r%r.log"

int ts_log_expand_path(const char *tmpl, char *out, size_t n)
{
    size_t o = 0;
    char num[32], host[256];
    int rank = ts_log_env_rank();
    if (!strcmp(tmpl, DEFAULT_TEMPLATE) && rank >= 0)
        tmpl = DEFAULT_TEMPLATE_RANKED;
    if (!n)
        return -1;
    for (const char *t = tmpl; *t; t++) {
        const char *ins = NULL;
        size_t inslen = 0;
        char lit[2] = { *t, 0 };
        if (*t != '%') {
            ins = lit;
        } else {
            switch (t[1]) {
            case 'p':
                snprintf(num, sizeof num, "%d", (int)getpid());
                ins = num;
                t++;
                break;
            case 'r':
                snprintf(num, sizeof num, "%d", rank < 0 ? 0 : rank);
                ins = num;
                t++;
                break;
            case 'l': {
                int l = ts_log_env_local_rank();
                snprintf(num, sizeof num, "%d", l < 0 ? 0 : l);
                ins = num;
                t++;
                break;
            }
            case 'h':
                if (gethostname(host, sizeof host) != 0)
                    strcpy(host, "unknown");
                host[sizeof host - 1] = 0;
                ins = host;
                t++;
                break;
            case '%':
                ins = "%";
                t++;
                break;
            case 'q': {
                const char *close = t[2] == '{' ? strchr(t + 3, '}') : NULL;
                if (close && close - (t + 3) < 256) {
                    char var[256];
                    memcpy(var, t + 3, (size_t)(close - (t + 3)));
                    var[close - (t + 3)] = 0;
                    ins = getenv(var);
                    if (!ins)
                        ins = "";
                    t = close;
                } else {
                    ins = lit; /* malformed: kept literally */
                }
                break;
            }
            default: ins = lit; break; /* unknown escape or trailing %: literal */
            }
        }
        inslen = strlen(ins);
        if (o + inslen >= n)
            return -1;
        memcpy(out + o, ins, inslen);
        o += inslen;
    }
    out[o] = 0;
    return o ? 0 : -1;
}

static void make_parents(char *path)
{
    for (char *s = path + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        (void)mkdir(path, 0777); /* EEXIST is fine; the open reports real problems */
        *s = '/';
    }
}

int ts_log_create_file(const char *path, char *used, size_t n)
{
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_APPEND;
    char cand[PATH_MAX];
    if (strlen(path) >= sizeof cand) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(cand, path);
    make_parents(cand);
    int fd = open(cand, flags, 0644);
    if (fd < 0 && (errno == EEXIST || errno == ELOOP)) {
        /* never clobber: "<stem>.<k><ext>" where ext is the last component's
         * extension, e.g. run.log -> run.1.log */
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        const char *dot = strrchr(base, '.');
        if (!dot || dot == base)
            dot = path + strlen(path);
        size_t stem = (size_t)(dot - path);
        for (int k = 1; k < 10000 && fd < 0 && (errno == EEXIST || errno == ELOOP); k++) {
            int w = snprintf(cand, sizeof cand, "%.*s.%d%s", (int)stem, path, k, dot);
            if (w < 0 || (size_t)w >= sizeof cand) {
                errno = ENAMETOOLONG;
                break;
            }
            fd = open(cand, flags, 0644);
        }
    }
    if (fd >= 0 && used && n) {
        snprintf(used, n, "%s", cand);
    }
    return fd;
}

const char *ts_log_path(void) { return g_path; }

/* ------------------------------------------------------------ buffers */
/* Write the committed, unwritten records of b (claimed by the caller) and
 * recycle it when its owner handed it over.  Returns false when it must wait
 * for its predecessor. */
static bool flush_claimed(struct ts_log_buf *b, bool recycle)
{
    /* state before committed: a buffer seen FULL has all its records committed */
    int st = atomic_load_explicit(&b->state, memory_order_acquire);
    uint32_t c = atomic_load_explicit(&b->committed, memory_order_acquire);
    if (c > b->flushed) {
        /* pred was set before the first commit, which we have acquired */
        if (b->pred) {
            if (atomic_load(&b->pred->done_gen) <= b->pred_gen)
                return false;
            b->pred = NULL;
        }
        uint64_t k = seal_records(b->data + b->flushed, c - b->flushed);
        uint32_t n = c - b->flushed;
        if (ts_logcap_enabled() && !tls_in_signal)
            n = ts_logcap_filter(b->data + b->flushed, n, atomic_load(&g_file_bytes), &k);
        if (g_fd >= 0 && write_all(g_fd, b->data + b->flushed, n))
            atomic_fetch_add(&g_written, k);
        else
            atomic_fetch_add(&g_lost, k);
        b->flushed = c;
    }
    if (st == BUF_FULL)
        atomic_store(&b->done_gen, atomic_load(&b->gen) + 1);
    if (recycle && st == BUF_FULL) {
        b->flushed = 0;
        b->used = 0;
        b->pred = NULL;
        atomic_store_explicit(&b->committed, 0, memory_order_relaxed);
        atomic_fetch_add(&b->gen, 1);
        atomic_store_explicit(&b->state, BUF_FREE, memory_order_release);
    }
    return true;
}

static bool try_claim(struct ts_log_buf *b)
{
    int z = 0;
    return atomic_compare_exchange_strong(&b->busy, &z, 1);
}

static void claim(struct ts_log_buf *b)
{
    while (!try_claim(b))
        sched_yield();
}

static void release(struct ts_log_buf *b) { atomic_store(&b->busy, 0); }

/* One pass over every buffer; returns how many had to wait for a
 * predecessor (0: everything committed before the pass is written). */
static int flush_pass(bool wait_for_claim, bool recycle)
{
    int waiting = 0;
    for (struct ts_log_buf *b = atomic_load(&g_bufs); b; b = b->next) {
        if (wait_for_claim)
            claim(b);
        else if (!try_claim(b))
            continue;
        waiting += !flush_claimed(b, recycle);
        release(b);
    }
    return waiting;
}

/* Passes until no buffer waits for its predecessor: a chain of n buffers
 * needs at most n passes. */
static void flush_all(bool wait_for_claim, bool recycle)
{
    int n = atomic_load(&g_nbufs) + 1;
    while (n-- > 0 && flush_pass(wait_for_claim, recycle))
        ;
}

/* Flushes every FLUSH_PERIOD_MS or when woken, and keeps the log's clock
 * calibrated (before flushing, so the records written are converted with
 * the newest calibration). */
static void *writer_main(void *arg)
{
    (void)arg;
    uint64_t cal_due = 0;
    while (!atomic_load(&g_writer_stop)) {
        uint64_t now = ts_clock_mono_ns();
        if (now >= cal_due) {
            cal_due = now + ts_clock_calibrate();
            now = ts_clock_mono_ns();
        }
        uint64_t wait = FLUSH_PERIOD_MS * 1000000ull;
        if (cal_due > now && cal_due - now < wait)
            wait = cal_due - now;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += (time_t)(wait / 1000000000ull);
        dl.tv_nsec += (long)(wait % 1000000000ull);
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        while (sem_timedwait(&g_wake, &dl) != 0 && errno == EINTR)
            ;
        if (ts_clock_mono_ns() >= cal_due)
            cal_due = ts_clock_mono_ns() + ts_clock_calibrate();
        flush_all(false, true);
        tell_write_failure();
    }
    return NULL;
}

static void thread_exit(void *p)
{
    struct ts_log_buf *b = p;
    if (ts_log_tls_buf == b)
        ts_log_tls_buf = NULL;
    if (atomic_load(&ts_log_state) == ST_CHILD)
        return;
    /* hand the buffer over: the writer flushes and recycles it */
    atomic_store_explicit(&b->state, BUF_FULL, memory_order_release);
    if (g_writer_running)
        sem_post(&g_wake);
}

/* A new buffer: a thread's first (first_of_thread), or one more while the
 * writer lags. */
static struct ts_log_buf *new_buffer(bool first_of_thread)
{
    uint64_t bytes = sizeof(struct ts_log_buf) + g_buf_cap;
    if (atomic_load(&g_nbufs) >= BUF_COUNT_MAX
        || (!first_of_thread && atomic_load(&g_buf_bytes) + bytes > BUF_TOTAL_MAX_BYTES))
        return NULL;
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    struct ts_log_buf *b = m;
    b->data = (char *)(b + 1);
    b->cap = g_buf_cap;
    atomic_init(&b->state, BUF_OWNED);
    atomic_fetch_add(&g_nbufs, 1);
    atomic_fetch_add(&g_buf_bytes, bytes);
    struct ts_log_buf *head = atomic_load(&g_bufs);
    do
        b->next = head;
    while (!atomic_compare_exchange_weak(&g_bufs, &head, b));
    return b;
}

static struct ts_log_buf *take_free_buffer(void)
{
    for (struct ts_log_buf *b = atomic_load(&g_bufs); b; b = b->next) {
        int f = BUF_FREE;
        if (atomic_load_explicit(&b->state, memory_order_relaxed) == BUF_FREE
            && atomic_compare_exchange_strong(&b->state, &f, BUF_OWNED))
            return b;
    }
    return NULL;
}

/* A thread's first buffer: a free one, a new one, or (past every limit)
 * one the writer recycles while it waits, once a second at most: not at
 * each of its records.  NULL: none. */
static struct ts_log_buf *first_buffer(void)
{
    struct ts_log_buf *b = take_free_buffer();
    if (!b)
        b = new_buffer(true);
    uint64_t now = b ? 0 : ts_clock_mono_ns();
    for (int i = 0; !b && i < 2000 && g_writer_running && now >= tls_starved_until; i++) {
        sem_post(&g_wake);
        struct timespec d = { 0, 50000 };
        nanosleep(&d, NULL);
        b = take_free_buffer();
    }
    if (b)
        b->pred = NULL;
    else if (now >= tls_starved_until)
        tls_starved_until = now + 1000000000ull;
    return b;
}

/* The calling thread needs room for len bytes: hand its full buffer over to
 * the writer thread and take a free (or new) one; when there is none (the
 * writer lags and the memory bound is reached) or no writer thread, write its
 * own buffer out and keep it. */
static struct ts_log_buf *refill(uint32_t len)
{
    struct ts_log_buf *b = ts_log_tls_buf;
    if (len > g_buf_cap)
        return NULL;
    if (b) {
        struct ts_log_buf *f = NULL;
        if (g_writer_running && !(f = take_free_buffer()))
            f = new_buffer(false);
        if (f) {
            f->pred = b;
            f->pred_gen = atomic_load(&b->gen);
            atomic_store_explicit(&b->state, BUF_FULL, memory_order_release);
            sem_post(&g_wake);
            b = f;
        } else {
            /* after its predecessor, which the writer thread is writing */
            for (;;) {
                claim(b);
                if (atomic_load(&ts_log_state) != ST_OPEN || flush_claimed(b, false))
                    break;
                release(b);
                sem_post(&g_wake);
                struct timespec d = { 0, 50000 };
                nanosleep(&d, NULL);
            }
            b->used = b->flushed = 0;
            atomic_store_explicit(&b->committed, 0, memory_order_release);
            release(b);
            return b;
        }
    } else {
        b = first_buffer();
    }
    ts_log_tls_buf = b;
    if (!b)
        return NULL;
    b->tid = my_tid();
    if (g_key_made)
        pthread_setspecific(g_key, b);
    return b;
}

/* ------------------------------------------------------------ open */
static bool write_seal(struct ts_rec_hdr *r)
{
    r->tid = my_tid();
    r->check = 0;
    r->check = ts_rec_check(r, r->len);
    if (!write_all(g_fd, r, r->len))
        return false;
    atomic_fetch_add(&g_written, 1);
    return true;
}

/* The start of the file: preamble, header record, API names if registered. */
static bool write_file_start(void)
{
    struct ts_log_preamble pre;
    memset(&pre, 0, sizeof pre);
    memcpy(pre.magic, TS_LOG_MAGIC, 8);
    pre.version_major = TS_LOG_VERSION_MAJOR;
    pre.version_minor = TS_LOG_VERSION_MINOR;
    pre.byte_order = TS_LOG_BYTE_ORDER;
    struct ts_rec_header *h = ts_ev_make_header();
    bool ok = h && write_all(g_fd, &pre, sizeof pre) && write_seal(&h->h);
    free(h);
    if (ok && g_api_rec) {
        g_api_rec->time_ns = ts_clock_now_ns();
        ok = write_seal(g_api_rec);
    }
    return ok;
}

/* A path naming something other than a file or nothing: /dev/null means
 * "no log" (no /dev/null.1 beside it), any other device, FIFO or socket is
 * refused, since a log is only readable as a whole regular file. */
static bool log_path_usable(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
        return true;
    struct stat null_st;
    if (S_ISCHR(st.st_mode) && stat("/dev/null", &null_st) == 0 && S_ISCHR(null_st.st_mode)
        && st.st_rdev == null_st.st_rdev)
        return false;
    ts_warn("event log path '%s' is a device, FIFO or socket, not a file; no event log", path);
    return false;
}

static void do_open(void)
{
    const struct ts_config *cfg = ts_cfg();
    const char *tmpl = cfg->log;
    if (!tmpl || !*tmpl || !strcmp(tmpl, "off") || !strcmp(tmpl, "none")) {
        atomic_store(&ts_log_state, ST_OFF);
        return;
    }
    uint64_t cap = cfg->log_buffer;
    cap = cap < BUF_MIN ? BUF_MIN : cap > BUF_MAX ? BUF_MAX : cap;
    g_buf_cap = (uint32_t)(cap & ~(uint64_t)(TS_REC_ALIGN - 1));
    ts_logcap_init(cfg->log_max);

    ts_clock_start(); /* before any record, the file's first included */
    char want[PATH_MAX];
    if (ts_log_expand_path(tmpl, want, sizeof want) != 0) {
        ts_warn("TRAINSHIM_LOG template '%s' expands to an empty or too long path; no event log", tmpl);
        atomic_store(&ts_log_state, ST_OFF);
        return;
    }
    if (!log_path_usable(want)) {
        atomic_store(&ts_log_state, ST_OFF);
        return;
    }
    struct rlimit fsize;
    g_file_limit = getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY
                       ? (uint64_t)fsize.rlim_cur
                       : UINT64_MAX;
    g_fd = ts_log_create_file(want, g_path, sizeof g_path);
    if (g_fd < 0) {
        ts_warn("cannot create event log '%s': %s; no event log", want, strerror(errno));
        g_path[0] = 0;
        atomic_store(&ts_log_state, ST_OFF);
        return;
    }
    if (strcmp(want, g_path))
        ts_warn("event log '%s' exists; writing '%s' instead", want, g_path);
    if (!write_file_start()) {
        ts_warn("cannot write event log '%s'; no event log", g_path);
        close(g_fd);
        g_fd = -1;
        atomic_store(&ts_log_state, ST_OFF);
        return;
    }
    free(g_api_rec);
    g_api_rec = NULL;
    if (!g_key_made)
        g_key_made = pthread_key_create(&g_key, thread_exit) == 0;

    /* the writer thread takes no signals: handlers run in the program's threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    g_writer_running =
        sem_init(&g_wake, 0, 0) == 0 && pthread_create(&g_writer, NULL, writer_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (g_writer_running)
        pthread_setname_np(g_writer, "trainshim-log");
    else
        ts_clock_counter =
            false; /* nobody would calibrate it: CLOCK_MONOTONIC (no reading taken yet is in a buffer) */
    atomic_store_explicit(&ts_log_state, ST_OPEN, memory_order_release);
}

/* shim/devmem/devmem_torch.c: logs torch's allocator backend as the shim
 * left it at load time, once the log exists (a program that logs nothing
 * gets no log for it). */
void ts_dev_log_torch_backend(void) __attribute__((weak));

static bool open_slow(void)
{
    int st = atomic_load_explicit(&ts_log_state, memory_order_acquire);
    if (st == ST_OPEN)
        return true;
    if (st != ST_NEW || tls_opening)
        return false;
    pthread_mutex_lock(&g_open_mu);
    bool opened = false;
    if (atomic_load(&ts_log_state) == ST_NEW) {
        tls_opening = true;
        do_open();
        tls_opening = false;
        opened = atomic_load(&ts_log_state) == ST_OPEN;
    }
    pthread_mutex_unlock(&g_open_mu);
    if (opened && ts_dev_log_torch_backend)
        ts_dev_log_torch_backend();
    return atomic_load(&ts_log_state) == ST_OPEN;
}

/* ------------------------------------------------------------ records */
/* Everything but an open log with room in the thread's buffer: out of line,
 * so the common case saves and restores no registers. */
struct ts_rec_hdr *ts_log_reserve_slow(uint32_t len, uint16_t type)
{
    /* only a log not yet opened can open: off, closed or a fork child's
     * answer at once (a log that cannot open is a run's every event) */
    int st = atomic_load_explicit(&ts_log_state, memory_order_acquire);
    if (st != ST_OPEN && (st != ST_NEW || !open_slow()))
        return NULL;
    struct ts_log_buf *b = ts_log_tls_buf;
    if (!b || b->used + len > b->cap) {
        b = refill(len);
        if (!b) {
            atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
            return NULL;
        }
    }
    return ts_log_fill_header(b, len, type, ts_clock_read());
}

int ts_log_write_record(struct ts_rec_hdr *rec)
{
    uint32_t len = rec->len;
    if (len < sizeof *rec || len % TS_REC_ALIGN)
        return -1;
    if (atomic_load_explicit(&ts_log_state, memory_order_acquire) != ST_OPEN && !open_slow())
        return -1;
    if (len <= g_buf_cap) {
        struct ts_rec_hdr *r = ts_log_reserve(len, rec->type);
        if (!r)
            return -1;
        memcpy(r + 1, rec + 1, len - sizeof *rec);
        r->flags = rec->flags;
        ts_log_commit(r);
        return 0;
    }
    /* longer than a buffer: straight to the file */
    rec->tid = my_tid();
    rec->time_ns = ts_clock_now_ns();
    rec->check = 0;
    rec->check = ts_rec_check(rec, len);
    int rc = -1;
    atomic_fetch_add(&g_inflight, 1);
    if (atomic_load(&ts_log_state) == ST_OPEN && write_all(g_fd, rec, len)) {
        atomic_fetch_add(&g_written, 1);
        rc = 0;
    } else {
        atomic_fetch_add(&g_lost, 1);
    }
    atomic_fetch_sub(&g_inflight, 1);
    return rc;
}

void ts_log_set_api_record(struct ts_rec_hdr *rec)
{
    pthread_mutex_lock(&g_open_mu);
    if (atomic_load(&ts_log_state) == ST_NEW) {
        free(g_api_rec); /* the latest table wins */
        g_api_rec = rec;
        rec = NULL;
    }
    pthread_mutex_unlock(&g_open_mu);
    if (rec) {
        if (atomic_load(&ts_log_state) == ST_OPEN)
            ts_log_write_record(rec);
        free(rec);
    }
}

/* ------------------------------------------------------------ life */
static void write_end_record(void);
static void write_site_totals(void);

void ts_log_shutdown(void)
{
    pthread_mutex_lock(&g_open_mu);
    int st = atomic_load(&ts_log_state);
    if (st != ST_OPEN) {
        if (st == ST_NEW)
            atomic_store(&ts_log_state, ST_CLOSED); /* nothing logged: no file, ever */
        pthread_mutex_unlock(&g_open_mu);
        return;
    }
    atomic_store(&ts_log_state, ST_CLOSING);
    if (g_writer_running) {
        atomic_store(&g_writer_stop, 1);
        sem_post(&g_wake);
        pthread_join(g_writer, NULL);
        g_writer_running = false;
    }
    for (int i = 0; atomic_load(&g_inflight) && i < 100000; i++)
        sched_yield();
    flush_all(true, true);
    write_site_totals();
    tell_write_failure();
    write_end_record();
    close(g_fd);
    g_fd = -1;
    atomic_store(&ts_log_state, ST_CLOSED);
    pthread_mutex_unlock(&g_open_mu);
}

/* Past the size cap: the totals of the folded events, before the end. */
static void write_site_totals(void)
{
    uint32_t len;
    uint64_t k;
    char *block = ts_logcap_final_records(&len, &k);
    if (!block)
        return;
    for (uint32_t off = 0; off < len;) {
        struct ts_rec_hdr *h = (struct ts_rec_hdr *)(block + off);
        h->tid = my_tid();
        h->time_ns = ts_clock_now_ns();
        h->check = 0;
        h->check = ts_rec_check(h, h->len);
        off += h->len;
    }
    if (write_all(g_fd, block, len))
        atomic_fetch_add(&g_written, k);
    else
        atomic_fetch_add(&g_lost, k);
    free(block);
}

/* The end record counts the events never logged: those the buffers could
 * not take and those a failed write lost.  After a failed write it goes
 * into the room kept past the end of the file. */
static void write_end_record(void)
{
    struct ts_rec_end e;
    memset(&e, 0, sizeof e);
    e.h.len = sizeof e;
    e.h.type = TS_REC_END;
    e.h.tid = my_tid();
    e.h.time_ns = ts_clock_now_ns();
    e.records_written = atomic_load(&g_written);
    e.records_dropped = atomic_load(&g_dropped) + atomic_load(&g_lost);
    e.h.check = ts_rec_check(&e, sizeof e);
    atomic_store(&g_write_failed, 0); /* the room kept is there for this record */
    atomic_store(&g_writing_end, 1);
    write_all(g_fd, &e, sizeof e);
}

void ts_log_flush_signal_safe(void)
{
    if (atomic_load(&ts_log_state) != ST_OPEN || g_fd < 0)
        return;
    /* no recycling: the interrupted code may be the owner of a buffer; a
     * buffer someone is writing right now is skipped.  The size cap's
     * filter takes a lock: past the cap these last records are written. */
    tls_in_signal = true;
    flush_all(false, false);
    tls_in_signal = false;
}

void ts_log_fork_prepare(void) { pthread_mutex_lock(&g_open_mu); }

void ts_log_fork_parent(void) { pthread_mutex_unlock(&g_open_mu); }

void ts_log_fork_child(void)
{
    /* Only the forking thread exists in the child, so no lock is held but
     * the one our prepare handler took. */
    pthread_mutex_init(&g_open_mu, NULL);
    tls_tid = 0;
    if (atomic_load(&ts_log_state) == ST_NEW)
        return; /* the parent never logged: the child is a fresh process with its own log */
    /* The parent has a log: the child records nothing.  Its buffers are
     * copies of the parent's, which the parent writes; its descriptor for the
     * parent's file is closed; every later event is dropped. */
    atomic_store(&ts_log_state, ST_CHILD);
    if (g_fd >= 0)
        close(g_fd);
    g_fd = -1;
    g_writer_running = false;
    ts_log_tls_buf = NULL;
}
