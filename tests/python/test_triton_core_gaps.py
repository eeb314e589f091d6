"""Gaps from Triton's test_core.py (issue 17), in the interpreter: None-indexing a scalar pointer
(`p[None, None, :]` makes a 1x1 pointer, as Triton's 0-d tensor does), tl.pi32_t in kernels and on
the host, and the programs Triton refuses (tl.expand_dims' axes, descriptor blocks under 16 bytes,
atomics on narrow element types), each a compile error at the kernel's file:line:col."""

import inspect
import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


def _line_of(fn, fragment):
    """The file line of the first source line of `fn` that contains `fragment`."""
    lines, start = inspect.getsourcelines(fn)
    for i, text in enumerate(lines):
        if fragment in text:
            return start + i
    raise AssertionError(fragment)


def _expect_error(kernel, fragment, text, *args, **kwargs):
    with pytest.raises(ww.CompilationError) as e:
        kernel[(1,)](*args, **kwargs)
    msg = str(e.value)
    assert text in msg, msg
    line = _line_of(kernel.fn if hasattr(kernel, "fn") else kernel, fragment)
    assert re.search(r"test_triton_core_gaps\.py:%d:\d+" % line, msg), msg


# ------------------------------------------------------------------------------------------------
# Scalar pointers indexed with None and ':'
# ------------------------------------------------------------------------------------------------


@ww.jit
def keep_dims_sum_kernel(X, Z, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(X + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    z = tl.sum(x, axis=None, keep_dims=True)
    z_ptr = Z[None, None, :]
    tl.store(z_ptr, z)


def test_scalar_pointer_none_none_colon_is_a_1x1_pointer():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    z = np.zeros(1, np.float32)
    keep_dims_sum_kernel[(1,)](x, z, M=4, N=8)
    np.testing.assert_array_equal(z, [x.sum()])


@ww.jit
def scalar_pointer_shapes_kernel(Z, OUT):
    a = Z[None, :]  # 1
    b = Z[None, None, None, :]  # 1x1x1
    tl.store(OUT + tl.arange(0, 1), tl.reshape(tl.load(a), (1,)) + 1)
    tl.store(OUT + 1 + tl.zeros([1, 1, 1], tl.int32), tl.load(b) + 2)


def test_scalar_pointer_subscripts_load_and_store():
    z = np.array([5.0], np.float32)
    out = np.zeros(2, np.float32)
    scalar_pointer_shapes_kernel[(1,)](z, out)
    np.testing.assert_array_equal(out, [6.0, 7.0])


@ww.jit
def too_many_colons_kernel(X, N: tl.constexpr):
    offs = tl.arange(0, N)
    y = offs[:, :]
    tl.store(X + y, y)


def test_more_colons_than_dimensions_of_a_tensor_is_still_an_error():
    _expect_error(too_many_colons_kernel, "offs[:, :]", "too many ':'", np.zeros(8, np.int32), N=8)


# ------------------------------------------------------------------------------------------------
# tl.pi32_t
# ------------------------------------------------------------------------------------------------


@ww.jit
def where_pointers_kernel(cond_ptr, a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs).to(tl.pi32_t)
    b = tl.load(b_ptr + offs).to(tl.pi32_t)
    out = tl.where(tl.load(cond_ptr + offs), a, b)
    tl.store(out_ptr + offs, out)


def test_pi32_t_casts_int64_to_pointers_and_back():
    rs = np.random.RandomState(3)
    cond = rs.rand(16) > 0.5
    x = rs.randint(0, 1 << 40, 16).astype(np.int64)
    y = rs.randint(0, 1 << 40, 16).astype(np.int64)
    out = np.zeros(16, np.int64)
    where_pointers_kernel[(1,)](cond, x, y, out, N=16)
    np.testing.assert_array_equal(out, np.where(cond, x, y))


def test_pi32_t_on_the_host_is_pointer_to_int32():
    assert tl.pi32_t == tl.pointer_type(tl.int32)
    assert tl.pi32_t.element_ty == tl.int32


# ------------------------------------------------------------------------------------------------
# Programs Triton refuses
# ------------------------------------------------------------------------------------------------


@ww.jit
def expand_dims_axis_kernel(X, N: tl.constexpr, AXIS: tl.constexpr):
    offs = tl.arange(0, N)
    t = tl.expand_dims(offs, AXIS)
    tl.store(X + offs, tl.sum(t, axis=None))


@pytest.mark.parametrize("axis, text", [(-3, "invalid axis -3"), (2, "invalid axis 2"),
                                        ((0, 0), "duplicate axes, normalized axes = [0, 0]"),
                                        ((0, -3), "duplicate axes, normalized axes = [0, 0]")])
def test_expand_dims_refuses_axes_out_of_range_or_twice(axis, text):
    _expect_error(expand_dims_axis_kernel, "tl.expand_dims(offs, AXIS)", text,
                  np.zeros(8, np.int32), N=8, AXIS=axis)


@ww.jit
def expand_dims_scalar_kernel(X):
    s = tl.sum(tl.arange(0, 1))
    t = tl.expand_dims(s, 1)
    tl.store(X + tl.arange(0, 1), t)


def test_expand_dims_of_a_scalar_takes_only_axis_0_or_minus_1():
    _expect_error(expand_dims_scalar_kernel, "tl.expand_dims(s, 1)", "invalid axis 1",
                  np.zeros(1, np.int32))


@ww.jit
def expand_dims_ok_kernel(X, OUT, N: tl.constexpr):
    offs = tl.arange(0, N)
    t = tl.expand_dims(tl.load(X + offs), (0, -1))  # 1xNx1
    tl.store(OUT + offs[None, :, None], t * 2)


def test_expand_dims_accepts_distinct_wrapped_axes():
    x = np.arange(8, dtype=np.int32)
    out = np.zeros(8, np.int32)
    expand_dims_ok_kernel[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out, x * 2)


@ww.jit
def narrow_descriptor_load_kernel(ptr):
    desc = tl.make_tensor_descriptor(ptr, [16, 16], [16, 1], [1, 2])
    desc.load([0, 0])


def test_descriptor_block_rows_under_16_bytes_are_refused():
    _expect_error(narrow_descriptor_load_kernel, "tl.make_tensor_descriptor(",
                  "Descriptor block shape must have at least 16 bytes in the last dimension, "
                  "but got 2 * 4 = 8 bytes", np.zeros((16, 16), np.int32))


@ww.jit
def atomic_add_kernel(I, O):
    tl.atomic_add(O, tl.load(I))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16])
