"""Kernel helpers under Triton's module paths (language.extra.cuda.inline_ptx_lib,
language.extra.subtile_ops, tlx.warp_spec): they compile into calling kernels and compute what
Triton's do, checked in the interpreter against NumPy."""

import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave.language.extra.cuda.inline_ptx_lib import (_fma_f32x2, _mul_f32x2, _reduce_fadd2,
                                                          _sub_f32x2, tanh_approx_fp32)
from warpweave.language.extra import libdevice
from warpweave.language.extra.subtile_ops import _join_n_2D, _split_n_2D

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@ww.jit
def _arith(a_ptr, b_ptr, c_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    c = tl.load(c_ptr + offs)
    s0, s1 = _reduce_fadd2(a, b, c, a)
    tl.store(o_ptr + offs, _mul_f32x2(a, b))
    tl.store(o_ptr + BLOCK + offs, _sub_f32x2(a, b))
    tl.store(o_ptr + 2 * BLOCK + offs, _fma_f32x2(a, b, c))
    tl.store(o_ptr + 3 * BLOCK + offs, s0)
    tl.store(o_ptr + 4 * BLOCK + offs, s1)
    tl.store(o_ptr + 5 * BLOCK + offs, tanh_approx_fp32(a))


def test_inline_ptx_helpers_compute_their_fp32_results():
    n = 64
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal(n).astype(np.float32) * 4 for _ in range(3))
    a[:3] = [0.0, 40.0, -40.0]  # tanh at 0 and saturated
    out = np.zeros(6 * n, np.float32)
    _arith[(1,)](a, b, c, out, BLOCK=n)
    np.testing.assert_allclose(out[:n], a * b, rtol=1e-6)
    np.testing.assert_allclose(out[n:2 * n], a - b, rtol=1e-6)
    np.testing.assert_allclose(out[2 * n:3 * n], a * b + c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[3 * n:4 * n], a + c, rtol=1e-6)  # (p0a + p0b)
    np.testing.assert_allclose(out[4 * n:5 * n], b + a, rtol=1e-6)  # (p1a + p1b)
    np.testing.assert_allclose(out[5 * n:], np.tanh(a), atol=2e-6)
    assert out[5 * n] == 0.0 and out[5 * n + 1] == 1.0 and out[5 * n + 2] == -1.0


@ww.jit
def _subtiles(x_ptr, joined_ptr, part_ptr, M: tl.constexpr, N: tl.constexpr,
              S: tl.constexpr, PART: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rows * N + cols)
    parts = _split_n_2D(x, S)
    tl.store(joined_ptr + rows * N + cols, _join_n_2D(parts))
    pcols = tl.arange(0, N // S)[None, :]
    tl.store(part_ptr + rows * (N // S) + pcols, parts[PART])


@pytest.mark.parametrize("split", [2, 4, 8])
def test_split_gives_column_blocks_left_to_right_and_join_restores(split):
    x = np.arange(4 * 64, dtype=np.float32).reshape(4, 64)
    w = 64 // split
    for part in (0, split - 1):
        joined = np.zeros_like(x)
        piece = np.zeros((4, w), np.float32)
        _subtiles[(1,)](x, joined, piece, M=4, N=64, S=split, PART=part)
        np.testing.assert_array_equal(joined, x)
        np.testing.assert_array_equal(piece, x[:, part * w:(part + 1) * w])


@ww.jit
def _not_a_power(x_ptr, S: tl.constexpr):
    offs = tl.arange(0, 4)[:, None] * 16 + tl.arange(0, 16)[None, :]
    parts = _split_n_2D(tl.load(x_ptr + offs), S)
    tl.store(x_ptr + offs, _join_n_2D(parts))


def test_split_refuses_other_factors_with_a_located_error():
    with pytest.raises(ww.CompilationError, match="SPLIT_FACTOR must be 1, 2, 4 or 8"):
        _not_a_power[(1,)](np.zeros(64, np.float32), S=3)


def test_constexpr_function_is_callable_from_host_code():
    @ww.constexpr_function
    def block_for(n):
        return min(128, ww.next_power_of_2(n))

    assert block_for(100) == 128 and block_for(3) == 4


@ww.jit
def _libdevice_exp(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, libdevice.exp(tl.load(x_ptr + offs)))


@ww.jit
def _libdevice_unknown(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, libdevice.j0(tl.load(x_ptr + offs)))


def test_libdevice_module_names_the_compilers_functions():
    x = np.linspace(-3, 3, 32, dtype=np.float32)
    y = np.zeros_like(x)
    _libdevice_exp[(1,)](x, y, BLOCK=32)
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-5)
    from warpweave.language.extra.cuda.libdevice import fast_dividef, tanh  # noqa: F401

    with pytest.raises(RuntimeError, match="inside a @ww.jit kernel"):
        libdevice.exp(1.0)
    with pytest.raises(ww.CompilationError, match="j0"):
        _libdevice_unknown[(1,)](np.zeros(32, np.float32), BLOCK=32)
