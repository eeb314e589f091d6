"""TLX's inline-PTX helpers (language/extra/cuda/inline_ptx_lib.py): on sm_100a the paired ones
are fma.rn.f32x2 / mul.f32x2 / sub.f32x2 / add.f32x2 over two fp32 lanes packed in a 64-bit
register and tanh_approx_fp32 is tanh.approx.f32 (ptxas assembles them); on sm_90a / sm_80 the
paired ones are scalar fp32 instructions; in the interpreter each computes what the instructions
compute (the paired ones rounded as they round, tanh within tanh.approx's error), checked
against NumPy on random and edge values. Also tl.target_info, which chooses between them."""

import math
import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave.language.extra.cuda.inline_ptx_lib import (_fma_f32x2, _mul_f32x2, _reduce_fadd2,
                                                          _sub_f32x2, tanh_approx_fp32)
from warpweave.language.target_info import cuda_capability_geq, is_cuda

pytest.importorskip("warpweave._native")

F32 = np.float32
BLOCK = 1024  # 4 warps: 8 elements a thread, so 4 paired instances


@ww.jit
def fma_kernel(A, B, C, Out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Out + offs, _fma_f32x2(tl.load(A + offs), tl.load(B + offs), tl.load(C + offs)))


@ww.jit
def mul_kernel(A, B, Out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Out + offs, _mul_f32x2(tl.load(A + offs), tl.load(B + offs)))


@ww.jit
def sub_kernel(A, B, Out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Out + offs, _sub_f32x2(tl.load(A + offs), tl.load(B + offs)))


