/* The expandable pool in a training loop's steady state, over the fake
 * provider: a step pattern repeated (parameters kept, the previous step's
 * gradients freed during the next forward pass, activations freed in
 * reverse, temporaries, stream-ordered and synchronous frees) makes VMM
 * calls while it warms up and none once settled (its peak reserved / peak
 * allocated is printed); idle pages are unmapped past
 * cfg.idle_release_ns and not before; at the memory limit growth moves idle
 * pages' handles instead of failing; before a plan, a block takes a range
 * it fills exactly before a lower one it would cut, and passes over one of
 * a size asked for lately; a plan interrupted by an evaluation
 * pass resumes after it; ts_pool_check holds throughout. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "alloc/alloc.h"
#include "replay/sim_provider.h"

#define MiB (1ull << 20)
#include "check.h"

static ts_pool *mk(ts_fake_provider **fp, uint64_t cap, uint64_t limit, uint64_t idle_ns, uint32_t slack)
{
    *fp = ts_fake_create(cap, 2 * MiB);
    ts_pool_config cfg = {.mode = TS_ALLOC_EXPANDABLE, .capacity = cap, .memory_limit = limit,
                          .idle_release_ns = idle_ns, .grow_slack_pct = slack,
                          .step_plan = slack == TS_GROW_STEP_PLAN};
    int st;
    ts_pool *p = ts_pool_create(&cfg, ts_fake_provider_table(*fp), &st);
    if (!p) {
        printf("FAIL: pool create %d\n", st);
        exit(1);
    }
    return p;
}

static void check(ts_pool *p, const char *what)
{
    char err[256];
    CHECK(ts_pool_check(p, err, sizeof err) == 0, "%s: %s", what, err);
}

static uint64_t vmm_calls(ts_fake_provider *f)
{
    ts_fake_counters c;
    ts_fake_counters_get(f, &c);
    return c.creates + c.releases + c.maps + c.unmaps + c.set_access;
}

static void finish(ts_pool *p, ts_fake_provider *f)
{
    CHECK(ts_pool_trim(p) == TS_ALLOC_OK, "trim");
    ts_alloc_stats st;
    ts_pool_stats(p, &st);
    CHECK(st.reserved_bytes == 0, "reserved after trim: %lu", (unsigned long)st.reserved_bytes);
    check(p, "finish");
    ts_pool_destroy(p);
    ts_fake_counters c;
    ts_fake_counters_get(f, &c);
    CHECK(c.live_handles == 0 && c.mapped_pages == 0 && c.misuse == 0, "leak: handles %lu pages %lu misuse %lu",
          (unsigned long)c.live_handles, (unsigned long)c.mapped_pages, (unsigned long)c.misuse);
    ts_fake_destroy(f);
}

static uint64_t rng(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* A size like a transformer's tensors: many small ones, mid-size
 * activations, a few large ones, none a multiple of the page. */
static uint64_t tensor_size(uint64_t *s)
{
    uint64_t r = rng(s) % 100;
    if (r < 40)
        return 512 + rng(s) % (256 * 1024);
    if (r < 85)
        return 1 * MiB + rng(s) % (24 * MiB);
    return 32 * MiB + rng(s) % (96 * MiB);
}

#define NPARAM 40
#define NACT 120
#define STREAM 7

/* One training step; grads[] holds the previous step's gradients, freed
 * during this forward pass as zero_grad(set_to_none) does. */
static void step(ts_pool *p, uint64_t *params, uint64_t *grads, uint64_t seed)
{
    uint64_t act[NACT], ptr;
    for (int i = 0; i < NACT; i++) {
        CHECK(ts_pool_alloc(p, tensor_size(&seed), STREAM, 0, &act[i]) == TS_ALLOC_OK, "act %d", i);
        /* a temporary, freed at once (stream-ordered, like torch's frees) */
        if (ts_pool_alloc(p, tensor_size(&seed) / 2 + 512, STREAM, 0, &ptr) == TS_ALLOC_OK)
            ts_pool_free(p, ptr, STREAM, TS_FF_STREAM_ORDERED);
        if (i == NACT / 2)
            for (int k = 0; k < NPARAM; k++) {
                ts_pool_free(p, grads[k], TS_STREAM_NONE, 0);
                grads[k] = 0;
            }
    }
    for (int i = NACT - 1; i >= 0; i--) {
        if (i % 3 == 0 && i / 3 < NPARAM)
            CHECK(ts_pool_alloc(p, ts_pool_lookup(p, params[i / 3], NULL, &ptr) == 0 ? ptr : 4096, STREAM, 0,
                                &grads[i / 3]) == TS_ALLOC_OK,
                  "grad %d", i / 3);
        ts_pool_free(p, act[i], STREAM, TS_FF_STREAM_ORDERED);
    }
}

