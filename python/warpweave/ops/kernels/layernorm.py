"""Layer normalization over the last dimension of a 2-D row-major tensor, forward and backward.

    y = (x - mean) * rstd * w + b,   mean = sum(x) / N,   rstd = 1 / sqrt(sum((x - mean)**2) / N + eps)

All statistics are computed in fp32; x, y, dy, dx may be fp16, bf16 or fp32 (w, b, dw, db too).

layernorm_fwd_kernel: one program per row, walking the row BLOCK columns at a time; stores y and
the per-row mean and rstd (fp32) that the backward pass reuses.

layernorm_fwd_fused_kernel: the row fits one block; programs loop over rows (persistent) and read
each row from memory once, two iterations before it is normalized.
    grid = (min(n_rows, NUM_SMS * PROGRAMS_PER_SM),)
    constexprs: BLOCK = next_power_of_2(N)
    grid = (n_rows,)
    constexprs: BLOCK (e.g. min(next_power_of_2(N), 65536 // element_size))
    signature: x_ptr:*fp16:16, y_ptr:*fp16:16, w_ptr:*fp16:16, b_ptr:*fp16:16,
               mean_ptr:*fp32:16, rstd_ptr:*fp32:16, stride:i32, n_cols:i32, eps:fp32, BLOCK=1024

layernorm_bwd_dx_kernel: each program takes rows_per_program consecutive rows (loading each row
PREFETCH rows ahead), writes dx for them and its partial sums of dw = sum(dy * xhat)
and db = sum(dy) into row `pid` of the fp32 buffers partial_dw / partial_db [num_programs, N].
No atomics: the result is deterministic.
    grid = (cdiv(n_rows, rows_per_program),)
    constexprs: BLOCK = next_power_of_2(N) (the row must fit a block),
                PREFETCH (rows loaded ahead, 0 to 3; default 3; 0 for rows too wide to hold more
                in registers), ACCUMULATE_EARLY (dw and db summed before the row reduction
                rather than after it: fewer registers; default False, not yet timed),
                RELOAD_DY (dy and w read again after the row reduction instead of w * dy held
                across it: fewer registers; default False), PARTIALS (False: dx only, the partial
                sums left to layernorm_bwd_partials_kernel, for rows too wide to keep dw and db
                sums in registers beside the row)

layernorm_bwd_partials_kernel: the partial sums of dw and db for rows whose dx kernel does not
keep them: program (j, k) reads x and dy in [BLOCK_R, BLOCK_N] tiles of columns j * BLOCK_N on,
rows k * rows_per_program on, and writes row k of partial_dw / partial_db [n_chunks, N].
    grid = (cdiv(N, BLOCK_N), cdiv(n_rows, rows_per_program))

layernorm_bwd_dwdb_kernel: sums the partial rows into dw and db.
    grid = (cdiv(N, BLOCK_N),)
    constexprs: BLOCK_P (partials per step, e.g. 32), BLOCK_N (columns per program, e.g. 128)
"""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def layernorm_fwd_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, n_cols, eps,
                         BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * stride
    y_row = y_ptr + row.to(tl.int64) * stride

    partial = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        partial += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.math.div_rn(tl.sum(partial, axis=0), n_cols)

    # Two-pass variance: subtracting the mean first avoids the cancellation of E[x^2] - E[x]^2.
    partial = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        centered = tl.where(mask, x - mean, 0.0)
        partial += centered * centered
    var = tl.math.div_rn(tl.sum(partial, axis=0), n_cols)
    rstd = tl.math.div_rn(1.0, tl.sqrt(var + eps))
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)

    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@ww.jit
def layernorm_fwd_fused_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, n_rows,
                               n_cols, eps, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    step = tl.num_programs(0)
    # Rows are loaded two iterations ahead, while earlier rows are normalized.
    row = tl.program_id(0)
    x_a = tl.load(x_ptr + row.to(tl.int64) * stride + cols, mask=mask & (row < n_rows),
                  other=0.0, eviction_policy="evict_first")
    x_b = tl.load(x_ptr + (row + step).to(tl.int64) * stride + cols,
                  mask=mask & (row + step < n_rows), other=0.0, eviction_policy="evict_first")
    for row in tl.range(tl.program_id(0), n_rows, step):
        x = x_a.to(tl.float32)
        x_a = x_b
        ahead = row + 2 * step
        x_b = tl.load(x_ptr + ahead.to(tl.int64) * stride + cols,
                      mask=mask & (ahead < n_rows), other=0.0, eviction_policy="evict_first")
        mean = tl.math.div_rn(tl.sum(x, axis=0), n_cols)
        centered = tl.where(mask, x - mean, 0.0)
        var = tl.math.div_rn(tl.sum(centered * centered, axis=0), n_cols)
        rstd = tl.math.div_rn(1.0, tl.sqrt(var + eps))
        tl.store(mean_ptr + row, mean)
        tl.store(rstd_ptr + row, rstd)
        # w and b are read again for every row (from L1) rather than held in registers: fewer
        # registers leave room for more programs per SM.
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = centered * rstd * w + b
        tl.store(y_ptr + row.to(tl.int64) * stride + cols, y.to(y_ptr.dtype.element_ty),
                 mask=mask)


