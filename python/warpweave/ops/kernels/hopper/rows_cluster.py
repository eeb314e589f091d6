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

C may be any cluster size from 2 to 16 (past 8 a non-portable size, which sm_90 allows); the pairs
are read as [PEERS] tensors, PEERS = next_power_of_2(C). (Every thread folding the C pairs from
scalar loads instead, which needs no CTA barrier, ran slower on the H200: 2.08 against 2.57 TB/s
for softmax at 2048x100000 over 8 CTAs.)

Cluster k takes the rows_per_cluster consecutive rows from k * rows_per_cluster on (grid =
(cdiv(n_rows, rows_per_cluster) * C,), ctas_per_cga=(C, 1, 1)); the hardware schedules the
clusters, so a grid of more clusters than fit at once (clusters must fit in one GPC) costs no
second wave of whole clusters' rows. With ROWS_AHEAD = 1 or 2 a CTA keeps its slices of that many
rows ahead loading. Those loads are issued just after a row's cluster barrier, not before it: the
barrier's release orders the thread's earlier memory operations, loads in flight included, before
it (PTX memory model), and for the same reason DEFER_STORE stores a row's output just after the
next row's barrier. (On the H200 neither made chunks of rows beat one-row clusters.)

softmax_cluster_kernel: pairs (slice max m_i, sum over the slice of exp(x - m_i)); the row's
    M = max m_i and S = sum s_i * exp(m_i - M).
layernorm_fwd_cluster_kernel: pairs (slice mean, slice sum of squared deviations M2_i), combined
    by Chan et al.'s parallel formula (mean = sum n_i mean_i / N, M2 = sum M2_i +
    n_i (mean_i - mean)^2); rank 0 stores the row's mean and rstd.
layernorm_bwd_cluster_kernel: pairs (sum xhat * w * dy, sum w * dy) over the slice, summed; each
    CTA keeps the dw / db sums of its own columns over its cluster's rows and writes them to row k
    of partial_dw / partial_db [number of clusters, n_cols] (layernorm_bwd_dwdb_kernel sums those).
    With DSMEM the pairs are pushed into every CTA's shared memory (exchange_slots, push_pair,
    wait_pairs) instead of the scratch slots and a cluster barrier a row; scratch_ptr is then
    unused.
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from ..layernorm import _add_pair


@ww.jit
def publish_partials(scratch_ptr, row, rank, a, b, C: tl.constexpr):
    """Publishes this CTA's partial pair (a, b) of row `row` to its scratch slot and waits at the
    cluster barrier, after which every peer's pair of the row can be read (peer_partials)."""
    slot = scratch_ptr + (row.to(tl.int64) * C + rank) * 2
    tl.store(slot, a)
    tl.store(slot + 1, b)
    tlx.cluster_barrier()


@ww.jit
def peer_partials(scratch_ptr, row, a_absent, C: tl.constexpr, PEERS: tl.constexpr):
    """The pairs that the C CTAs published for row `row`, read from L2 as two [PEERS] tensors in
    rank order (lanes past C hold a_absent and 0)."""
    ranks = tl.arange(0, PEERS)
    slots = scratch_ptr + (row.to(tl.int64) * C + ranks) * 2
    return (tl.load(slots, mask=ranks < C, other=a_absent, cache_modifier=".cg"),
            tl.load(slots + 1, mask=ranks < C, other=0.0, cache_modifier=".cg"))


@ww.jit
def exchange_slots(PEERS: tl.constexpr):
    """(pairs, bars): the two exchange slots of a CTA whose cluster trades a pair per row
    (rows_cluster.push_pair / wait_pairs): a [2] fp32 buffer per slot and peer and a barrier per
    slot. A peer pushes row i + 1's pair only once it holds row i's pairs, this CTA's among them,
    which this CTA sends after reading slot (i - 1) % 2: two slots never collide. The cluster
    meets once here, so that every barrier is initialized before any peer pushes to it."""
    pairs = tlx.local_alloc((2,), tl.float32, 2 * PEERS)
    bars = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    tlx.fence_mbarrier_init_cluster()
    tlx.cluster_barrier()
    return pairs, bars