/* slack TS_GROW_UNBOUNDED: settles with no call; slack 0: reserved stays at
 * the allocated peak, pages keep moving; TS_GROW_STEP_PLAN (the shim's
 * default): the huge blocks' step plan is adopted, reserved stays within 1%
 * of the allocated peak, and the settled steps make no call. */
static void steady_state(uint32_t slack)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, 8192 * MiB, 0, 0, slack);
    ts_pool_stream_add(p, 0);
    uint64_t params[NPARAM], grads[NPARAM] = { 0 }, seed = 7;
    for (int k = 0; k < NPARAM; k++)
        CHECK(ts_pool_alloc(p, tensor_size(&seed), TS_STREAM_NONE, 0, &params[k]) == TS_ALLOC_OK, "param %d", k);
    enum { STEPS = 16 };
    uint64_t calls[STEPS];
    for (int s = 0; s < STEPS; s++) {
        uint64_t before = vmm_calls(f);
        step(p, params, grads, 42);
        calls[s] = vmm_calls(f) - before;
        check(p, "step");
        printf("step %d: %lu VMM calls\n", s + 1, (unsigned long)calls[s]);
    }
    /* this pattern (every tensor a size of its own, grads freed mid-forward)
     * settles later than a GPT's: the last half of the run must be silent */
    CHECK(calls[0] > 0, "the first step mapped nothing: the test measures nothing");
    /* the step plan, in force from the third step, moves in before the
     * fourth (its synchronous frees of the gradients hold ranges it wants
     * until a fence) */
    for (int s = slack == TS_GROW_STEP_PLAN ? 3 : STEPS / 2; s < STEPS && slack != 0; s++)
        CHECK(calls[s] == 0, "step %d made %lu VMM calls", s + 1, (unsigned long)calls[s]);
    ts_alloc_stats st;
    ts_pool_stats(p, &st);
    double ratio = (double)st.peak_reserved_bytes / (double)st.peak_allocated_bytes;
    printf("peak reserved %lu, peak allocated %lu: %.4f; page moves %lu\n", (unsigned long)st.peak_reserved_bytes,
           (unsigned long)st.peak_allocated_bytes, ratio, (unsigned long)st.page_moves);
    if (slack == TS_GROW_UNBOUNDED)
        CHECK(st.page_moves == 0, "pages moved without memory pressure: %lu", (unsigned long)st.page_moves);
    else if (slack == 0)
        CHECK(ratio < 1.03, "slack 0: peak reserved / peak allocated %.4f", ratio);
    if (slack == TS_GROW_STEP_PLAN) {
        ts_plan_stats ps;
        ts_pool_plan_stats(p, &ps);
        printf("step plan: adopted %lu, dropped %lu, period %lu, hits %lu, misses %lu\n",
               (unsigned long)ps.adopted, (unsigned long)ps.drops, (unsigned long)ps.period,
               (unsigned long)ps.hits, (unsigned long)ps.misses);
        CHECK(ps.active && ps.adopted == 1 && ps.drops == 0, "no plan in force");
        CHECK(ratio < 1.02, "step plan: peak reserved / peak allocated %.4f", ratio);
        /* another pattern (other sizes) drops the plan; the pool serves on
         * and learns the new one, whose steps settle again */
        for (int s = 0; s < STEPS; s++) {
            uint64_t before = vmm_calls(f);
            step(p, params, grads, 4242);
            calls[s] = vmm_calls(f) - before;
            check(p, "new pattern");
        }
        ts_pool_plan_stats(p, &ps);
        printf("after a new pattern: adopted %lu, dropped %lu; last step %lu VMM calls\n",
               (unsigned long)ps.adopted, (unsigned long)ps.drops, (unsigned long)calls[STEPS - 1]);
        CHECK(ps.drops >= 1 && ps.adopted >= 2 && ps.active, "the new pattern was not planned");
        CHECK(calls[STEPS - 1] == 0, "new pattern: last step made %lu VMM calls", (unsigned long)calls[STEPS - 1]);
    }
    for (int k = 0; k < NPARAM; k++) {
        ts_pool_free(p, params[k], TS_STREAM_NONE, 0);
        ts_pool_free(p, grads[k], TS_STREAM_NONE, 0);
    }
    finish(p, f);
}

