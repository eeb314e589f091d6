"""tl.dot_scaled (issue 17) with Triton's semantics, checked against a NumPy model of the formats:
e2m1 packed two to a byte (low nibble first, along K or along M / N), e4m3 and e5m2 as uint8 or
float8, bf16 / fp16, e8m0 scales (one uint8 exponent 2^(s-127) per 32 elements of K, 0xFF a NaN),
the operands rounded to fp16 (either format fp16) or bf16 and multiplied in fp32. Runs in the
interpreter and compiles for sm_90a and sm_80 (ptxas accepts the result). Also tl.dot with M, N or
K below 16: any size in the interpreter (as Triton's), K down to Triton's NVIDIA minimum when
compiled, a located error below it."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")

FORMATS = ["e2m1", "e4m3", "e5m2", "bf16", "fp16"]
MX = {"e2m1", "e4m3", "e5m2"}
TARGETS = [(90, "sm_90a"), (80, "sm_80")]


# ---- NumPy model of the formats -----------------------------------------------------------

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def decode_e2m1(nibbles):
    n = nibbles.astype(np.int64)
    return E2M1[n & 7] * np.where(n & 8, -1.0, 1.0)


def decode_fp8(x, exp_bits, man_bits):
    x = x.astype(np.int64)
    bias = (1 << (exp_bits - 1)) - 1
    sign = np.where(x & 0x80, -1.0, 1.0)
    e = (x >> man_bits) & ((1 << exp_bits) - 1)
    m = x & ((1 << man_bits) - 1)
    frac = m / float(1 << man_bits)
    normal = (1.0 + frac) * np.exp2(e - bias)
    sub = frac * np.exp2(1 - bias)
    return sign * np.where(e == 0, sub, normal)


def round_bf16(x):
    """float64 -> the nearest bfloat16 (ties to even), as float64."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def unpack(packed, axis):
    """Two e2m1 values per byte, the first in the low nibble, along `axis`."""
    both = np.stack([packed & 0xF, packed >> 4], axis=axis + 1)
    shape = list(packed.shape)
    shape[axis] *= 2
    return both.reshape(shape)


def values(x, fmt, axis):
    if fmt == "e2m1":
        return decode_e2m1(unpack(x, axis))
    if fmt == "e4m3":
        return decode_fp8(x, 4, 3)
    if fmt == "e5m2":
        return decode_fp8(x, 5, 2)
    if fmt == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def reference(a, sa, fa, b, sb, fb, a_axis=1, b_axis=0):
    av = values(a, fa, a_axis)
    bv = values(b, fb, b_axis)
    if sa is not None:
        av = av * np.repeat(np.exp2(sa.astype(np.float64) - 127), 32, axis=1)
    if sb is not None:
        bv = bv * np.repeat(np.exp2(sb.astype(np.float64) - 127), 32, axis=1).T
    fp16 = "fp16" in (fa, fb)
    rnd = (lambda v: v.astype(np.float16).astype(np.float64)) if fp16 else round_bf16
    av, bv = rnd(av), rnd(bv)
    return av @ bv, np.abs(av) @ np.abs(bv)


def make(rng, fmt, shape, fp16):
    """Random bits of `fmt` (fp4 packed, so `shape` is the stored one), finite, and small enough
    that scaled values stay finite in fp16 when the product is computed in fp16."""
    if fmt == "fp16":
        return rng.uniform(-4, 4, shape).astype(np.float16)
    if fmt == "bf16":
        return (rng.uniform(-4, 4, shape).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    if fmt == "e4m3":
        x = np.where((x & 0x7F) == 0x7F, x ^ 1, x).astype(np.uint8)  # 0x7F is NaN
    if fmt == "e5m2":
        x = np.where((x & 0x7C) == 0x7C, x & ~np.uint8(0x40), x).astype(np.uint8)  # inf / NaN
        if fp16:
            x &= 0xBF  # below 2^0 so that the scale cannot overflow fp16
    return x


def check(out, ref, mag, K):
    # fp32 accumulation of exact products: the error of K additions.
    bound = 2.0 * K * 2.0**-24 * mag + 1e-30
    assert np.all(np.abs(out - ref) <= bound), np.max(np.abs(out - ref) - bound)


# ---- kernels -----------------------------------------------------------------------------------


@ww.jit
def load2d(ptr, R: tl.constexpr, C: tl.constexpr):
    return tl.load(ptr + tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :])


