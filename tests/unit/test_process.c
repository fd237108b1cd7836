/* shim/core/process.c and shim/core/msg.c: the on/off state, TRAINSHIM=0, the fallback
 * to passthrough, exit and signal flushing, handler chaining, fork, and the
 * message format.  Each scenario runs in a fresh process (this program
 * re-executed with the scenario's name), with a stand-in for the event log
 * that reports every call on stdout as "<call> <pid>". */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config.h"
#include "core/core.h"

/* ---- the event log's process-life calls (shim/log/log.c), as a test double ---- */
static bool in_scenario; /* the driver's own forks are not reported */
static void note(const char *what)
{
    if (!in_scenario)
        return;
    char line[64];
    int n = snprintf(line, sizeof line, "%s %d\n", what, (int)getpid());
    if (write(1, line, (size_t)n) < 0)
        _exit(99);
}
void ts_log_shutdown(void) { note("shutdown"); }
void ts_log_flush_signal_safe(void) { note("flushsig"); }
void ts_log_fork_prepare(void) { note("prepare"); }
void ts_log_fork_parent(void) { note("parent"); }
void ts_log_fork_child(void) { note("child"); }

/* ---- handlers a program installed before the shim initialized ---- */
static void early_term(int sig)
{
    (void)sig;
    note("early-term");
    _exit(7);
}
static void early_segv(int sig)
{
    (void)sig;
    note("early-segv");
    _exit(9);
}
__attribute__((constructor(101))) static void before_shim(void)
{
    const char *m = getenv("TEST_EARLY");
    if (!m)
        return;
    if (!strcmp(m, "term"))
        signal(SIGTERM, early_term);
    else if (!strcmp(m, "segv"))
        signal(SIGSEGV, early_segv);
    else if (!strcmp(m, "ignore-int"))
        signal(SIGINT, SIG_IGN);
}

/* ---- scenarios (in the re-executed child) ---- */
static volatile int stop;
static void *hammer(void *arg)
{
    (void)arg;
    while (!stop) {
        ts_active();
        ts_cfg();
        if (ts_enter())
            (void)ts_now_ns();
        ts_leave();
    }
    return NULL;
}
static void *fallback_thread(void *arg)
{
    (void)arg;
    ts_fallback_passthrough("table %s failed", "x");
    return NULL;
}
static void own_term(int sig)
{
    (void)sig;
    note("own-term");
    exit(0);
}

/* An inaccessible page, not NULL: a NULL store would be caught by UBSan
 * before it faults, and the sanitizer runs must see the real SIGSEGV. */
static volatile int *volatile bad_address;