@ww.jit
def push_pair(pairs, bars, slot, rank, a, b, C: tl.constexpr, PEERS: tl.constexpr):
    """Stores this CTA's pair (a, b) into buffer slot * PEERS + rank of `pairs` ([2] fp32 each) in
    every CTA of the cluster, itself included, completing 8 bytes on each one's barrier `slot`
    (st.async: no cluster barrier; the receivers wait on their own barrier, take_pairs)."""
    pair = tl.where(tl.arange(0, 2) == 0, a, b)
    dst = tlx.local_view(pairs, slot * PEERS + rank)
    bar = tlx.local_view(bars, slot)
    for r in tl.static_range(C):
        tlx.async_remote_shmem_store(dst, pair, r, bar)


@ww.jit
def wait_pairs(bars, slot, phase, C: tl.constexpr):
    """Waits until the C pairs of exchange slot `slot` have landed (its barrier's phase `phase`:
    the slot's uses alternate it)."""
    bar = tlx.local_view(bars, slot)
    tlx.barrier_expect_bytes(bar, C * 8)
    tlx.barrier_wait(bar, phase)


@ww.jit
def pair_of(pairs, slot, r, PEERS: tl.constexpr):
    """(a, b): the pair that CTA r pushed into exchange slot `slot`."""
    pair = tlx.local_load(tlx.local_view(pairs, slot * PEERS + r))
    first = tl.arange(0, 2) == 0
    return tl.sum(tl.where(first, pair, 0.0), axis=0), tl.sum(tl.where(first, 0.0, pair), axis=0)


@ww.jit
def pair_sums(pairs, slot, C: tl.constexpr, PEERS: tl.constexpr):
    """(sum of a, sum of b) over the C pairs in exchange slot `slot`, added in rank order as [2]
    tensors and split once."""
    both = tl.zeros([2], dtype=tl.float32)
    for r in tl.static_range(C):
        both += tlx.local_load(tlx.local_view(pairs, slot * PEERS + r))
    first = tl.arange(0, 2) == 0
    return tl.sum(tl.where(first, both, 0.0), axis=0), tl.sum(tl.where(first, 0.0, both), axis=0)


@ww.jit
def softmax_stats_of_pairs(pairs, slot, slice_max, C: tl.constexpr, PEERS: tl.constexpr):
    """(row max M, row sum S) from the C slices' (max m_r, sum of exp(x - m_r)) pairs in exchange
    slot `slot` (slice_max: this CTA's m_r, a starting point for M): M = max m_r and S = sum
    s_r * exp(m_r - M), slices of -inf only adding 0."""
    row_max = slice_max
    for r in tl.static_range(C):
        m_r, s_r = pair_of(pairs, slot, r, PEERS)
        row_max = tl.maximum(row_max, m_r)
    row_sum = 0.0
    for r in tl.static_range(C):
        m_r, s_r = pair_of(pairs, slot, r, PEERS)
        row_sum += tl.where(m_r == -float("inf"), 0.0, s_r * tl.exp(m_r - row_max))
    return row_max, row_sum


@ww.jit
def cluster_slice(n_rows, rows_per_cluster, n_cols, slice_cols, BLOCK: tl.constexpr,
                  C: tl.constexpr):
    """This CTA's part of the work: its rank in its cluster, the cluster's index and rows
    [row_begin, row_end), and the columns of its slice of a row (cols, in BLOCK lanes) with their
    mask (the lanes inside both the slice and the row)."""
    rank = tlx.cluster_cta_rank()
    cluster = tl.program_id(0) // C
    row_begin = cluster * rows_per_cluster
    row_end = tl.minimum(row_begin + rows_per_cluster, n_rows)
    lanes = tl.arange(0, BLOCK)
    cols = rank * slice_cols + lanes
    mask = (lanes < slice_cols) & (cols < n_cols)
    return rank, cluster, row_begin, row_end, cols, mask


@ww.jit
def _slice_of_row(ptr, row, row_end, stride, cols, mask, other):
    """This CTA's slice of row `row` (lanes past the slice or the row, and rows from row_end on,
    read `other`)."""
    return tl.load(ptr + row.to(tl.int64) * stride + cols, mask=mask & (row < row_end),
                   other=other, eviction_policy="evict_first")


