"""Triton's promotion of python numbers and of division, as its language tests check them:
a python int takes an integer tensor's type whatever its signedness (uint8 % 5 stays uint8), a
python int the type cannot hold is an error naming the value, `/`, `//` and `%` refuse to mix
signed and unsigned integers, and 16-bit floats divide in fp32."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def mod_by_scalar_kernel(x_ptr, out_ptr, K: tl.constexpr):
    offs = tl.arange(0, 8)
    x = tl.load(x_ptr + offs)
    z = x % K
    tl.static_assert(z.dtype == x.dtype)
    tl.store(out_ptr + offs, z)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_unsigned_tensor_with_python_int_keeps_its_type(dtype):
    x = np.array([0, 1, 5, 7, 200, 255, 13, 99], dtype)
    out = np.zeros(8, dtype)
    mod_by_scalar_kernel[(1,)](x, out, K=7)
    np.testing.assert_array_equal(out, x % dtype(7))


@ww.jit
def op_kernel(x_ptr, y_ptr, out_ptr, OP: tl.constexpr):
    offs = tl.arange(0, 4)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    if OP == "div":
        tl.store(out_ptr + offs, x / y)
    elif OP == "floordiv":
        tl.store(out_ptr + offs, x // y)
    else:
        tl.store(out_ptr + offs, x % y)


@pytest.mark.parametrize("op", ["div", "floordiv", "mod"])
def test_division_refuses_mixed_signedness(op):
    x = np.array([7, -7, 9, 1], np.int32)
    y = np.array([2, 3, 4, 5], np.uint32)
    with pytest.raises(ww.CompilationError, match="different signedness") as e:
        op_kernel[(1,)](x, y, np.zeros(4, np.float32), OP=op)
    assert "int32 and uint32" in str(e.value)


@ww.jit
def scalar_add_kernel(x_ptr, out_ptr, K: tl.constexpr):
    offs = tl.arange(0, 4)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + K)


def test_python_int_out_of_range_is_an_error():
    x = np.zeros(4, np.int32)
    with pytest.raises(ww.TritonError, match="Scalar 1099511627776 is out of range for type int32"):
        scalar_add_kernel[(1,)](x, np.zeros(4, np.int32), K=2**40)
    with pytest.raises(ww.TritonError, match="Scalar 300 is out of range for type uint8"):
        scalar_add_kernel[(1,)](np.zeros(4, np.uint8), np.zeros(4, np.uint8), K=300)


@ww.jit
def half_div_kernel(x_ptr, y_ptr, out_ptr):
    offs = tl.arange(0, 4)
    q = tl.load(x_ptr + offs) / tl.load(y_ptr + offs)
    tl.static_assert(q.dtype == tl.float32)
    tl.store(out_ptr + offs, q)


def test_half_division_computes_in_fp32():
    x = np.array([1, 2, 3, 2049], np.float16)
    y = np.array([3, 3, 7, 3], np.float16)
    out = np.zeros(4, np.float32)
    half_div_kernel[(1,)](x, y, out)
    np.testing.assert_allclose(out, x.astype(np.float32) / y.astype(np.float32), rtol=1e-6)
