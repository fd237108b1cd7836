/* comm.c: the communicators the shim has seen (comm.h).  Creation and
 * destruction are rare and take a mutex; the lookup every collective makes
 * is lock-free: a slot's info is written before its key is published with a
 * release store, and readers acquire the key.  A slot is reused only after
 * its communicator was destroyed, when the program may no longer name it. */
#include <pthread.h>
#include <string.h>

#include "observe/comm.h"
#include "core/core.h"
#include "log/logfmt.h"

#define COMM_SLOTS 256

struct comm_slot {
    const void *key; /* the ncclComm_t; NULL: free (__atomic builtins) */
    struct ts_comm_info info;
    uint64_t splits; /* ncclCommSplit calls with this parent */
};

static struct comm_slot slots[COMM_SLOTS];
static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;

uint64_t ts_comm_id_from_unique(const void *unique_id, size_t len)
{
    const unsigned char *p = unique_id;
    uint64_t h = 0x6a09e667f3bcc909ull;
    for (size_t i = 0; i < len; i++)
        h = ts_rec_mix64(h ^ p[i]) + i;
    return h ? h : 1;
}

uint64_t ts_comm_id_from_split(uint64_t parent_id, int color, uint64_t seq)
{
    uint64_t h = ts_rec_mix64(parent_id ^ 0x3c6ef372fe94f82bull)
                 ^ ts_rec_mix64((uint64_t)(uint32_t)color + 0x100000000ull * (seq + 1));
    return h ? h : 1;
}

static struct comm_slot *find(const void *comm)
{
    for (int i = 0; i < COMM_SLOTS; i++)
        if (__atomic_load_n(&slots[i].key, __ATOMIC_ACQUIRE) == comm)
            return &slots[i];
    return NULL;
}

void ts_comm_remember(const void *comm, const struct ts_comm_info *info)
{
    if (!comm)
        return;
    pthread_mutex_lock(&slots_mu);
    struct comm_slot *s = find(comm);
    if (!s)
        for (int i = 0; i < COMM_SLOTS && !s; i++)
            if (!__atomic_load_n(&slots[i].key, __ATOMIC_RELAXED))
                s = &slots[i];
    if (s) {
        /* unpublish while rewriting, so no reader sees half an entry */
        __atomic_store_n(&s->key, NULL, __ATOMIC_RELEASE);
        s->info = *info;
        s->splits = 0;
        __atomic_store_n(&s->key, comm, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&slots_mu);
}

bool ts_comm_lookup(const void *comm, struct ts_comm_info *out)
{
    struct comm_slot *s = comm ? find(comm) : NULL;
    if (!s)
        return false;
    *out = s->info;
    return true;
}

bool ts_comm_forget(const void *comm, struct ts_comm_info *out)
{
    bool found = false;
    pthread_mutex_lock(&slots_mu);
    struct comm_slot *s = comm ? find(comm) : NULL;
    if (s) {
        *out = s->info;
        found = true;
        __atomic_store_n(&s->key, NULL, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&slots_mu);
    return found;
}

uint64_t ts_comm_next_split(const void *parent)
{
    uint64_t seq = 0;
    pthread_mutex_lock(&slots_mu);
    struct comm_slot *s = parent ? find(parent) : NULL;
    if (s)
        seq = s->splits++;
    pthread_mutex_unlock(&slots_mu);
    return seq;
}