@ww.jit
def _store_slice(ptr, row, row_begin, stride, cols, mask, values):
    """Stores a slice of row `row` (nothing for row < row_begin: no row before the first)."""
    tl.store(ptr + row.to(tl.int64) * stride + cols, values, mask=mask & (row >= row_begin))


@ww.jit
def softmax_cluster_kernel(out_ptr, in_ptr, scratch_ptr, in_row_stride, out_row_stride, n_rows,
                           rows_per_cluster, n_cols, slice_cols, BLOCK: tl.constexpr,
                           C: tl.constexpr, PEERS: tl.constexpr, ROWS_AHEAD: tl.constexpr = 1,
                           DEFER_STORE: tl.constexpr = False):
    rank, cluster, row_begin, row_end, cols, mask = cluster_slice(n_rows, rows_per_cluster,
                                                                  n_cols, slice_cols, BLOCK, C)
    # Padding lanes read -inf, so that they neither win the max nor add to the sum.
    row = row_begin
    if ROWS_AHEAD >= 1:
        x_a = _slice_of_row(in_ptr, row, row_end, in_row_stride, cols, mask, -float("inf"))
    if ROWS_AHEAD >= 2:
        x_b = _slice_of_row(in_ptr, row + 1, row_end, in_row_stride, cols, mask,
                            -float("inf"))
    if DEFER_STORE:
        y_held = tl.zeros([BLOCK], dtype=out_ptr.dtype.element_ty)
    for row in range(row_begin, row_end):
        if ROWS_AHEAD >= 1:
            x = x_a.to(tl.float32)
        else:
            x = _slice_of_row(in_ptr, row, row_end, in_row_stride, cols, mask,
                              -float("inf")).to(tl.float32)
        slice_max = tl.max(x, axis=0)
        # A slice past the row end (all -inf) shifts by 0: its exponentials are then 0, not NaN,
        # and it publishes max -inf with sum 0, which the combine weighs by 0.
        shift = tl.where(slice_max == -float("inf"), 0.0, slice_max)
        numerator = tl.exp(x - shift)
        publish_partials(scratch_ptr, row, rank, slice_max, tl.sum(numerator, axis=0), C)
        if DEFER_STORE:
            _store_slice(out_ptr, row - 1, row_begin, out_row_stride, cols, mask, y_held)
        ahead = row + ROWS_AHEAD
        if ROWS_AHEAD == 1:
            x_a = _slice_of_row(in_ptr, ahead, row_end, in_row_stride, cols, mask, -float("inf"))
        if ROWS_AHEAD == 2:
            x_a = x_b
            x_b = _slice_of_row(in_ptr, ahead, row_end, in_row_stride, cols, mask, -float("inf"))
        maxes, sums = peer_partials(scratch_ptr, row, -float("inf"), C, PEERS)
        row_max = tl.max(maxes, axis=0)
        row_sum = tl.sum(tl.where(maxes == -float("inf"), 0.0, sums * tl.exp(maxes - row_max)),
                         axis=0)
        y = (numerator * tl.math.div_rn(tl.exp(shift - row_max), row_sum)).to(out_ptr.dtype.element_ty)
        if DEFER_STORE:
            y_held = y
        else:
            _store_slice(out_ptr, row, row_begin, out_row_stride, cols, mask, y)
    if DEFER_STORE:
        _store_slice(out_ptr, row_end - 1, row_begin, out_row_stride, cols, mask, y_held)


@ww.jit
def slice_counts(ranks, slice_cols, n_cols):
    """Columns of the row that the slices of CTAs `ranks` hold (0 for slices past the row end)."""
    return tl.minimum(tl.maximum(n_cols - ranks * slice_cols, 0), slice_cols).to(tl.float32)