/* One step of a model whose first step also makes tensors kept for good:
 * a workspace mid-forward (cuBLAS's, under torch) and the optimizer's
 * state at its end (Adam's exp_avg and exp_avg_sq).  Activations freed in
 * reverse, the logits kept until the next step replaces them, optimizer
 * temporaries; every free stream-ordered. */
#define XACT 24
static void step_with_extras(ts_pool *p, uint64_t *kept, int *nkept, uint64_t *logits, bool first)
{
    uint64_t act[XACT], ptr, seed = 99;
    for (int i = 0; i < XACT; i++) {
        CHECK(ts_pool_alloc(p, 3 * MiB + rng(&seed) % (20 * MiB), STREAM, 0, &act[i]) == TS_ALLOC_OK, "act");
        if (first && i == 5)
            CHECK(ts_pool_alloc(p, 4 * MiB, STREAM, 0, &kept[(*nkept)++]) == TS_ALLOC_OK, "workspace");
    }
    uint64_t next_logits;
    CHECK(ts_pool_alloc(p, 48 * MiB, STREAM, 0, &next_logits) == TS_ALLOC_OK, "logits");
    if (*logits)
        ts_pool_free(p, *logits, STREAM, TS_FF_STREAM_ORDERED);
    *logits = next_logits;
    for (int i = XACT - 1; i >= 0; i--)
        ts_pool_free(p, act[i], STREAM, TS_FF_STREAM_ORDERED);
    for (int k = 0; first && k < 8; k++)
        CHECK(ts_pool_alloc(p, (5 + k) * MiB, STREAM, 0, &kept[(*nkept)++]) == TS_ALLOC_OK, "state");
    for (int k = 0; k < 8; k++)
        if (ts_pool_alloc(p, (5 + k) * MiB, STREAM, 0, &ptr) == TS_ALLOC_OK)
            ts_pool_free(p, ptr, STREAM, TS_FF_STREAM_ORDERED);
}

/* The plan passes over the first step's kept tensors: learnt from the
 * first two steps and in force from the third (here from its second
 * request: the optimizer's temporaries have its state's sizes, so the
 * step's end is seen at the next step's first request), and from the fifth
 * step on no VMM call. */
static void first_step_extras(void)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, 8192 * MiB, 0, 0, TS_GROW_STEP_PLAN);
    ts_pool_stream_add(p, 0);
    uint64_t kept[16], logits = 0;
    int nkept = 0;
    ts_plan_stats ps;
    enum { STEPS = 10 };
    uint64_t calls[STEPS];
    for (int s = 0; s < STEPS; s++) {
        uint64_t before = vmm_calls(f);
        step_with_extras(p, kept, &nkept, &logits, s == 0);
        calls[s] = vmm_calls(f) - before;
        check(p, "step with extras");
        ts_pool_plan_stats(p, &ps);
        printf("step %d: %lu VMM calls, plan adopted %lu\n", s + 1, (unsigned long)calls[s], (unsigned long)ps.adopted);
        if (s == 2)
            CHECK(ps.adopted == 1 && ps.active && ps.hits >= 16,
                  "no plan in the third step (the first step's extras not skipped): adopted %lu, hits %lu",
                  (unsigned long)ps.adopted, (unsigned long)ps.hits);
    }
    ts_pool_plan_stats(p, &ps);
    CHECK(ps.adopted == 1 && ps.drops == 0 && ps.active, "plan adopted %lu, dropped %lu", (unsigned long)ps.adopted,
          (unsigned long)ps.drops);
    for (int s = 4; s < STEPS; s++)
        CHECK(calls[s] == 0, "step %d made %lu VMM calls", s + 1, (unsigned long)calls[s]);
    ts_alloc_stats st;
    ts_pool_stats(p, &st);
    double ratio = (double)st.peak_reserved_bytes / (double)st.peak_allocated_bytes;
    printf("first-step extras: peak reserved / peak allocated %.4f\n", ratio);
    CHECK(ratio < 1.02, "first-step extras: peak reserved / peak allocated %.4f", ratio);
    for (int k = 0; k < nkept; k++)
        ts_pool_free(p, kept[k], STREAM, TS_FF_STREAM_ORDERED);
    ts_pool_free(p, logits, STREAM, TS_FF_STREAM_ORDERED);
    finish(p, f);
}

