/* Moves made in advance (shadows, alloc_segment.c) over the fake provider,
 * which counts every call and rejects what the driver rejects (a handle
 * given back while still mapped, a mapping over a mapping):
 *   - a request whose range reaches a shadow page, once the page it
 *     shadows is idle and its fence done, takes the handle there with no
 *     driver call for that page, and the other page becomes the shadow;
 *   - mapping anything at a shadow page first unmaps the shadow;
 *   - trim, which gives idle handles back, unmaps their shadows first;
 *   - destroying the pool leaves nothing mapped and no handle alive.
 * ts_pool_check (shadows and their pages name each other) after each step. */
#include <stdio.h>
#include <stdlib.h>
#include "alloc/alloc_internal.h"
#include "replay/sim_provider.h"

#define MiB (1ull << 20)
#define STREAM 7
#include "check.h"

static void check(ts_pool *p, ts_fake_provider *f, const char *what)
{
    char err[256];
    CHECK(ts_pool_check(p, err, sizeof err) == 0, "%s: %s", what, err);
    ts_fake_counters c;
    ts_fake_counters_get(f, &c);
    CHECK(c.misuse == 0, "%s: %lu calls the driver would reject", what, (unsigned long)c.misuse);
}

static uint64_t page_of(const ts_pool *p, uint64_t va) { return (va - p->va_base) / p->gran; }

static uint64_t calls(ts_fake_provider *f)
{
    ts_fake_counters c;
    ts_fake_counters_get(f, &c);
    return c.creates + c.maps + c.unmaps + c.set_access + c.releases;
}

int main(void)
{
    ts_fake_provider *f = ts_fake_create(1024 * MiB, 2 * MiB);
    ts_pool_config cfg = { .mode = TS_ALLOC_EXPANDABLE, .capacity = 1024 * MiB, .no_thread_cache = true,
                           .grow_slack_pct = TS_GROW_UNBOUNDED };
    int st;
    ts_pool *p = ts_pool_create(&cfg, ts_fake_provider_table(f), &st);
    if (!p) {
        printf("FAIL: pool create %d\n", st);
        return 1;
    }
    ts_pool_stream_add(p, STREAM);
    /* a and b on the first two pages of the large arena, the rest of it one
     * unmapped run from the third page */
    uint64_t a, b, c, d;
    CHECK(ts_pool_alloc(p, 2 * MiB, STREAM, 0, &a) == TS_ALLOC_OK, "alloc a");
    CHECK(ts_pool_alloc(p, 2 * MiB, STREAM, 0, &b) == TS_ALLOC_OK, "alloc b");
    CHECK(b == a + 2 * MiB, "a %#lx and b %#lx not on adjacent pages", (unsigned long)a, (unsigned long)b);
    uint64_t pa = page_of(p, a), shadow = pa + 2;
    CHECK(!p->pages[shadow].mapped, "the page after b is mapped");
    CHECK(ts_seg_shadow_map(p, shadow, pa), "shadow of a's page refused");
    CHECK(ts_fake_mapped(f, p->va_base + shadow * p->gran), "the shadow is not mapped with access");
    check(p, f, "shadow made");

    /* a's page idle; c (two pages) grows from the third page, once the
     * pool has waited for a's fence: the shadow takes a's handle there,
     * the fourth page is new */
    CHECK(ts_pool_free(p, a, STREAM, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free a");
    check(p, f, "a freed");
    uint64_t calls0 = calls(f);
    ts_alloc_stats s0, s1;
    ts_pool_stats(p, &s0);
    CHECK(ts_pool_alloc(p, 4 * MiB, STREAM, 0, &c) == TS_ALLOC_OK, "alloc c");
    ts_pool_stats(p, &s1);
    CHECK(page_of(p, c) == shadow, "c at page %lu, not at the shadow %lu", (unsigned long)page_of(p, c),
          (unsigned long)shadow);
    CHECK(s1.shadow_moves == s0.shadow_moves + 1, "the shadow was not taken up");
    CHECK(calls(f) - calls0 == 3, "c made %lu driver calls, want 3 (its second page: create, map, access)",
          (unsigned long)(calls(f) - calls0));
    CHECK(p->pages[pa].shadow && p->pages[shadow].twin == (int32_t)pa, "a's page is not the shadow now");
    check(p, f, "shadow taken up");

    /* d lands on a's page, now the shadow of c's: unmapped there first */
    CHECK(ts_pool_alloc(p, 2 * MiB, STREAM, 0, &d) == TS_ALLOC_OK, "alloc d");
    CHECK(page_of(p, d) == pa, "d at page %lu, not on a's %lu", (unsigned long)page_of(p, d), (unsigned long)pa);
    CHECK(!p->pages[pa].shadow && p->pages[shadow].twin < 0, "d's page still a shadow");
    check(p, f, "mapped over a shadow");

    /* a shadow of an idle page when the pool is trimmed and destroyed */
    CHECK(ts_pool_free(p, d, STREAM, TS_FF_STREAM_ORDERED) == TS_ALLOC_OK, "free d");
    uint64_t far = page_of(p, c) + 8;
    CHECK(ts_seg_shadow_map(p, far, pa), "second shadow refused");
    CHECK(ts_pool_trim(p) == TS_ALLOC_OK, "trim");
    CHECK(!ts_fake_mapped(f, p->va_base + far * p->gran), "trim gave a handle back with its shadow mapped");
    check(p, f, "trim");
    CHECK(ts_seg_shadow_map(p, far, page_of(p, c)), "third shadow refused");
    ts_pool_free(p, b, STREAM, TS_FF_STREAM_ORDERED);
    ts_pool_free(p, c, STREAM, TS_FF_STREAM_ORDERED);
    ts_pool_destroy(p);
    ts_fake_counters fc;
    ts_fake_counters_get(f, &fc);
    CHECK(fc.live_handles == 0 && fc.mapped_pages == 0 && fc.misuse == 0,
          "after destroy: handles %lu pages %lu misuse %lu", (unsigned long)fc.live_handles,
          (unsigned long)fc.mapped_pages, (unsigned long)fc.misuse);
    ts_fake_destroy(f);
    printf(failures ? "%d failures\n" : "ok\n", failures);
    return failures != 0;
}
