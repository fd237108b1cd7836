/* offload_pause.c: pause and resume by tag, the signal that toggles them,
 * and the ranges that never move (NCCL-registered buffers).
 *
 * Tags: an allocation made while trainshim_tag(t) is in effect on its thread
 * carries t.  Pause(t) moves the pages under live allocations tagged t (all
 * live pages for t = 0) to host backing after the pools gave back their idle
 * pages, so the device memory is free for another process; resume(t) moves
 * the pages pause(t) moved back.  A paused buffer stays usable (slower). */
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/core.h"
#include "offload/offload_internal.h"

__thread unsigned ts_offload_thread_tag __attribute__((tls_model("initial-exec")));

unsigned ts_offload_set_tag(unsigned tag)
{
    unsigned old = ts_offload_thread_tag;
    ts_offload_thread_tag = tag;
    return old;
}

static bool range_add(struct ts_off_range **arr, size_t *n, size_t *cap, uint64_t ptr, uint64_t size,
                      unsigned tag)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        struct ts_off_range *a = realloc(*arr, c * sizeof *a);
        if (!a)
            return false;
        *arr = a;
        *cap = c;
    }
    (*arr)[(*n)++] = (struct ts_off_range){ ptr, size, tag, 0 };
    return true;
}

static void range_remove(struct ts_off_range *arr, size_t *n, uint64_t ptr)
{
    for (size_t i = 0; i < *n; i++)
        if (arr[i].ptr == ptr) {
            arr[i] = arr[--*n];
            return;
        }
}

/* Some range of arr (tag matching unless any_tag) overlaps [va, va+size). */
static bool overlaps(const struct ts_off_range *arr, size_t n, uint64_t va, uint64_t size, unsigned tag,
                     bool any_tag)
{
    for (size_t i = 0; i < n; i++)
        if ((any_tag || arr[i].tag == tag) && arr[i].ptr < va + size && va < arr[i].ptr + arr[i].size)
            return true;
    return false;
}

void ts_offload_note_tagged_alloc(uint64_t ptr, uint64_t size)
{
    pthread_mutex_lock(&ts_off.lock);
    range_add(&ts_off.tagged, &ts_off.ntagged, &ts_off.captagged, ptr, size, ts_offload_thread_tag);
    pthread_mutex_unlock(&ts_off.lock);
}

