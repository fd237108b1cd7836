/* trainshim run [--log TEMPLATE] [--] CMD...: runs CMD with libtrainshim.so
 * preloaded, passes SIGINT/SIGTERM on to it, ends as it ended, and then
 * says where the event logs are and how to summarize them.
 *
 * Which logs: the ones matching TRAINSHIM_LOG's template (with %p any pid,
 * %r/%l any rank) that appeared or changed while CMD ran: the child's own
 * log and those of the processes it started (torchrun workers, exec'd
 * scripts), listed with the child's first. */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "core/config.h"

/* Tells shim/core/process.c (linked from libtscore.a) that this process is the
 * tool, not a program under the shim: no signal handlers, no exit flush. */
const int ts_tool_process = 1;

#define LIB_NAME "libtrainshim.so"

static volatile sig_atomic_t child_pid;

/* ---- finding the library ------------------------------------------------------ */

static int find_library(char *out, size_t n)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return -1;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    static const char *const rel[] = { "/" LIB_NAME, "/../lib/" LIB_NAME, "/../lib64/" LIB_NAME };
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char cand[PATH_MAX];
        if (snprintf(cand, sizeof cand, "%s%s", exe, rel[i]) >= (int)sizeof cand)
            continue;
        if (access(cand, R_OK) == 0 && realpath(cand, out) && strlen(out) < n)
            return 0;
    }
    fprintf(
        stderr,
        "trainshim: error: cannot find %s next to %s/trainshim (looked in %s/, %s/../lib/, %s/../lib64/)\n",
        LIB_NAME, exe, exe, exe, exe);
    return -1;
}

/* LD_PRELOAD = the library, then whatever was preloaded already. */
static int set_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    if (old && *old) {
        /* already there (trainshim run trainshim run ...): keep as is */
        size_t l = strlen(lib);
        for (const char *p = strstr(old, lib); p; p = strstr(p + 1, lib))
            if ((p == old || p[-1] == ':' || p[-1] == ' ') && (p[l] == '\0' || p[l] == ':' || p[l] == ' '))
                return 0;
        size_t need = strlen(lib) + 1 + strlen(old) + 1;
        char *value = malloc(need);
        if (!value)
            return -1;
        snprintf(value, need, "%s:%s", lib, old);
        int r = setenv("LD_PRELOAD", value, 1);
        free(value);
        return r;
    }
    return setenv("LD_PRELOAD", lib, 1);
}

/* ---- logs ------------------------------------------------------------------------- */

/* Appends s to a glob pattern, escaping what glob would interpret. */
static void put_literal(char *pat, size_t n, size_t *len, const char *s)
{
    for (; *s && *len + 2 < n; s++) {
        if (strchr("*?[\\", *s))
            pat[(*len)++] = '\\';
        pat[(*len)++] = *s;
    }
    pat[*len] = '\0';
}

/* The glob pattern of the logs a template names: %p any pid, %h this host, %r and %l any rank, %q{VAR} the variable as the child
 * sees it.  The second pattern also matches the shim's variants of a name:
 * "<stem>.r<rank><ext>" for the default template and "<stem>.<k><ext>" when
 * a file of that name already existed. */
static void template_patterns(const char *tmpl, char *exact, char *variants, size_t n)
{
    size_t len = 0;
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        strcpy(host, "*");
    host[sizeof host - 1] = '\0';
    exact[0] = '\0';
    for (const char *t = tmpl; *t && len + 2 < n; t++) {
        char lit[2] = { *t, '\0' };
        if (*t != '%' || !t[1]) {
            put_literal(exact, n, &len, lit);
            continue;
        }
        switch (*++t) {
        case 'h': put_literal(exact, n, &len, host); break;
        case 'p':
        case 'r':
        case 'l': exact[len++] = '*'; break;
        case 'q': {
            const char *close = t[1] == '{' ? strchr(t + 2, '}') : NULL;
            char var[256];
            if (close && (size_t)(close - (t + 2)) < sizeof var) {
                memcpy(var, t + 2, (size_t)(close - (t + 2)));
                var[close - (t + 2)] = '\0';
                const char *v = getenv(var);
                put_literal(exact, n, &len, v ? v : "");
                t = close;
            }
            break;
        }
        default:
            lit[0] = *t;
            put_literal(exact, n, &len, lit);
            break;
        }
        exact[len] = '\0';
    }
    exact[len] = '\0';
    /* variants: insert ".*" before the last component's extension */
    const char *base = strrchr(exact, '/');
    base = base ? base + 1 : exact;
    const char *dot = strrchr(base, '.');
    if (!dot || dot == base)
        dot = exact + strlen(exact);
    snprintf(variants, n, "%.*s.*%s", (int)(dot - exact), exact, dot);
}