@ww.jit
def scaled_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, out_ptr, M: tl.constexpr,
                  N: tl.constexpr, K: tl.constexpr, FA: tl.constexpr, FB: tl.constexpr,
                  SCALE_A: tl.constexpr, SCALE_B: tl.constexpr, A_K_PACK: tl.constexpr,
                  B_K_PACK: tl.constexpr, FAST: tl.constexpr):
    # Stored tile shapes: fp4 halves the packed dimension.
    A_ROWS: tl.constexpr = M // 2 if FA == "e2m1" and not A_K_PACK else M
    A_COLS: tl.constexpr = K // 2 if FA == "e2m1" and A_K_PACK else K
    B_ROWS: tl.constexpr = K // 2 if FB == "e2m1" and B_K_PACK else K
    B_COLS: tl.constexpr = N // 2 if FB == "e2m1" and not B_K_PACK else N
    a = load2d(a_ptr, A_ROWS, A_COLS)
    b = load2d(b_ptr, B_ROWS, B_COLS)
    sa = None
    sb = None
    if SCALE_A:
        sa = load2d(a_scale_ptr, M, K // 32)
    if SCALE_B:
        sb = load2d(b_scale_ptr, N, K // 32)
    c = tl.dot_scaled(a, sa, FA, b, sb, FB, fast_math=FAST, lhs_k_pack=A_K_PACK,
                      rhs_k_pack=B_K_PACK)
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


def run_scaled(fa, fb, M=32, N=32, K=64, scale_a=None, scale_b=None, a_k_pack=True, b_k_pack=True,
               seed=0, fast=False):
    rng = np.random.default_rng(seed)
    fp16 = "fp16" in (fa, fb)
    scale_a = fa in MX if scale_a is None else scale_a
    scale_b = fb in MX if scale_b is None else scale_b
    a_shape = (M // 2, K) if fa == "e2m1" and not a_k_pack else (M, K // 2 if fa == "e2m1" else K)
    b_shape = (K, N // 2) if fb == "e2m1" and not b_k_pack else (K // 2 if fb == "e2m1" else K, N)
    a = make(rng, fa, a_shape, fp16)
    b = make(rng, fb, b_shape, fp16)
    lo, hi = (122, 130) if fp16 else (100, 150)
    sa = rng.integers(lo, hi, (M, K // 32), dtype=np.uint8)
    sb = rng.integers(lo, hi, (N, K // 32), dtype=np.uint8)
    out = np.zeros((M, N), np.float32)
    scaled_kernel[(1,)](a, sa, b, sb, out, M=M, N=N, K=K, FA=fa, FB=fb, SCALE_A=scale_a,
                        SCALE_B=scale_b, A_K_PACK=a_k_pack, B_K_PACK=b_k_pack, FAST=fast)
    ref, mag = reference(a, sa if scale_a else None, fa, b, sb if scale_b else None, fb,
                         a_axis=1 if a_k_pack else 0, b_axis=0 if b_k_pack else 1)
    return out, ref, mag, (a, sa, b, sb)


# ---- interpreter -------------------------------------------------------------------------------


@pytest.mark.parametrize("fa", FORMATS)
@pytest.mark.parametrize("fb", FORMATS)
def test_format_pairs_match_numpy(fa, fb):
    out, ref, mag, _ = run_scaled(fa, fb)
    assert np.isfinite(ref).all()
    check(out, ref, mag, 64)


@pytest.mark.parametrize("fa,fb", [("e2m1", "e2m1"), ("e4m3", "fp16"), ("bf16", "e5m2")])
@pytest.mark.parametrize("scale_a,scale_b", [(False, False), (True, False), (False, True)])
def test_scales_are_optional(fa, fb, scale_a, scale_b):
    out, ref, mag, _ = run_scaled(fa, fb, scale_a=scale_a, scale_b=scale_b, seed=3)
    check(out, ref, mag, 64)


@pytest.mark.parametrize("a_k_pack,b_k_pack", [(False, True), (True, False), (False, False)])
def test_fp4_packed_along_m_or_n(a_k_pack, b_k_pack):
    out, ref, mag, _ = run_scaled("e2m1", "e2m1", M=16, N=32, K=64, a_k_pack=a_k_pack,
                                  b_k_pack=b_k_pack, seed=5)
    check(out, ref, mag, 64)


def test_fp4_nibble_order_low_first():
    # One byte 0x61: its low nibble (1 = 0.5) is element k = 0, its high nibble (6 = 4.0) k = 1.
    M, N, K = 16, 16, 32
    a = np.zeros((M, K // 2), np.uint8)
    a[:, 0] = 0x61
    b = np.zeros((K, N), np.float16)
    b[0, :] = 1.0
    b[1, :] = 100.0
    sa = np.full((M, 1), 127, np.uint8)
    out = np.zeros((M, N), np.float32)
    scaled_kernel[(1,)](a, sa, b, sa, out, M=M, N=N, K=K, FA="e2m1", FB="fp16", SCALE_A=True,
                        SCALE_B=False, A_K_PACK=True, B_K_PACK=True, FAST=False)
    np.testing.assert_array_equal(out, np.full((M, N), 0.5 + 400.0, np.float32))


def test_e8m0_scale_ff_is_nan_unless_fast_math():
    M, N, K = 16, 16, 64
    a = np.full((M, K), 0x38, np.uint8)  # e4m3 1.0
    b = np.ones((K, N), np.float16)
    sa = np.full((M, K // 32), 127, np.uint8)
    sa[3, 1] = 0xFF
    sa[5, 0] = 128  # 2.0
    out = np.zeros((M, N), np.float32)
    scaled_kernel[(1,)](a, sa, b, sa, out, M=M, N=N, K=K, FA="e4m3", FB="fp16", SCALE_A=True,
                        SCALE_B=False, A_K_PACK=True, B_K_PACK=True, FAST=False)
    assert np.isnan(out[3]).all()
    np.testing.assert_array_equal(out[5], np.full(N, 96.0, np.float32))
    np.testing.assert_array_equal(np.delete(out, [3, 5], axis=0), 64.0)


@pytest.mark.parametrize("fmt,exp_bits,man_bits,special",
                         [("e4m3", 4, 3, lambda x: (x & 0x7F) == 0x7F),
                          ("e5m2", 5, 2, lambda x: (x & 0x7C) == 0x7C)])
def test_every_fp8_value_decodes_exactly(fmt, exp_bits, man_bits, special):
    # All 256 bit patterns times the identity: each output is one decoded value (subnormals
    # and the largest values included); a NaN / infinity turns its row non-finite.
    bits = np.arange(256, dtype=np.uint8)
    finite = np.where(special(bits), 0, bits).astype(np.uint8).reshape(8, 32)
    eye = np.eye(32, dtype=np.float16)
    out = np.zeros((8, 32), np.float32)
    scaled_kernel[(1,)](finite, finite, eye, finite, out, M=8, N=32, K=32, FA=fmt, FB="fp16",
                        SCALE_A=False, SCALE_B=False, A_K_PACK=True, B_K_PACK=True, FAST=False)
    np.testing.assert_array_equal(out, decode_fp8(finite, exp_bits, man_bits))
    for b in bits[special(bits)]:
        row = np.zeros((8, 32), np.uint8)
        row[0, 0] = b
        scaled_kernel[(1,)](row, row, eye, row, out, M=8, N=32, K=32, FA=fmt, FB="fp16",
                            SCALE_A=False, SCALE_B=False, A_K_PACK=True, B_K_PACK=True,
                            FAST=False)
        if fmt == "e5m2" and (b & 3) == 0:
            assert out[0, 0] == (-np.inf if b & 0x80 else np.inf)
        else:
            assert np.isnan(out[0, 0])


@ww.jit
def fp8_typed_kernel(a_ptr, b_ptr, sb_ptr, acc_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr,
                     K: tl.constexpr):
    # Operands given as float8 tensors (not uint8 bits), an accumulator added.
    a = load2d(a_ptr, M, K).to(tl.float8e5, bitcast=True)
    b = load2d(b_ptr, K, N).to(tl.float8e4nv, bitcast=True)
    acc = load2d(acc_ptr, M, N)
    c = tl.dot_scaled(a, None, "e5m2", b, load2d(sb_ptr, N, K // 32), "e4m3", acc=acc)
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


def test_float8_typed_operands_and_accumulator():
    rng = np.random.default_rng(7)
    M, N, K = 16, 32, 64
    a = make(rng, "e5m2", (M, K), False)
    b = make(rng, "e4m3", (K, N), False)
    sb = rng.integers(120, 135, (N, K // 32), dtype=np.uint8)
    acc = rng.standard_normal((M, N)).astype(np.float32)
    out = np.zeros((M, N), np.float32)
    fp8_typed_kernel[(1,)](a, b, sb, acc, out, M=M, N=N, K=K)
    ref, mag = reference(a, None, "e5m2", b, sb, "e4m3")
    check(out, ref + acc, mag + np.abs(acc), K + 1)


@ww.jit
def batched_kernel(a_ptr, sa_ptr, b_ptr, out_ptr, B: tl.constexpr, M: tl.constexpr,
                   N: tl.constexpr, K: tl.constexpr):
    z = tl.arange(0, B)[:, None, None]
    a = tl.load(a_ptr + z * (M * K // 2) + tl.arange(0, M)[None, :, None] * (K // 2) +
                tl.arange(0, K // 2)[None, None, :])
    sa = tl.load(sa_ptr + z * (M * K // 32) + tl.arange(0, M)[None, :, None] * (K // 32) +
                 tl.arange(0, K // 32)[None, None, :])
    b = tl.load(b_ptr + z * (K * N) + tl.arange(0, K)[None, :, None] * N +
                tl.arange(0, N)[None, None, :])
    c = tl.dot_scaled(a, sa, "e2m1", b, None, "bf16")
    tl.store(out_ptr + z * (M * N) + tl.arange(0, M)[None, :, None] * N +
             tl.arange(0, N)[None, None, :], c)


def test_batched_3d():
    rng = np.random.default_rng(11)
    B, M, N, K = 2, 16, 16, 64
    a = make(rng, "e2m1", (B, M, K // 2), False)
    sa = rng.integers(110, 140, (B, M, K // 32), dtype=np.uint8)
    b = make(rng, "bf16", (B, K, N), False)
    out = np.zeros((B, M, N), np.float32)
    batched_kernel[(1,)](a, sa, b, out, B=B, M=M, N=N, K=K)
    for z in range(B):
        ref, mag = reference(a[z], sa[z], "e2m1", b[z], None, "bf16")
        check(out[z], ref, mag, K)


# ---- errors, located at the call ---------------------------------------------------------------


@ww.jit
def bad_call_kernel(a_ptr, b_ptr, s_ptr, out_ptr, CASE: tl.constexpr):
    a = load2d(a_ptr, 32, 32)
    b = load2d(b_ptr, 64, 32)
    s = load2d(s_ptr, 32, 2)
    if CASE == 0:
        c = tl.dot_scaled(a, s, "e3m2", b, None, "e4m3")
    elif CASE == 1:
        c = tl.dot_scaled(a, s, "e2m1", b, None, "e4m3", rhs_k_pack=False)
    elif CASE == 2:
        c = tl.dot_scaled(a, load2d(s_ptr, 32, 8), "e2m1", b, None, "e4m3")
    elif CASE == 3:
        c = tl.dot_scaled(a.to(tl.int8), s, "e2m1", b, None, "e4m3")
    elif CASE == 4:
        c = tl.dot_scaled(a, s, "e2m1", b, None, "e4m3", out_dtype=tl.float16)
    else:
        c = tl.dot_scaled(a, s, "e4m3", b, None, "e4m3")
    tl.store(out_ptr + tl.arange(0, 32)[:, None] * 32 + tl.arange(0, 32)[None, :], c)


@pytest.mark.parametrize("case,message", [
    (0, "lhs_format must be 'e2m1', 'e4m3', 'e5m2', 'bf16' or 'fp16'"),
    (1, "only e2m1 operands can be packed along a dimension other than K"),
    (2, "one scale per 16 or 32 elements of K = 64"),
    (3, "lhs in format 'e2m1' must be uint8"),
    (4, "accumulates in float32 only"),
    (5, "reduction dimensions hold different numbers of elements"),
])
def test_errors_are_located(case, message):
    a = np.zeros((32, 32), np.uint8)
    b = np.zeros((64, 32), np.uint8)
    s = np.zeros((32, 8), np.uint8)
    out = np.zeros((32, 32), np.float32)
    with pytest.raises(Exception) as info:
        bad_call_kernel[(1,)](a, b, s, out, CASE=case)
    text = str(info.value)
    assert message in text
    assert "test_triton_core_dot_scaled.py:" in text


# ---- compiled for the GPU targets ------------------------------------------------------------


def compile_for(kernel, signature, constexprs, cap, **options):
    from warpweave.backends.compiler import GPUTarget

    src = ww.compiler.ASTSource(kernel, signature=signature, constexprs=constexprs)
    return ww.compiler.compile(src, target=GPUTarget("cuda", cap, 32), options=options)


@pytest.mark.parametrize("cap,target", TARGETS)
@pytest.mark.parametrize("fa,fb,M", [("e2m1", "fp16", 64), ("e4m3", "bf16", 64),
                                     ("e5m2", "e2m1", 32), ("bf16", "e4m3", 16)])
def test_compiles_to_tensor_cores(cap, target, fa, fb, M):
    sig = {"a_ptr": "*u8", "a_scale_ptr": "*u8", "b_ptr": "*u8", "b_scale_ptr": "*u8",
           "out_ptr": "*fp32"}
    if fa in ("bf16", "fp16"):
        sig["a_ptr"] = "*" + fa
    if fb in ("bf16", "fp16"):
        sig["b_ptr"] = "*" + fb
    k = compile_for(scaled_kernel, sig, {"M": M, "N": 64, "K": 64, "FA": fa, "FB": fb,
                                         "SCALE_A": fa in MX, "SCALE_B": fb in MX,
                                         "A_K_PACK": True, "B_K_PACK": True, "FAST": False},
                    cap, num_warps=4)
    ptx = k.asm["ptx"]
    assert f".target {target}" in ptx
    ty = "f16" if "fp16" in (fa, fb) else "bf16"
    if cap == 90 and M >= 64:
        assert f".f32.{ty}.{ty}" in ptx and "wgmma.mma_async" in ptx
    else:
        assert f"mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32" in ptx
    assert k.asm["cubin"], "ptxas rejected the kernel"


# ---- tl.dot below 16 ---------------------------------------------------------------------------


@ww.jit
def small_dot_kernel(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    c = tl.dot(load2d(a_ptr, M, K), load2d(b_ptr, K, N))
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


SMALL = [(1, 32, 32), (32, 2, 32), (8, 8, 16), (2, 4, 32), (16, 16, 4), (4, 1, 2)]


@pytest.mark.parametrize("M,N,K", SMALL)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int8])
def test_small_dot_in_interpreter(M, N, K, dtype):
    rng = np.random.default_rng(M * 100 + N * 10 + K)
    a = rng.integers(-3, 4, (M, K)).astype(dtype)
    b = rng.integers(-3, 4, (K, N)).astype(dtype)
    out = np.zeros((M, N), np.int32 if dtype == np.int8 else np.float32)
    small_dot_kernel[(1,)](a, b, out, M=M, N=N, K=K)
    np.testing.assert_array_equal(out, a.astype(np.int64) @ b.astype(np.int64))


@ww.jit
def small_dot3d_kernel(a_ptr, b_ptr, out_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                       K: tl.constexpr):
    z = tl.arange(0, B)[:, None, None]
    a = tl.load(a_ptr + z * (M * K) + tl.arange(0, M)[None, :, None] * K +
                tl.arange(0, K)[None, None, :])
    b = tl.load(b_ptr + z * (K * N) + tl.arange(0, K)[None, :, None] * N +
                tl.arange(0, N)[None, None, :])
    c = tl.dot(a, b)
    tl.store(out_ptr + z * (M * N) + tl.arange(0, M)[None, :, None] * N +
             tl.arange(0, N)[None, None, :], c)


@pytest.mark.parametrize("M,N,K", [(1, 32, 32), (32, 2, 32), (8, 8, 8)])
def test_small_dot3d_in_interpreter(M, N, K):
    rng = np.random.default_rng(1)
    B = 2
    a = rng.integers(-8, 8, (B, M, K)).astype(np.float32)  # exact in tf32 too
    b = rng.integers(-8, 8, (B, K, N)).astype(np.float32)
    out = np.zeros((B, M, N), np.float32)
    small_dot3d_kernel[(1,)](a, b, out, B=B, M=M, N=N, K=K)
    np.testing.assert_array_equal(out, a @ b)


SIG = {np.float16: "fp16", np.float32: "fp32", np.int8: "i8"}
MIN_K = {np.float16: 16, np.float32: 8, np.int8: 32}


@pytest.mark.parametrize("cap,target", TARGETS)
@pytest.mark.parametrize("M,N,K", SMALL)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int8])
def test_small_dot_compiles_down_to_tritons_minimum_k(cap, target, M, N, K, dtype):
    sig = {"a_ptr": "*" + SIG[dtype], "b_ptr": "*" + SIG[dtype],
           "out_ptr": "*i32" if dtype == np.int8 else "*fp32"}
    consts = {"M": M, "N": N, "K": K}
    if K >= MIN_K[dtype]:
        k = compile_for(small_dot_kernel, sig, consts, cap, num_warps=4)
        assert f".target {target}" in k.asm["ptx"]
        assert k.asm["cubin"], "ptxas rejected the kernel"
    else:
        with pytest.raises(Exception) as info:
            compile_for(small_dot_kernel, sig, consts, cap, num_warps=4)
        text = str(info.value)
        assert f"needs K >= {MIN_K[dtype]} on {target}" in text
        assert "test_triton_core_dot_scaled.py:" in text
