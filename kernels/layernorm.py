"""Layer normalization over the last dimension of a 2-D row-major tensor, forward and backward.

    y = (x - mean) * rstd * w + b,   mean = sum(x) / N,   rstd = 1 / sqrt(sum((x - mean)**2) / N + eps)

All statistics are computed in fp32; x, y, dy, dx may be fp16, bf16 or fp32 (w, b, dw, db too).

layernorm_fwd_kernel: one program per row, walking the row BLOCK columns at a time; stores y and
the per-row mean and rstd (fp32) that the backward pass reuses.
    grid = (n_rows,)
    constexprs: BLOCK (e.g. min(next_power_of_2(N), 65536 // element_size))
    signature: x_ptr:*fp16:16, y_ptr:*fp16:16, w_ptr:*fp16:16, b_ptr:*fp16:16,
               mean_ptr:*fp32:16, rstd_ptr:*fp32:16, stride:i32, n_cols:i32, eps:fp32, BLOCK=1024

layernorm_bwd_dx_kernel: each program takes ROWS_PER_PROGRAM consecutive rows, writes dx for them
and its partial sums of dw = sum(dy * xhat) and db = sum(dy) into row `pid` of the fp32 buffers
partial_dw / partial_db [num_programs, N]. No atomics: the result is deterministic.
    grid = (cdiv(n_rows, ROWS_PER_PROGRAM),)
    constexprs: ROWS_PER_PROGRAM (e.g. 32), BLOCK = next_power_of_2(N) (the row must fit a block)

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
    mean = tl.sum(partial, axis=0) / n_cols

    # Two-pass variance: subtracting the mean first avoids the cancellation of E[x^2] - E[x]^2.
    partial = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        centered = tl.where(mask, x - mean, 0.0)
        partial += centered * centered
    var = tl.sum(partial, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
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
def layernorm_bwd_dx_kernel(dx_ptr, dy_ptr, partial_dw_ptr, partial_db_ptr, x_ptr, w_ptr,
                            mean_ptr, rstd_ptr, stride, n_rows, n_cols,
                            ROWS_PER_PROGRAM: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK], dtype=tl.float32)
    row_begin = pid * ROWS_PER_PROGRAM
    row_end = min(row_begin + ROWS_PER_PROGRAM, n_rows)
    for row in range(row_begin, row_end):
        offset = row.to(tl.int64) * stride
        x = tl.load(x_ptr + offset + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offset + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        wdy = w * dy
        # dx = rstd * (wdy - mean(wdy) - xhat * mean(xhat * wdy))
        c1 = tl.sum(xhat * wdy, axis=0) / n_cols
        c2 = tl.sum(wdy, axis=0) / n_cols
        dx = (wdy - (xhat * c1 + c2)) * rstd
        tl.store(dx_ptr + offset + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += dy * xhat
        db_acc += dy
    tl.store(partial_dw_ptr + pid * n_cols + cols, dw_acc, mask=mask)
    tl.store(partial_db_ptr + pid * n_cols + cols, db_acc, mask=mask)


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
