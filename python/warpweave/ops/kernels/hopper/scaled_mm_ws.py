"""Hopper scaled fp8 GEMM, persistent and warp-specialized (cooperative), with torch._scaled_mm's
epilogue: C = (A @ B) * scale_a * scale_b (+ bias), the semantics of kernels/scaled_mm.py.

The warp groups, the stage ring and its barriers, the tile order and the shared-memory epilogue
are gemm_ws.py's (its helpers load_stage, mma_tile, store_tile): a producer (40 registers)
issues the TMA loads, two consumer warp groups (232 registers) each multiply BLOCK_M // 2 rows of
the tile by the same B tile with async wgmma. What differs:
  - A [M, K] and B are fp8 (e4m3 / e5m2, mixed allowed); B is column-major, read as tiles of
    B^T [N, K] (bt_desc, block [BLOCK_N, BLOCK_K]) and handed to wgmma as their local_trans:
    8-bit wgmma operands must be K-major. BLOCK_K = 128 (one 128-byte swizzle row of fp8).
  - Each consumer's fp32 tile is multiplied by scale_a (one value, or with ROWWISE_A one per
    row of A) and then by scale_b (one value, or with ROWWISE_B one per column of B), the bias
    (fp16 / bf16 / fp32 [N], HAS_BIAS) added in fp32, and rounded once to C's dtype (bf16, fp16
    or fp32) before gemm_ws's chunked TMA store (EPI_SUBTILE column chunks, not waited for).
    Per-tensor scales are read once per program; per-row ones per tile, masked at the edges.
  - Accumulation: FAST_ACCUM sums all of K in the wgmma registers (torch's use_fast_accum=True);
    otherwise each 128-deep stage is promoted into the fp32 accumulator (gemm_ws.mma_tile's
    PROMOTE: two partials beside it, 128x128 tiles), or with SPLIT_N (128x256 tiles) each
    consumer's accumulator is kept in two column halves and each stage multiplied half by half
    through one partial (gemm_ws.mma_tile_split); the epilogue then runs per half.
Edges: TMA zero-fills the loads past M, N and K and clips the stores, so no shape needs to be a
multiple of the tiles; K must be a multiple of 16 and the rows of A, B^T and C 16-byte aligned.

Shared memory at 128x256x128: 4 stages of 48 KB and 4 chunk buffers of 64 x 64 (32 KB for
bf16 / fp16 C: 224 KB; fp32 C takes 64 KB, hence 3 stages).

Descriptors: a_desc block [BLOCK_M // 2, BLOCK_K], bt_desc block [BLOCK_N, BLOCK_K],
             c_desc block [BLOCK_M // 2, BLOCK_N // EPI_SUBTILE]
    grid = (min(NUM_SMS, number of tiles),)
    constexprs: BLOCK_M=128, BLOCK_N=256 (or 128), BLOCK_K=128, GROUP_M=16, NUM_STAGES=4,
                EPI_SUBTILE=4, NUM_SMS (132 on H100/H200), ROWWISE_A, ROWWISE_B, HAS_BIAS,
                RASTER_N=False, FAST_ACCUM=False, SPLIT_N=False (promoted only; EPI_SUBTILE
                4 or 8), EARLY_SCALES=False (a tile's per-row / per-column scales and bias
                loaded before its main loop instead of after it), STREAM=False (promoted
                128x128 only: the k-steps of all of a program's tiles as one stream of
                mma_tile's PROMOTE pairs, each tile's epilogue run while the next tile's first
                wgmma chain is in flight), DEFER_STORE=False (FAST_ACCUM with bf16 / fp16 C:
                a tile scaled and rounded, the next tile's first wgmma chain issued into the
                accumulator's registers, then the rounded tile stored while it runs; its
                16-bit pairs packed by PTX with PACK_PTX, which the host sets on GPUs)
    signature: a_desc:desc<fp8e4nv,64x128>, bt_desc:desc<fp8e4nv,256x128>,
               c_desc:desc<bf16,64x64>, scale_a_ptr:*fp32, scale_b_ptr:*fp32, bias_ptr:*bf16,
               M:i32, N:i32, K:i32, BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=16,
               NUM_STAGES=4, EPI_SUBTILE=4, NUM_SMS=132, ROWWISE_A=True, ROWWISE_B=True,
               HAS_BIAS=False (warpweave.ops's)
    launch: num_warps=4 (the default task; the consumers add 8 warps)
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from .gemm_ws import (add_partial, issue_stage, load_stage, mma_tile, mma_tile_rest,
                      mma_tile_split, pack_pairs, rastered_tile, store_tile)


@ww.jit
def row_scales(scale_a_ptr, scale_a, M, off_m, HALF_M: tl.constexpr, ROWWISE_A: tl.constexpr):
    """scale_a for a consumer's rows from off_m: per row (masked at M) or the per-tensor one."""
    if ROWWISE_A:
        rows = off_m + tl.arange(0, HALF_M)
        scale_a = tl.load(scale_a_ptr + rows, mask=rows < M, other=0.0)
    return scale_a


