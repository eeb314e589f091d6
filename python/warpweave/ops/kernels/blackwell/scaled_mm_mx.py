"""Blackwell mxfp8 GEMM, persistent and warp-specialized: C = (A * A_scale) @ (B * B_scale)^T.

A [M, K] and B^T [N, K] (bt_desc; K contiguous) are fp8, e4m3 or e5m2 (each its own), with one
e8m0 scale (a uint8 exponent, 2^(s - 127)) per 32 elements of K; products summed in fp32 in
tensor memory, C [M, N] in c_desc's element type. The scales come in the cuBLAS block-scaled
layout, [1, rows / 128, K / 128, 2, 256] (as_desc over A's rows rounded up to 128, bs_desc over
B's; one 512-byte chunk holds the 4 scales of 128 rows for 128 elements of K: row 32 i + l's
scale j at byte 16 l + 4 i + j), which tcgen05.mma ... .block_scale reads once the MMA's thread
has copied it into tensor memory (tcgen05.cp; async_dot_scaled does both).

The structure is gemm_ws.py's and so are its helpers: a 1-warp producer fills a NUM_STAGES ring
(here each stage holds A's [BLOCK_M, BLOCK_K] tile, B^T's [B_PART, BLOCK_K] tile and both scale
tiles, all on the stage's full barrier), a 1-warp MMA task issues one block-scaled MMA per stage
into one of NUM_ACC TMEM accumulators (tlx.async_dot_scaled, one tcgen05.mma per 32 elements of
K; its completion frees the stage, scales included), the epilogue warp group stores each
accumulator in EPI_SUBTILE column chunks through shared memory with TMA (gemm_ws.epilogue_task),
tiles come from cluster launch control (USE_CLC) or static persistence, and PAIR is gemm_ws.py's
2-CTA mode: each CTA loads its A tile and scales, half of B^T's rows and B's whole scale tile
(the pair's MMA reads each CTA's B scales for all BLOCK_N columns).

BLOCK_K must be a multiple of 128 (whole scale chunks) and BLOCK_N of 128 (whole B scale row
blocks). Tensor memory: NUM_ACC accumulators of BLOCK_N columns plus the columns the MMA copies
the scales into, so 128 x 128 tiles (2 x 128 + scales of 512 columns).

Descriptors: a_desc block [BLOCK_M, BLOCK_K], bt_desc block [BLOCK_N // (2 if PAIR else 1),
             BLOCK_K], as_desc block [1, 1, BLOCK_K // 128, 2, 256], bs_desc block
             [1, BLOCK_N // 128, BLOCK_K // 128, 2, 256], c_desc block [BLOCK_M, BLOCK_N //
             EPI_SUBTILE]
    grid, launch: as gemm_ws.py's
    constexprs: BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, NUM_STAGES=5 (what fits with
                C's chunks), NUM_ACC=2, EPI_SUBTILE=4, USE_CLC=True, PAIR=False
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from . import gemm_ws as g


@ww.jit
def scaled_mm_mx_kernel(a_desc, bt_desc, as_desc, bs_desc, c_desc, M, N, K,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr, NUM_STAGES: tl.constexpr,
                        NUM_ACC: tl.constexpr = 2, EPI_SUBTILE: tl.constexpr = 4,
                        USE_CLC: tl.constexpr = True, PAIR: tl.constexpr = False):
    tl.static_assert(BLOCK_K % 128 == 0)
    tl.static_assert(BLOCK_N % 128 == 0)
    a_dtype: tl.constexpr = tlx.dtype_of(a_desc)
    b_dtype: tl.constexpr = tlx.dtype_of(bt_desc)
    A_FMT: tl.constexpr = tlx.get_fp8_format_name(a_dtype)
    B_FMT: tl.constexpr = tlx.get_fp8_format_name(b_dtype)
    B_PART: tl.constexpr = BLOCK_N // 2 if PAIR else BLOCK_N
    REP_K: tl.constexpr = BLOCK_K // 128
    a_bufs = tlx.local_alloc((BLOCK_M, BLOCK_K), a_dtype, NUM_STAGES)
    b_bufs = tlx.local_alloc((B_PART, BLOCK_K), b_dtype, NUM_STAGES)
    as_bufs = tlx.local_alloc((1, BLOCK_M // 128, REP_K, 2, 256), tl.uint8, NUM_STAGES)
    bs_bufs = tlx.local_alloc((1, BLOCK_N // 128, REP_K, 2, 256), tl.uint8, NUM_STAGES)
    c_bufs, acc_bufs, full_bars, empty_bars, acc_full, acc_empty, clc = g.alloc_common(
        c_desc, BLOCK_M, BLOCK_N, NUM_STAGES, NUM_ACC, EPI_SUBTILE, USE_CLC, PAIR)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            g.epilogue_task(c_desc, c_bufs, acc_bufs, acc_full, acc_empty, clc, M, N, BLOCK_M,
                            BLOCK_N, GROUP_M, NUM_ACC, EPI_SUBTILE, USE_CLC, PAIR)
        with tlx.async_task(num_warps=1, registers=48):
            g.mma_task(a_bufs, b_bufs, acc_bufs, full_bars, empty_bars, acc_full, acc_empty,
                       clc, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, NUM_ACC, USE_CLC,
                       PAIR, as_bufs, bs_bufs, A_FMT, B_FMT)
        with tlx.async_task(num_warps=1, registers=48):
            g.producer_task(a_desc, bt_desc, a_bufs, b_bufs, full_bars, empty_bars, clc, M, N, K,
                            BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_STAGES, USE_CLC, PAIR,
                            as_desc, bs_desc, as_bufs, bs_bufs, SCALED=True)
    if PAIR:
        # No CTA leaves while its peer may still arrive on its barriers or read its stages.
        tlx.cluster_barrier()
