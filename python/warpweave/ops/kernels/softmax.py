"""Row-wise softmax, out[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :]))).

Inputs and outputs are 2-D row-major tensors (fp16, bf16 or fp32) whose rows may be strided; the
arithmetic runs in fp32 and the result is stored in the output's element type.

softmax_kernel: the whole row fits one block; programs loop over rows (persistent), loading rows
two iterations before they are reduced.
    grid = (min(n_rows, NUM_SMS * PROGRAMS_PER_SM),)
    constexprs: BLOCK = next_power_of_2(n_cols), ROWS_AHEAD (rows loaded ahead, 0 to 2; default 2)
    signature: out_ptr:*fp32:16, in_ptr:*fp32:16, in_row_stride:i32, out_row_stride:i32,
               n_rows:i32, n_cols:i32, BLOCK=1024

softmax_online_kernel: rows too long for one block; one program per row makes one pass for the
running max and sum (rescaling the sum whenever the max grows; each block loaded two iterations
ahead) and a second pass for the output.
    grid = (n_rows,)
    constexprs: BLOCK (e.g. 8192)
"""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK: tl.constexpr, ROWS_AHEAD: tl.constexpr = 2):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    step = tl.num_programs(0)
    # Rows are loaded ROWS_AHEAD (0 to 2) iterations ahead, so that their loads are in flight
    # while the reductions of the current one wait on each other; wide rows take fewer ahead,
    # since every row ahead holds BLOCK more elements in registers.
    # Padding lanes read -inf so that they neither win the max nor add to the sum.
    row = tl.program_id(0)
    if ROWS_AHEAD >= 1:
        x_a = tl.load(in_ptr + row * in_row_stride + cols, mask=mask & (row < n_rows),
                      other=-float("inf"), eviction_policy="evict_first")
    if ROWS_AHEAD >= 2:
        x_b = tl.load(in_ptr + (row + step) * in_row_stride + cols,
                      mask=mask & (row + step < n_rows), other=-float("inf"),
                      eviction_policy="evict_first")
    for row in tl.range(tl.program_id(0), n_rows, step):
        if ROWS_AHEAD == 0:
            x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"),
                        eviction_policy="evict_first").to(tl.float32)
        else:
            x = x_a.to(tl.float32)
            ahead = row + ROWS_AHEAD * step
            if ROWS_AHEAD == 1:
                x_a = tl.load(in_ptr + ahead * in_row_stride + cols,
                              mask=mask & (ahead < n_rows), other=-float("inf"),
                              eviction_policy="evict_first")
            else:
                x_a = x_b
                x_b = tl.load(in_ptr + ahead * in_row_stride + cols,
                              mask=mask & (ahead < n_rows), other=-float("inf"),
                              eviction_policy="evict_first")
        shifted = x - tl.max(x, axis=0)
        numerator = tl.exp(shifted)
        y = numerator * tl.math.div_rn(1.0, tl.sum(numerator, axis=0))
        row_out = out_ptr + row * out_row_stride
        tl.store(row_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@ww.jit
def softmax_online_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols,
                          BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_in = in_ptr + row.to(tl.int64) * in_row_stride
    row_out = out_ptr + row.to(tl.int64) * out_row_stride
    cols = tl.arange(0, BLOCK)
    # Per-lane running max and sum; lanes are combined once at the end.
    running_max = tl.full([BLOCK], -float("inf"), dtype=tl.float32)
    running_sum = tl.zeros([BLOCK], dtype=tl.float32)
    # Each block is loaded two iterations ahead, so that two loads are in flight while a block
    # computes (the grid may hold one program per SM, to keep its rows in L2 for the second
    # pass); blocks past the row are fully masked and read nothing.
    x_next = tl.load(row_in + cols, mask=cols < n_cols, other=-float("inf"))
    x_after = tl.load(row_in + BLOCK + cols, mask=BLOCK + cols < n_cols, other=-float("inf"))
    for start in range(0, n_cols, BLOCK):
        x = x_next.to(tl.float32)
        x_next = x_after
        offs = start + 2 * BLOCK + cols
        x_after = tl.load(row_in + offs, mask=offs < n_cols, other=-float("inf"))
        new_max = tl.maximum(running_max, x)
        # A lane that has only seen -inf keeps a zero sum (and avoids inf - inf).
        rescale = tl.where(new_max == -float("inf"), 0.0, tl.exp(running_max - new_max))
        contribution = tl.where(new_max == -float("inf"), 0.0, tl.exp(x - new_max))
        running_sum = running_sum * rescale + contribution
        running_max = new_max
    row_max = tl.max(running_max, axis=0)
    lane_scale = tl.where(running_max == -float("inf"), 0.0, tl.exp(running_max - row_max))
    row_sum = tl.sum(running_sum * lane_scale, axis=0)
    inv_sum = tl.math.div_rn(1.0, row_sum)
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(row_in + offs, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) * inv_sum
        tl.store(row_out + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


@ww.jit
def softmax_bwd_kernel(dx_ptr, dy_ptr, y_ptr, dy_row_stride, y_row_stride, dx_row_stride, n_cols,
                       BLOCK: tl.constexpr):
    """The gradient of softmax, dx = y * (dy - sum(dy * y)) per row, for y = softmax(x): one
    program per row, walking it BLOCK columns at a time twice (the row's dot, then dx), in fp32.
        grid = (n_rows,)
        constexprs: BLOCK (a power of two; next_power_of_2(n_cols) up to 8192)"""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    y_row = y_ptr + row * y_row_stride
    dy_row = dy_ptr + row * dy_row_stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        y = tl.load(y_row + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        acc += y * dy
    dot = tl.sum(acc, axis=0)
    dx_row = dx_ptr + row * dx_row_stride
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        y = tl.load(y_row + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(dx_row + cols, (y * (dy - dot)).to(dx_ptr.dtype.element_ty), mask=mask)
