"""Hopper grouped GEMM, persistent and warp-specialized: kernels/grouped_mm.py's ragged-M form
(grouped_mm_ws_kernel: C [M_total, N], the rows of group g = A[rows of g] @ B[g]; rows from
offs[G-1] to M_total are zeros) and its ragged-K form (grouped_mm_ragged_k_ws_kernel, below),
with gemm_ws.py's cooperative tasks: a producer issuing the TMA loads of A and B into a
NUM_STAGES ring, two consumer warp groups each computing half of a tile's rows with async wgmma
(gemm_ws.mma_tile, gemm_ws.store_tile).

Work items are (group, tile-row of the group, tile-column), numbered group by group: group g has
cdiv(m_g, BLOCK_M) * cdiv(N, BLOCK_N) of them, in gemm_ws.rastered_tile's order inside the
group (GROUP_M tile-rows at a time: the programs that run together share the expert's B
columns and A's rows in L2), and the tail rows [offs[G-1], M_total) come last as group G, whose
tiles run no K steps and store zeros. offs is read on the device only: every task keeps a
cursor (the group, its first work item, its bounds) that moves forward as its work items grow
(next_group), one scalar load per group it passes, and never rescans offs. The number of work
items is not known without summing over offs; the programs walk the bound
(cdiv(M_total, BLOCK_M) + G) * cdiv(N, BLOCK_N) (each group adds at most one partial
tile-row) and skip the items past the tail's last.

Loads: A's tile-rows start at their group's first row; rows past the group's end are loaded
(the next group's, or TMA's zeros past M_total) and never stored. B is read through a 2-D
descriptor over b viewed as [G * K, N], at row g * K + k: with K a multiple of BLOCK_K a K step
never crosses into the next expert. With B_KMAJOR, b is the transpose of a contiguous
[G, N, K] (weights stored [experts, out, in], or the backward's b.transpose(1, 2)): the
descriptor views it as [G * N, K], B stages hold [BLOCK_N, BLOCK_K] tiles read through
local_trans, and K is any multiple of 8 (TMA zero-fills A and B past K alike); a tile's rows
past the expert's N are the next expert's and only reach C's columns past N, which are never
stored.

Stores: a consumer's half-tile that lies inside its group (or in the tail, whose end is
M_total, where TMA clips) leaves through C's descriptor as in gemm_ws.py (SMEM_EPILOGUE with
EPI_SUBTILE chunks); a group's last, partial half-tile is stored with a pointer store masked to
the group's rows and to N (the next group's rows belong to another program).

offs is clamped as kernels/grouped_mm.group_bounds clamps it (to [0, M_total], a group ending
before it starts is empty), so that no access leaves the arrays whatever offs holds.

    a_desc block [BLOCK_M // 2, BLOCK_K] over A [M_total, K]; b_desc block [BLOCK_K, BLOCK_N]
    over B as [G * K, N] (B_KMAJOR: block [BLOCK_N, BLOCK_K] over B's transpose as [G * N, K]);
    c_desc block [BLOCK_M // 2, BLOCK_N // EPI_SUBTILE] over C [M_total, N] (contiguous: c_ptr's
    rows are N apart)
    grid = (min(NUM_SMS, (cdiv(M_total, BLOCK_M) + G) * cdiv(N, BLOCK_N)),)
    constexprs: BLOCK_M=128, BLOCK_N=256, BLOCK_K=64 (K % BLOCK_K == 0 unless B_KMAJOR), GROUP_M,
                NUM_STAGES=4, NUM_SMS, EPI_SUBTILE=4, RASTER_N=False, B_KMAJOR=False
    launch: num_warps=4 (the default task; the consumers add 8 warps)

grouped_mm_ragged_k_ws_kernel, ragged K (the MoE weight gradient): C [G, M, N], C[g] =
A[:, cols of g] @ B[rows of g] over the ragged split of K by offs (A [M, K_total], B [K_total,
N]; an empty group gives zeros). Work items are (group, tile): group g's cdiv(M, BLOCK_M) *
cdiv(N, BLOCK_N) tiles in rastered_tile's order, group after group (all G * tiles of them are
known on the host). Each task reads the group's bounds (group_k_steps, two scalar loads) and
runs its K steps from offs[g-1] on, through gemm_ws's acquire_stage / load_stage and mma_tile.
The K range ends anywhere: the last step's boxes read on past it, into the next group's columns
of A and rows of B (TMA zero-fills only past K_total), so mma_tile's TAIL_K zeroes that part of
the stage in shared memory before its MMA (gemm_ws.zero_k_outside). With A_MMAJOR, A is the
transpose of a contiguous [K_total, M] (the weight gradient's x.t(), what the autograd's dB
passes) and its stages hold [BLOCK_K, BLOCK_M // 2] tiles read through local_trans. Without it
A's rows are contiguous, K is the inner dimension of A's boxes, and a TMA box must start there
at a 16-byte aligned address (the H200 raises an illegal instruction otherwise): the group's
steps start at offs[g-1] rounded down to a multiple of 8 elements (ALIGN_K), B's with A's, and
mma_tile's HEAD_K zeroes the first stage's 0..7 K steps before the group's (the previous
group's columns and rows) as it zeroes the tail, in the same pass where both fall in one
stage. C is stored through a descriptor over C viewed as [G * M, N]: a half-tile inside its
group's M rows by TMA (store_tile), one reaching past M (the next group's rows) through
store_rows' masks.

    a_desc block [BLOCK_M // 2, BLOCK_K] over A [M, K_total] (A_MMAJOR: [BLOCK_K, BLOCK_M // 2]
    over A^T [K_total, M]); b_desc block [BLOCK_K, BLOCK_N] over B [K_total, N]; c_desc block
    [BLOCK_M // 2, BLOCK_N // EPI_SUBTILE] over C as [G * M, N] (contiguous)
    grid = (min(NUM_SMS, G * cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)),)
    constexprs: BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M, NUM_STAGES=4, NUM_SMS,
                EPI_SUBTILE=4, RASTER_N=False, A_MMAJOR=False
    launch: num_warps=4
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from .gemm_ws import (acquire_stage, alloc_ring, load_stage, mma_tile, rastered_tile,
                      split_columns, store_tile)


@ww.jit
def next_group(work, offs_ptr, G, M_total, num_pid_n, g, first, tiles, start, stop,
               BLOCK_M: tl.constexpr):
    """Moves the group cursor forward to the group of work item `work` (work items only grow):
    g, the group (G: the tail); first, its first work item; tiles, its work items; start and
    stop, offs[g-1] and offs[g] clamped to [0, M_total] (the tail's stop is M_total; the group's
    rows are [start, max(stop, start))). Start from g = -1 with every other value 0."""
    while (work >= first + tiles) & (g < G):
        first += tiles
        g += 1
        start = stop
        end = tl.load(offs_ptr + tl.minimum(g, G - 1))
        stop = tl.where(g < G, tl.minimum(tl.maximum(end, 0), M_total), M_total)
        tiles = tl.cdiv(tl.maximum(stop - start, 0), BLOCK_M) * num_pid_n
    return g, first, tiles, start, stop


@ww.jit
def store_chunk_rows(c_bufs, buf_index, value, row_ptr, rows_left, N, off_n,
                     HALF_M: tl.constexpr, COLS: tl.constexpr):
    """value [HALF_M, COLS] at columns off_n.. of the rows at row_ptr (N apart), only its first
    rows_left rows and the columns before N. It goes through chunk buffer `buf_index` (as
    store_chunk's chunks do), read back in the store's coalescing layout: a conversion of the
    accumulator's layout would take scratch shared memory beside the ring and the buffers."""
    buf = tlx.local_view(c_bufs, buf_index)
    # No TMA store may still read the buffer (stores through the other buffer are waited for
    # too: this path commits no store group of its own to count on).
    tlx.async_descriptor_store_wait(0)
    tlx.local_store(buf, value)
    rows = tl.arange(0, HALF_M)
    cols = off_n + tl.arange(0, COLS)
    tl.store(row_ptr + (rows[:, None] * N + cols[None, :]), tlx.local_load(buf),
             mask=(rows[:, None] < rows_left) & (cols[None, :] < N))


@ww.jit
def store_rows(c_bufs, half, row_ptr, c, rows_left, N, off_n, HALF_M: tl.constexpr,
               BLOCK_N: tl.constexpr, EPI_SUBTILE: tl.constexpr):
    """Consumer `half`'s result c [HALF_M, BLOCK_N] masked to its first rows_left rows and to
    N, through its C buffer(s) in the epilogue's EPI_SUBTILE column chunks."""
    EPI_N: tl.constexpr = BLOCK_N // EPI_SUBTILE
    if EPI_SUBTILE == 1:
        store_chunk_rows(c_bufs, half, c, row_ptr, rows_left, N, off_n, HALF_M, BLOCK_N)
    elif EPI_SUBTILE == 2:
        c0, c1 = split_columns(c, HALF_M, BLOCK_N)
        store_chunk_rows(c_bufs, 2 * half, c0, row_ptr, rows_left, N, off_n, HALF_M, EPI_N)
        store_chunk_rows(c_bufs, 2 * half + 1, c1, row_ptr, rows_left, N, off_n + EPI_N,
                         HALF_M, EPI_N)
    else:
        left, right = split_columns(c, HALF_M, BLOCK_N)
        c0, c1 = split_columns(left, HALF_M, BLOCK_N // 2)
        c2, c3 = split_columns(right, HALF_M, BLOCK_N // 2)
        store_chunk_rows(c_bufs, 2 * half, c0, row_ptr, rows_left, N, off_n, HALF_M, EPI_N)
        store_chunk_rows(c_bufs, 2 * half + 1, c1, row_ptr, rows_left, N, off_n + EPI_N,
                         HALF_M, EPI_N)
        store_chunk_rows(c_bufs, 2 * half, c2, row_ptr, rows_left, N, off_n + 2 * EPI_N,
                         HALF_M, EPI_N)
        store_chunk_rows(c_bufs, 2 * half + 1, c3, row_ptr, rows_left, N, off_n + 3 * EPI_N,
                         HALF_M, EPI_N)


@ww.jit
def grouped_mm_ws_kernel(a_desc, b_desc, c_desc, c_ptr, offs_ptr, G, M_total, N, K,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr, NUM_STAGES: tl.constexpr,
                         NUM_SMS: tl.constexpr, EPI_SUBTILE: tl.constexpr = 4,
                         RASTER_N: tl.constexpr = False, B_KMAJOR: tl.constexpr = False):
    tl.static_assert(EPI_SUBTILE == 1 or EPI_SUBTILE == 2 or EPI_SUBTILE == 4)
    HALF_M: tl.constexpr = BLOCK_M // 2
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    c_dtype: tl.constexpr = tlx.dtype_of(c_desc)
    STAGE_BYTES: tl.constexpr = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * tlx.size_of(dtype)

    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_k = tl.cdiv(K, BLOCK_K)
    num_work = (tl.cdiv(M_total, BLOCK_M) + G) * num_pid_n  # a bound: see the docstring

    a_bufs, b_bufs, full_bars, empty_bars, c_bufs = alloc_ring(
        dtype, dtype, c_dtype, HALF_M, BLOCK_N, BLOCK_K, NUM_STAGES, B_KMAJOR, 2, EPI_SUBTILE)

    with tlx.async_tasks():
        with tlx.async_task("default", registers=40):
            step = 0
            g = -1
            first = 0
            tiles = 0
            start = 0
            stop = 0
            for work in range(tl.program_id(0), num_work, NUM_SMS):
                g, first, tiles, start, stop = next_group(work, offs_ptr, G, M_total, num_pid_n,
                                                          g, first, tiles, start, stop, BLOCK_M)
                # Past the tail's last item, and in the tail, nothing to load.
                if (g < G) & (work < first + tiles):
                    pid_m, pid_n = rastered_tile(work - first, tiles // num_pid_n, num_pid_n,
                                                 GROUP_M, RASTER_N)
                    off_m = start + pid_m * BLOCK_M
                    off_n = pid_n * BLOCK_N
                    for k in range(0, num_k):
                        stage = step % NUM_STAGES
                        tlx.barrier_wait(tlx.local_view(empty_bars, stage),
                                         ((step // NUM_STAGES) & 1) ^ 1)
                        full = tlx.local_view(full_bars, stage)
                        tlx.barrier_expect_bytes(full, STAGE_BYTES)
                        off_k = k * BLOCK_K
                        tlx.async_descriptor_load(a_desc, tlx.local_view(a_bufs, 2 * stage),
                                                  [off_m, off_k], full)
                        tlx.async_descriptor_load(a_desc, tlx.local_view(a_bufs, 2 * stage + 1),
                                                  [off_m + HALF_M, off_k], full)
                        if B_KMAJOR:
                            tlx.async_descriptor_load(b_desc, tlx.local_view(b_bufs, stage),
                                                      [g * N + off_n, off_k], full)
                        else:
                            tlx.async_descriptor_load(b_desc, tlx.local_view(b_bufs, stage),
                                                      [g * K + off_k, off_n], full)
                        step += 1

        with tlx.async_task(num_warps=4, registers=232, replicate=2):
            half = tlx.async_task_replica_id()
            step = 0
            g = -1
            first = 0
            tiles = 0
            start = 0
            stop = 0
            for work in range(tl.program_id(0), num_work, NUM_SMS):
                g, first, tiles, start, stop = next_group(work, offs_ptr, G, M_total, num_pid_n,
                                                          g, first, tiles, start, stop, BLOCK_M)
                if work < first + tiles:
                    pid_m, pid_n = rastered_tile(work - first, tiles // num_pid_n, num_pid_n,
                                                 GROUP_M, RASTER_N)
                    # The tail's tiles run no K steps: their accumulator stays zero.
                    acc, step = mma_tile(a_bufs, b_bufs, full_bars, empty_bars, step,
                                         tl.where(g < G, num_k, 0), half, 0, HALF_M, BLOCK_N,
                                         NUM_STAGES, 1, B_KMAJOR)
                    off_m = start + pid_m * BLOCK_M + half * HALF_M
                    off_n = pid_n * BLOCK_N
                    end = tl.where(g < G, tl.maximum(stop, start), M_total)
                    c = acc.to(c_dtype)
                    if off_m + HALF_M <= end:
                        store_tile(c_desc, c_bufs, c, half, off_m, off_n, HALF_M, BLOCK_N,
                                   EPI_SUBTILE)
                    else:
                        # The group's last rows: the rows after them are the next group's.
                        store_rows(c_bufs, half, c_ptr + off_m.to(tl.int64) * N, c, end - off_m, N,
                                   off_n, HALF_M, BLOCK_N, EPI_SUBTILE)
            tlx.async_descriptor_store_wait(0)


@ww.jit
def group_k_range(offs_ptr, g, K_total):
    """Group g's columns of K, [start, end): offs[g-1] (0 for g = 0) to offs[g], clamped to
    [0, K_total] as kernels/grouped_mm.py's ragged-K kernel clamps them (a group ending before
    it starts is empty)."""
    end = tl.minimum(tl.maximum(tl.load(offs_ptr + g), 0), K_total)
    start = tl.load(offs_ptr + tl.maximum(g - 1, 0))
    start = tl.where(g > 0, tl.minimum(tl.maximum(start, 0), end), 0)
    return start, end


@ww.jit
def group_k_steps(offs_ptr, g, K_total, BLOCK_K: tl.constexpr, ALIGN_K: tl.constexpr):
    """Group g's K steps, as the producer and the consumers both count them: k0, the K
    coordinate of its first step; num_k, its steps; k_head, the K steps of the first stage
    before the group's (0 unless ALIGN_K); k_last, the group's K steps in its last stage
    (1..BLOCK_K). ALIGN_K (A's rows contiguous: K is the inner dimension of A's TMA boxes, whose
    start there must be 16-byte aligned in global memory): k0 is the group's first column
    rounded down to a multiple of ALIGN_K elements (16 bytes), the k_head columns before the
    group being the previous group's; else k0 is the group's first column. An empty group has
    no steps."""
    k_start, k_end = group_k_range(offs_ptr, g, K_total)
    if ALIGN_K > 1:
        k0 = k_start // ALIGN_K * ALIGN_K  # (a product: provably aligned, no run-time check)
        num_k = tl.where(k_end > k_start, tl.cdiv(k_end - k0, BLOCK_K), 0)
    else:
        k0 = k_start
        num_k = tl.cdiv(k_end - k_start, BLOCK_K)
    return k0, num_k, k_start - k0, k_end - k0 - (num_k - 1) * BLOCK_K


@ww.jit
def grouped_mm_ragged_k_ws_kernel(a_desc, b_desc, c_desc, c_ptr, offs_ptr, G, M, N, K_total,
                                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                  BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                                  NUM_STAGES: tl.constexpr, NUM_SMS: tl.constexpr,
                                  EPI_SUBTILE: tl.constexpr = 4, RASTER_N: tl.constexpr = False,
                                  A_MMAJOR: tl.constexpr = False):
    tl.static_assert(EPI_SUBTILE == 1 or EPI_SUBTILE == 2 or EPI_SUBTILE == 4)
    HALF_M: tl.constexpr = BLOCK_M // 2
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    c_dtype: tl.constexpr = tlx.dtype_of(c_desc)
    STAGE_BYTES: tl.constexpr = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * tlx.size_of(dtype)
    # A's rows contiguous: its boxes start at K coordinates that are multiples of 16 bytes.
    ALIGN_K: tl.constexpr = 1 if A_MMAJOR else 16 // tlx.size_of(dtype)

    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    tiles = num_pid_m * num_pid_n  # per group
    num_work = G * tiles

    a_bufs, b_bufs, full_bars, empty_bars, c_bufs = alloc_ring(
        dtype, dtype, c_dtype, HALF_M, BLOCK_N, BLOCK_K, NUM_STAGES, False, 2, EPI_SUBTILE,
        A_MMAJOR)

    with tlx.async_tasks():
        with tlx.async_task("default", registers=40):
            step = 0
            for work in range(tl.program_id(0), num_work, NUM_SMS):
                g = work // tiles
                pid_m, pid_n = rastered_tile(work - g * tiles, num_pid_m, num_pid_n, GROUP_M,
                                             RASTER_N)
                k0, num_k, k_head, k_last = group_k_steps(offs_ptr, g, K_total, BLOCK_K, ALIGN_K)
                # The last step's boxes read on past the group's end, the first (ALIGN_K) from
                # before its start (the consumers zero those parts).
                for k in range(0, num_k):
                    stage, full = acquire_stage(full_bars, empty_bars, step, NUM_STAGES,
                                                STAGE_BYTES)
                    load_stage(a_desc, b_desc, a_bufs, b_bufs, full, stage, pid_m * BLOCK_M,
                               pid_n * BLOCK_N, k0 + k * BLOCK_K, 0, HALF_M, BLOCK_N, BLOCK_K,
                               1, 1, False, A_MMAJOR)
                    step += 1

        with tlx.async_task(num_warps=4, registers=232, replicate=2):
            half = tlx.async_task_replica_id()
            step = 0
            for work in range(tl.program_id(0), num_work, NUM_SMS):
                g = work // tiles
                pid_m, pid_n = rastered_tile(work - g * tiles, num_pid_m, num_pid_n, GROUP_M,
                                             RASTER_N)
                k0, num_k, k_head, k_last = group_k_steps(offs_ptr, g, K_total, BLOCK_K, ALIGN_K)
                # An empty group runs no K steps: its accumulator stays zero.
                acc, step = mma_tile(a_bufs, b_bufs, full_bars, empty_bars, step, num_k, half, 0,
                                     HALF_M, BLOCK_N, NUM_STAGES, 1, False, False, A_MMAJOR,
                                     k_last, BLOCK_K, k_head, ALIGN_K > 1)
                off_m = pid_m * BLOCK_M + half * HALF_M
                off_n = pid_n * BLOCK_N
                c = acc.to(c_dtype)
                if off_m + HALF_M <= M:
                    store_tile(c_desc, c_bufs, c, half, g * M + off_m, off_n, HALF_M, BLOCK_N,
                               EPI_SUBTILE)
                else:
                    # The last tile-row's rows past M are the next group's rows of C.
                    store_rows(c_bufs, half, c_ptr + (g.to(tl.int64) * M + off_m) * N, c,
                               M - off_m, N, off_n, HALF_M, BLOCK_N, EPI_SUBTILE)
            tlx.async_descriptor_store_wait(0)
