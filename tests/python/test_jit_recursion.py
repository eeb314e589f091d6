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


@ww.jit
def fib(N: tl.constexpr):
    if N < 2:
        return N
    return fib(N - 1) + fib(N - 2)


@ww.jit
def fib_kernel(x_ptr, N: tl.constexpr):
    tl.store(x_ptr, fib(N))


def test_branching_recursion_inlines_within_its_budget():
    out = np.zeros(1, np.int32)
    fib_kernel[(1,)](out, N=20)
    assert out[0] == 6765


def test_exponential_recursion_is_refused_not_hung():
    # fib(40) would inline 3e8 calls that create no op: the inlining budget stops it.
    with pytest.raises(Exception, match=r"more than 1048576 calls to @jit helpers were inlined"):
        fib_kernel[(1,)](np.zeros(1, np.int32), N=40)
