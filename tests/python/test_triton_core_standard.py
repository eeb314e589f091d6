"""Triton's standard-library shape functions in the interpreter: tl.flip along any dimension,
tl.interleave, tl.squeeze / tl.unsqueeze, tl.histogram (with and without a mask, values outside
the bins ignored) and tl.assume, checked against NumPy."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def flip3d_kernel(src, dst, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, DIM: tl.constexpr):
    i = tl.arange(0, A)[:, None, None] * (B * C)
    j = tl.arange(0, B)[None, :, None] * C
    k = tl.arange(0, C)[None, None, :]
    tl.store(dst + i + j + k, tl.flip(tl.load(src + i + j + k), DIM))


@pytest.mark.parametrize("shape", [(2, 4, 8), (1, 16, 2), (4, 1, 32)])
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("dtype", [np.int16, np.float32])
def test_flip_matches_numpy(shape, dim, dtype):
    x = np.arange(np.prod(shape)).reshape(shape).astype(dtype)
    out = np.zeros_like(x)
    flip3d_kernel[(1,)](x, out, *shape, DIM=dim)
    np.testing.assert_array_equal(out, np.flip(x, dim))


@ww.jit
def flip_last_kernel(src, dst, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(dst + offs, tl.flip(tl.load(src + offs)))


def test_flip_defaults_to_the_last_dim_and_keeps_infinities():
    x = np.array([1.0, np.inf, -np.inf, np.nan, 5.0, 6.0, 7.0, -0.0], np.float32)
    out = np.zeros_like(x)
    flip_last_kernel[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out, x[::-1])


@ww.jit
def interleave_kernel(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    z = tl.interleave(tl.load(a_ptr + offs), tl.load(b_ptr + offs))
    tl.store(out_ptr + tl.arange(0, 2 * N), z)


def test_interleave_alternates_elements():
    a = np.arange(8, dtype=np.int32)
    b = 100 + np.arange(8, dtype=np.int32)
    out = np.zeros(16, np.int32)
    interleave_kernel[(1,)](a, b, out, N=8)
    np.testing.assert_array_equal(out, np.stack([a, b], axis=1).reshape(-1))


@ww.jit
def interleave_scalars_kernel(out_ptr, X: tl.constexpr):
    x = tl.full((), X, tl.int32)
    tl.store(out_ptr + tl.arange(0, 2), tl.interleave(x, 9))


def test_interleave_of_two_scalars_is_a_pair():
    out = np.zeros(2, np.int32)
    interleave_scalars_kernel[(1,)](out, X=4)
    np.testing.assert_array_equal(out, [4, 9])


@ww.jit
def squeeze_kernel(out_ptr, DIM: tl.constexpr, UNSQUEEZE_AT: tl.constexpr):
    a = tl.reshape(tl.arange(0, 8), (2, 1, 4))
    b = tl.squeeze(a, DIM)
    tl.static_assert(len(b.shape) == 2)
    c = tl.unsqueeze(b, UNSQUEEZE_AT)
    tl.static_assert(len(c.shape) == 3)
    tl.static_assert(c.shape[UNSQUEEZE_AT] == 1)
    tl.store(out_ptr + tl.arange(0, 8), tl.ravel(c))


@pytest.mark.parametrize("dim", [1, -2])
@pytest.mark.parametrize("at", [0, 2, -1])
def test_squeeze_and_unsqueeze_keep_element_order(dim, at):
    out = np.zeros(8, np.int32)
    squeeze_kernel[(1,)](out, DIM=dim, UNSQUEEZE_AT=at)
    np.testing.assert_array_equal(out, np.arange(8))


@ww.jit
def squeeze_wrong_kernel(out_ptr):
    a = tl.reshape(tl.arange(0, 8), (2, 4))
    tl.store(out_ptr + tl.arange(0, 8), tl.ravel(tl.squeeze(a, 0)))


def test_squeeze_of_a_wide_dimension_is_an_error():
    with pytest.raises(ww.CompilationError, match="only remove a dimension of size 1"):
        squeeze_wrong_kernel[(1,)](np.zeros(8, np.int32))


@ww.jit
def histogram_kernel(x_ptr, out_ptr, M: tl.constexpr, BINS: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.arange(0, M)
    x = tl.load(x_ptr + offs)
    if MASKED:
        h = tl.histogram(x, BINS, offs % 2 == 0)
    else:
        h = tl.histogram(x, BINS)
    tl.static_assert(h.dtype == tl.int32)
    tl.store(out_ptr + tl.arange(0, BINS), h)


@pytest.mark.parametrize("masked", [False, True])
def test_histogram_counts_values_in_bins(rng, masked):
    x = rng.integers(-3, 20, size=64).astype(np.int32)  # some outside [0, 16)
    out = np.zeros(16, np.int32)
    histogram_kernel[(1,)](x, out, M=64, BINS=16, MASKED=masked)
    kept = x[::2] if masked else x
    expect = np.bincount(kept[(kept >= 0) & (kept < 16)], minlength=16)
    np.testing.assert_array_equal(out, expect)


@ww.jit
def assume_kernel(x_ptr, n):
    tl.assume(n > 0)
    tl.assume(True)
    offs = tl.arange(0, 4)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + n)


def test_assume_changes_nothing():
    x = np.arange(4, dtype=np.int32)
    assume_kernel[(1,)](x, 3)
    np.testing.assert_array_equal(x, [3, 4, 5, 6])


@ww.jit
def sort_rows_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                     DESCENDING: tl.constexpr, TOPK: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    x = tl.load(x_ptr + rows * N + tl.arange(0, N)[None, :])
    if TOPK:
        z = tl.topk(x, K, descending=DESCENDING)
    else:
        z = tl.sort(x, descending=DESCENDING)
    tl.store(out_ptr + rows * K + tl.arange(0, K)[None, :], z)


@pytest.mark.parametrize("m,n", [(1, 2), (4, 16), (2, 64), (8, 1)])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.uint8])
def test_sort_rows_matches_numpy(rng, m, n, descending, dtype):
    x = rng.integers(0, 100, size=(m, n)).astype(dtype)  # with repeats
    out = np.zeros_like(x)
    sort_rows_kernel[(1,)](x, out, M=m, N=n, K=n, DESCENDING=descending, TOPK=False)
    expect = np.sort(x, axis=1)
    np.testing.assert_array_equal(out, expect[:, ::-1] if descending else expect)


@pytest.mark.parametrize("k", [1, 4, 16])
@pytest.mark.parametrize("descending", [True, False])
def test_topk_keeps_the_k_largest_in_order(rng, k, descending):
    x = rng.standard_normal((4, 32)).astype(np.float32)
    out = np.zeros((4, k), np.float32)
    sort_rows_kernel[(1,)](x, out, M=4, N=32, K=k, DESCENDING=descending, TOPK=True)
    s = np.sort(x, axis=1)
    expect = s[:, ::-1][:, :k] if descending else s[:, :k]
    np.testing.assert_array_equal(out, expect)


@ww.jit
def sort_dim_kernel(x_ptr, DIM: tl.constexpr):
    offs = tl.arange(0, 4)[:, None] * 4 + tl.arange(0, 4)[None, :]
    tl.store(x_ptr + offs, tl.sort(tl.load(x_ptr + offs), dim=DIM))


def test_sort_along_another_dimension_is_refused():
    with pytest.raises(ww.CompilationError, match="last dimension only"):
        sort_dim_kernel[(1,)](np.zeros(16, np.int32), DIM=0)
    x = np.arange(16, dtype=np.int32)[::-1].copy()
    sort_dim_kernel[(1,)](x, DIM=-1)
    np.testing.assert_array_equal(x.reshape(4, 4), np.sort(np.arange(16)[::-1].reshape(4, 4)))
