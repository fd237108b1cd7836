/* compute.h: GEMM accounting shared by the shim (shim/observe/compute.c,
 * hooks/cublas.c) and the report (tools/report/report_compute.c): FLOPs of a GEMM,
 * facts about cudaDataType_t values, the precision class a GEMM runs at (which
 * peak its MFU is measured against), and the sampled GPU timer that
 * GEMM and NCCL hooks share. */
#ifndef TRAINSHIM_COMPUTE_H
#define TRAINSHIM_COMPUTE_H
#include <stdbool.h>
#include <stdint.h>

/* cudaDataType_t values (library_types.h), so this header needs no CUDA. */
enum {
    TS_DT_R_32F = 0,
    TS_DT_R_64F = 1,
    TS_DT_R_16F = 2,
    TS_DT_R_8I = 3,
    TS_DT_C_32F = 4,
    TS_DT_C_64F = 5,
    TS_DT_C_16F = 6,
    TS_DT_C_8I = 7,
    TS_DT_R_8U = 8,
    TS_DT_C_8U = 9,
    TS_DT_R_32I = 10,
    TS_DT_R_16BF = 14,
    TS_DT_C_16BF = 15,
    TS_DT_R_8F_E4M3 = 28,
    TS_DT_R_8F_E5M2 = 29,
    TS_DT_R_8F_UE8M0 = 30
};
/* cublasComputeType_t values (cublas_api.h) that change the precision class */
enum { TS_CT_32F_FAST_16F = 74, TS_CT_32F_FAST_16BF = 75, TS_CT_32F_FAST_TF32 = 77 };

/* Precision classes: one peak each in the device table. */
enum ts_prec {
    TS_PREC_FP64,
    TS_PREC_FP32,
    TS_PREC_TF32,
    TS_PREC_FP16,
    TS_PREC_BF16,
    TS_PREC_FP8,
    TS_PREC_INT8,
    TS_PREC_COUNT
};

static inline const char *ts_prec_name(int p)
{
    static const char *const n[TS_PREC_COUNT] = { "fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8" };
    return p >= 0 && p < TS_PREC_COUNT ? n[p] : "other";
}

static inline bool ts_dtype_is_complex(int dt)
{
    return dt == TS_DT_C_32F || dt == TS_DT_C_64F || dt == TS_DT_C_16F || dt == TS_DT_C_8I || dt == TS_DT_C_8U
           || dt == TS_DT_C_16BF || (dt >= 17 && dt <= 27 && dt % 2 == 1);
}

/* Bits of one real component: 64, 32, 16, 8 (4 and 6 for the narrow float types); 0 unknown. */
static inline unsigned ts_dtype_bits(int dt)
{
    switch (dt) {
    case TS_DT_R_64F:
    case TS_DT_C_64F:
    case 24:
    case 25:
    case 26:
    case 27: return 64;
    case TS_DT_R_32F:
    case TS_DT_C_32F:
    case TS_DT_R_32I:
    case 11:
    case 12:
    case 13: return 32;
    case TS_DT_R_16F:
    case TS_DT_C_16F:
    case TS_DT_R_16BF:
    case TS_DT_C_16BF:
    case 20:
    case 21:
    case 22:
    case 23: return 16;
    case TS_DT_R_8I:
    case TS_DT_C_8I:
    case TS_DT_R_8U:
    case TS_DT_C_8U:
    case TS_DT_R_8F_E4M3:
    case TS_DT_R_8F_E5M2:
    case TS_DT_R_8F_UE8M0: return 8;
    case 31:
    case 32: return 6;
    case 33:
    case 16:
    case 17:
    case 18:
    case 19: return 4;
    default: return 0;
    }
}

/* The precision the tensor cores (or FP units) run a GEMM at. */
static inline int ts_gemm_prec(int dtype, int compute_type)
{
    switch (dtype) {
    case TS_DT_R_64F:
    case TS_DT_C_64F: return TS_PREC_FP64;
    case TS_DT_R_16F:
    case TS_DT_C_16F: return TS_PREC_FP16;
    case TS_DT_R_16BF:
    case TS_DT_C_16BF: return TS_PREC_BF16;
    case TS_DT_R_8F_E4M3:
    case TS_DT_R_8F_E5M2:
    case TS_DT_R_8F_UE8M0: return TS_PREC_FP8;
    case TS_DT_R_8I:
    case TS_DT_C_8I:
    case TS_DT_R_8U:
    case TS_DT_C_8U: return TS_PREC_INT8;
    default: break;
    }
    if (compute_type == TS_CT_32F_FAST_TF32)
        return TS_PREC_TF32;
    if (compute_type == TS_CT_32F_FAST_16F)
        return TS_PREC_FP16;
    if (compute_type == TS_CT_32F_FAST_16BF)
        return TS_PREC_BF16;
    return TS_PREC_FP32;
}

/* 2*m*n*k*batch, x4 for complex; 0 for a negative dimension (the call fails). */
static inline uint64_t ts_gemm_flops(int64_t m, int64_t n, int64_t k, int64_t batch, bool is_complex)
{
    if (m < 0 || n < 0 || k < 0 || batch < 0)
        return 0;
    uint64_t f = 2ull * (uint64_t)m * (uint64_t)n * (uint64_t)k * (uint64_t)batch;
    return is_complex ? 4 * f : f;
}

/* Tensor-core alignment a dimension should be a multiple of for this data
 * type (8 elements of 16-bit types, 16 of 8-bit types); 0: no rule. */
static inline unsigned ts_gemm_align_rule(int dtype)
{
    unsigned b = ts_dtype_bits(dtype);
    return b == 16 ? 8 : b == 8 ? 16 : 0;
}

/* ---- sampled GPU timing (shim/observe/compute.c) --------------------------------- *
 * One call in TRAINSHIM_FLOP_SAMPLE (per thread) is bracketed by two events
 * recorded on its stream; the time is read back later with a query (never a
 * synchronization) and logged as TS_REC_GPU_TIME.  Never while the stream
 * captures.  Uses the driver API only: it keeps no "last error", so a failed
 * query cannot change what the program sees. */
struct ts_gpu_sample {
    uint64_t id; /* 0: this call is not timed */
    int slot;
};
/* Before the real call.  Cheap when not due (a thread-local counter). */
void ts_sample_begin(struct ts_gpu_sample *s, uint64_t stream);
/* After the real call; kind = TS_REC_GEMM or TS_REC_NCCL.  If the call
 * failed (ok false) the sample is dropped and s->id set to 0. */
void ts_sample_end(struct ts_gpu_sample *s, uint64_t stream, int kind, bool ok);
/* Logs the samples whose events completed (also done by ts_sample_begin). */
void ts_sample_poll(void);
#endif
