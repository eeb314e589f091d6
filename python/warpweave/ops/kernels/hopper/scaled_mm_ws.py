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
  - CLUSTER_M=2: clusters of two CTAs (launch with ctas_per_cga=(2, 1, 1)) on M-neighbour
    tiles, which read the same B^T tile: each CTA loads one row half of it (bt_desc block
    [BLOCK_N // 2, BLOCK_K]) and multicasts it into both CTAs' stage (gemm_ws.load_stage), so a
    CTA's L2-to-SM traffic per stage drops from (BLOCK_M + BLOCK_N) * BLOCK_K bytes to
    (BLOCK_M + BLOCK_N / 2) * BLOCK_K (48 KB -> 32 KB at 128x256x128). Work items are cluster
    tiles (GROUP_M cluster-rows a group), both CTAs take the same ones; a CTA whose tile lies
    past M (an odd number of tile-rows) still loads and multicasts its half (its A loads
    zero-filled, its stores clipped). empty_bars take 4 arrivals (both CTAs' consumers: the
    peer's producer writes this CTA's stage), and the CTAs meet at a cluster barrier before
    they exit. Not with STREAM (it numbers tiles per program).
Edges: TMA zero-fills the loads past M, N and K and clips the stores, so no shape needs to be a
multiple of the tiles; K must be a multiple of 16 and the rows of A, B^T and C 16-byte aligned.

Shared memory at 128x256x128: 4 stages of 48 KB and 4 chunk buffers of 64 x 64 (32 KB for
bf16 / fp16 C: 224 KB; fp32 C takes 64 KB, hence 3 stages).

Descriptors: a_desc block [BLOCK_M // 2, BLOCK_K], bt_desc block [BLOCK_N // CLUSTER_M,
             BLOCK_K], c_desc block [BLOCK_M // 2, BLOCK_N // EPI_SUBTILE]
    grid = (min(NUM_SMS // CLUSTER_M, number of cluster tiles) * CLUSTER_M,): whole clusters,
           NUM_SMS the CTAs of the clusters that fit on the GPU (a multiple of CLUSTER_M)
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
                EARLY_SCALES a tile's vectors are loaded once the previous tile is stored),
                CLUSTER_M=1 (2: 2-CTA clusters sharing B^T through multicast, see above;
                ops.scaled_mm's candidates take it with FAST_ACCUM only, the kernel with
                either accumulation but STREAM), C_EVICT_FIRST=False (C's TMA stores
                evict-first in L2: C is written once, A and B tiles are read again)
    signature: a_desc:desc<fp8e4nv,64x128>, bt_desc:desc<fp8e4nv,256x128>,
               c_desc:desc<bf16,64x64>, scale_a_ptr:*fp32, scale_b_ptr:*fp32, bias_ptr:*bf16,
               M:i32, N:i32, K:i32, BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=16,
               NUM_STAGES=4, EPI_SUBTILE=4, NUM_SMS=132, ROWWISE_A=True, ROWWISE_B=True,
               HAS_BIAS=False (warpweave.ops's)
    launch: num_warps=4 (the default task; the consumers add 8 warps), with CLUSTER_M=2
            ctas_per_cga=(2, 1, 1)
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from .gemm_ws import (add_partial, alloc_ring, issue_stage, load_stage, mma_tile, mma_tile_rest,
                      mma_tile_split, pack_pairs, rastered_tile, store_tile)


# The epilogue helpers take what stays the same across a consumer's tiles as two tuples the
# consumer builds once: `epi` (run-time values) = (c_desc, c_bufs, half, scale_a_ptr,
# scale_b_ptr, bias_ptr, M, N, num_pid_m, num_pid_n, scale_a, scale_b, rank), scale_a and scale_b
# the per-tensor scales, rank the CTA's in its cluster; EPI (compile-time) = (BLOCK_M, BLOCK_N,
# GROUP_M, NUM_SMS, RASTER_N, EPI_SUBTILE, ROWWISE_A, ROWWISE_B, HAS_BIAS, CLUSTER_M,
# C_EVICT_FIRST). A helper reads EPI's elements one by one (`X: tl.constexpr = EPI[i]`): a tuple
# assignment would make run-time values of them.


@ww.jit
def cluster_tile(work, num_pid_m, num_pid_n, rank, GROUP_M: tl.constexpr,
                 RASTER_N: tl.constexpr, CLUSTER_M: tl.constexpr):
    """The tile (pid_m, pid_n) of CTA `rank` of work item `work`: work items are cluster tiles
    of CLUSTER_M M-neighbour tiles in rastered_tile's order (GROUP_M cluster-rows a group), each
    CTA taking one of them (the tile itself with CLUSTER_M = 1)."""
    cluster_m, pid_n = rastered_tile(work, tl.cdiv(num_pid_m, CLUSTER_M), num_pid_n, GROUP_M,
                                     RASTER_N)
    return cluster_m * CLUSTER_M + rank, pid_n


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
     scale_a, scale_b, rank) = epi
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
     scale_a, scale_b, rank) = epi
    HALF_M: tl.constexpr = EPI[0] // 2
    C_EVICT_FIRST: tl.constexpr = EPI[10]
    c = scaled_tile(epi, EPI, acc, sa, sb, bias, off_m, off_n, COLS, LOADED)
    store_tile(c_desc, c_bufs, c.to(tlx.dtype_of(c_desc)), half, off_m, off_n, HALF_M, COLS,
               SUBTILE, False, C_EVICT_FIRST)


@ww.jit
def tile_offsets(epi, EPI: tl.constexpr, work):
    """The first row and column of the consumer's half of its CTA's tile of work item `work`
    (cluster_tile's)."""
    (c_desc, c_bufs, half, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, num_pid_m, num_pid_n,
     scale_a, scale_b, rank) = epi
    BLOCK_M: tl.constexpr = EPI[0]
    BLOCK_N: tl.constexpr = EPI[1]
    GROUP_M: tl.constexpr = EPI[2]
    RASTER_N: tl.constexpr = EPI[4]
    CLUSTER_M: tl.constexpr = EPI[9]
    pid_m, pid_n = cluster_tile(work, num_pid_m, num_pid_n, rank, GROUP_M, RASTER_N, CLUSTER_M)
    return pid_m * BLOCK_M + half * (BLOCK_M // 2), pid_n * BLOCK_N


@ww.jit
def tile_epilogue(epi, EPI: tl.constexpr, acc, work):
    """The epilogue of a whole tile (work item `work`'s) with the per-tensor scales, each vector
    loaded where it is used (STREAM's tiles, DEFER_STORE's last tile of a program, K = 0)."""
    (c_desc, c_bufs, half, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, num_pid_m, num_pid_n,
     scale_a, scale_b, rank) = epi
    BLOCK_N: tl.constexpr = EPI[1]
    EPI_SUBTILE: tl.constexpr = EPI[5]
    off_m, off_n = tile_offsets(epi, EPI, work)
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
                        DEFER_STORE: tl.constexpr = False, PACK_PTX: tl.constexpr = False,
                        CLUSTER_M: tl.constexpr = 1, C_EVICT_FIRST: tl.constexpr = False):
    tl.static_assert(EPI_SUBTILE == 1 or EPI_SUBTILE == 2 or EPI_SUBTILE == 4 or
                     EPI_SUBTILE == 8)
    # STREAM numbers its tiles by program, not by cluster work item.
    tl.static_assert((CLUSTER_M == 1 or CLUSTER_M == 2) and not (STREAM and CLUSTER_M == 2))
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
    # Work items are cluster tiles of CLUSTER_M M-neighbour tiles (cluster_tile), one a CTA: the
    # CTAs of a cluster (consecutive programs) take the same items, in step.
    num_work = tl.cdiv(num_pid_m, CLUSTER_M) * num_pid_n
    first_work = tl.program_id(0) // CLUSTER_M
    rank = tl.program_id(0) % CLUSTER_M  # the CTA's rank in its (1-D) cluster
    WORK_STEP: tl.constexpr = NUM_SMS // CLUSTER_M

    # Stage s holds A halves 2s (rows of consumer 0) and 2s + 1 (consumer 1) and B^T tile s; in a
    # 2-CTA cluster both CTAs' consumers read it (the peer's producer writes half of B^T).
    a_bufs, b_bufs, full_bars, empty_bars, c_bufs = alloc_ring(
        a_dtype, b_dtype, c_dtype, HALF_M, BLOCK_N, BLOCK_K, NUM_STAGES, True, 2 * CLUSTER_M,
        EPI_SUBTILE)

    with tlx.async_tasks():
        with tlx.async_task("default", registers=40):
            step = 0
            for work in range(first_work, num_work, WORK_STEP):
                pid_m, pid_n = cluster_tile(work, num_pid_m, num_pid_n, rank, GROUP_M, RASTER_N,
                                            CLUSTER_M)
                for k in range(0, num_k):
                    stage = step % NUM_STAGES
                    tlx.barrier_wait(tlx.local_view(empty_bars, stage),
                                     ((step // NUM_STAGES) & 1) ^ 1)
                    # The whole stage lands here, the peer's half of B^T included.
                    full = tlx.local_view(full_bars, stage)
                    tlx.barrier_expect_bytes(full, STAGE_BYTES)
                    load_stage(a_desc, bt_desc, a_bufs, b_bufs, full, stage, pid_m * BLOCK_M,
                               pid_n * BLOCK_N, k * BLOCK_K, rank, HALF_M, BLOCK_N, BLOCK_K,
                               CLUSTER_M, 1, True)
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
                   num_pid_n, scale_a, scale_b, rank)
            EPI: tl.constexpr = (BLOCK_M, BLOCK_N, GROUP_M, NUM_SMS, RASTER_N, EPI_SUBTILE,
                                 ROWWISE_A, ROWWISE_B, HAS_BIAS, CLUSTER_M, C_EVICT_FIRST)
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
                my_works = (num_work - first_work + WORK_STEP - 1) // WORK_STEP
                if num_k > 0:
                    if my_works > 0:
                        # A tile's first stage is in flight at the top of each tile.
                        acc = issue_stage(a_bufs, b_bufs, full_bars, step, half, acc, False,
                                          NUM_STAGES, True)
                        # Every tile but the program's last (which has no next tile).
                        for work in range(first_work, num_work - WORK_STEP, WORK_STEP):
                            off_m, off_n = tile_offsets(epi, EPI, work)
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
                                                      step, num_k, half, rank, NUM_STAGES,
                                                      CLUSTER_M, True)
                            c = scaled_tile(epi, EPI, acc, sa, sb, bias, off_m, off_n, BLOCK_N,
                                            EARLY_SCALES)
                            packed = pack_pairs(c, HALF_M, BLOCK_N, c_dtype, PACK_PTX)
                            acc = issue_stage(a_bufs, b_bufs, full_bars, step, half, acc, False,
                                              NUM_STAGES, True)
                            store_tile(c_desc, c_bufs, packed, half, off_m, off_n, HALF_M,
                                       BLOCK_N, EPI_SUBTILE, True, C_EVICT_FIRST)
                        acc, step = mma_tile_rest(a_bufs, b_bufs, full_bars, empty_bars, acc,
                                                  step, num_k, half, rank, NUM_STAGES, CLUSTER_M,
                                                  True)
                        tile_epilogue(epi, EPI, acc, first_work + (my_works - 1) * WORK_STEP)
                else:
                    # K = 0: each tile is its scaled bias (or zeros).
                    for work in range(first_work, num_work, WORK_STEP):
                        tile_epilogue(epi, EPI, acc, work)
            else:
                for work in range(first_work, num_work, WORK_STEP):
                    pid_m, pid_n = cluster_tile(work, num_pid_m, num_pid_n, rank, GROUP_M,
                                                RASTER_N, CLUSTER_M)
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
                                                           step, num_k, half, rank, HALF_M,
                                                           BLOCK_N, BLOCK_K, NUM_STAGES, CLUSTER_M,
                                                           True)
                        off_m = pid_m * BLOCK_M + half * HALF_M
                        off_n = pid_n * BLOCK_N
                        epilogue(epi, EPI, left, sa, sb_l, bias_l, off_m, off_n, SPLIT_COLS,
                                 EPI_SUBTILE // 2, EARLY_SCALES)
                        epilogue(epi, EPI, right, sa, sb_r, bias_r, off_m, off_n + SPLIT_COLS,
                                 SPLIT_COLS, EPI_SUBTILE // 2, EARLY_SCALES)
                    else:
                        acc, step = mma_tile(a_bufs, b_bufs, full_bars, empty_bars, step, num_k,
                                             half, rank, HALF_M, BLOCK_N, NUM_STAGES, CLUSTER_M,
                                             True, not FAST_ACCUM)
                        off_m = pid_m * BLOCK_M + half * HALF_M
                        off_n = pid_n * BLOCK_N
                        epilogue(epi, EPI, acc, sa, sb, bias, off_m, off_n, BLOCK_N, EPI_SUBTILE,
                                 EARLY_SCALES)
            tlx.async_descriptor_store_wait(0)
    if CLUSTER_M == 2:
        # No CTA leaves while its peer may still arrive on its empty barriers or write its stages.
        tlx.cluster_barrier()
