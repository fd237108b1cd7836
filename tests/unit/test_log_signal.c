/* Crash paths, each in a child process with its own log:
 *  - a fatal signal whose handler calls ts_log_flush_signal_safe() (as
 *    shim/core/process.c does): every record made before the crash is in the
 *    log, which reads as incomplete (no end record), not corrupt;
 *  - kill -9 of an idle process: the writer thread's periodic flush has put
 *    every record on disk already. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "log/log.h"
#include "../../tools/read/logread.c"

#define EVENTS 1000

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

static void on_segv(int sig)
{
    ts_log_flush_signal_safe();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void log_events(void)
{
    for (int i = 0; i < EVENTS; i++)
        ts_ev_alloc(1, 0, (uint64_t)i, 64, 0, 0);
}

/* The log holds exactly events 0..EVENTS-1 in order and no end record. */
static void check_log(const char *path, const char *what)
{
    struct tslog log;
    if (tslog_read_file(path, &log) != 0) {
        CHECK(0, "%s: %s", what, log.error);
        return;
    }
    CHECK(!log.complete && !log.truncated && strstr(log.note, "incomplete"), "%s: status note '%s'", what,
          log.note);
    CHECK(log.n_events == EVENTS, "%s: %zu events", what, log.n_events);
    for (size_t i = 0; i < log.n_events; i++)
        if (log.events[i].ptr != i) {
            CHECK(0, "%s: event %zu is %llu", what, i, (unsigned long long)log.events[i].ptr);
            break;
        }
    tslog_free(&log);
}

static size_t events_in(const char *path)
{
    struct tslog log;
    size_t n = 0;
    if (tslog_read_file(path, &log) == 0)
        n = log.n_events;
    tslog_free(&log);
    return n;
}

int main(void)
{
    char dir[] = "/tmp/ts_log_sig.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char path[300];

    /* fatal signal, flushed by the handler; big buffers so that nothing but
     * the handler writes the records (the writer's period is 200 ms) */
    snprintf(path, sizeof path, "%s/segv.log", dir);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TRAINSHIM_LOG", path, 1);
        setenv("TRAINSHIM_LOG_BUFFER", "1MiB", 1);
        signal(SIGSEGV, on_segv);
        log_events();
        raise(SIGSEGV); /* as a crash would: the handler runs on this thread */
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "child status %d", st);
    check_log(path, "SIGSEGV");

    /* kill -9 after the writer's periodic flush */
    snprintf(path, sizeof path, "%s/kill.log", dir);
    pid = fork();
    if (pid == 0) {
        setenv("TRAINSHIM_LOG", path, 1);
        setenv("TRAINSHIM_LOG_BUFFER", "1MiB", 1);
        log_events();
        for (;;)
            pause();
    }
    /* the records reach the disk within the flush period (more on a loaded machine) */
    for (int i = 0; i < 200 && events_in(path) < EVENTS; i++) {
        struct timespec d = {0, 50 * 1000000L};
        nanosleep(&d, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child status %d", st);
    check_log(path, "SIGKILL");

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup failed\n");
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
