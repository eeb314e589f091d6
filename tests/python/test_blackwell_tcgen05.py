"""Blackwell (sm_100a) tensor memory and tcgen05 MMA (issue 19): the interpreter's values against
NumPy, its reports of planted synchronization bugs at the kernel's line, and the PTX of each new
form (tcgen05.alloc / relinquish_alloc_permit / dealloc, tcgen05.st / ld with their waits,
tcgen05.mma with its instruction descriptor, tcgen05.commit) checked against the PTX ISA's syntax
and assembled by ptxas for sm_100a. No Blackwell GPU ran any of this."""
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww

import blackwell_tmem_kernels as bk
from blackwell_testing import descriptor, eighths, line_of

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")




def run_gemm(M, N, K, read_early=False, BN=64, BK=32, monkeypatch=None):
    rng = np.random.default_rng(M * 7 + N)
    a, b = eighths(rng, (M, K)), eighths(rng, (K, N))
    c = np.full((M, N), np.nan, np.float16)
    bk.tmem_gemm[(ww.cdiv(M, 128), ww.cdiv(N, BN))](
        descriptor(a, [128, BK]), descriptor(b, [BK, BN]), c, M, N, K, BM=128, BN=BN, BK=BK,
        READ_EARLY=read_early, num_warps=4)
    return a, b, c


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


@pytest.mark.parametrize("M,N,K,BN,BK", [(128, 64, 32, 64, 32), (200, 104, 96, 64, 32),
                                         (130, 128, 160, 128, 64)])
def test_tmem_gemm_matches_numpy(interpret, M, N, K, BN, BK):
    a, b, c = run_gemm(M, N, K, BN=BN, BK=BK)
    np.testing.assert_array_equal(c, (a.astype(np.float64) @ b).astype(np.float16))


def test_tensor_memory_alias_distinct_members_keep_their_own_columns(interpret, requires_ptxas):
    # Members of a distinct reuse_group lie side by side in the spec's columns: a stored tile and
    # an MMA result both survive.
    rng = np.random.default_rng(0)
    BN = 64
    x = rng.standard_normal((128, BN)).astype(np.float32)
    a, b = eighths(rng, (128, 16)), eighths(rng, (16, BN))
    out = np.zeros((128, BN), np.float32)
    bk.tmem_alias_members[(1,)](x, descriptor(a, [128, 16]), descriptor(b, [16, BN]), out, BN=BN)
    np.testing.assert_allclose(out, x + 2 * (a.astype(np.float64) @ b), rtol=1e-6, atol=1e-6)
    sig = "x_ptr:*fp32:16,a_desc:desc<fp16,128x16>,b_desc:desc<fp16,16x64>,out_ptr:*fp32:16,BN=64"
    assert compile_kernel("tmem_alias_members", sig, stage="cubin").spill_bytes == 0


def test_reading_the_accumulator_before_its_commit_is_a_race(interpret):
    with pytest.raises(ww.InterpreterError) as e:
        run_gemm(128, 64, 96, read_early=True)
    msg = str(e.value)
    line = line_of(bk.tmem_gemm, "result = tlx.local_load(acc)")
    assert f"blackwell_tmem_kernels.py:{line}:" in msg
    assert "local_load reads tensor memory that tcgen05_mma" in msg
    assert "tcgen05 commit" in msg and "the MMA was issued here" in msg


def test_accumulating_into_tensor_memory_nothing_wrote_is_reported(interpret):
    out = np.zeros((128, 32), np.float32)
    with pytest.raises(ww.InterpreterError) as e:
        bk.tmem_unwritten[(1,)](out, BN=32, ACCUMULATE=True, num_warps=4)
    line = line_of(bk.tmem_unwritten, "tlx.async_dot(a, b")
    assert f"blackwell_tmem_kernels.py:{line}:" in str(e.value)
    assert "tcgen05_mma reads tensor memory that nothing wrote" in str(e.value)


def test_loading_tensor_memory_nothing_wrote_gives_garbage(interpret):
    # As on the GPU, whose columns hold whatever they held (TLX's attention tutorials load their
    # accumulator once before the first MMA overwrites it): here the poison of fresh memory.
    out = np.zeros((128, 32), np.float32)
    bk.tmem_unwritten[(1,)](out, BN=32, ACCUMULATE=False, num_warps=4)
    assert np.isnan(out).all()