@ww.jit
def _add_pair(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@ww.jit
def _row_or_zeros(ptr, row, row_end, stride, cols, mask):
    return tl.load(ptr + row.to(tl.int64) * stride + cols, mask=mask & (row < row_end), other=0.0,
                   eviction_policy="evict_first")


@ww.jit
def layernorm_bwd_dx_kernel(dx_ptr, dy_ptr, partial_dw_ptr, partial_db_ptr, x_ptr, w_ptr,
                            mean_ptr, rstd_ptr, stride, n_rows, n_cols, rows_per_program,
                            BLOCK: tl.constexpr,
                            PREFETCH: tl.constexpr = 3, ACCUMULATE_EARLY: tl.constexpr = False,
                            RELOAD_DY: tl.constexpr = False, PARTIALS: tl.constexpr = True):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    dw_acc = tl.zeros([BLOCK], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK], dtype=tl.float32)
    row_begin = pid * rows_per_program
    row_end = min(row_begin + rows_per_program, n_rows)
    # Each row's x, dy and statistics are loaded PREFETCH rows ahead (0 to 3), while earlier rows
    # compute: deeper keeps more bytes in flight per program, shallower takes fewer registers
    # and so leaves room for more programs per SM.
    if PREFETCH >= 1:
        x_a = _row_or_zeros(x_ptr, row_begin, row_end, stride, cols, mask)
        dy_a = _row_or_zeros(dy_ptr, row_begin, row_end, stride, cols, mask)
        mean_a = tl.load(mean_ptr + row_begin, mask=row_begin < row_end, other=0.0)
        rstd_a = tl.load(rstd_ptr + row_begin, mask=row_begin < row_end, other=0.0)
    if PREFETCH >= 2:
        x_b = _row_or_zeros(x_ptr, row_begin + 1, row_end, stride, cols, mask)
        dy_b = _row_or_zeros(dy_ptr, row_begin + 1, row_end, stride, cols, mask)
        mean_b = tl.load(mean_ptr + row_begin + 1, mask=row_begin + 1 < row_end, other=0.0)
        rstd_b = tl.load(rstd_ptr + row_begin + 1, mask=row_begin + 1 < row_end, other=0.0)
    if PREFETCH >= 3:
        x_c = _row_or_zeros(x_ptr, row_begin + 2, row_end, stride, cols, mask)
        dy_c = _row_or_zeros(dy_ptr, row_begin + 2, row_end, stride, cols, mask)
        mean_c = tl.load(mean_ptr + row_begin + 2, mask=row_begin + 2 < row_end, other=0.0)
        rstd_c = tl.load(rstd_ptr + row_begin + 2, mask=row_begin + 2 < row_end, other=0.0)
    for row in range(row_begin, row_end):
        if PREFETCH >= 1:
            x = x_a.to(tl.float32)
            dy = dy_a.to(tl.float32)
            mean = mean_a
            rstd = rstd_a
            ahead = row + PREFETCH
            if PREFETCH == 1:
                x_a = _row_or_zeros(x_ptr, ahead, row_end, stride, cols, mask)
                dy_a = _row_or_zeros(dy_ptr, ahead, row_end, stride, cols, mask)
                mean_a = tl.load(mean_ptr + ahead, mask=ahead < row_end, other=0.0)
                rstd_a = tl.load(rstd_ptr + ahead, mask=ahead < row_end, other=0.0)
            else:
                x_a = x_b
                dy_a = dy_b
                mean_a = mean_b
                rstd_a = rstd_b
            if PREFETCH == 2:
                x_b = _row_or_zeros(x_ptr, ahead, row_end, stride, cols, mask)
                dy_b = _row_or_zeros(dy_ptr, ahead, row_end, stride, cols, mask)
                mean_b = tl.load(mean_ptr + ahead, mask=ahead < row_end, other=0.0)
                rstd_b = tl.load(rstd_ptr + ahead, mask=ahead < row_end, other=0.0)
            if PREFETCH >= 3:
                x_b = x_c
                dy_b = dy_c
                mean_b = mean_c
                rstd_b = rstd_c
                x_c = _row_or_zeros(x_ptr, ahead, row_end, stride, cols, mask)
                dy_c = _row_or_zeros(dy_ptr, ahead, row_end, stride, cols, mask)
                mean_c = tl.load(mean_ptr + ahead, mask=ahead < row_end, other=0.0)
                rstd_c = tl.load(rstd_ptr + ahead, mask=ahead < row_end, other=0.0)
        else:
            # Rows too wide for registers to hold more of them.
            x = _row_or_zeros(x_ptr, row, row_end, stride, cols, mask).to(tl.float32)
            dy = _row_or_zeros(dy_ptr, row, row_end, stride, cols, mask).to(tl.float32)
            mean = tl.load(mean_ptr + row)
            rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        if PARTIALS and ACCUMULATE_EARLY:
            # dy is then dead across the reduction: ptxas -v at 4096 fp16 columns gives 104
            # registers instead of 124 on 8 warps, 64 instead of 76 on 16 warps one row ahead.
            dw_acc += dy * xhat
            db_acc += dy
        # w is read again for every row (from L1): registers are what limits rows in flight.
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        wdy = w * dy
        # dx = rstd * (wdy - mean(wdy) - xhat * mean(xhat * wdy)); both sums in one reduction.
        s1, s2 = tl.reduce((xhat * wdy, wdy), 0, _add_pair)
        c1 = tl.math.div_rn(s1, n_cols)
        c2 = tl.math.div_rn(s2, n_cols)
        if RELOAD_DY:
            # wdy is not held across the reduction: dy and w are read again (the row was just
            # loaded: L1 or L2), which keeps the widest rows within registers.
            dy_again = tl.load(dy_ptr + row.to(tl.int64) * stride + cols, mask=mask, other=0.0)
            w_again = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            wdy = w_again * dy_again.to(tl.float32)
        dx = (wdy - (xhat * c1 + c2)) * rstd
        tl.store(dx_ptr + row.to(tl.int64) * stride + cols, dx.to(dx_ptr.dtype.element_ty),
                 mask=mask)
        if PARTIALS and not ACCUMULATE_EARLY:
            dw_acc += dy * xhat
            db_acc += dy
    if PARTIALS:
        tl.store(partial_dw_ptr + pid * n_cols + cols, dw_acc, mask=mask)
        tl.store(partial_db_ptr + pid * n_cols + cols, db_acc, mask=mask)


