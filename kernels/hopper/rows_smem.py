"""Softmax of rows too wide for registers (sm_90a): each row is split over the C CTAs of a
thread-block cluster, and each CTA keeps its slice of the row in shared memory, so that the row is
read from memory once and a ring of NUM_STAGES slices keeps the next rows loading meanwhile.

CTA rank r holds columns [r * slice_cols, min((r + 1) * slice_cols, n_cols)) as K chunks of BLOCK
columns (K * BLOCK >= slice_cols; slice_cols a multiple of 16 so that slices start on 16-byte
vectors). The chunks arrive by cp.async (tlx.async_load), one commit group per slice, and a row is
read from shared memory three times: its slice's max, the sum of exp(x - max), and the output
exp(x - row max) / row sum (two exponentials per element; keeping the numerators would need the
slice in registers). Between the second and third pass the cluster's CTAs exchange their (max,
sum) pairs (rows_cluster.publish_partials / peer_partials) while the ring's other slices load.

softmax_smem_kernel: persistent clusters (grid = clusters * C, ctas_per_cga=(C, 1, 1)); cluster k
takes rows k, k + clusters, ... (rows_smem_rows_of_program); scratch_ptr [n_rows, C, 2] fp32.
    constexprs: BLOCK (columns per chunk, a power of two), K (chunks per slice), NUM_STAGES (slices
    in the ring, >= 2), C (CTAs per row: 1 for no cluster), PEERS (next_power_of_2(C)),
    STORE_EVICT (the output stores' eviction_policy).
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from .rows_cluster import peer_partials, publish_partials
from .softmax_tma import rows_of_program


@ww.jit
def load_slice(in_ptr, bufs, stage, row, pred, row_stride, col0, slice_end, K: tl.constexpr,
               BLOCK: tl.constexpr):
    """Starts the copies of this CTA's slice of row `row` into the K chunks of ring stage `stage`
    (none when not pred) and closes one commit group, so that every slice is one group."""
    lanes = tl.arange(0, BLOCK)
    base = in_ptr + row.to(tl.int64) * row_stride
    for k in range(0, K):
        cols = col0 + k * BLOCK + lanes
        tlx.async_load(base + cols, tlx.local_view(bufs, stage * K + k),
                       mask=(cols < slice_end) & pred)
    tlx.async_load_commit_group()


@ww.jit
def chunk_of(bufs, stage, k, col0, slice_end, K: tl.constexpr, BLOCK: tl.constexpr):
    """(x, valid): chunk k of the slice in ring stage `stage` as fp32, and which lanes hold
    columns of the slice."""
    cols = col0 + k * BLOCK + tl.arange(0, BLOCK)
    return tlx.local_load(tlx.local_view(bufs, stage * K + k)).to(tl.float32), cols < slice_end


@ww.jit
def softmax_smem_kernel(out_ptr, in_ptr, scratch_ptr, in_row_stride, out_row_stride, n_rows,
                        n_cols, slice_cols, BLOCK: tl.constexpr, K: tl.constexpr,
                        NUM_STAGES: tl.constexpr, C: tl.constexpr = 1, PEERS: tl.constexpr = 1,
                        STORE_EVICT: tl.constexpr = ""):
    tl.static_assert(NUM_STAGES >= 2)
    bufs = tlx.local_alloc((BLOCK,), in_ptr.dtype.element_ty, NUM_STAGES * K)
    rank, first, step, n_mine = rows_of_program(n_rows, C)
    col0 = rank * slice_cols
    slice_end = tl.minimum(col0 + slice_cols, n_cols)
    for s in tl.static_range(NUM_STAGES):
        load_slice(in_ptr, bufs, s, first + s * step, s < n_mine, in_row_stride, col0, slice_end,
                   K, BLOCK)
    lanes = tl.arange(0, BLOCK)
    for i in range(0, n_mine):
        row = first + i * step
        stage = i % NUM_STAGES
        # One group per slice, committed in row order: the slices after row i's are the
        # NUM_STAGES - 1 rows loading behind it. (The wait meets the CTA's other threads too.)
        tlx.async_load_wait_group(NUM_STAGES - 1)
        m = tl.full([BLOCK], -float("inf"), tl.float32)
        for k in range(0, K):
            x, valid = chunk_of(bufs, stage, k, col0, slice_end, K, BLOCK)
            m = tl.maximum(m, tl.where(valid, x, -float("inf")))
        slice_max = tl.max(m, axis=0)
        # A slice of -inf only (or none: past the row end) contributes exp(-inf) = 0, not
        # exp(-inf - -inf) = NaN; a row of -inf only still comes out NaN, as torch's does.
        shift = tl.where(slice_max == -float("inf"), 0.0, slice_max)
        s_acc = tl.zeros([BLOCK], tl.float32)
        for k in range(0, K):
            x, valid = chunk_of(bufs, stage, k, col0, slice_end, K, BLOCK)
            s_acc += tl.where(valid, tl.exp(x - shift), 0.0)
        slice_sum = tl.sum(s_acc, axis=0)
        if C > 1:
            publish_partials(scratch_ptr, row, rank, slice_max, slice_sum, C)
            maxes, sums = peer_partials(scratch_ptr, row, -float("inf"), C, PEERS)
            row_max = tl.max(maxes, axis=0)
            row_sum = tl.sum(tl.where(maxes == -float("inf"), 0.0,
                                      sums * tl.exp(maxes - row_max)), axis=0)
        else:
            row_max = slice_max
            row_sum = slice_sum
        inv_sum = 1.0 / row_sum
        out_row = out_ptr + row.to(tl.int64) * out_row_stride
        for k in range(0, K):
            x, valid = chunk_of(bufs, stage, k, col0, slice_end, K, BLOCK)
            y = tl.exp(x - row_max) * inv_sum
            tl.store(out_row + col0 + k * BLOCK + lanes, y.to(out_ptr.dtype.element_ty),
                     mask=valid, eviction_policy=STORE_EVICT)
        # Every thread is done reading the stage before any copy refills it.
        tl.debug_barrier()
        ahead = i + NUM_STAGES
        load_slice(in_ptr, bufs, stage, first + ahead * step, ahead < n_mine, in_row_stride, col0,
                   slice_end, K, BLOCK)
    # No copy may still be writing shared memory when the CTA exits.
    tlx.async_load_wait_group(0)