static int scenario(const char *m)
{
    struct rlimit nocore = {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);
    if (!strcmp(m, "active")) {
        if (!ts_active() || !ts_active())
            return 2;
        uint64_t a = ts_now_ns(), b = ts_now_ns();
        return b >= a && a > 0 ? 0 : 3;
    }
    if (!strcmp(m, "off")) {
        struct sigaction sa;
        sigaction(SIGTERM, NULL, &sa);
        return !ts_active() && !ts_active() && sa.sa_handler == SIG_DFL ? 0 : 2;
    }
    if (!strcmp(m, "fallback")) {
        if (!ts_active())
            return 2;
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&t[i], NULL, fallback_thread, NULL);
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
        ts_fallback_passthrough("again");
        return ts_active() ? 3 : 0;
    }
    if (!strcmp(m, "term") || !strcmp(m, "segv") || !strcmp(m, "abort") || !strcmp(m, "fpe")) {
        ts_active();
        if (!strcmp(m, "term"))
            kill(getpid(), SIGTERM);
        else if (!strcmp(m, "segv")) {
            bad_address = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            *bad_address = 1;
        }
        else if (!strcmp(m, "abort"))
            abort();
        else
            raise(SIGFPE);
        sleep(5);
        return 2;
    }
    if (!strcmp(m, "term-own-handler")) {
        ts_active();
        signal(SIGTERM, own_term); /* installed after the shim: replaces it */
        kill(getpid(), SIGTERM);
        sleep(5);
        return 2;
    }
    if (!strcmp(m, "untouched") || !strcmp(m, "used")) {
        /* before any hook asks, the program's signals are as it left them
         * (CPython checks SIGINT is default before installing its own) */
        if (!strcmp(m, "used") && !ts_active())
            return 2;
        static const int sigs[] = {SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
        int installed = 0;
        for (int i = 0; i < 7; i++) {
            struct sigaction sa;
            sigaction(sigs[i], NULL, &sa);
            installed += (sa.sa_flags & SA_SIGINFO) || sa.sa_handler != SIG_DFL;
        }
        return installed == (!strcmp(m, "used") ? 7 : 0) ? 0 : 10 + installed;
    }
    if (!strcmp(m, "ignored")) {
        struct sigaction sa;
        sigaction(SIGINT, NULL, &sa);
        return ts_active() && sa.sa_handler == SIG_IGN ? 0 : 2;
    }
    if (!strcmp(m, "fork-used") || !strcmp(m, "fork-fresh")) {
        bool used = !strcmp(m, "fork-used");
        if (used && !ts_active())
            return 2;
        pthread_t t[3];
        if (used)
            for (int i = 0; i < 3; i++)
                pthread_create(&t[i], NULL, hammer, NULL);
        for (int k = 0; k < 20; k++) {
            pid_t pid = fork();
            if (pid == 0) {
                /* a DataLoader-like worker: uses the shim's API, then exits */
                bool a = ts_active();
                ts_cfg();
                if (ts_enter())
                    (void)ts_now_ns();
                ts_leave();
                exit(a == !used ? 0 : 1);
            }
            int st;
            if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return 3;
        }
        stop = 1;
        if (used)
            for (int i = 0; i < 3; i++)
                pthread_join(t[i], NULL);
        return ts_active() ? 0 : 4;
    }
    return 100;
}

/* ---- the driver ---- */
static int failures;
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

struct result {
    int status;
    char out[16384], err[8192];
};

static void slurp(int fd, char *buf, size_t n)
{
    size_t len = 0;
    ssize_t r;
    while (len + 1 < n && ((r = read(fd, buf + len, n - 1 - len)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0)
            len += (size_t)r;
    buf[len] = '\0';
    close(fd);
}

/* Runs scenario m in a fresh process with the extra variable env (or NULL). */
static void run(const char *m, const char *env, struct result *r)
{
    int out[2], err[2];
    if (pipe(out) || pipe(err))
        abort();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(out[0]);
        close(err[0]);
        if (env)
            putenv((char *)env);
        alarm(20); /* survives exec: a hang fails the test instead of blocking it */
        execl("/proc/self/exe", "test_process", m, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    slurp(out[0], r->out, sizeof r->out); /* small outputs: neither pipe fills */
    slurp(err[0], r->err, sizeof r->err);
    waitpid(pid, &r->status, 0);
}

static int count(const char *text, const char *word)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, word)); p += strlen(word))
        n++;
    return n;
}

static bool exited(const struct result *r, int code) { return WIFEXITED(r->status) && WEXITSTATUS(r->status) == code; }
static bool killed(const struct result *r, int sig) { return WIFSIGNALED(r->status) && WTERMSIG(r->status) == sig; }

