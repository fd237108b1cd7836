/* The TLSF free index against a brute-force oracle: a found block fits;
 * nothing is found only when every fitting block shares the request's own
 * class; when the smallest fitting block lies in a higher class, the block
 * found is from that same class (within 1/16 of the best fit); bitmaps,
 * counts and bytes stay exact through random inserts and removals. */
#include <stdio.h>
#include <stdlib.h>
#include "alloc/alloc_internal.h"

#define N 4000
static ts_block blocks[N];
static int in[N];

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t rsize(void)
{
    int shift = (int)(rnd() % 30);
    return ts_round_up(1 + rnd() % (1ull << shift) + (1ull << shift), 512);
}

int main(void)
{
    const char *e = getenv("EMU_SEED");
    if (e)
        rng ^= strtoull(e, NULL, 0) * 0x9e3779b97f4a7c15ull;
    static ts_index ix;
    ts_index_init(&ix);
    int fails = 0;
    uint64_t count = 0, bytes = 0;
    for (int op = 0; op < 100000 && fails < 10; op++) {
        int i = (int)(rnd() % N);
        if (!in[i]) {
            blocks[i].size = rsize();
            blocks[i].addr = (uint64_t)(i + 1) << 40;
            blocks[i].state = TS_B_FREE;
            ts_index_insert(&ix, &blocks[i]);
            in[i] = 1;
            count++;
            bytes += blocks[i].size;
        } else if (rnd() % 2) {
            ts_index_remove(&ix, &blocks[i]);
            in[i] = 0;
            count--;
            bytes -= blocks[i].size;
        }
        if (ix.count != count || ix.bytes != bytes) {
            printf("FAIL count/bytes %lu/%lu want %lu/%lu\n", (unsigned long)ix.count,
                   (unsigned long)ix.bytes, (unsigned long)count, (unsigned long)bytes);
            fails++;
        }
        if (op % 7)
            continue;
        uint64_t want = rsize();
        ts_block *r = ts_index_find(&ix, want);
        int wfl, wsl;
        ts_index_class(want, &wfl, &wsl);
        ts_block *best = NULL;
        for (int k = 0; k < N; k++)
            if (in[k] && blocks[k].size >= want && (!best || blocks[k].size < best->size))
                best = &blocks[k];
        if (r && (r->size < want || !in[r - blocks])) {
            printf("FAIL found %lu for %lu (in index: %d)\n", (unsigned long)r->size, (unsigned long)want, in[r - blocks]);
            fails++;
            continue;
        }
        if (!best) {
            if (r) {
                printf("FAIL found a block where none fits\n");
                fails++;
            }
            continue;
        }
        int bfl, bsl;
        ts_index_class(best->size, &bfl, &bsl);
        int best_above = bfl > wfl || (bfl == wfl && bsl > wsl);
        if (!r && best_above) {
            printf("FAIL nothing found for %lu although %lu fits in a higher class\n",
                   (unsigned long)want, (unsigned long)best->size);
            fails++;
        }
        if (r && best_above) {
            int rfl, rsl;
            ts_index_class(r->size, &rfl, &rsl);
            if (rfl != bfl || rsl != bsl || r->size > best->size + best->size / 16 + 512) {
                printf("FAIL found %lu for %lu; best fit %lu\n", (unsigned long)r->size, (unsigned long)want,
                       (unsigned long)best->size);
                fails++;
            }
        }
    }
    /* bitmaps agree with the lists */
    for (int fl = 0; fl < TS_IDX_FL; fl++)
        for (int sl = 0; sl < TS_IDX_SL; sl++)
            if (!!(ix.sl_map[fl] & (1u << sl)) != !!ix.heads[fl][sl] || (!!ix.sl_map[fl] != !!(ix.fl_map & (1ull << fl)))) {
                printf("FAIL bitmap %d/%d\n", fl, sl);
                fails++;
            }
    uint64_t largest = 0;
    for (int k = 0; k < N; k++)
        if (in[k] && blocks[k].size > largest)
            largest = blocks[k].size;
    if (ts_index_largest(&ix) != largest) {
        printf("FAIL largest %lu want %lu\n", (unsigned long)ts_index_largest(&ix), (unsigned long)largest);
        fails++;
    }
    printf(fails ? "FAILED\n" : "ok\n");
    return fails != 0;
}
