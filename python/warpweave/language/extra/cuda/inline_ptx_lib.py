"""Kernel helpers that TLX writes as inline PTX (`triton.language.extra.cuda.inline_ptx_lib`).

Compiled for sm_100a (capability 10.0 and newer) the paired helpers are one Blackwell packed
instruction for every two elements a thread holds: the two fp32 lanes travel in one 64-bit
register (`mov.b64 {lo, hi}`), element k of the pair in bits 32k..32k+31, and
`fma.rn.f32x2` / `mul.f32x2` / `sub.f32x2` / `add.f32x2` compute both lanes at once. Each lane's
result is the scalar instruction's: fma rounds once to nearest even; mul / sub / add round to
nearest even and, having no rounding suffix, may be contracted by ptxas into an fma with a
neighbouring add, as the scalar `*` / `+` of a kernel may. `tanh_approx_fp32` is `tanh.approx.f32`
on every CUDA target (sm_75 and newer have it).

On sm_90a / sm_80 (no f32x2 instructions) the paired helpers are the same arithmetic one element
at a time, and in the interpreter (no CUDA target: `target_info` answers False there) every
helper is plain tile arithmetic: the paired ones exactly as the instructions round,
`tanh_approx_fp32` as tl's tanh, which lies within tanh.approx.f32's documented error (about
2**-11 relative) of it. Operands may be tensors or numbers (TLX passes compile-time constants);
they are converted to fp32 first. Kernel-callable @jit helpers."""

import warpweave.language as tl
from warpweave.jit import jit
from warpweave.language.target_info import cuda_capability_geq, is_cuda

# The paired helpers run two elements per asm instance ($0 / $1 the results, then two
# registers per argument): each argument's pair is packed into one 64-bit register, the first
# element in the low half, and the packed result is split back the same way. The braces keep the
# .reg names local to the instance.


@jit
def _mul_f32x2(a, b):
    """a * b in fp32, elementwise (each product rounded to nearest even); mul.f32x2 on sm_100a."""
    a = tl.cast(a, tl.float32)
    b = tl.cast(b, tl.float32)
    if cuda_capability_geq(10, 0):
        return tl.inline_asm_elementwise(
            "{\n.reg .b64 %lhs, %rhs, %out;\nmov.b64 %lhs, {$2, $3};\nmov.b64 %rhs, {$4, $5};\n"
            "mul.f32x2 %out, %lhs, %rhs;\nmov.b64 {$0, $1}, %out;\n}",
            "=f,=f,f,f,f,f", [a, b], dtype=tl.float32, is_pure=True, pack=2)
    else:
        return a * b


@jit
def _sub_f32x2(a, b):
    """a - b in fp32, elementwise; sub.f32x2 on sm_100a."""
    a = tl.cast(a, tl.float32)
    b = tl.cast(b, tl.float32)
    if cuda_capability_geq(10, 0):
        return tl.inline_asm_elementwise(
            "{\n.reg .b64 %lhs, %rhs, %out;\nmov.b64 %lhs, {$2, $3};\nmov.b64 %rhs, {$4, $5};\n"
            "sub.f32x2 %out, %lhs, %rhs;\nmov.b64 {$0, $1}, %out;\n}",
            "=f,=f,f,f,f,f", [a, b], dtype=tl.float32, is_pure=True, pack=2)
    else:
        return a - b


@jit
def _fma_f32x2(a, b, c):
    """a * b + c in fp32 with one rounding to nearest even, elementwise; fma.rn.f32x2 on sm_100a."""
    a = tl.cast(a, tl.float32)
    b = tl.cast(b, tl.float32)
    c = tl.cast(c, tl.float32)
    if cuda_capability_geq(10, 0):
        return tl.inline_asm_elementwise(
            "{\n.reg .b64 %mul0, %mul1, %addend, %out;\nmov.b64 %mul0, {$2, $3};\n"
            "mov.b64 %mul1, {$4, $5};\nmov.b64 %addend, {$6, $7};\n"
            "fma.rn.f32x2 %out, %mul0, %mul1, %addend;\nmov.b64 {$0, $1}, %out;\n}",
            "=f,=f,f,f,f,f,f,f", [a, b, c], dtype=tl.float32, is_pure=True, pack=2)
    else:
        return tl.fma(a, b, c)


@jit
def _reduce_fadd2(p0a, p1a, p0b, p1b):
    """(p0a + p0b, p1a + p1b) in fp32: two independent sums, one add.f32x2 on sm_100a (the
    first sum in the low lane)."""
    p0a = tl.cast(p0a, tl.float32)
    p1a = tl.cast(p1a, tl.float32)
    p0b = tl.cast(p0b, tl.float32)
    p1b = tl.cast(p1b, tl.float32)
    if cuda_capability_geq(10, 0):
        return tl.inline_asm_elementwise(
            "{\n.reg .b64 %firsts, %seconds, %sums;\nmov.b64 %firsts, {$2, $3};\n"
            "mov.b64 %seconds, {$4, $5};\nadd.f32x2 %sums, %firsts, %seconds;\n"
            "mov.b64 {$0, $1}, %sums;\n}",
            "=f,=f,f,f,f,f", [p0a, p1a, p0b, p1b], dtype=(tl.float32, tl.float32), is_pure=True,
            pack=1)
    else:
        return p0a + p0b, p1a + p1b


@jit
def tanh_approx_fp32(x):
    """tanh(x) in fp32 by tanh.approx.f32 (about 2**-11 relative error; +-inf give +-1, NaN
    stays NaN, -0 stays -0); tl's tanh in the interpreter."""
    x = tl.cast(x, tl.float32)
    if is_cuda():
        return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [x], dtype=tl.float32,
                                         is_pure=True, pack=1)
    else:
        return tl.tanh(x)
