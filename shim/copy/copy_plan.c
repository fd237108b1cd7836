/* copy_plan.c: the piece sizes of a converted copy.
 *
 * A converted copy is a pipeline: while piece k crosses the link, piece k+1
 * is staged (H2D) or piece k-1 is copied out (D2H).  Its first piece overlaps
 * nothing (nothing is staged yet), and neither does its last (H2D: the last
 * transfer; D2H: the last copy-out), so both are kept small.  Pieces start at
 * PLAN_FIRST and grow geometrically (each rise - 1 times everything before
 * it) up to the largest piece (one staging buffer), where they stay; toward
 * the end each leaves at least a share of what remains, so they shrink
 * down to PLAN_FIRST again.  Every piece costs a fixed amount (a queued copy,
 * an event, waking the helper threads), so the ramps are steep and the
 * steady pieces large.
 *
 * How steep the rise may be depends on the direction.  An H2D piece can be
 * staged only while the piece before it crosses the link, so a piece g times
 * larger than the one before idles the link unless staging is g times faster
 * than the link: a real server's staging threads are about as fast as PCIe,
 * the emulator's a few times faster, less on a loaded machine.  So after its
 * second piece an H2D copy's pieces at most double (PLAN_RISE_H2D): the ramp
 * to an 8 MiB piece is a piece or two longer, and their fixed costs are
 * smaller than the link idling while a piece four times larger is staged
 * (measured here: a 16 MiB copy's 3 MiB -> 8 MiB step idled the link for up
 * to 1.6 ms of its 8).  The second piece is still three times the first, so
 * that copies of a few MiB keep the few pieces whose fixed costs they would
 * feel (rising by two from the first measured no better).  A D2H
 * copy queues up to four transfers ahead of its copy-outs, so the link never
 * waits for the CPU during the rise: it rises PLAN_RISE_D2H throughout.
 *
 * The shrink differs too.  An H2D piece is staged while the larger one
 * before it crosses, so its pieces may fall steeply (each leaves a quarter
 * of what remains, PLAN_SHRINK_H2D).  A D2H copy ends with copy-outs: each
 * piece's copy-out overlaps only the next piece's transfer, and after the
 * last transfer the link idles until the call returns.  A piece four times
 * smaller than the one before crosses in less time than that one takes to
 * copy out wherever the copy-out is under four times the link's rate (on
 * the emulator, whose transfer is itself a CPU copy; on a server whose
 * staging threads copy slower than PCIe), so D2H pieces halve
 * (PLAN_SHRINK_D2H): the link stays busy while the copy-outs catch up, and
 * the copy-out left after it is a small piece's.  An 8 MiB copy is, H2D,
 * 256 KiB, 768 KiB, 1 MiB, 2 MiB, 3 MiB, 768 KiB, 256 KiB; D2H 256 KiB,
 * 768 KiB, 3 MiB, 2 MiB, 1 MiB, 512 KiB, 256 KiB, 256 KiB.
 *
 * Pieces are multiples of PLAN_ALIGN (so helper threads split them on cache
 * lines) unless the largest piece or the copy itself is not; a remainder
 * under PLAN_ALIGN joins the piece before it. */
#include "copy/copy_engine.h"

enum {
    PLAN_FIRST = 256 << 10,
    PLAN_ALIGN = 64 << 10,
    PLAN_RISE_H2D = 2,
    PLAN_RISE_D2H = 4,
    PLAN_SHRINK_H2D = 4,
    PLAN_SHRINK_D2H = 2,
};

size_t ts_copy_plan_piece(enum ts_copy_engine_dir dir, size_t total, size_t done, size_t largest)
{
    if (done >= total || largest == 0)
        return 0;
    size_t rem = total - done, first = largest < PLAN_FIRST ? largest : PLAN_FIRST;
    size_t rise = dir == TS_CE_H2D && done > first ? PLAN_RISE_H2D : PLAN_RISE_D2H;
    size_t fall = dir == TS_CE_H2D ? PLAN_SHRINK_H2D : PLAN_SHRINK_D2H;
    size_t grow = done < first ? first : (rise - 1) * done, shrink = rem - rem / fall;
    size_t p = grow < shrink ? grow : shrink;
    p &= ~(size_t)(PLAN_ALIGN - 1);
    if (p < first)
        p = first;
    if (p > largest)
        p = largest;
    if (p >= rem || (rem - p < PLAN_ALIGN && rem <= largest))
        return rem;
    return p;
}
