/* The log's clock (shim/log/clock.c): records are timed with the CPU counter
 * and converted to CLOCK_MONOTONIC when written.  Several threads log with
 * sleeps in between (so the writer thread recalibrates many times during
 * the run, its early short periods and its steady one) and bursts without
 * any (so neighbouring records are nanoseconds apart), through small buffers
 * (handed over all the time) while the main thread keeps calling the
 * signal-safe flush (conversion on another thread).  Each event is
 * bracketed by CLOCK_MONOTONIC samples taken by the test; read back, each
 * thread's times must never decrease, and a copy record's time must lie
 * within its bracket give or take SLACK_NS.  Every other burst is of
 * allocation records, which share readings in runs (log.h,
 * ts_log_reserve_run): never late, early by at most one kernel clock tick,
 * and most of a burst's records a few ns apart (one reading). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log/clock.h"
#include "core/core.h"
#include "log/log.h"
#include "../../tools/read/logread.c"

#define THREADS 4
#define EVENTS 400
/* documented accuracy (docs/log-format.md): about a microsecond; the test
 * allows twice that */
#define SLACK_NS 2000

static int failures;
#define CHECK(c, ...)                                                                  \
    do {                                                                               \
        if (!(c)) {                                                                    \
            if (++failures < 20) {                                                     \
                fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c);           \
                fprintf(stderr, __VA_ARGS__);                                          \
                fputc('\n', stderr);                                                   \
            }                                                                          \
        }                                                                              \
    } while (0)

static uint64_t mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t before_ns[THREADS][EVENTS], after_ns[THREADS][EVENTS];
static int finished;

/* Event i of a thread: a copy record (its own reading) in even bursts of 8,
 * an allocation record (a run's) in odd ones. */
