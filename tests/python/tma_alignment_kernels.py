"""Kernels for test_tma_alignment.py: TMA copies whose innermost offset is a run-time value, a
multiple of 8 elements by construction, or a constant off a 16-byte boundary."""

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def load_at(in_desc, out_ptr, col, ROWS: tl.constexpr, COLS: tl.constexpr):
    tile = in_desc.load([0, col])
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    tl.store(out_ptr + offs, tile)


@ww.jit
def load_at_block(in_desc, out_ptr, block, ROWS: tl.constexpr, COLS: tl.constexpr):
    tile = in_desc.load([0, block * 8])
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    tl.store(out_ptr + offs, tile)


@ww.jit
def load_at_constant(in_desc, out_ptr, COL: tl.constexpr, ROWS: tl.constexpr,
                     COLS: tl.constexpr):
    tile = in_desc.load([0, COL])
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    tl.store(out_ptr + offs, tile)


@ww.jit
def tlx_load_at(in_desc, out_ptr, col, ROWS: tl.constexpr, COLS: tl.constexpr):
    buf = tlx.local_alloc((ROWS, COLS), tl.float16, 1)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(tlx.local_view(bar, 0), ROWS * COLS * 2)
    tlx.async_descriptor_load(in_desc, tlx.local_view(buf, 0), [0, col], tlx.local_view(bar, 0))
    tlx.barrier_wait(tlx.local_view(bar, 0), 0)
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    tl.store(out_ptr + offs, tlx.local_load(tlx.local_view(buf, 0)))
