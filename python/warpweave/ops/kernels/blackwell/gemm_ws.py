"""Blackwell GEMM, persistent and warp-specialized: C = A @ B with tcgen05 MMAs into tensor memory.

A [M, K] and B [K, N] are fp16 or bf16, C [M, N] in c_desc's element type, fp32 accumulation in
tensor memory (TMEM). Three tasks share the CTA:
  - the producer (1 warp) issues the TMA loads of A [BLOCK_M, BLOCK_K] and B [BLOCK_K, BLOCK_N]
    tiles into a NUM_STAGES ring of shared-memory stages;
  - the MMA task (1 warp) issues one tcgen05 MMA per stage into the tile's TMEM accumulator; the
    MMA's completion frees the stage (its mBarrier is the stage's empty barrier) and a commit
    after a tile's last MMA tells the epilogue that the accumulator is complete;
  - the epilogue (the default task, one warp group) reads the accumulator from TMEM in
    EPI_SUBTILE column chunks, rounds each to C's dtype and stores it with TMA through two
    shared-memory chunk buffers it alternates between.
There are NUM_ACC (2) TMEM accumulators: the MMAs of a CTA's next tile go into the other one
while the epilogue drains this one. At 128x256 the two take all 512 TMEM columns.

Barriers (every wait on an "empty" barrier starts at parity 1: a fresh barrier passes it, so the
first trip around each ring does not wait):
  full_bars[s]   1 arrival (the producer's expect-bytes) + the stage's TMA bytes;
  empty_bars[s]  the MMA that read stage s completed (tcgen05 mBarrier);
  acc_full[b]    the commit after the last MMA of the tile in accumulator b;
  acc_empty[b]   the epilogue has read accumulator b (one arrival per CTA of the pair).
`step` counts k-steps across a CTA's tiles (its stage is step % NUM_STAGES, its parity
(step // NUM_STAGES) & 1) and `j` counts the CTA's tiles (accumulator j % NUM_ACC), so the three
tasks agree on every stage and accumulator without talking about it.

Tile scheduling. Every task walks the same tiles: its first is the program id; the next comes
  - USE_CLC (cluster launch control; the grid has one program per tile): the producer asks for
    it (clc_producer, a try_cancel of a program not started yet) at the start of each tile and
    every task takes the answer (clc_consumer) at the end of it; -1 ends the loop. The context
    has CLC_STAGES response slots, so the producer may ask for its tile j + 1 while the
    epilogue still holds the answer of tile j - 1 (with one slot it would wait for the epilogue
    of the previous tile before loading this one, and the epilogue would stop overlapping the
    MMAs);
  - else (static persistence; the grid is min(number of SMs, tiles)): tile + the number of
    programs, until past the last tile.
Tiles are taken in grouped order (GROUP_M tile-rows at a time, matmul.grouped_tile).

PAIR (2-CTA mode; launch with ctas_per_cga=(2, 1, 1) and an even grid): the CTAs of a cluster
compute M-neighbour tiles of one tile-column (tiles 2p and 2p + 1 of the pair order, tile_of).
Each loads its own A tile and one column half of the B tile, [BLOCK_K, BLOCK_N // 2], with
two_ctas loads that complete on the leader's (rank 0's) full barrier, which expects both CTAs'
bytes. The leader's MMA task issues one 256 x BLOCK_N tcgen05.mma.cta_group::2 per stage over
both CTAs' shared memory into both CTAs' accumulators; its mBarriers and commits arrive on the
barriers of both CTAs. The peer's MMA task issues nothing. Both epilogues arrive on the leader's
acc_empty (2 arrivals). B is thus read from L2 once per pair (each half by one CTA), and each CTA
holds half of B's stage bytes (more stages fit). With USE_CLC the leader's producer asks for the
pair and the answer lands (multicast) in both CTAs.

The producer's loop (producer_task), the MMA task's (mma_task), the epilogue's (epilogue_task)
and the tile bookkeeping (tile_of, grid_shape, request_tile, next_tile, acquire_stage,
acquire_acc) are helpers that the mxfp8 GEMM (scaled_mm_mx.py) shares.

Descriptors: a_desc block [BLOCK_M, BLOCK_K], b_desc block [BLOCK_K, BLOCK_N // (2 if PAIR
             else 1)], c_desc block [BLOCK_M, BLOCK_N // EPI_SUBTILE]
    grid = (number of tiles,) with USE_CLC, else (min(NUM_SMS, number of tiles),); with PAIR
           tiles count CTA tiles over ceil(M / BLOCK_M) rounded up to even, whole clusters
    constexprs: BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_STAGES=4 (6 with PAIR),
                NUM_ACC=2, EPI_SUBTILE=4, USE_CLC=True, PAIR=False
    launch: num_warps=4 (the epilogue; the producer and MMA warps are added)
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from ..matmul import grouped_tile

# Response slots of the CLC context (see the module docstring).
CLC_STAGES: tl.constexpr = 2


@ww.jit
def grid_shape(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PAIR: tl.constexpr):
    """(num_pid_m, num_pid_n, num_tiles): with PAIR num_pid_m is rounded up to even (the second
    CTA of a pair on the last odd tile-row computes a tile wholly below M: its loads read zeros
    and its stores are clipped)."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    if PAIR:
        num_pid_m = (num_pid_m + 1) // 2 * 2
    return num_pid_m, num_pid_n, num_pid_m * num_pid_n


