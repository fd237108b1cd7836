/* clock.h: the event log's clock (shim/log/clock.c).  A record's time is taken
 * on the logging thread's fast path as a raw reading of the CPU's invariant
 * counter (x86_64 TSC, aarch64 CNTVCT_EL0: a few ns, no syscall, no vDSO
 * call) and converted to CLOCK_MONOTONIC nanoseconds only when the record is
 * written out.  Where no such counter is known to be invariant, a reading is
 * CLOCK_MONOTONIC nanoseconds already and the conversion is the identity.
 *
 * The conversion is one continuous, non-decreasing function of the counter,
 * fixed once a reading has been converted: records of one thread stay in
 * order and records of different threads stay comparable.  It follows
 * CLOCK_MONOTONIC (NTP slewing included) to within about a microsecond: the
 * log's writer thread measures a fresh (counter, monotonic) pair every
 * ~100 ms (more often at the start) and steers the function toward it,
 * stepping forward or slowing down, never stepping back. */
#ifndef TRAINSHIM_CLOCK_H
#define TRAINSHIM_CLOCK_H
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/* Set once by ts_clock_start, before any reading is taken. */
extern bool ts_clock_counter;

static inline uint64_t ts_clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ts_clock_counter_read(void)
{
#if defined(__x86_64__)
    return __rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v)::"memory");
    return v;
#else
    return 0;
#endif
}

/* A reading for the log: raw counter or CLOCK_MONOTONIC ns. */
static inline uint64_t ts_clock_read(void)
{
    return ts_clock_counter ? ts_clock_counter_read() : ts_clock_mono_ns();
}

/* Set by ts_clock_start: CLOCK_MONOTONIC_COARSE is read through the vDSO
 * (no syscall), so ts_clock_tick is cheap. */
extern bool ts_clock_ticks;

/* The kernel's clock tick (CLOCK_MONOTONIC_COARSE ns: a load of the vDSO's
 * data, 1-4 ms steps), or 0 when it is not cheap to read. */
static inline uint64_t ts_clock_tick(void)
{
    struct timespec ts;
    if (!ts_clock_ticks || clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Choose the source and calibrate it (~200 us on the counter path).  Called
 * when the log opens, before any record is made; again in a fork child that
 * opens its own log.  Returns whether the counter is used. */
bool ts_clock_start(void);
/* A reading converted to CLOCK_MONOTONIC ns.  Async-signal-safe (loads and
 * arithmetic only); any thread. */
uint64_t ts_clock_to_ns(uint64_t reading);
/* ts_clock_to_ns(ts_clock_read()). */
uint64_t ts_clock_now_ns(void);
/* Only the log's writer thread: measure a fresh pair and extend the
 * conversion.  Returns the nanoseconds until it wants to be called again. */
uint64_t ts_clock_calibrate(void);
#endif