@ww.jit
def column_scales(scale_b_ptr, scale_b, N, off_n, COLS: tl.constexpr, ROWWISE_B: tl.constexpr):
    """scale_b for COLS columns from off_n: per column (masked at N) or the per-tensor one."""
    if ROWWISE_B:
        cols = off_n + tl.arange(0, COLS)
        scale_b = tl.load(scale_b_ptr + cols, mask=cols < N, other=0.0)
    return scale_b


@ww.jit
def column_bias(bias_ptr, N, off_n, COLS: tl.constexpr, HAS_BIAS: tl.constexpr):
    """The bias of COLS columns from off_n in its own dtype (masked at N), 0.0 without one."""
    bias = 0.0
    if HAS_BIAS:
        cols = off_n + tl.arange(0, COLS)
        bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0)
    return bias


@ww.jit
def scaled_tile(acc, sa, sb, bias, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, off_m, off_n,
                HALF_M: tl.constexpr, COLS: tl.constexpr, ROWWISE_A: tl.constexpr,
                ROWWISE_B: tl.constexpr, HAS_BIAS: tl.constexpr, LOADED: tl.constexpr):
    """A consumer's fp32 tile acc [HALF_M, COLS] at [off_m, off_n] times its scales, plus the
    bias, in fp32 (not yet rounded to C's dtype). LOADED: sa, sb and bias are the tile's
    (row_scales, column_scales, column_bias); else sa and sb are the per-tensor scales and each
    vector is loaded where it is used (fewer registers live)."""
    # The scales in torch._scaled_mm's order: (acc * scale_a) * scale_b.
    if not LOADED:
        sa = row_scales(scale_a_ptr, sa, M, off_m, HALF_M, ROWWISE_A)
    if ROWWISE_A:
        acc = acc * sa[:, None]
    else:
        acc = acc * sa
    if not LOADED:
        sb = column_scales(scale_b_ptr, sb, N, off_n, COLS, ROWWISE_B)
    if ROWWISE_B:
        acc = acc * sb[None, :]
    else:
        acc = acc * sb
    if HAS_BIAS:
        if not LOADED:
            bias = column_bias(bias_ptr, N, off_n, COLS, HAS_BIAS)
        acc = acc + bias.to(tl.float32)[None, :]
    return acc


@ww.jit
def epilogue(c_desc, c_bufs, acc, sa, sb, bias, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, half,
             off_m, off_n, HALF_M: tl.constexpr, COLS: tl.constexpr, EPI_SUBTILE: tl.constexpr,
             ROWWISE_A: tl.constexpr, ROWWISE_B: tl.constexpr, HAS_BIAS: tl.constexpr,
             LOADED: tl.constexpr, c_dtype: tl.constexpr):
    """scaled_tile's result stored in EPI_SUBTILE chunks (store_tile)."""
    c = scaled_tile(acc, sa, sb, bias, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, off_m, off_n,
                    HALF_M, COLS, ROWWISE_A, ROWWISE_B, HAS_BIAS, LOADED)
    store_tile(c_desc, c_bufs, c.to(c_dtype), half, off_m, off_n, HALF_M, COLS, EPI_SUBTILE)


