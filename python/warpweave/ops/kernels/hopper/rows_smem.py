"""Softmax of rows too wide for registers (sm_90a): each row is split over the C CTAs of a
thread-block cluster, and each CTA keeps its slice of the row in shared memory, so that the row is
read from memory once and a ring of NUM_STAGES slices keeps the next rows loading meanwhile.

CTA rank r holds columns [r * slice_cols, min((r + 1) * slice_cols, n_cols)) as K chunks of BLOCK
columns (K * BLOCK >= slice_cols; slice_cols a multiple of 16 so that slices start on 16-byte
vectors). The chunks arrive by cp.async (tlx.async_load), one commit group per slice, and a slice
is read from shared memory three times: its max m; exp(x - m), written back in place and summed;
and the output, those exponentials times exp(m - row max) / row sum. Between the second and third
pass the cluster's CTAs push their (max, sum) pairs into each other's shared memory
(rows_cluster.exchange_slots / push_pair / wait_pairs) while the ring's other slices
load. (Recomputing the exponentials in the third pass instead, two per element, made the kernel
compute-bound on the H200: 0.70x of a copy at 2048x100000 fp16 over 2 CTAs, and 0.75x for one
CTA per row of 4096x32768.)

softmax_smem_kernel: persistent clusters (grid = clusters * C, ctas_per_cga=(C, 1, 1)); cluster k
takes rows k, k + clusters, ... (softmax_tma.rows_of_program).
    constexprs: BLOCK (columns per chunk, a power of two), K (chunks per slice), NUM_STAGES (slices
    in the ring, >= 2), C (CTAs per row: 1 for no cluster), PEERS (next_power_of_2(C)),
    STORE_EVICT (the output stores' eviction_policy), DSMEM (False: the pairs go through
    scratch_ptr, [n_rows, C, 2] fp32, and a cluster barrier a row, rows_cluster.publish_partials /
    peer_partials; otherwise scratch_ptr is unused), UNROLL (the loop_unroll_factor of the passes
    over a slice's whole chunks).
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from .rows_cluster import (exchange_slots, slice_counts, pair_of, peer_partials, publish_partials,
                           push_pair, softmax_stats_of_pairs, wait_pairs)
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
def start_ring(ptr, bufs, rank, first, step, n_mine, row_stride, slice_cols, n_cols,
               NUM_STAGES: tl.constexpr, K: tl.constexpr, BLOCK: tl.constexpr):
    """(col0, slice_end, full): this CTA's slice of each row, columns [col0, slice_end), and how
    many of its chunks lie wholly inside it (those skip the lane masks; the slice's end differs
    between ranks); starts the copies of its first NUM_STAGES rows' slices, one group each."""
    col0 = rank * slice_cols
    slice_end = tl.minimum(col0 + slice_cols, n_cols)
    for s in tl.static_range(NUM_STAGES):
        load_slice(ptr, bufs, s, first + s * step, s < n_mine, row_stride, col0, slice_end, K,
                   BLOCK)
    return col0, slice_end, tl.maximum(slice_end - col0, 0) // BLOCK


@ww.jit
def chunk_view(bufs, stage, k, K: tl.constexpr):
    """Chunk k of the slice in ring stage `stage`."""
    return tlx.local_view(bufs, stage * K + k)


@ww.jit
def _max_of_chunks(bufs, stage, k_begin, k_end, m, col0, slice_end, K: tl.constexpr,
                   BLOCK: tl.constexpr, MASKED: tl.constexpr, UNROLL: tl.constexpr = 1):
    """m folded with chunks [k_begin, k_end) of the slice, lane-wise (MASKED: lanes past the
    slice count as -inf; only the chunks at the slice's end need it; UNROLL: the loop's
    loop_unroll_factor)."""
    for k in tl.range(k_begin, k_end, loop_unroll_factor=UNROLL):
        x = tlx.local_load(chunk_view(bufs, stage, k, K)).to(tl.float32)
        if MASKED:
            x = tl.where(col0 + k * BLOCK + tl.arange(0, BLOCK) < slice_end, x, -float("inf"))
        m = tl.maximum(m, x)
    return m


@ww.jit
def _exp_of_chunks(bufs, stage, k_begin, k_end, total, shift_log2, col0, slice_end,
                   K: tl.constexpr, BLOCK: tl.constexpr, MASKED: tl.constexpr,
                   UNROLL: tl.constexpr = 1):
    """Replaces chunks [k_begin, k_end) of the slice by exp(x - shift) (shift_log2 = shift *
    log2(e)) in the slice's element type and returns total plus them, lane-wise (MASKED: lanes
    past the slice add 0)."""
    for k in tl.range(k_begin, k_end, loop_unroll_factor=UNROLL):
        view = chunk_view(bufs, stage, k, K)
        x = tlx.local_load(view)
        e = tl.exp2(x.to(tl.float32) * 1.4426950408889634 - shift_log2)
        if MASKED:
            e = tl.where(col0 + k * BLOCK + tl.arange(0, BLOCK) < slice_end, e, 0.0)
        total += e
        tlx.local_store(view, e.to(x.dtype))
    return total


