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
def producer_task_mx(a_desc, bt_desc, as_desc, bs_desc, a_bufs, b_bufs, as_bufs, bs_bufs,
                     full_bars, empty_bars, clc, M, N, K, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     NUM_STAGES: tl.constexpr, USE_CLC: tl.constexpr, PAIR: tl.constexpr):
    """gemm_ws.producer_task with the scale tiles: per k-step A's tile, B^T's [B_PART, BLOCK_K]
    rows (with PAIR this CTA's half) and the A and B scale chunks of the tile's rows."""
    B_PART: tl.constexpr = BLOCK_N // 2 if PAIR else BLOCK_N
    REP_K: tl.constexpr = BLOCK_K // 128  # scale chunks along K
    REP_N: tl.constexpr = BLOCK_N // 128  # B scale row blocks
    STAGE_BYTES: tl.constexpr = (BLOCK_M + B_PART) * BLOCK_K + (1 + REP_N) * REP_K * 512
    num_pid_m, num_pid_n, num_tiles = g.grid_shape(M, N, BLOCK_M, BLOCK_N, PAIR)
    num_k = tl.cdiv(K, BLOCK_K)
    rank = tl.program_id(0) % 2 if PAIR else 0
    tile = tl.program_id(0)
    j = 0
    step = 0
    while tile != -1:
        g.request_tile(clc, j, USE_CLC, PAIR)
        pid_m, pid_n = g.tile_of(tile, num_pid_m, num_pid_n, GROUP_M, PAIR)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N + rank * B_PART
        for k in range(0, num_k):
            stage, full = g.acquire_stage(full_bars, empty_bars, step, NUM_STAGES, STAGE_BYTES,
                                          PAIR)
            tlx.async_descriptor_load(a_desc, tlx.local_view(a_bufs, stage),
                                      [off_m, k * BLOCK_K], full, two_ctas=PAIR)
            tlx.async_descriptor_load(bt_desc, tlx.local_view(b_bufs, stage),
                                      [off_n, k * BLOCK_K], full, two_ctas=PAIR)
            tlx.async_descriptor_load(as_desc, tlx.local_view(as_bufs, stage),
                                      [0, pid_m, k * REP_K, 0, 0], full, two_ctas=PAIR)
            tlx.async_descriptor_load(bs_desc, tlx.local_view(bs_bufs, stage),
                                      [0, pid_n * REP_N, k * REP_K, 0, 0], full, two_ctas=PAIR)
            step += 1
        tile = g.next_tile(clc, tile, j, num_tiles, USE_CLC, PAIR)
        j += 1


@ww.jit
def mma_task_mx(a_bufs, b_bufs, as_bufs, bs_bufs, acc_bufs, full_bars, empty_bars, acc_full,
                acc_empty, clc, M, N, K, A_FMT: tl.constexpr, B_FMT: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                NUM_STAGES: tl.constexpr, NUM_ACC: tl.constexpr, USE_CLC: tl.constexpr,
                PAIR: tl.constexpr):
    """gemm_ws.mma_task with block-scaled MMAs (A_FMT / B_FMT "e4m3" or "e5m2")."""
    num_pid_m, num_pid_n, num_tiles = g.grid_shape(M, N, BLOCK_M, BLOCK_N, PAIR)
    num_k = tl.cdiv(K, BLOCK_K)
    leads = tl.program_id(0) % 2 == 0 if PAIR else True
    tile = tl.program_id(0)
    j = 0
    step = 0
    while tile != -1:
        if leads:
            buf, acc = g.acquire_acc(acc_bufs, acc_empty, j, NUM_ACC)
            for k in range(0, num_k):
                stage = g.wait_stage(full_bars, step, NUM_STAGES)
                tlx.async_dot_scaled(tlx.local_view(a_bufs, stage),
                                     tlx.local_trans(tlx.local_view(b_bufs, stage)), acc,
                                     tlx.local_view(as_bufs, stage), A_FMT,
                                     tlx.local_view(bs_bufs, stage), B_FMT, use_acc=k > 0,
                                     mBarriers=[tlx.local_view(empty_bars, stage)],
                                     two_ctas=PAIR, out_dtype=tl.float32)
                step += 1
            tlx.tcgen05_commit(tlx.local_view(acc_full, buf), two_ctas=PAIR)
        tile = g.next_tile(clc, tile, j, num_tiles, USE_CLC, PAIR)
        j += 1


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
            mma_task_mx(a_bufs, b_bufs, as_bufs, bs_bufs, acc_bufs, full_bars, empty_bars,
                        acc_full, acc_empty, clc, M, N, K, A_FMT, B_FMT, BLOCK_M, BLOCK_N,
                        BLOCK_K, NUM_STAGES, NUM_ACC, USE_CLC, PAIR)
        with tlx.async_task(num_warps=1, registers=48):
            producer_task_mx(a_desc, bt_desc, as_desc, bs_desc, a_bufs, b_bufs, as_bufs,
                             bs_bufs, full_bars, empty_bars, clc, M, N, K, BLOCK_M, BLOCK_N,
                             BLOCK_K, GROUP_M, NUM_STAGES, USE_CLC, PAIR)
    if PAIR:
        # No CTA leaves while its peer may still arrive on its barriers or read its stages.
        tlx.cluster_barrier()
