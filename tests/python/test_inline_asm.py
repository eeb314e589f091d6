"""tl.inline_asm_elementwise (issue 17) with Triton's semantics: the arguments broadcast to one
shape, one result per dtype (a tuple for a tuple of dtypes), outputs first in the constraint
string, `pack` elements per asm instance with narrow elements packed into 32-bit registers. The
PTX of each kernel is checked and assembled by ptxas for sm_90a, sm_80 and sm_100a; the CPU
interpreter runs only a documented subset (mov, nanosleep) and names the statement it cannot run.
Constraint mistakes are errors at the call, with its location."""

import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

pytest.importorskip("warpweave._native")

TARGETS = [(90, "sm_90a"), (80, "sm_80"), (100, "sm_100a")]


def compile_for(kernel, signature, constexprs, cap, **options):
    from warpweave.backends.compiler import GPUTarget

    src = ww.compiler.ASTSource(kernel, signature=signature, constexprs=constexprs)
    return ww.compiler.compile(src, target=GPUTarget("cuda", cap, 32), options=options)


def asm_blocks(ptx):
    """The text between the inline asm markers, one string per asm instance."""
    return re.findall(r"// begin inline asm\n(.*?)// end inline asm", ptx, re.S)


@ww.jit
def rotate_left(x_ptr, out_ptr, BLOCK: tl.constexpr):
    # A funnel shift: rotate each word left by its index mod 32.
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    out = tl.inline_asm_elementwise("shf.l.wrap.b32 $0, $1, $1, $2;", "=r, r,r",
                                    [x, offs % 32], dtype=tl.uint32, is_pure=True, pack=1)
    tl.store(out_ptr + offs, out)


@pytest.mark.parametrize("cap,target", TARGETS)
def test_one_output_one_instance_per_element(cap, target):
    k = compile_for(rotate_left, {"x_ptr": "*u32", "out_ptr": "*u32"}, {"BLOCK": 256}, cap,
                    num_warps=4)
    ptx = k.asm["ptx"]
    assert f".target {target}" in ptx
    blocks = asm_blocks(ptx)
    assert len(blocks) == 2  # 256 elements over 128 threads
    for b in blocks:
        assert re.fullmatch(r"\s*\{\n\s*shf\.l\.wrap\.b32 %r\d+, %r\d+, %r\d+, %r\d+;\n\s*\}\n\s*",
                            b), b
    assert k.asm["cubin"], "ptxas rejected the kernel"


@ww.jit
def halves_and_sum(a_ptr, b_ptr, lo_ptr, hi_ptr, BLOCK: tl.constexpr):
    # Two results: (a + b) and (a - b), as int32 and uint32.
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    s, d = tl.inline_asm_elementwise(
        asm="""
        add.s32 $0, $2, $3;   // the sum
        sub.u32 $1, $2, $3;   // the difference
        """,
        constraints="=r,=r,r,r", args=(a, b), dtype=(tl.int32, tl.uint32), is_pure=True, pack=1)
    tl.store(lo_ptr + offs, s)
    tl.store(hi_ptr + offs, d)


@pytest.mark.parametrize("cap,target", TARGETS)
def test_a_tuple_of_dtypes_gives_a_tuple_of_results(cap, target):
    k = compile_for(halves_and_sum, {"a_ptr": "*i32", "b_ptr": "*i32", "lo_ptr": "*i32",
                                     "hi_ptr": "*u32"}, {"BLOCK": 128}, cap, num_warps=4)
    blocks = asm_blocks(k.asm["ptx"])
    assert len(blocks) == 1
    assert re.search(r"add\.s32 (%r\d+), (%r\d+), (%r\d+);.*\n\s*sub\.u32 (%r\d+), \2, \3;",
                     blocks[0]), blocks[0]
    assert "// the sum" in blocks[0]  # the user's comments stay in the asm
    assert k.asm["cubin"]


@ww.jit
def bytes_times_eight(x_ptr, y_ptr, BLOCK: tl.constexpr):
    # Four 8-bit values per 32-bit register: mask the top bits off, then shift each by 3.
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("and.b32 $0, $1, 0x1F1F1F1F;\nshl.b32 $0, $0, 3;", "=r,r",
                                  [x], dtype=tl.uint8, is_pure=True, pack=4)
    tl.store(y_ptr + offs, y)