/* An evaluation pass between training steps: tensors of other sizes (not
 * the same from one pass to the next), every one freed before the next
 * step. */
static void eval_pass(ts_pool *p, uint64_t seed)
{
    uint64_t act[6];
    for (int i = 0; i < 6; i++)
        CHECK(ts_pool_alloc(p, 5 * MiB + rng(&seed) % (9 * MiB), STREAM, 0, &act[i]) == TS_ALLOC_OK, "eval act");
    for (int i = 5; i >= 0; i--)
        ts_pool_free(p, act[i], STREAM, TS_FF_STREAM_ORDERED);
}

/* A settled plan that an evaluation pass interrupts is suspended, not
 * dropped, and resumes at the next step: one plan for the whole run, no
 * VMM call in the training steps once it settled, and the pool does not
 * grow after the first pass. */
static void eval_between_steps(void)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, 8192 * MiB, 0, 0, TS_GROW_STEP_PLAN);
    ts_pool_stream_add(p, 0);
    uint64_t kept[16], logits = 0;
    int nkept = 0;
    enum { STEPS = 24, FIRST = 8, EVERY = 5 }; /* the first once the plan has settled */
    uint64_t calls[STEPS], reserved_after_first = 0;
    for (int s = 0; s < STEPS; s++) {
        uint64_t before = vmm_calls(f);
        step_with_extras(p, kept, &nkept, &logits, s == 0);
        calls[s] = vmm_calls(f) - before;
        if (s + 1 >= FIRST && (s + 1 - FIRST) % EVERY == 0) {
            eval_pass(p, 11 + (uint64_t)s);
            ts_alloc_stats st;
            ts_pool_stats(p, &st);
            if (!reserved_after_first)
                reserved_after_first = st.reserved_bytes;
            CHECK(st.reserved_bytes == reserved_after_first, "evaluation pass after step %d: reserved %lu, was %lu",
                  s + 1, (unsigned long)st.reserved_bytes, (unsigned long)reserved_after_first);
        }
        check(p, "eval between steps");
    }
    ts_plan_stats ps;
    ts_pool_plan_stats(p, &ps);
    printf("evaluation passes: plan adopted %lu, dropped %lu, suspended %lu, resumed %lu\n", (unsigned long)ps.adopted,
           (unsigned long)ps.drops, (unsigned long)ps.suspends, (unsigned long)ps.resumes);
    CHECK(ps.adopted == 1 && ps.drops == 0 && ps.active, "plan adopted %lu, dropped %lu", (unsigned long)ps.adopted,
          (unsigned long)ps.drops);
    CHECK(ps.suspends == (STEPS - FIRST) / EVERY + 1 && ps.resumes == ps.suspends, "suspended %lu, resumed %lu",
          (unsigned long)ps.suspends, (unsigned long)ps.resumes);
    for (int s = FIRST; s < STEPS; s++)
        CHECK(calls[s] == 0, "training step %d made %lu VMM calls", s + 1, (unsigned long)calls[s]);
    for (int k = 0; k < nkept; k++)
        ts_pool_free(p, kept[k], STREAM, TS_FF_STREAM_ORDERED);
    ts_pool_free(p, logits, STREAM, TS_FF_STREAM_ORDERED);
    finish(p, f);
}

/* One step of a small model whose layers repeat: each layer's forward asks
 * for the same blocks, so a plan of one layer's period is found (and
 * settles) inside the first forward pass, long before the step's own.  The
 * logits live until the next step replaces them; the first step also makes
 * the optimizer's state. */
