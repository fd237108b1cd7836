/* fork without exec (the pthread_atfork handlers process.c installs, called
 * here directly through pthread_atfork):
 *  - a child of a process with an open log records nothing: not in the
 *    parent's log (even with the parent's unflushed records in its copy of
 *    the buffers, and while another parent thread logs), not in a file of its
 *    own, not at exit; and it does not deadlock;
 *  - a child of a process that never logged is a fresh process: its own log
 *    under its own pid. */
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include "core/core.h"
#include "log/log.h"
#include "../../tools/read/logread.c"

static int failures;
#define CHECK(c, ...)                                                                  \
    do {                                                                               \
        if (!(c)) {                                                                    \
            failures++;                                                                \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c);               \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)

#define CHILD_API 999
static _Atomic int stop;

static void *busy_logger(void *arg)
{
    (void)arg;
    uint64_t i = 0;
    while (!stop)
        ts_ev_alloc(7, 0, ++i, 1, 0, 0);
    return NULL;
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* Fork children that log; returns the number of children that failed. */
static int fork_children(int n)
{
    int bad = 0;
    for (int k = 0; k < n; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(10); /* a deadlock fails the test instead of hanging it */
            for (int i = 0; i < 3000; i++)
                ts_ev_alloc(CHILD_API, 0, (uint64_t)i, 1, 0, 0);
            ts_ev_error(CHILD_API, 1);
            ts_log_flush_signal_safe();
            ts_log_shutdown();
            exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        bad += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    return bad;
}

int main(void)
{
    pthread_atfork(ts_log_fork_prepare, ts_log_fork_parent, ts_log_fork_child);
    char dir[] = "/tmp/ts_log_fork.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char tmpl[300];
    snprintf(tmpl, sizeof tmpl, "%s/f.%%p.log", dir);
    setenv("TRAINSHIM_LOG", tmpl, 1);
    setenv("TRAINSHIM_LOG_BUFFER", "4096", 1);

    /* 1. never logged: the child is a fresh process with its own log */
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        ts_ev_alloc(CHILD_API, 0, 1, 1, 0, 0);
        ts_log_shutdown();
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fresh child status %d", status);
    char cpath[400];
    snprintf(cpath, sizeof cpath, "%s/f.%d.log", dir, (int)pid);
    struct tslog clog;
    CHECK(tslog_read_file(cpath, &clog) == 0 && clog.complete && clog.pid == pid &&
              clog.n_events == 1 && clog.events[0].api == CHILD_API,
          "fresh child's own log %s: %s", cpath, clog.error);
    tslog_free(&clog);
    unlink(cpath);

    /* 2. the parent logs (records left in its buffer), then forks while
     * another thread keeps logging */
    for (int i = 0; i < 100; i++)
        ts_ev_alloc(1, 0, (uint64_t)i, 1, 0, 0);
    pthread_t t;
    pthread_create(&t, NULL, busy_logger, NULL);
    int bad = fork_children(20);
    CHECK(bad == 0, "%d children failed (deadlock or crash)", bad);
    for (int i = 100; i < 200; i++)
        ts_ev_alloc(1, 0, (uint64_t)i, 1, 0, 0);
    stop = 1;
    pthread_join(t, NULL);
    ts_log_shutdown();

    CHECK(count_files(dir) == 1, "%d files in %s: a child wrote its own log", count_files(dir), dir);
    char path[400];
    snprintf(path, sizeof path, "%s/f.%d.log", dir, (int)getpid());
    struct tslog log;
    if (tslog_read_file(path, &log) != 0) {
        fprintf(stderr, "read %s: %s\n", path, log.error);
        return 1;
    }
    CHECK(log.complete && !log.note[0], "parent log: %s", log.note);
    CHECK(log.n_by_type[TS_REC_HEADER] == 1 && log.n_by_type[TS_REC_END] == 1, "one header, one end");
    uint64_t mine = 0, busy = 0, child = 0, next_busy = 1;
    for (size_t i = 0; i < log.n_events; i++) {
        const struct tslog_event *e = &log.events[i];
        if (e->api == CHILD_API)
            child++;
        else if (e->api == 1) {
            CHECK(e->ptr == mine, "parent event %llu where %llu was due", (unsigned long long)e->ptr,
                  (unsigned long long)mine);
            mine++;
        } else if (e->api == 7) {
            if (e->ptr != next_busy && failures < 5)
                CHECK(0, "busy thread event %llu where %llu was due", (unsigned long long)e->ptr,
                      (unsigned long long)next_busy);
            next_busy = e->ptr + 1;
            busy++;
        }
    }
    CHECK(child == 0, "%llu child events in the parent's log", (unsigned long long)child);
    CHECK(mine == 200, "parent events %llu", (unsigned long long)mine);
    CHECK(busy > 0 && log.n_events == 200 + busy, "events %zu", log.n_events);
    tslog_free(&log);
    unlink(path);
    rmdir(dir);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok: %llu events of the logging thread, none of 20 children\n", (unsigned long long)busy);
    return 0;
}