@ww.jit
def layernorm_bwd_partials_kernel(partial_dw_ptr, partial_db_ptr, dy_ptr, x_ptr, mean_ptr,
                                  rstd_ptr, stride, n_rows, n_cols, rows_per_program,
                                  BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    # Program (column block, row chunk) sums dy * xhat and dy over its rows into row
    # program_id(1) of the partial buffers.
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    chunk = tl.program_id(1)
    row_begin = chunk * rows_per_program
    row_end = min(row_begin + rows_per_program, n_rows)
    dw = tl.zeros([BLOCK_R, BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_R, BLOCK_N], dtype=tl.float32)
    for start in range(row_begin, row_end, BLOCK_R):
        rows = start + tl.arange(0, BLOCK_R)
        row_mask = rows < row_end
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None] * stride + cols[None, :]
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0, eviction_policy="evict_first")
        dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0, eviction_policy="evict_first")
        mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        xhat = (x.to(tl.float32) - mean[:, None]) * rstd[:, None]
        dw += dy.to(tl.float32) * xhat
        db += dy.to(tl.float32)
    tl.store(partial_dw_ptr + chunk * n_cols + cols, tl.sum(dw, axis=0), mask=col_mask)
    tl.store(partial_db_ptr + chunk * n_cols + cols, tl.sum(db, axis=0), mask=col_mask)


@ww.jit
def layernorm_bwd_dwdb_kernel(partial_dw_ptr, partial_db_ptr, dw_ptr, db_ptr, n_partials, n_cols,
                              BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    dw = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_partials, BLOCK_P):
        parts = start + tl.arange(0, BLOCK_P)
        mask = (parts[:, None] < n_partials) & col_mask[None, :]
        offsets = parts[:, None] * n_cols + cols[None, :]
        dw += tl.load(partial_dw_ptr + offsets, mask=mask, other=0.0)
        db += tl.load(partial_db_ptr + offsets, mask=mask, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=col_mask)
    tl.store(db_ptr + cols, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=col_mask)
