/* The copy engine's helper pool (shim/copy/copy_pool.c), compiled into this test
 * with a test double of the configuration: several callers at once split
 * their memcpys over the helpers, with plain and streaming (non-temporal)
 * stores, at every alignment and at sizes below and above the split
 * threshold; every byte of every destination is checked, and the bytes
 * around it are untouched; the first round with the helpers and callers
 * spinning before they sleep, the second with no helpers.  Also built by hand under -fsanitize=thread (the
 * pool's queue, its job counters and the streamed stores' fence):
 *   cc -fsanitize=thread -std=gnu11 -O1 -g -D_GNU_SOURCE -I/usr/local/cuda/include -Ishim \
 *      tests/integration/test_copy_pool.c -o /tmp/tp -pthread && /tmp/tp */
#include "../../shim/copy/copy_pool.c"

#include <stdio.h>
#include <stdlib.h>

static struct ts_config test_cfg;
const struct ts_config *ts_cfg(void) { return &test_cfg; }

enum { CALLERS = 4, COPIES = 40, MAX_BYTES = 6 << 20, GUARD = 64 };

static unsigned char byte_at(size_t i, unsigned seed) { return (unsigned char)(i * 7u + seed * 13u + (i >> 9)); }

static void *caller(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, rng = id * 2654435761u + 1;
    unsigned char *src = malloc(MAX_BYTES + 64), *dst = malloc(MAX_BYTES + 64 + 2 * GUARD);
    uintptr_t bad = 0;
    if (!src || !dst) return (void *)1;
    for (int k = 0; k < COPIES; k++) {
        rng = rng * 1103515245u + 12345u;
        /* below SPLIT_MIN, around it, and up to several parts per helper */
        static const size_t base[] = {0, 1, 4095, 64 << 10, 1 << 20, (1 << 20) + 1, 3 << 20, MAX_BYTES - 64};
        size_t n = base[rng % 8] + (rng >> 8) % 61, soff = (rng >> 12) % 64, doff = (rng >> 18) % 64;
        if (n > MAX_BYTES) n = MAX_BYTES;
        unsigned seed = id * 100 + (unsigned)k;
        for (size_t i = 0; i < n; i++) src[soff + i] = byte_at(i, seed);
        memset(dst, 0xA5, MAX_BYTES + 64 + 2 * GUARD);
        unsigned char *d = dst + GUARD + doff;
        if (k % 2) ts_copy_pool_memcpy_out(d, src + soff, n);
        else ts_copy_pool_memcpy(d, src + soff, n);
        for (size_t i = 0; i < n && !bad; i++)
            if (d[i] != byte_at(i, seed)) {
                printf("FAIL caller %u copy %d (%zu bytes, %s, offsets %zu/%zu): byte %zu\n", id, k, n,
                       k % 2 ? "streamed" : "plain", soff, doff, i);
                bad = 1;
            }
        for (size_t i = 0; i < GUARD + doff && !bad; i++)   /* before the destination, and GUARD bytes after */
            if (dst[i] != 0xA5 || (i < GUARD && d[n + i] != 0xA5)) {
                printf("FAIL caller %u copy %d: wrote outside the destination\n", id, k);
                bad = 1;
            }
    }
    free(src);
    free(dst);
    return (void *)bad;
}

int main(void)
{
    uintptr_t bad = 0;
    static const uint64_t threads[] = {4, 0};
    for (int t = 0; t < 2; t++) {
        test_cfg.copy_threads = threads[t];
        if (t == 0) {
            /* start the helpers, then let them and the callers spin even on
             * a machine with few CPUs, so the spinning paths run too */
            static char a[1 << 20], b[1 << 20];
            ts_copy_pool_memcpy(a, b, sizeof a);
            __atomic_store_n(&spin_ok, true, __ATOMIC_RELAXED);
        }
        pthread_t th[CALLERS];
        for (uintptr_t i = 0; i < CALLERS; i++) pthread_create(&th[i], NULL, caller, (void *)(i + 10 * (uintptr_t)t));
        for (int i = 0; i < CALLERS; i++) {
            void *r;
            pthread_join(th[i], &r);
            bad += (uintptr_t)r;
        }
    }
    printf("%s: %d callers x %d copies, helpers %d\n", bad ? "FAILED" : "ok", CALLERS, COPIES, n_threads);
    return bad ? 1 : 0;
}
