/* emu_float16.h: IEEE binary16 and bfloat16 <-> float conversions for the
 * emulated NCCL, cuBLAS and cuBLASLt (shared by all three; header-only so each
 * library keeps its own copy and none exports it).  Storage is the raw 16-bit
 * pattern; rounding back is round-to-nearest-even, as the GPU's cvt.rn does. */
#ifndef EMU_FLOAT16_H
#define EMU_FLOAT16_H
#include <stdint.h>
#include <string.h>

static inline float emu_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t emu_bits_from_f32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float emu_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f)                       /* inf / nan */
        return emu_f32_from_bits(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return emu_f32_from_bits(sign);
        /* subnormal: value = man * 2^-24, exact in float */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return emu_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t emu_float_to_half(float f)
{
    uint32_t u = emu_bits_from_f32(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u)                  /* inf or nan (keep a quiet nan) */
        return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0));
    if (a >= 0x477ff000u)                  /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {                 /* below 2^-14: subnormal or zero */
        if (a < 0x33000000u) return sign;  /* below half of the smallest subnormal */
        uint32_t exp = a >> 23;
        uint32_t man = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exp;       /* 14 + (127 - exp) - 23 + 10 ... = 126 - exp */
        uint32_t q = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);   /* round to nearest even at bit 13 */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

static inline float emu_bf16_to_float(uint16_t b) { return emu_f32_from_bits((uint32_t)b << 16); }

static inline uint16_t emu_float_to_bf16(float f)
{
    uint32_t u = emu_bits_from_f32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);   /* quiet nan */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* FP8 (OCP e4m3 "fn": no inf, nan = 0x7f; e5m2: IEEE-like), decoded exactly. */
static inline float emu_fp8_to_float(uint8_t v, int e5m2)
{
    int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
    uint32_t sign = v >> 7, exp = (v >> mbits) & (e5m2 ? 0x1fu : 0xfu), man = v & ((1u << mbits) - 1u);
    float r;
    if (e5m2 && exp == 0x1f) r = man ? __builtin_nanf("") : __builtin_inff();
    else if (!e5m2 && exp == 0xf && man == 7) r = __builtin_nanf("");
    else if (exp == 0) r = (float)man * __builtin_ldexpf(1.0f, 1 - bias - mbits);
    else r = __builtin_ldexpf(1.0f + (float)man / (float)(1 << mbits), (int)exp - bias);
    return sign ? -r : r;
}

/* Round-to-nearest-even, saturating to the largest finite value (as
 * __nv_cvt_float_to_fp8 with __NV_SATFINITE does). */
static inline uint8_t emu_float_to_fp8(float f, int e5m2)
{
    int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
    uint8_t sign = (emu_bits_from_f32(f) >> 31) ? 0x80 : 0;
    if (f != f) return (uint8_t)(e5m2 ? 0x7f : 0x7f);
    float a = f < 0 ? -f : f;
    float maxv = e5m2 ? 57344.0f : 448.0f;
    if (a >= maxv) return (uint8_t)(sign | (e5m2 ? 0x7b : 0x7e));
    int minexp = 1 - bias;                 /* exponent of the smallest normal */
    int e;
    __builtin_frexpf(a, &e);               /* a = m * 2^e, m in [0.5, 1) */
    int exp = e - 1;
    if (exp < minexp) exp = minexp;
    float quantum = __builtin_ldexpf(1.0f, exp - mbits);
    float q = __builtin_rintf(a / quantum);   /* rint: nearest even under default rounding */
    float r = q * quantum;
    if (r >= maxv) return (uint8_t)(sign | (e5m2 ? 0x7b : 0x7e));
    if (r == 0) return sign;
    int re;
    __builtin_frexpf(r, &re);
    int rexp = re - 1;
    if (rexp < minexp) return (uint8_t)(sign | (uint8_t)(r / __builtin_ldexpf(1.0f, minexp - mbits)));
    uint32_t man = (uint32_t)(r / __builtin_ldexpf(1.0f, rexp - mbits)) - (1u << mbits);
    return (uint8_t)(sign | ((uint32_t)(rexp + bias) << mbits) | man);
}
#endif