struct seen {
    char **paths;
    struct stat *st;
    size_t count;
};

static void collect(const char *const *patterns, int npatterns, struct seen *out)
{
    glob_t g = { 0 };
    int flags = 0;
    for (int i = 0; i < npatterns; i++) {
        glob(patterns[i], flags, NULL, &g);
        flags = GLOB_APPEND;
    }
    out->paths = calloc(g.gl_pathc + 1, sizeof *out->paths);
    out->st = calloc(g.gl_pathc + 1, sizeof *out->st);
    out->count = 0;
    for (size_t i = 0; out->paths && out->st && i < g.gl_pathc; i++) {
        bool dup = false;
        for (size_t k = 0; k < out->count && !dup; k++)
            dup = !strcmp(out->paths[k], g.gl_pathv[i]);
        if (dup || stat(g.gl_pathv[i], &out->st[out->count]) != 0 || !S_ISREG(out->st[out->count].st_mode))
            continue;
        out->paths[out->count++] = strdup(g.gl_pathv[i]);
    }
    globfree(&g);
}

static bool unchanged(const struct seen *before, const char *path, const struct stat *st)
{
    for (size_t i = 0; i < before->count; i++)
        if (!strcmp(before->paths[i], path))
            return before->st[i].st_ino == st->st_ino && before->st[i].st_size == st->st_size
                   && before->st[i].st_mtim.tv_sec == st->st_mtim.tv_sec
                   && before->st[i].st_mtim.tv_nsec == st->st_mtim.tv_nsec;
    return false;
}

static void free_seen(struct seen *s)
{
    for (size_t i = 0; i < s->count; i++)
        free(s->paths[i]);
    free(s->paths);
    free(s->st);
}

/* How to call this tool again: "trainshim" when that is on PATH, else its path. */
static void tool_name(char *out, size_t n)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    snprintf(out, n, "trainshim");
    if (len <= 0)
        return;
    exe[len] = '\0';
    const char *path = getenv("PATH");
    struct stat self, other;
    if (stat(exe, &self) != 0)
        return;
    for (const char *p = path; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t dl = colon ? (size_t)(colon - p) : strlen(p);
        char cand[PATH_MAX];
        if (dl && snprintf(cand, sizeof cand, "%.*s/trainshim", (int)dl, p) < (int)sizeof cand
            && stat(cand, &other) == 0) {
            if (other.st_ino == self.st_ino && other.st_dev == self.st_dev)
                return;
            break;
        }
        p = colon ? colon + 1 : p + dl;
    }
    snprintf(out, n, "%s", exe);
}

