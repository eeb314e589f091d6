"""Global loads and stores are vectorized along whichever dim the pointers are contiguous in, as
Triton's coalescing orders them: a column-major block (`m[:, None] * 1 + k[None, :] * ld`) is
read and written 16 bytes at a time like a row-major one, dots of column-major operands load
them vectorized, the transposed store of a dot's result is vectorized after the layout change,
and 64-bit elements move as `.v2.b64`. Checked in the sm_90a / sm_80 PTX (ptxas assembles it) and
by the interpreter's results."""

import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def copy_plus_one(X, sxm, sxk, Z, szm, szk, BM: tl.constexpr, BK: tl.constexpr):
    m = tl.arange(0, BM)
    k = tl.arange(0, BK)
    x = tl.load(X + m[:, None] * sxm + k[None, :] * sxk)
    tl.store(Z + m[:, None] * szm + k[None, :] * szk, x + 1)


@ww.jit
def dot_tile(X, sxm, sxk, Y, syk, syn, Z, szm, szn, M: tl.constexpr, N: tl.constexpr,
             K: tl.constexpr):
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    x = tl.load(X + m[:, None] * sxm + k[None, :] * sxk)
    y = tl.load(Y + k[:, None] * syk + n[None, :] * syn)
    tl.store(Z + m[:, None] * szm + n[None, :] * szn, tl.dot(x, y))


def strides(a):
    return tuple(s // a.itemsize for s in a.strides)


def accesses(ptx):
    return sorted(set(re.findall(r"\b((?:ld|st)\.global[.\w]*)", ptx)))


def compile_ptx(kernel, args, consts, warps, target):
    values = kernel.bind(args, consts)
    return kernel.compile_for(values, False, (warps, 1, 1), target=target).kernel.ptx


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("dtype, vector", [(np.float16, "v4.b32"), (np.float32, "v4.b32"),
                                           (np.float64, "v2.b64"), (np.int8, "v4.b32")])
def test_column_major_block_moves_16_bytes_at_a_time(target, dtype, vector, ptxas):
    x = np.zeros((64, 64), dtype).T  # strides (1, 64): contiguous along dim 0
    z = np.zeros((64, 64), dtype).T
    ptx = compile_ptx(copy_plus_one, (x, *strides(x), z, *strides(z)), dict(BM=64, BK=64), 4,
                      target)
    assert accesses(ptx) == [f"ld.global.{vector}", f"st.global.{vector}"], accesses(ptx)
    ptxas(ptx, target)


def test_column_major_block_runs_in_the_interpreter():
    rng = np.random.default_rng(3)
    x = np.asfortranarray(rng.standard_normal((32, 64)).astype(np.float16))
    z = np.zeros((64, 32), np.float16).T
    copy_plus_one[(1,)](x, *strides(x), z, *strides(z), BM=32, BK=64)
    np.testing.assert_array_equal(z, x + np.float16(1))


@pytest.mark.parametrize("col_a, col_b, trans_z", [(True, True, False), (True, False, False),
                                                   (False, False, True)])
@pytest.mark.parametrize("M, N, K, warps", [(64, 64, 64, 4), (32, 128, 64, 4)])
def test_dot_of_column_major_operands_loads_and_stores_vectors(col_a, col_b, trans_z, M, N, K,
                                                               warps, ptxas):
    x = np.zeros((K, M), np.float16).T if col_a else np.zeros((M, K), np.float16)
    y = np.zeros((N, K), np.float16).T if col_b else np.zeros((K, N), np.float16)
    z = np.zeros((N, M), np.float32).T if trans_z else np.zeros((M, N), np.float32)
    args = (x, *strides(x), y, *strides(y), z, *strides(z))
    ptx = compile_ptx(dot_tile, args, dict(M=M, N=N, K=K), warps, "sm_90a")
    assert "ld.global.v4.b32" in ptx and "ld.global.b16" not in ptx
    assert "st.global.v4.b32" in ptx and not re.search(r"st\.global\.b32", ptx)
    ptxas(ptx, "sm_90a")
    rng = np.random.default_rng(0)
    x[...] = rng.standard_normal(x.shape) * 0.1
    y[...] = rng.standard_normal(y.shape) * 0.1
    dot_tile[(1,)](*args, M=M, N=N, K=K)
    np.testing.assert_allclose(z, x.astype(np.float32) @ y.astype(np.float32), rtol=1e-3,
                               atol=1e-3)


def test_unaligned_leading_dimension_stays_scalar():
    # A column pitch of 63 elements: consecutive columns' starts are not 16-byte aligned, so
    # each element is its own access along the contiguous dim.
    x = np.zeros((64, 63), np.float16).T  # strides (1, 63)
    ptx = compile_ptx(copy_plus_one, (x, *strides(x), x, *strides(x)), dict(BM=32, BK=32), 4,
                      "sm_90a")
    assert "ld.global.b16" in ptx and "ld.global.v4" not in ptx
