"""Blackwell (sm_100a) block-scaled MMA of fp4 operands (issue 19): tlx.async_dot_scaled with
e2m1 A and B, packed two to a uint8 along K (low nibble the lower K index), and

- mxfp4: uint8 e8m0 scales, one per 32 elements of K:
  tcgen05.mma.cta_group::1.kind::mxf4.block_scale.scale_vec::2X, K = 64 an instruction, two
  scales of a row each, the descriptor's scale-factor IDs 0 or 2 (the half word of the 32-bit
  scale column);
- nvfp4: tl.float8e4nv (ue4m3) scales, one per 16:
  tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X, K = 64, four scales each,
  IDs 0 (the whole word).

Instruction descriptor (PTX ISA, "Instruction descriptor format for .kind::mxf4 and
.kind::mxf4nvf4"): bits 0-1 reserved, 2 sparsity (dense 0), 3 reserved, 4-5 B scale factor ID,
6 reserved, 7-9 atype and 10-11 btype (E2M1 = 1), 12 reserved, 13 / 14 negate, 15 / 16 transpose
(0 only: fp4 is K-major), 17-22 N >> 3, 23 scale type (UE8M0 = 1, UE4M3 = 0), 24-26 reserved,
27-28 M >> 7, 29-30 A scale factor ID, 31 K (0: dense K = 64).

Mixed mxfp4 x mxfp8 (one operand e2m1, the other e4m3 / e5m2, e8m0 scales of 32):
tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X, K = 32 an instruction, the
descriptor's atype / btype E2M1 = 5 (E4M3 = 0, E5M2 = 1; PTX ISA, "Instruction descriptor format
for .kind::mxf8f6f4"). That kind reads sub-byte operands from shared memory padded: 16 e2m1
values in the first 8 bytes of each 16-byte chunk, which TMA writes from the packed global
tensor as CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B (its K coordinate and box counting 4-bit values,
boxes of 128 values); the kernel declares that descriptor `fp4_padded`.

The interpreter's values against a NumPy reference that decodes e2m1 and the scales from their
bits, its report of a planted race, refusals, and the PTX checked field by field; ptxas
assembles each form for sm_100a. No Blackwell GPU ran any of this."""
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww

import blackwell_fp4_kernels as fk
from blackwell_testing import descriptor, line_of

ml_dtypes = pytest.importorskip("ml_dtypes")
native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

# e2m1 codes 0-15: sign bit 3, exponent bits 1-2 (bias 1), mantissa bit 0.
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def field(v, lo, hi):
    return (v >> lo) & ((1 << (hi - lo + 1)) - 1)


def pack(codes):
    # [rows, K] codes -> [rows, K / 2] bytes, element 2 j in the low nibble of byte j.
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def unpack(packed):
    out = np.empty((packed.shape[0], packed.shape[1] * 2), np.float64)
    out[:, 0::2] = E2M1[packed & 0xF]
    out[:, 1::2] = E2M1[packed >> 4]
    return out