static void report_logs(const struct seen *before, const char *const *patterns, int npatterns, pid_t pid,
                        const char *html)
{
    struct seen after;
    collect(patterns, npatterns, &after);
    char pidtext[32];
    snprintf(pidtext, sizeof pidtext, "%d", (int)pid);
    /* new or changed files; the child's own (its pid in the name) first */
    const char *list[256];
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < after.count && n < 256; i++) {
            if (unchanged(before, after.paths[i], &after.st[i]))
                continue;
            const char *base = strrchr(after.paths[i], '/');
            base = base ? base + 1 : after.paths[i];
            const char *hit = strstr(base, pidtext);
            bool own = hit && (hit == base || !strchr("0123456789", hit[-1]))
                       && !strchr("0123456789", hit[strlen(pidtext)]);
            if (own == (pass == 0))
                list[n++] = after.paths[i];
        }
    char tool[PATH_MAX];
    tool_name(tool, sizeof tool);
    bool on = true;
    const char *sw = getenv("TRAINSHIM");
    if (!n && sw && !ts_parse_bool(sw, &on) && !on) {
        fprintf(stderr, "trainshim: no event log: TRAINSHIM=%s turned the shim off\n", sw);
    } else if (!n) {
        fprintf(stderr,
                "trainshim: no event log was written (no CUDA activity was recorded; logs would match %s)\n",
                patterns[0]);
    } else {
        char text[16384];
        size_t len = (size_t)snprintf(text, sizeof text, "trainshim: event log%s:\n", n > 1 ? "s" : "");
        for (size_t i = 0; i < n && len < sizeof text; i++)
            len += (size_t)snprintf(text + len, sizeof text - len, "trainshim:   %s\n", list[i]);
        if (len < sizeof text)
            len +=
                (size_t)snprintf(text + len, sizeof text - len, "trainshim: summarize with: %s report", tool);
        for (size_t i = 0; i < n && len < sizeof text; i++)
            len += (size_t)snprintf(text + len, sizeof text - len, " %s", list[i]);
        if (len < sizeof text)
            len += (size_t)snprintf(text + len, sizeof text - len, "\n");
        fputs(text, stderr);
        if (html) { /* --html FILE: the page of the logs this run wrote */
            const char *args[256 + 3] = { "report", "--html", html };
            memcpy(args + 3, list, n * sizeof *list);
            cmd_report((int)n + 3, (char **)args);
        }
    }
    free_seen(&after);
}

/* ---- running the child ------------------------------------------------------------ */

static void forward_signal(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    /* A terminal's ^C already reached the child (same process group):
     * forward only what was sent to us alone (kill, systemd, a scheduler). */
    if (child_pid > 0 && info && info->si_code <= 0)
        kill((pid_t)child_pid, sig);
}

static void usage(void)
{
    fprintf(stderr, "usage: trainshim run [--log TEMPLATE] [--html FILE] [--] CMD [ARGS...]\n"
                    "  --log TEMPLATE  event log path (sets TRAINSHIM_LOG; %%p pid, %%h host, %%r rank,\n"
                    "                  %%l local rank, %%q{VAR} environment variable, %%%% percent)\n"
                    "  --html FILE     after the run, write the HTML report of its logs to FILE\n");
}

/* Ends this process the way the child ended: the same signal (without a core
 * file of our own), else 128 + signal. */
static int die_like(int sig)
{
    struct rlimit none = { 0, 0 };
    setrlimit(RLIMIT_CORE, &none);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    return 128 + sig;
}

/* Index of the command's first word, or -1 with *rc the exit status. */
/* The value of option argv[*i] ("--name VALUE" or "--name=VALUE"), or NULL
 * after saying it is missing. */
static const char *option_value(int argc, char **argv, int *i, const char *name, const char *what)
{
    size_t len = strlen(name);
    if (argv[*i][len] == '=')
        return argv[*i] + len + 1;
    if (*i + 1 < argc)
        return argv[++*i];
    fprintf(stderr, "trainshim: error: run: %s needs a value (%s)\n", name, what);
    usage();
    return NULL;
}

static int parse_args(int argc, char **argv, const char **log_template, const char **html, int *rc)
{
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            i++;
            break;
        }
        if (!strcmp(argv[i], "--log") || !strncmp(argv[i], "--log=", 6)) {
            if (!(*log_template = option_value(argc, argv, &i, "--log", "a log path template"))) {
                *rc = 2;
                return -1;
            }
        } else if (!strcmp(argv[i], "--html") || !strncmp(argv[i], "--html=", 7)) {
            if (!(*html = option_value(argc, argv, &i, "--html", "the HTML report's file"))) {
                *rc = 2;
                return -1;
            }
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage();
            *rc = 0;
            return -1;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "trainshim: error: run: unknown option '%s'\n", argv[i]);
            usage();
            *rc = 2;
            return -1;
        } else
            break;
    }
    if (i >= argc) {
        usage();
        *rc = 2;
        return -1;
    }
    return i;
}

