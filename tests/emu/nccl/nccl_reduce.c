/* Element types and reductions of the emulated NCCL.  Integer types reduce in
 * their own type (wrapping like the GPU); half, bfloat16 and fp8 are widened
 * to float for each step and rounded back once per element; ranks are always
 * combined in rank order so every rank gets the same bits. */
#include "nccl_emu.h"
#include "../cublas/emu_float16.h"

size_t nccl_type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

#define RED_STEP(acc, v, op) do { switch (op) { \
    case ncclProd: acc = acc * (v); break; \
    case ncclMax: if ((v) > acc) acc = (v); break; \
    case ncclMin: if ((v) < acc) acc = (v); break; \
    default: acc = acc + (v); break; } } while (0)

/* Integer reduction in the type itself; Avg divides the sum (as NCCL does for
 * integer types).  Unsigned wraparound is the intended GPU behaviour. */
#define RED_INT(T) do { \
    T *d = dst; \
    for (size_t i = 0; i < count; i++) { \
        T acc = ((const T *)srcs[0])[i]; \
        for (int j = 1; j < nsrc; j++) { T v = ((const T *)srcs[j])[i]; RED_STEP(acc, v, op); } \
        if (op == ncclAvg) acc = (T)(acc / (T)nsrc); \
        d[i] = acc; \
    } } while (0)

/* Unsigned arithmetic for the signed sum/product, so overflow wraps instead
 * of being undefined behaviour. */
#define RED_SINT(T, U) do { \
    T *d = dst; \
    for (size_t i = 0; i < count; i++) { \
        T acc = ((const T *)srcs[0])[i]; \
        for (int j = 1; j < nsrc; j++) { \
            T v = ((const T *)srcs[j])[i]; \
            if (op == ncclSum || op == ncclAvg) acc = (T)((U)acc + (U)v); \
            else if (op == ncclProd) acc = (T)((U)acc * (U)v); \
            else RED_STEP(acc, v, op); \
        } \
        if (op == ncclAvg) acc = (T)(acc / (T)nsrc); \
        d[i] = acc; \
    } } while (0)

#define RED_WIDE(T, LOAD, STORE) do { \
    T *d = dst; \
    for (size_t i = 0; i < count; i++) { \
        float acc = LOAD(((const T *)srcs[0])[i]); \
        for (int j = 1; j < nsrc; j++) { float v = LOAD(((const T *)srcs[j])[i]); RED_STEP(acc, v, op); } \
        if (op == ncclAvg) acc = acc / (float)nsrc; \
        d[i] = STORE(acc); \
    } } while (0)

#define FP8_E4M3_LOAD(x) emu_fp8_to_float((x), 0)
#define FP8_E4M3_STORE(x) emu_float_to_fp8((x), 0)
#define FP8_E5M2_LOAD(x) emu_fp8_to_float((x), 1)
#define FP8_E5M2_STORE(x) emu_float_to_fp8((x), 1)

void nccl_reduce(void *dst, const void *const *srcs, int nsrc, size_t count, ncclDataType_t t, ncclRedOp_t op)
{
    switch (t) {
    case ncclInt8: RED_SINT(int8_t, uint8_t); break;
    case ncclUint8: RED_INT(uint8_t); break;
    case ncclInt32: RED_SINT(int32_t, uint32_t); break;
    case ncclUint32: RED_INT(uint32_t); break;
    case ncclInt64: RED_SINT(int64_t, uint64_t); break;
    case ncclUint64: RED_INT(uint64_t); break;
    case ncclFloat32: RED_INT(float); break;
    case ncclFloat64: RED_INT(double); break;
    case ncclFloat16: RED_WIDE(uint16_t, emu_half_to_float, emu_float_to_half); break;
    case ncclBfloat16: RED_WIDE(uint16_t, emu_bf16_to_float, emu_float_to_bf16); break;
    case ncclFloat8e4m3: RED_WIDE(uint8_t, FP8_E4M3_LOAD, FP8_E4M3_STORE); break;
    case ncclFloat8e5m2: RED_WIDE(uint8_t, FP8_E5M2_LOAD, FP8_E5M2_STORE); break;
    default: break;
    }
}

#define SCALE(T, LOAD, STORE) do { \
    const T *s = src; T *d = dst; \
    for (size_t i = 0; i < count; i++) d[i] = STORE(LOAD(s[i]) * scalar); } while (0)
#define AS_DOUBLE(x) ((double)(x))
#define TO_I8(x) ((int8_t)(x))
#define TO_U8(x) ((uint8_t)(x))
#define TO_I32(x) ((int32_t)(x))
#define TO_U32(x) ((uint32_t)(x))
#define TO_I64(x) ((int64_t)(x))
#define TO_U64(x) ((uint64_t)(x))
#define TO_F32(x) ((float)(x))
#define TO_F64(x) ((double)(x))
#define HALF_LOAD(x) ((double)emu_half_to_float(x))
#define HALF_STORE(x) emu_float_to_half((float)(x))
#define BF16_LOAD(x) ((double)emu_bf16_to_float(x))
#define BF16_STORE(x) emu_float_to_bf16((float)(x))
#define E4_LOAD(x) ((double)emu_fp8_to_float((x), 0))
#define E4_STORE(x) emu_float_to_fp8((float)(x), 0)
#define E5_LOAD(x) ((double)emu_fp8_to_float((x), 1))
#define E5_STORE(x) emu_float_to_fp8((float)(x), 1)

void nccl_scale(void *dst, const void *src, size_t count, ncclDataType_t t, double scalar)
{
    switch (t) {
    case ncclInt8: SCALE(int8_t, AS_DOUBLE, TO_I8); break;
    case ncclUint8: SCALE(uint8_t, AS_DOUBLE, TO_U8); break;
    case ncclInt32: SCALE(int32_t, AS_DOUBLE, TO_I32); break;
    case ncclUint32: SCALE(uint32_t, AS_DOUBLE, TO_U32); break;
    case ncclInt64: SCALE(int64_t, AS_DOUBLE, TO_I64); break;
    case ncclUint64: SCALE(uint64_t, AS_DOUBLE, TO_U64); break;
    case ncclFloat32: SCALE(float, AS_DOUBLE, TO_F32); break;
    case ncclFloat64: SCALE(double, AS_DOUBLE, TO_F64); break;
    case ncclFloat16: SCALE(uint16_t, HALF_LOAD, HALF_STORE); break;
    case ncclBfloat16: SCALE(uint16_t, BF16_LOAD, BF16_STORE); break;
    case ncclFloat8e4m3: SCALE(uint8_t, E4_LOAD, E4_STORE); break;
    case ncclFloat8e5m2: SCALE(uint8_t, E5_LOAD, E5_STORE); break;
    default: break;
    }
}

double nccl_load_scalar(const void *p, ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: return *(const int8_t *)p;
    case ncclUint8: return *(const uint8_t *)p;
    case ncclInt32: return *(const int32_t *)p;
    case ncclUint32: return *(const uint32_t *)p;
    case ncclInt64: return (double)*(const int64_t *)p;
    case ncclUint64: return (double)*(const uint64_t *)p;
    case ncclFloat32: return *(const float *)p;
    case ncclFloat64: return *(const double *)p;
    case ncclFloat16: return emu_half_to_float(*(const uint16_t *)p);
    case ncclBfloat16: return emu_bf16_to_float(*(const uint16_t *)p);
    case ncclFloat8e4m3: return emu_fp8_to_float(*(const uint8_t *)p, 0);
    case ncclFloat8e5m2: return emu_fp8_to_float(*(const uint8_t *)p, 1);
    default: return 0;
    }
}