#define LAYERS 4
static void layered_step(ts_pool *p, uint64_t *state, uint64_t *logits, bool first)
{
    static const uint64_t act_mib[] = { 6, 3, 12, 3 };
    uint64_t act[LAYERS][4], ptr;
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < 4; i++) {
            CHECK(ts_pool_alloc(p, act_mib[i] * MiB + 4096, STREAM, 0, &act[l][i]) == TS_ALLOC_OK, "act");
            if (ts_pool_alloc(p, 9 * MiB, STREAM, 0, &ptr) == TS_ALLOC_OK)
                ts_pool_free(p, ptr, STREAM, TS_FF_STREAM_ORDERED);
        }
    uint64_t next_logits;
    CHECK(ts_pool_alloc(p, 64 * MiB, STREAM, 0, &next_logits) == TS_ALLOC_OK, "logits");
    if (*logits)
        ts_pool_free(p, *logits, STREAM, TS_FF_STREAM_ORDERED);
    *logits = next_logits;
    /* each layer's backward: gradients of its activations' sizes, freed
     * with them (nothing accumulates from one layer to the next) */
    for (int l = LAYERS - 1; l >= 0; l--) {
        uint64_t grad[4];
        for (int i = 3; i >= 0; i--)
            CHECK(ts_pool_alloc(p, act_mib[i] * MiB + 8192, STREAM, 0, &grad[i]) == TS_ALLOC_OK, "grad");
        for (int i = 3; i >= 0; i--) {
            ts_pool_free(p, grad[i], STREAM, TS_FF_STREAM_ORDERED);
            ts_pool_free(p, act[l][i], STREAM, TS_FF_STREAM_ORDERED);
        }
    }
    for (int k = 0; first && k < 6; k++)
        CHECK(ts_pool_alloc(p, 8 * MiB, STREAM, 0, &state[k]) == TS_ALLOC_OK, "state");
}

/* A plan of one layer's period spans a small part of what the pool holds:
 * it must not lift the bound on growth (pages move rather than new ones
 * being made until a plan settles), or the steps after it grow past the
 * allocated peak before the step's own plan takes over. */
static void layer_plan_bounded(void)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, 8192 * MiB, 0, 0, TS_GROW_STEP_PLAN);
    ts_pool_stream_add(p, 0);
    uint64_t state[6], logits = 0, params[4];
    for (int k = 0; k < 4; k++)
        CHECK(ts_pool_alloc(p, 8 * MiB, TS_STREAM_NONE, 0, &params[k]) == TS_ALLOC_OK, "param");
    enum { STEPS = 10 };
    for (int s = 0; s < STEPS; s++) {
        layered_step(p, state, &logits, s == 0);
        check(p, "layered step");
    }
    ts_alloc_stats st;
    ts_pool_stats(p, &st);
    ts_plan_stats ps;
    ts_pool_plan_stats(p, &ps);
    double ratio = (double)st.peak_reserved_bytes / (double)st.peak_allocated_bytes;
    printf("layered steps: peak reserved / peak allocated %.4f; plans adopted %lu, period %lu\n", ratio,
           (unsigned long)ps.adopted, (unsigned long)ps.period);
    CHECK(ps.adopted >= 2, "no layer-period plan before the step's: the test measures nothing (adopted %lu)",
          (unsigned long)ps.adopted);
    CHECK(ratio < 1.08, "layered steps: peak reserved / peak allocated %.4f", ratio);
    for (int k = 0; k < 6; k++)
        ts_pool_free(p, state[k], STREAM, TS_FF_STREAM_ORDERED);
    for (int k = 0; k < 4; k++)
        ts_pool_free(p, params[k], TS_STREAM_NONE, 0);
    ts_pool_free(p, logits, STREAM, TS_FF_STREAM_ORDERED);
    finish(p, f);
}

/* More planned requests than the pool remembers sizes over (65 of 2.5
 * MiB, a size the tests below ask for nowhere else), kept live in aged[]
 * until age_free: before a plan, a free range of a size asked for lately
 * is kept for that size (see kept_for_its_size), which these tests of
 * other rules leave out. */
#define AGE 65
static void age_sizes(ts_pool *p, uint64_t *aged)
{
    for (int i = 0; i < AGE; i++)
        CHECK(ts_pool_alloc(p, 5 * MiB / 2, STREAM, 0, &aged[i]) == TS_ALLOC_OK, "aging %d", i);
}

static void age_free(ts_pool *p, const uint64_t *aged)
{
    for (int i = 0; i < AGE; i++)
        ts_pool_free(p, aged[i], STREAM, TS_FF_STREAM_ORDERED);
}

/* Five planned blocks side by side (sizes in half MiB, none of whole
 * pages: those start on a page boundary, see whole_pages_aligned), the
 * sizes aged (age_sizes), then the second and fourth freed: two free
 * ranges between blocks in use. */