@ww.jit
def tile_of(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr, PAIR: tl.constexpr):
    """(pid_m, pid_n) of CTA tile `tile` in grouped order; with PAIR tiles 2p and 2p + 1 are the
    M-neighbours (2 pm, pn) and (2 pm + 1, pn) of pair tile p = (pm, pn) in grouped order over
    pairs of tile-rows."""
    if PAIR:
        pm, pid_n = grouped_tile(tile // 2, num_pid_m // 2, num_pid_n, GROUP_M)
        pid_m = 2 * pm + tile % 2
    else:
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
    return pid_m, pid_n


@ww.jit
def request_tile(clc, j, USE_CLC: tl.constexpr, PAIR: tl.constexpr):
    """USE_CLC: the producer, at the start of the CTA's tile j, asks for the tile after it into
    response slot j % CLC_STAGES (once every task has taken the answer that slot held)."""
    if USE_CLC:
        tlx.clc_producer(clc, ((j // CLC_STAGES) & 1) ^ 1, multi_ctas=PAIR, k=j % CLC_STAGES)


@ww.jit
def next_tile(clc, tile, j, num_tiles, USE_CLC: tl.constexpr, PAIR: tl.constexpr):
    """The tile after the CTA's tile j (`tile`), or -1: the answer to request_tile's request,
    or with static persistence tile + the number of programs."""
    if USE_CLC:
        tile = tlx.clc_consumer(clc, (j // CLC_STAGES) & 1, multi_ctas=PAIR, k=j % CLC_STAGES)
    else:
        tile += tl.num_programs(0)
        if tile >= num_tiles:
            tile = -1
    return tile


@ww.jit
def acquire_stage(full_bars, empty_bars, step, NUM_STAGES: tl.constexpr,
                  STAGE_BYTES: tl.constexpr, PAIR: tl.constexpr):
    """The producer's k-step `step`: waits until the MMA that last read its stage completed,
    then expects the stage's bytes on its full barrier (with PAIR the leader's barrier expects
    both CTAs' bytes and the peer's is not used); returns the stage and that barrier."""
    stage = step % NUM_STAGES
    tlx.barrier_wait(tlx.local_view(empty_bars, stage), ((step // NUM_STAGES) & 1) ^ 1)
    full = tlx.local_view(full_bars, stage)
    if PAIR:
        tlx.barrier_expect_bytes(full, 2 * STAGE_BYTES, pred=tlx.cluster_cta_rank() == 0)
    else:
        tlx.barrier_expect_bytes(full, STAGE_BYTES)
    return stage, full


@ww.jit
def wait_stage(full_bars, step, NUM_STAGES: tl.constexpr):
    """The MMA task's k-step `step`: waits until its stage landed; returns the stage."""
    stage = step % NUM_STAGES
    tlx.barrier_wait(tlx.local_view(full_bars, stage), (step // NUM_STAGES) & 1)
    return stage


@ww.jit
def acquire_acc(acc_bufs, acc_empty, j, NUM_ACC: tl.constexpr):
    """The MMA task's tile j: waits until the epilogue has read accumulator j % NUM_ACC (its
    previous tile's); returns its index and the buffer."""
    buf = j % NUM_ACC
    tlx.barrier_wait(tlx.local_view(acc_empty, buf), ((j // NUM_ACC) & 1) ^ 1)
    return buf, tlx.local_view(acc_bufs, buf)


@ww.jit
def store_acc(c_desc, c_bufs, acc, acc_empty, off_m, off_n, chunk, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, EPI_SUBTILE: tl.constexpr, PAIR: tl.constexpr):
    """Stores the accumulator `acc` (TMEM [BLOCK_M, BLOCK_N], complete) at [off_m, off_n] of C in
    EPI_SUBTILE column chunks: each read from TMEM (tcgen05.ld), rounded to C's dtype, written
    to chunk buffer (chunk + i) % 2 and stored with TMA. Once at most one store is pending, the
    store that last read a buffer (two chunks ago) is done with it. The accumulator is handed
    back to the MMA task (acc_empty; with PAIR the leader's) as soon as its last chunk is in
    registers, before that chunk's store."""
    EPI_N: tl.constexpr = BLOCK_N // EPI_SUBTILE
    c_dtype: tl.constexpr = tlx.dtype_of(c_desc)
    for i in tl.static_range(EPI_SUBTILE):
        part = tlx.local_load(tlx.local_slice(acc, [0, i * EPI_N], [BLOCK_M, EPI_N]))
        if i == EPI_SUBTILE - 1:
            if PAIR:
                tlx.barrier_arrive(acc_empty, 1, remote_cta_rank=0)
            else:
                tlx.barrier_arrive(acc_empty, 1)
        buf = tlx.local_view(c_bufs, (chunk + i) % 2)
        tlx.async_descriptor_store_wait(1)
        tlx.local_store(buf, part.to(c_dtype))
        tlx.async_descriptor_store(c_desc, buf, [off_m, off_n + i * EPI_N])


@ww.jit
def producer_task(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, clc, M, N, K,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, NUM_STAGES: tl.constexpr, USE_CLC: tl.constexpr,
                  PAIR: tl.constexpr, as_desc=None, bs_desc=None, as_bufs=None, bs_bufs=None,
                  SCALED: tl.constexpr = False):
    """The producer's loop over the CTA's tiles: for each k-step, A's [BLOCK_M, BLOCK_K] tile and
    B's [BLOCK_K, B_PART] tile (with PAIR this CTA's column half) into the next stage. SCALED
    (scaled_mm_mx.py): B comes as B^T's [B_PART, BLOCK_K] rows of fp8 (b_desc over B^T), and the
    A and B scale chunks of the tile's rows come with it (as_desc / bs_desc into as_bufs /
    bs_bufs, 512 bytes a 128-row, 128-deep chunk)."""
    B_PART: tl.constexpr = BLOCK_N // 2 if PAIR else BLOCK_N
    REP_K: tl.constexpr = BLOCK_K // 128  # scale chunks along K
    REP_N: tl.constexpr = BLOCK_N // 128  # B scale row blocks
    STAGE_BYTES: tl.constexpr = ((BLOCK_M + B_PART) * BLOCK_K + (1 + REP_N) * REP_K * 512
                                 if SCALED else
                                 (BLOCK_M + B_PART) * BLOCK_K * tlx.size_of(tlx.dtype_of(a_desc)))
    num_pid_m, num_pid_n, num_tiles = grid_shape(M, N, BLOCK_M, BLOCK_N, PAIR)
    num_k = tl.cdiv(K, BLOCK_K)
    rank = tl.program_id(0) % 2 if PAIR else 0
    tile = tl.program_id(0)
    j = 0
    step = 0
    while tile != -1:
        request_tile(clc, j, USE_CLC, PAIR)
        pid_m, pid_n = tile_of(tile, num_pid_m, num_pid_n, GROUP_M, PAIR)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N + rank * B_PART
        for k in range(0, num_k):
            stage, full = acquire_stage(full_bars, empty_bars, step, NUM_STAGES, STAGE_BYTES,
                                        PAIR)
            tlx.async_descriptor_load(a_desc, tlx.local_view(a_bufs, stage),
                                      [off_m, k * BLOCK_K], full, two_ctas=PAIR)
            if SCALED:
                tlx.async_descriptor_load(b_desc, tlx.local_view(b_bufs, stage),
                                          [off_n, k * BLOCK_K], full, two_ctas=PAIR)
                tlx.async_descriptor_load(as_desc, tlx.local_view(as_bufs, stage),
                                          [0, pid_m, k * REP_K, 0, 0], full, two_ctas=PAIR)
                tlx.async_descriptor_load(bs_desc, tlx.local_view(bs_bufs, stage),
                                          [0, pid_n * REP_N, k * REP_K, 0, 0], full,
                                          two_ctas=PAIR)
            else:
                tlx.async_descriptor_load(b_desc, tlx.local_view(b_bufs, stage),
                                          [k * BLOCK_K, off_n], full, two_ctas=PAIR)
            step += 1
        tile = next_tile(clc, tile, j, num_tiles, USE_CLC, PAIR)
        j += 1


@ww.jit
def mma_task(a_bufs, b_bufs, acc_bufs, full_bars, empty_bars, acc_full, acc_empty, clc, M, N,
             K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
             NUM_STAGES: tl.constexpr, NUM_ACC: tl.constexpr, USE_CLC: tl.constexpr,
             PAIR: tl.constexpr, as_bufs=None, bs_bufs=None, A_FMT: tl.constexpr = None,
             B_FMT: tl.constexpr = None):
    """The MMA task's loop over the CTA's tiles: for each, once its accumulator is free, one MMA
    per k-step (the first overwrites the accumulator) whose completion frees the stage, then a
    commit that completes acc_full when they all have. With PAIR only the leader issues (the
    peer's MMA task just follows the tiles). With A_FMT / B_FMT ("e4m3" / "e5m2",
    scaled_mm_mx.py) the MMAs are block-scaled by as_bufs / bs_bufs, B^T's rows transposed."""
    num_pid_m, num_pid_n, num_tiles = grid_shape(M, N, BLOCK_M, BLOCK_N, PAIR)
    num_k = tl.cdiv(K, BLOCK_K)
    leads = tl.program_id(0) % 2 == 0 if PAIR else True
    tile = tl.program_id(0)
    j = 0
    step = 0
    while tile != -1:
        if leads:
            buf, acc = acquire_acc(acc_bufs, acc_empty, j, NUM_ACC)
            for k in range(0, num_k):
                stage = wait_stage(full_bars, step, NUM_STAGES)
                if A_FMT is None:
                    tlx.async_dot(tlx.local_view(a_bufs, stage), tlx.local_view(b_bufs, stage),
                                  acc, use_acc=k > 0,
                                  mBarriers=[tlx.local_view(empty_bars, stage)], two_ctas=PAIR,
                                  out_dtype=tl.float32)
                else:
                    tlx.async_dot_scaled(tlx.local_view(a_bufs, stage),
                                         tlx.local_trans(tlx.local_view(b_bufs, stage)), acc,
                                         tlx.local_view(as_bufs, stage), A_FMT,
                                         tlx.local_view(bs_bufs, stage), B_FMT, use_acc=k > 0,
                                         mBarriers=[tlx.local_view(empty_bars, stage)],
                                         two_ctas=PAIR, out_dtype=tl.float32)
                step += 1
            tlx.tcgen05_commit(tlx.local_view(acc_full, buf), two_ctas=PAIR)
        tile = next_tile(clc, tile, j, num_tiles, USE_CLC, PAIR)
        j += 1


@ww.jit
def epilogue_task(c_desc, c_bufs, acc_bufs, acc_full, acc_empty, clc, M, N,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr,
                  NUM_ACC: tl.constexpr, EPI_SUBTILE: tl.constexpr, USE_CLC: tl.constexpr,
                  PAIR: tl.constexpr):
    """The epilogue's loop over the CTA's tiles: waits for the tile's accumulator to be complete
    and stores it (store_acc); waits for the last stores before the CTA may exit."""
    num_pid_m, num_pid_n, num_tiles = grid_shape(M, N, BLOCK_M, BLOCK_N, PAIR)
    tile = tl.program_id(0)
    j = 0
    while tile != -1:
        pid_m, pid_n = tile_of(tile, num_pid_m, num_pid_n, GROUP_M, PAIR)
        buf = j % NUM_ACC
        tlx.barrier_wait(tlx.local_view(acc_full, buf), (j // NUM_ACC) & 1)
        store_acc(c_desc, c_bufs, tlx.local_view(acc_bufs, buf), tlx.local_view(acc_empty, buf),
                  pid_m * BLOCK_M, pid_n * BLOCK_N, j * EPI_SUBTILE, BLOCK_M, BLOCK_N,
                  EPI_SUBTILE, PAIR)
        tile = next_tile(clc, tile, j, num_tiles, USE_CLC, PAIR)
        j += 1
    tlx.async_descriptor_store_wait(0)


@ww.jit
def alloc_common(c_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 NUM_STAGES: tl.constexpr, NUM_ACC: tl.constexpr, EPI_SUBTILE: tl.constexpr,
                 USE_CLC: tl.constexpr, PAIR: tl.constexpr):
    """What both GEMMs allocate besides their operand stages: the two C chunk buffers, the TMEM
    accumulators, the barriers (full, empty, acc_full, acc_empty) and the CLC context (None
    without USE_CLC; three consuming tasks per CTA)."""
    tl.static_assert(BLOCK_M == 128)
    tl.static_assert(NUM_ACC * BLOCK_N <= 512)  # TMEM columns
    tl.static_assert(EPI_SUBTILE == 1 or EPI_SUBTILE == 2 or EPI_SUBTILE == 4 or
                     EPI_SUBTILE == 8)
    c_bufs = tlx.local_alloc((BLOCK_M, BLOCK_N // EPI_SUBTILE), tlx.dtype_of(c_desc), 2)
    acc_bufs = tlx.local_alloc((BLOCK_M, BLOCK_N), tl.float32, NUM_ACC, tlx.storage_kind.tmem)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    acc_full = tlx.alloc_barriers(num_barriers=NUM_ACC, arrive_count=1)
    acc_empty = tlx.alloc_barriers(num_barriers=NUM_ACC, arrive_count=2 if PAIR else 1)
    clc = None
    if USE_CLC:
        clc = tlx.clc_create_context(num_consumers=6 if PAIR else 3, num_stages=CLC_STAGES)
    return c_bufs, acc_bufs, full_bars, empty_bars, acc_full, acc_empty, clc


@ww.jit
def gemm_ws_kernel(a_desc, b_desc, c_desc, M, N, K,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, NUM_STAGES: tl.constexpr, NUM_ACC: tl.constexpr = 2,
                   EPI_SUBTILE: tl.constexpr = 4, USE_CLC: tl.constexpr = True,
                   PAIR: tl.constexpr = False):
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    B_PART: tl.constexpr = BLOCK_N // 2 if PAIR else BLOCK_N
    a_bufs = tlx.local_alloc((BLOCK_M, BLOCK_K), dtype, NUM_STAGES)
    b_bufs = tlx.local_alloc((BLOCK_K, B_PART), dtype, NUM_STAGES)
    c_bufs, acc_bufs, full_bars, empty_bars, acc_full, acc_empty, clc = alloc_common(
        c_desc, BLOCK_M, BLOCK_N, NUM_STAGES, NUM_ACC, EPI_SUBTILE, USE_CLC, PAIR)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            epilogue_task(c_desc, c_bufs, acc_bufs, acc_full, acc_empty, clc, M, N, BLOCK_M,
                          BLOCK_N, GROUP_M, NUM_ACC, EPI_SUBTILE, USE_CLC, PAIR)
        with tlx.async_task(num_warps=1, registers=48):
            mma_task(a_bufs, b_bufs, acc_bufs, full_bars, empty_bars, acc_full, acc_empty, clc,
                     M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, NUM_ACC, USE_CLC, PAIR)
        with tlx.async_task(num_warps=1, registers=48):
            producer_task(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, clc, M, N, K,
                          BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_STAGES, USE_CLC, PAIR)
    if PAIR:
        # No CTA leaves while its peer may still arrive on its barriers or read its stages.
        tlx.cluster_barrier()
