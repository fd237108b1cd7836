/* TRAINSHIM_LOG path templates: every escape, rank detection from each
 * launcher's variables, the default template's rank suffix, directories
 * created, no clobbering (O_EXCL, numbered suffix, symlinks not followed),
 * and end to end: the file appears only at the first event. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "log/log.h"

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

static const char *const launcher_vars[] = {
    "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "LOCAL_RANK", "SLURM_LOCALID",
    "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE", NULL};

static void clear_launcher(void)
{
    for (int i = 0; launcher_vars[i]; i++)
        unsetenv(launcher_vars[i]);
}

static void expect_expand(const char *tmpl, const char *want)
{
    char out[1024];
    int rc = ts_log_expand_path(tmpl, out, sizeof out);
    CHECK(rc == 0 && !strcmp(out, want), "'%s' -> '%s' (rc %d), want '%s'", tmpl, rc ? "" : out, rc, want);
}

static bool exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

static void write_file(const char *p, const char *s)
{
    FILE *f = fopen(p, "w");
    fputs(s, f);
    fclose(f);
}

static bool file_is(const char *p, const char *s)
{
    char buf[256] = "";
    FILE *f = fopen(p, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return !strcmp(buf, s);
}

static int run_child(const char *cwd, const char *log_env, const char *rank, const char *errfile,
                     bool log_event)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (cwd && chdir(cwd) != 0)
            _exit(3);
        if (log_env)
            setenv("TRAINSHIM_LOG", log_env, 1);
        else
            unsetenv("TRAINSHIM_LOG");
        clear_launcher();
        if (rank)
            setenv("RANK", rank, 1);
        if (errfile) {
            int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(fd, 2);
        }
        if (log_event)
            ts_ev_error(1, 2);
        ts_log_shutdown();
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    return pid;
}

int main(void)
{
    char host[256] = "", pid[32], want[1200];
    gethostname(host, sizeof host);
    snprintf(pid, sizeof pid, "%d", (int)getpid());

    /* ---- escapes */
    clear_launcher();
    setenv("RANK", "12", 1);
    setenv("LOCAL_RANK", "3", 1);
    setenv("TS_TEST_JOB", "job-42", 1);
    unsetenv("TS_TEST_UNSET");
    snprintf(want, sizeof want, "out/%s/%s/r12/l3/job-42/x/100%%/%%z/%%q/%%q{open/end%%", pid, host);
    expect_expand("out/%p/%h/r%r/l%l/%q{TS_TEST_JOB}/x%q{TS_TEST_UNSET}/100%%/%z/%q/%q{open/end%", want);

    /* ---- rank detection: each launcher, in precedence order (Slurm's last:
     * an mpirun inside an srun step inherits the step's SLURM_PROCID) */
    static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (int i = 4; i >= 0; i--) {
        clear_launcher();
        for (int j = 4; j >= i; j--) { /* set this one and every lower-precedence one */
            char v[8];
            snprintf(v, sizeof v, "%d", 10 + j);
            setenv(rank_vars[j], v, 1);
        }
        CHECK(ts_log_env_rank() == 10 + i, "rank from %s: %d", rank_vars[i], ts_log_env_rank());
    }
    static const char *const local_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                             "SLURM_LOCALID"};
    for (int i = 3; i >= 0; i--) {
        clear_launcher();
        for (int j = 3; j >= i; j--) {
            char v[8];
            snprintf(v, sizeof v, "%d", 20 + j);
            setenv(local_vars[j], v, 1);
        }
        CHECK(ts_log_env_local_rank() == 20 + i, "local rank from %s", local_vars[i]);
    }
    static const char *const size_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
    for (int i = 3; i >= 0; i--) {
        clear_launcher();
        for (int j = 3; j >= i; j--) {
            char v[8];
            snprintf(v, sizeof v, "%d", 30 + j);
            setenv(size_vars[j], v, 1);
        }
        CHECK(ts_log_env_world_size() == 30 + i, "world size from %s", size_vars[i]);
    }
    clear_launcher();
    setenv("RANK", "abc", 1); /* not a number: the next variable decides */
    setenv("PMI_RANK", "4", 1);
    CHECK(ts_log_env_rank() == 4, "garbage RANK skipped: %d", ts_log_env_rank());
    clear_launcher();
    CHECK(ts_log_env_rank() == -1 && ts_log_env_local_rank() == -1 && ts_log_env_world_size() == -1,
          "no launcher: unknown");

    /* ---- the default template gets .r<rank> only when a rank is known */
    snprintf(want, sizeof want, "trainshim.%s.%s.log", host, pid);
    expect_expand("trainshim.%h.%p.log", want);
    snprintf(want, sizeof want, "r0.0.log");
    expect_expand("r%r.%l.log", want); /* unknown rank and local rank read as 0 */
    setenv("SLURM_PROCID", "7", 1);
    snprintf(want, sizeof want, "trainshim.%s.%s.r7.log", host, pid);
    expect_expand("trainshim.%h.%p.log", want);
    snprintf(want, sizeof want, "my.%s.log", pid);
    expect_expand("my.%p.log", want); /* a user template is left as written */
    clear_launcher();

    /* ---- too long, empty */
    char small[8];
    CHECK(ts_log_expand_path("abcdefghijkl", small, sizeof small) == -1, "too long accepted");
    CHECK(ts_log_expand_path("%q{TS_TEST_UNSET}", small, sizeof small) == -1, "empty accepted");

    /* ---- creation: parents, no clobbering, no symlink following */
    char dir[] = "/tmp/ts_log_path.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char p[600], used[600], q[1400];
    snprintf(p, sizeof p, "%s/a/b/c/run.log", dir);
    int fd = ts_log_create_file(p, used, sizeof used);
    CHECK(fd >= 0 && !strcmp(used, p), "create with parents: %s", used);
    if (fd >= 0)
        close(fd);
    write_file(p, "original");
    fd = ts_log_create_file(p, used, sizeof used);
    snprintf(q, sizeof q, "%s/a/b/c/run.1.log", dir);
    CHECK(fd >= 0 && !strcmp(used, q), "second: %s", used);
    if (fd >= 0)
        close(fd);
    CHECK(file_is(p, "original"), "existing log clobbered");
    fd = ts_log_create_file(p, used, sizeof used);
    snprintf(q, sizeof q, "%s/a/b/c/run.2.log", dir);
    CHECK(fd >= 0 && !strcmp(used, q), "third: %s", used);
    if (fd >= 0)
        close(fd);
    /* a symlink planted at the name is neither followed nor replaced */
    char victim[600], link[600];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    write_file(victim, "precious");
    snprintf(link, sizeof link, "%s/a/evil.log", dir);
    CHECK(symlink(victim, link) == 0, "symlink");
    fd = ts_log_create_file(link, used, sizeof used);
    snprintf(q, sizeof q, "%s/a/evil.1.log", dir);
    CHECK(fd >= 0 && !strcmp(used, q), "symlink avoided: %s", used);
    if (fd >= 0) {
        CHECK(write(fd, "x", 1) == 1, "write");
        close(fd);
    }
    CHECK(file_is(victim, "precious"), "symlink followed");
    /* no extension, and a dot only in a directory name */
    snprintf(p, sizeof p, "%s/d.dir/noext", dir);
    close(ts_log_create_file(p, used, sizeof used));
    fd = ts_log_create_file(p, used, sizeof used);
    snprintf(q, sizeof q, "%s/d.dir/noext.1", dir);
    CHECK(fd >= 0 && !strcmp(used, q), "no extension: %s", used);
    if (fd >= 0)
        close(fd);

    /* ---- end to end, each in a fresh child process */
    char sub[200], errf[200], tmpl[400];
    snprintf(sub, sizeof sub, "%s/e2e", dir);
    mkdir(sub, 0755);
    snprintf(errf, sizeof errf, "%s/stderr.txt", dir);
    /* no event: no file */
    int c = run_child(sub, NULL, "5", NULL, false);
    snprintf(q, sizeof q, "%s/trainshim.%s.%d.r5.log", sub, host, c);
    CHECK(!exists(q), "a process without events created %s", q);
    /* default template, relative to the working directory, rank suffix */
    c = run_child(sub, NULL, "5", NULL, true);
    snprintf(q, sizeof q, "%s/trainshim.%s.%d.r5.log", sub, host, c);
    CHECK(exists(q), "default log %s missing", q);
    /* an existing file at a fixed path: kept, numbered name used, and said */
    snprintf(tmpl, sizeof tmpl, "%s/fixed.log", sub);
    write_file(tmpl, "keep me");
    run_child(NULL, tmpl, NULL, errf, true);
    CHECK(file_is(tmpl, "keep me"), "existing file clobbered");
    snprintf(q, sizeof q, "%s/fixed.1.log", sub);
    CHECK(exists(q), "numbered log %s missing", q);
    char msg[1024] = "";
    FILE *ef = fopen(errf, "r");
    if (ef) {
        size_t n = fread(msg, 1, sizeof msg - 1, ef);
        msg[n] = 0;
        fclose(ef);
    }
    CHECK(strstr(msg, "trainshim: warning:") && strstr(msg, q), "no warning naming %s: '%s'", q, msg);
    /* logging switched off */
    snprintf(tmpl, sizeof tmpl, "%s/off", sub);
    mkdir(tmpl, 0755);
    run_child(tmpl, "off", NULL, NULL, true);
    snprintf(q, sizeof q, "%s/off", tmpl);
    CHECK(!exists(q), "TRAINSHIM_LOG=off wrote a file");

    char cmd[700];
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
