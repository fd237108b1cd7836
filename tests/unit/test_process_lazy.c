/* shim/core/process.c's lazy initialization: when no constructor ran first (here:
 * this program defines ts_tool_process, as the trainshim tool does, so the
 * constructor stands aside), the first ts_active() initializes, exactly once,
 * even when many threads ask at the same moment; until then nothing is
 * installed. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config.h"
#include "core/core.h"

const int ts_tool_process = 1;

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

static pthread_barrier_t start;
static void *ask(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    return (void *)(intptr_t)ts_active();
}

static bool term_is_default(void)
{
    struct sigaction sa;
    sigaction(SIGTERM, NULL, &sa);
    return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL;
}

/* In a child with stderr captured: 16 threads race to initialize. */
static void child(void)
{
    setenv("TRAINSHIM_VERBOSE", "1", 1);
    if (!term_is_default())
        _exit(2); /* the constructor did something */
    pthread_t t[16];
    pthread_barrier_init(&start, NULL, 16);
    for (int i = 0; i < 16; i++)
        pthread_create(&t[i], NULL, ask, NULL);
    for (int i = 0; i < 16; i++) {
        void *r;
        pthread_join(t[i], &r);
        if (!r)
            _exit(3);
    }
    if (term_is_default())
        _exit(4); /* initialization installed no handler */
    _exit(0);
}

int main(void)
{
    int fds[2];
    if (pipe(fds))
        abort();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        alarm(20);
        child();
    }
    close(fds[1]);
    char err[8192];
    size_t len = 0;
    ssize_t r;
    while (len + 1 < sizeof err && (r = read(fds[0], err + len, sizeof err - 1 - len)) > 0)
        len += (size_t)r;
    err[len] = '\0';
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x (2: eager init, 3: inactive, 4: no handlers)", st);
    int headers = 0;
    for (const char *p = err; (p = strstr(p, "effective configuration")); p++)
        headers++;
    CHECK(headers == 1, "initialized exactly once (VERBOSE printed %d times): %s", headers, err);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_process_lazy: all checks passed\n");
    return 0;
}