static ts_pool *two_ranges(ts_fake_provider **f, const uint64_t *half_mib, uint64_t *b, uint64_t *aged)
{
    ts_pool *p = mk(f, 1024 * MiB, 0, 0, TS_GROW_STEP_PLAN);
    ts_pool_stream_add(p, STREAM);
    for (int i = 0; i < 5; i++)
        CHECK(ts_pool_alloc(p, half_mib[i] * MiB / 2, STREAM, 0, &b[i]) == TS_ALLOC_OK, "block %d", i);
    CHECK(b[1] == b[0] + half_mib[0] * MiB / 2 && b[3] == b[2] + half_mib[2] * MiB / 2, "blocks not side by side");
    age_sizes(p, aged);
    ts_pool_free(p, b[1], STREAM, TS_FF_STREAM_ORDERED);
    ts_pool_free(p, b[3], STREAM, TS_FF_STREAM_ORDERED);
    return p;
}

/* The pool checked, then every block freed: the three left of two_ranges,
 * the two the test placed (x, y) and the aged ones. */
static void two_ranges_done(ts_pool *p, ts_fake_provider *f, const uint64_t *b, uint64_t x, uint64_t y,
                            const uint64_t *aged, const char *what)
{
    check(p, what);
    age_free(p, aged);
    for (int i = 0; i < 5; i += 2)
        ts_pool_free(p, b[i], STREAM, TS_FF_STREAM_ORDERED);
    ts_pool_free(p, x, STREAM, TS_FF_STREAM_ORDERED);
    ts_pool_free(p, y, STREAM, TS_FF_STREAM_ORDERED);
    finish(p, f);
}

/* Before a plan, a planned block takes the lowest free range unless that
 * leaves a hole smaller than any planned block (under TS_PLAN_MIN) below
 * the next block in use, and a higher range fits exactly: the hole would
 * stay empty, its pages mapped, while its neighbours live.  With no such
 * range, the lowest one that fits is still taken before the top. */
static void no_small_holes(void)
{
    ts_fake_provider *f;
    static const uint64_t half_mib[] = { 19, 11, 19, 9, 19 };
    const uint64_t H = MiB / 2;
    uint64_t b[5], x = 0, y = 0, aged[AGE];
    ts_pool *p = two_ranges(&f, half_mib, b, aged);
    CHECK(ts_pool_alloc(p, 9 * H, STREAM, 0, &x) == TS_ALLOC_OK, "x");
    CHECK(x == b[3], "a 4.5 MiB block went to +%lu half MiB, not to the 4.5 MiB range at +%lu (the 5.5 MiB one "
          "at +%lu leaves a 1 MiB hole)", (unsigned long)((x - b[0]) / H), (unsigned long)((b[3] - b[0]) / H),
          (unsigned long)((b[1] - b[0]) / H));
    CHECK(ts_pool_alloc(p, 9 * H, STREAM, 0, &y) == TS_ALLOC_OK, "y");
    CHECK(y == b[1], "with no exact range left, a 4.5 MiB block went to +%lu half MiB, not to the lowest fit +%lu",
          (unsigned long)((y - b[0]) / H), (unsigned long)((b[1] - b[0]) / H));
    two_ranges_done(p, f, b, x, y, aged, "no small holes");
}

/* Before a plan, a planned block takes a range it fills exactly, higher
 * up, before the lowest range that fits (which it would cut, leaving a
 * remainder that only a smaller block fits): the next request, of the
 * lowest range's size, then finds it whole instead of going above every
 * block in use. */
static void exact_fit_first(void)
{
    ts_fake_provider *f;
    static const uint64_t half_mib[] = { 19, 21, 19, 9, 19 };
    const uint64_t H = MiB / 2;
    uint64_t b[5], x = 0, y = 0, aged[AGE];
    ts_pool *p = two_ranges(&f, half_mib, b, aged);
    CHECK(ts_pool_alloc(p, 9 * H, STREAM, 0, &x) == TS_ALLOC_OK, "x");
    CHECK(x == b[3], "a 4.5 MiB block went to +%lu half MiB, not to the 4.5 MiB range at +%lu (the lowest, "
          "10.5 MiB at +%lu, it would cut)", (unsigned long)((x - b[0]) / H), (unsigned long)((b[3] - b[0]) / H),
          (unsigned long)((b[1] - b[0]) / H));
    CHECK(ts_pool_alloc(p, 21 * H, STREAM, 0, &y) == TS_ALLOC_OK, "y");
    CHECK(y == b[1], "a 10.5 MiB block went to +%lu half MiB, not to the 10.5 MiB range at +%lu",
          (unsigned long)((y - b[0]) / H), (unsigned long)((b[1] - b[0]) / H));
    two_ranges_done(p, f, b, x, y, aged, "exact fit first");
}