def test_tmem_store_slice_and_load(interpret):
    x = np.arange(128 * 32, dtype=np.float32).reshape(128, 32) / 64
    out = np.zeros_like(x)
    bk.tmem_round_trip[(1,)](x, out, BN=32, num_warps=4)
    np.testing.assert_array_equal(out, x * 2 + 1)


# ---- PTX for sm_100a ----

def compile_kernel(name, signature, target="sm_100a", num_warps=4, stage="ptx"):
    path = Path(bk.__file__)
    return native_loader.native().compile([(str(path), path.read_text())], name, signature, {},
                                          target=target, num_warps=num_warps, stage=stage)


GEMM_SIG = ("a_desc:desc<fp16,128x32>,b_desc:desc<fp16,32x64>,c_ptr:*fp16:16,M:i32,N:i32,K:i32,"
            "BM=128,BN=64,BK=32,READ_EARLY=0")


def ptx_text(result):
    return result if isinstance(result, str) else getattr(result, "ptx", None) or result["ptx"]


def test_tcgen05_forms_in_the_ptx_and_ptxas_accepts(ptxas):
    ptx = ptx_text(compile_kernel("tmem_gemm", GEMM_SIG))
    # One allocation of a power of two (>= 32) columns by warp 0, its permit given up, and the
    # matching dealloc before the kernel returns.
    assert re.search(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], 64;",
                     ptx)
    assert "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" in ptx
    assert re.search(r"tcgen05\.dealloc\.cta_group::1\.sync\.aligned\.b32 %r\d+, 64;", ptx)
    # K = 32 of fp16 is two MMAs of K = 16: [d-tmem], a-desc, b-desc, idesc, enable-input-d.
    mmas = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], %rd\d+, %rd\d+, (%r\d+), "
                      r"%p\d+;", ptx)
    assert len(mmas) == 2
    # Instruction descriptor: D f32 (bit 4), A / B fp16, B N-major (bit 16), N >> 3 at bit 17,
    # M >> 4 at bit 24.
    idesc = (1 << 4) | (1 << 16) | ((64 >> 3) << 17) | ((128 >> 4) << 24)
    assert re.search(rf"mov\.b32 {re.escape(mmas[0])}, {idesc};", ptx) or f", {idesc};" in ptx
    assert len(re.findall(r"tcgen05\.commit\.cta_group::1\.mbarrier::arrive::one\.shared::cluster"
                          r"\.b64 \[%r\d+\];", ptx)) == 2  # the MMA's mBarriers and the final one
    assert re.search(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x64\.b32 \{(%f\d+, ){63}%f\d+\}, "
                     r"\[%r\d+\];", ptx)
    assert "tcgen05.wait::ld.sync.aligned;" in ptx
    assert "tcgen05.fence::after_thread_sync;" in ptx
    ptxas(ptx, arch="sm_100a")


def test_tmem_store_and_slice_ptx(ptxas):
    ptx = ptx_text(compile_kernel("tmem_round_trip", "x_ptr:*fp32:16,out_ptr:*fp32:16,BN=32"))
    assert re.search(r"tcgen05\.st\.sync\.aligned\.32x32b\.x32\.b32 \[%r\d+\], \{(%f\d+, ){31}%f\d+\};",
                     ptx)
    assert "tcgen05.wait::st.sync.aligned;" in ptx
    ptxas(ptx, arch="sm_100a")


def test_tcgen05_needs_sm100a():
    with pytest.raises(ww.CompilationError) as e:
        compile_kernel("tmem_gemm", GEMM_SIG, target="sm_90a")
    assert "sm_100a" in str(e.value)


def test_tmem_subslice(interpret):
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / 16
    out = np.zeros((128, 32), np.float32)
    bk.tmem_subslice_halves[(1,)](x, out, BN=32, num_warps=4)
    np.testing.assert_array_equal(out, x[:, :32] + 2 * x[:, 32:])


