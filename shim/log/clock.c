/* clock.c: the event log's clock (see clock.h).
 *
 * Conversion.  The function from counter readings to CLOCK_MONOTONIC ns is
 * piecewise linear: point k (tsc_k, ns_k, mult_k) maps t in [tsc_k,
 * tsc_k+1) to ns_k + (t - tsc_k) * mult_k / 2^32.  Points are only appended
 * (by the log's writer thread), to a ring that readers -- any thread, the
 * signal-time flush included -- search from the newest down; a reading past
 * the newest point is extrapolated along it.  Two rules keep every value
 * ever handed out valid forever, so that records of one thread never go
 * back in time and records of different threads compare:
 *   - a new point's counter value (its anchor) lies MARGIN_NS in the future
 *     when it is published, so no reading already converted by
 *     extrapolation lies past it;
 *   - at its anchor the new point is at or above the previous segment: when
 *     the measured clock is ahead it steps forward to it, when it is behind
 *     the new segment runs slower until it meets it (never a step back).
 *
 * Calibration.  A (counter, monotonic) pair is read as the midpoint of two
 * counter reads around clock_gettime, the narrowest of a few tries; a pair
 * wider than MAX_PAIR_WIDTH_NS (the thread was preempted) is not used.  The
 * rate comes from the newest pair and one up to HIST calibrations older
 * (about a second back, so NTP's slewing of CLOCK_MONOTONIC is followed and
 * read jitter of ~20 ns weighs ~0.02 ppm).  The first rate is measured over
 * START_WINDOW_NS when the log opens; calibrations then come at 2, 4, 8 ...
 * ms, then every PERIOD_NS. */
#include "log/clock.h"

#include <stdatomic.h>
#include <sys/auxv.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "core/core.h"

#define SLOTS 64
#define HIST 12
#define START_WINDOW_NS 200000ull
#define FIRST_PERIOD_NS 2000000ull
#define PERIOD_NS 100000000ull
#define RETRY_NS 5000000ull
#define MARGIN_NS 5000000ull
#define MAX_PAIR_WIDTH_NS 2000ull

bool ts_clock_counter;
bool ts_clock_ticks;

struct point {
    _Atomic uint64_t tsc, ns, mult; /* mult: ns per count * 2^32 */
};
static struct point g_pts[SLOTS];
static _Atomic uint64_t g_npts; /* points published; slot = index % SLOTS */

/* writer thread only */
struct pair {
    uint64_t tsc, ns;
};
static struct pair w_hist[HIST];
static unsigned w_nhist;
static uint64_t w_period;

#if defined(__SIZEOF_INT128__)
typedef unsigned __int128 u128;
static inline uint64_t scale(uint64_t d, uint64_t mult) { return (uint64_t)(((u128)d * mult) >> 32); }
/* ns per count * 2^32 from two pairs (0 when unusable) */
static uint64_t rate_of(const struct pair *a, const struct pair *b)
{
    if (b->tsc <= a->tsc || b->ns <= a->ns)
        return 0;
    return (uint64_t)((((u128)(b->ns - a->ns)) << 32) / (b->tsc - a->tsc));
}
/* counts in ns at rate */
static uint64_t counts_of(uint64_t ns, uint64_t rate) { return (uint64_t)(((u128)ns << 32) / rate); }
/* rate * num / den */
static uint64_t rate_times(uint64_t rate, uint64_t num, uint64_t den)
{
    return (uint64_t)((u128)rate * num / den);
}
#define HAVE_MATH 1
#else
/* no 128-bit arithmetic: the counter is never used (counter_invariant) */
#define HAVE_MATH 0
static inline uint64_t scale(uint64_t d, uint64_t mult)
{
    (void)mult;
    return d;
}
static uint64_t rate_of(const struct pair *a, const struct pair *b)
{
    (void)a;
    (void)b;
    return 0;
}
static uint64_t counts_of(uint64_t ns, uint64_t rate)
{
    (void)rate;
    return ns;
}
static uint64_t rate_times(uint64_t rate, uint64_t num, uint64_t den)
{
    (void)num;
    (void)den;
    return rate;
}
#endif

/* Is there a counter whose rate never changes (P-states, C-states) and that
 * all CPUs share? */
static bool counter_invariant(void)
{
#if defined(__x86_64__) && HAVE_MATH
    unsigned a, b, c, d;
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) < 0x80000007u) /* int under clang */
        return false;
    __cpuid(0x80000007u, a, b, c, d);
    (void)a, (void)b, (void)c;
    return (d >> 8) & 1; /* invariant TSC */
#elif defined(__aarch64__) && HAVE_MATH
    return true; /* the architected generic timer runs at a fixed frequency */
#else
    return false;
#endif
}

/* The narrowest of a few (counter, monotonic) reads; returns its width in
 * counts. */
static uint64_t measure(struct pair *p)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = ts_clock_counter_read();
        uint64_t n = ts_clock_mono_ns();
        uint64_t b = ts_clock_counter_read();
        if (b >= a && b - a < best) {
            best = b - a;
            p->tsc = a + (b - a) / 2;
            p->ns = n;
        }
    }
    return best;
}

