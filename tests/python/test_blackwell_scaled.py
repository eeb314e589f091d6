"""Blackwell (sm_100a) block-scaled MMA (issue 19): tlx.async_dot_scaled (mxfp8: e4m3 / e5m2 with
one e8m0 scale per 32 elements of K) and tlx.tmem_copy (tcgen05.cp of the scales into tensor
memory). The interpreter's values against a NumPy reference, its reports of planted
synchronization bugs at the kernel's line, and the PTX checked against the PTX ISA:

- tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [d-tmem], a-desc, b-desc,
  idesc, [scale-A-tmem], [scale-B-tmem], enable-input-d (one per 32 elements of K);
- its instruction descriptor (PTX ISA, "Instruction descriptor format for .kind::mxf8f6f4"):
  bits 0-1 reserved, 2 sparsity, 3 reserved, 4-5 B scale factor ID, 6 reserved, 7-9 atype and
  10-12 btype (E4M3 = 0, E5M2 = 1), 13 / 14 negate, 15 / 16 transpose A / B, 17-22 N >> 3, 23
  scale type (UE8M0 = 1), 24-26 reserved, 27-28 M >> 7, 29-30 A scale factor ID, 31 reserved;
- tcgen05.cp.cta_group::1.32x128b.warpx4 [taddr], s-desc, one per 512-byte chunk of 128 rows x
  4 scales, its shared-memory descriptor unswizzled with 16-byte rows in 8-row core matrices 128
  bytes apart (stride offset 128) and the version bits 46-48 = 1.

ptxas assembles each for sm_100a. No Blackwell GPU ran any of this."""
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww

import blackwell_scaled_kernels as sk
from blackwell_testing import line_of

ml_dtypes = pytest.importorskip("ml_dtypes")
native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

NP_FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def field(v, lo, hi):
    return (v >> lo) & ((1 << (hi - lo + 1)) - 1)


