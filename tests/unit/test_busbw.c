/* The nccl-tests bandwidth formulas (shim/observe/comm.h) on known sizes, worked out
 * by hand from doc/PERFORMANCE.md, and the GEMM FLOP / precision / alignment
 * rules (shim/observe/compute.h) the report is built on. */
#include <math.h>
#include <stdio.h>

#include "observe/comm.h"
#include "observe/compute.h"

static int failures;
#define EXPECT(c) do { if (!(c)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)
#define NEAR(a, b) (fabs((a) - (b)) <= 1e-9 * (fabs(b) + 1))

int main(void)
{
    /* element sizes of ncclDataType_t */
    EXPECT(ts_nccl_type_size(0) == 1 && ts_nccl_type_size(2) == 4 && ts_nccl_type_size(4) == 8);
    EXPECT(ts_nccl_type_size(6) == 2 && ts_nccl_type_size(7) == 4 && ts_nccl_type_size(8) == 8);
    EXPECT(ts_nccl_type_size(9) == 2 && ts_nccl_type_size(10) == 1 && ts_nccl_type_size(11) == 1);
    EXPECT(ts_nccl_type_size(12) == 0 && ts_nccl_type_size(-1) == 0);

    /* AllReduce of 1 GiB of floats on 8 ranks in 10 ms:
     *   S = 2^30 B, algbw = 2^30 / 1e7 ns = 107.3741824 GB/s,
     *   busbw = algbw * 2*7/8 = 187.9048192 GB/s */
    uint64_t S = ts_nccl_algo_bytes(TS_NCCL_ALLREDUCE, 1ull << 30, 8);
    EXPECT(S == 1ull << 30);
    EXPECT(NEAR(ts_nccl_algbw_gbps(S, 10000000), 107.3741824));
    EXPECT(NEAR(ts_nccl_busbw_gbps(TS_NCCL_ALLREDUCE, S, 10000000, 8), 187.9048192));
    /* AllGather, sendcount 1M floats (4 MB each) on 4 ranks in 1 ms:
     *   S = 4 MiB * 4 = 16 MiB = 16777216 B, algbw = 16.777216 GB/s, busbw = * 3/4 = 12.582912 */
    S = ts_nccl_algo_bytes(TS_NCCL_ALLGATHER, 4ull << 20, 4);
    EXPECT(S == 16ull << 20);
    EXPECT(NEAR(ts_nccl_algbw_gbps(S, 1000000), 16.777216));
    EXPECT(NEAR(ts_nccl_busbw_gbps(TS_NCCL_ALLGATHER, S, 1000000, 4), 12.582912));
    /* ReduceScatter, recvcount 1000 doubles on 2 ranks in 2 us: S = 8000*2 = 16000 B,
     * algbw = 8 GB/s, busbw = 4 GB/s */
    S = ts_nccl_algo_bytes(TS_NCCL_REDUCESCATTER, 8000, 2);
    EXPECT(S == 16000);
    EXPECT(NEAR(ts_nccl_busbw_gbps(TS_NCCL_REDUCESCATTER, S, 2000, 2), 4.0));
    /* Broadcast and Reduce: factor 1, S = count * typesize */
    EXPECT(ts_nccl_algo_bytes(TS_NCCL_BROADCAST, 4096, 16) == 4096);
    EXPECT(ts_nccl_algo_bytes(TS_NCCL_REDUCE, 4096, 16) == 4096);
    EXPECT(NEAR(ts_nccl_bus_factor(TS_NCCL_BROADCAST, 16), 1.0) && NEAR(ts_nccl_bus_factor(TS_NCCL_REDUCE, 16), 1.0));
    /* AlltoAll, Gather, Scatter: factor (n-1)/n, S = count * typesize * n */
    EXPECT(ts_nccl_algo_bytes(TS_NCCL_ALLTOALL, 1000, 5) == 5000);
    EXPECT(ts_nccl_algo_bytes(TS_NCCL_GATHER, 1000, 5) == 5000);
    EXPECT(ts_nccl_algo_bytes(TS_NCCL_SCATTER, 1000, 5) == 5000);
    EXPECT(NEAR(ts_nccl_bus_factor(TS_NCCL_ALLTOALL, 5), 0.8));
    EXPECT(NEAR(ts_nccl_bus_factor(TS_NCCL_GATHER, 5), 0.8) && NEAR(ts_nccl_bus_factor(TS_NCCL_SCATTER, 5), 0.8));
    /* one rank: an all-reduce moves nothing across the bus */
    EXPECT(NEAR(ts_nccl_bus_factor(TS_NCCL_ALLREDUCE, 1), 0.0));
    /* send/recv: the bytes themselves, factor 1 */
    EXPECT(ts_nccl_algo_bytes(TS_NCCL_SEND, 777, 8) == 777 && NEAR(ts_nccl_bus_factor(TS_NCCL_RECV, 8), 1.0));
    /* no time: no bandwidth (never a division by zero) */
    EXPECT(ts_nccl_algbw_gbps(1000, 0) == 0.0);
    EXPECT(!ts_nccl_op_moves_data(TS_NCCL_GROUP_START) && ts_nccl_op_moves_data(TS_NCCL_RECV));

    /* GEMM FLOPs: 2mnk*batch, x4 complex */
    EXPECT(ts_gemm_flops(4096, 4096, 4096, 1, false) == 2ull * 4096 * 4096 * 4096);
    EXPECT(ts_gemm_flops(3, 5, 7, 11, false) == 2ull * 3 * 5 * 7 * 11);
    EXPECT(ts_gemm_flops(2, 3, 4, 1, true) == 4ull * 2 * 2 * 3 * 4);
    EXPECT(ts_gemm_flops(-1, 3, 4, 1, false) == 0);
    EXPECT(ts_gemm_flops(1ll << 20, 1ll << 20, 1ll << 10, 8, false) == 2ull * 8 << 50);
    EXPECT(ts_dtype_is_complex(TS_DT_C_32F) && ts_dtype_is_complex(TS_DT_C_64F) && !ts_dtype_is_complex(TS_DT_R_16BF));
    /* precision classes */
    EXPECT(ts_gemm_prec(TS_DT_R_32F, -1) == TS_PREC_FP32);
    EXPECT(ts_gemm_prec(TS_DT_R_32F, TS_CT_32F_FAST_TF32) == TS_PREC_TF32);
    EXPECT(ts_gemm_prec(TS_DT_R_32F, TS_CT_32F_FAST_16BF) == TS_PREC_BF16);
    EXPECT(ts_gemm_prec(TS_DT_R_16F, 68) == TS_PREC_FP16 && ts_gemm_prec(TS_DT_R_16BF, 68) == TS_PREC_BF16);
    EXPECT(ts_gemm_prec(TS_DT_R_8F_E4M3, 68) == TS_PREC_FP8 && ts_gemm_prec(TS_DT_R_64F, 70) == TS_PREC_FP64);
    EXPECT(ts_gemm_prec(TS_DT_R_8I, 72) == TS_PREC_INT8);
    /* tensor-core alignment: 8 for 16-bit types, 16 for 8-bit, none otherwise */
    EXPECT(ts_gemm_align_rule(TS_DT_R_16F) == 8 && ts_gemm_align_rule(TS_DT_R_16BF) == 8);
    EXPECT(ts_gemm_align_rule(TS_DT_R_8F_E5M2) == 16 && ts_gemm_align_rule(TS_DT_R_8I) == 16);
    EXPECT(ts_gemm_align_rule(TS_DT_R_32F) == 0 && ts_gemm_align_rule(TS_DT_R_64F) == 0);
    if (!failures)
        printf("ok: algbw/busbw formulas, FLOPs, precision classes, alignment rules\n");
    return failures ? 1 : 0;
}
