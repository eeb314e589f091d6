"""Triton 3.x semantics that Triton programs rely on and warpweave lacked (issue 17), checked in
the interpreter (and, for code generation options, in the PTX): pointers to constant data
(`tl.const`), `x.type` / `constexpr_type`, `while tl.condition(...)`, `print("prefix", x)`, the
poison a helper returns on a path without `return`, Python ints up to 2**64 - 1 at compile time
(`1 << 63`) and Triton's types for materialized Python numbers, pointer casts between pointee
types, and `CompilationError.error_message`."""

import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave.language.core import constexpr_type

pytest.importorskip("warpweave._native")


def native():
    return importlib.import_module("warpweave._native_loader").native()


# ------------------------------------------------------------------------------------------------
# tl.const: pointers to constant data
# ------------------------------------------------------------------------------------------------


@ww.jit
def const_copy_kernel(src: tl.const, dst, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(dst + offs, tl.load(src + offs) * 2)


def test_const_pointer_can_be_read():
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(16, np.float32)
    const_copy_kernel[(1,)](x, y, N=16)
    np.testing.assert_array_equal(y, 2 * x)


@ww.jit
def const_store_kernel(src: tl.const, N: tl.constexpr):
    p = src + tl.arange(0, N)  # pointer arithmetic keeps the constness
    tl.store(p, 1.0)


@ww.jit
def const_atomic_kernel(src: tl.const):
    tl.atomic_add(src, 1.0)


@ww.jit
def _store_one(p):
    tl.store(p, 1.0)


@ww.jit
def const_store_in_helper_kernel(src: tl.const):
    _store_one(src)


@ww.jit
def const_store_in_loop_kernel(src: tl.const, n):
    p = src
    for i in range(n):
        p += 1  # a loop-carried const pointer stays const
    tl.store(p, 1.0)


@pytest.mark.parametrize("kernel,args", [
    (const_store_kernel, dict(N=8)),
    (const_atomic_kernel, {}),
    (const_store_in_helper_kernel, {}),
    (const_store_in_loop_kernel, dict(n=3)),
])
def test_store_through_a_const_pointer_is_refused(kernel, args):
    x = np.zeros(16, np.float32)
    with pytest.raises(ww.CompilationError) as e:
        kernel[(1,)](x, **args)
    assert "Cannot store to a constant pointer" in e.value.error_message
    assert "Cannot store to a constant pointer" in str(e.value.__cause__)


@ww.jit
def const_if_kernel(src: tl.const, dst, choose):
    if choose:
        p = src
    else:
        p = dst
    tl.store(dst, tl.load(p))


@ww.jit
def const_ternary_kernel(src: tl.const, dst, choose):
    p = src if choose else dst
    tl.store(dst, tl.load(p))


@ww.jit
def _pick(a, b, choose_b):
    if choose_b:
        return b
    else:
        return a


@ww.jit
def const_return_kernel(src: tl.const, dst, choose):
    tl.store(dst, tl.load(_pick(dst, src, choose)))


@ww.jit
def const_loop_swap_kernel(src: tl.const, dst, n):
    p = src
    for i in range(n):
        p = dst
    tl.store(dst, tl.load(p))


@pytest.mark.parametrize("kernel,message", [
    (const_if_kernel, "Mismatched type for p"),
    (const_ternary_kernel, "Ternary expression with dynamic condition has inconsistent type"),
    (const_return_kernel, "Return type mismatch"),
    (const_loop_swap_kernel, "loop-carried 'p' changes type from const ptr<fp32> to ptr<fp32>"),
])
def test_const_and_writable_pointers_do_not_merge(kernel, message):
    # Constness is part of a pointer's type: a run-time choice between a const and a writable
    # pointer has no one type, even when only loads follow.
    x = np.zeros(4, np.float32)
    with pytest.raises(ww.CompilationError) as e:
        kernel[(1,)](x, x, 1)
    assert message in e.value.error_message, e.value.error_message


@ww.jit
def const_static_choice_kernel(src: tl.const, dst, CHOOSE_CONST: tl.constexpr):
    p = _pick(dst, src, CHOOSE_CONST)  # a compile-time choice has one path
    tl.store(dst, tl.load(src) + 1.0)
    tl.store(dst + 1, tl.load(p))


def test_compile_time_choice_of_a_pointer_is_fine():
    x = np.array([5.0, 0.0], np.float32)
    y = np.zeros(2, np.float32)
    const_static_choice_kernel[(1,)](x, y, CHOOSE_CONST=True)
    np.testing.assert_array_equal(y, [6.0, 5.0])


# ------------------------------------------------------------------------------------------------
# x.type and constexpr_type
# ------------------------------------------------------------------------------------------------


@ww.jit
def type_objects_kernel(X, LIT: tl.constexpr, DT: tl.constexpr):
    lit: tl.constexpr = 10
    tl.static_assert(lit.type == (10).type)
    tl.static_assert(LIT.type == constexpr_type(10))
    tl.static_assert(LIT.type != constexpr_type(11))
    tl.static_assert(LIT.type.value == 10)
    v = LIT  # a plain assignment makes a run-time scalar (Triton's rule): its type is a dtype
    tl.static_assert(v.type == DT)
    tl.static_assert(v.type == tl.int32)
    x = tl.load(X + tl.arange(0, 8))
    tl.static_assert(x.type.element_ty == tl.float32)
    tl.static_assert(x.type.shape == (8,))
    tl.static_assert(x.type.numel == 8)
    tl.static_assert(x.type.is_block())
    tl.static_assert(X.type == tl.pointer_type(tl.float32))
    tl.static_assert((1, 2).type == (1, 2).type)
    tl.static_assert((1, 2).type != (1, 3).type)
    tl.store(X + tl.arange(0, 8), x + v)


def test_type_of_values_in_a_kernel():
    x = np.zeros(8, np.float32)
    type_objects_kernel[(1,)](x, 10, tl.int32)
    np.testing.assert_array_equal(x, np.full(8, 10, np.float32))


def test_constexpr_type_on_the_host():
    assert tl.constexpr(4).type == constexpr_type(4)
    assert constexpr_type(4) != constexpr_type(5)
    assert repr(constexpr_type(4)) == "constexpr_type[4]"


# ------------------------------------------------------------------------------------------------
# while tl.condition(...), print("prefix", x)
# ------------------------------------------------------------------------------------------------


@ww.jit
def condition_kernel(Out, n):
    i = 0
    while tl.condition(i < n, disable_licm=True):
        i = i + 3
    j = 0
    while tl.condition(j < n):
        j = j + 1
    tl.store(Out, i)
    tl.store(Out + 1, j)


def test_while_tl_condition():
    out = np.zeros(2, np.int32)
    condition_kernel[(1,)](out, 10)
    np.testing.assert_array_equal(out, [12, 10])


@ww.jit
def condition_runtime_option_kernel(Out, n):
    i = 0
    while tl.condition(i < n, disable_licm=n > 0):
        i = i + 1
    tl.store(Out, i)


def test_tl_condition_options_are_compile_time_values():
    with pytest.raises(ww.CompilationError, match="tl.condition's disable_licm= must be a "
                                                  "compile-time value"):
        condition_runtime_option_kernel[(1,)](np.zeros(1, np.int32), 3)


@ww.jit
def print_prefix_kernel(X):
    x = tl.load(X)
    print("value", x)
    print(x)


def test_print_with_a_prefix(capfd):
    print_prefix_kernel[(1,)](np.array([7], np.int32))
    out = capfd.readouterr().out
    assert "value" in out and "7" in out, out


# ------------------------------------------------------------------------------------------------
# Poison on a path without `return`
# ------------------------------------------------------------------------------------------------


@ww.jit
def _plus_one_if_positive(x):
    if x > 0:
        return x + 1


@ww.jit
def _offset_if(p, c):
    if c:
        return p + 1


@ww.jit
def _pair_if(c, x):
    if c:
        return x, x * 2


@ww.jit
def poison_kernel(X, Out):
    x = tl.load(X)
    tl.store(Out, _plus_one_if_positive(x))
    a, b = _pair_if(x > 0, x)
    tl.store(Out + 1, a + b)
    tl.store(_offset_if(Out + 1, x > 0), x)


def test_a_path_without_return_returns_poison():
    # Only the path that returns is defined (Triton's poison elsewhere); it is exact.
    out = np.zeros(3, np.int32)
    poison_kernel[(1,)](np.array([4], np.int32), out)
    np.testing.assert_array_equal(out, [5, 12, 4])


@ww.jit
def _explicit_none(x):
    if x > 0:
        return x
    return


@ww.jit
def explicit_none_kernel(X):
    tl.store(X, _explicit_none(tl.load(X)))


def test_an_explicit_bare_return_does_not_merge_with_a_value():
    with pytest.raises(ww.CompilationError, match="returns i32 when this run-time condition holds "
                                                  "but None otherwise|returns .* but None"):
        explicit_none_kernel[(1,)](np.zeros(1, np.int32))


# ------------------------------------------------------------------------------------------------
# Python ints up to 2**64 - 1; Triton's types for materialized numbers
# ------------------------------------------------------------------------------------------------


@ww.jit
def big_int_kernel(Y, Z, BIG: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    y = tl.load(Y + offs)
    tl.store(Z + offs, y + (1 << 63))
    tl.store(Z + N + offs, y ^ 0xFFFFFFFFFFFFFFFF)
    tl.store(Z + 2 * N + offs, y + (BIG - (1 << 63)))
    tl.static_assert((1 << 63) + ((1 << 63) - 1) == 18446744073709551615)
    tl.static_assert((1 << 63) // 2 == 1 << 62)
    tl.static_assert(-(1 << 63) == -9223372036854775808)
    tl.static_assert((1 << 63) > (1 << 62))


def test_compile_time_ints_up_to_two_to_the_64():
    y = np.array([0, 1, 63, 1 << 40], np.uint64)
    z = np.zeros(12, np.uint64)
    big = (1 << 63) + 5
    big_int_kernel[(1,)](y, z, BIG=big, N=4)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(z[:4], y + np.uint64(1 << 63))
        np.testing.assert_array_equal(z[4:8], y ^ np.uint64(0xFFFFFFFFFFFFFFFF))
        np.testing.assert_array_equal(z[8:], y + np.uint64(5))


@ww.jit
def int_overflow_kernel(X):
    tl.store(X, (1 << 64) + 0)


def test_ints_past_two_to_the_64_overflow():
    with pytest.raises(ww.CompilationError, match="compile-time integer overflow"):
        int_overflow_kernel[(1,)](np.zeros(1, np.uint64))


@ww.jit
def materialized_types_kernel(X):
    a = 3_000_000_000  # Triton: uint32
    b = 1 << 40  # int64
    c = 1 << 63  # uint64
    d = 1e300  # beyond float32: float64
    e = 1.5  # float32
    f = 2**31 - 1  # int32
    tl.static_assert(a.dtype == tl.uint32)
    tl.static_assert(b.dtype == tl.int64)
    tl.static_assert(c.dtype == tl.uint64)
    tl.static_assert(d.dtype == tl.float64)
    tl.static_assert(e.dtype == tl.float32)
    tl.static_assert(f.dtype == tl.int32)
    tl.store(X, a)


def test_materialized_python_numbers_take_tritons_types():
    x = np.zeros(1, np.uint32)
    materialized_types_kernel[(1,)](x)
    assert x[0] == 3_000_000_000


# ------------------------------------------------------------------------------------------------
# Casting a pointer to another pointee type
# ------------------------------------------------------------------------------------------------


@ww.jit
def pointer_cast_kernel(Out, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(Out.to(tl.pointer_type(tl.int32)) + offs, offs + 0x3F800000)
    scalar = Out.to(tl.pointer_type(tl.float64))
    tl.store(scalar + 2, 1.0)


def test_pointer_cast_to_another_pointee_type():
    out = np.zeros(8, np.float32)
    pointer_cast_kernel[(1,)](out, N=4)
    bits = out[:4].view(np.int32)
    np.testing.assert_array_equal(bits, 0x3F800000 + np.arange(4))
    assert out[4:].view(np.float64)[0] == 1.0  # the third fp64 of the buffer: floats 4 and 5


def test_pointer_cast_compiles_for_the_gpu(tmp_path):
    src = '''import warpweave as ww
import warpweave.language as tl


@ww.jit
def k(Out):
    tl.store(Out.to(tl.pointer_type(tl.int64)), 1)
'''
    path = tmp_path / "cast.py"
    path.write_text(src)
    ptx = native().compile([(str(path), src)], "k", "Out:*fp32:16", {}, target="sm_90a",
                           stage="ptx").ptx
    assert "st.global" in ptx


# ------------------------------------------------------------------------------------------------
# tl.dot(input_precision="bf16x3" / "bf16x6"): fp32 products emulated with bf16 ones
# ------------------------------------------------------------------------------------------------


@ww.jit
def precision_dot_kernel(A, B, C, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                         PRECISION: tl.constexpr):
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    rk = tl.arange(0, K)
    a = tl.load(A + rm * K + rk[None, :])
    b = tl.load(B + rk[:, None] * N + rn)
    acc = tl.full((M, N), 0.5, tl.float32)
    tl.store(C + rm * N + rn, tl.dot(a, b, acc, input_precision=PRECISION))


def _bf16_round(x):
    """float32 -> the nearest bfloat16 (ties to even), as float32."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def test_bf16x3_and_bf16x6_dots_approach_fp32():
    rng = np.random.default_rng(11)
    M = N = 32
    K = 64
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64) + 0.5
    errors = {}
    for precision in ["bf16x3", "bf16x6", "ieee"]:
        c = np.zeros((M, N), np.float32)
        precision_dot_kernel[(1,)](a, b, c, M=M, N=N, K=K, PRECISION=precision)
        errors[precision] = np.abs(c - exact).max()
    one_bf16 = np.abs(_bf16_round(a).astype(np.float64) @ _bf16_round(b) + 0.5 - exact).max()
    # One bf16 product keeps ~3 digits; three recover all but ~5e-5 of fp32, six all of it.
    assert one_bf16 > 1e-2
    assert errors["bf16x3"] < min(one_bf16 / 50, 1e-3), (errors, one_bf16)
    assert errors["bf16x6"] <= 2 * errors["ieee"] + 1e-5, errors


def test_bf16x3_small_products_do_not_turn_infinity_into_nan():
    # a = 1 splits into hi = 1, lo = 0; lo * inf is NaN, which the emulation drops.
    M = N = 16
    K = 16
    a = np.zeros((M, K), np.float32)
    a[:, 0] = 1.0
    b = np.zeros((K, N), np.float32)
    b[0, :] = np.inf
    for precision in ["bf16x3", "bf16x6"]:
        c = np.zeros((M, N), np.float32)
        precision_dot_kernel[(1,)](a, b, c, M=M, N=N, K=K, PRECISION=precision)
        assert np.all(c == np.inf), precision


def test_bf16x3_is_ignored_for_other_operand_types():
    M = N = K = 16
    a = np.ones((M, K), np.float64)
    b = np.ones((K, N), np.float64)
    c = np.zeros((M, N), np.float64)
    precision_dot_kernel[(1,)](a, b, c, M=M, N=N, K=K, PRECISION="bf16x3")
    np.testing.assert_array_equal(c, np.full((M, N), 16.5))


BF16X3_SOURCE = '''import warpweave as ww
import warpweave.language as tl


@ww.jit
def k(A, B, C):
    rm = tl.arange(0, 64)[:, None]
    rn = tl.arange(0, 64)[None, :]
    rk = tl.arange(0, 32)
    a = tl.load(A + rm * 32 + rk[None, :])
    b = tl.load(B + rk[:, None] * 64 + rn)
    tl.store(C + rm * 64 + rn, tl.dot(a, b, input_precision="bf16x3"))
'''


def test_bf16x3_dot_compiles_to_bf16_tensor_core_products(tmp_path):
    path = tmp_path / "bf16x3.py"
    path.write_text(BF16X3_SOURCE)
    k = native().compile([(str(path), BF16X3_SOURCE)], "k", "A:*fp32:16,B:*fp32:16,C:*fp32:16",
                         {}, target="sm_90a", stage="ptx")
    assert k.tile_ir.count(" = dot ") == 3, k.tile_ir
    assert "bf16" in k.ptx and ("wgmma" in k.ptx or "mma.sync" in k.ptx)


# ------------------------------------------------------------------------------------------------
# A run-time ternary whose two sides return nothing (test_if's if_exp_dynamic_void)
# ------------------------------------------------------------------------------------------------


@ww.jit
def void_ternary_kernel(Out, A, B):
    pid = tl.program_id(0)
    (tl.store(Out + pid, tl.load(A + pid)) if pid % 2 == 0 else tl.store(Out + pid, tl.load(B + pid)))


def test_ternary_of_two_void_calls_runs_one_of_them():
    a = np.arange(6, dtype=np.float32) + 10
    b = np.arange(6, dtype=np.float32) + 20
    out = np.zeros(6, dtype=np.float32)
    void_ternary_kernel[(6,)](out, a, b)
    np.testing.assert_array_equal(out, np.where(np.arange(6) % 2 == 0, a, b))


@ww.jit
def half_void_ternary_kernel(Out, A):
    pid = tl.program_id(0)
    x = tl.store(Out + pid, 1.0) if pid % 2 == 0 else tl.load(A + pid)
    tl.store(Out + pid, x)


def test_ternary_of_a_void_call_and_a_value_is_still_an_error():
    with pytest.raises(ww.CompilationError, match="must be a number or tensor, got None"):
        half_void_ternary_kernel[(2,)](np.zeros(2, np.float32), np.zeros(2, np.float32))


def test_void_ternary_compiles_for_the_gpu(tmp_path):
    src = """import warpweave as ww
import warpweave.language as tl


@ww.jit
def k(Out, A, B):
    pid = tl.program_id(0)
    tl.store(Out + pid, tl.load(A + pid)) if pid % 2 == 0 else tl.store(Out + pid, tl.load(B + pid))
"""
    path = tmp_path / "void_ternary.py"
    path.write_text(src)
    sig = "Out:*fp32:16,A:*fp32:16,B:*fp32:16"
    ptx = native().compile([(str(path), src)], "k", sig, {}, target="sm_90a", stage="ptx").ptx
    assert ptx.count("ld.global") == 2 and ptx.count("st.global") == 2