/* The log path template the child will use: TRAINSHIM_LOG, else
 * TRAINSHIM_CONF's, else the default (read quietly: the child prints its own
 * configuration warnings). */
static const char *child_log_template(void)
{
    static struct ts_config cfg;
    int saved_err = dup(STDERR_FILENO), devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0)
        dup2(devnull, STDERR_FILENO);
    ts_config_load(&cfg, environ, false);
    if (saved_err >= 0)
        dup2(saved_err, STDERR_FILENO);
    if (devnull >= 0)
        close(devnull);
    if (saved_err >= 0)
        close(saved_err);
    return cfg.log;
}

/* Signals sent to us alone go on to the child; an ignored signal (a
 * background job's SIGINT) stays ignored, for us and, through exec, for the
 * child. */
static void forward_signals(struct sigaction *old_int, struct sigaction *old_term)
{
    struct sigaction sa = { 0 };
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, NULL, old_int);
    sigaction(SIGTERM, NULL, old_term);
    if (old_int->sa_handler != SIG_IGN)
        sigaction(SIGINT, &sa, NULL);
    if (old_term->sa_handler != SIG_IGN)
        sigaction(SIGTERM, &sa, NULL);
}

/* Runs cmd to its end (*pid, *status); the exec's errno when it could not
 * start, 0 when it ran, -1 when no child could be made. */
static int run_child(char **cmd, pid_t *pid_out, int *status)
{
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        perror("trainshim: error: run: pipe");
        return -1;
    }
    struct sigaction old_int, old_term;
    forward_signals(&old_int, &old_term);
    pid_t pid = fork();
    if (pid < 0) {
        perror("trainshim: error: run: fork");
        return -1;
    }
    if (pid == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        close(errpipe[0]);
        execvp(cmd[0], cmd);
        int e = errno;
        if (write(errpipe[1], &e, sizeof e) != (ssize_t)sizeof e)
            _exit(127);
        _exit(e == ENOENT ? 127 : 126);
    }
    child_pid = *pid_out = pid;
    close(errpipe[1]);
    int exec_errno = 0;
    ssize_t got;
    do
        got = read(errpipe[0], &exec_errno, sizeof exec_errno);
    while (got < 0 && errno == EINTR);
    close(errpipe[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    child_pid = 0;
    return got == (ssize_t)sizeof exec_errno ? exec_errno : 0;
}

int cmd_run(int argc, char **argv)
{
    const char *log_template = NULL, *html = NULL;
    int rc = 0, first = parse_args(argc, argv, &log_template, &html, &rc);
    if (first < 0)
        return rc;
    char **cmd = argv + first;
    if (log_template) {
        const char *why = ts_check_template(log_template);
        if (why) {
            fprintf(stderr, "trainshim: error: run: --log %s: %s\n", log_template, why);
            return 2;
        }
        setenv("TRAINSHIM_LOG", log_template, 1);
    }
    char lib[PATH_MAX];
    if (find_library(lib, sizeof lib) != 0 || set_preload(lib) != 0)
        return 1;
    char exact[PATH_MAX * 2], variants[PATH_MAX * 2];
    template_patterns(child_log_template(), exact, variants, sizeof exact);
    const char *patterns[] = { exact, variants };
    struct seen before;
    collect(patterns, 2, &before);
    int status = 0;
    pid_t pid = 0;
    int exec_errno = run_child(cmd, &pid, &status);
    if (exec_errno < 0)
        return 1;
    if (exec_errno > 0) {
        fprintf(stderr, "trainshim: error: run: %s: %s\n", cmd[0],
                exec_errno == ENOENT ? "command not found" : strerror(exec_errno));
        free_seen(&before);
        return exec_errno == ENOENT ? 127 : 126;
    }
    report_logs(&before, patterns, 2, pid, html);
    free_seen(&before);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        fflush(NULL);
        return die_like(WTERMSIG(status));
    }
    return 1;
}
