/* The step plan under a training-like loop with random interludes, over the
 * fake provider: each step the same activations, gradients freed mid-forward
 * and made again in the backward pass, logits kept to the next step, frees
 * stream-ordered or not at random; between some steps a pass of random
 * sizes on two streams (plans are adopted, suspended, resumed, dropped and
 * learnt again), now and then a trim.  After every step: ts_pool_check (the
 * pool's structures, shadows included), no call the driver would reject;
 * at the end no handle or mapping left.  Seeds 1..TS_SEEDS (default 24),
 * or EMU_SEED alone; odd seeds complete fences only when the pool waits. */
#include <stdio.h>
#include <stdlib.h>
#include "alloc/alloc.h"
#include "replay/sim_provider.h"

#define MiB (1ull << 20)
static int failures;
#define CHECK(c, ...)                                                                                                  \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                                \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
            failures++;                                                                                                \
            return false;                                                                                              \
        }                                                                                                              \
    } while (0)

static uint64_t rs;
static uint64_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

#define NACT 20
#define NGRAD 8

typedef struct {
    uint64_t logits, grads[NGRAD];
} step_state;

static bool train_step(ts_pool *p, step_state *s)
{
    uint64_t act[NACT], next;
    for (int i = 0; i < NACT; i++) {
        CHECK(ts_pool_alloc(p, (3 + i % 5) * MiB + (i % 3) * 4096, 0, 0, &act[i]) == TS_ALLOC_OK, "activation");
        for (int k = 0; i == NACT / 2 && k < NGRAD; k++)
            if (s->grads[k])
                ts_pool_free(p, s->grads[k], 0, TS_FF_STREAM_ORDERED), s->grads[k] = 0;
    }
    CHECK(ts_pool_alloc(p, 30 * MiB, 0, 0, &next) == TS_ALLOC_OK, "logits");
    if (s->logits)
        ts_pool_free(p, s->logits, 0, TS_FF_STREAM_ORDERED);
    s->logits = next;
    for (int i = NACT - 1; i >= 0; i--) {
        if (i % 3 == 0 && i / 3 < NGRAD)
            CHECK(ts_pool_alloc(p, (2 + i / 3) * MiB + 512, 0, 0, &s->grads[i / 3]) == TS_ALLOC_OK, "gradient");
        ts_pool_free(p, act[i], 0, rnd() % 4 ? TS_FF_STREAM_ORDERED : 0);
    }
    return true;
}

/* A pass of random sizes on two streams, every block freed after it. */
static bool interlude(ts_pool *p)
{
    uint64_t blk[12], on[12];
    int n = 1 + (int)(rnd() % 12);
    for (int i = 0; i < n; i++) {
        on[i] = rnd() % 2 ? 0 : 7;
        CHECK(ts_pool_alloc(p, (1 + rnd() % 40) * MiB, on[i], 0, &blk[i]) == TS_ALLOC_OK, "interlude");
    }
    for (int i = 0; i < n; i++)
        ts_pool_free(p, blk[i], on[i], rnd() % 2 ? TS_FF_STREAM_ORDERED : 0);
    return true;
}

static bool run(uint64_t seed, ts_plan_stats *ps)
{
    rs = seed * 0x9e3779b97f4a7c15ull + 1;
    ts_fake_provider *f = ts_fake_create(4096 * MiB, 2 * MiB);
    ts_fake_set_manual_fences(f, (int)(seed & 1));
    ts_pool_config cfg = { .mode = TS_ALLOC_EXPANDABLE, .capacity = 4096 * MiB, .step_plan = true,
                           .grow_slack_pct = TS_GROW_STEP_PLAN };
    int st;
    ts_pool *p = ts_pool_create(&cfg, ts_fake_provider_table(f), &st);
    CHECK(p, "pool create: %d", st);
    ts_pool_stream_add(p, 0);
    ts_pool_stream_add(p, 7);
    step_state s = { 0 };
    uint64_t params;
    CHECK(ts_pool_alloc(p, 40 * MiB, 0, 0, &params) == TS_ALLOC_OK, "parameters");
    char err[256];
    for (int step = 0; step < 60; step++) {
        if (!train_step(p, &s) || (rnd() % 3 == 0 && !interlude(p)))
            return false;
        if (rnd() % 11 == 0)
            ts_pool_trim(p);
        ts_fake_counters c;
        ts_fake_counters_get(f, &c);
        CHECK(ts_pool_check(p, err, sizeof err) == 0, "seed %lu step %d: %s", (unsigned long)seed, step, err);
        CHECK(c.misuse == 0, "seed %lu step %d: %lu calls the driver would reject", (unsigned long)seed, step,
              (unsigned long)c.misuse);
    }
    ts_pool_plan_stats(p, ps);
    for (int k = 0; k < NGRAD; k++)
        if (s.grads[k])
            ts_pool_free(p, s.grads[k], 0, 0);
    ts_pool_free(p, s.logits, 0, 0);
    ts_pool_free(p, params, 0, 0);
    ts_pool_destroy(p);
    ts_fake_counters c;
    ts_fake_counters_get(f, &c);
    ts_fake_destroy(f);
    CHECK(c.live_handles == 0 && c.mapped_pages == 0 && c.misuse == 0,
          "seed %lu after destroy: handles %lu pages %lu misuse %lu", (unsigned long)seed,
          (unsigned long)c.live_handles, (unsigned long)c.mapped_pages, (unsigned long)c.misuse);
    return true;
}

int main(void)
{
    const char *one = getenv("EMU_SEED"), *many = getenv("TS_SEEDS");
    uint64_t first = one ? strtoull(one, NULL, 0) : 1, last = one ? first : many ? strtoull(many, NULL, 0) : 24;
    uint64_t adopted = 0, suspends = 0, resumes = 0, drops = 0;
    for (uint64_t seed = first; seed <= last; seed++) {
        ts_plan_stats ps;
        if (!run(seed, &ps))
            break;
        adopted += ps.adopted, suspends += ps.suspends, resumes += ps.resumes, drops += ps.drops;
    }
    printf("plans adopted %lu, suspended %lu, resumed %lu, dropped %lu\n", (unsigned long)adopted,
           (unsigned long)suspends, (unsigned long)resumes, (unsigned long)drops);
    if (!one && !failures && (!adopted || !suspends || !resumes || !drops)) {
        printf("FAIL: the seeds did not take plans through every state\n");
        failures++;
    }
    printf(failures ? "%d failures\n" : "ok\n", failures);
    return failures != 0;
}
