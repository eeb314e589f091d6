"""Wide-row softmax and layer norm (forward and backward) with each row split over the C CTAs of a
thread-block cluster (sm_90a and later), so that every CTA keeps a slice of the row in registers
and reads it from memory once, however wide the row.

CTA rank r of a cluster holds columns [r * slice_cols, (r + 1) * slice_cols) of the row; slice_cols
is cdiv(n_cols, C) rounded up to a multiple of 16 (so that slices start on 16-byte vectors), and
BLOCK = next_power_of_2(slice_cols) lanes hold it (the last slices may be short or empty). Per row
the CTAs exchange a pair of fp32 partial statistics (exchange_partials): each CTA writes its pair to
a global scratch slot of its own, scratch[row, rank, 0:2] ([n_rows, C, 2] fp32: one slot per row,
so no slot is written twice and no barrier is needed against a peer still reading it), the
cluster meets at a cluster barrier (release / acquire: the stores are visible to the peers after
it), and every CTA reads the row's C pairs from L2 (.cg, never from a possibly stale L1 line) and
combines them alike.

C may be any cluster size from 2 to 16 (past 8 a non-portable size, which sm_90 allows); PEERS =
next_power_of_2(C) lanes hold the exchanged pairs.
Cluster k of n_clusters takes rows k, k + n_clusters, ... (grid = (n_clusters * C,),
ctas_per_cga=(C, 1, 1)); with ROWS_AHEAD=1 a CTA loads its slice of the next row before the
current row's exchange, so that those loads are in flight while it waits on its peers. With one
cluster per row (n_clusters = n_rows) the loop runs once and the hardware schedules the clusters.

softmax_cluster_kernel: pairs (slice max m_i, sum over the slice of exp(x - m_i)); the row's
    M = max m_i and S = sum s_i * exp(m_i - M).
layernorm_fwd_cluster_kernel: pairs (slice mean, slice sum of squared deviations M2_i), combined
    by Chan's parallel formula (mean = sum n_i mean_i / N, M2 = sum M2_i + n_i (mean_i - mean)^2);
    rank 0 stores the row's mean and rstd.
layernorm_bwd_cluster_kernel: pairs (sum xhat * w * dy, sum w * dy) over the slice, summed; each
    CTA keeps the dw / db sums of its own columns over its cluster's rows and writes them to row k
    of partial_dw / partial_db [n_clusters, n_cols] (layernorm_bwd_dwdb_kernel sums those).
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from ..layernorm import _add_pair


@ww.jit
def exchange_partials(scratch_ptr, row, rank, a, b, a_absent, C: tl.constexpr,
                      PEERS: tl.constexpr):
    """Publishes this CTA's partial pair (a, b) of row `row` and returns the pairs of all C CTAs of
    the cluster as two [PEERS] fp32 tensors in rank order (PEERS = next_power_of_2(C); the lanes
    past C hold a_absent and 0)."""
    slot = scratch_ptr + (row.to(tl.int64) * C + rank) * 2
    tl.store(slot, a)
    tl.store(slot + 1, b)
    tlx.cluster_barrier()
    ranks = tl.arange(0, PEERS)
    peers = scratch_ptr + (row.to(tl.int64) * C + ranks) * 2
    return (tl.load(peers, mask=ranks < C, other=a_absent, cache_modifier=".cg"),
            tl.load(peers + 1, mask=ranks < C, other=0.0, cache_modifier=".cg"))


@ww.jit
def _slice_of_row(ptr, row, n_rows, stride, cols, mask, other):
    """This CTA's slice of row `row` (lanes past the slice, the row end or n_rows read `other`)."""
    return tl.load(ptr + row.to(tl.int64) * stride + cols, mask=mask & (row < n_rows),
                   other=other, eviction_policy="evict_first")


