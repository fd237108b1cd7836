/* process.c: the shim's process life -- initialization, the on/off state every
 * hook reads, fork, exit and signals.
 *
 * State.  One atomic word, read by ts_active() on every hook:
 *   UNINIT      nothing done yet (a hook before our constructor, or none yet)
 *   INIT        initialization is running.  Set BEFORE it runs, so a hook
 *               re-entered from inside initialization (same thread) passes
 *               through; other threads wait for it (bounded, then pass through
 *               rather than risk a deadlock).
 *   READY       active, and no hook has asked yet
 *   USED        active, and some hook has asked: the process may hold CUDA
 *               state (this is what fork looks at)
 *   OFF         passthrough forever: TRAINSHIM=0, ts_fallback_passthrough(),
 *               or a forked child of a USED parent
 * ts_active() is one load and compare once the state is USED or OFF.
 *
 * fork without exec (DataLoader workers, multiprocessing 'fork' and
 * 'forkserver').  The child gets a copy of the parent's memory, including
 * half-written log buffers and the parent's CUDA-derived state, which CUDA
 * itself declares unusable in the child.  Decision:
 *   - If the parent never used the shim (state READY: no hook was ever
 *     called, e.g. a forkserver or a launcher), the child is a fresh process
 *     for the shim: it stays active and gets its own log under its own pid.
 *   - Otherwise the child passes through (state OFF) and writes NOTHING: not
 *     to the parent's log (ts_log_fork_child drops the inherited buffers and
 *     descriptor), not at exit, not on signals.  CUDA calls in such a child
 *     reach the real library, which answers them exactly as without the shim.
 *     If the child later execs, the new program starts the shim afresh with
 *     its own log (LD_PRELOAD is inherited).
 * The prepare handler calls ts_log_fork_prepare(), which takes the log's
 * locks so that no lock is copied held into the child; parent and child
 * handlers release them.  process.c itself holds no lock.
 *
 * Signals.  Installed once, when the first hook asks (READY -> USED), not
 * when the library loads: before any CUDA call there is nothing to flush,
 * and a handler present at startup changes programs -- CPython installs its
 * KeyboardInterrupt handler for SIGINT only when SIGINT is at its default,
 * so a shim handler from the constructor would silently take KeyboardInterrupt
 * away (tests/integration/test_process_preload.sh checks this).  A process
 * that never calls CUDA is thus left exactly as it was.  Never re-installed:
 * a handler a framework installs later simply replaces ours, and its exit
 * path runs our atexit flush.
 *   SIGTERM, SIGINT: only when at the default disposition (a program handler
 *     or an ignored signal is left alone: the handler decides whether the
 *     process ends, and a normal exit flushes through atexit).  Ours flushes
 *     the log, puts the default back and re-raises: the process dies of the
 *     same signal as without the shim.
 *   SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL: unless ignored.  Ours does an
 *     async-signal-safe flush (once), puts the previous disposition back (the
 *     program's handler or the default) and lets the signal happen again: a
 *     fault re-executes the faulting instruction (the previous handler sees
 *     the original siginfo), a sent signal (kill, raise, abort) is re-raised.
 *     SA_ONSTACK so that a thread with an alternate signal stack (Python's
 *     faulthandler sets one) can still flush on a stack overflow.
 *
 * The trainshim tool links this file from libtscore.a: it defines
 * ts_tool_process (see tools/cmd/cmd_run.c) so that the constructor leaves the
 * tool's own signals and exit alone. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/core.h"

/* The log (shim/log/log.c) may not be linked yet: call only what exists. */
void ts_log_shutdown(void) __attribute__((weak));
void ts_log_flush_signal_safe(void) __attribute__((weak));
void ts_log_fork_prepare(void) __attribute__((weak));
void ts_log_fork_parent(void) __attribute__((weak));
void ts_log_fork_child(void) __attribute__((weak));
/* GPU activity through CUPTI (shim/observe/cupti.c): started at the first hook,
 * flushed before the log at exit and on signals. */