def test_tmem_subslice_ptx(ptxas):
    ptx = ptx_text(compile_kernel("tmem_subslice_halves", "x_ptr:*fp32:16,out_ptr:*fp32:16,BN=32"))
    # Two loads of 32 columns, the second 32 columns further along the allocation.
    loads = re.findall(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x32\.b32 \{[^}]*\}, \[(%r\d+)\];", ptx)
    assert len(loads) == 2
    assert re.search(r"add\.u32 %r\d+, %r\d+, 32;", ptx)
    ptxas(ptx, arch="sm_100a")


def run_chain(BM, BK, BN, BD):
    rng = np.random.default_rng(BM + BN)
    a = (rng.integers(-4, 5, (BM, BK)) / 4).astype(np.float16)
    b = (rng.integers(-4, 5, (BK, BN)) / 4).astype(np.float16)
    v = (rng.integers(-4, 5, (BN, BD)) / 4).astype(np.float16)
    out = np.full((BM, BD), np.nan, np.float32)
    bk.tmem_chain[(1,)](descriptor(a, [BM, BK]), descriptor(b, [BK, BN]), descriptor(v, [BN, BD]),
                        out, BM=BM, BK=BK, BN=BN, BD=BD, num_warps=4)
    p = (a.astype(np.float64) @ b).astype(np.float16)
    np.testing.assert_array_equal(out, (p.astype(np.float64) @ v).astype(np.float32))


@pytest.mark.parametrize("BM,BK,BN,BD", [(128, 64, 64, 32), (64, 32, 128, 64)])
def test_fp16_tmem_tile_as_mma_a_operand(interpret, BM, BK, BN, BD):
    run_chain(BM, BK, BN, BD)


def chain_ptx(BM, BK, BN, BD):
    return ptx_text(compile_kernel(
        "tmem_chain", f"a_desc:desc<fp16,{BM}x{BK}>,b_desc:desc<fp16,{BK}x{BN}>,"
        f"v_desc:desc<fp16,{BN}x{BD}>,out_ptr:*fp32:16,BM={BM},BK={BK},BN={BN},BD={BD}"))


def test_fp16_tmem_and_a_from_tmem_ptx(ptxas):
    ptx = chain_ptx(128, 64, 64, 32)
    # The fp16 [128, 64] tile is 32 columns, two elements to a 32-bit word: stored packed, in
    # messages of 8 words (tmemMessageRegisters).
    st = re.findall(r"tcgen05\.st\.sync\.aligned\.32x32b\.x8\.b32 \[%r\d+\], \{((?:%r\d+, ){7}%r\d+)\};",
                    ptx)
    assert len(st) == 4
    first = st[0].split(", ")[0]
    assert re.search(rf"mov\.b32 {re.escape(first)}, \{{%h\d+, %h\d+\}};", ptx)
    # The second MMA reads A from tensor memory ([a-tmem]), K = 64 as four steps of 16 (8 columns
    # each), A K-major: no transpose bit 15; M = 128, N = 32.
    mmas = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], (\[%r\d+\]), %rd\d+, "
                      r"(%r\d+), %p\d+;", ptx)
    assert len(mmas) == 4
    idesc = (1 << 4) | (1 << 16) | ((32 >> 3) << 17) | ((128 >> 4) << 24)
    assert f", {idesc};" in ptx
    steps = [re.escape(m[0][1:-1]) for m in mmas[1:]]
    for k, reg in zip((8, 16, 24), steps):
        assert re.search(rf"add\.u32 {reg}, %r\d+, {k};", ptx)
    ptxas(ptx, arch="sm_100a")