@ww.jit
def layernorm_fwd_cluster_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, scratch_ptr,
                                 stride, n_rows, rows_per_cluster, n_cols, slice_cols, eps,
                                 BLOCK: tl.constexpr, C: tl.constexpr, PEERS: tl.constexpr,
                                 ROWS_AHEAD: tl.constexpr = 1, DEFER_STORE: tl.constexpr = False):
    rank, cluster, row_begin, row_end, cols, mask = cluster_slice(n_rows, rows_per_cluster,
                                                                  n_cols, slice_cols, BLOCK, C)
    # Each slice's column count weighs its mean in the combine; an empty slice's mean is 0 and
    # weighs nothing.
    count = tl.maximum(slice_counts(rank, slice_cols, n_cols), 1.0)
    ranks = tl.arange(0, PEERS)
    peer_counts = tl.where(ranks < C, slice_counts(ranks, slice_cols, n_cols), 0.0)
    row = row_begin
    if ROWS_AHEAD >= 1:
        x_a = _slice_of_row(x_ptr, row, row_end, stride, cols, mask, 0.0)
    if ROWS_AHEAD >= 2:
        x_b = _slice_of_row(x_ptr, row + 1, row_end, stride, cols, mask, 0.0)
    if DEFER_STORE:
        y_held = tl.zeros([BLOCK], dtype=y_ptr.dtype.element_ty)
    for row in range(row_begin, row_end):
        if ROWS_AHEAD >= 1:
            x = x_a.to(tl.float32)
        else:
            x = _slice_of_row(x_ptr, row, row_end, stride, cols, mask, 0.0).to(tl.float32)
        slice_mean = tl.math.div_rn(tl.sum(x, axis=0), count)
        centered = tl.where(mask, x - slice_mean, 0.0)
        publish_partials(scratch_ptr, row, rank, slice_mean,
                         tl.sum(centered * centered, axis=0), C)
        if DEFER_STORE:
            _store_slice(y_ptr, row - 1, row_begin, stride, cols, mask, y_held)
        ahead = row + ROWS_AHEAD
        if ROWS_AHEAD == 1:
            x_a = _slice_of_row(x_ptr, ahead, row_end, stride, cols, mask, 0.0)
        if ROWS_AHEAD == 2:
            x_a = x_b
            x_b = _slice_of_row(x_ptr, ahead, row_end, stride, cols, mask, 0.0)
        means, m2s = peer_partials(scratch_ptr, row, 0.0, C, PEERS)
        # Chan et al.'s combine of (count, mean, M2) triples: no E[x^2] - E[x]^2 cancellation.
        mean = tl.math.div_rn(tl.sum(means * peer_counts, axis=0), n_cols)
        spread = means - mean
        var = tl.math.div_rn(tl.sum(m2s + peer_counts * spread * spread, axis=0), n_cols)
        rstd = tl.math.div_rn(1.0, tl.sqrt(var + eps))
        tl.store(mean_ptr + row, mean, mask=rank == 0)
        tl.store(rstd_ptr + row, rstd, mask=rank == 0)
        # w and b are read again for every row (from L1) rather than held in registers.
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = ((centered + (slice_mean - mean)) * rstd * w + b).to(y_ptr.dtype.element_ty)
        if DEFER_STORE:
            y_held = y
        else:
            _store_slice(y_ptr, row, row_begin, stride, cols, mask, y)
    if DEFER_STORE:
        _store_slice(y_ptr, row_end - 1, row_begin, stride, cols, mask, y_held)


@ww.jit
def _stats_or_zero(mean_ptr, rstd_ptr, row, row_end):
    return (tl.load(mean_ptr + row, mask=row < row_end, other=0.0),
            tl.load(rstd_ptr + row, mask=row < row_end, other=0.0))


