"""Row-wise reductions of a 2-D row-major tensor x[n_rows, n_cols] (rows may be strided).

row_sum_kernel: out[r] = sum(x[r, :]), accumulated in fp32.
row_max_kernel: out[r] = max(x[r, :]) and out_index[r] = the first column holding it; NaN is
skipped (a row of only NaN or -inf gives -inf at column 0).

Each program reduces BLOCK_M rows, walking the columns BLOCK_N at a time, so narrow and wide
rows are both served by one kernel.
    grid = (cdiv(n_rows, BLOCK_M),)
    constexprs: BLOCK_M (e.g. 4), BLOCK_N (e.g. 1024); BLOCK_M * BLOCK_N elements per step
    signature: x_ptr:*fp32:16, out_ptr:*fp32:16, n_rows:i32, n_cols:i32, stride_row:i32,
               BLOCK_M=4, BLOCK_N=1024

Too few rows to fill the GPU (64 rows of 4M columns) take two launches instead: the *_partial
kernels give each program BLOCK_M rows of one chunk of chunk_cols columns (program_id(1) is
the chunk) and write one partial per row and chunk to an fp32 workspace [n_rows, n_chunks];
row_sum_kernel then sums the partials, row_max_combine_kernel picks the best chunk. No atomics:
the result does not depend on which program finishes first.
    grid = (cdiv(n_rows, BLOCK_M), n_chunks), chunk_cols a multiple of BLOCK_N
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
def _block_max(x, cols):
    """Each row's maximum of the [BLOCK_M, BLOCK_N] block x and the first of cols holding it.
    A max reduction then a min over the matching columns: on sm_90a 583 PTX instructions and
    80 shuffles per [32, 128] block against 869 and 120 for tl.max(return_indices=True), whose
    combine carries and compares (value, index) pairs; row_sum takes 371. That work is the
    likely gap at 1M rows of 128 columns (row_max 0.71x of copy, row_sum 0.86x; an estimate from
    instruction counts, not yet timed). NaN counts as -inf (tl.max skips NaN operands, but a
    block of only NaN would still give NaN), so NaN never wins and a block of only NaN gives
    -inf, which the callers' strict `>` leaves at their initial column."""
    x = tl.where(x == x, x, -float("inf"))
    best = tl.max(x, axis=1)
    first = tl.min(tl.where(x == best[:, None], cols[None, :], 2147483647), axis=1)
    return best, first


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
        block_best, block_index = _block_max(x, cols)
        # Strictly greater: an earlier block keeps ties, so the first maximum wins.
        better = block_best > best
        best_index = tl.where(better, block_index, best_index)
        best = tl.where(better, block_best, best)
    tl.store(out_ptr + rows, best, mask=row_mask)
    tl.store(out_index_ptr + rows, best_index, mask=row_mask)


@ww.jit
def _chunk_of_rows(x_ptr, n_rows, stride_row, chunk_cols, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr):
    """The split kernels' share: this program's BLOCK_M rows (and their mask and base pointers)
    and its chunk's columns [col_begin, col_end)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    chunk = tl.program_id(1)
    row_base = x_ptr + rows.to(tl.int64)[:, None] * stride_row
    # chunk_cols is whole blocks: saying so lets the loads be vectors (as in the one-launch kernel).
    col_begin = tl.multiple_of(chunk * chunk_cols, BLOCK_N)
    return rows, rows < n_rows, row_base, chunk, col_begin, col_begin + chunk_cols


@ww.jit
def row_sum_partial_kernel(x_ptr, partial_ptr, n_rows, n_cols, stride_row, chunk_cols,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows, row_mask, row_base, chunk, col_begin, col_end = _chunk_of_rows(
        x_ptr, n_rows, stride_row, chunk_cols, BLOCK_M, BLOCK_N)
    n_chunks = tl.num_programs(1)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(col_begin, tl.minimum(col_end, n_cols), BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        # Two bounds rather than one minimum: each keeps its known alignment.
        mask = row_mask[:, None] & (cols[None, :] < col_end) & (cols[None, :] < n_cols)
        acc += tl.load(row_base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(partial_ptr + rows * n_chunks + chunk, tl.sum(acc, axis=1), mask=row_mask)


@ww.jit
def row_max_partial_kernel(x_ptr, partial_ptr, partial_index_ptr, n_rows, n_cols, stride_row,
                           chunk_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows, row_mask, row_base, chunk, col_begin, col_end = _chunk_of_rows(
        x_ptr, n_rows, stride_row, chunk_cols, BLOCK_M, BLOCK_N)
    n_chunks = tl.num_programs(1)
    best = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    # A chunk with no value above -inf names its first column, as a whole row of -inf names 0.
    best_index = tl.zeros([BLOCK_M], dtype=tl.int32) + col_begin
    for start in range(col_begin, tl.minimum(col_end, n_cols), BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        # Two bounds rather than one minimum: each keeps its known alignment.
        mask = row_mask[:, None] & (cols[None, :] < col_end) & (cols[None, :] < n_cols)
        x = tl.load(row_base + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
        block_best, block_index = _block_max(x, cols)
        # The same rule as row_max_kernel's, so a row's result does not depend on the split.
        better = block_best > best
        best_index = tl.where(better, block_index, best_index)
        best = tl.where(better, block_best, best)
    slots = rows * n_chunks + chunk
    tl.store(partial_ptr + slots, best, mask=row_mask)
    tl.store(partial_index_ptr + slots, best_index, mask=row_mask)


@ww.jit
def row_max_combine_kernel(partial_ptr, partial_index_ptr, out_ptr, out_index_ptr, n_rows,
                           n_chunks, BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    chunks = tl.arange(0, BLOCK_C)
    row_mask = rows < n_rows
    slots = rows[:, None] * n_chunks + chunks[None, :]
    mask = row_mask[:, None] & (chunks[None, :] < n_chunks)
    partial = tl.load(partial_ptr + slots, mask=mask, other=-float("inf"))
    # Partials are never NaN (a NaN never passes `>`); equal maxima go to the lower chunk, whose
    # columns all come before the higher chunk's, so the first column still wins.
    best, best_chunk = tl.max(partial, axis=1, return_indices=True)
    best_index = tl.load(partial_index_ptr + rows * n_chunks + best_chunk, mask=row_mask, other=0)
    tl.store(out_ptr + rows, best, mask=row_mask)
    tl.store(out_index_ptr + rows, best_index, mask=row_mask)
