/* The copy engine's piece plan (shim/copy/copy_plan.c, ts_copy_plan_piece):
 * for every copy size around each boundary the plan has (1 byte, the 64 KiB
 * alignment, the 256 KiB first piece, the largest piece, one byte over it,
 * multiples and misaligned sizes, random sizes) and several largest-piece
 * settings (the option's minimum, a size that is not a multiple of the
 * alignment, 2 MiB, the 8 MiB default, 16 MiB), the pieces taken one after
 * another cover the copy exactly, none is empty or larger than the largest
 * piece, the first and last are small, the sizes rise then fall (never up
 * again after going down), copies of at least four largest pieces reach the
 * largest piece, and the number of pieces stays near total / largest plus
 * the two ramps (geometric: a logarithmic number of pieces each); all of it
 * for both directions' plans, and an H2D piece after the second is never
 * more than twice the one before it (its staging overlaps only that piece's
 * transfer), and a falling D2H piece is never less than half the one
 * before it, to the 64 KiB alignment, the last piece excepted (its
 * copy-out overlaps only the next piece's transfer).  The
 * engine's 2D row cutting is checked on the same plan. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy/copy_engine.h"

enum { KIB = 1024, MIB = 1024 * 1024, FIRST = 256 * KIB, ALIGN = 64 * KIB };

static int failures;
#define CHECK(cond, ...)                                                                                        \
    do {                                                                                                        \
        if (!(cond)) {                                                                                          \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                              \
            printf(__VA_ARGS__);                                                                                \
            printf("\n");                                                                                       \
            failures++;                                                                                         \
        }                                                                                                       \
    } while (0)

static size_t ceil_log2(size_t x)
{
    size_t k = 0;
    while (((size_t)1 << k) < x) k++;
    return k;
}

/* Walks the plan of one copy and checks every property; returns the number
 * of pieces (0 after a failure). */
static size_t check_dir_plan(enum ts_copy_engine_dir dir, size_t total, size_t largest)
{
    size_t done = 0, n = 0, prev = 0, first = 0, last = 0, biggest = 0;
    int falling = 0;
    size_t first_want = largest < FIRST ? largest : FIRST;
    while (done < total) {
        size_t p = ts_copy_plan_piece(dir, total, done, largest);
        if (p == 0 || p > total - done || p > largest) {
            CHECK(0, "total %zu largest %zu: piece %zu at %zu is %zu (left %zu)", total, largest, n, done, p,
                  total - done);
            return 0;
        }
        if (n == 0) first = p;
        if (n > 0 && p < prev) falling = 1;
        if (dir == TS_CE_H2D && n > 1 && p > 2 * prev) {
            CHECK(0, "total %zu largest %zu: H2D piece %zu is %zu after %zu (more than doubles)", total, largest,
                  n, p, prev);
            return 0;
        }
        /* once falling, never rising again (the last piece may absorb a
         * remainder under ALIGN) */
        if (falling && p > prev && !(done + p == total && p < prev + ALIGN)) {
            CHECK(0, "total %zu largest %zu: piece %zu rises to %zu after %zu", total, largest, n, p, prev);
            return 0;
        }
        if (dir == TS_CE_D2H && n > 0 && 2 * (p + ALIGN) < prev && done + p < total && p > first_want) {
            CHECK(0, "total %zu largest %zu: D2H piece %zu is %zu after %zu (less than half)", total, largest, n,
                  p, prev);
            return 0;
        }
        if (p > biggest) biggest = p;
        prev = last = p;
        done += p;
        n++;
        if (n > total) break;
    }
    CHECK(done == total, "total %zu largest %zu: pieces cover %zu", total, largest, done);
    CHECK(ts_copy_plan_piece(dir, total, total, largest) == 0, "total %zu: a piece after the end", total);
    CHECK(first <= first_want + ALIGN || first == total, "total %zu largest %zu: first piece %zu", total,
          largest, first);
    CHECK(last <= first_want + ALIGN || n == 1, "total %zu largest %zu: last piece %zu", total, largest, last);
    if (total >= 4 * largest)
        CHECK(biggest == largest, "total %zu largest %zu: biggest piece %zu", total, largest, biggest);
    /* steady pieces plus two doubling ramps (each at most log2(largest/first) + 2 pieces) */
    size_t ramp = largest > first_want ? ceil_log2((largest + first_want - 1) / first_want) + 2 : 1;
    size_t bound = total / largest + 2 * ramp + 2;
    CHECK(n <= bound, "total %zu largest %zu: %zu pieces, want <= %zu", total, largest, n, bound);
    return n;
}

/* Both directions' plans of one copy; returns the number of H2D pieces. */
static size_t check_plan(size_t total, size_t largest)
{
    check_dir_plan(TS_CE_D2H, total, largest);
    return check_dir_plan(TS_CE_H2D, total, largest);
}

/* The engine's 2D cutting (copy_engine.c next_piece): rows of `width` bytes,
 * at least one and at most largest / width per piece; they cover the rows. */
static void check_rows(size_t width, size_t height, size_t largest)
{
    size_t row = 0, n = 0;
    while (row < height) {
        size_t rows = ts_copy_plan_piece(TS_CE_H2D, height * width, row * width, largest) / width;
        size_t fit = largest / width, left = height - row;
        if (rows < 1) rows = 1;
        if (rows > fit) rows = fit;
        if (rows > left) rows = left;
        CHECK(rows >= 1 && rows * width <= largest, "2D %zux%zu: piece of %zu rows", width, height, rows);
        if (rows == 0) return;
        row += rows;
        n++;
    }
    CHECK(row == height, "2D %zux%zu: rows covered %zu", width, height, row);
    CHECK(n <= height, "2D %zux%zu: %zu pieces", width, height, n);
}

