"""Kernel helpers that Triton writes as inline PTX (`triton.language.extra.cuda.inline_ptx_lib`),
written here as ordinary tile arithmetic with the same results (operands may be tensors or
numbers, as TLX's kernels pass compile-time constants): warpweave's code generator picks
the instructions (Triton's versions pack two fp32 lanes into Blackwell's f32x2 instructions, a
speed matter only). Kernel-callable @jit helpers."""

import warpweave.language as tl
from warpweave.jit import jit


@jit
def _mul_f32x2(a, b):
    """a * b in fp32, elementwise (each product rounded to nearest)."""
    return tl.cast(a, tl.float32) * tl.cast(b, tl.float32)


@jit
def _sub_f32x2(a, b):
    """a - b in fp32, elementwise."""
    return tl.cast(a, tl.float32) - tl.cast(b, tl.float32)


@jit
def _fma_f32x2(a, b, c):
    """a * b + c in fp32 with one rounding (fma.rn), elementwise."""
    return tl.fma(tl.cast(a, tl.float32), tl.cast(b, tl.float32), tl.cast(c, tl.float32))


@jit
def _reduce_fadd2(p0a, p1a, p0b, p1b):
    """(p0a + p0b, p1a + p1b) in fp32: two independent pairwise sums."""
    return (tl.cast(p0a, tl.float32) + tl.cast(p0b, tl.float32),
            tl.cast(p1a, tl.float32) + tl.cast(p1b, tl.float32))


@jit
def tanh_approx_fp32(x):
    """tanh(x) in fp32 to within the accuracy of PTX's tanh.approx.f32 (about 2**-11 relative):
    1 - 2 / (e**(2x) + 1), which saturates to +-1 for large |x| and keeps tanh(0) = 0."""
    e = tl.exp2(x.to(tl.float32) * 2.8853900817779268)  # 2 * log2(e)
    return 1.0 - 2.0 / (e + 1.0)
