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
                16-bit pairs packed by PTX with PACK_PTX, which the host sets on GPUs; with
                EARLY_SCALES a tile's vectors are loaded once the previous tile is stored)
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

from .gemm_ws import (add_partial, alloc_ring, issue_stage, load_stage, mma_tile, mma_tile_rest,
                      mma_tile_split, pack_pairs, rastered_tile, store_tile)


# The epilogue helpers take what stays the same across a consumer's tiles as two tuples the
# consumer builds once: `epi` (run-time values) = (c_desc, c_bufs, half, scale_a_ptr,
# scale_b_ptr, bias_ptr, M, N, num_pid_m, num_pid_n, scale_a, scale_b), scale_a and scale_b the
# per-tensor scales; EPI (compile-time) = (BLOCK_M, BLOCK_N, GROUP_M, NUM_SMS, RASTER_N,
# EPI_SUBTILE, ROWWISE_A, ROWWISE_B, HAS_BIAS). A helper reads EPI's elements one by one (`X:
# tl.constexpr = EPI[i]`): a tuple assignment would make run-time values of them.


@ww.jit
def scale_vector(ptr, value, bound, off, SIZE: tl.constexpr, LOAD: tl.constexpr):
    """With LOAD, the SIZE values at ptr from off on (0.0 from `bound` on), else `value`: a
    consumer's per-row scale_a, a tile's per-column scale_b or its bias, or the per-tensor scale
    (0.0 for no bias)."""
    if LOAD:
        idx = off + tl.arange(0, SIZE)
        value = tl.load(ptr + idx, mask=idx < bound, other=0.0)
    return value


@ww.jit
def scaled_tile(epi, EPI: tl.constexpr, acc, sa, sb, bias, off_m, off_n, COLS: tl.constexpr,
                LOADED: tl.constexpr):
    """A consumer's fp32 tile acc [BLOCK_M // 2, COLS] at [off_m, off_n] times its scales, plus
    the bias, in fp32 (not yet rounded to C's dtype). LOADED: sa, sb and bias are the tile's
    (scale_vector's); else sa and sb are the per-tensor scales and each vector is loaded where it
    is used (fewer registers live)."""
    (c_desc, c_bufs, half, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, num_pid_m, num_pid_n,
     scale_a, scale_b) = epi
    HALF_M: tl.constexpr = EPI[0] // 2
    ROWWISE_A: tl.constexpr = EPI[6]
    ROWWISE_B: tl.constexpr = EPI[7]
    HAS_BIAS: tl.constexpr = EPI[8]
    # The scales in torch._scaled_mm's order: (acc * scale_a) * scale_b.
    if not LOADED:
        sa = scale_vector(scale_a_ptr, sa, M, off_m, HALF_M, ROWWISE_A)
    if ROWWISE_A:
        acc = acc * sa[:, None]
    else:
        acc = acc * sa
    if not LOADED:
        sb = scale_vector(scale_b_ptr, sb, N, off_n, COLS, ROWWISE_B)
    if ROWWISE_B:
        acc = acc * sb[None, :]
    else:
        acc = acc * sb
    if HAS_BIAS:
        if not LOADED:
            bias = scale_vector(bias_ptr, 0.0, N, off_n, COLS, HAS_BIAS)
        acc = acc + bias.to(tl.float32)[None, :]
    return acc


@ww.jit
def epilogue(epi, EPI: tl.constexpr, acc, sa, sb, bias, off_m, off_n, COLS: tl.constexpr,
             SUBTILE: tl.constexpr, LOADED: tl.constexpr):
    """scaled_tile's result rounded to C's dtype and stored in SUBTILE chunks (store_tile)."""
    (c_desc, c_bufs, half, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, num_pid_m, num_pid_n,
     scale_a, scale_b) = epi
    HALF_M: tl.constexpr = EPI[0] // 2
    c = scaled_tile(epi, EPI, acc, sa, sb, bias, off_m, off_n, COLS, LOADED)
    store_tile(c_desc, c_bufs, c.to(tlx.dtype_of(c_desc)), half, off_m, off_n, HALF_M, COLS,
               SUBTILE)