@ww.jit
def reduce_kernel(A, B, C, D, Out0, Out1, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    s0, s1 = _reduce_fadd2(tl.load(A + offs), tl.load(B + offs), tl.load(C + offs),
                           tl.load(D + offs))
    tl.store(Out0 + offs, s0)
    tl.store(Out1 + offs, s1)


@ww.jit
def tanh_kernel(X, Out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Out + offs, tanh_approx_fp32(tl.load(X + offs)))


@ww.jit
def softmax_step(S, M, Out, scale, ROWS: tl.constexpr, COLS: tl.constexpr):
    # The attention tutorials' forms: a run-time scalar, a row vector broadcast along the
    # columns, a compile-time constant, and one helper's result feeding the next.
    rows = tl.arange(0, ROWS)
    cols = tl.arange(0, COLS)
    s = tl.load(S + rows[:, None] * COLS + cols[None, :])
    m = tl.load(M + rows)
    qk = _fma_f32x2(s, scale, -m[:, None])
    qk = _mul_f32x2(qk, 0.5)
    tl.store(Out + rows[:, None] * COLS + cols[None, :], qk)


@ww.jit
def capability_kernel(Out):
    # One bit per query, folded at compile time into the one value stored.
    bits = (cuda_capability_geq(10, 0) * 1 + cuda_capability_geq(9) * 2 +
            cuda_capability_geq(8, 0) * 4 + is_cuda() * 8 +
            tl.target_info.cuda_capability_geq(9, 0) * 16 + tl.target_info.is_hip() * 32)
    tl.store(Out, bits + 64)


def compile_ptx(kernel, args, constexprs, target):
    c = kernel.compile_for(kernel.bind(args, constexprs), False, kernel._options(4, 3, None, None),
                           target=target)
    assert c.asm["cubin"], f"ptxas rejected the kernel for {target}"
    return c.asm["ptx"]


def asm_blocks(ptx):
    return re.findall(r"// begin inline asm\n(.*?)// end inline asm", ptx, re.S)


def vec(n=BLOCK):
    return np.zeros(n, F32)


HELPERS = [
    (fma_kernel, lambda: (vec(), vec(), vec(), vec()), "fma.rn.f32x2", "fma.rn.f32"),
    (mul_kernel, lambda: (vec(), vec(), vec()), "mul.f32x2", "mul.f32"),
    (sub_kernel, lambda: (vec(), vec(), vec()), "sub.f32x2", "sub.f32"),
    (reduce_kernel, lambda: tuple(vec() for _ in range(6)), "add.f32x2", "add.f32"),
]


@pytest.mark.parametrize("kernel,args,paired,scalar", HELPERS, ids=lambda h: getattr(h, "__name__", ""))
def test_paired_instruction_on_sm100a(requires_ptxas, kernel, args, paired, scalar):
    ptx = compile_ptx(kernel, args(), {"BLOCK": BLOCK}, "sm_100a")
    blocks = asm_blocks(ptx)
    # One instance per pair of a thread's elements (the reduction: per element, two sums each).
    assert len(blocks) == (8 if kernel is reduce_kernel else 4), blocks
    for text in blocks:
        assert re.search(rf"\b{re.escape(paired)} %\w+, %\w+, %\w+", text), text
        assert len(re.findall(r"mov\.b64 %\w+, \{%f\d+, %f\d+\};", text)) == (
            3 if kernel is fma_kernel else 2), text
        assert re.search(r"mov\.b64 \{%f\d+, %f\d+\}, %\w+;", text), text
    # The fp32 operands go in as they are: no copies into 32-bit integer registers.
    assert "mov.b32" not in ptx


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("kernel,args,paired,scalar", HELPERS, ids=lambda h: getattr(h, "__name__", ""))
def test_scalar_fallback_without_f32x2(requires_ptxas, target, kernel, args, paired, scalar):
    ptx = compile_ptx(kernel, args(), {"BLOCK": BLOCK}, target)
    assert "f32x2" not in ptx and not asm_blocks(ptx)
    assert len(re.findall(rf"\b{re.escape(scalar)} ", ptx)) == 8 * (2 if kernel is reduce_kernel
                                                                     else 1)


@pytest.mark.parametrize("target", ["sm_100a", "sm_90a", "sm_80"])
def test_tanh_is_tanh_approx_on_every_target(requires_ptxas, target):
    ptx = compile_ptx(tanh_kernel, (vec(), vec()), {"BLOCK": BLOCK}, target)
    blocks = asm_blocks(ptx)
    assert len(blocks) == 8 and all(re.search(r"tanh\.approx\.f32 %f\d+, %f\d+;", b)
                                    for b in blocks)


def test_broadcast_and_constant_operands_on_sm100a(requires_ptxas):
    args = (np.zeros((128, 64), F32), vec(128), np.zeros((128, 64), F32), 1.0)
    ptx = compile_ptx(softmax_step, args, {"ROWS": 128, "COLS": 64}, "sm_100a")
    blocks = asm_blocks(ptx)
    assert sum("fma.rn.f32x2" in b for b in blocks) == 32
    assert sum("mul.f32x2" in b for b in blocks) == 32
    # A scalar fills both lanes of its register; the mul's input is the fma's output register.
    assert any(re.search(r"mov\.b64 %\w+, \{(%f\d+), \1\};", b) for b in blocks)
    assert "mov.b32" not in ptx


@pytest.mark.parametrize("target,expect", [("sm_100a", 0b011111), ("sm_90a", 0b011110),
                                           ("sm_80", 0b001100)])
def test_target_info_answers_for_the_compile_target(requires_ptxas, target, expect):
    ptx = compile_ptx(capability_kernel, (np.zeros(1, np.int32), ), {}, target)
    assert re.search(rf"\b{expect + 64};", ptx), ptx


def test_target_info_is_false_in_the_interpreter():
    out = np.zeros(1, np.int32)
    capability_kernel[(1, )](out)
    assert out.tolist() == [64]


# ---- the interpreter against NumPy ----


def random_f32(rng, n=BLOCK, scale=100.0):
    return (rng.standard_normal(n) * scale).astype(F32)


def exact_fma_f32(a, b, c):
    """a * b + c rounded once to fp32 (fp32 products are exact in float64; the sum is rounded to
    float64 and then fp32 only where that cannot round twice, which the caller's inputs avoid)."""
    from fractions import Fraction

    out = np.empty_like(a)
    for i, (x, y, z) in enumerate(zip(a.tolist(), b.tolist(), c.tolist())):
        if not all(map(math.isfinite, (x, y, z))):
            with np.errstate(invalid="ignore"):
                out[i] = F32(np.float64(x) * np.float64(y) + np.float64(z))
            continue
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        lo = F32(float(exact))  # within one fp32 ulp; pick the nearer neighbour (ties to even)
        cands = [np.nextafter(lo, F32(-np.inf)), lo, np.nextafter(lo, F32(np.inf))]
        errs = [abs(Fraction(float(v)) - exact) if np.isfinite(v) else math.inf for v in cands]
        best = min(errs)
        ties = [v for v, e in zip(cands, errs) if e == best]
        out[i] = ties[0] if len(ties) == 1 else next(v for v in ties
                                                     if (v.view(np.uint32) & 1) == 0)
    return out


def test_fma_rounds_once(rng):
    a, b, c = (random_f32(rng) for _ in range(3))
    # Where a product's rounding matters: (1 + 2**-12)**2 - (1 + 2**-11) is 2**-24 exactly,
    # but 0 after a rounded multiply.
    a[:4] = b[:4] = F32(1 + 2**-12)
    c[:4] = F32(-(1 + 2**-11))
    a[4:8] = [np.inf, -np.inf, np.nan, 0.0]
    b[4:8] = [2.0, 0.0, 1.0, np.inf]
    c[4:8] = [1.0, 1.0, 1.0, 1.0]
    out = vec()
    fma_kernel[(1, )](a, b, c, out, BLOCK=BLOCK)
    assert out[0] == F32(2**-24)
    ref = exact_fma_f32(a, b, c)
    np.testing.assert_array_equal(out[8:], ref[8:])
    assert out[4] == np.inf and np.isnan(out[5:8]).all()


def test_mul_sub_and_paired_sums_are_rounded_fp32_ops(rng):
    a, b, c, d = (random_f32(rng) for _ in range(4))
    a[:4] = [np.inf, -0.0, np.nan, 3e38]
    b[:4] = [0.0, 5.0, 1.0, 10.0]
    out = vec()
    mul_kernel[(1, )](a, b, out, BLOCK=BLOCK)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out, a * b)
    assert np.signbit(out[1]) and out[3] == np.inf
    sub_kernel[(1, )](a, b, out, BLOCK=BLOCK)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out, a - b)
    s0, s1 = vec(), vec()
    reduce_kernel[(1, )](a, b, c, d, s0, s1, BLOCK=BLOCK)
    # (p0a, p1a, p0b, p1b) -> (p0a + p0b, p1a + p1b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(s0, a + c)
        np.testing.assert_array_equal(s1, b + d)


