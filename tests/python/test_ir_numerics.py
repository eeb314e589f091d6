"""The scalar numerics contract (src/ir/ScalarNumerics.h) through whole kernels in the interpreter:
integer division and remainder at INT_MIN / -1, shifts by the width or more, Triton's choice of
arithmetic right shift by the tensor operand's signedness (i32 >> u32 promotes to u32 but shifts
arithmetically), and the same values whether the operands are run-time or folded constants."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def mixed_shift_kernel(x_ptr, s_ptr, out_ptr):
    offs = tl.arange(0, 4)
    x = tl.load(x_ptr + offs)  # int32
    s = tl.load(s_ptr + offs)  # uint32
    tl.store(out_ptr + offs, x >> s)  # promoted to uint32, shifted arithmetically


def test_signed_left_operand_shifts_arithmetically_after_promotion():
    x = np.array([-8, -1, 8, -2147483648], np.int32)
    s = np.array([1, 4, 1, 31], np.uint32)
    out = np.zeros(4, np.uint32)
    mixed_shift_kernel[(1,)](x, s, out)
    np.testing.assert_array_equal(out, (x >> s.astype(np.int32)).view(np.uint32))


@ww.jit
def int_edges_kernel(a_ptr, b_ptr, out_ptr, A: tl.constexpr, B: tl.constexpr):
    offs = tl.arange(0, 1)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    ka = tl.full((1,), A, tl.int32)
    kb = tl.full((1,), B, tl.int32)
    # Run-time operands, then the same ops on constants the folder evaluates.
    tl.store(out_ptr + offs, a // b)
    tl.store(out_ptr + 1 + offs, a % b)
    tl.store(out_ptr + 2 + offs, a << b)
    tl.store(out_ptr + 3 + offs, a >> b)
    tl.store(out_ptr + 4 + offs, ka // kb)
    tl.store(out_ptr + 5 + offs, ka % kb)
    tl.store(out_ptr + 6 + offs, ka << kb)
    tl.store(out_ptr + 7 + offs, ka >> kb)


@pytest.mark.parametrize(
    "a,b,expect",
    [
        # Triton's // and % truncate (C semantics); INT_MIN // -1 wraps.
        (-7, 2, [-3, -1, -28, -2]),
        (-2147483648, -1, [-2147483648, 0, 0, -1]),
        # Shift amounts at or past the width: 0, or the sign fill.
        (-8, 32, [0, -8, 0, -1]),
        (8, 40, [0, 8, 0, 0]),
    ],
)
def test_integer_edges_fold_as_they_run(a, b, expect):
    out = np.zeros(8, np.int32)
    int_edges_kernel[(1,)](np.array([a], np.int32), np.array([b], np.int32), out, A=a, B=b)
    assert out[:4].tolist() == expect
    assert out[4:].tolist() == expect
