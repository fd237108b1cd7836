/* exec_fault.c: the fault guard.  Stream ops run with a thread-local jump
 * buffer armed; a SIGSEGV/SIGBUS whose address lies in device memory
 * abandons the op and becomes the sticky CUDA_ERROR_ILLEGAL_ADDRESS, as a
 * kernel fault does on a GPU; emu_fault_access takes the same exit for an
 * access refused by a check (per-device rights the host protection cannot
 * express).  Any other fault goes to whatever handler was
 * installed before ours (or the default action), so a program's own handlers
 * and real crashes behave as without the emulator. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "exec_internal.h"

#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static struct sigaction prev_segv, prev_bus;
static pthread_mutex_t install_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread sigjmp_buf *guard_jmp;
static __thread volatile sig_atomic_t in_guard;
static __thread void *own_altstack;
#define ALTSTACK_BYTES (64 * 1024)

static __thread int chaining;

static void chain(int sig, siginfo_t *info, void *uctx)
{
    struct sigaction *prev = sig == SIGSEGV ? &prev_segv : &prev_bus;
    /* A handler installed after ours that chains back to us would loop:
     * the second time round, take the default action. */
    if (!chaining) {
        chaining = 1;
        if (prev->sa_flags & SA_SIGINFO) {
            if (prev->sa_sigaction) { prev->sa_sigaction(sig, info, uctx); chaining = 0; return; }
        } else if (prev->sa_handler == SIG_IGN) {
            chaining = 0;
            return;
        } else if (prev->sa_handler != SIG_DFL) {
            prev->sa_handler(sig);
            chaining = 0;
            return;
        }
        chaining = 0;
    }
    /* Default action: restore it; returning re-executes the faulting
     * instruction, which now terminates the process with the right signal. */
    signal(sig, SIG_DFL);
}

static void fault_handler(int sig, siginfo_t *info, void *uctx)
{
    if (in_guard && guard_jmp && emu_is_device_addr((uintptr_t)info->si_addr)) {
        in_guard = 0;
        siglongjmp(*guard_jmp, 1);
    }
    chain(sig, info, uctx);
}

static void install_one(int sig, struct sigaction *prev)
{
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) != 0) return;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == fault_handler) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    /* Whatever is installed now (the program's handler, or the default) is
     * what non-device faults are passed to. */
    if (sigaction(sig, &sa, prev) != 0) EMU_WARN_ONCE("cannot install the fault guard");
}

void emu_fault_install(void)
{
    pthread_mutex_lock(&install_mu);
    install_one(SIGSEGV, &prev_segv);
    install_one(SIGBUS, &prev_bus);
    pthread_mutex_unlock(&install_mu);
}

void emu_fault_thread_init(void)
{
    /* Own stack for the handler: a kernel may fault with its stack nearly
     * used up.  One already installed (a sanitizer's) is kept.  mmap, not
     * malloc: ASan's thread teardown unmaps the alternate stack it finds
     * installed, which must then be a whole mapping (and not heap memory). */
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || (cur.ss_flags & SS_DISABLE)) {
        void *mem = mmap(NULL, ALTSTACK_BYTES, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (mem != MAP_FAILED) {
            stack_t ss = {.ss_sp = mem, .ss_size = ALTSTACK_BYTES, .ss_flags = 0};
            if (sigaltstack(&ss, NULL) == 0) own_altstack = mem;
            else munmap(mem, ALTSTACK_BYTES);
        }
    }
    /* A program may have installed its own handler after the driver loaded:
     * put ours back in front of it (it is chained to). */
    emu_fault_install();
}

void emu_fault_thread_exit(void)
{
    if (!own_altstack) return;
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    /* Disabled first: the kernel must not deliver a signal onto freed memory,
     * and a sanitizer's exit hook then finds no stack of ours to unmap. */
    if (sigaltstack(&off, NULL) == 0) munmap(own_altstack, ALTSTACK_BYTES);
    own_altstack = NULL;
}

void emu_fault_access(void)
{
    if (in_guard && guard_jmp) {
        in_guard = 0;
        siglongjmp(*guard_jmp, 1);
    }
    emu_set_sticky(CUDA_ERROR_ILLEGAL_ADDRESS);
    emu_counter_add("faults.illegal_address", 1);
}

bool emu_guarded_run(emu_op_fn fn, void *arg)
{
    sigjmp_buf jb;
    sigjmp_buf *volatile saved = guard_jmp;
    volatile sig_atomic_t was_in = in_guard;
    if (sigsetjmp(jb, 1)) {
        guard_jmp = saved;
        in_guard = was_in;
        emu_set_sticky(CUDA_ERROR_ILLEGAL_ADDRESS);
        emu_counter_add("faults.illegal_address", 1);
        return false;
    }
    guard_jmp = &jb;
    in_guard = 1;
    fn(arg);
    in_guard = was_in;
    guard_jmp = saved;
    return true;
}