/* Before a plan, a free range of a size asked for lately is kept for that
 * size: a smaller block passes it over for the top (where the lowest fit
 * would cut it) and the next request of its size finds it whole; once
 * the size was last asked for long ago (AGE requests), the lowest fit
 * takes it again.  (Sizes in half MiB, none of whole pages.) */
static void kept_for_its_size(void)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, 1024 * MiB, 0, 0, TS_GROW_STEP_PLAN);
    ts_pool_stream_add(p, STREAM);
    const uint64_t H = MiB / 2;
    uint64_t a, b, c, x, y, z, aged[AGE];
    CHECK(ts_pool_alloc(p, 19 * H, STREAM, 0, &a) == TS_ALLOC_OK, "a");
    CHECK(ts_pool_alloc(p, 21 * H, STREAM, 0, &b) == TS_ALLOC_OK, "b");
    CHECK(ts_pool_alloc(p, 19 * H, STREAM, 0, &c) == TS_ALLOC_OK, "c");
    CHECK(b == a + 19 * H && c == b + 21 * H, "blocks not side by side");
    ts_pool_free(p, b, STREAM, TS_FF_STREAM_ORDERED);
    CHECK(ts_pool_alloc(p, 5 * H, STREAM, 0, &x) == TS_ALLOC_OK, "x");
    CHECK(x >= c + 19 * H, "a 2.5 MiB block cut the 10.5 MiB range just freed (at +%lu half MiB of it)",
          (unsigned long)((x - b) / H));
    CHECK(ts_pool_alloc(p, 21 * H, STREAM, 0, &y) == TS_ALLOC_OK, "y");
    CHECK(y == b, "the next 10.5 MiB block went to +%lu half MiB, not to its range at +19",
          (unsigned long)((y - a) / H));
    age_sizes(p, aged);
    ts_pool_free(p, y, STREAM, TS_FF_STREAM_ORDERED);
    CHECK(ts_pool_alloc(p, 5 * H, STREAM, 0, &z) == TS_ALLOC_OK, "z");
    CHECK(z == b, "a size asked for %d requests ago still kept its range: the 2.5 MiB block went to +%lu half MiB",
          AGE, (unsigned long)((z - a) / H));
    check(p, "kept for its size");
    age_free(p, aged);
    ts_pool_free(p, a, STREAM, TS_FF_STREAM_ORDERED);
    ts_pool_free(p, c, STREAM, TS_FF_STREAM_ORDERED);
    ts_pool_free(p, x, STREAM, TS_FF_STREAM_ORDERED);
    ts_pool_free(p, z, STREAM, TS_FF_STREAM_ORDERED);
    finish(p, f);
}

/* Before a plan, a planned block of whole pages starts on a page boundary
 * (the 5 MiB block before it leaves its last page part empty), so that
 * freeing it leaves whole pages idle, which can move, where a block across
 * its neighbours' pages would leave one page at most. */
static void whole_pages_aligned(void)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, 1024 * MiB, 0, 0, TS_GROW_STEP_PLAN);
    ts_pool_stream_add(p, STREAM);
    uint64_t a, b, c;
    CHECK(ts_pool_alloc(p, 5 * MiB, STREAM, 0, &a) == TS_ALLOC_OK, "a");
    CHECK(ts_pool_alloc(p, 6 * MiB, STREAM, 0, &b) == TS_ALLOC_OK, "b");
    CHECK(ts_pool_alloc(p, 5 * MiB, STREAM, 0, &c) == TS_ALLOC_OK, "c");
    CHECK(a % (2 * MiB) == 0 && b == a + 6 * MiB && c == b + 6 * MiB,
          "6 MiB after 5 MiB at +%lu MiB, then 5 MiB at +%lu MiB (want +6, +12)", (unsigned long)((b - a) / MiB),
          (unsigned long)((c - a) / MiB));
    ts_alloc_stats st0, st1;
    ts_pool_stats(p, &st0);
    ts_pool_free(p, b, STREAM, TS_FF_STREAM_ORDERED);
    ts_pool_stats(p, &st1);
    CHECK(st1.idle_pages == st0.idle_pages + 3, "freeing the 6 MiB block left %lu pages idle, want 3",
          (unsigned long)(st1.idle_pages - st0.idle_pages));
    check(p, "whole pages");
    ts_pool_free(p, a, STREAM, TS_FF_STREAM_ORDERED);
    ts_pool_free(p, c, STREAM, TS_FF_STREAM_ORDERED);
    finish(p, f);
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts))
        ;
}