@ww.jit
def finish_tile(c_desc, c_bufs, acc, step, num_k, scale_a, scale_b, scale_a_ptr, scale_b_ptr,
                bias_ptr, M, N, num_pid_m, num_pid_n, half, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
                EPI_SUBTILE: tl.constexpr, ROWWISE_A: tl.constexpr, ROWWISE_B: tl.constexpr,
                HAS_BIAS: tl.constexpr, RASTER_N: tl.constexpr, c_dtype: tl.constexpr):
    """STREAM: after this program's k-step `step` was added into acc, the epilogue of its tile
    if that was the tile's last k-step (acc restarts from zero), else acc unchanged."""
    if (step + 1) % num_k == 0:
        HALF_M: tl.constexpr = BLOCK_M // 2
        tile = tl.program_id(0) + (step // num_k) * NUM_SMS
        pid_m, pid_n = rastered_tile(tile, num_pid_m, num_pid_n, GROUP_M, RASTER_N)
        off_m = pid_m * BLOCK_M + half * HALF_M
        off_n = pid_n * BLOCK_N
        epilogue(c_desc, c_bufs, acc, scale_a, scale_b, 0.0, scale_a_ptr, scale_b_ptr, bias_ptr,
                 M, N, half, off_m, off_n, HALF_M, BLOCK_N, EPI_SUBTILE, ROWWISE_A, ROWWISE_B,
                 HAS_BIAS, False, c_dtype)
        acc = tl.zeros([HALF_M, BLOCK_N], dtype=tl.float32)
    return acc


@ww.jit
def scaled_mm_ws_kernel(a_desc, bt_desc, c_desc, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, K,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr, NUM_STAGES: tl.constexpr,
                        EPI_SUBTILE: tl.constexpr, NUM_SMS: tl.constexpr,
                        ROWWISE_A: tl.constexpr, ROWWISE_B: tl.constexpr,
                        HAS_BIAS: tl.constexpr, RASTER_N: tl.constexpr = False,
                        FAST_ACCUM: tl.constexpr = False, SPLIT_N: tl.constexpr = False,
                        EARLY_SCALES: tl.constexpr = False, STREAM: tl.constexpr = False,
                        DEFER_STORE: tl.constexpr = False, PACK_PTX: tl.constexpr = False):
    tl.static_assert(EPI_SUBTILE == 1 or EPI_SUBTILE == 2 or EPI_SUBTILE == 4 or
                     EPI_SUBTILE == 8)
    # SPLIT_N: promoted accumulation on tiles too wide for mma_tile's two partials.
    tl.static_assert(not SPLIT_N or (not FAST_ACCUM and EPI_SUBTILE >= 4))
    tl.static_assert(not STREAM or not (FAST_ACCUM or SPLIT_N or EARLY_SCALES))
    HALF_M: tl.constexpr = BLOCK_M // 2
    EPI_N: tl.constexpr = BLOCK_N // EPI_SUBTILE
    a_dtype: tl.constexpr = tlx.dtype_of(a_desc)
    b_dtype: tl.constexpr = tlx.dtype_of(bt_desc)
    c_dtype: tl.constexpr = tlx.dtype_of(c_desc)
    # DEFER_STORE holds a tile's rounded C beside the next tile's accumulator: 16-bit C only
    # (fp32 C would take as many registers as the accumulator).
    tl.static_assert(not DEFER_STORE or (FAST_ACCUM and tlx.size_of(c_dtype) == 2 and not
                                         (SPLIT_N or STREAM or EARLY_SCALES)))
    STAGE_BYTES: tl.constexpr = (BLOCK_M + BLOCK_N) * BLOCK_K  # one byte an element

    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_k = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n

    # Stage s holds A halves 2s (rows of consumer 0) and 2s + 1 (consumer 1) and B^T tile s.
    a_bufs = tlx.local_alloc((HALF_M, BLOCK_K), a_dtype, NUM_STAGES * 2)
    b_bufs = tlx.local_alloc((BLOCK_N, BLOCK_K), b_dtype, NUM_STAGES)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)
    if EPI_SUBTILE == 1:
        c_bufs = tlx.local_alloc((HALF_M, BLOCK_N), c_dtype, 2)
    else:
        c_bufs = tlx.local_alloc((HALF_M, EPI_N), c_dtype, 4)  # two per consumer

    with tlx.async_tasks():
        with tlx.async_task("default", registers=40):
            step = 0
            for tile in range(tl.program_id(0), num_tiles, NUM_SMS):
                pid_m, pid_n = rastered_tile(tile, num_pid_m, num_pid_n, GROUP_M, RASTER_N)
                for k in range(0, num_k):
                    stage = step % NUM_STAGES
                    tlx.barrier_wait(tlx.local_view(empty_bars, stage),
                                     ((step // NUM_STAGES) & 1) ^ 1)
                    full = tlx.local_view(full_bars, stage)
                    tlx.barrier_expect_bytes(full, STAGE_BYTES)
                    load_stage(a_desc, bt_desc, a_bufs, b_bufs, full, stage, pid_m * BLOCK_M,
                               pid_n * BLOCK_N, k * BLOCK_K, 0, HALF_M, BLOCK_N, BLOCK_K, 1, 1,
                               True)
                    step += 1

        with tlx.async_task(num_warps=4, registers=232, replicate=2):
            half = tlx.async_task_replica_id()
            # Per-tensor scales, read once (unused when rowwise).
            scale_a = 1.0
            scale_b = 1.0
            if not ROWWISE_A:
                scale_a = tl.load(scale_a_ptr)
            if not ROWWISE_B:
                scale_b = tl.load(scale_b_ptr)
            step = 0
            if STREAM:
                # Promoted accumulation over this program's k-steps of all its tiles as one
                # stream (mma_tile's PROMOTE pairs, the partial chosen by the step's parity
                # across tiles): a tile's epilogue (finish_tile) runs while the next tile's
                # first chain is in flight, instead of after the tensor cores drained.
                acc = tl.zeros([HALF_M, BLOCK_N], dtype=tl.float32)
                even = tl.zeros([HALF_M, BLOCK_N], dtype=tl.float32)
                odd = tl.zeros([HALF_M, BLOCK_N], dtype=tl.float32)
                my_tiles = (num_tiles - tl.program_id(0) + NUM_SMS - 1) // NUM_SMS
                total = my_tiles * num_k
                if total > 0:
                    odd = issue_stage(a_bufs, b_bufs, full_bars, step, half, odd, False,
                                      NUM_STAGES, True)
                    for pair in range(0, (total - 1) // 2):
                        even = issue_stage(a_bufs, b_bufs, full_bars, step + 1, half, even,
                                           False, NUM_STAGES, True)
                        acc, odd = add_partial(acc, odd, empty_bars, step, 0, 1, NUM_STAGES, 1)
                        acc = finish_tile(c_desc, c_bufs, acc, step, num_k, scale_a, scale_b,
                                          scale_a_ptr, scale_b_ptr, bias_ptr, M, N, num_pid_m,
                                          num_pid_n, half, BLOCK_M, BLOCK_N, GROUP_M, NUM_SMS,
                                          EPI_SUBTILE, ROWWISE_A, ROWWISE_B, HAS_BIAS, RASTER_N,
                                          c_dtype)
                        odd = issue_stage(a_bufs, b_bufs, full_bars, step + 2, half, odd, False,
                                          NUM_STAGES, True)
                        acc, even = add_partial(acc, even, empty_bars, step + 1, 0, 1,
                                                NUM_STAGES, 1)
                        acc = finish_tile(c_desc, c_bufs, acc, step + 1, num_k, scale_a,
                                          scale_b, scale_a_ptr, scale_b_ptr, bias_ptr, M, N,
                                          num_pid_m, num_pid_n, half, BLOCK_M, BLOCK_N, GROUP_M,
                                          NUM_SMS, EPI_SUBTILE, ROWWISE_A, ROWWISE_B, HAS_BIAS,
                                          RASTER_N, c_dtype)
                        step += 2
                    if total % 2 == 0:
                        even = issue_stage(a_bufs, b_bufs, full_bars, step + 1, half, even,
                                           False, NUM_STAGES, True)
                        acc, odd = add_partial(acc, odd, empty_bars, step, 0, 1, NUM_STAGES, 1)
                        acc = finish_tile(c_desc, c_bufs, acc, step, num_k, scale_a, scale_b,
                                          scale_a_ptr, scale_b_ptr, bias_ptr, M, N, num_pid_m,
                                          num_pid_n, half, BLOCK_M, BLOCK_N, GROUP_M, NUM_SMS,
                                          EPI_SUBTILE, ROWWISE_A, ROWWISE_B, HAS_BIAS, RASTER_N,
                                          c_dtype)
                        acc, even = add_partial(acc, even, empty_bars, step + 1, 0, 0,
                                                NUM_STAGES, 1)
                        acc = finish_tile(c_desc, c_bufs, acc, step + 1, num_k, scale_a,
                                          scale_b, scale_a_ptr, scale_b_ptr, bias_ptr, M, N,
                                          num_pid_m, num_pid_n, half, BLOCK_M, BLOCK_N, GROUP_M,
                                          NUM_SMS, EPI_SUBTILE, ROWWISE_A, ROWWISE_B, HAS_BIAS,
                                          RASTER_N, c_dtype)
                    else:
                        acc, odd = add_partial(acc, odd, empty_bars, step, 0, 0, NUM_STAGES, 1)
                        acc = finish_tile(c_desc, c_bufs, acc, step, num_k, scale_a, scale_b,
                                          scale_a_ptr, scale_b_ptr, bias_ptr, M, N, num_pid_m,
                                          num_pid_n, half, BLOCK_M, BLOCK_N, GROUP_M, NUM_SMS,
                                          EPI_SUBTILE, ROWWISE_A, ROWWISE_B, HAS_BIAS, RASTER_N,
                                          c_dtype)
                if num_k == 0:
                    # K = 0: each tile is its scaled bias (or zeros).
                    for t in range(0, my_tiles):
                        acc = finish_tile(c_desc, c_bufs, acc, t, 1, scale_a, scale_b,
                                          scale_a_ptr, scale_b_ptr, bias_ptr, M, N, num_pid_m,
                                          num_pid_n, half, BLOCK_M, BLOCK_N, GROUP_M, NUM_SMS,
                                          EPI_SUBTILE, ROWWISE_A, ROWWISE_B, HAS_BIAS, RASTER_N,
                                          c_dtype)
            elif DEFER_STORE:
                # Fast accumulation, each tile's store deferred: once its accumulator is done,
                # it is scaled and rounded to C's dtype (bf16 / fp16 pairs: half the registers),
                # the next tile's first wgmma chain is issued into the accumulator's registers,
                # and only then is the rounded tile written to shared memory and stored, while
                # that chain runs: the tensor cores are idle only for the scaling and rounding.
                acc = tl.zeros([HALF_M, BLOCK_N], dtype=tl.float32)
                my_tiles = (num_tiles - tl.program_id(0) + NUM_SMS - 1) // NUM_SMS
                if num_k > 0:
                    if my_tiles > 0:
                        # A tile's first stage is in flight at the top of each tile.
                        acc = issue_stage(a_bufs, b_bufs, full_bars, step, half, acc, False,
                                          NUM_STAGES, True)
                        # Every tile but the program's last (which has no next tile).
                        for tile in range(tl.program_id(0), num_tiles - NUM_SMS, NUM_SMS):
                            acc, step = mma_tile_rest(a_bufs, b_bufs, full_bars, empty_bars, acc,
                                                      step, num_k, half, 0, NUM_STAGES, 1, True)
                            pid_m, pid_n = rastered_tile(tile, num_pid_m, num_pid_n, GROUP_M,
                                                         RASTER_N)
                            off_m = pid_m * BLOCK_M + half * HALF_M
                            off_n = pid_n * BLOCK_N
                            c = scaled_tile(acc, scale_a, scale_b, 0.0, scale_a_ptr, scale_b_ptr,
                                            bias_ptr, M, N, off_m, off_n, HALF_M, BLOCK_N,
                                            ROWWISE_A, ROWWISE_B, HAS_BIAS, False)
                            packed = pack_pairs(c, HALF_M, BLOCK_N, c_dtype, PACK_PTX)
                            acc = issue_stage(a_bufs, b_bufs, full_bars, step, half, acc, False,
                                              NUM_STAGES, True)
                            store_tile(c_desc, c_bufs, packed, half, off_m, off_n, HALF_M,
                                       BLOCK_N, EPI_SUBTILE, True)
                        acc, step = mma_tile_rest(a_bufs, b_bufs, full_bars, empty_bars, acc,
                                                  step, num_k, half, 0, NUM_STAGES, 1, True)
                        tile = tl.program_id(0) + (my_tiles - 1) * NUM_SMS
                        pid_m, pid_n = rastered_tile(tile, num_pid_m, num_pid_n, GROUP_M,
                                                     RASTER_N)
                        epilogue(c_desc, c_bufs, acc, scale_a, scale_b, 0.0, scale_a_ptr,
                                 scale_b_ptr, bias_ptr, M, N, half, pid_m * BLOCK_M +
                                 half * HALF_M, pid_n * BLOCK_N, HALF_M, BLOCK_N, EPI_SUBTILE,
                                 ROWWISE_A, ROWWISE_B, HAS_BIAS, False, c_dtype)
                else:
                    # K = 0: each tile is its scaled bias (or zeros).
                    for tile in range(tl.program_id(0), num_tiles, NUM_SMS):
                        pid_m, pid_n = rastered_tile(tile, num_pid_m, num_pid_n, GROUP_M,
                                                     RASTER_N)
                        epilogue(c_desc, c_bufs, acc, scale_a, scale_b, 0.0, scale_a_ptr,
                                 scale_b_ptr, bias_ptr, M, N, half, pid_m * BLOCK_M +
                                 half * HALF_M, pid_n * BLOCK_N, HALF_M, BLOCK_N, EPI_SUBTILE,
                                 ROWWISE_A, ROWWISE_B, HAS_BIAS, False, c_dtype)
            else:
                for tile in range(tl.program_id(0), num_tiles, NUM_SMS):
                    pid_m, pid_n = rastered_tile(tile, num_pid_m, num_pid_n, GROUP_M, RASTER_N)
                    if EARLY_SCALES:
                        # The tile's per-row / per-column scales and bias are loaded before its
                        # main loop, which hides their latency (else the tile's epilogue waits).
                        off_m = pid_m * BLOCK_M + half * HALF_M
                        off_n = pid_n * BLOCK_N
                        sa = row_scales(scale_a_ptr, scale_a, M, off_m, HALF_M, ROWWISE_A)
                        if SPLIT_N:
                            SPLIT_COLS: tl.constexpr = BLOCK_N // 2
                            sb_l = column_scales(scale_b_ptr, scale_b, N, off_n, SPLIT_COLS,
                                                 ROWWISE_B)
                            bias_l = column_bias(bias_ptr, N, off_n, SPLIT_COLS, HAS_BIAS)
                            sb_r = column_scales(scale_b_ptr, scale_b, N, off_n + SPLIT_COLS,
                                                 SPLIT_COLS, ROWWISE_B)
                            bias_r = column_bias(bias_ptr, N, off_n + SPLIT_COLS, SPLIT_COLS,
                                                 HAS_BIAS)
                        else:
                            sb = column_scales(scale_b_ptr, scale_b, N, off_n, BLOCK_N, ROWWISE_B)
                            bias = column_bias(bias_ptr, N, off_n, BLOCK_N, HAS_BIAS)
                    else:
                        sa = scale_a
                        sb = scale_b
                        sb_l = scale_b
                        sb_r = scale_b
                        bias = 0.0
                        bias_l = 0.0
                        bias_r = 0.0
                    if SPLIT_N:
                        SPLIT_COLS: tl.constexpr = BLOCK_N // 2
                        left, right, step = mma_tile_split(a_bufs, b_bufs, full_bars, empty_bars,
                                                           step, num_k, half, 0, HALF_M, BLOCK_N,
                                                           BLOCK_K, NUM_STAGES, 1, True)
                        off_m = pid_m * BLOCK_M + half * HALF_M
                        off_n = pid_n * BLOCK_N
                        epilogue(c_desc, c_bufs, left, sa, sb_l, bias_l, scale_a_ptr, scale_b_ptr,
                                 bias_ptr, M, N, half, off_m, off_n, HALF_M, SPLIT_COLS,
                                 EPI_SUBTILE // 2, ROWWISE_A, ROWWISE_B, HAS_BIAS, EARLY_SCALES,
                                 c_dtype)
                        epilogue(c_desc, c_bufs, right, sa, sb_r, bias_r, scale_a_ptr,
                                 scale_b_ptr, bias_ptr, M, N, half, off_m, off_n + SPLIT_COLS,
                                 HALF_M, SPLIT_COLS, EPI_SUBTILE // 2, ROWWISE_A, ROWWISE_B,
                                 HAS_BIAS, EARLY_SCALES, c_dtype)
                    else:
                        acc, step = mma_tile(a_bufs, b_bufs, full_bars, empty_bars, step, num_k,
                                             half, 0, HALF_M, BLOCK_N, NUM_STAGES, 1, True,
                                             not FAST_ACCUM)
                        off_m = pid_m * BLOCK_M + half * HALF_M
                        off_n = pid_n * BLOCK_N
                        epilogue(c_desc, c_bufs, acc, sa, sb, bias, scale_a_ptr, scale_b_ptr,
                                 bias_ptr, M, N, half, off_m, off_n, HALF_M, BLOCK_N,
                                 EPI_SUBTILE, ROWWISE_A, ROWWISE_B, HAS_BIAS, EARLY_SCALES,
                                 c_dtype)
            tlx.async_descriptor_store_wait(0)
