"""Hopper row softmax that streams rows through shared memory with TMA: the bytes in flight live in
a ring of shared buffers rather than in registers, so a program keeps NUM_STAGES rows loading.

Each row of x (contiguous, n_cols = TILE_R * TILE_C) is viewed as one [TILE_R, TILE_C] block of
the 2-D tensor x.view(n_rows * TILE_R, TILE_C); TILE_C * element size is 128 bytes, so one TMA
copy fills one 128-byte-swizzled buffer with a whole row.

softmax_tma_kernel: persistent programs take rows pid, pid + P, ...; row i of a program waits on
stage i % NUM_STAGES, is read into registers, and that stage is refilled with row i + NUM_STAGES
before the row is reduced and stored (vectorized stores, or TMA copies out of shared memory).
    grid = (min(n_rows, NUM_SMS * programs per SM),)
    in_desc, out_desc: TensorDescriptor(x / out viewed as [n_rows * TILE_R, TILE_C], block
                      [TILE_R, TILE_C]); out_desc is used with TMA_STORE only
    constexprs: TILE_R (n_cols / TILE_C, a power of two from 8 to 256), TILE_C (128 bytes of
                elements), NUM_STAGES (rows loading per program, e.g. 3), TMA_STORE (rows
                written back by TMA from two shared buffers), STORE_EVICT (the plain stores'
                eviction_policy: "" or "evict_first")
With SPLIT > 1 (a cluster launch, ctas_per_cga=(SPLIT, 1, 1), grid a multiple of SPLIT) each row
is SPLIT slices of TILE_R * TILE_C columns (x / out viewed as [n_rows * SPLIT * TILE_R, TILE_C]):
CTA r of a cluster streams slice r of its cluster's rows, and the slices' (max, sum of
exp(x - max)) pairs are pushed per row into every CTA's shared memory
(rows_cluster.exchange_slots / push_pair / wait_pairs). PEERS = next_power_of_2(SPLIT).
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from .rows_cluster import exchange_slots, push_pair, softmax_stats_of_pairs, wait_pairs


@ww.jit
def load_row(in_desc, bufs, bars, stage, row, pred, TILE_R: tl.constexpr,
             ROW_BYTES: tl.constexpr):
    """Starts the TMA copy of row `row` into `stage` (when pred), completing the stage's barrier."""
    bar = tlx.local_view(bars, stage)
    tlx.barrier_expect_bytes(bar, ROW_BYTES, pred=pred)
    tlx.async_descriptor_load(in_desc, tlx.local_view(bufs, stage), [row * TILE_R, 0], bar,
                              pred=pred, eviction_policy="evict_first")


@ww.jit
def rows_of_program(n_rows, SPLIT: tl.constexpr):
    """(rank, first, step, n_mine): this CTA's slice of each row (its rank in the cluster; 0
    without a split) and the rows its program, or cluster of SPLIT programs, takes: first,
    first + step, ..., n_mine of them."""
    if SPLIT > 1:
        rank = tlx.cluster_cta_rank()
    else:
        rank = 0
    first = tl.program_id(0) // SPLIT
    step = tl.num_programs(0) // SPLIT
    return rank, first, step, tl.cdiv(n_rows - first, step)


@ww.jit
def store_row(out_desc, out_ptr, out_bufs, y, row, i, TILE_R: tl.constexpr, TILE_C: tl.constexpr,
              TMA_STORE: tl.constexpr, STORE_EVICT: tl.constexpr):
    """Stores row `row` (the program's i-th), y [TILE_R, TILE_C] in the output's element type:
    with TMA_STORE through two shared buffers that TMA copies out (one copy in flight while the
    next row is written), else with vectorized stores."""
    if TMA_STORE:
        # The copy that read this buffer (two rows back) is done with it.
        tlx.async_descriptor_store_wait(1)
        out_buf = tlx.local_view(out_bufs, i % 2)
        tlx.local_store(out_buf, y)
        tlx.async_descriptor_store(out_desc, out_buf, [row * TILE_R, 0])
    else:
        # Offsets built here rather than once before the row loop: the layout pass then gives
        # the pointers y's layout instead of converting 64-bit pointers through shared memory.
        offsets = tl.arange(0, TILE_R)[:, None] * TILE_C + tl.arange(0, TILE_C)[None, :]
        tl.store(out_ptr + row.to(tl.int64) * (TILE_R * TILE_C) + offsets, y,
                 eviction_policy=STORE_EVICT)