def to_cublas_layout(scales):
    """[rows, cols] scales (rows a multiple of 128, cols of 4) in the cuBLAS block-scaled layout
    [1, rows / 128, cols / 4, 2, 256]: row 32 i + l's scales 4 j..4 j + 3 at byte 16 l + 4 i + j
    of chunk (row block, scale word)."""
    rows, cols = scales.shape
    out = np.zeros((rows // 128, cols // 4, 512), scales.dtype)
    for r in range(rows):
        for c in range(cols):
            out[r // 128, c // 4, (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4] = scales[r, c]
    return out.reshape(1, rows // 128, cols // 4, 2, 256)


def scale_values(s, nv):
    if nv:
        return s.astype(np.float64)  # ue4m3: the float8_e4m3fn values
    return 2.0 ** (s.astype(np.float64) - 127)


def operands(M, N, K, nv, seed):
    # e2m1 codes of every value and sign; scales 2^-1..2^1 (e8m0) or 0.5..2 in quarters (ue4m3):
    # every product is a multiple of 2^-6 below 144 and every sum over K <= 512 is exact in fp32,
    # so the interpreter must match exactly.
    rng = np.random.default_rng(seed)
    a = pack(rng.integers(0, 16, (M, K)))
    b = pack(rng.integers(0, 16, (N, K)))
    vec = 16 if nv else 32
    if nv:
        pick = np.array([0.5, 0.75, 1, 1.5, 2])
        sa = pick[rng.integers(0, 5, (M, K // vec))].astype(ml_dtypes.float8_e4m3fn)
        sb = pick[rng.integers(0, 5, (N, K // vec))].astype(ml_dtypes.float8_e4m3fn)
    else:
        sa = rng.integers(126, 129, (M, K // vec)).astype(np.uint8)
        sb = rng.integers(126, 129, (N, K // vec)).astype(np.uint8)
    return a, b, sa, sb


def reference(a, b, sa, sb, nv):
    vec = 16 if nv else 32
    af = unpack(a) * np.repeat(scale_values(sa, nv), vec, axis=1)
    bf = unpack(b) * np.repeat(scale_values(sb, nv), vec, axis=1)
    return af @ bf.T


def pad(s, rows):
    # Rows up to `rows`, scales up to a multiple of four (one 32-bit column's worth), with 1.0.
    one = np.array(1.0).astype(s.dtype) if s.dtype != np.uint8 else np.uint8(127)
    out = np.full((rows, -(-s.shape[1] // 4) * 4), one, s.dtype)
    out[:s.shape[0], :s.shape[1]] = s
    return out


def run(M, N, K, BN=128, BK=128, nv=False, tmem=False, plant=0, seed=0):
    a, b, sa, sb = operands(M, N, K, nv, seed)
    vec = 16 if nv else 32
    rn, rk = (BN + 127) // 128, (BK // vec + 3) // 4
    sa_l = to_cublas_layout(pad(sa, ww.cdiv(M, 128) * 128))
    sb_l = to_cublas_layout(pad(sb, ww.cdiv(N, BN) * rn * 128))
    c = np.full((M, N), np.nan, np.float32)
    fk.fp4_gemm[(ww.cdiv(M, 128), ww.cdiv(N, BN))](
        descriptor(a, [128, BK // 2]), descriptor(b, [BN, BK // 2]),
        descriptor(sa_l, [1, 1, rk, 2, 256]), descriptor(sb_l, [1, rn, rk, 2, 256]),
        c, M, N, K, BN=BN, BK=BK, VEC=vec, TMEM_SCALES=tmem, PLANT=plant, num_warps=4)
    return c, reference(a, b, sa, sb, nv)


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


def test_reference_e2m1_table_follows_the_format():
    # (-1)^s * 2^(e - 1) * (1 + m / 2) for exponent bits e > 0, (-1)^s * m / 2 for e = 0.
    for code in range(16):
        s, e, m = code >> 3, (code >> 1) & 3, code & 1
        v = (2.0 ** (e - 1)) * (1 + m / 2) if e else m / 2
        assert E2M1[code] == (-v if s else v)


@pytest.mark.parametrize("M,N,K,BN,BK,nv,tmem", [
    (128, 128, 128, 128, 128, False, False),
    (128, 128, 128, 128, 128, False, True),
    (256, 256, 256, 128, 128, False, True),
    (128, 256, 256, 256, 256, False, False),
    (128, 64, 64, 64, 64, False, False),     # K = 64: half a scale column
    (128, 128, 128, 128, 128, True, False),
    (256, 128, 256, 128, 128, True, False),
    (128, 256, 256, 256, 256, True, False),
    (128, 64, 64, 64, 64, True, False),      # one MMA, one scale column
])
def test_fp4_gemm_matches_numpy(interpret, M, N, K, BN, BK, nv, tmem):
    c, ref = run(M, N, K, BN, BK, nv, tmem)
    np.testing.assert_array_equal(c, ref.astype(np.float32))


@pytest.mark.parametrize("nv", [False, True])
def test_each_scale_scales_its_block_only(interpret, nv):
    # A scale changed in row 7, K block 1 of A: only C's row 7 changes, and by that block's part.
    a, b, sa, sb = operands(128, 128, 128, nv, 5)
    sa2 = sa.copy()
    sa2[7, 1] = np.array(1.25).astype(sa.dtype) if nv else np.uint8(130)
    base, changed = reference(a, b, sa, sb, nv), reference(a, b, sa2, sb, nv)
    assert not np.array_equal(base[7], changed[7]) and np.array_equal(base[8:], changed[8:])
    vec = 16 if nv else 32
    rk = (128 // vec + 3) // 4
    c = np.zeros((128, 128), np.float32)
    fk.fp4_gemm[(1, 1)](
        descriptor(a, [128, 64]), descriptor(b, [128, 64]),
        descriptor(to_cublas_layout(pad(sa2, 128)), [1, 1, rk, 2, 256]),
        descriptor(to_cublas_layout(pad(sb, 128)), [1, 1, rk, 2, 256]), c, 128, 128, 128,
        BN=128, BK=128, VEC=vec, TMEM_SCALES=False, PLANT=0, num_warps=4)
    np.testing.assert_array_equal(c, changed.astype(np.float32))


@pytest.mark.parametrize("nv,tmem", [(False, False), (False, True), (True, False)])
def test_reading_the_result_before_its_commit_is_a_race(interpret, nv, tmem):
    with pytest.raises(ww.InterpreterError) as e:
        run(128, 128, 128, nv=nv, tmem=tmem, plant=1)
    msg = str(e.value)
    line = line_of(fk.fp4_gemm, "result = tlx.local_load(acc)")
    assert f"blackwell_fp4_kernels.py:{line}:" in msg
    assert "local_load reads tensor memory that tcgen05_mma" in msg


# ---- PTX for sm_100a ----

def compile_kernel(name, signature, target="sm_100a", num_warps=4, **cluster):
    # cluster: num_ctas=2, cluster_dims=[2, 1, 1] for a CTA pair's kernel.
    path = Path(fk.__file__)
    result = native_loader.native().compile([(str(path), path.read_text())], name, signature, {},
                                            target=target, num_warps=num_warps, stage="ptx",
                                            **cluster)
    return result if isinstance(result, str) else getattr(result, "ptx", None) or result["ptx"]


def gemm_sig(BN, BK, nv, tmem=0, plant=0):
    vec = 16 if nv else 32
    rn, rk = (BN + 127) // 128, (BK // vec + 3) // 4
    s = "fp8e4nv" if nv else "u8"
    return (f"a_desc:desc<u8,128x{BK // 2}>,b_desc:desc<u8,{BN}x{BK // 2}>,"
            f"as_desc:desc<{s},1x1x{rk}x2x256>,bs_desc:desc<{s},1x{rn}x{rk}x2x256>,"
            f"c_ptr:*fp32:16,M:i32,N:i32,K:i32,BN={BN},BK={BK},VEC={vec},TMEM_SCALES={tmem},"
            f"PLANT={plant}")


def mma_re(kind, vec):
    return re.compile(rf"tcgen05\.mma\.cta_group::1\.kind::{kind}\.block_scale\.scale_vec::{vec} "
                      r"\[(%r\d+)\], (%rd\d+), (%rd\d+), (%r\d+), \[(%r\d+)\], \[(%r\d+)\], %p\d+;")


CP = re.compile(r"tcgen05\.cp\.cta_group::1\.32x128b\.warpx4 \[(%r\d+)\], (%rd\d+);")


def mov_value(ptx, reg):
    m = re.search(rf"mov\.b32 {re.escape(reg)}, (\d+);", ptx)
    return int(m.group(1)) if m else None


def column_offset(ptx, reg, base):
    # The scale column an MMA reads: its register is the base, or base + a constant.
    if reg == base:
        return 0
    m = re.search(rf"add\.u32 {re.escape(reg)}, {re.escape(base)}, (\d+);", ptx)
    return int(m.group(1)) if m else None


@pytest.mark.parametrize("BN,BK,nv,tmem", [
    (128, 128, False, 0),
    (256, 256, False, 1),
    (64, 64, False, 0),
    (128, 128, True, 0),
    (256, 256, True, 0),
    (64, 64, True, 0),
])
def test_fp4_mma_forms_in_the_ptx_and_ptxas_accepts(ptxas, BN, BK, nv, tmem):
    ptx = compile_kernel("fp4_gemm", gemm_sig(BN, BK, nv, tmem))
    kind, vec = ("mxf4nvf4", "4X") if nv else ("mxf4", "2X")
    mmas = mma_re(kind, vec).findall(ptx)
    assert len(mmas) == BK // 64  # one MMA per 64 elements of K
    other = "mxf4" if nv else "mxf4nvf4"
    assert f"kind::{other}." not in ptx and "kind::mxf8f6f4" not in ptx
    per = 4 if nv else 2  # scales of a row one MMA reads
    sa0, sb0 = mmas[0][4], mmas[0][5]
    bblocks = (BN + 127) // 128
    for step, (_, da, db, idesc_reg, sa, sb) in enumerate(mmas):
        v = mov_value(ptx, idesc_reg)
        assert v is not None
        assert field(v, 0, 1) == 0 and field(v, 2, 2) == 0 and field(v, 3, 3) == 0
        assert field(v, 6, 6) == 0 and field(v, 12, 12) == 0 and field(v, 24, 26) == 0
        assert field(v, 31, 31) == 0  # dense K = 64
        sf_id = (step * per) % 4  # the sub-column the MMA's scales start at
        assert field(v, 4, 5) == sf_id and field(v, 29, 30) == sf_id
        assert sf_id in ((0,) if nv else (0, 2))
        assert field(v, 7, 9) == 1 and field(v, 10, 11) == 1  # E2M1
        assert field(v, 13, 14) == 0
        assert field(v, 15, 15) == 0 and field(v, 16, 16) == 0  # K-major, no transpose
        assert field(v, 17, 22) << 3 == BN
        assert field(v, 23, 23) == (0 if nv else 1)  # UE4M3 / UE8M0
        assert field(v, 27, 28) << 7 == 128
        # Scale word (step * per) / 4: A's column 4 w, B's 4 w (N / 128 blocks) further.
        word = step * per // 4
        assert column_offset(ptx, sa, sa0) == 4 * word
        assert column_offset(ptx, sb, sb0) == 4 * word * bblocks
    # The scale copies: A's 128 rows and B's BN (rounded up to 128), one per 4 scales of a row.
    chunks = (BK // (16 if nv else 32) + 3) // 4
    assert len(CP.findall(ptx)) == (1 + bblocks) * chunks
    ptxas(ptx, arch="sm_100a")


def test_fp4_operand_descriptors_step_32_bytes(ptxas):
    # 64 e2m1 values of K are 32 bytes: each MMA's A and B descriptors start 32 bytes (>> 4 = 2)
    # further along the K-major rows, as an fp8 MMA's 32 elements do.
    ptx = compile_kernel("fp4_gemm", gemm_sig(128, 256, False))
    mmas = mma_re("mxf4", "2X").findall(ptx)
    assert len(mmas) == 4
    a0, b0 = mmas[0][1], mmas[0][2]
    for i, (_, da, db, *_rest) in enumerate(mmas[1:], 1):
        for d, base in ((da, a0), (db, b0)):
            m = re.search(rf"add\.s64 {re.escape(d)}, {re.escape(base)}, (\d+);", ptx)
            assert m and int(m.group(1)) == 32 * i // 16
    ptxas(ptx, arch="sm_100a")


# ---- CTA pairs (two_ctas=True) ----

def run_pair(M, N, K, BN=128, BK=128, nv=False, seed=0):
    a, b, sa, sb = operands(M, N, K, nv, seed)
    vec = 16 if nv else 32
    rn, rk = (BN + 127) // 128, (BK // vec + 3) // 4
    sa_l = to_cublas_layout(pad(sa, ww.cdiv(M, 128) * 128))
    sb_l = to_cublas_layout(pad(sb, ww.cdiv(N, BN) * rn * 128))
    c = np.full((M, N), np.nan, np.float32)
    pairs = (ww.cdiv(M, 128) + 1) // 2 * 2
    fk.pair_fp4[(pairs, ww.cdiv(N, BN))](
        descriptor(a, [128, BK // 2]), descriptor(b, [BN // 2, BK // 2]),
        descriptor(sa_l, [1, 1, rk, 2, 256]), descriptor(sb_l, [1, rn, rk, 2, 256]),
        c, M, N, K, BN=BN, BK=BK, VEC=vec, num_warps=4, ctas_per_cga=(2, 1, 1))
    return c, reference(a, b, sa, sb, nv)


@pytest.mark.parametrize("M,N,K,BN,BK,nv", [(256, 128, 256, 128, 128, False),
                                            (256, 256, 256, 256, 128, True),
                                            (512, 128, 128, 128, 128, True)])
def test_pair_fp4_matches_numpy(interpret, M, N, K, BN, BK, nv):
    c, ref = run_pair(M, N, K, BN, BK, nv)
    np.testing.assert_array_equal(c, ref.astype(np.float32))


@pytest.mark.parametrize("nv", [False, True])
def test_pair_fp4_forms_in_the_ptx(ptxas, nv):
    vec = 16 if nv else 32
    rk = (128 // vec + 3) // 4
    s = "fp8e4nv" if nv else "u8"
    sig = (f"a_desc:desc<u8,128x64>,b_desc:desc<u8,64x64>,as_desc:desc<{s},1x1x{rk}x2x256>,"
           f"bs_desc:desc<{s},1x1x{rk}x2x256>,c_ptr:*fp32:16,M:i32,N:i32,K:i32,BN=128,BK=128,"
           f"VEC={vec}")
    ptx = compile_kernel("pair_fp4", sig, num_ctas=2, cluster_dims=[2, 1, 1])
    assert "cta_group::1" not in ptx
    kind, sv = ("mxf4nvf4", "4X") if nv else ("mxf4", "2X")
    mmas = re.findall(rf"tcgen05\.mma\.cta_group::2\.kind::{kind}\.block_scale\.scale_vec::{sv} "
                      r"\[%r\d+\], %rd\d+, %rd\d+, (%r\d+), \[%r\d+\], \[%r\d+\], %p\d+;", ptx)
    assert len(mmas) == 2  # K = 128: two MMAs of 64
    for step, reg in enumerate(mmas):
        v = mov_value(ptx, reg)
        sf_id = 0 if nv else 2 * step
        # 256 x 128: M >> 7 = 2 in bits 27-28, N >> 3 in 17-22, E2M1 = 1 types, scale type bit.
        assert v == ((sf_id << 4) | (1 << 7) | (1 << 10) | ((128 >> 3) << 17) |
                     ((0 if nv else 1) << 23) | (2 << 27) | (sf_id << 29)), hex(v)
    cps = re.findall(r"tcgen05\.cp\.cta_group::2\.32x128b\.warpx4 \[%r\d+\], %rd\d+;", ptx)
    assert len(cps) == 2 * rk
    ptxas(ptx, arch="sm_100a")


# ---- located errors ----

def compile_source(tmp_path, body, sig="x_ptr:*fp32:16"):
    src = tmp_path / "k.py"
    src.write_text("import warpweave as ww\nimport warpweave.language as tl\n"
                   "from warpweave import tlx\n\n\n@ww.jit\ndef k(x_ptr):\n" + body)
    with pytest.raises(Exception) as info:
        native_loader.native().compile([(str(src), src.read_text())], "k", sig, {},
                                       target="sm_100a", stage="ptx")
    return str(info.value)


def fp4_body(a="tl.uint8", b_shape="(128, 64)", trans=True, scale="tl.uint8",
             b_fmt="'e2m1'", scale_shape="(1, 1, 1, 2, 256)", b_scale=None):
    b_scale = b_scale or scale
    return (
        f"    a = tlx.local_view(tlx.local_alloc((128, 64), {a}, 1), 0)\n"
        f"    b = tlx.local_view(tlx.local_alloc({b_shape}, tl.uint8, 1), 0)\n"
        f"    sa = tlx.local_view(tlx.local_alloc({scale_shape}, {scale}, 1), 0)\n"
        f"    sb = tlx.local_view(tlx.local_alloc({scale_shape}, {b_scale}, 1), 0)\n"
        "    d = tlx.local_view(tlx.local_alloc((128, 128), tl.float32, 1, tlx.storage_kind.tmem), 0)\n"
        f"    tlx.async_dot_scaled(a, {'tlx.local_trans(b)' if trans else 'b'}, d, sa, 'e2m1', sb, "
        f"{b_fmt})\n")


def test_fp4_b_must_be_k_major(tmp_path):
    msg = compile_source(tmp_path, fp4_body(b_shape="(64, 128)", trans=False))
    assert "k.py:13" in msg and "K contiguous only" in msg and "local_trans" in msg


def test_fp4_operands_must_be_uint8(tmp_path):
    msg = compile_source(tmp_path, fp4_body(a="tl.float8e4nv"))
    assert "k.py:13" in msg and "A is" in msg and "tl.uint8" in msg


def test_fp4_format_of_an_fp8_buffer_is_refused_naming_what_is_accepted(tmp_path):
    # B is uint8 (packed e2m1) but named 'e4m3': the mixed MMA takes an fp8 buffer for it.
    msg = compile_source(tmp_path, fp4_body(b_fmt="'e4m3'"))
    assert "k.py:13" in msg and "B is" in msg and "tl.float8e4nv" in msg


def test_mixed_scale_dtypes_are_refused(tmp_path):
    msg = compile_source(tmp_path, fp4_body(b_scale="tl.float8e4nv"))
    assert "k.py:13" in msg and "both ue4m3" in msg and "tl.uint8" in msg


def test_nvfp4_scales_in_tensor_memory_are_refused(tmp_path):
    body = (
        "    a = tlx.local_view(tlx.local_alloc((128, 64), tl.uint8, 1), 0)\n"
        "    b = tlx.local_view(tlx.local_alloc((128, 64), tl.uint8, 1), 0)\n"
        "    s = tlx.local_view(tlx.local_alloc((128, 8), tl.float8e4nv, 1, tlx.storage_kind.tmem), 0)\n"
        "    d = tlx.local_view(tlx.local_alloc((128, 128), tl.float32, 1, tlx.storage_kind.tmem), 0)\n"
        "    tlx.async_dot_scaled(a, tlx.local_trans(b), d, s, 'e2m1', s, 'e2m1')\n")
    msg = compile_source(tmp_path, body)
    assert "k.py:12" in msg and "ue4m3" in msg and "shared memory" in msg


def test_ue4m3_scales_need_fp4_operands(tmp_path):
    body = (
        "    a = tlx.local_view(tlx.local_alloc((128, 128), tl.float8e4nv, 1), 0)\n"
        "    b = tlx.local_view(tlx.local_alloc((128, 128), tl.float8e4nv, 1), 0)\n"
        "    s = tlx.local_view(tlx.local_alloc((1, 1, 2, 2, 256), tl.float8e4nv, 1), 0)\n"
        "    d = tlx.local_view(tlx.local_alloc((128, 128), tl.float32, 1, tlx.storage_kind.tmem), 0)\n"
        "    tlx.async_dot_scaled(a, tlx.local_trans(b), d, s, 'e4m3', s, 'e4m3')\n")
    msg = compile_source(tmp_path, body)
    assert "k.py:12" in msg and "nvfp4" in msg and "uint8 e8m0" in msg


def test_fp4_k_must_fill_an_instruction(tmp_path):
    # [128, 16] bytes: K = 32, under one MMA's 64.
    body = (
        "    a = tlx.local_view(tlx.local_alloc((128, 16), tl.uint8, 1), 0)\n"
        "    b = tlx.local_view(tlx.local_alloc((128, 16), tl.uint8, 1), 0)\n"
        "    s = tlx.local_view(tlx.local_alloc((1, 1, 1, 2, 256), tl.uint8, 1), 0)\n"
        "    d = tlx.local_view(tlx.local_alloc((128, 128), tl.float32, 1, tlx.storage_kind.tmem), 0)\n"
        "    tlx.async_dot_scaled(a, tlx.local_trans(b), d, s, 'e2m1', s, 'e2m1')\n")
    msg = compile_source(tmp_path, body)
    assert "k.py:12" in msg and "multiple of 64" in msg


# ---- mixed mxfp4 x mxfp8 (kind::mxf8f6f4) ----

# fp8 values k / 8, |k| <= 16 (all e4m3) or a subset that e5m2 holds: with e2m1 values and
# scales 2^-1..2^1, every product is a multiple of 2^-6 of at most 48 and sums over K <= 512 are
# exact in fp32.
FP8_PICK = {"e4m3": np.arange(-16, 17) / 8,
            "e5m2": np.array([-2, -1.5, -1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1, 1.5, 2])}


def mixed_operands(M, N, K, a_fmt, b_fmt, seed):
    """A and B as the kernel takes them (packed e2m1 A [M, K / 2] or fp8 A [M, K]; packed e2m1 B
    [N, K / 2] or fp8 B [K, N]), their values as float64 [M, K] and [K, N], and e8m0 scales
    [M, K / 32] and [N, K / 32]."""
    rng = np.random.default_rng(seed)

    def fp8(fmt, shape):
        return FP8_PICK[fmt][rng.integers(0, len(FP8_PICK[fmt]), shape)].astype(NP_FP8[fmt])

    if a_fmt == "e2m1":
        a = pack(rng.integers(0, 16, (M, K)))
        av = unpack(a)
    else:
        a = fp8(a_fmt, (M, K))
        av = a.astype(np.float64)
    if b_fmt == "e2m1":
        b = pack(rng.integers(0, 16, (N, K)))
        bv = unpack(b).T
    else:
        b = fp8(b_fmt, (K, N))
        bv = b.astype(np.float64)
    sa = rng.integers(126, 129, (M, K // 32)).astype(np.uint8)
    sb = rng.integers(126, 129, (N, K // 32)).astype(np.uint8)
    return a, b, av, bv, sa, sb


NP_FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def mixed_reference(av, bv, sa, sb):
    return ((av * np.repeat(scale_values(sa, False), 32, axis=1)) @
            (bv * np.repeat(scale_values(sb, False), 32, axis=1).T))


def run_mixed(M, N, K, a_fmt, b_fmt, BN=128, BK=128, tmem=False, seed=0):
    a, b, av, bv, sa, sb = mixed_operands(M, N, K, a_fmt, b_fmt, seed)
    rn, rk = (BN + 127) // 128, (BK // 32 + 3) // 4
    sa_l = to_cublas_layout(pad(sa, ww.cdiv(M, 128) * 128))
    sb_l = to_cublas_layout(pad(sb, ww.cdiv(N, BN) * rn * 128))
    a_fp4 = a_fmt == "e2m1"
    c = np.full((M, N), np.nan, np.float32)
    fk.mixed_gemm[(ww.cdiv(M, 128), ww.cdiv(N, BN))](
        descriptor(a, [128, BK // 2] if a_fp4 else [128, BK]),
        descriptor(b, [BK, BN] if a_fp4 else [BN, BK // 2]),
        descriptor(sa_l, [1, 1, rk, 2, 256]), descriptor(sb_l, [1, rn, rk, 2, 256]),
        c, M, N, K, A_FMT=a_fmt, B_FMT=b_fmt, A_FP4=a_fp4, BN=BN, BK=BK, TMEM_SCALES=tmem,
        num_warps=4)
    return c, mixed_reference(av, bv, sa, sb)


MIXED = [("e2m1", "e4m3"), ("e2m1", "e5m2"), ("e4m3", "e2m1"), ("e5m2", "e2m1")]


@pytest.mark.parametrize("a_fmt,b_fmt", MIXED)
@pytest.mark.parametrize("M,N,K,BN,BK,tmem", [
    (128, 128, 128, 128, 128, False),
    (256, 256, 256, 128, 128, True),
    (128, 64, 512, 64, 256, False),
])
def test_mixed_gemm_matches_numpy(interpret, a_fmt, b_fmt, M, N, K, BN, BK, tmem):
    c, ref = run_mixed(M, N, K, a_fmt, b_fmt, BN, BK, tmem)
    np.testing.assert_array_equal(c, ref.astype(np.float32))


def test_mixed_reference_decodes_each_operand_by_its_format():
    # The same codes read as e2m1 in A against e4m3 values in B, by hand for one dot product.
    a, b, av, bv, sa, sb = mixed_operands(128, 8, 64, "e2m1", "e4m3", 3)
    row = [E2M1[(a[0, j // 2] >> (4 * (j % 2))) & 0xF] * 2.0 ** (int(sa[0, j // 32]) - 127)
           for j in range(64)]
    col = [float(b[j, 0]) * 2.0 ** (int(sb[0, j // 32]) - 127) for j in range(64)]
    assert mixed_reference(av, bv, sa, sb)[0, 0] == np.dot(row, col)


def mixed_sig(a_fmt, b_fmt, BN, BK, tmem=0):
    rn, rk = (BN + 127) // 128, (BK // 32 + 3) // 4
    dt = {"e4m3": "fp8e4nv", "e5m2": "fp8e5"}
    a_fp4 = a_fmt == "e2m1"
    a = f"u8,128x{BK // 2}" if a_fp4 else f"{dt[a_fmt]},128x{BK}"
    b = f"{dt[b_fmt]},{BK}x{BN}" if a_fp4 else f"u8,{BN}x{BK // 2}"
    return (f"a_desc:desc<{a}>,b_desc:desc<{b}>,as_desc:desc<u8,1x1x{rk}x2x256>,"
            f"bs_desc:desc<u8,1x{rn}x{rk}x2x256>,c_ptr:*fp32:16,M:i32,N:i32,K:i32,"
            f"A_FMT='{a_fmt}',B_FMT='{b_fmt}',A_FP4={int(a_fp4)},BN={BN},BK={BK},"
            f"TMEM_SCALES={tmem}")


def compile_mixed(a_fmt, b_fmt, BN, BK, tmem=0):
    path = Path(fk.__file__)
    result = native_loader.native().compile([(str(path), path.read_text())], "mixed_gemm",
                                            mixed_sig(a_fmt, b_fmt, BN, BK, tmem), {},
                                            target="sm_100a", num_warps=4, stage="ptx")
    return result if isinstance(result, str) else getattr(result, "ptx", None) or result["ptx"]


MXF8F6F4_CODE = {"e4m3": 0, "e5m2": 1, "e2m1": 5}


@pytest.mark.parametrize("a_fmt,b_fmt", MIXED)
@pytest.mark.parametrize("BN,BK,tmem", [(128, 128, 0), (256, 256, 1), (64, 256, 0)])
def test_mixed_mma_forms_in_the_ptx_and_ptxas_accepts(ptxas, a_fmt, b_fmt, BN, BK, tmem):
    ptx = compile_mixed(a_fmt, b_fmt, BN, BK, tmem)
    mmas = mma_re("mxf8f6f4", "1X").findall(ptx)
    assert len(mmas) == BK // 32  # one MMA per 32 elements of K
    assert "kind::mxf4" not in ptx
    a_fp4 = a_fmt == "e2m1"
    sa0, sb0 = mmas[0][4], mmas[0][5]
    bblocks = (BN + 127) // 128
    for step, (_, da, db, idesc_reg, sa, sb) in enumerate(mmas):
        v = mov_value(ptx, idesc_reg)
        assert v is not None
        assert field(v, 0, 3) == 0 and field(v, 6, 6) == 0 and field(v, 24, 26) == 0
        assert field(v, 31, 31) == 0
        assert field(v, 4, 5) == step % 4 and field(v, 29, 30) == step % 4  # scale byte
        assert field(v, 7, 9) == MXF8F6F4_CODE[a_fmt]
        assert field(v, 10, 12) == MXF8F6F4_CODE[b_fmt]
        assert field(v, 13, 14) == 0
        # The e2m1 operand is K-major; an fp8 B here is [K, N], N-major (transposed).
        assert field(v, 15, 15) == 0 and field(v, 16, 16) == int(a_fp4)
        assert field(v, 17, 22) << 3 == BN and field(v, 23, 23) == 1  # UE8M0
        assert field(v, 27, 28) << 7 == 128
        assert column_offset(ptx, sa, sa0) == 4 * (step // 4)
        assert column_offset(ptx, sb, sb0) == 4 * (step // 4) * bblocks
    # The e2m1 descriptor: 128-byte swizzle (mode 1 in bits 62-63), 8 rows of 128 bytes a stride
    # (1024 >> 4 in bits 32-45), tcgen05's version bit 46; each MMA 32 padded bytes further
    # along a row of 128 (K = 32 values), the next 128 values a column block of rows x 128.
    rows = 128 if a_fp4 else BN
    d0 = mmas[0][1] if a_fp4 else mmas[0][2]
    fixed = (1 << 62) | (1 << 46) | ((1024 >> 4) << 32) | (1 << 16)
    m = re.search(rf"or\.b64 {re.escape(d0)}, %rd\d+, (\d+);", ptx)
    assert m and int(m.group(1)) == fixed, (m and hex(int(m.group(1))))
    for step, mma in enumerate(mmas[1:], 1):
        d = mma[1] if a_fp4 else mma[2]
        k = 32 * step
        m = re.search(rf"add\.s64 {re.escape(d)}, {re.escape(d0)}, (\d+);", ptx)
        assert m and int(m.group(1)) == ((k // 128) * rows * 128 + k % 128) >> 4
    ptxas(ptx, arch="sm_100a")


@pytest.mark.parametrize("a_fmt,b_fmt", [("e2m1", "e4m3"), ("e4m3", "e2m1")])
def test_mixed_fp4_tile_is_loaded_padded(ptxas, a_fmt, b_fmt):
    # The e2m1 descriptor parameter says fp4_padded (the host encodes it as 4-bit values) and
    # its TMA copies go as boxes of 128 values, K coordinate doubled, one 128 x 128-byte column
    # block of the padded tile apart; the fp8 descriptor stays plain.
    BK = 256
    path = Path(fk.__file__)
    k = native_loader.native().compile([(str(path), path.read_text())], "mixed_gemm",
                                       mixed_sig(a_fmt, b_fmt, 128, BK), {}, target="sm_100a",
                                       num_warps=4, stage="ptx")
    params = dict((p[0], p[1]) for p in k.params)
    fp4_desc, fp8_desc = ("a_desc", "b_desc") if a_fmt == "e2m1" else ("b_desc", "a_desc")
    assert "fp4_padded" in params[fp4_desc] and "swizzle=128" in params[fp4_desc]
    assert "fp4_padded" not in params[fp8_desc]
    assert ww.tensor_descriptor.swizzle_of(params[fp4_desc]) == 128
    assert isinstance(ww.tensor_descriptor.swizzle_of(params[fp4_desc]),
                      ww.tensor_descriptor.Fp4Padded)
    assert not isinstance(ww.tensor_descriptor.swizzle_of(params[fp8_desc]),
                          ww.tensor_descriptor.Fp4Padded)
    ptx = k.ptx
    shl = re.findall(r"shl\.b32 (%r\d+), %r\d+, 1;", ptx)
    assert len(shl) == 1
    loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::"
                       r"complete_tx::bytes \[(%r\d+)\], \[%rd\d+, \{(%r\d+), %r\d+\}\]", ptx)
    # K = 256 e2m1 values: two boxes of 128, at K coordinates 2 k and 2 k + 128 (in values),
    # the second 128 rows x 128 bytes further in shared memory.
    inner = [c for _, c in loads]
    second = re.findall(rf"add\.s32 (%r\d+), {re.escape(shl[0])}, 128;", ptx)
    assert inner.count(shl[0]) == 1 and len(second) == 1 and inner.count(second[0]) == 1
    between = ptx[ptx.index(f"{{{shl[0]},"):ptx.index(f"{{{second[0]},")]
    assert re.search(r"add\.s32 %r\d+, %r\d+, 16384;", between), \
        "the second box lands a 128 x 128-byte column block after the first"
    ptxas(ptx, arch="sm_100a")


def test_fp4_padded_descriptor_rules_are_checked_before_the_driver():
    native = native_loader.native()
    with pytest.raises(native.LaunchError, match="32-byte aligned"):
        native.encode_tensor_map("fp4_padded", 16, [128, 256], [128, 1], [128, 128], 128)
    with pytest.raises(native.LaunchError, match="128 values"):
        native.encode_tensor_map("fp4_padded", 64, [128, 256], [128, 1], [128, 64], 128)
    with pytest.raises(native.LaunchError, match="multiple of 32"):
        native.encode_tensor_map("fp4_padded", 64, [128, 256], [144, 1], [128, 128], 128)


def mixed_body(a="(128, 64), tl.uint8", b="(128, 128), tl.float8e4nv", a_fmt="'e2m1'",
               b_fmt="'e4m3'", scale="tl.uint8", extra=""):
    return (
        f"    a = tlx.local_view(tlx.local_alloc({a}, 1), 0)\n"
        f"    b = tlx.local_view(tlx.local_alloc({b}, 1), 0)\n"
        f"    s = tlx.local_view(tlx.local_alloc((1, 1, 1, 2, 256), {scale}, 1), 0)\n"
        "    d = tlx.local_view(tlx.local_alloc((128, 128), tl.float32, 1, tlx.storage_kind.tmem), 0)\n"
        f"    tlx.async_dot_scaled(a, b, d, s, {a_fmt}, s, {b_fmt})\n" + extra)


def test_mixed_fp4_k_must_fill_a_tma_box(tmp_path):
    # [128, 32] bytes of e2m1: K = 64, not a multiple of the 128 values a padded box holds.
    msg = compile_source(tmp_path, mixed_body(a="(128, 32), tl.uint8",
                                              b="(64, 128), tl.float8e4nv"))
    assert "k.py:12" in msg and "multiple of 128" in msg and "kind::mxf8f6f4" in msg


def test_mixed_with_ue4m3_scales_is_refused(tmp_path):
    msg = compile_source(tmp_path, mixed_body(scale="tl.float8e4nv"))
    assert "k.py:12" in msg and "nvfp4" in msg and "'e2m1' x 'e4m3'" in msg


def test_fp6_formats_are_refused_naming_what_is_accepted(tmp_path):
    msg = compile_source(tmp_path, mixed_body(b_fmt="'e2m3'"))
    assert "k.py:12" in msg and "'e2m1', 'e4m3' or 'e5m2'" in msg


def test_mixed_fp4_buffer_is_not_read_by_threads(tmp_path):
    # The padded tile is TMA's and the tensor core's: a local_store to it is refused at its line.
    msg = compile_source(tmp_path, mixed_body(
        extra="    tlx.local_store(a, tl.zeros((128, 64), tl.uint8))\n"))
    assert "k.py:13" in msg and "padded" in msg and "async_descriptor_load" in msg


@pytest.mark.parametrize("a_fmt,b_fmt", [("e2m1", "e4m3"), ("e4m3", "e2m1")])
def test_mixed_gemm_ttgir_marks_the_padded_fp4_operand(a_fmt, b_fmt):
    # The e2m1 operand's shared buffer is TMA's padded form (16U4_ALIGN16B): its encoding says
    # fp4Padded, the fp8 one's does not (asm["ttgir"], layouts of the sm_100a build).
    path = Path(fk.__file__)
    k = native_loader.native().compile([(str(path), path.read_text())], "mixed_gemm",
                                       mixed_sig(a_fmt, b_fmt, 128, 128), {}, target="sm_100a",
                                       num_warps=4, stage="tile-ir")
    ttgir = native_loader.native().triton_dialect_text(k.tile_ir, "sm_100a", True)
    allocs = [line for line in ttgir.splitlines() if "ttg.local_alloc" in line and "nvmma" in line]
    padded = [line for line in allocs if "fp4Padded = true" in line]
    assert len(padded) == 1 and "xi8, #ttg.nvmma_shared<" in padded[0]
    assert any("xf8E4M3FN, #ttg.nvmma_shared<" in line and "fp4Padded" not in line
               for line in allocs)
