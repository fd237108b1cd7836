/* Many threads log concurrently through small buffers (so buffers are handed
 * over all the time) while the main thread keeps calling the signal-safe
 * flush: every event arrives exactly once, each thread's events in its own
 * order, and threads that exit hand over their partly filled buffers.  The
 * same again (this program re-executed) with TRAINSHIM_LOG_BUFFER at its
 * largest, where one thread's buffer is the whole total that extra buffers
 * are held to: every thread still gets its own, in time. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "log/log.h"
#include "../../tools/read/logread.c"

#define THREADS 12
#define EVENTS 20000

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


static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    /* uneven counts: thread id logs EVENTS + id events, the last ones partly
     * filling a buffer that the thread's exit must hand over */
    for (int i = 0; i < EVENTS + id; i++) {
        if (i % 3 == 2)
            ts_ev_copy(id, TS_D2H, (uint64_t)i, TS_HOST_PINNED, (uint64_t)id, true, 1, 0);
        else
            ts_ev_alloc(id, 0, (uint64_t)i, (uint64_t)id, 0, 0);
    }
    return NULL;
}

/* This program with TRAINSHIM_LOG_BUFFER=64MiB, in a minute at most (a
 * thread that found no buffer once waited 0.2 s at each of its records). */
static void largest_buffers(char **argv)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TEST_LOG_BUFFER", "64MiB", 1);
        alarm(60);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "fork");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "with 64 MiB buffers: %s %d",
          WIFSIGNALED(st) ? "killed by signal" : "exit status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *buffer = getenv("TEST_LOG_BUFFER");
    if (!buffer) {
        largest_buffers(argv);
        buffer = "4096";
    }
    char dir[] = "/tmp/ts_log_thr.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char path[300];
    snprintf(path, sizeof path, "%s/threads.log", dir);
    setenv("TRAINSHIM_LOG", path, 1);
    setenv("TRAINSHIM_LOG_BUFFER", buffer, 1);

    ts_ev_error(-1, 0); /* main thread opens the log */
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int k = 0; k < 2000; k++) {
        ts_log_flush_signal_safe(); /* races with the writer thread and the owners */
        usleep(50);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    ts_log_shutdown();

    struct tslog log;
    if (tslog_read_file(path, &log) != 0) {
        fprintf(stderr, "read: %s\n", log.error);
        return 1;
    }
    CHECK(log.complete && !log.note[0], "note: %s", log.note);
    uint64_t next[THREADS] = {0};
    uint32_t tid[THREADS] = {0};
    size_t errors = 0;
    for (size_t i = 0; i < log.n_events; i++) {
        const struct tslog_event *e = &log.events[i];
        if (e->type == TS_REC_ERROR) {
            errors++;
            continue;
        }
        int id = e->api;
        if (id < 0 || id >= THREADS) {
            CHECK(0, "bad api %d", id);
            continue;
        }
        uint64_t seq = e->type == TS_REC_ALLOC ? e->ptr : e->bytes;
        CHECK(seq == next[id], "thread %d: event %llu where %llu was due", id, (unsigned long long)seq,
              (unsigned long long)next[id]);
        next[id] = seq + 1;
        CHECK(e->type == (seq % 3 == 2 ? TS_REC_COPY : TS_REC_ALLOC), "thread %d: type", id);
        if (!tid[id])
            tid[id] = e->tid;
        CHECK(tid[id] == e->tid, "thread %d: tid changes", id);
    }
    CHECK(errors == 1, "errors %zu", errors);
    for (int i = 0; i < THREADS; i++) {
        CHECK(next[i] == (uint64_t)(EVENTS + i), "thread %d: %llu events, want %d", i,
              (unsigned long long)next[i], EVENTS + i);
        for (int j = 0; j < i; j++)
            CHECK(tid[i] != tid[j], "threads %d and %d share tid", i, j);
    }
    CHECK(log.end_records_dropped == 0, "dropped %llu", (unsigned long long)log.end_records_dropped);
    printf("%zu events from %d threads, TRAINSHIM_LOG_BUFFER=%s\n", log.n_events, THREADS, buffer);
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