@ww.jit
def layernorm_bwd_cluster_kernel(dx_ptr, dy_ptr, partial_dw_ptr, partial_db_ptr, x_ptr, w_ptr,
                                 mean_ptr, rstd_ptr, scratch_ptr, stride, n_rows,
                                 rows_per_cluster, n_cols, slice_cols, BLOCK: tl.constexpr,
                                 C: tl.constexpr, PEERS: tl.constexpr,
                                 ROWS_AHEAD: tl.constexpr = 1, DEFER_STORE: tl.constexpr = False,
                                 DSMEM: tl.constexpr = False):
    rank, cluster, row_begin, row_end, cols, mask = cluster_slice(n_rows, rows_per_cluster,
                                                                  n_cols, slice_cols, BLOCK, C)
    if DSMEM:
        pairs, pair_bars = exchange_slots(PEERS)
    dw_acc = tl.zeros([BLOCK], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK], dtype=tl.float32)
    row = row_begin
    if ROWS_AHEAD >= 1:
        x_a = _slice_of_row(x_ptr, row, row_end, stride, cols, mask, 0.0)
        dy_a = _slice_of_row(dy_ptr, row, row_end, stride, cols, mask, 0.0)
        mean_a, rstd_a = _stats_or_zero(mean_ptr, rstd_ptr, row, row_end)
    if ROWS_AHEAD >= 2:
        x_b = _slice_of_row(x_ptr, row + 1, row_end, stride, cols, mask, 0.0)
        dy_b = _slice_of_row(dy_ptr, row + 1, row_end, stride, cols, mask, 0.0)
        mean_b, rstd_b = _stats_or_zero(mean_ptr, rstd_ptr, row + 1, row_end)
    if DEFER_STORE:
        dx_held = tl.zeros([BLOCK], dtype=dx_ptr.dtype.element_ty)
    for row in range(row_begin, row_end):
        if ROWS_AHEAD >= 1:
            x = x_a.to(tl.float32)
            dy = dy_a.to(tl.float32)
            mean = mean_a
            rstd = rstd_a
        else:
            x = _slice_of_row(x_ptr, row, row_end, stride, cols, mask, 0.0).to(tl.float32)
            dy = _slice_of_row(dy_ptr, row, row_end, stride, cols, mask, 0.0).to(tl.float32)
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
        slot = (row - row_begin) % 2
        if DSMEM:
            push_pair(pairs, pair_bars, slot, rank, s1, s2, C, PEERS)
        else:
            publish_partials(scratch_ptr, row, rank, s1, s2, C)
        if DEFER_STORE:
            _store_slice(dx_ptr, row - 1, row_begin, stride, cols, mask, dx_held)
        ahead = row + ROWS_AHEAD
        if ROWS_AHEAD == 1:
            x_a = _slice_of_row(x_ptr, ahead, row_end, stride, cols, mask, 0.0)
            dy_a = _slice_of_row(dy_ptr, ahead, row_end, stride, cols, mask, 0.0)
            mean_a, rstd_a = _stats_or_zero(mean_ptr, rstd_ptr, ahead, row_end)
        if ROWS_AHEAD == 2:
            x_a = x_b
            dy_a = dy_b
            mean_a = mean_b
            rstd_a = rstd_b
            x_b = _slice_of_row(x_ptr, ahead, row_end, stride, cols, mask, 0.0)
            dy_b = _slice_of_row(dy_ptr, ahead, row_end, stride, cols, mask, 0.0)
            mean_b, rstd_b = _stats_or_zero(mean_ptr, rstd_ptr, ahead, row_end)
        if DSMEM:
            wait_pairs(pair_bars, slot, ((row - row_begin) // 2) & 1, C)
            row_s1, row_s2 = pair_sums(pairs, slot, C, PEERS)
        else:
            s1s, s2s = peer_partials(scratch_ptr, row, 0.0, C, PEERS)
            row_s1 = tl.sum(s1s, axis=0)
            row_s2 = tl.sum(s2s, axis=0)
        c1 = tl.math.div_rn(row_s1, n_cols)
        c2 = tl.math.div_rn(row_s2, n_cols)
        dx = ((wdy - (xhat * c1 + c2)) * rstd).to(dx_ptr.dtype.element_ty)
        if DEFER_STORE:
            dx_held = dx
        else:
            _store_slice(dx_ptr, row, row_begin, stride, cols, mask, dx)
    if DEFER_STORE:
        _store_slice(dx_ptr, row_end - 1, row_begin, stride, cols, mask, dx_held)
    tl.store(partial_dw_ptr + cluster * n_cols + cols, dw_acc, mask=mask)
    tl.store(partial_db_ptr + cluster * n_cols + cols, db_acc, mask=mask)
