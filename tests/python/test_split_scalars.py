"""tl.split of a 1-D [2] tensor gives two scalars (Triton's semantics): in the interpreter
against NumPy, and compiled to PTX that ptxas assembles for sm_90a and sm_80 (the codegen once
failed on it with an internal 'no layout' error). Also the [N, 2] form beside it."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def split_pair_kernel(x_ptr, out_ptr):
    a, b = tl.split(tl.load(x_ptr + tl.arange(0, 2)))
    # Scalars: broadcast into a tensor store and used in scalar arithmetic.
    tl.store(out_ptr + tl.arange(0, 4), tl.where(tl.arange(0, 4) < 2, a, b) * 2)
    tl.store(out_ptr + 4, a - b)


@ww.jit
def split_rows_kernel(x_ptr, out_ptr, N: tl.constexpr):
    rows = tl.arange(0, N)
    pairs = tl.load(x_ptr + rows[:, None] * 2 + tl.arange(0, 2)[None, :])
    a, b = tl.split(pairs)
    tl.store(out_ptr + rows, a * 10 + b)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_split_of_a_pair_gives_scalars(dtype):
    x = np.array([3, -7], dtype=dtype)
    out = np.zeros(5, dtype=dtype)
    split_pair_kernel[(1,)](x, out)
    expect = np.array([6, 6, -14, -14, 10], dtype=dtype)
    np.testing.assert_array_equal(out, expect)


def test_split_of_rows():
    x = np.arange(32, dtype=np.float32).reshape(16, 2)
    out = np.zeros(16, np.float32)
    split_rows_kernel[(1,)](x, out, N=16)
    np.testing.assert_array_equal(out, x[:, 0] * 10 + x[:, 1])


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_split_of_a_pair_compiles(target, num_warps, requires_ptxas):
    x, out = np.zeros(2, np.float32), np.zeros(5, np.float32)
    values = split_pair_kernel.bind((x, out), {})
    options = split_pair_kernel._options(num_warps, None, None, None)
    compiled = split_pair_kernel.compile_for(values, False, options, target=target)
    assert compiled.n_spills == 0