def test_m64_tiles_ptx(ptxas):
    ptx = chain_ptx(64, 32, 128, 64)
    # [64, N] tiles (the PTX ISA's data path layout F): .16x32bx2 moves, threads 16-31 the second
    # half of the columns (immHalfSplitoff). S [64, 128] fp32: 64 words a thread, split at 64;
    # P [64, 128] fp16: 64 columns, 32 words, split at 32, stored in messages of 8 words;
    # O [64, 64] fp32: 32 words, split at 32.
    assert re.search(r"tcgen05\.ld\.sync\.aligned\.16x32bx2\.x64\.b32 \{(%r\d+, ){63}%r\d+\}, "
                     r"\[%r\d+\], 64;", ptx) or re.search(
        r"tcgen05\.ld\.sync\.aligned\.16x32bx2\.x64\.b32 \{(%f\d+, ){63}%f\d+\}, \[%r\d+\], 64;", ptx)
    assert len(re.findall(r"tcgen05\.st\.sync\.aligned\.16x32bx2\.x8\.b32 \[%r\d+\], 32, "
                          r"\{(?:%r\d+, ){7}%r\d+\};", ptx)) == 4
    assert re.search(r"tcgen05\.ld\.sync\.aligned\.16x32bx2\.x32\.b32 \{(%f\d+, ){31}%f\d+\}, "
                     r"\[%r\d+\], 32;", ptx)
    # M = 64 in the instruction descriptors (M >> 4 at bit 24): N = 128 and N = 64.
    for n in (128, 64):
        idesc = (1 << 4) | (1 << 16) | ((n >> 3) << 17) | ((64 >> 4) << 24)
        assert f", {idesc};" in ptx
    ptxas(ptx, arch="sm_100a")


def run_overlay(too_big=False):
    BM, BK, BN, BD = 128, 32, 64, 32
    rng = np.random.default_rng(11)
    a = (rng.integers(-4, 5, (BM, BK)) / 4).astype(np.float16)
    b = (rng.integers(-4, 5, (BK, BN)) / 4).astype(np.float16)
    v = (rng.integers(-4, 5, (BN, BD)) / 4).astype(np.float16)
    out = np.full((BM, BD), np.nan, np.float32)
    rowmax = np.full((BM, 1), np.nan, np.float32)
    bk.tmem_overlay[(1,)](descriptor(a, [BM, BK]), descriptor(b, [BK, BN]), descriptor(v, [BN, BD]),
                          out, rowmax, BM=BM, BK=BK, BN=BN, BD=BD, TOO_BIG=too_big, num_warps=4)
    s = a.astype(np.float64) @ b
    np.testing.assert_array_equal(out, (s.astype(np.float16).astype(np.float64) @ v))
    np.testing.assert_array_equal(rowmax[:, 0], s.max(1))


def test_tmem_reuse_overlays_columns(interpret):
    run_overlay()


def test_tmem_reuse_that_does_not_fit_is_reported(interpret):
    with pytest.raises(ww.InterpreterError) as e:
        run_overlay(too_big=True)
    assert f"blackwell_tmem_kernels.py:{line_of(bk.tmem_overlay, 'p_tiles = tlx.local_alloc')}:" \
        in str(e.value)
    assert "needs more tensor-memory columns (96) than it has (64)" in str(e.value)