@pytest.mark.parametrize("cap,target", TARGETS)
def test_pack_4_packs_bytes_into_one_register(cap, target):
    k = compile_for(bytes_times_eight, {"x_ptr": "*u8", "y_ptr": "*u8"}, {"BLOCK": 1024}, cap,
                    num_warps=4)
    ptx = k.asm["ptx"]
    blocks = asm_blocks(ptx)
    assert len(blocks) == 2  # 8 bytes a thread, 4 an instance
    body = ptx[ptx.index(".entry"):]
    assert body.count("bfi.b32") == 2 * 3 and body.count("bfe.u32") == 2 * 4
    assert k.asm["cubin"]


@ww.jit
def widen_pairs(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
    # Two fp16 values per register in, and an 8-bit value in a 32-bit register out.
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y, z = tl.inline_asm_elementwise(
        "mov.b32 $0, $2;\nmov.b32 $1, $2;\n", "=r,=r,r", [x], dtype=(tl.float16, tl.int16),
        is_pure=True, pack=2)
    tl.store(y_ptr + offs, y)
    tl.store(z_ptr + offs, z)


@pytest.mark.parametrize("cap,target", TARGETS)
def test_pack_2_of_16_bit_values(cap, target):
    k = compile_for(widen_pairs, {"x_ptr": "*fp16", "y_ptr": "*fp16", "z_ptr": "*i16"},
                    {"BLOCK": 256}, cap, num_warps=2)
    ptx = k.asm["ptx"]
    assert re.search(r"mov\.b32 %r\d+, \{%h\d+, %h\d+\};", ptx), ptx
    assert k.asm["cubin"]


@ww.jit
def copy_bytes_through_pointers(x_ptr, y_ptr, BLOCK: tl.constexpr):
    # Side effects only: the result is unused, and is_pure=False keeps the asm.
    offs = tl.arange(0, BLOCK)
    tl.inline_asm_elementwise("ld.global.u8 $0, [$1];\nst.global.u8 [$2], $0;", "=r,l,l",
                              [x_ptr + offs, y_ptr + offs], dtype=tl.int8, is_pure=False,
                              pack=1)


@pytest.mark.parametrize("cap,target", TARGETS)
def test_impure_asm_with_pointer_operands_is_kept(cap, target):
    k = compile_for(copy_bytes_through_pointers, {"x_ptr": "*i8", "y_ptr": "*i8"},
                    {"BLOCK": 128}, cap, num_warps=4)
    blocks = asm_blocks(k.asm["ptx"])
    assert len(blocks) == 1
    assert re.search(r"ld\.global\.u8 %r\d+, \[%rd\d+\];", blocks[0]), blocks[0]
    assert k.asm["cubin"]


@ww.jit
def pure_but_unused(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [tl.load(x_ptr + offs)],
                              dtype=tl.int32, is_pure=True, pack=1)


def test_pure_asm_whose_result_is_unused_is_removed():
    k = compile_for(pure_but_unused, {"x_ptr": "*i32"}, {"BLOCK": 128}, 90)
    assert not asm_blocks(k.asm["ptx"])


@ww.jit
def scalar_sleep(out_ptr):
    # No arguments: the result is a scalar, one instance per thread.
    t = tl.inline_asm_elementwise("nanosleep.u32 100; mov.u32 $0, 7;", "=r", [],
                                  dtype=tl.int32, is_pure=False, pack=1)
    tl.store(out_ptr + tl.program_id(0), t)


def test_no_arguments_give_a_scalar_result():
    k = compile_for(scalar_sleep, {"out_ptr": "*i32"}, {}, 90)
    assert len(asm_blocks(k.asm["ptx"])) == 1 and k.asm["cubin"]
    out = np.zeros(3, np.int32)
    scalar_sleep[(3,)](out)  # the interpreter's subset: nanosleep and mov
    np.testing.assert_array_equal(out, [7, 7, 7])


@ww.jit
def select_bits(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    a, b = tl.inline_asm_elementwise("mov.b32 $0, $3; mov.b32 $1, $2; // swap", "=r,=r,r,r",
                                     [x, y], dtype=(tl.int32, tl.float32), is_pure=True, pack=1)
    tl.store(out_ptr + offs, a + b.to(tl.int32, bitcast=True))


def test_the_interpreter_runs_moves_between_operands():
    x = np.arange(64, dtype=np.int32)
    y = np.arange(64, dtype=np.float32) * 0.5
    out = np.zeros(64, np.int32)
    select_bits[(1,)](x, y, out, BLOCK=64)
    np.testing.assert_array_equal(out, y.view(np.int32) + x)


def test_the_interpreter_names_the_statement_it_cannot_run():
    x = np.arange(64, dtype=np.uint32)
    with pytest.raises(ww.InterpreterError) as e:
        rotate_left[(1,)](x, np.zeros(64, np.uint32), BLOCK=64)
    msg = str(e.value)
    assert "test_inline_asm.py:" in msg and "the interpreter cannot run PTX" in msg, msg
    assert "'shf.l.wrap.b32 $0, $1, $1, $2'" in msg, msg


@ww.jit
def asm_with(x_ptr, ASM: tl.constexpr, CONSTRAINTS: tl.constexpr, PACK: tl.constexpr,
             BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr + tl.arange(0, BLOCK),
             tl.inline_asm_elementwise(ASM, CONSTRAINTS, [x], dtype=tl.int32, is_pure=True,
                                       pack=PACK))


@pytest.mark.parametrize("asm,constraints,pack,message", [
    ("mov.b32 $0, $1;", "=r,r,r", 1,
     "the constraints name 3 operands, but 1 result(s) and 1 argument(s) at pack=1 take 2"),
    ("mov.b64 $0, $1;", "=l,r", 1,
     "operand $0 is result 0 (int32), 32 bits: its constraint must be '=r or f', got '=l'"),
    ("mov.b32 $0, $2;", "=r,r", 1, "the asm names $2 but has 2 operands ($0..$1)"),
    ("mov.b32 $0, $1;", "=r,r", 3, "pack must be a power of two from 1 to 32, got 3"),
])
def test_constraint_mistakes_are_located_errors(asm, constraints, pack, message):
    with pytest.raises(ww.CompilationError) as e:
        compile_for(asm_with, {"x_ptr": "*i32"},
                    {"ASM": asm, "CONSTRAINTS": constraints, "PACK": pack, "BLOCK": 64}, 90)
    msg = str(e.value)
    assert message in msg, msg
    assert re.search(r"test_inline_asm\.py:\d+:\d+", msg), msg


# ---- the same kernels on the GPU (tests/gpu/test_inline_asm_gpu.py runs these) ----

def gpu_check_inline_asm():
    import torch

    x = torch.randint(0, 2**31, (256,), dtype=torch.int32, device="cuda")
    out = torch.zeros_like(x)
    rotate_left[(1,)](x, out, BLOCK=256)
    xs = x.cpu().numpy().view(np.uint32).astype(np.uint64)
    s = (np.arange(256) % 32).astype(np.uint64)
    want = ((xs << s) | (xs >> (32 - s))) & 0xFFFFFFFF  # 64-bit: s = 0 shifts x out whole
    np.testing.assert_array_equal(out.cpu().numpy().view(np.uint32), want.astype(np.uint32))

    a = torch.randint(-1000, 1000, (128,), dtype=torch.int32, device="cuda")
    b = torch.randint(-1000, 1000, (128,), dtype=torch.int32, device="cuda")
    lo, hi = torch.zeros_like(a), torch.zeros_like(a)
    halves_and_sum[(1,)](a, b, lo, hi, BLOCK=128)
    assert torch.equal(lo, a + b) and torch.equal(hi, a - b)

    u = torch.randint(0, 256, (1024,), dtype=torch.uint8, device="cuda")
    v = torch.zeros_like(u)
    bytes_times_eight[(1,)](u, v, BLOCK=1024)
    assert torch.equal(v, ((u & 0x1F) << 3).to(torch.uint8))

    h = torch.randn(256, dtype=torch.float16, device="cuda")
    y, z = torch.zeros_like(h), torch.zeros(256, dtype=torch.int16, device="cuda")
    widen_pairs[(1,)](h, y, z, BLOCK=256, num_warps=2)
    assert torch.equal(y, h) and torch.equal(z, h.view(torch.int16))

    p = torch.randint(-128, 128, (128,), dtype=torch.int8, device="cuda")
    q = torch.zeros_like(p)
    copy_bytes_through_pointers[(1,)](p, q, BLOCK=128)
    assert torch.equal(p, q)

    t = torch.zeros(3, dtype=torch.int32, device="cuda")
    scalar_sleep[(3,)](t)
    assert t.tolist() == [7, 7, 7]


@ww.jit
def fast_silu(x_ptr, out_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    half = x * 0.5
    t = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [half], dtype=tl.float32,
                                  is_pure=True, pack=1)
    tl.store(out_ptr + tl.arange(0, BLOCK), half * (1.0 + t))


def test_the_interpreter_runs_approx_functions():
    """tanh.approx.f32 (a SiLU as attention kernels write it): computed exactly, which is
    within the instruction's documented error of what the GPU gives."""
    x = np.linspace(-6, 6, 128, dtype=np.float32)
    out = np.zeros_like(x)
    fast_silu[(1,)](x, out, BLOCK=128)
    np.testing.assert_allclose(out, x / (1 + np.exp(-x.astype(np.float64))), rtol=1e-6,
                               atol=1e-6)


# TLX's paired-lane helpers as its tutorials write them: two fp32 elements a register pair,
# packed into 64 bits, one f32x2 instruction, unpacked.
FMA_F32X2 = """
{
    .reg .b64 ra, rb, rc, rd;
    mov.b64 ra, { $2, $3 };
    mov.b64 rb, { $4, $5 };
    mov.b64 rc, { $6, $7 };
    fma.rn.f32x2 rd, ra, rb, rc;
    mov.b64 { $0, $1 }, rd;
}
"""
SUB_THEN_EX2 = """
{
    .reg .f32 d;
    sub.ftz.f32 d, $1, $2;
    ex2.approx.ftz.f32 $0, d;
}
"""


@ww.jit
def paired_fma(a_ptr, b_ptr, c_ptr, out_ptr, ASM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    c = tl.load(c_ptr + offs)
    r = tl.inline_asm_elementwise(ASM, "=r,=r,r,r,r,r,r,r", [a, b, c], dtype=tl.float32,
                                  is_pure=True, pack=2)
    tl.store(out_ptr + offs, r)


@ww.jit
def exp_of_difference(a_ptr, m, out_ptr, ASM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    tl.store(out_ptr + offs, tl.inline_asm_elementwise(ASM, "=f,f,f", [a, m], dtype=tl.float32,
                                                       is_pure=True, pack=1))


def test_the_interpreter_runs_paired_lane_arithmetic():
    """pack=2: each instance takes two consecutive elements of every operand ($2 $3 of a, $4
    $5 of b, $6 $7 of c) and gives two of the result ($0 $1); each lane one fused multiply-add
    rounded once."""
    rng = np.random.default_rng(5)
    a, b, c = (rng.standard_normal(64).astype(np.float32) for _ in range(3))
    out = np.zeros(64, np.float32)
    paired_fma[(1,)](a, b, c, out, ASM=FMA_F32X2, BLOCK=64)
    exact = a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)
    np.testing.assert_array_equal(out, exact.astype(np.float32))


def test_the_interpreter_runs_reg_temporaries_and_a_scalar_operand():
    a = np.linspace(-3, 3, 32, dtype=np.float32)
    out = np.zeros_like(a)
    exp_of_difference[(1,)](a, 0.5, out, ASM=SUB_THEN_EX2, BLOCK=32)
    np.testing.assert_allclose(out, np.exp2(a.astype(np.float64) - 0.5), rtol=1e-6)


def test_the_interpreter_refuses_a_rounding_it_does_not_model():
    a = np.ones(32, np.float32)
    with pytest.raises(ww.InterpreterError) as e:
        exp_of_difference[(1,)](a, 0.5, np.zeros_like(a), ASM="add.rz.f32 $0, $1, $2;", BLOCK=32)
    assert "'add.rz.f32 $0, $1, $2'" in str(e.value), str(e.value)


@ww.jit
def unnamed_output(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("tanh.approx.f32, $1;", "=f,f", [x],  # MARK unnamed
                                  dtype=tl.float32, is_pure=True, pack=1)
    tl.store(out_ptr + offs, y)


def test_an_output_the_asm_never_names_is_an_error_at_the_string():
    # The fuzzer's mutant (seed 20261209, #9521): '$0' dropped from the asm, which ptxas then
    # refused as a syntax error in the PTX.
    with pytest.raises(ww.CompilationError) as e:
        compile_for(unnamed_output, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": 128}, 90)
    text = str(e.value)
    with open(__file__) as f:
        line = next(i for i, t in enumerate(f, 1) if "# MARK unnamed" in t)
    assert f"test_inline_asm.py:{line}:35: error: tl.inline_asm_elementwise: the asm string never " \
           f"names operand $0, result 0 (float32)" in text, text