int main(void)
{
    static const size_t largests[] = {64 * KIB, 100 * KIB, 256 * KIB, 2 * MIB, 8 * MIB, 16 * MIB};
    size_t checked = 0;
    for (size_t l = 0; l < sizeof largests / sizeof largests[0]; l++) {
        size_t L = largests[l];
        const size_t marks[] = {1, ALIGN, FIRST, 2 * FIRST, L, 2 * L, 3 * L, 4 * L, 8 * MIB, 16 * MIB,
                                64 * MIB};
        for (size_t m = 0; m < sizeof marks / sizeof marks[0]; m++)
            for (long d = -2; d <= 2; d++) {
                if ((long)marks[m] + d < 1) continue;
                check_plan((size_t)((long)marks[m] + d), L);
                checked++;
            }
        /* misaligned sizes: odd multiples of 4093 and a few primes */
        for (size_t t = 4093; t < 40 * MIB; t = t * 3 + 17) {
            check_plan(t, L);
            checked++;
        }
        unsigned rng = 12345u + (unsigned)l;
        for (int k = 0; k < 2000; k++) {
            rng = rng * 1103515245u + 12345u;
            size_t t = 1 + (size_t)rng % (48 * MIB);
            check_plan(t, L);
            checked++;
        }
    }
    /* the default largest piece: exact piece sequences a reader can check by hand */
    size_t h8 = check_dir_plan(TS_CE_H2D, 8 * MIB, 8 * MIB), d8 = check_dir_plan(TS_CE_D2H, 8 * MIB, 8 * MIB);
    size_t h16 = check_dir_plan(TS_CE_H2D, 16 * MIB, 8 * MIB), n1 = check_plan(FIRST + 1, 8 * MIB);
    CHECK(h8 == 7, "8 MiB H2D in 8 MiB pieces: %zu pieces, want 7 (256K 768K 1M 2M 3M 768K 256K)", h8);
    CHECK(d8 == 8, "8 MiB D2H in 8 MiB pieces: %zu pieces, want 8 (256K 768K 3M 2M 1M 512K 256K 256K)", d8);
    CHECK(ts_copy_plan_piece(TS_CE_D2H, 8 * MIB, 4 * MIB, 8 * MIB) == 2 * MIB, "D2H piece of 8 MiB at 4 MiB: %zu",
          ts_copy_plan_piece(TS_CE_D2H, 8 * MIB, 4 * MIB, 8 * MIB));
    CHECK(h16 == 9, "16 MiB H2D: %zu pieces, want 9 (256K 768K 1M 2M 4M 6M 1.5M 384K 128K)", h16);
    CHECK(ts_copy_plan_piece(TS_CE_H2D, 8 * MIB, 256 * KIB, 8 * MIB) == 768 * KIB, "second H2D piece of 8 MiB: %zu",
          ts_copy_plan_piece(TS_CE_H2D, 8 * MIB, 256 * KIB, 8 * MIB));
    CHECK(ts_copy_plan_piece(TS_CE_H2D, 8 * MIB, 1 * MIB, 8 * MIB) == 1 * MIB, "third H2D piece of 8 MiB: %zu",
          ts_copy_plan_piece(TS_CE_H2D, 8 * MIB, 1 * MIB, 8 * MIB));
    CHECK(ts_copy_plan_piece(TS_CE_H2D, 16 * MIB, 4 * MIB, 8 * MIB) == 4 * MIB, "H2D piece of 16 MiB at 4 MiB: %zu",
          ts_copy_plan_piece(TS_CE_H2D, 16 * MIB, 4 * MIB, 8 * MIB));
    CHECK(ts_copy_plan_piece(TS_CE_D2H, 8 * MIB, 256 * KIB, 8 * MIB) == 768 * KIB, "second D2H piece of 8 MiB: %zu",
          ts_copy_plan_piece(TS_CE_D2H, 8 * MIB, 256 * KIB, 8 * MIB));
    CHECK(n1 == 1, "256 KiB + 1: %zu pieces, want 1 (the byte over joins the piece)", n1);
    for (int dir = TS_CE_H2D; dir <= TS_CE_D2H; dir++) {
        enum ts_copy_engine_dir d = (enum ts_copy_engine_dir)dir;
        CHECK(ts_copy_plan_piece(d, 8 * MIB + 1, 0, 8 * MIB) == FIRST, "first piece of 8 MiB + 1: %zu",
              ts_copy_plan_piece(d, 8 * MIB + 1, 0, 8 * MIB));
        CHECK(ts_copy_plan_piece(d, 64 * MIB, 16 * MIB, 8 * MIB) == 8 * MIB, "steady piece of 64 MiB: %zu",
              ts_copy_plan_piece(d, 64 * MIB, 16 * MIB, 8 * MIB));
        CHECK(ts_copy_plan_piece(d, 10, 3, 8 * MIB) == 7, "small copy: the rest in one piece");
        CHECK(ts_copy_plan_piece(d, 10, 10, 8 * MIB) == 0 && ts_copy_plan_piece(d, 10, 11, 8 * MIB) == 0,
              "past the end");
        CHECK(ts_copy_plan_piece(d, 10, 0, 0) == 0, "largest 0");
    }
    static const size_t widths[] = {1, 17, 4096, 100000, 2 * MIB - 1, 2 * MIB};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
        for (size_t h = 1; h < 5000; h = h * 2 + 1) check_rows(widths[w], h, 2 * MIB);
    printf("%s: %zu copy sizes planned\n", failures ? "FAILED" : "ok", checked);
    return failures ? 1 : 0;
}