def test_tmem_reuse_ptx(ptxas):
    sig = ("a_desc:desc<fp16,128x32>,b_desc:desc<fp16,32x64>,v_desc:desc<fp16,64x32>,"
           "out_ptr:*fp32:16,rowmax_ptr:*fp32:16,BM=128,BK=32,BN=64,BD=32,TOO_BIG=0")
    ptx = ptx_text(compile_kernel("tmem_overlay", sig))
    # S's 64 columns, then o's 32: 96, allocated as 128; the overlays add none.
    assert re.search(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], "
                     r"128;", ptx)
    # p[1] starts 32 columns in (S's upper half), m[1] one column in: the packed fp16 store of 32
    # words (four messages of 8) and the one-column load.
    assert len(re.findall(r"tcgen05\.st\.sync\.aligned\.32x32b\.x8\.b32", ptx)) == 4
    assert re.search(r"tcgen05\.st\.sync\.aligned\.32x32b\.x1\.b32 \[%r\d+\], \{%f\d+\};", ptx)
    assert re.search(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x1\.b32 \{%f\d+\}, \[%r\d+\];", ptx)
    ptxas(ptx, arch="sm_100a")
    with pytest.raises(ww.CompilationError) as e:
        compile_kernel("tmem_overlay", sig.replace("TOO_BIG=0", "TOO_BIG=1"))
    assert "needs 96 tensor-memory columns where that allocation has 64" in str(e.value)


def test_one_threads_mmas_are_ordered_by_the_tensor_core(interpret):
    STEPS, BM, BK, BN, BD = 3, 128, 32, 64, 32
    rng = np.random.default_rng(5)
    a = (rng.integers(-4, 5, (BM, STEPS * BK)) / 4).astype(np.float16)
    b = (rng.integers(-4, 5, (STEPS * BK, BN)) / 4).astype(np.float16)
    v = (rng.integers(-4, 5, (STEPS * BN, BD)) / 4).astype(np.float16)
    out = np.full((BM, BD), np.nan, np.float32)
    bk.tmem_overlay_steps[(1,)](descriptor(a, [BM, BK]), descriptor(b, [BK, BN]),
                                descriptor(v, [BN, BD]), out, STEPS=STEPS, BM=BM, BK=BK, BN=BN,
                                BD=BD, num_warps=4)
    ref = np.zeros((BM, BD))
    for k in range(STEPS):
        s = a[:, k * BK:(k + 1) * BK].astype(np.float64) @ b[k * BK:(k + 1) * BK]
        ref += s.astype(np.float16).astype(np.float64) @ v[k * BN:(k + 1) * BN]
    np.testing.assert_array_equal(out, ref.astype(np.float32))


def fp16_pair(v):
    # One 32-bit tensor-memory column holding two fp16 copies of v (packed, as TLX's P).
    h = int(np.array(v, np.float16).view(np.uint16))
    return (h << 16) | h


@pytest.mark.parametrize("k", [0, 1, 3])
def test_tmem_alias_subtiles_lie_where_tlx_puts_them(interpret, k):
    # TLX (StorageAliasAllocation) gives member buffer i the physical index s i + o / u + (i % g)
    # of its own buffers: QK (64 columns) at 0, 64; P (16 columns, s = 2, g = 2) at 0, 48, 64,
    # 112; alpha (1 column, s = 64, o = 32) at 32, 96.
    out = np.zeros((2, 128, 64), np.float32)
    bk.tmem_alias_subtiles[(1,)](out, k)
    bits = out.view(np.uint32)
    want = np.zeros((2, 64), np.uint32)
    for j in range(2):
        want[j] = np.arange(64, dtype=np.float32).__add__(1000 * j).view(np.uint32)
    p_cols = {0: (0, 0), 1: (0, 48), 2: (1, 0), 3: (1, 48)}
    for i, (j, c) in p_cols.items():
        want[j, c:c + 16] = fp16_pair(5 if i == k else i + 1)
    for j in range(2):
        want[j, 32] = np.float32(100 + j).view(np.uint32)
    for j in range(2):
        np.testing.assert_array_equal(bits[j], np.broadcast_to(want[j], (128, 64)))


def test_tmem_alias_subtiles_ptx(ptxas):
    ptx = ptx_text(compile_kernel("tmem_alias_subtiles", "out_ptr:*fp32:16,k:i32"))
    # The spec's 128 columns, allocated once; P[k] at k * 32 + (k % 2) * 16 columns.
    assert re.search(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], "
                     r"128;", ptx)
    assert re.search(r"and\.b32 (%r\d+), %r\d+, 1;", ptx)
    assert re.search(r"mad\.lo\.s32 %r\d+, %r\d+, 32, %r\d+;", ptx)
    assert re.search(r"mad\.lo\.s32 %r\d+, %r\d+, 16, %r\d+;", ptx)
    ptxas(ptx, arch="sm_100a")


def run_alias_race(clash):
    rng = np.random.default_rng(3)
    a, b = eighths(rng, (128, 16)), eighths(rng, (16, 64))
    out = np.zeros((128, 64), np.float32)
    bk.tmem_alias_race[(1,)](descriptor(a, [128, 16]), descriptor(b, [16, 64]), out, CLASH=clash)
    return a, b, out


def test_tmem_alias_member_over_an_mma_in_flight_is_a_race(interpret):
    # P[1] lies over QK[0]'s columns 48..63, which the MMA still writes.
    with pytest.raises(ww.InterpreterError) as e:
        run_alias_race(True)
    assert f"blackwell_tmem_kernels.py:{line_of(bk.tmem_alias_race, 'local_store(p[1]')}:" \
        in str(e.value)
    assert ("overwrites tensor memory that tcgen05_mma by the program is still writing"
            in str(e.value))


def test_tmem_alias_member_apart_from_an_mma_in_flight_is_not(interpret):
    # alpha[1] lies in QK[1]: the MMA's result in QK[0] survives whole.
    a, b, out = run_alias_race(False)
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b)
