"""Kernels for test_deferred_tma_store_wait.py: an async task that stores one tile per loop
iteration through a host descriptor (the TMA reads the tile out of the scratch region after the
store is issued), with a cross-warp reduction through the same region before each store, or the
store under a branch."""

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def scaled_tiles(x_ptr, out_desc, n_tiles, ROWS: tl.constexpr, COLS: tl.constexpr,
                 CENTER: tl.constexpr, ODD_ONLY: tl.constexpr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(x_ptr + n_tiles * ROWS * COLS, 0.0)  # the task split needs a default task
        with tlx.async_task(num_warps=4, registers=160):
            for t in range(tl.program_id(0), n_tiles, tl.num_programs(0)):
                rows = t * ROWS + tl.arange(0, ROWS)
                x = tl.load(x_ptr + rows[:, None] * COLS + tl.arange(0, COLS)[None, :])
                y = x * 2.0
                if CENTER:
                    # Columns' maxima across the task's warps go through the scratch region.
                    y = y - tl.max(y, axis=0)[None, :]
                if ODD_ONLY:
                    if t % 2 == 1:
                        out_desc.store([t * ROWS, 0], y)
                else:
                    out_desc.store([t * ROWS, 0], y)


@ww.jit
def summed_tiles(x_ptr, out_desc, n_tiles, n_inner, ROWS: tl.constexpr, COLS: tl.constexpr):
    # The K-loop shape: an inner loop without stores, whose body reduces across the task's warps
    # (through the scratch region the previous tile's store staged its tile in), then the store.
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(x_ptr + n_tiles * n_inner * ROWS * COLS, 0.0)
        with tlx.async_task(num_warps=4, registers=160):
            for t in range(tl.program_id(0), n_tiles, tl.num_programs(0)):
                acc = tl.zeros((ROWS, COLS), tl.float32)
                for j in range(0, n_inner):
                    rows = (t * n_inner + j) * ROWS + tl.arange(0, ROWS)
                    x = tl.load(x_ptr + rows[:, None] * COLS + tl.arange(0, COLS)[None, :])
                    acc += x - tl.max(x, axis=0)[None, :]
                out_desc.store([t * ROWS, 0], acc)