@ww.jit
def tile_offsets(epi, EPI: tl.constexpr, tile):
    """The first row and column of the consumer's half of tile `tile` (rastered_tile's order)."""
    (c_desc, c_bufs, half, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, num_pid_m, num_pid_n,
     scale_a, scale_b) = epi
    BLOCK_M: tl.constexpr = EPI[0]
    BLOCK_N: tl.constexpr = EPI[1]
    GROUP_M: tl.constexpr = EPI[2]
    RASTER_N: tl.constexpr = EPI[4]
    pid_m, pid_n = rastered_tile(tile, num_pid_m, num_pid_n, GROUP_M, RASTER_N)
    return pid_m * BLOCK_M + half * (BLOCK_M // 2), pid_n * BLOCK_N


@ww.jit
def tile_epilogue(epi, EPI: tl.constexpr, acc, tile):
    """The epilogue of a whole tile with the per-tensor scales, each vector loaded where it is
    used (STREAM's tiles, DEFER_STORE's last tile of a program, K = 0)."""
    (c_desc, c_bufs, half, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, num_pid_m, num_pid_n,
     scale_a, scale_b) = epi
    BLOCK_N: tl.constexpr = EPI[1]
    EPI_SUBTILE: tl.constexpr = EPI[5]
    off_m, off_n = tile_offsets(epi, EPI, tile)
    epilogue(epi, EPI, acc, scale_a, scale_b, 0.0, off_m, off_n, BLOCK_N, EPI_SUBTILE, False)


@ww.jit
def finish_tile(epi, EPI: tl.constexpr, acc, step, num_k):
    """STREAM: after this program's k-step `step` was added into acc, the epilogue of its tile
    if that was the tile's last k-step (acc restarts from zero), else acc unchanged."""
    BLOCK_M: tl.constexpr = EPI[0]
    BLOCK_N: tl.constexpr = EPI[1]
    NUM_SMS: tl.constexpr = EPI[3]
    if (step + 1) % num_k == 0:
        tile_epilogue(epi, EPI, acc, tl.program_id(0) + (step // num_k) * NUM_SMS)
        acc = tl.zeros([BLOCK_M // 2, BLOCK_N], dtype=tl.float32)
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
    a_dtype: tl.constexpr = tlx.dtype_of(a_desc)
    b_dtype: tl.constexpr = tlx.dtype_of(bt_desc)
    c_dtype: tl.constexpr = tlx.dtype_of(c_desc)
    # DEFER_STORE holds a tile's rounded C beside the next tile's accumulator: 16-bit C only
    # (fp32 C would take as many registers as the accumulator).
    tl.static_assert(not DEFER_STORE or (FAST_ACCUM and tlx.size_of(c_dtype) == 2 and not
                                         (SPLIT_N or STREAM)))
    STAGE_BYTES: tl.constexpr = (BLOCK_M + BLOCK_N) * BLOCK_K  # one byte an element

    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_k = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n

    # Stage s holds A halves 2s (rows of consumer 0) and 2s + 1 (consumer 1) and B^T tile s.
    a_bufs, b_bufs, full_bars, empty_bars, c_bufs = alloc_ring(
        a_dtype, b_dtype, c_dtype, HALF_M, BLOCK_N, BLOCK_K, NUM_STAGES, True, 2, EPI_SUBTILE)

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
            # What the epilogue helpers share (see above them).
            epi = (c_desc, c_bufs, half, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, num_pid_m,
                   num_pid_n, scale_a, scale_b)
            EPI: tl.constexpr = (BLOCK_M, BLOCK_N, GROUP_M, NUM_SMS, RASTER_N, EPI_SUBTILE,
                                 ROWWISE_A, ROWWISE_B, HAS_BIAS)
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
                        acc = finish_tile(epi, EPI, acc, step, num_k)
                        odd = issue_stage(a_bufs, b_bufs, full_bars, step + 2, half, odd, False,
                                          NUM_STAGES, True)
                        acc, even = add_partial(acc, even, empty_bars, step + 1, 0, 1,
                                                NUM_STAGES, 1)
                        acc = finish_tile(epi, EPI, acc, step + 1, num_k)
                        step += 2
                    if total % 2 == 0:
                        even = issue_stage(a_bufs, b_bufs, full_bars, step + 1, half, even,
                                           False, NUM_STAGES, True)
                        acc, odd = add_partial(acc, odd, empty_bars, step, 0, 1, NUM_STAGES, 1)
                        acc = finish_tile(epi, EPI, acc, step, num_k)
                        acc, even = add_partial(acc, even, empty_bars, step + 1, 0, 0,
                                                NUM_STAGES, 1)
                        acc = finish_tile(epi, EPI, acc, step + 1, num_k)
                    else:
                        acc, odd = add_partial(acc, odd, empty_bars, step, 0, 0, NUM_STAGES, 1)
                        acc = finish_tile(epi, EPI, acc, step, num_k)
                if num_k == 0:
                    # K = 0: each tile is its scaled bias (or zeros).
                    for t in range(0, my_tiles):
                        acc = finish_tile(epi, EPI, acc, t, 1)
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
                            off_m, off_n = tile_offsets(epi, EPI, tile)
                            if EARLY_SCALES:
                                # Loaded while the tile's chains run (the previous tile's
                                # rounded C is stored by now, so its registers are free):
                                # else the tensor cores wait for these loads after the loop.
                                sa = scale_vector(scale_a_ptr, scale_a, M, off_m, HALF_M,
                                                  ROWWISE_A)
                                sb = scale_vector(scale_b_ptr, scale_b, N, off_n, BLOCK_N,
                                                  ROWWISE_B)
                                bias = scale_vector(bias_ptr, 0.0, N, off_n, BLOCK_N, HAS_BIAS)
                            else:
                                sa = scale_a
                                sb = scale_b
                                bias = 0.0
                            acc, step = mma_tile_rest(a_bufs, b_bufs, full_bars, empty_bars, acc,
                                                      step, num_k, half, 0, NUM_STAGES, 1, True)
                            c = scaled_tile(epi, EPI, acc, sa, sb, bias, off_m, off_n, BLOCK_N,
                                            EARLY_SCALES)
                            packed = pack_pairs(c, HALF_M, BLOCK_N, c_dtype, PACK_PTX)
                            acc = issue_stage(a_bufs, b_bufs, full_bars, step, half, acc, False,
                                              NUM_STAGES, True)
                            store_tile(c_desc, c_bufs, packed, half, off_m, off_n, HALF_M,
                                       BLOCK_N, EPI_SUBTILE, True)
                        acc, step = mma_tile_rest(a_bufs, b_bufs, full_bars, empty_bars, acc,
                                                  step, num_k, half, 0, NUM_STAGES, 1, True)
                        tile_epilogue(epi, EPI, acc, tl.program_id(0) + (my_tiles - 1) * NUM_SMS)
                else:
                    # K = 0: each tile is its scaled bias (or zeros).
                    for tile in range(tl.program_id(0), num_tiles, NUM_SMS):
                        tile_epilogue(epi, EPI, acc, tile)
            else:
                for tile in range(tl.program_id(0), num_tiles, NUM_SMS):
                    pid_m, pid_n = rastered_tile(tile, num_pid_m, num_pid_n, GROUP_M, RASTER_N)
                    if EARLY_SCALES:
                        # The tile's per-row / per-column scales and bias are loaded before its
                        # main loop, which hides their latency (else the tile's epilogue waits).
                        off_m = pid_m * BLOCK_M + half * HALF_M
                        off_n = pid_n * BLOCK_N
                        sa = scale_vector(scale_a_ptr, scale_a, M, off_m, HALF_M, ROWWISE_A)
                        if SPLIT_N:
                            SPLIT_COLS: tl.constexpr = BLOCK_N // 2
                            sb_l = scale_vector(scale_b_ptr, scale_b, N, off_n, SPLIT_COLS,
                                                ROWWISE_B)
                            bias_l = scale_vector(bias_ptr, 0.0, N, off_n, SPLIT_COLS, HAS_BIAS)
                            sb_r = scale_vector(scale_b_ptr, scale_b, N, off_n + SPLIT_COLS,
                                                SPLIT_COLS, ROWWISE_B)
                            bias_r = scale_vector(bias_ptr, 0.0, N, off_n + SPLIT_COLS,
                                                  SPLIT_COLS, HAS_BIAS)
                        else:
                            sb = scale_vector(scale_b_ptr, scale_b, N, off_n, BLOCK_N, ROWWISE_B)
                            bias = scale_vector(bias_ptr, 0.0, N, off_n, BLOCK_N, HAS_BIAS)
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
                        epilogue(epi, EPI, left, sa, sb_l, bias_l, off_m, off_n, SPLIT_COLS,
                                 EPI_SUBTILE // 2, EARLY_SCALES)
                        epilogue(epi, EPI, right, sa, sb_r, bias_r, off_m, off_n + SPLIT_COLS,
                                 SPLIT_COLS, EPI_SUBTILE // 2, EARLY_SCALES)
                    else:
                        acc, step = mma_tile(a_bufs, b_bufs, full_bars, empty_bars, step, num_k,
                                             half, 0, HALF_M, BLOCK_N, NUM_STAGES, 1, True,
                                             not FAST_ACCUM)
                        off_m = pid_m * BLOCK_M + half * HALF_M
                        off_n = pid_n * BLOCK_N
                        epilogue(epi, EPI, acc, sa, sb, bias, off_m, off_n, BLOCK_N, EPI_SUBTILE,
                                 EARLY_SCALES)
            tlx.async_descriptor_store_wait(0)