@ww.jit
def softmax_cluster_kernel(out_ptr, in_ptr, scratch_ptr, in_row_stride, out_row_stride, n_rows,
                           n_cols, slice_cols, BLOCK: tl.constexpr, C: tl.constexpr,
                           PEERS: tl.constexpr, ROWS_AHEAD: tl.constexpr = 1):
    rank = tlx.cluster_cta_rank()
    cluster = tl.program_id(0) // C
    n_clusters = tl.num_programs(0) // C
    lanes = tl.arange(0, BLOCK)
    cols = rank * slice_cols + lanes
    # Padding lanes read -inf, so that they neither win the max nor add to the sum.
    mask = (lanes < slice_cols) & (cols < n_cols)
    row = cluster
    if ROWS_AHEAD >= 1:
        x_next = _slice_of_row(in_ptr, row, n_rows, in_row_stride, cols, mask, -float("inf"))
    for row in tl.range(cluster, n_rows, n_clusters):
        if ROWS_AHEAD >= 1:
            x = x_next.to(tl.float32)
            x_next = _slice_of_row(in_ptr, row + n_clusters, n_rows, in_row_stride, cols, mask,
                                   -float("inf"))
        else:
            x = _slice_of_row(in_ptr, row, n_rows, in_row_stride, cols, mask,
                              -float("inf")).to(tl.float32)
        slice_max = tl.max(x, axis=0)
        # A slice past the row end (all -inf) shifts by 0: its exponentials are then 0, not NaN,
        # and it publishes max -inf with sum 0, which the combine weighs by exp(-inf) = 0.
        shift = tl.where(slice_max == -float("inf"), 0.0, slice_max)
        numerator = tl.exp(x - shift)
        maxes, sums = exchange_partials(scratch_ptr, row, rank, slice_max,
                                        tl.sum(numerator, axis=0), -float("inf"), C, PEERS)
        row_max = tl.max(maxes, axis=0)
        row_sum = tl.sum(sums * tl.exp(maxes - row_max), axis=0)
        y = numerator * (tl.exp(shift - row_max) / row_sum)
        tl.store(out_ptr + row.to(tl.int64) * out_row_stride + cols,
                 y.to(out_ptr.dtype.element_ty), mask=mask)


@ww.jit
def _slice_counts(ranks, slice_cols, n_cols):
    """Columns of the row that the slices of `ranks` hold (0 for slices past the row end)."""
    return tl.minimum(tl.maximum(n_cols - ranks * slice_cols, 0), slice_cols)


@ww.jit
def layernorm_fwd_cluster_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, scratch_ptr,
                                 stride, n_rows, n_cols, slice_cols, eps, BLOCK: tl.constexpr,
                                 C: tl.constexpr, PEERS: tl.constexpr,
                                 ROWS_AHEAD: tl.constexpr = 1):
    rank = tlx.cluster_cta_rank()
    cluster = tl.program_id(0) // C
    n_clusters = tl.num_programs(0) // C
    lanes = tl.arange(0, BLOCK)
    cols = rank * slice_cols + lanes
    mask = (lanes < slice_cols) & (cols < n_cols)
    # Each slice's column count weighs its mean in the combine; an empty slice's mean is 0 and
    # weighs nothing.
    count = tl.maximum(_slice_counts(rank, slice_cols, n_cols), 1).to(tl.float32)
    ranks = tl.arange(0, PEERS)
    peer_counts = tl.where(ranks < C, _slice_counts(ranks, slice_cols, n_cols), 0).to(tl.float32)
    row = cluster
    if ROWS_AHEAD >= 1:
        x_next = _slice_of_row(x_ptr, row, n_rows, stride, cols, mask, 0.0)
    for row in tl.range(cluster, n_rows, n_clusters):
        if ROWS_AHEAD >= 1:
            x = x_next.to(tl.float32)
            x_next = _slice_of_row(x_ptr, row + n_clusters, n_rows, stride, cols, mask, 0.0)
        else:
            x = _slice_of_row(x_ptr, row, n_rows, stride, cols, mask, 0.0).to(tl.float32)
        slice_mean = tl.sum(x, axis=0) / count
        centered = tl.where(mask, x - slice_mean, 0.0)
        means, m2s = exchange_partials(scratch_ptr, row, rank, slice_mean,
                                       tl.sum(centered * centered, axis=0), 0.0, C, PEERS)
        # Chan et al.'s combine of (count, mean, M2) triples: no E[x^2] - E[x]^2 cancellation.
        mean = tl.sum(means * peer_counts, axis=0) / n_cols
        spread = means - mean
        var = tl.sum(m2s + peer_counts * spread * spread, axis=0) / n_cols
        rstd = 1.0 / tl.sqrt(var + eps)
        tl.store(mean_ptr + row, mean, mask=rank == 0)
        tl.store(rstd_ptr + row, rstd, mask=rank == 0)
        # w and b are read again for every row (from L1) rather than held in registers.
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (centered + (slice_mean - mean)) * rstd * w + b
        tl.store(y_ptr + row.to(tl.int64) * stride + cols, y.to(y_ptr.dtype.element_ty),
                 mask=mask)