@ww.jit
def softmax_tma_kernel(in_desc, out_desc, out_ptr, n_rows, TILE_R: tl.constexpr,
                       TILE_C: tl.constexpr, NUM_STAGES: tl.constexpr,
                       TMA_STORE: tl.constexpr = False, STORE_EVICT: tl.constexpr = "",
                       SPLIT: tl.constexpr = 1, PEERS: tl.constexpr = 1):
    tl.static_assert(NUM_STAGES >= 1)
    dtype: tl.constexpr = tlx.dtype_of(in_desc)
    ROW_BYTES: tl.constexpr = TILE_R * TILE_C * tlx.size_of(dtype)
    bufs = tlx.local_alloc((TILE_R, TILE_C), dtype, NUM_STAGES)
    bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    if TMA_STORE:
        out_bufs = tlx.local_alloc((TILE_R, TILE_C), tlx.dtype_of(out_desc), 2)
    else:
        out_bufs = bufs
    rank, first, step, n_mine = rows_of_program(n_rows, SPLIT)
    if SPLIT > 1:
        pairs, pair_bars = exchange_slots(PEERS)
    for s in tl.static_range(NUM_STAGES):
        load_row(in_desc, bufs, bars, s, (first + s * step) * SPLIT + rank, s < n_mine, TILE_R,
                 ROW_BYTES)
    for i in range(0, n_mine):
        row = first + i * step
        stage = i % NUM_STAGES
        # Each barrier completes once per trip around the ring: its phase flips every trip.
        tlx.barrier_wait(tlx.local_view(bars, stage), (i // NUM_STAGES) & 1)
        x = tlx.local_load(tlx.local_view(bufs, stage)).to(tl.float32)
        # Every thread has read the stage before the one issuing thread refills it.
        tl.debug_barrier()
        load_row(in_desc, bufs, bars, stage, (row + NUM_STAGES * step) * SPLIT + rank,
                 i + NUM_STAGES < n_mine, TILE_R, ROW_BYTES)
        slice_max = tl.max(tl.max(x, axis=1), axis=0)
        # A slice of -inf only (a split row's, or a whole row) contributes exp(-inf) = 0, not
        # exp(-inf - -inf) = NaN; a row of -inf only still comes out NaN, as torch's does.
        numerator = tl.exp(x - tl.where(slice_max == -float("inf"), 0.0, slice_max))
        slice_sum = tl.sum(tl.sum(numerator, axis=1), axis=0)
        if SPLIT > 1:
            # The row's max and sum from the slices' (max, sum of exp(x - max)) pairs, pushed
            # into every CTA's shared memory; the stage loads stay in flight meanwhile.
            push_pair(pairs, pair_bars, i % 2, rank, slice_max, slice_sum, SPLIT, PEERS)
            wait_pairs(pair_bars, i % 2, (i // 2) & 1, SPLIT)
            row_max, row_sum = softmax_stats_of_pairs(pairs, i % 2, slice_max, SPLIT, PEERS)
            scale = tl.exp(slice_max - row_max) / row_sum
        else:
            scale = 1.0 / slice_sum
        y = numerator * scale
        store_row(out_desc, out_ptr, out_bufs, y.to(out_ptr.dtype.element_ty), row * SPLIT + rank,
                  i, TILE_R, TILE_C, TMA_STORE, STORE_EVICT)
    if TMA_STORE:
        # The shared buffers outlive the program's last copies out of them.
        tlx.async_descriptor_store_wait(0)
