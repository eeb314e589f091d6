"""@jit helpers that call themselves until a constexpr reaches a base case (Triton specializes
each constexpr value as its own function, so such recursion compiles there): a tensor summed by
halving its columns, run in the interpreter against NumPy; recursion that never ends is a
located error at the call, each call site noted once."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def column_sums(x, ROWS: tl.constexpr, COLS: tl.constexpr):
    if COLS == 1:
        return tl.reshape(x, [ROWS])
    left, right = x.reshape([ROWS, 2, COLS // 2]).permute(0, 2, 1).split()
    return column_sums(left, ROWS, COLS // 2) + column_sums(right, ROWS, COLS // 2)


@ww.jit
def row_sums_kernel(x_ptr, out_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    r = tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, COLS)[None, :]
    tl.store(out_ptr + tl.arange(0, ROWS), column_sums(tl.load(x_ptr + r * COLS + c), ROWS, COLS))


@pytest.mark.parametrize("cols", [1, 2, 8, 64])
def test_recursion_a_constexpr_ends_runs(cols):
    x = np.arange(16 * cols, dtype=np.float32).reshape(16, cols) % 7
    out = np.zeros(16, np.float32)
    row_sums_kernel[(1,)](x, out, ROWS=16, COLS=cols)
    np.testing.assert_array_equal(out, x.sum(axis=1))


@ww.jit
def endless(x, n):
    return endless(x, n - 1)


@ww.jit
def endless_kernel(x_ptr, n):
    tl.store(x_ptr, endless(tl.load(x_ptr), n))


def test_endless_recursion_is_a_located_error():
    with pytest.raises(Exception) as info:
        endless_kernel[(1,)](np.zeros(1, np.float32), 3)
    text = str(info.value)
    assert "test_jit_recursion.py:40:12: error" in text
    assert "recursive call to 'endless' did not end within 200 nested calls" in text
    assert text.count("in 'endless' called from here") == 2  # one per call site