@ww.jit
def layernorm_bwd_cluster_kernel(dx_ptr, dy_ptr, partial_dw_ptr, partial_db_ptr, x_ptr, w_ptr,
                                 mean_ptr, rstd_ptr, scratch_ptr, stride, n_rows, n_cols,
                                 slice_cols, BLOCK: tl.constexpr, C: tl.constexpr,
                                 PEERS: tl.constexpr, ROWS_AHEAD: tl.constexpr = 1):
    rank = tlx.cluster_cta_rank()
    cluster = tl.program_id(0) // C
    n_clusters = tl.num_programs(0) // C
    lanes = tl.arange(0, BLOCK)
    cols = rank * slice_cols + lanes
    mask = (lanes < slice_cols) & (cols < n_cols)
    dw_acc = tl.zeros([BLOCK], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK], dtype=tl.float32)
    row = cluster
    if ROWS_AHEAD >= 1:
        x_next = _slice_of_row(x_ptr, row, n_rows, stride, cols, mask, 0.0)
        dy_next = _slice_of_row(dy_ptr, row, n_rows, stride, cols, mask, 0.0)
        mean_next = tl.load(mean_ptr + row, mask=row < n_rows, other=0.0)
        rstd_next = tl.load(rstd_ptr + row, mask=row < n_rows, other=0.0)
    for row in tl.range(cluster, n_rows, n_clusters):
        if ROWS_AHEAD >= 1:
            x = x_next.to(tl.float32)
            dy = dy_next.to(tl.float32)
            mean = mean_next
            rstd = rstd_next
            ahead = row + n_clusters
            x_next = _slice_of_row(x_ptr, ahead, n_rows, stride, cols, mask, 0.0)
            dy_next = _slice_of_row(dy_ptr, ahead, n_rows, stride, cols, mask, 0.0)
            mean_next = tl.load(mean_ptr + ahead, mask=ahead < n_rows, other=0.0)
            rstd_next = tl.load(rstd_ptr + ahead, mask=ahead < n_rows, other=0.0)
        else:
            x = _slice_of_row(x_ptr, row, n_rows, stride, cols, mask, 0.0).to(tl.float32)
            dy = _slice_of_row(dy_ptr, row, n_rows, stride, cols, mask, 0.0).to(tl.float32)
            mean = tl.load(mean_ptr + row)
            rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        # Summed before the exchange: dy is then dead across it (fewer registers).
        dw_acc += dy * xhat
        db_acc += dy
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        wdy = w * dy
        # dx = rstd * (wdy - mean(wdy) - xhat * mean(xhat * wdy)), both means over the whole row.
        s1, s2 = tl.reduce((xhat * wdy, wdy), 0, _add_pair)
        s1s, s2s = exchange_partials(scratch_ptr, row, rank, s1, s2, 0.0, C, PEERS)
        c1 = tl.sum(s1s, axis=0) / n_cols
        c2 = tl.sum(s2s, axis=0) / n_cols
        dx = (wdy - (xhat * c1 + c2)) * rstd
        tl.store(dx_ptr + row.to(tl.int64) * stride + cols, dx.to(dx_ptr.dtype.element_ty),
                 mask=mask)
    tl.store(partial_dw_ptr + cluster * n_cols + cols, dw_acc, mask=mask)
    tl.store(partial_db_ptr + cluster * n_cols + cols, db_acc, mask=mask)