void ts_offload_note_free(uint64_t ptr)
{
    if (!__atomic_load_n(&ts_off.ntagged, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&ts_off.lock);
    range_remove(ts_off.tagged, &ts_off.ntagged, ptr);
    pthread_mutex_unlock(&ts_off.lock);
}

void ts_offload_pin(uint64_t ptr, uint64_t size)
{
    pthread_mutex_lock(&ts_off.lock);
    range_add(&ts_off.pinned, &ts_off.npinned, &ts_off.cappinned, ptr, size, 0);
    pthread_mutex_unlock(&ts_off.lock);
}

void ts_offload_unpin(uint64_t ptr)
{
    pthread_mutex_lock(&ts_off.lock);
    range_remove(ts_off.pinned, &ts_off.npinned, ptr);
    pthread_mutex_unlock(&ts_off.lock);
}

void ts_offload_pin_key(uint64_t ptr, uint64_t key)
{
    pthread_mutex_lock(&ts_off.lock);
    for (size_t i = ts_off.npinned; i-- > 0;)
        if (ts_off.pinned[i].ptr == ptr && !ts_off.pinned[i].key) {
            ts_off.pinned[i].key = key;
            break;
        }
    pthread_mutex_unlock(&ts_off.lock);
}

void ts_offload_unpin_key(uint64_t key)
{
    pthread_mutex_lock(&ts_off.lock);
    for (size_t i = 0; i < ts_off.npinned; i++)
        if (ts_off.pinned[i].key == key) {
            ts_off.pinned[i] = ts_off.pinned[--ts_off.npinned];
            break;
        }
    pthread_mutex_unlock(&ts_off.lock);
}

bool ts_off_pinned(uint64_t va, uint64_t size)
{
    pthread_mutex_lock(&ts_off.lock);
    bool pinned = overlaps(ts_off.pinned, ts_off.npinned, va, size, 0, true);
    pthread_mutex_unlock(&ts_off.lock);
    return pinned;
}

/* ---- the paused pages (ts_off.lock held) ---- */

static bool paused_add(uint64_t handle, unsigned tag, uint64_t bytes)
{
    if (ts_off.npaused == ts_off.cappaused) {
        size_t c = ts_off.cappaused ? 2 * ts_off.cappaused : 256;
        struct ts_off_paused *a = realloc(ts_off.paused, c * sizeof *a);
        if (!a)
            return false;
        ts_off.paused = a;
        ts_off.cappaused = c;
    }
    ts_off.paused[ts_off.npaused++] = (struct ts_off_paused){ handle, tag };
    ts_off.paused_bytes += bytes;
    return true;
}

/* Takes handle off the paused list if a pause with tag (any for 0) put it there. */
static bool paused_take(uint64_t handle, unsigned tag, uint64_t bytes)
{
    for (size_t i = 0; i < ts_off.npaused; i++)
        if (ts_off.paused[i].handle == handle && (tag == 0 || ts_off.paused[i].tag == tag)) {
            ts_off.paused[i] = ts_off.paused[--ts_off.npaused];
            ts_off.paused_bytes -= bytes;
            return true;
        }
    return false;
}

struct pause_arg {
    unsigned tag;
    uint64_t moved;
};

static bool pause_wants(struct ts_off_dev *d, ts_page_view *v, unsigned tag)
{
    (void)d;
    if (!v->live || v->exported || ts_off_pinned(v->va, v->size) || ts_off_host_has(v->handle))
        return false;
    if (tag == 0)
        return true;
    pthread_mutex_lock(&ts_off.lock);
    bool tagged = overlaps(ts_off.tagged, ts_off.ntagged, v->va, v->size, tag, false);
    pthread_mutex_unlock(&ts_off.lock);
    return tagged;
}

static int pause_page(void *arg, struct ts_off_dev *d, ts_page_view *v)
{
    struct pause_arg *a = arg;
    if (!pause_wants(d, v, a->tag))
        return 0;
    int rc = ts_off_move_page(d, v, true);
    if (rc == TS_PROV_OOM)
        return 0; /* host memory short: this page stays on the device */
    if (rc)
        return -1;
    pthread_mutex_lock(&ts_off.lock);
    paused_add(v->handle, a->tag, v->size);
    pthread_mutex_unlock(&ts_off.lock);
    a->moved += v->size;
    return 0;
}

static int resume_page(void *arg, struct ts_off_dev *d, ts_page_view *v)
{
    struct pause_arg *a = arg;
    pthread_mutex_lock(&ts_off.lock);
    bool mine = paused_take(v->handle, a->tag, v->size);
    pthread_mutex_unlock(&ts_off.lock);
    if (!mine)
        return 0;
    uint64_t h = v->handle;
    int rc = ts_off_move_page(d, v, false);
    if (rc == TS_PROV_OK) {
        a->moved += v->size;
        return 0;
    }
    pthread_mutex_lock(&ts_off.lock);
    paused_add(h, a->tag, v->size); /* still paused: a later resume tries again */
    pthread_mutex_unlock(&ts_off.lock);
    return rc == TS_PROV_OOM ? 0 : -1;
}

int ts_offload_pause(unsigned tag)
{
    if (ts_offload_mode() != TS_OFFLOAD_ON)
        return -1;
    for (int i = 0; i < TS_OFF_MAX_DEV; i++)
        if (ts_off.dev[i].stopped)
            return -1; /* moves stopped after a failure */
    for (int i = 0; i < TS_OFF_MAX_DEV; i++)
        if (ts_off.dev[i].pool)
            ts_pool_trim(ts_off.dev[i].pool); /* idle pages go back rather than move */
    uint64_t t0 = ts_now_ns();
    struct pause_arg a = { tag, 0 };
    int rc = ts_off_walk_all(pause_page, &a, false);
    __atomic_fetch_add(&ts_off.pauses, 1, __ATOMIC_RELAXED);
    ts_off_note_pause(true, tag, a.moved, ts_now_ns() - t0);
    return rc ? -1 : 0;
}

int ts_offload_resume(unsigned tag)
{
    if (ts_offload_mode() != TS_OFFLOAD_ON)
        return -1;
    uint64_t t0 = ts_now_ns();
    struct pause_arg a = { tag, 0 };
    int rc = ts_off_walk_all(resume_page, &a, true);
    __atomic_fetch_add(&ts_off.resumes, 1, __ATOMIC_RELAXED);
    ts_off_note_pause(false, tag, a.moved, ts_now_ns() - t0);
    return rc ? -1 : 0;
}

/* ---- the signal trigger: TRAINSHIM_OFFLOAD_SIGNAL toggles pause(0) and
 * resume(0) on a thread of its own (nothing but sem_post in the handler) */

static sem_t signal_sem;
static bool signal_ready;

static void on_signal(int sig)
{
    (void)sig;
    sem_post(&signal_sem);
}

static void *signal_thread(void *arg)
{
    (void)arg;
    bool paused = false;
    for (;;) {
        while (sem_wait(&signal_sem) != 0) {
        }
        ts_tls_depth++; /* the shim's own CUDA calls are not the program's */
        int rc = paused ? ts_offload_resume(0) : ts_offload_pause(0);
        ts_tls_depth--;
        if (rc == 0)
            paused = !paused;
    }
    return NULL;
}

void ts_off_signal_setup(int dev)
{
    (void)dev;
    int sig = (int)ts_cfg()->offload_signal;
    if (!sig || __atomic_exchange_n(&signal_ready, true, __ATOMIC_ACQ_REL))
        return;
    if (sig >= NSIG || sem_init(&signal_sem, 0, 0) != 0) {
        ts_warn("TRAINSHIM_OFFLOAD_SIGNAL=%d is not a usable signal; no signal trigger", sig);
        return;
    }
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    bool ok = pthread_create(&t, &at, signal_thread, NULL) == 0;
    pthread_attr_destroy(&at);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    if (!ok || sigaction(sig, &sa, NULL) != 0)
        ts_warn("cannot install the offload signal trigger (signal %d)", sig);
}