/* Pages idle past the threshold are given back at the next allocation;
 * without a threshold (or before it) they stay mapped. */
static void idle_threshold(uint64_t idle_ns)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, 1024 * MiB, 0, idle_ns, TS_GROW_UNBOUNDED);
    uint64_t big, small;
    CHECK(ts_pool_alloc(p, 64 * MiB, TS_STREAM_NONE, 0, &big) == TS_ALLOC_OK, "big");
    ts_pool_free(p, big, TS_STREAM_NONE, 0);
    CHECK(ts_pool_alloc(p, 4096, TS_STREAM_NONE, 0, &small) == TS_ALLOC_OK, "small at once");
    ts_alloc_stats st;
    ts_pool_stats(p, &st);
    CHECK(st.reserved_bytes == 66 * MiB, "idle pages released before the threshold: reserved %lu",
          (unsigned long)st.reserved_bytes);
    sleep_ms(150);
    uint64_t small2;
    CHECK(ts_pool_alloc(p, 8192, TS_STREAM_NONE, 0, &small2) == TS_ALLOC_OK, "small after the wait");
    ts_pool_stats(p, &st);
    uint64_t want = idle_ns ? 2 * MiB : 66 * MiB;
    CHECK(st.reserved_bytes == want, "threshold %lu ns: reserved %lu, want %lu", (unsigned long)idle_ns,
          (unsigned long)st.reserved_bytes, (unsigned long)want);
    check(p, "idle");
    ts_pool_free(p, small, TS_STREAM_NONE, 0);
    ts_pool_free(p, small2, TS_STREAM_NONE, 0);
    finish(p, f);
}

/* At the memory limit, growth takes idle pages' handles (moves) and stays
 * under the limit; the free blocks over the pages it took are refiled. */
static void limit_moves(void)
{
    ts_fake_provider *f;
    ts_pool *p = mk(&f, 1024 * MiB, 64 * MiB, 0, TS_GROW_UNBOUNDED);
    uint64_t x, y, z;
    CHECK(ts_pool_alloc(p, 32 * MiB, TS_STREAM_NONE, 0, &x) == TS_ALLOC_OK, "x");
    CHECK(ts_pool_alloc(p, 2 * MiB, TS_STREAM_NONE, 0, &y) == TS_ALLOC_OK, "y");
    ts_pool_free(p, x, TS_STREAM_NONE, 0);
    CHECK(ts_pool_alloc(p, 40 * MiB, TS_STREAM_NONE, 0, &z) == TS_ALLOC_OK, "z at the limit");
    ts_alloc_stats st;
    ts_pool_stats(p, &st);
    CHECK(st.reserved_bytes <= 64 * MiB && st.page_moves > 0, "reserved %lu, moves %lu",
          (unsigned long)st.reserved_bytes, (unsigned long)st.page_moves);
    check(p, "after moves");
    /* what is left mapped and free still serves without a driver call */
    uint64_t before = vmm_calls(f), w;
    CHECK(ts_pool_alloc(p, 4 * MiB, TS_STREAM_NONE, 0, &w) == TS_ALLOC_OK, "w");
    CHECK(vmm_calls(f) == before, "mapped free space not used: %lu calls", (unsigned long)(vmm_calls(f) - before));
    check(p, "w");
    ts_pool_free(p, w, TS_STREAM_NONE, 0);
    ts_pool_free(p, z, TS_STREAM_NONE, 0);
    ts_pool_free(p, y, TS_STREAM_NONE, 0);
    finish(p, f);
}

int main(void)
{
    steady_state(TS_GROW_UNBOUNDED);
    steady_state(0);
    steady_state(TS_GROW_STEP_PLAN);
    first_step_extras();
    eval_between_steps();
    layer_plan_bounded();
    no_small_holes();
    exact_fit_first();
    kept_for_its_size();
    whole_pages_aligned();
    idle_threshold(0);
    /* well above a tick of the coarse clock the pool reads (4-10 ms) */
    idle_threshold(50 * 1000000ull);
    limit_moves();
    if (failures) {
        printf("%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
