"""Row-wise reductions of a 2-D row-major tensor x[n_rows, n_cols] (rows may be strided).

row_sum_kernel: out[r] = sum(x[r, :]), accumulated in fp32.
row_max_kernel: out[r] = max(x[r, :]) and out_index[r] = the first column holding it.

Each program reduces BLOCK_M rows, walking the columns BLOCK_N at a time, so narrow and wide
rows are both served by one kernel.
    grid = (cdiv(n_rows, BLOCK_M),)
    constexprs: BLOCK_M (e.g. 4), BLOCK_N (e.g. 1024); BLOCK_M * BLOCK_N elements per step
    signature: x_ptr:*fp32:16, out_ptr:*fp32:16, n_rows:i32, n_cols:i32, stride_row:i32,
               BLOCK_M=4, BLOCK_N=1024
"""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def row_sum_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_row,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < n_rows
    row_base = x_ptr + rows.to(tl.int64)[:, None] * stride_row
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols[None, :] < n_cols)
        acc += tl.load(row_base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    total = tl.sum(acc, axis=1)
    tl.store(out_ptr + rows, total, mask=row_mask)


@ww.jit
def row_max_kernel(x_ptr, out_ptr, out_index_ptr, n_rows, n_cols, stride_row,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < n_rows
    row_base = x_ptr + rows.to(tl.int64)[:, None] * stride_row
    best = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    best_index = tl.zeros([BLOCK_M], dtype=tl.int32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols[None, :] < n_cols)
        x = tl.load(row_base + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
        block_best, block_index = tl.max(x, axis=1, return_indices=True)
        # Strictly greater: an earlier block keeps ties, so the first maximum wins.
        better = block_best > best
        best_index = tl.where(better, start + block_index, best_index)
        best = tl.where(better, block_best, best)
    tl.store(out_ptr + rows, best, mask=row_mask)
    tl.store(out_index_ptr + rows, best_index, mask=row_mask)