static bool in_run(int i) { return (i / 8) % 2 == 1; }

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned seed = 1234u + (unsigned)id;
    for (int i = 0; i < EVENTS; i++) {
        before_ns[id][i] = mono();
        if (in_run(i))
            ts_ev_alloc(id, 0, (uint64_t)i, 1, 0, 0);
        else
            ts_ev_copy(id, 0, (uint64_t)i, 0, 0, false, 0, 0);
        after_ns[id][i] = mono();
        /* bursts of 8 back-to-back events, then a sleep of 0..40 ms: about
         * a second in all, the writer's first short calibration periods and
         * several of its steady ones */
        if (i % 8 == 7) {
            struct timespec d = {0, (long)(rand_r(&seed) % 40000000)};
            nanosleep(&d, NULL);
        }
    }
    __atomic_fetch_add(&finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

int main(void)
{
    char dir[] = "/tmp/ts_log_clock.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char path[300];
    snprintf(path, sizeof path, "%s/clock.log", dir);
    setenv("TRAINSHIM_LOG", path, 1);
    setenv("TRAINSHIM_LOG_BUFFER", "4096", 1);

    uint64_t open_before = mono();
    ts_ev_error(-1, 0); /* main thread opens the log (and starts the clock) */
    uint64_t open_after = mono();
    printf("clock source: %s\n", ts_clock_counter ? "CPU counter" : "CLOCK_MONOTONIC");

    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < THREADS) {
        ts_log_flush_signal_safe(); /* converts on this thread, racing the writer */
        usleep(1000);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    /* after the threads: the direct conversion agrees with the clock too */
    uint64_t a = mono(), now = ts_clock_now_ns(), b = mono();
    CHECK(now + SLACK_NS >= a && now <= b + SLACK_NS, "ts_clock_now_ns %llu outside [%llu, %llu]",
          (unsigned long long)now, (unsigned long long)a, (unsigned long long)b);
    ts_log_shutdown();

    struct tslog log;
    if (tslog_read_file(path, &log) != 0) {
        fprintf(stderr, "read: %s\n", log.error);
        return 1;
    }
    CHECK(log.complete && !log.note[0], "note: %s", log.note);
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    uint64_t tick_ns = (uint64_t)res.tv_sec * 1000000000ull + (uint64_t)res.tv_nsec;
    int next[THREADS] = {0};
    uint64_t last[THREADS] = {0};
    int64_t worst_early = 0, worst_late = 0, worst_run_early = 0;
    size_t errors = 0, run_pairs = 0, run_shared = 0;
    for (size_t i = 0; i < log.n_events; i++) {
        const struct tslog_event *e = &log.events[i];
        if (e->type == TS_REC_ERROR) {
            errors++;
            CHECK(e->time_ns + SLACK_NS >= open_before && e->time_ns <= open_after + SLACK_NS,
                  "first record at %llu outside [%llu, %llu]", (unsigned long long)e->time_ns,
                  (unsigned long long)open_before, (unsigned long long)open_after);
            continue;
        }
        int id = e->api;
        uint64_t seq64 = e->type == TS_REC_ALLOC ? e->ptr : e->bytes;
        if (id < 0 || id >= THREADS || seq64 >= EVENTS || in_run((int)seq64) != (e->type == TS_REC_ALLOC)) {
            CHECK(0, "bad event type %u api %d seq %llu", e->type, id, (unsigned long long)seq64);
            continue;
        }
        int seq = (int)seq64;
        CHECK(seq == next[id], "thread %d: event %d where %d was due", id, seq, next[id]);
        next[id] = seq + 1;
        uint64_t t = e->time_ns, lo = before_ns[id][seq], hi = after_ns[id][seq];
        CHECK(t >= last[id], "thread %d event %d: time %llu before the previous %llu", id, seq,
              (unsigned long long)t, (unsigned long long)last[id]);
        if (in_run(seq)) {
            CHECK(t <= hi + SLACK_NS && t + tick_ns + SLACK_NS >= lo,
                  "thread %d allocation %d: time %llu outside [%llu - one tick, %llu]", id, seq,
                  (unsigned long long)t, (unsigned long long)lo, (unsigned long long)hi);
            if ((int64_t)(lo - t) > worst_run_early)
                worst_run_early = (int64_t)(lo - t);
            if (seq % 8) { /* within a burst: the test's two clock reads apart, or one reading */
                run_pairs++;
                run_shared += t - last[id] < 10;
            }
            last[id] = t;
            continue;
        }
        last[id] = t;
        CHECK(t + SLACK_NS >= lo && t <= hi + SLACK_NS,
              "thread %d event %d: time %llu outside [%llu, %llu] (%+lld ns, %+lld ns)", id, seq,
              (unsigned long long)t, (unsigned long long)lo, (unsigned long long)hi,
              (long long)(t - lo), (long long)(t - hi));
        if ((int64_t)(lo - t) > worst_early)
            worst_early = (int64_t)(lo - t);
        if ((int64_t)(t - hi) > worst_late)
            worst_late = (int64_t)(t - hi);
    }
    CHECK(errors == 1, "errors %zu", errors);
    for (int i = 0; i < THREADS; i++)
        CHECK(next[i] == EVENTS, "thread %d: %d events, want %d", i, next[i], EVENTS);
    /* a burst's allocations share their run's reading (a burst may cross a tick) */
    CHECK(!ts_clock_ticks || run_shared * 2 > run_pairs, "%zu of %zu allocations in bursts shared a reading",
          run_shared, run_pairs);
    printf("%zu events from %d threads over %.2f s; worst: %lld ns before its bracket, %lld ns after; "
           "allocations: %zu of %zu in bursts shared a reading, worst %lld ns early (tick %llu ns)\n",
           log.n_events, THREADS, (double)(log.last_time_ns - log.first_time_ns) / 1e9,
           (long long)worst_early, (long long)worst_late, run_shared, run_pairs, (long long)worst_run_early,
           (unsigned long long)tick_ns);
    tslog_free(&log);
    unlink(path);
    rmdir(dir);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