void ts_cupti_start(void) __attribute__((weak));
void ts_cupti_stop(void) __attribute__((weak));
void ts_cupti_flush_signal(void) __attribute__((weak));
/* Defined by the trainshim tool only. */
extern const int ts_tool_process __attribute__((weak));

enum { ST_UNINIT, ST_INIT, ST_READY, ST_USED, ST_OFF };
_Static_assert(ST_USED == TS_PROCESS_USED && ST_OFF == TS_PROCESS_OFF, "core.h's inline ts_active");

__thread int ts_tls_depth __attribute__((tls_model("initial-exec")));

_Atomic int ts_process_state = ST_UNINIT;
static __thread bool tls_initializing; /* this thread runs init() */
static _Atomic int fallback_reported;
/* The process whose log this is; a forked child that passes through is not
 * it and never flushes. */
static pid_t owner_pid;
static volatile sig_atomic_t is_passthrough_child;
static bool exit_hooks_registered;

uint64_t ts_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ---- exit and signals -------------------------------------------------------- */

static bool may_write_log(void) { return !is_passthrough_child && getpid() == owner_pid; }

static void at_exit_flush(void)
{
    if (may_write_log() && ts_cupti_stop)
        ts_cupti_stop();
    if (may_write_log() && ts_log_shutdown)
        ts_log_shutdown();
}

static atomic_flag flushed_on_signal = ATOMIC_FLAG_INIT;
static void flush_on_signal(void)
{
    if (!may_write_log() || !ts_log_flush_signal_safe)
        return;
    if (!atomic_flag_test_and_set(&flushed_on_signal)) {
        if (ts_cupti_flush_signal)
            ts_cupti_flush_signal();
        ts_log_flush_signal_safe();
    }
}

static const int term_signals[] = { SIGTERM, SIGINT };
static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL };
#define NSIG_HANDLED 7
static struct sigaction previous[NSIG_HANDLED];
static int handled_signo[NSIG_HANDLED];

static int slot_of(int sig)
{
    for (int i = 0; i < NSIG_HANDLED; i++)
        if (handled_signo[i] == sig)
            return i;
    return -1;
}

static bool is_handler(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) ? sa->sa_sigaction != NULL
                                       : (sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN);
}

static void on_term_signal(int sig, siginfo_t *info, void *uctx)
{
    (void)info;
    (void)uctx;
    int saved_errno = errno;
    int slot = slot_of(sig);
    flush_on_signal();
    if (slot >= 0)
        sigaction(sig, &previous[slot], NULL); /* the default */
    raise(sig);                                /* blocked while we run; delivered when we return */
    errno = saved_errno;
}

static void on_fatal_signal(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    int saved_errno = errno;
    int slot = slot_of(sig);
    flush_on_signal();
    if (slot >= 0)
        sigaction(sig, &previous[slot], NULL);
    /* A fault (si_code > 0, from the kernel) recurs when the instruction is
     * re-executed on return, reaching the previous handler with its original
     * siginfo; a sent signal (kill, raise, abort) must be sent again. */
    if (!info || info->si_code <= 0)
        raise(sig);
    errno = saved_errno;
}

/* only_if_default: leave a program's own handler alone (SIGTERM, SIGINT). */
static void install_one(int slot, int sig, void (*fn)(int, siginfo_t *, void *), bool only_if_default)
{
    struct sigaction old, sa;
    handled_signo[slot] = sig;
    if (sigaction(sig, NULL, &old) != 0)
        return;
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
        return; /* ignored stays ignored (nohup, background jobs) */
    if (only_if_default && is_handler(&old))
        return;
    previous[slot] = old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigaction(sig, &sa, NULL);
}

static void install_handlers(void)
{
    int slot = 0;
    for (size_t i = 0; i < sizeof term_signals / sizeof term_signals[0]; i++)
        install_one(slot++, term_signals[i], on_term_signal, true);
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
        install_one(slot++, fatal_signals[i], on_fatal_signal, false);
}

