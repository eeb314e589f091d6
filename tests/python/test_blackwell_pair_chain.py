"""Blackwell (sm_100a) CTA pairs, continued (issue 19), with TLX's semantics: the synchronous
two-CTA async_dot (the leader issues the pair's MMA and waits for it; the peer's call issues
nothing and returns), A read from tensor memory by a pair's MMA (each CTA's own rows), and pairs
of M = 64 rows per CTA, whose [64, N] accumulator lies in 128 lanes of N / 2 columns and takes
N / 2 columns of tensor memory (TLX's TwoCTA_RHS; storage_alias_spec members placed accordingly).
Checked: the interpreter's results against NumPy, its reports of planted bugs at the kernel's
line, and the PTX of each form against the PTX ISA's syntax, assembled by ptxas for sm_100a. No
Blackwell GPU ran any of this."""
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww

import blackwell_pair_chain_kernels as ck
from blackwell_testing import descriptor, eighths, line_of

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


def run_chain(M, K=32, N1=64, N2=64, plant=0):
    rng = np.random.default_rng(M + K + N1 + N2)
    a, b = eighths(rng, (M, K)), eighths(rng, (K, N1))
    v = (eighths(rng, (N1, N2)) / 4).astype(np.float16)
    o = np.full((M, N2), np.nan, np.float16)
    pairs = (ww.cdiv(M, 128) + 1) // 2 * 2
    ck.pair_chain[(pairs, 1)](descriptor(a, [128, K]), descriptor(b, [K, N1 // 2]),
                              descriptor(v, [N1, N2 // 2]), o, M, K=K, N1=N1, N2=N2, PLANT=plant,
                              num_warps=4, ctas_per_cga=(2, 1, 1))
    return a, b, v, o


@pytest.mark.parametrize("M,K,N1,N2", [(256, 32, 64, 64), (300, 64, 128, 32)])
def test_synchronous_pair_chain_matches_numpy(interpret, M, K, N1, N2):
    a, b, v, o = run_chain(M, K, N1, N2)
    p = (a.astype(np.float64) @ b).astype(np.float16)
    np.testing.assert_array_equal(o, (p.astype(np.float64) @ v).astype(np.float16))


def test_leader_reading_the_peers_tensor_memory_before_it_is_written_is_reported(interpret):
    with pytest.raises(ww.InterpreterError) as e:
        run_chain(256, plant=1)
    msg = str(e.value)
    assert f"blackwell_pair_chain_kernels.py:{line_of(ck.pair_chain, 'tlx.async_dot(p, v')}:" in msg
    # The peer has not written its P yet, or is writing it: either is reported.
    assert re.search(r"tcgen05_mma reads tensor memory that (nothing wrote|local_store by "
                     r"program \(1, 0, 0\))", msg)


def test_peer_reading_before_the_synchronous_mma_completed_is_reported(interpret):
    # A synchronous MMA of the pair makes only the leader wait; the peer must wait on a commit.
    with pytest.raises(ww.InterpreterError) as e:
        run_chain(256, plant=2)
    msg = str(e.value)
    # Reported at the read, or at the MMA that overwrites what the read saw (with the read as a
    # note): the peer read before the leader issued it.
    read = f"blackwell_pair_chain_kernels.py:{line_of(ck.pair_chain, 'result = tlx.local_load')}:"
    assert read in msg
    assert re.search(r"(local_load reads tensor memory that tcgen05_mma by program \(0, 0, 0\)|"
                     r"tcgen05_mma overwrites tensor memory that local_load by program "
                     r"\(1, 0, 0\))", msg)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_peer_read_unordered_with_the_leaders_mma_is_reported_under_every_schedule(
        interpret, monkeypatch, seed):
    # The peer's read of O races with the pair's MMA that the leader issues into the peer's
    # tensor memory, whichever runs first: the seeded schedules differ, the report does not.
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    with pytest.raises(ww.InterpreterError) as e:
        run_chain(256, plant=2)
    assert re.search(r"(local_load reads tensor memory that tcgen05_mma by program \(0, 0, 0\)|"
                     r"tcgen05_mma overwrites tensor memory that local_load by program "
                     r"\(1, 0, 0\))", str(e.value))


@pytest.mark.parametrize("seed", [0, 1])
def test_peer_read_ordered_before_the_leaders_mma_is_not_reported(interpret, monkeypatch, seed):
    # The control: the peer reads its O (zeroed before the cluster barrier) before its p_ready
    # arrival, which the leader waits for before issuing P @ V into that O: ordered, no report.
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    a, b, v, o = run_chain(256, plant=3)
    p = (a.astype(np.float64) @ b).astype(np.float16)
    np.testing.assert_array_equal(o, (p.astype(np.float64) @ v).astype(np.float16))


def run_m64(M, K=32, N=128, plant=0):
    rng = np.random.default_rng(M + K + N)
    a, b = eighths(rng, (M, K)), eighths(rng, (K, N))
    c = np.full((M, N), np.nan, np.float32)
    pairs = (ww.cdiv(M, 64) + 1) // 2 * 2
    ck.pair_m64[(pairs, 1)](descriptor(a, [64, K]), descriptor(b, [K, N // 2]), c, M, K=K, N=N,
                            PLANT=plant, num_warps=4, ctas_per_cga=(2, 1, 1))
    return a, b, c


@pytest.mark.parametrize("M,K,N", [(128, 32, 128), (200, 64, 64), (256, 16, 256)])
def test_pair_of_64_row_ctas_matches_numpy(interpret, M, K, N):
    a, b, c = run_m64(M, K, N)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b)


def test_reading_the_64_row_lanes_before_the_commit_is_reported(interpret):
    with pytest.raises(ww.InterpreterError) as e:
        run_m64(128, plant=1)
    msg = str(e.value)
    assert f"blackwell_pair_chain_kernels.py:{line_of(ck.pair_m64, 'result = tlx.local_load')}:" in msg
    assert "local_load reads tensor memory that tcgen05_mma by program (0, 0, 0)" in msg
    assert "is still writing" in msg


@pytest.mark.parametrize("M,K,N", [(128, 32, 128), (200, 64, 64)])
def test_loading_the_split_accumulator_itself(interpret, M, K, N):
    # local_load of the [64, N] accumulator unfolds its lanes: row r's columns N / 2.. come from
    # lane 64 + r.
    a, b, c = run_m64(M, K, N, plant=2)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b)


def run_m64_tmem_a(K, N, store_acc, seed=0):
    rng = np.random.default_rng(seed + K + N)
    a, b = eighths(rng, (128, K)), eighths(rng, (K, N))
    c0 = eighths(rng, (128, N)).astype(np.float32)
    c = c0.copy() if store_acc else np.full((128, N), np.nan, np.float32)
    ck.pair_m64_tmem_a[(2, 1)](descriptor(a, [64, K]), descriptor(b, [K, N // 2]), c, K=K, N=N,
                               STORE_ACC=store_acc, num_warps=4, ctas_per_cga=(2, 1, 1))
    return c, a.astype(np.float64) @ b + (c0 if store_acc else 0)


@pytest.mark.parametrize("K,N,store_acc", [(32, 128, False), (64, 64, True), (16, 256, True)])
def test_pair_of_64_row_ctas_with_a_in_tensor_memory(interpret, K, N, store_acc):
    # TLX's test_async_dot_blackwell_2cta_tma[128-True]: A [64, K] stored into tensor memory
    # (rows in lanes r and 64 + r), the [64, N] accumulator stored to and loaded from.
    c, ref = run_m64_tmem_a(K, N, store_acc)
    np.testing.assert_array_equal(c, ref)


# ---- PTX for sm_100a ----

def compile_kernel(name, signature, target="sm_100a", ctas_per_cga=(2, 1, 1)):
    path = Path(ck.__file__)
    return native_loader.native().compile(
        [(str(path), path.read_text())], name, signature, {}, target=target, num_warps=4,
        stage="ptx", num_ctas=2, cluster_dims=list(ctas_per_cga))


def ptx_text(result):
    return result if isinstance(result, str) else getattr(result, "ptx", None) or result["ptx"]


CHAIN_SIG = ("a_desc:desc<fp16,128x32>,b_desc:desc<fp16,32x32>,v_desc:desc<fp16,64x32>,"
             "o_ptr:*fp16:16,M:i32,K=32,N1=64,N2=64,PLANT=0")


def test_synchronous_pair_mma_and_tensor_memory_a_in_the_ptx(ptxas):
    ptx = ptx_text(compile_kernel("pair_chain", CHAIN_SIG))
    assert "cta_group::1" not in ptx
    # Two MMAs of the pair: S = A @ B with A in shared memory (a descriptor), O = P @ V with A in
    # tensor memory ([a-tmem]); 256 x 64 each (M = 2 x 128), K = 32 (two steps of 16) and 64.
    smem_a = re.findall(r"tcgen05\.mma\.cta_group::2\.kind::f16 \[%r\d+\], %rd\d+, %rd\d+, %r\d+, "
                        r"%p\d+;", ptx)
    tmem_a = re.findall(r"tcgen05\.mma\.cta_group::2\.kind::f16 \[%r\d+\], \[%r\d+\], %rd\d+, "
                        r"%r\d+, %p\d+;", ptx)
    assert len(smem_a) == 2 and len(tmem_a) == 4
    idesc = (1 << 4) | (1 << 16) | ((64 >> 3) << 17) | ((256 >> 4) << 24)
    assert f", {idesc};" in ptx
    # The synchronous MMAs commit to their own barrier in the leader only (cta_group::2 without
    # multicast), and only the leader waits on it; the tcgen05_commits multicast to the pair.
    own = re.findall(r"tcgen05\.commit\.cta_group::2\.mbarrier::arrive::one\.shared::cluster\.b64 "
                     r"\[(%r\d+)\];", ptx)
    assert len(own) == 2
    multicast = re.findall(r"tcgen05\.commit\.cta_group::2\.mbarrier::arrive::one\.shared::cluster"
                           r"\.multicast::cluster\.b64 \[%r\d+\], %h\d+;", ptx)
    assert len(multicast) == 2
    for bar in own:
        wait = re.search(rf"mbarrier\.try_wait\.parity\.shared::cta\.b64 %p\d+, \[{re.escape(bar)}\], 0;",
                         ptx)
        assert wait
        # The wait is skipped where the CTA does not lead its pair.
        skip = ptx.rfind("@!%p", 0, wait.start())
        label = re.match(r"@!(%p\d+) bra (\$L_tcgen05_mma_waited_\d+);", ptx[skip:])
        assert label and ptx.index(label.group(2) + ":") > wait.start()
    ptxas(ptx, arch="sm_100a")


M64_SIG = "a_desc:desc<fp16,64x32>,b_desc:desc<fp16,32x64>,c_ptr:*fp32:16,M:i32,K=32,N=128,PLANT=0"


def test_pair_of_64_row_ctas_in_the_ptx(ptxas):
    ptx = ptx_text(compile_kernel("pair_m64", M64_SIG))
    # The pair's MMA is 128 x 128 (M = 2 x 64): the instruction descriptor's M field is 128 >> 4.
    mmas = re.findall(r"tcgen05\.mma\.cta_group::2\.kind::f16 \[(%r\d+)\], %rd\d+, %rd\d+, %r\d+, "
                      r"%p\d+;", ptx)
    assert len(mmas) == 2
    idesc = (1 << 4) | (1 << 16) | ((128 >> 3) << 17) | ((128 >> 4) << 24)
    assert f", {idesc};" in ptx
    # The [64, 128] accumulator takes 64 columns after `other`'s 32, aligned to its 64: columns
    # 64-127, so the kernel allocates 128 columns (256 when counted at 128).
    assert re.search(r"tcgen05\.alloc\.cta_group::2\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], "
                     r"128;", ptx)
    assert re.search(r"add\.u32 %r\d+, %r\d+, 64;", ptx)
    ptxas(ptx, arch="sm_100a")


def test_split_accumulator_load_in_the_ptx(ptxas):
    # The [64, 128] accumulator's 128 lanes of 64 columns: one tcgen05.ld .32x32b per thread's
    # lane (warp w % 4's quarter), 64 columns at the accumulator's first one.
    ptx = ptx_text(compile_kernel("pair_m64", M64_SIG.replace("PLANT=0", "PLANT=2")))
    assert len(re.findall(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x64\.b32", ptx)) == 1
    assert "16x32bx2" not in ptx
    ptxas(ptx, arch="sm_100a")


@pytest.mark.parametrize("K,N", [(32, 128), (64, 256)])
def test_pair_tensor_memory_a_and_accumulator_in_the_ptx(ptxas, K, N):
    ptx = ptx_text(compile_kernel(
        "pair_m64_tmem_a",
        f"a_desc:desc<fp16,64x{K}>,b_desc:desc<fp16,{K}x{N // 2}>,c_ptr:*fp32:16,K={K},N={N},"
        "STORE_ACC=1"))
    # A [64, K] fp16: K / 2 columns of all 128 lanes (32x32b, each warp its quarter); the
    # accumulator stored and loaded as 128 lanes of N / 2 columns.
    st = re.findall(r"tcgen05\.st\.sync\.aligned\.32x32b\.x(\d+)\.b32", ptx)
    ld = re.findall(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x(\d+)\.b32", ptx)
    assert sum(int(x) for x in st) == K // 2 + N // 2
    assert sum(int(x) for x in ld) == N // 2
    assert "16x32bx2" not in ptx
    # The pair's MMA reads A from tensor memory ([a-tmem]), 128 x N, K / 16 steps of 8 columns.
    mmas = re.findall(r"tcgen05\.mma\.cta_group::2\.kind::f16 \[%r\d+\], \[(%r\d+)\], %rd\d+, "
                      r"(%r\d+), %p\d+;", ptx)
    assert len(mmas) == K // 16
    idesc = (1 << 4) | (1 << 16) | ((N >> 3) << 17) | ((128 >> 4) << 24)
    assert re.search(rf"mov\.b32 {re.escape(mmas[0][1])}, {idesc};", ptx)
    for i, (a, _) in enumerate(mmas[1:], 1):
        assert re.search(rf"add\.u32 {re.escape(a)}, {re.escape(mmas[0][0])}, {8 * i};", ptx)
    ptxas(ptx, arch="sm_100a")


# ---- a pair's block-scaled MMA (mxfp8) ----

def run_pair_scaled(M, N, K, BN=128, BK=128, plant=0, seed=0):
    sc = pytest.importorskip("test_blackwell_scaled")
    a, b, sa, sb = sc.operands(M, N, K, "e4m3", "e4m3", seed)
    rn, rk = ww.cdiv(BN, 128), ww.cdiv(BK, 128)
    sa_l = sc.to_cublas_layout(sc.pad(sa, ww.cdiv(M, 128) * 128))
    sb_l = sc.to_cublas_layout(sc.pad(sb, ww.cdiv(N, BN) * rn * 128))
    c = np.full((M, N), np.nan, np.float32)
    pairs = (ww.cdiv(M, 128) + 1) // 2 * 2
    ck.pair_scaled[(pairs, ww.cdiv(N, BN))](
        sc.descriptor(a, [128, BK]), sc.descriptor(b, [BN // 2, BK]),
        sc.descriptor(sa_l, [1, 1, rk, 2, 256]), sc.descriptor(sb_l, [1, rn, rk, 2, 256]),
        c, M, N, K, BN=BN, BK=BK, PLANT=plant, num_warps=4, ctas_per_cga=(2, 1, 1))
    return c, sc.reference(a, b, sa, sb)


@pytest.mark.parametrize("M,N,K,BN,BK", [(256, 128, 256, 128, 128), (512, 256, 384, 256, 128),
                                         (256, 256, 512, 128, 256)])
def test_pair_block_scaled_mma_matches_numpy(interpret, M, N, K, BN, BK):
    c, ref = run_pair_scaled(M, N, K, BN, BK)
    np.testing.assert_array_equal(c, ref.astype(np.float32))


def test_pair_overwriting_scales_before_the_mma_completes_is_reported(interpret):
    with pytest.raises(ww.InterpreterError) as e:
        run_pair_scaled(256, 128, 256, plant=1)
    msg = str(e.value)
    assert f"blackwell_pair_chain_kernels.py:{line_of(ck.pair_scaled, 'as_desc, as_t')}:" in msg
    # The peer, which waits for nothing but `done`, overwrites a tile the pair's MMA may still
    # read, or its own previous copy still landing: the pair out of step, either way.
    assert re.search(r"overwrites shared memory that (tcgen05_mma by program \(0, 0, 0\) may "
                     r"still be reading|async_desc_load by program \(1, 0, 0\) is still "
                     r"writing)", msg)


SCALED_SIG = ("a_desc:desc<fp8e4nv,128x128>,b_desc:desc<fp8e4nv,64x128>,as_desc:desc<u8,1x1x1x2x256>,"
              "bs_desc:desc<u8,1x1x1x2x256>,c_ptr:*fp32:16,M:i32,N:i32,K:i32,BN=128,BK=128,PLANT=0")


def test_pair_block_scaled_forms_in_the_ptx(ptxas):
    ptx = ptx_text(compile_kernel("pair_scaled", SCALED_SIG))
    assert "cta_group::1" not in ptx
    # One MMA per 32 elements of K: 4 of them, 256 x 128 (M field 256 >> 7 = 2 in bits 27-28,
    # N >> 3 in 17-22, UE8M0 scales in bit 23; both operands K-major, no transpose bits), the
    # scale-factor IDs picking each step's byte.
    mmas = re.findall(r"tcgen05\.mma\.cta_group::2\.kind::mxf8f6f4\.block_scale\.scale_vec::1X "
                      r"\[%r\d+\], %rd\d+, %rd\d+, (%r\d+), \[%r\d+\], \[%r\d+\], %p\d+;", ptx)
    assert len(mmas) == 4
    for sid in range(4):
        idesc = (sid << 4) | ((128 >> 3) << 17) | (1 << 23) | (2 << 27) | (sid << 29)
        assert re.search(rf"mov\.b32 %r\d+, {idesc};", ptx), hex(idesc)
    # The scales (A: one 512-byte chunk of 128 rows; B: one of the pair's 128 columns) copied by
    # the leader into both CTAs' tensor memory, before the MMAs.
    cps = [m.start() for m in re.finditer(r"tcgen05\.cp\.cta_group::2\.32x128b\.warpx4 "
                                          r"\[%r\d+\], %rd\d+;", ptx)]
    assert len(cps) == 2 and max(cps) < ptx.index("tcgen05.mma.cta_group::2")
    ptxas(ptx, arch="sm_100a")