def test_atomic_add_refuses_8_and_16_bit_integers(dtype):
    _expect_error(atomic_add_kernel, "tl.atomic_add(O", "does not support",
                  np.zeros(1, dtype), np.zeros(1, dtype))


@ww.jit
def atomic_max_kernel(I, O):
    tl.atomic_max(O, tl.load(I))


def test_atomic_max_refuses_fp16_but_atomic_add_takes_it():
    _expect_error(atomic_max_kernel, "tl.atomic_max(O", "only atomic_add takes fp16/bf16",
                  np.ones(1, np.float16), np.zeros(1, np.float16))
    o = np.zeros(1, np.float16)
    atomic_add_kernel[(1,)](np.full(1, 1.5, np.float16), o)
    np.testing.assert_array_equal(o, [1.5])


@ww.jit
def _join_scalars(x_ptr, y_ptr, z_ptr):
    z = tl.join(tl.load(x_ptr), tl.load(y_ptr))
    tl.static_assert(z.shape == [2])
    tl.store(z_ptr + tl.arange(0, 2), z)


def test_join_of_two_scalars_is_a_pair():
    # Triton's test_join_scalars: scalars join as 0-d tensors into shape [2].
    z = np.zeros(2, np.int32)
    _join_scalars[(1,)](np.array([42], np.int32), np.array([100], np.int32), z)
    assert z.tolist() == [42, 100]


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_join_of_two_scalars_compiles_for_the_gpu(target, monkeypatch, tmp_path, ptxas):
    # It stopped in layout assignment ("no layout for a value of type i32").
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WARPWEAVE_TARGET", target)
    values = _join_scalars.bind((np.zeros(1, np.int32), np.zeros(1, np.int32),
                                 np.zeros(2, np.int32)), {})
    ptxas(_join_scalars.compile_for(values, False, (4, 3, 1)).kernel.ptx, target)


@ww.jit
def _software_fp8_dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m = tl.arange(0, M)[:, None]
    n = tl.arange(0, N)[None, :]
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m * K + k[None, :]).to(tl.float8e4b15, bitcast=True)
    b = tl.load(b_ptr + k[:, None] * N + n).to(tl.float8e4b15, bitcast=True)
    tl.store(c_ptr + m * N + n, tl.dot(a, b, max_num_imprecise_acc=32))


@pytest.mark.parametrize("target,warps,mma", [("sm_90a", 8, "wgmma.mma_async"),
                                              ("sm_90a", 4, "wgmma.mma_async"),
                                              ("sm_80", 4, "mma.sync.aligned")])
def test_software_fp8_dot_multiplies_as_fp16(target, warps, mma, monkeypatch, tmp_path, ptxas):
    # Triton's test_dot_max_num_imprecise_acc with float8e4b15: no MMA reads that format, so the
    # GPU dot takes the (exact) fp16 values; it was refused as too large for per-thread FMAs.
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WARPWEAVE_TARGET", target)
    values = _software_fp8_dot.bind((np.zeros(128 * 128, np.uint8), np.zeros(128 * 256, np.uint8),
                                     np.zeros(128 * 256, np.float32)), {"M": 128, "N": 256, "K": 128})
    ptx = _software_fp8_dot.compile_for(values, False, (warps, 3, 1)).kernel.ptx
    assert mma in ptx and ".f16" in ptx
    ptxas(ptx, target)