def to_cublas_layout(scales):
    """[rows, cols] e8m0 scales (rows a multiple of 128, cols of 4) in the cuBLAS block-scaled
    layout, shaped [1, rows / 128, cols / 4, 2, 256]: row 32 i + l's scales 4 j..4 j + 3 at byte
    16 l + 4 i + j of chunk (row block, scale word), written here from the definition."""
    rows, cols = scales.shape
    out = np.zeros((rows // 128, cols // 4, 512), np.uint8)
    for r in range(rows):
        for c in range(cols):
            out[r // 128, c // 4, (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4] = scales[r, c]
    return out.reshape(1, rows // 128, cols // 4, 2, 256)


def descriptor(t, block):
    return ww.TensorDescriptor(t, list(t.shape), [int(s) // t.itemsize for s in t.strides], block)


def operands(M, N, K, a_fmt, b_fmt, seed):
    # Multiples of 1/8 in [-1, 1] (exact in e4m3 and e5m2) and scales 2^-2..2^2: every product
    # and its sum over K <= 512 is exact in fp32, so the interpreter must match exactly.
    rng = np.random.default_rng(seed)
    a = (rng.integers(-8, 9, (M, K)) / 8).astype(NP_FP8[a_fmt])
    b = (rng.integers(-8, 9, (N, K)) / 8).astype(NP_FP8[b_fmt])
    sa = rng.integers(125, 130, (M, K // 32)).astype(np.uint8)
    sb = rng.integers(125, 130, (N, K // 32)).astype(np.uint8)
    return a, b, sa, sb


def reference(a, b, sa, sb):
    af = a.astype(np.float64) * np.repeat(2.0 ** (sa.astype(np.float64) - 127), 32, axis=1)
    bf = b.astype(np.float64) * np.repeat(2.0 ** (sb.astype(np.float64) - 127), 32, axis=1)
    return af @ bf.T


def pad(s, rows):
    # Rows up to `rows`, scales up to a multiple of four (one 32-bit column's worth), with 2^0.
    out = np.full((rows, -(-s.shape[1] // 4) * 4), 127, np.uint8)
    out[:s.shape[0], :s.shape[1]] = s
    return out


def run(M, N, K, BN=128, BK=128, a_fmt="e4m3", b_fmt="e4m3", tmem=False, plant=0, seed=0):
    a, b, sa, sb = operands(M, N, K, a_fmt, b_fmt, seed)
    rn = (BN + 127) // 128
    assert BK % 128 == 0 or K == BK  # a partial word of scales: one K step
    sa_l = to_cublas_layout(pad(sa, ww.cdiv(M, 128) * 128))
    sb_l = to_cublas_layout(pad(sb, ww.cdiv(N, BN) * rn * 128))
    rk = ww.cdiv(BK, 128)
    c = np.full((M, N), np.nan, np.float32)
    sk.scaled_gemm[(ww.cdiv(M, 128), ww.cdiv(N, BN))](
        descriptor(a, [128, BK]), descriptor(b, [BN, BK]),
        descriptor(sa_l, [1, 1, rk, 2, 256]), descriptor(sb_l, [1, rn, rk, 2, 256]),
        c, M, N, K, BN=BN, BK=BK, A_FMT=a_fmt, B_FMT=b_fmt, TMEM_SCALES=tmem, PLANT=plant,
        num_warps=4)
    return c, reference(a, b, sa, sb)


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


@pytest.mark.parametrize("M,N,K,BN,BK,a_fmt,b_fmt,tmem", [
    (128, 128, 128, 128, 128, "e4m3", "e4m3", False),
    (256, 256, 384, 128, 128, "e4m3", "e4m3", True),
    (128, 256, 512, 256, 256, "e5m2", "e4m3", False),
    (256, 128, 256, 128, 256, "e4m3", "e5m2", True),
    (128, 64, 256, 64, 128, "e5m2", "e5m2", True),
    (128, 128, 64, 128, 64, "e4m3", "e4m3", True),   # K = 64: two of a column's four scales
    (256, 128, 64, 128, 64, "e5m2", "e4m3", False),
])
def test_scaled_gemm_matches_numpy(interpret, M, N, K, BN, BK, a_fmt, b_fmt, tmem):
    c, ref = run(M, N, K, BN, BK, a_fmt, b_fmt, tmem)
    np.testing.assert_array_equal(c, ref.astype(np.float32))


def test_the_scales_scale_each_block_of_32(interpret):
    # One scale of 2^3 in row 5, K block 2 of A: only C's row 5 changes, by that block's part.
    a, b, sa, sb = operands(128, 128, 128, "e4m3", "e4m3", 3)
    base = reference(a, b, sa, sb)
    sa2 = sa.copy()
    sa2[5, 2] = 130
    changed = reference(a, b, sa2, sb)
    assert not np.array_equal(base[5], changed[5]) and np.array_equal(base[6:], changed[6:])
    c = np.zeros((128, 128), np.float32)
    sk.scaled_gemm[(1, 1)](
        descriptor(a, [128, 128]), descriptor(b, [128, 128]),
        descriptor(to_cublas_layout(sa2), [1, 1, 1, 2, 256]),
        descriptor(to_cublas_layout(sb), [1, 1, 1, 2, 256]), c, 128, 128, 128, BN=128, BK=128,
        A_FMT="e4m3", B_FMT="e4m3", TMEM_SCALES=True, PLANT=0, num_warps=4)
    np.testing.assert_array_equal(c, changed.astype(np.float32))


@pytest.mark.parametrize("tmem,reader", [(False, "tcgen05_mma"), (True, "tmem_copy")])
def test_overwriting_scales_before_the_mma_completes_is_a_race(interpret, tmem, reader):
    with pytest.raises(ww.InterpreterError) as e:
        run(128, 128, 256, tmem=tmem, plant=1)
    msg = str(e.value)
    line = line_of(sk.scaled_gemm, "tlx.async_descriptor_load(as_desc")
    assert f"blackwell_scaled_kernels.py:{line}:" in msg
    assert f"overwrites shared memory that {reader}" in msg
    assert "tcgen05 commit has not completed" in msg


def test_reading_scales_before_tmem_copy_completes_is_a_race(interpret):
    with pytest.raises(ww.InterpreterError) as e:
        run(128, 128, 128, tmem=True, plant=2)
    msg = str(e.value)
    line = line_of(sk.scaled_gemm, "early = tlx.local_load(as_tm)")
    assert f"blackwell_scaled_kernels.py:{line}:" in msg
    assert "local_load reads tensor memory that tmem_copy" in msg
    assert "is still writing" in msg


@pytest.mark.parametrize("tmem", [False, True])
def test_reading_the_result_before_its_commit_is_a_race(interpret, tmem):
    with pytest.raises(ww.InterpreterError) as e:
        run(128, 128, 128, tmem=tmem, plant=3)
    msg = str(e.value)
    line = line_of(sk.scaled_gemm, "result = tlx.local_load(acc)")
    assert f"blackwell_scaled_kernels.py:{line}:" in msg
    assert "local_load reads tensor memory that tcgen05_mma" in msg


def run_ws(wait_copy):
    a, b, sa, sb = operands(128, 128, 128, "e4m3", "e4m3", 7)
    c = np.zeros((128, 128), np.float32)
    sk.scaled_ws_gemm[(1, 1)](
        descriptor(a, [128, 128]), descriptor(b, [128, 128]),
        descriptor(to_cublas_layout(sa), [1, 1, 1, 2, 256]),
        descriptor(to_cublas_layout(sb), [1, 1, 1, 2, 256]), c, 128, 128, 128, BN=128, BK=128,
        WAIT_COPY=wait_copy, num_warps=4)
    return c, reference(a, b, sa, sb)


def test_another_threads_copy_is_waited_for(interpret):
    c, ref = run_ws(True)
    np.testing.assert_array_equal(c, ref.astype(np.float32))


def test_an_mma_reading_scales_another_thread_still_copies_is_a_race(interpret):
    with pytest.raises(ww.InterpreterError) as e:
        run_ws(False)
    msg = str(e.value)
    line = line_of(sk.scaled_ws_gemm, "tlx.async_dot_scaled(a_t")
    assert f"blackwell_scaled_kernels.py:{line}:" in msg
    assert "tcgen05_mma reads tensor memory that tmem_copy" in msg


# ---- PTX for sm_100a ----

def compile_kernel(name, signature, target="sm_100a", num_warps=4):
    path = Path(sk.__file__)
    result = native_loader.native().compile([(str(path), path.read_text())], name, signature, {},
                                            target=target, num_warps=num_warps, stage="ptx")
    return result if isinstance(result, str) else getattr(result, "ptx", None) or result["ptx"]


def gemm_sig(BN, BK, a="fp8e4nv", b="fp8e4nv", a_fmt="e4m3", b_fmt="e4m3", tmem=0, plant=0):
    rn, rk = (BN + 127) // 128, (BK + 127) // 128
    return (f"a_desc:desc<{a},128x{BK}>,b_desc:desc<{b},{BN}x{BK}>,"
            f"as_desc:desc<u8,1x1x{rk}x2x256>,bs_desc:desc<u8,1x{rn}x{rk}x2x256>,"
            f"c_ptr:*fp32:16,M:i32,N:i32,K:i32,BN={BN},BK={BK},A_FMT='{a_fmt}',B_FMT='{b_fmt}',"
            f"TMEM_SCALES={tmem},PLANT={plant}")


MMA = re.compile(r"tcgen05\.mma\.cta_group::1\.kind::mxf8f6f4\.block_scale\.scale_vec::1X "
                 r"\[(%r\d+)\], %rd\d+, %rd\d+, (%r\d+), \[(%r\d+)\], \[(%r\d+)\], %p\d+;")
CP = re.compile(r"tcgen05\.cp\.cta_group::1\.32x128b\.warpx4 \[(%r\d+)\], (%rd\d+);")


def mov_value(ptx, reg):
    m = re.search(rf"mov\.b32 {re.escape(reg)}, (\d+);", ptx)
    return int(m.group(1)) if m else None


@pytest.mark.parametrize("BN,BK,a,b,a_fmt,b_fmt,tmem", [
    (128, 128, "fp8e4nv", "fp8e4nv", "e4m3", "e4m3", 0),
    (256, 256, "fp8e5", "fp8e4nv", "e5m2", "e4m3", 1),
    (128, 256, "fp8e4nv", "fp8e5", "e4m3", "e5m2", 0),
    (64, 64, "fp8e4nv", "fp8e4nv", "e4m3", "e4m3", 1),
])
def test_block_scaled_mma_forms_in_the_ptx_and_ptxas_accepts(ptxas, BN, BK, a, b, a_fmt, b_fmt,
                                                             tmem):
    ptx = compile_kernel("scaled_gemm", gemm_sig(BN, BK, a, b, a_fmt, b_fmt, tmem))
    mmas = MMA.findall(ptx)
    assert len(mmas) == BK // 32  # one MMA per 32 elements of K, one scale each
    for step, (_, idesc_reg, _, _) in enumerate(mmas):
        v = mov_value(ptx, idesc_reg)
        assert v is not None
        assert field(v, 0, 3) == 0 and field(v, 6, 6) == 0 and field(v, 24, 26) == 0
        assert field(v, 31, 31) == 0
        assert field(v, 4, 5) == step % 4 and field(v, 29, 30) == step % 4  # scale byte IDs
        assert field(v, 7, 9) == {"e4m3": 0, "e5m2": 1}[a_fmt]
        assert field(v, 10, 12) == {"e4m3": 0, "e5m2": 1}[b_fmt]
        assert field(v, 13, 14) == 0
        assert field(v, 15, 15) == 0 and field(v, 16, 16) == 0  # both K-major
        assert field(v, 17, 22) << 3 == BN
        assert field(v, 23, 23) == 1  # UE8M0
        assert field(v, 27, 28) << 7 == 128
    # The scale copies: A's 128 rows and B's BN (rounded up to 128) rows, 4 scales a chunk.
    cps = CP.findall(ptx)
    assert len(cps) == (1 + (BN + 127) // 128) * ((BK + 127) // 128)
    ptxas(ptx, arch="sm_100a")


def test_scale_copy_descriptor_decodes_as_the_isa_says(ptxas):
    ptx = compile_kernel("scaled_gemm", gemm_sig(128, 128, tmem=1))
    cps = CP.findall(ptx)
    assert len(cps) == 2
    # The descriptor is built from the shared address: its constant part (or'ed / added in) is
    # LBO 16 >> 4 at bit 16, SBO 128 >> 4 at bit 32 and version 1 at bit 46, no swizzle.
    fixed = (1 << 46) | ((128 >> 4) << 32) | ((16 >> 4) << 16)
    assert str(fixed) in ptx
    ptxas(ptx, arch="sm_100a")


def test_scaled_warp_specialized_ptx(ptxas):
    sig = ("a_desc:desc<fp8e4nv,128x128>,b_desc:desc<fp8e4nv,128x128>,"
           "as_desc:desc<u8,1x1x1x2x256>,bs_desc:desc<u8,1x1x1x2x256>,c_ptr:*fp32:16,M:i32,N:i32,"
           "K:i32,BN=128,BK=128,WAIT_COPY=1")
    ptx = compile_kernel("scaled_ws_gemm", sig)
    assert len(CP.findall(ptx)) == 2 and len(MMA.findall(ptx)) == 4
    ptxas(ptx, arch="sm_100a")


def test_block_scaled_mma_needs_sm100a():
    with pytest.raises(Exception) as e:
        compile_kernel("scaled_gemm", gemm_sig(128, 128), target="sm_90a")
    assert "sm_100a" in str(e.value)


# ---- located errors ----

def compile_source(tmp_path, body, sig="x_ptr:*fp32:16"):
    src = tmp_path / "k.py"
    src.write_text("import warpweave as ww\nimport warpweave.language as tl\n"
                   "from warpweave import tlx\n\n\n@ww.jit\ndef k(x_ptr):\n" + body)
    with pytest.raises(Exception) as info:
        native_loader.native().compile([(str(src), src.read_text())], "k", sig, {},
                                       target="sm_100a", stage="ptx")
    return str(info.value)


def test_tmem_copy_of_pointers_is_refused_at_its_line(tmp_path):
    msg = compile_source(tmp_path, "    tlx.tmem_copy(x_ptr, x_ptr)\n")
    assert "k.py:8" in msg and "tlx.tmem_copy's src" in msg


def test_tmem_copy_needs_the_cublas_layout(tmp_path):
    msg = compile_source(tmp_path, (
        "    s = tlx.local_view(tlx.local_alloc((128, 4), tl.uint8, 1), 0)\n"
        "    t = tlx.local_view(tlx.local_alloc((128, 4), tl.uint8, 1, tlx.storage_kind.tmem), 0)\n"
        "    tlx.tmem_copy(s, t)\n"))
    assert "k.py:10" in msg and "cuBLAS" in msg and "[1, 1, 1, 2, 256]" in msg


def test_scale_shape_mismatch_is_refused(tmp_path):
    # K = 256 reads 8 scales a row: a [128, 4] tile's 4 columns hold them for 64 rows only.
    msg = compile_source(tmp_path, (
        "    a = tlx.local_view(tlx.local_alloc((128, 256), tl.float8e4nv, 1), 0)\n"
        "    b = tlx.local_view(tlx.local_alloc((256, 128), tl.float8e4nv, 1), 0)\n"
        "    s = tlx.local_view(tlx.local_alloc((128, 4), tl.uint8, 1, tlx.storage_kind.tmem), 0)\n"
        "    d = tlx.local_view(tlx.local_alloc((128, 128), tl.float32, 1, tlx.storage_kind.tmem), 0)\n"
        "    tlx.async_dot_scaled(a, b, d, s, 'e4m3', s, 'e4m3')\n"))
    assert "k.py:12:" in msg and "A_scale" in msg and "[128, 8]" in msg


def test_torch_e8m0_scales_are_taken_as_bytes(interpret):
    # TLX's hosts pass torch.float8_e8m0fnu scales (torchao's MXTensor): taken as uint8, as Triton
    # takes them.
    torch = pytest.importorskip("torch")
    a, b, sa, sb = operands(128, 128, 128, "e4m3", "e4m3", 11)
    ta = torch.from_numpy(a.astype(np.float32)).to(torch.float8_e4m3fn)
    tb = torch.from_numpy(b.astype(np.float32)).to(torch.float8_e4m3fn)
    tsa = torch.from_numpy(to_cublas_layout(sa)).view(torch.float8_e8m0fnu)
    tsb = torch.from_numpy(to_cublas_layout(sb)).view(torch.float8_e8m0fnu)
    c = torch.zeros((128, 128), dtype=torch.float32)

    def desc(t, block):
        return ww.TensorDescriptor(t, list(t.shape), list(t.stride()), block)

    sk.scaled_gemm[(1, 1)](
        desc(ta, [128, 128]), desc(tb, [128, 128]), desc(tsa, [1, 1, 1, 2, 256]),
        desc(tsb, [1, 1, 1, 2, 256]), c, 128, 128, 128, BN=128, BK=128, A_FMT="e4m3",
        B_FMT="e4m3", TMEM_SCALES=False, PLANT=0, num_warps=4)
    np.testing.assert_array_equal(c.numpy(), reference(a, b, sa, sb).astype(np.float32))


# ---- operands and scales stored from registers (A from tensor memory) ----

def test_scales_and_a_stored_from_registers(interpret):
    a, b, sa, sb = operands(128, 128, 128, "e4m3", "e4m3", 5)
    c = np.zeros((128, 128), np.float32)
    back = np.zeros((128, 4), np.uint8)
    sk.scaled_from_registers[(1,)](a.astype(np.float32), descriptor(b, [128, 128]), sa, sb, c,
                                   back, K=128, BN=128, num_warps=4)
    np.testing.assert_array_equal(c, reference(a, b, sa, sb).astype(np.float32))
    np.testing.assert_array_equal(back, sa)


def test_b_mn_major_as_tlx_attention_passes_v(interpret):
    # B a [K, N] buffer, N contiguous (MN-major), not a local_trans: the product is the same.
    a, b, sa, sb = operands(128, 128, 128, "e4m3", "e4m3", 7)
    c = np.zeros((128, 128), np.float32)
    back = np.zeros((128, 4), np.uint8)
    bkn = np.ascontiguousarray(b.T)  # [K, N]
    sk.scaled_from_registers[(1,)](a.astype(np.float32), descriptor(bkn, [128, 128]), sa, sb, c,
                                   back, K=128, BN=128, B_MN=True, num_warps=4)
    np.testing.assert_array_equal(c, reference(a, b, sa, sb).astype(np.float32))


@pytest.mark.parametrize("BN", [64, 128])
def test_b_mn_major_ptx(ptxas, BN):
    # PTX ISA: tcgen05.mma reads 8-bit operands K-major or MN-major (instruction descriptor bit
    # 16, "transpose B"); an MN-major B's shared-memory descriptor has the tile's rows of BN
    # bytes swizzled at that width, the stride offset 8 K rows and the leading offset the next
    # swizzle-wide column block (after all K rows); each MMA (K = 32) steps 32 K rows on.
    sig = (f"a_ptr:*fp32:16,b_desc:desc<fp8e4nv,128x{BN}>,sa_ptr:*u8:16,sb_ptr:*u8:16,"
           f"c_ptr:*fp32:16,sa_out_ptr:*u8:16,K=128,BN={BN},B_MN=1")
    ptx = compile_kernel("scaled_from_registers", sig)
    mmas = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::mxf8f6f4\.block_scale\.scale_vec::1X "
                      r"\[%r\d+\], \[%r\d+\], (%rd\d+), (%r\d+), \[%r\d+\], \[%r\d+\], %p\d+;",
                      ptx)
    assert len(mmas) == 4
    for step, (_, idesc_reg) in enumerate(mmas):
        v = mov_value(ptx, idesc_reg)
        assert field(v, 15, 15) == 0 and field(v, 16, 16) == 1  # A K-major, B MN-major
        assert field(v, 17, 22) << 3 == BN and field(v, 4, 5) == step
    first = mmas[0][0]
    m = re.search(rf"or\.b64 {re.escape(first)}, %rd\d+, (-?\d+);", ptx)
    fixed = int(m.group(1)) & ((1 << 64) - 1)
    swizzle = {128: 2, 64: 4}[BN]
    assert field(fixed, 61, 63) == swizzle and field(fixed, 46, 48) == 1
    assert field(fixed, 32, 45) << 4 == 8 * BN  # 8 K rows of BN bytes
    assert field(fixed, 16, 29) << 4 == 128 * BN  # past all 128 K rows
    for i, (db, _) in enumerate(mmas[1:], 1):
        step = re.search(rf"add\.s64 {re.escape(db)}, {re.escape(first)}, (\d+);", ptx)
        assert step and int(step.group(1)) == 32 * i * BN // 16
    ptxas(ptx, arch="sm_100a")


def test_tf32_mn_major_is_refused():
    # tf32 operands stay K-major in warpweave's tcgen05 lowering.
    path = Path(__file__).with_name("blackwell_descriptor_kernels.py")
    sig = ("a_desc:desc<fp32,128x32>,b_desc:desc<fp32,32x32>,c_ptr:*fp32:16,BM=128,BN=32,BK=32,"
           "B_K_MAJOR=0")
    with pytest.raises(ww.CompilationError) as e:
        native_loader.native().compile([(str(path), path.read_text())], "one_mma", sig, {},
                                       target="sm_100a", num_warps=4, stage="ptx")
    assert "tf32 operands with K contiguous only" in str(e.value)


def test_scales_and_a_stored_from_registers_ptx(ptxas):
    sig = ("a_ptr:*fp32:16,b_desc:desc<fp8e4nv,128x128>,sa_ptr:*u8:16,sb_ptr:*u8:16,"
           "c_ptr:*fp32:16,sa_out_ptr:*u8:16,K=128,BN=128")
    ptx = compile_kernel("scaled_from_registers", sig)
    # fp8 A: 128 values a row, four to a 32-bit column: 32 columns, packed, in messages of 8.
    assert len(re.findall(r"tcgen05\.st\.sync\.aligned\.32x32b\.x8\.b32 \[%r\d+\], "
                          r"\{(?:%r\d+, ){7}%r\d+\};", ptx)) == 4
    # Each scale tile: the warp group's rows through shared memory, then each warp writes the
    # four rows of its lanes (32 c + l) into columns 0-3 of its own lane quarter.
    assert len(re.findall(r"tcgen05\.st\.sync\.aligned\.32x32b\.x4\.b32 \[%r\d+\], "
                          r"\{%r\d+, %r\d+, %r\d+, %r\d+\};", ptx)) == 2
    # The read back: the four columns of the thread's lane, then through shared memory.
    assert re.search(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x4\.b32 \{(%r\d+, ){3}%r\d+\}, "
                     r"\[%r\d+\];", ptx)
    # A from tensor memory: the [a-tmem] form, 32 elements (8 columns) a step.
    mma = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::mxf8f6f4\.block_scale\.scale_vec::1X "
                     r"\[%r\d+\], \[(%r\d+)\], %rd\d+, %r\d+, \[%r\d+\], \[%r\d+\], %p\d+;", ptx)
    assert len(mma) == 4
    ptxas(ptx, arch="sm_100a")
