/* copy_plan.c: the piece sizes of a converted copy.
 *
 * A converted copy is a pipeline: while piece k crosses the link, piece k+1
 * is staged (H2D) or piece k-1 is copied out (D2H).  Its first piece overlaps
 * nothing (nothing is staged yet), and neither does its last (H2D: the last
 * transfer; D2H: the last copy-out), so both are kept small.  Pieces start at
 * PLAN_FIRST and grow geometrically (each PLAN_GROWTH - 1 times everything
 * before it) up to the largest piece (one staging buffer), where they stay;
 * toward the end each leaves at least 1/PLAN_GROWTH of what remains, so they
 * shrink down to PLAN_FIRST again.  Every piece costs a fixed amount (a
 * queued copy, an event, waking the helper threads), so the ramps are steep
 * and the steady pieces large: an 8 MiB copy is 6 pieces, 256 KiB, 768 KiB,
 * 3 MiB, 3 MiB, 768 KiB, 256 KiB.
 *
 * Pieces are multiples of PLAN_ALIGN (so helper threads split them on cache
 * lines) unless the largest piece or the copy itself is not; a remainder
 * under PLAN_ALIGN joins the piece before it. */
#include "copy/copy_engine.h"

enum {
    PLAN_FIRST = 256 << 10,
    PLAN_ALIGN = 64 << 10,
    PLAN_GROWTH = 4,
};

size_t ts_copy_plan_piece(size_t total, size_t done, size_t largest)
{
    if (done >= total || largest == 0)
        return 0;
    size_t rem = total - done, first = largest < PLAN_FIRST ? largest : PLAN_FIRST;
    size_t grow = done < first ? first : (PLAN_GROWTH - 1) * done, shrink = rem - rem / PLAN_GROWTH;
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