static uint64_t seg_eval(uint64_t tsc, uint64_t ns, uint64_t mult, uint64_t t)
{
    if (t >= tsc)
        return ns + scale(t - tsc, mult);
    uint64_t back = scale(tsc - t, mult); /* older than the ring: along the oldest point */
    return back < ns ? ns - back : 0;
}

static void publish(uint64_t tsc, uint64_t ns, uint64_t mult)
{
    uint64_t n = atomic_load_explicit(&g_npts, memory_order_relaxed);
    struct point *s = &g_pts[n % SLOTS];
    atomic_store_explicit(&s->tsc, tsc, memory_order_relaxed);
    atomic_store_explicit(&s->ns, ns, memory_order_relaxed);
    atomic_store_explicit(&s->mult, mult, memory_order_relaxed);
    atomic_store_explicit(&g_npts, n + 1, memory_order_release);
}

static void hist_push(const struct pair *p)
{
    if (w_nhist == HIST) {
        for (unsigned i = 1; i < HIST; i++)
            w_hist[i - 1] = w_hist[i];
        w_nhist--;
    }
    w_hist[w_nhist++] = *p;
}

bool ts_clock_start(void)
{
    /* without the vDSO a coarse reading is a system call: dearer than the counter */
    ts_clock_ticks = getauxval(AT_SYSINFO_EHDR) != 0;
    ts_clock_counter = false;
    atomic_store(&g_npts, 0);
    w_nhist = 0;
    if (!counter_invariant())
        return false;
    struct pair p0, p1;
    measure(&p0);
    do
        measure(&p1);
    while (p1.ns - p0.ns < START_WINDOW_NS);
    uint64_t mult = rate_of(&p0, &p1);
    if (!mult)
        return false;
    hist_push(&p0);
    hist_push(&p1);
    publish(p1.tsc, p1.ns, mult);
    w_period = FIRST_PERIOD_NS;
    ts_clock_counter = true;
    return true;
}

uint64_t ts_clock_to_ns(uint64_t t)
{
    if (!ts_clock_counter)
        return t;
    for (int tries = 0;; tries++) {
        uint64_t n = atomic_load_explicit(&g_npts, memory_order_acquire);
        uint64_t oldest = n > SLOTS - 1 ? n - (SLOTS - 1) : 0;
        uint64_t k = n - 1;
        uint64_t tk = atomic_load_explicit(&g_pts[k % SLOTS].tsc, memory_order_acquire);
        while (t < tk && k > oldest) {
            k--;
            tk = atomic_load_explicit(&g_pts[k % SLOTS].tsc, memory_order_acquire);
        }
        uint64_t nk = atomic_load_explicit(&g_pts[k % SLOTS].ns, memory_order_acquire);
        uint64_t mk = atomic_load_explicit(&g_pts[k % SLOTS].mult, memory_order_acquire);
        /* the writer rewrites slot k only once SLOTS newer points exist */
        if (atomic_load_explicit(&g_npts, memory_order_acquire) - k < SLOTS - 1 || tries >= 3)
            return seg_eval(tk, nk, mk, t);
    }
}

uint64_t ts_clock_now_ns(void)
{
    return ts_clock_counter ? ts_clock_to_ns(ts_clock_counter_read()) : ts_clock_mono_ns();
}

uint64_t ts_clock_calibrate(void)
{
    if (!ts_clock_counter)
        return PERIOD_NS * 10;
    struct pair p;
    uint64_t width = measure(&p);
    uint64_t n = atomic_load_explicit(&g_npts, memory_order_relaxed);
    const struct point *last = &g_pts[(n - 1) % SLOTS];
    uint64_t tl = atomic_load_explicit(&last->tsc, memory_order_relaxed);
    uint64_t nl = atomic_load_explicit(&last->ns, memory_order_relaxed);
    uint64_t ml = atomic_load_explicit(&last->mult, memory_order_relaxed);
    if (width == UINT64_MAX || scale(width, ml) > MAX_PAIR_WIDTH_NS)
        return RETRY_NS; /* preempted while reading: no trustworthy pair */
    uint64_t rate = rate_of(&w_hist[0], &p);
    if (!rate)
        return RETRY_NS;
    uint64_t margin = counts_of(MARGIN_NS, rate);
    uint64_t anchor = p.tsc + margin;
    if (anchor <= tl)
        return RETRY_NS;
    hist_push(&p);
    uint64_t line = seg_eval(tl, nl, ml, anchor);
    uint64_t target = p.ns + scale(margin, rate);
    uint64_t ns = target, mult = rate;
    if (target < line) {
        /* the log's clock is ahead: keep it continuous and let it run slower
         * until the monotonic clock catches up, about one period later */
        uint64_t lag = line - target, span = w_period;
        ns = line;
        mult = lag >= span / 2 ? rate / 2 : rate_times(rate, span - lag, span);
    }
    /* preempted past the margin: the anchor is no longer in the future */
    if (ts_clock_counter_read() + margin / 4 >= anchor)
        return RETRY_NS;
    publish(anchor, ns, mult);
    w_period = w_period * 2 > PERIOD_NS ? PERIOD_NS : w_period * 2;
    return w_period;
}