static void test_msg(void)
{
    int fds[2];
    if (pipe(fds))
        abort();
    int saved = dup(2);
    dup2(fds[1], 2);
    errno = 1234;
    ts_msg("warning", "a %d", 1);
    int e1 = errno;
    ts_msg(NULL, "two\nlines\n");
    ts_error("x");
    static char big[8000];
    memset(big, 'b', sizeof big - 1);
    ts_warn("%s", big);
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    static char got[16384];
    slurp(fds[0], got, sizeof got);
    CHECK(e1 == 1234, "errno preserved: %d", e1);
    const char *want = "trainshim: warning: a 1\ntrainshim: two\ntrainshim: lines\ntrainshim: error: x\n"
                       "trainshim: warning: bbb";
    CHECK(!strncmp(got, want, strlen(want)), "messages: %.200s", got);
    size_t len = strlen(got);
    CHECK(len > 4 && !strcmp(got + len - 4, "...\n") && len < 4200, "long message cut to one line: %zu", len);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        in_scenario = true;
        return scenario(argv[1]);
    }
    static struct result r;

    test_msg();

    run("active", NULL, &r);
    CHECK(exited(&r, 0), "active: status %#x", r.status);
    CHECK(!r.err[0], "active: nothing on stderr: %s", r.err);
    CHECK(count(r.out, "shutdown") == 1 && count(r.out, "flushsig") == 0, "active: flushed at exit: %s", r.out);

    run("untouched", NULL, &r);
    CHECK(exited(&r, 0), "no signal handler before the first hook: %#x", r.status);
    run("used", NULL, &r);
    CHECK(exited(&r, 0), "all seven handlers after the first hook: %#x", r.status);

    run("off", "TRAINSHIM=0", &r);
    CHECK(exited(&r, 0), "TRAINSHIM=0: status %#x (active or handlers installed)", r.status);
    CHECK(!r.err[0] && !r.out[0], "TRAINSHIM=0 does nothing: out '%s' err '%s'", r.out, r.err);

    run("off", "TRAINSHIM=off", &r);
    CHECK(exited(&r, 0) && !r.out[0], "TRAINSHIM=off: %#x", r.status);

    run("active", "TRAINSHIM=1", &r);
    CHECK(exited(&r, 0), "TRAINSHIM=1 is on: %#x", r.status);

    run("fallback", NULL, &r);
    CHECK(exited(&r, 0), "fallback: status %#x", r.status);
    CHECK(!strcmp(r.err, "trainshim: error: table x failed; continuing in passthrough\n"),
          "fallback: exactly one line from five calls: '%s'", r.err);

    run("term", NULL, &r);
    CHECK(killed(&r, SIGTERM), "SIGTERM kills as without the shim: %#x", r.status);
    CHECK(count(r.out, "flushsig") == 1 && count(r.out, "shutdown") == 0, "SIGTERM flushes once: %s", r.out);

    run("term", "TEST_EARLY=term", &r);
    CHECK(exited(&r, 7), "SIGTERM runs the program's earlier handler: %#x", r.status);
    CHECK(count(r.out, "early-term") == 1 && count(r.out, "flushsig") == 0, "chained, no flush: %s", r.out);

    run("term-own-handler", NULL, &r);
    CHECK(exited(&r, 0), "a handler installed later replaces the shim's: %#x", r.status);
    CHECK(count(r.out, "own-term") == 1 && count(r.out, "shutdown") == 1 && count(r.out, "flushsig") == 0,
          "program handler, then exit flush: %s", r.out);

    run("ignored", "TEST_EARLY=ignore-int", &r);
    CHECK(exited(&r, 0), "an ignored SIGINT stays ignored: %#x", r.status);

    run("segv", NULL, &r);
    CHECK(killed(&r, SIGSEGV), "a fault still kills with SIGSEGV: %#x", r.status);
    CHECK(count(r.out, "flushsig") == 1, "fault flushes once: %s", r.out);

    run("segv", "TEST_EARLY=segv", &r);
    CHECK(exited(&r, 9), "a fault reaches the program's earlier SIGSEGV handler: %#x", r.status);
    CHECK(count(r.out, "flushsig") == 1 && count(r.out, "early-segv") == 1, "flush, then theirs: %s", r.out);

    run("abort", NULL, &r);
    CHECK(killed(&r, SIGABRT), "abort still kills with SIGABRT: %#x", r.status);
    CHECK(count(r.out, "flushsig") == 1, "abort flushes: %s", r.out);

    run("fpe", NULL, &r);
    CHECK(killed(&r, SIGFPE), "a raised SIGFPE kills with SIGFPE: %#x", r.status);

    run("fork-used", NULL, &r);
    CHECK(exited(&r, 0), "fork after CUDA use: children pass through, nobody hangs: %#x (err %s)", r.status, r.err);
    CHECK(count(r.out, "prepare") == 20 && count(r.out, "parent") == 20 && count(r.out, "child") == 20,
          "log fork handlers around every fork: %.300s", r.out);
    CHECK(count(r.out, "shutdown") == 1, "only the parent flushes at exit: %.2000s", r.out);

    run("fork-fresh", NULL, &r);
    CHECK(exited(&r, 0), "fork before any use: children are active: %#x", r.status);
    CHECK(count(r.out, "shutdown") == 21, "each fresh child flushes its own log: %d", count(r.out, "shutdown"));

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_process: all checks passed\n");
    return 0;
}