@ww.jit
def _store_chunks(out_row, bufs, stage, k_begin, k_end, scale, col0, slice_end, K: tl.constexpr,
                  BLOCK: tl.constexpr, MASKED: tl.constexpr, STORE_EVICT: tl.constexpr,
                  UNROLL: tl.constexpr = 1):
    """Stores chunks [k_begin, k_end) of the slice (its exponentials) times scale to out_row
    (MASKED: only the lanes of the slice)."""
    for k in tl.range(k_begin, k_end, loop_unroll_factor=UNROLL):
        cols = col0 + k * BLOCK + tl.arange(0, BLOCK)
        y = (tlx.local_load(chunk_view(bufs, stage, k, K)).to(tl.float32) * scale).to(
            out_row.dtype.element_ty)
        if MASKED:
            tl.store(out_row + cols, y, mask=cols < slice_end, eviction_policy=STORE_EVICT)
        else:
            tl.store(out_row + cols, y, eviction_policy=STORE_EVICT)


@ww.jit
def softmax_smem_kernel(out_ptr, in_ptr, scratch_ptr, in_row_stride, out_row_stride, n_rows,
                        n_cols, slice_cols, BLOCK: tl.constexpr, K: tl.constexpr,
                        NUM_STAGES: tl.constexpr, C: tl.constexpr = 1, PEERS: tl.constexpr = 1,
                        STORE_EVICT: tl.constexpr = "", DSMEM: tl.constexpr = True,
                        UNROLL: tl.constexpr = 1):
    tl.static_assert(NUM_STAGES >= 2)
    bufs = tlx.local_alloc((BLOCK,), in_ptr.dtype.element_ty, NUM_STAGES * K)
    rank, first, step, n_mine = rows_of_program(n_rows, C)
    if C > 1 and DSMEM:
        pairs, pair_bars = exchange_slots(PEERS)
    col0, slice_end, full = start_ring(in_ptr, bufs, rank, first, step, n_mine, in_row_stride,
                                       slice_cols, n_cols, NUM_STAGES, K, BLOCK)
    for i in range(0, n_mine):
        row = first + i * step
        stage = i % NUM_STAGES
        # One group per slice, committed in row order: the slices after row i's are the
        # NUM_STAGES - 1 rows loading behind it. (The wait meets the CTA's other threads too.)
        tlx.async_load_wait_group(NUM_STAGES - 1)
        m = tl.full([BLOCK], -float("inf"), tl.float32)
        m = _max_of_chunks(bufs, stage, 0, full, m, col0, slice_end, K, BLOCK, False, UNROLL)
        m = _max_of_chunks(bufs, stage, full, K, m, col0, slice_end, K, BLOCK, True)
        slice_max = tl.max(m, axis=0)
        # A slice of -inf only (or none: past the row end) contributes exp(-inf) = 0, not
        # exp(-inf - -inf) = NaN; a row of -inf only still comes out NaN, as torch's does.
        shift = tl.where(slice_max == -float("inf"), 0.0, slice_max)
        shift_log2 = shift * 1.4426950408889634
        # The exponentials replace the slice in place (one exponential per element; in 16-bit
        # types they round once more than the output, within its tolerance).
        total = tl.zeros([BLOCK], tl.float32)
        total = _exp_of_chunks(bufs, stage, 0, full, total, shift_log2, col0, slice_end, K,
                               BLOCK, False, UNROLL)
        total = _exp_of_chunks(bufs, stage, full, K, total, shift_log2, col0, slice_end, K,
                               BLOCK, True)
        slice_sum = tl.sum(total, axis=0)
        if C > 1 and DSMEM:
            slot = i % 2
            push_pair(pairs, pair_bars, slot, rank, slice_max, slice_sum, C, PEERS)
            wait_pairs(pair_bars, slot, (i // 2) & 1, C)
            row_max, row_sum = softmax_stats_of_pairs(pairs, slot, slice_max, C, PEERS)
            scale = tl.exp(shift - row_max) / row_sum
        elif C > 1:
            publish_partials(scratch_ptr, row, rank, slice_max, slice_sum, C)
            maxes, sums = peer_partials(scratch_ptr, row, -float("inf"), C, PEERS)
            row_max = tl.max(maxes, axis=0)
            row_sum = tl.sum(tl.where(maxes == -float("inf"), 0.0,
                                      sums * tl.exp(maxes - row_max)), axis=0)
            scale = tl.exp(shift - row_max) / row_sum
        else:
            # Every thread's exponentials are in shared memory before any reads them back.
            tl.debug_barrier()
            scale = 1.0 / slice_sum
        out_row = out_ptr + row.to(tl.int64) * out_row_stride
        _store_chunks(out_row, bufs, stage, 0, full, scale, col0, slice_end, K, BLOCK, False,
                      STORE_EVICT, UNROLL)
        _store_chunks(out_row, bufs, stage, full, K, scale, col0, slice_end, K, BLOCK, True,
                      STORE_EVICT)
        # Every thread is done reading the stage before any copy refills it. (Refilling it in
        # parts as the output pass finishes each, 2 / 4 / 13 parts over 2 CTAs at 2048x100000
        # fp16, ran 0.85 / 0.85 / 0.82x of a copy on the H200 against 0.86x for this.)
        tl.debug_barrier()
        ahead = i + NUM_STAGES
        load_slice(in_ptr, bufs, stage, first + ahead * step, ahead < n_mine, in_row_stride, col0,
                   slice_end, K, BLOCK)
    # No copy may still be writing shared memory when the CTA exits.
    tlx.async_load_wait_group(0)


@ww.jit
def _sum_of_chunks(bufs, stage, total, K: tl.constexpr, UNROLL: tl.constexpr = 1):
    """total plus the slice's K chunks, lane-wise (lanes past the slice were filled with 0)."""
    for k in tl.range(0, K, loop_unroll_factor=UNROLL):
        total += tlx.local_load(chunk_view(bufs, stage, k, K)).to(tl.float32)
    return total


@ww.jit
def _squares_of_chunks(bufs, stage, k_begin, k_end, total, mean, col0, slice_end,
                       K: tl.constexpr, BLOCK: tl.constexpr, MASKED: tl.constexpr,
                       UNROLL: tl.constexpr = 1):
    """total plus (x - mean)^2 over chunks [k_begin, k_end), lane-wise (MASKED: lanes past the
    slice add 0)."""
    for k in tl.range(k_begin, k_end, loop_unroll_factor=UNROLL):
        d = tlx.local_load(chunk_view(bufs, stage, k, K)).to(tl.float32) - mean
        if MASKED:
            d = tl.where(col0 + k * BLOCK + tl.arange(0, BLOCK) < slice_end, d, 0.0)
        total += d * d
    return total


@ww.jit
def _normalize_chunks(y_row, w_src, b_src, bufs, stage, k_begin, k_end, mean, rstd, col0,
                      slice_end, K: tl.constexpr, BLOCK: tl.constexpr, MASKED: tl.constexpr,
                      STORE_EVICT: tl.constexpr, WB_SMEM: tl.constexpr = False,
                      UNROLL: tl.constexpr = 1):
    """Stores (x - mean) * rstd * w + b of chunks [k_begin, k_end) to y_row (MASKED: only the
    lanes of the slice). w_src and b_src are w_ptr and b_ptr, read from L2 for every row, or with
    WB_SMEM the CTA's K chunks of its w and b slices in shared memory (0 past the slice)."""
    for k in tl.range(k_begin, k_end, loop_unroll_factor=UNROLL):
        cols = col0 + k * BLOCK + tl.arange(0, BLOCK)
        x = tlx.local_load(chunk_view(bufs, stage, k, K)).to(tl.float32)
        if WB_SMEM:
            w = tlx.local_load(tlx.local_view(w_src, k)).to(tl.float32)
            b = tlx.local_load(tlx.local_view(b_src, k)).to(tl.float32)
            y = ((x - mean) * rstd * w + b).to(y_row.dtype.element_ty)
            if MASKED:
                tl.store(y_row + cols, y, mask=cols < slice_end, eviction_policy=STORE_EVICT)
            else:
                tl.store(y_row + cols, y, eviction_policy=STORE_EVICT)
        elif MASKED:
            valid = cols < slice_end
            w = tl.load(w_src + cols, mask=valid, other=0.0).to(tl.float32)
            b = tl.load(b_src + cols, mask=valid, other=0.0).to(tl.float32)
            y = ((x - mean) * rstd * w + b).to(y_row.dtype.element_ty)
            tl.store(y_row + cols, y, mask=valid, eviction_policy=STORE_EVICT)
        else:
            w = tl.load(w_src + cols).to(tl.float32)
            b = tl.load(b_src + cols).to(tl.float32)
            y = ((x - mean) * rstd * w + b).to(y_row.dtype.element_ty)
            tl.store(y_row + cols, y, eviction_policy=STORE_EVICT)


@ww.jit
def layernorm_fwd_smem_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, x_row_stride,
                              y_row_stride, n_rows, n_cols, slice_cols, eps,
                              BLOCK: tl.constexpr, K: tl.constexpr, NUM_STAGES: tl.constexpr,
                              C: tl.constexpr = 1, PEERS: tl.constexpr = 1,
                              STORE_EVICT: tl.constexpr = "", WB_SMEM: tl.constexpr = False,
                              UNROLL: tl.constexpr = 1):
    """Layer norm forward over rows held in shared memory as softmax_smem_kernel holds them:
    per slice its mean and M2 = sum (x - mean)^2 (two passes over shared memory), the cluster's
    (mean, M2) pairs combined by Chan et al.'s formula (weighted by each slice's column count),
    then the output pass; rank 0 stores the row's mean and rstd. WB_SMEM: w and b are read from
    shared memory, where each CTA copies its slices of them once, instead of from L2 a row;
    UNROLL: the loop_unroll_factor of the passes over whole chunks."""
    tl.static_assert(NUM_STAGES >= 2)
    bufs = tlx.local_alloc((BLOCK,), x_ptr.dtype.element_ty, NUM_STAGES * K)
    rank, first, step, n_mine = rows_of_program(n_rows, C)
    if C > 1:
        pairs, pair_bars = exchange_slots(PEERS)
    if WB_SMEM:
        # A CTA takes the same column slice of every row, so its w and b slices are read once.
        # They are copied as one "row" each (row stride 0), in the two commit groups ahead of
        # the ring's, which the first row's wait_group(NUM_STAGES - 1) therefore covers too.
        w_src = tlx.local_alloc((BLOCK,), w_ptr.dtype.element_ty, K)
        b_src = tlx.local_alloc((BLOCK,), b_ptr.dtype.element_ty, K)
        wb_col0 = rank * slice_cols
        wb_end = tl.minimum(wb_col0 + slice_cols, n_cols)
        load_slice(w_ptr, w_src, 0, first, True, 0, wb_col0, wb_end, K, BLOCK)
        load_slice(b_ptr, b_src, 0, first, True, 0, wb_col0, wb_end, K, BLOCK)
    else:
        w_src = w_ptr
        b_src = b_ptr
    col0, slice_end, full = start_ring(x_ptr, bufs, rank, first, step, n_mine, x_row_stride,
                                       slice_cols, n_cols, NUM_STAGES, K, BLOCK)
    # An empty slice (past the row end) has mean 0 and weighs nothing in the combine.
    count = tl.maximum(slice_counts(rank, slice_cols, n_cols), 1.0)
    for i in range(0, n_mine):
        row = first + i * step
        stage = i % NUM_STAGES
        tlx.async_load_wait_group(NUM_STAGES - 1)
        slice_mean = tl.sum(_sum_of_chunks(bufs, stage, tl.zeros([BLOCK], tl.float32), K,
                                           UNROLL), axis=0) / count
        m2 = tl.zeros([BLOCK], tl.float32)
        m2 = _squares_of_chunks(bufs, stage, 0, full, m2, slice_mean, col0, slice_end, K, BLOCK,
                                False, UNROLL)
        m2 = _squares_of_chunks(bufs, stage, full, K, m2, slice_mean, col0, slice_end, K, BLOCK,
                                True)
        slice_m2 = tl.sum(m2, axis=0)
        if C > 1:
            push_pair(pairs, pair_bars, i % 2, rank, slice_mean, slice_m2, C, PEERS)
            wait_pairs(pair_bars, i % 2, (i // 2) & 1, C)
            mean = 0.0
            for r in tl.static_range(C):
                mean_r, m2_r = pair_of(pairs, i % 2, r, PEERS)
                mean += mean_r * slice_counts(r, slice_cols, n_cols)
            mean = mean / n_cols
            var = 0.0
            for r in tl.static_range(C):
                mean_r, m2_r = pair_of(pairs, i % 2, r, PEERS)
                spread = mean_r - mean
                var += m2_r + slice_counts(r, slice_cols, n_cols) * spread * spread
            var = var / n_cols
        else:
            mean = slice_mean
            var = slice_m2 / n_cols
        rstd = 1.0 / tl.sqrt(var + eps)
        tl.store(mean_ptr + row, mean, mask=rank == 0)
        tl.store(rstd_ptr + row, rstd, mask=rank == 0)
        y_row = y_ptr + row.to(tl.int64) * y_row_stride
        _normalize_chunks(y_row, w_src, b_src, bufs, stage, 0, full, mean, rstd, col0, slice_end,
                          K, BLOCK, False, STORE_EVICT, WB_SMEM, UNROLL)
        _normalize_chunks(y_row, w_src, b_src, bufs, stage, full, K, mean, rstd, col0,
                          slice_end, K, BLOCK, True, STORE_EVICT, WB_SMEM)
        # Every thread is done reading the stage before any copy refills it.
        tl.debug_barrier()
        ahead = i + NUM_STAGES
        load_slice(x_ptr, bufs, stage, first + ahead * step, ahead < n_mine, x_row_stride, col0,
                   slice_end, K, BLOCK)
    tlx.async_load_wait_group(0)