/* ---- fork ------------------------------------------------------------------- */

static void fork_prepare(void)
{
    if (ts_log_fork_prepare)
        ts_log_fork_prepare();
}

static void fork_parent(void)
{
    if (ts_log_fork_parent)
        ts_log_fork_parent();
}

static void fork_child(void)
{
    if (ts_log_fork_child)
        ts_log_fork_child();
    int s = atomic_load(&ts_process_state);
    if (s == ST_READY) {
        owner_pid = getpid(); /* a fresh process for the shim: its own log */
    } else if (s == ST_USED || s == ST_OFF) {
        is_passthrough_child = 1;
        atomic_store(&ts_process_state, ST_OFF);
    }
}

/* ---- initialization ----------------------------------------------------------- */

static void init(void)
{
    int saved_errno = errno;
    tls_initializing = true;
    /* ts_cfg(): warnings, TRAINSHIM_STRICT, TRAINSHIM_VERBOSE -- or, with
     * TRAINSHIM=0, nothing at all */
    if (ts_config_disabled(ts_cfg())) {
        atomic_store(&ts_process_state, ST_OFF);
    } else {
        owner_pid = getpid();
        if (!exit_hooks_registered) { /* once per process image, forks included */
            exit_hooks_registered = true;
            pthread_atfork(fork_prepare, fork_parent, fork_child);
            atexit(at_exit_flush);
        }
        int expected = ST_INIT; /* a fallback during init wins */
        atomic_compare_exchange_strong(&ts_process_state, &expected, ST_READY);
    }
    tls_initializing = false;
    errno = saved_errno;
}

/* Another thread is initializing: wait for it, but never forever (a deadlock
 * would take the job down; passing through one call does not). */
static int wait_for_init(void)
{
    struct timespec nap = { 0, 100000 }; /* 0.1 ms */
    for (int i = 0; i < 20000; i++) {    /* about 2 s */
        int s = atomic_load(&ts_process_state);
        if (s != ST_INIT)
            return s;
        if (i < 100)
            sched_yield();
        else
            nanosleep(&nap, NULL);
    }
    return ST_INIT;
}

bool ts_active_slow(void)
{
    int s = atomic_load(&ts_process_state);
    for (;;) {
        switch (s) {
        case ST_USED: return true;
        case ST_OFF: return false;
        case ST_READY:
            if (atomic_compare_exchange_strong(&ts_process_state, &s, ST_USED)) {
                install_handlers(); /* once: only this transition's winner */
                if (ts_cupti_start)
                    ts_cupti_start();
                return true;
            }
            continue; /* s was reloaded */
        case ST_UNINIT:
            if (atomic_compare_exchange_strong(&ts_process_state, &s, ST_INIT)) {
                init();
                s = atomic_load(&ts_process_state);
            }
            continue;
        case ST_INIT:
            if (tls_initializing)
                return false; /* re-entered from init itself */
            s = wait_for_init();
            if (s == ST_INIT)
                return false;
            continue;
        default: return false;
        }
    }
}

/* Runs when the library is loaded (LD_PRELOAD: before main): configuration
 * problems are reported (and TRAINSHIM_STRICT acts) at start, not at the
 * first CUDA call, and the fork and exit hooks are registered before the
 * program can fork.  Signal handlers wait for the first hook (see above). */
__attribute__((constructor)) static void process_constructor(void)
{
    if (&ts_tool_process != NULL)
        return;
    int expected = ST_UNINIT;
    if (atomic_compare_exchange_strong(&ts_process_state, &expected, ST_INIT))
        init();
}

void ts_fallback_passthrough(const char *fmt, ...)
{
    atomic_store(&ts_process_state, ST_OFF);
    if (atomic_exchange(&fallback_reported, 1))
        return;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ts_error("%s; continuing in passthrough", what);
}
