"""Kernels for test_loop_pointer_offsets.py: loops whose cp.async address tensors advance by a
loop-invariant amount, one of them read again after the loop."""

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def strided_row_sum(x_ptr, out_ptr, n_rows, stride, ROWS: tl.constexpr, COLS: tl.constexpr):
    # Sums blocks of ROWS rows down a column strip through a 2-slot cp.async ring; the pointers
    # the loop advanced then read the block after the last one, added to the sum.
    offs = tl.arange(0, ROWS)[:, None] * stride + tl.arange(0, COLS)[None, :]
    ptrs = x_ptr + offs
    bufs = tlx.local_alloc((ROWS, COLS), tl.float16, 2)
    acc = tl.zeros([ROWS, COLS], dtype=tl.float32)
    for i in range(0, n_rows // ROWS - 1):
        buf = tlx.local_view(bufs, i % 2)
        tlx.async_load(ptrs, buf)
        tlx.async_load_commit_group()
        tlx.async_load_wait_group(0)
        acc += tlx.local_load(buf).to(tl.float32)
        ptrs += ROWS * stride
    acc += tl.load(ptrs).to(tl.float32)
    out = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    tl.store(out_ptr + out, acc)
