/* The half / bfloat16 / fp8 conversions the emulated NCCL, cuBLAS and
 * cuBLASLt compute with (tests/emu/cublas/emu_float16.h), against known bit
 * patterns: exact values, round-to-nearest-even ties, subnormals, overflow,
 * infinities and NaN. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include "cublas/emu_float16.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)

static void half_to(float f, uint16_t want)
{
    uint16_t got = emu_float_to_half(f);
    CHECK(got == want, "float_to_half(%.10g) = 0x%04x, want 0x%04x", f, got, want);
}

static void bf16_to(float f, uint16_t want)
{
    uint16_t got = emu_float_to_bf16(f);
    CHECK(got == want, "float_to_bf16(%.10g) = 0x%04x, want 0x%04x", f, got, want);
}

int main(void)
{
    /* half: exact values */
    half_to(0.0f, 0x0000);
    half_to(-0.0f, 0x8000);
    half_to(1.0f, 0x3c00);
    half_to(-2.0f, 0xc000);
    half_to(0.5f, 0x3800);
    half_to(65504.0f, 0x7bff);              /* largest finite */
    half_to(6.103515625e-05f, 0x0400);      /* smallest normal 2^-14 */
    half_to(5.960464477539063e-08f, 0x0001);/* smallest subnormal 2^-24 */
    /* ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 */
    half_to(1.0f + 0x1p-11f, 0x3c00);
    half_to(1.0f + 3 * 0x1p-11f, 0x3c02);
    half_to(1.0f + 0x1p-11f + 0x1p-20f, 0x3c01);   /* above the tie rounds up */
    /* subnormal ties: 2^-25 is half the smallest subnormal -> 0; 3*2^-25 -> 2 (even) */
    half_to(0x1p-25f, 0x0000);
    half_to(3 * 0x1p-25f, 0x0002);
    /* overflow: 65520 and above round to infinity, just below stays finite */
    half_to(65519.0f, 0x7bff);
    half_to(65520.0f, 0x7c00);
    half_to(1e10f, 0x7c00);
    half_to(-INFINITY, 0xfc00);
    CHECK((emu_float_to_half(NAN) & 0x7c00) == 0x7c00 && (emu_float_to_half(NAN) & 0x3ff), "NaN stays NaN");
    /* half -> float */
    CHECK(emu_half_to_float(0x3c00) == 1.0f, "1.0");
    CHECK(emu_half_to_float(0x7bff) == 65504.0f, "max");
    CHECK(emu_half_to_float(0x0001) == 0x1p-24f, "smallest subnormal");
    CHECK(emu_half_to_float(0x83ff) == -(1023 * 0x1p-24f), "largest negative subnormal");
    CHECK(isinf(emu_half_to_float(0x7c00)) && isnan(emu_half_to_float(0x7e00)), "inf / nan");
    /* every finite half survives a round trip */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000 && !bad; h++) {
        if ((h & 0x7c00) == 0x7c00) continue;
        if (emu_float_to_half(emu_half_to_float((uint16_t)h)) != h) { CHECK(0, "round trip 0x%04x", h); bad = 1; }
    }

    /* bfloat16 */
    bf16_to(1.0f, 0x3f80);
    bf16_to(-3.0f, 0xc040);
    bf16_to(1.0f + 0x1p-8f, 0x3f80);            /* tie to even */
    bf16_to(1.0f + 3 * 0x1p-8f, 0x3f82);
    bf16_to(1.0f + 0x1p-8f + 0x1p-16f, 0x3f81);
    bf16_to(3.3895313892515355e38f, 0x7f7f);    /* largest finite bf16 */
    bf16_to(INFINITY, 0x7f80);
    CHECK(isnan(emu_bf16_to_float(emu_float_to_bf16(NAN))), "bf16 NaN");
    CHECK(emu_bf16_to_float(0x4049) == 3.140625f, "bf16 pi");
    for (uint32_t b = 0; b < 0x10000 && !bad; b++) {
        if ((b & 0x7f80) == 0x7f80) continue;
        if (emu_float_to_bf16(emu_bf16_to_float((uint16_t)b)) != b) { CHECK(0, "bf16 round trip 0x%04x", b); bad = 1; }
    }

    /* fp8 e4m3 (max 448, no infinity) and e5m2 (max 57344) */
    CHECK(emu_float_to_fp8(1.0f, 0) == 0x38 && emu_fp8_to_float(0x38, 0) == 1.0f, "e4m3 1.0");
    CHECK(emu_float_to_fp8(448.0f, 0) == 0x7e && emu_float_to_fp8(1e6f, 0) == 0x7e, "e4m3 saturates at 448");
    CHECK(emu_float_to_fp8(-2.0f, 1) == 0xc0 && emu_fp8_to_float(0xc0, 1) == -2.0f, "e5m2 -2.0");
    CHECK(emu_float_to_fp8(0x1p-9f, 0) == 0x01 && emu_fp8_to_float(0x01, 0) == 0x1p-9f, "e4m3 smallest subnormal");
    CHECK(isnan(emu_fp8_to_float(0x7f, 0)) && isinf(emu_fp8_to_float(0x7c, 1)), "fp8 nan / inf");
    for (int e5 = 0; e5 < 2 && !bad; e5++)
        for (uint32_t v = 0; v < 256 && !bad; v++) {
            float f = emu_fp8_to_float((uint8_t)v, e5);
            if (!isfinite(f) || (v & 0x7f) == 0) continue;     /* skip nan/inf and the two zeros */
            if (emu_float_to_fp8(f, e5) != v) { CHECK(0, "fp8 %s round trip 0x%02x (%g)", e5 ? "e5m2" : "e4m3", v, f); bad = 1; }
        }
    if (failures) { printf("test_cublas_float16: %d FAILED\n", failures); return 1; }
    printf("test_cublas_float16: ok\n");
    return 0;
}
