"""Hopper layer norm, forward and backward, streaming rows through shared memory with TMA: the
bytes in flight live in rings of shared buffers rather than registers (as in softmax_tma.py).

Rows of x (and dy) are contiguous with n_cols = TILE_R * TILE_C, TILE_C * element size = 128
bytes; each row is one [TILE_R, TILE_C] block of the tensor viewed as [n_rows * TILE_R, TILE_C],
which one TMA copy moves into one 128-byte-swizzled buffer. Persistent programs take rows pid,
pid + P, ...; row i of a program waits on stage i % NUM_STAGES, is read into registers, and the
stage is refilled with row i + NUM_STAGES before the row is computed.

layernorm_fwd_tma_kernel: y = (x - mean) * rstd * w + b, storing mean and rstd (fp32) per row;
w and b stay in registers (as [TILE_R, TILE_C] tiles).
    grid = (min(n_rows, NUM_SMS * programs per SM),)
    x_desc: block [TILE_R, TILE_C] over x.view(n_rows * TILE_R, TILE_C)
    y_desc: the same over y, used with TMA_STORE only
    constexprs: TILE_R, TILE_C, NUM_STAGES (rows loading per program), TMA_STORE and
                STORE_EVICT (as softmax_tma.py's)

layernorm_bwd_tma_kernel: dx = rstd * (w dy - mean(w dy) - xhat * mean(xhat * w dy)) per row;
each program sums dy * xhat and dy over its rows in registers and writes them to row `pid` of
partial_dw / partial_db [num_programs, n_cols] (fp32), which layernorm.layernorm_bwd_dwdb_kernel
sums. The statistics are loaded three rows ahead.
    grid = (min(n_rows, NUM_SMS * programs per SM),)
    x_desc, dy_desc, dx_desc: block [TILE_R, TILE_C] over x, dy and dx viewed as
                              [n_rows * TILE_R, TILE_C] (dx_desc used with TMA_STORE only)
    constexprs: as the forward kernel's
With SPLIT > 1 (a cluster launch, ctas_per_cga=(SPLIT, 1, 1), grid a multiple of SPLIT) each row
is SPLIT slices of TILE_R * TILE_C columns (the tensors viewed as [n_rows * SPLIT * TILE_R,
TILE_C]): CTA r of a cluster streams slice r of its cluster's rows and keeps the dw / db sums of
those columns, and the two row sums of dx are pushed per row into every CTA's shared memory
(rows_cluster.exchange_slots / push_pair / wait_pairs), so rows whose dw / db sums
would not fit one CTA's registers still stream once. PEERS =
next_power_of_2(SPLIT); partial_dw / partial_db get one row per cluster.
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from ..layernorm import _add_pair
from .rows_cluster import exchange_slots, pair_sums, push_pair, wait_pairs
from .softmax_tma import load_row, rows_of_program, store_row


@ww.jit
def load_row_pair(x_desc, dy_desc, x_bufs, dy_bufs, bars, stage, row, pred, TILE_R: tl.constexpr,
                  ROW_BYTES: tl.constexpr):
    """Starts the copies of row `row` of x and of dy into `stage`; the stage's one barrier
    completes when both have landed."""
    bar = tlx.local_view(bars, stage)
    tlx.barrier_expect_bytes(bar, 2 * ROW_BYTES, pred=pred)
    tlx.async_descriptor_load(x_desc, tlx.local_view(x_bufs, stage), [row * TILE_R, 0], bar,
                              pred=pred, eviction_policy="evict_first")
    tlx.async_descriptor_load(dy_desc, tlx.local_view(dy_bufs, stage), [row * TILE_R, 0], bar,
                              pred=pred, eviction_policy="evict_first")


@ww.jit
def layernorm_fwd_tma_kernel(x_desc, y_desc, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, n_rows, eps,
                             TILE_R: tl.constexpr, TILE_C: tl.constexpr,
                             NUM_STAGES: tl.constexpr, TMA_STORE: tl.constexpr = False,
                             STORE_EVICT: tl.constexpr = ""):
    tl.static_assert(NUM_STAGES >= 1)
    dtype: tl.constexpr = tlx.dtype_of(x_desc)
    N: tl.constexpr = TILE_R * TILE_C
    ROW_BYTES: tl.constexpr = N * tlx.size_of(dtype)
    bufs = tlx.local_alloc((TILE_R, TILE_C), dtype, NUM_STAGES)
    bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    if TMA_STORE:
        out_bufs = tlx.local_alloc((TILE_R, TILE_C), tlx.dtype_of(y_desc), 2)
    else:
        out_bufs = bufs
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    n_mine = tl.cdiv(n_rows - pid, step)
    for s in tl.static_range(NUM_STAGES):
        load_row(x_desc, bufs, bars, s, pid + s * step, s < n_mine, TILE_R, ROW_BYTES)
    offsets = tl.arange(0, TILE_R)[:, None] * TILE_C + tl.arange(0, TILE_C)[None, :]
    w = tl.load(w_ptr + offsets).to(tl.float32)
    b = tl.load(b_ptr + offsets).to(tl.float32)
    for i in range(0, n_mine):
        stage = i % NUM_STAGES
        tlx.barrier_wait(tlx.local_view(bars, stage), (i // NUM_STAGES) & 1)
        x = tlx.local_load(tlx.local_view(bufs, stage)).to(tl.float32)
        # Every thread has read the stage before the one issuing thread refills it.
        tl.debug_barrier()
        load_row(x_desc, bufs, bars, stage, pid + (i + NUM_STAGES) * step,
                 i + NUM_STAGES < n_mine, TILE_R, ROW_BYTES)
        mean = tl.sum(tl.sum(x, axis=1), axis=0) / N
        # Two-pass variance from the row in registers: no cancellation of E[x^2] - E[x]^2.
        centered = x - mean
        var = tl.sum(tl.sum(centered * centered, axis=1), axis=0) / N
        rstd = 1.0 / tl.sqrt(var + eps)
        row = pid + i * step
        tl.store(mean_ptr + row, mean)
        tl.store(rstd_ptr + row, rstd)
        y = centered * rstd * w + b
        store_row(y_desc, y_ptr, out_bufs, y.to(y_ptr.dtype.element_ty), row, i, TILE_R, TILE_C,
                  TMA_STORE, STORE_EVICT)
    if TMA_STORE:
        tlx.async_descriptor_store_wait(0)


@ww.jit
def layernorm_bwd_tma_kernel(x_desc, dy_desc, dx_desc, dx_ptr, partial_dw_ptr, partial_db_ptr,
                             w_ptr, mean_ptr, rstd_ptr, n_rows, TILE_R: tl.constexpr,
                             TILE_C: tl.constexpr, NUM_STAGES: tl.constexpr,
                             TMA_STORE: tl.constexpr = False, STORE_EVICT: tl.constexpr = "",
                             SPLIT: tl.constexpr = 1, PEERS: tl.constexpr = 1):
    tl.static_assert(NUM_STAGES >= 1)
    dtype: tl.constexpr = tlx.dtype_of(x_desc)
    # With SPLIT > 1 each row is SPLIT slices of N columns, slice r held by the cluster's CTA r.
    N: tl.constexpr = TILE_R * TILE_C
    ROW_BYTES: tl.constexpr = N * tlx.size_of(dtype)
    x_bufs = tlx.local_alloc((TILE_R, TILE_C), dtype, NUM_STAGES)
    dy_bufs = tlx.local_alloc((TILE_R, TILE_C), dtype, NUM_STAGES)
    # One barrier per stage completes when both the x and the dy row have landed.
    bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    if TMA_STORE:
        out_bufs = tlx.local_alloc((TILE_R, TILE_C), tlx.dtype_of(dx_desc), 2)
    else:
        out_bufs = x_bufs
    rank, first, step, n_mine = rows_of_program(n_rows, SPLIT)
    if SPLIT > 1:
        pairs, pair_bars = exchange_slots(PEERS)
    for s in tl.static_range(NUM_STAGES):
        load_row_pair(x_desc, dy_desc, x_bufs, dy_bufs, bars, s, (first + s * step) * SPLIT + rank,
                      s < n_mine, TILE_R, ROW_BYTES)
    offsets = tl.arange(0, TILE_R)[:, None] * TILE_C + tl.arange(0, TILE_C)[None, :]
    w = tl.load(w_ptr + rank * N + offsets).to(tl.float32)
    dw_acc = tl.zeros([TILE_R, TILE_C], dtype=tl.float32)
    db_acc = tl.zeros([TILE_R, TILE_C], dtype=tl.float32)
    # The statistics load three rows ahead: the rows arrive through the ring without waiting, so
    # a scalar load issued one row ahead would still expose its whole latency on every row.
    mean_a = tl.load(mean_ptr + first, mask=first < n_rows, other=0.0)
    rstd_a = tl.load(rstd_ptr + first, mask=first < n_rows, other=0.0)
    mean_b = tl.load(mean_ptr + first + step, mask=first + step < n_rows, other=0.0)
    rstd_b = tl.load(rstd_ptr + first + step, mask=first + step < n_rows, other=0.0)
    mean_c = tl.load(mean_ptr + first + 2 * step, mask=first + 2 * step < n_rows, other=0.0)
    rstd_c = tl.load(rstd_ptr + first + 2 * step, mask=first + 2 * step < n_rows, other=0.0)
    for i in range(0, n_mine):
        row = first + i * step
        mean = mean_a
        rstd = rstd_a
        mean_a = mean_b
        rstd_a = rstd_b
        mean_b = mean_c
        rstd_b = rstd_c
        ahead = row + 3 * step
        mean_c = tl.load(mean_ptr + ahead, mask=ahead < n_rows, other=0.0)
        rstd_c = tl.load(rstd_ptr + ahead, mask=ahead < n_rows, other=0.0)
        stage = i % NUM_STAGES
        tlx.barrier_wait(tlx.local_view(bars, stage), (i // NUM_STAGES) & 1)
        x = tlx.local_load(tlx.local_view(x_bufs, stage)).to(tl.float32)
        dy = tlx.local_load(tlx.local_view(dy_bufs, stage)).to(tl.float32)
        tl.debug_barrier()
        load_row_pair(x_desc, dy_desc, x_bufs, dy_bufs, bars, stage,
                      (row + NUM_STAGES * step) * SPLIT + rank, i + NUM_STAGES < n_mine, TILE_R,
                      ROW_BYTES)
        xhat = (x - mean) * rstd
        dw_acc += dy * xhat
        db_acc += dy
        wdy = w * dy
        # Both sums in one reduction.
        s1, s2 = tl.reduce((xhat * wdy, wdy), 1, _add_pair)
        s1, s2 = tl.reduce((s1, s2), 0, _add_pair)
        if SPLIT > 1:
            # The row's sums over all slices: the stage loads stay in flight meanwhile.
            push_pair(pairs, pair_bars, i % 2, rank, s1, s2, SPLIT, PEERS)
            wait_pairs(pair_bars, i % 2, (i // 2) & 1, SPLIT)
            s1, s2 = pair_sums(pairs, i % 2, SPLIT, PEERS)
        c1 = s1 / (N * SPLIT)
        c2 = s2 / (N * SPLIT)
        dx = (wdy - (xhat * c1 + c2)) * rstd
        store_row(dx_desc, dx_ptr, out_bufs, dx.to(dx_ptr.dtype.element_ty), row * SPLIT + rank,
                  i, TILE_R, TILE_C, TMA_STORE, STORE_EVICT)
    if TMA_STORE:
        tlx.async_descriptor_store_wait(0)
    mine = first * (N * SPLIT) + rank * N + offsets
    tl.store(partial_dw_ptr + mine, dw_acc)
    tl.store(partial_db_ptr + mine, db_acc)