def test_tanh_within_tanh_approx_error(rng):
    x = np.concatenate([
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-42, 9.0, -9.0, 20.0,
                  -20.0, 1e30, -1e30, 3.4e38, -3.4e38, 0.5, 1e-4], F32),
        (rng.standard_normal(BLOCK - 18) * 3).astype(F32)
    ])
    out = vec()
    tanh_kernel[(1, )](x, out, BLOCK=BLOCK)
    ref = np.tanh(x.astype(np.float64))
    finite = np.isfinite(ref)
    assert (np.abs(out[finite] - ref[finite]) <= 2.0**-11 * np.abs(ref[finite])).all()
    assert np.isnan(out[4])
    assert out[2] == 1 and out[3] == -1 and out[10] == 1 and out[11] == -1
    assert (out[12:16] == [1, -1, 1, -1]).all()
    assert out[0] == 0 and not np.signbit(out[0]) and np.signbit(out[1])
    assert out[5] == F32(1e-30) and out[7] == F32(1e-42)  # tiny and subnormal: tanh(x) = x


def test_attention_forms_in_the_interpreter(rng):
    s = random_f32(rng, 128 * 64, 4.0).reshape(128, 64)
    m = random_f32(rng, 128, 4.0)
    out = np.zeros_like(s)
    softmax_step[(1, )](s, m, out, 1.4426950408889634, ROWS=128, COLS=64)
    ref = exact_fma_f32(s.ravel(), np.full(s.size, F32(1.4426950408889634)),
                        np.repeat(-m, 64)).reshape(128, 64) * F32(0.5)
    np.testing.assert_array_equal(out, ref)


# ---- codegen: fp32 values through `r` operands ----


@ww.jit
def chained_r_asm(X, Out, BLOCK: tl.constexpr):
    # Two asm statements with 32-bit integer operands on fp32 values, the second reading the
    # first's result: each fp32 <-> b32 copy is needed once, not back and forth.
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    y = tl.inline_asm_elementwise("add.f32 $0, $1, $1;", "=r,r", [x], dtype=tl.float32,
                                  is_pure=True, pack=1)
    z = tl.inline_asm_elementwise("mul.f32 $0, $1, $2;", "=r,r,r", [y, x], dtype=tl.float32,
                                  is_pure=True, pack=1)
    tl.store(Out + offs, z)


def test_r_operands_of_fp32_reuse_the_asm_registers(requires_ptxas):
    ptx = compile_ptx(chained_r_asm, (vec(256), vec(256)), {"BLOCK": 256}, "sm_100a")
    blocks = asm_blocks(ptx)
    assert len(blocks) == 4  # 2 elements a thread, 2 statements each
    firsts = [re.search(r"add\.f32 (%r\d+), (%r\d+), \2;", b) for b in blocks[:2]]
    seconds = [re.search(r"mul\.f32 %r\d+, (%r\d+), (%r\d+);", b) for b in blocks[2:]]
    assert all(firsts) and all(seconds), blocks
    # y goes into the second asm in the first asm's own output register, and x in the register
    # it was copied into for the first: no fp32 <-> b32 round trip.
    assert [m.group(1) for m in seconds] == [m.group(1) for m in firsts]
    assert [m.group(2) for m in seconds] == [m.group(2) for m in firsts]
    assert len(re.findall(r"mov\.b32 %r\d+, %f\d+;", ptx)) == 2


# ---- layout: a constant first operand takes the tensor operand's layout ----


@ww.jit
def row_sums_after_fma(A, B, Out, CONSTANT_FIRST: tl.constexpr):
    rows = tl.arange(0, 64)
    k = tl.arange(0, 32)
    a = tl.load(A + rows[:, None] * 32 + k[None, :])
    b = tl.load(B + k[:, None] * 64 + rows[None, :])
    acc = tl.dot(a, b)  # an MMA layout, not the natural one
    if CONSTANT_FIRST:
        y = _fma_f32x2(2.0, acc, 1.0)
    else:
        y = _fma_f32x2(acc, 2.0, 1.0)
    tl.store(Out + rows, tl.sum(y, 1))


def test_constant_first_operand_does_not_convert_the_tensor(requires_ptxas):
    args = (np.zeros((64, 32), np.float16), np.zeros((32, 64), np.float16), vec(64))
    shared = []
    for first in (True, False):
        k = row_sums_after_fma.compile_for(row_sums_after_fma.bind(args, {"CONSTANT_FIRST": first}),
                                           False, row_sums_after_fma._options(4, 3, None, None),
                                           target="sm_100a")
        assert k.asm["cubin"] and "fma.rn.f32x2" in k.asm["ptx"]
        shared.append(k.shared)
    assert shared[0] == shared[1], shared
