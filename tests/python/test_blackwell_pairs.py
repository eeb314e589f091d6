"""Blackwell (sm_100a) CTA pairs and the synchronous tcgen05 MMA (issue 19), with TLX's semantics:
async_descriptor_load(two_ctas=True) lands in the issuing CTA and completes its bytes on the pair
leader's barrier; async_dot(two_ctas=True) is one MMA of 2M x N issued by the leader (even cluster
rank) over both CTAs' operands and tensor memory; its commits (mBarriers, tcgen05_commit) arrive on
the barriers of both CTAs; two_ctas=False is the one-CTA form; async_dot into tensor memory without
mBarriers waits for its MMA. Checked: the interpreter's results against NumPy, its reports of
planted bugs at the kernel's line (a pair out of step, a peer reading its accumulator before the
commit), and the PTX of each form against the PTX ISA's syntax, assembled by ptxas for sm_100a.
No Blackwell GPU ran any of this."""
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww

import blackwell_pair_kernels as pk
from blackwell_testing import descriptor, eighths, line_of

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")




@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


def run_pair_gemm(M, N, K, BN=128, BK=32, plant=0):
    rng = np.random.default_rng(M + 3 * N + K)
    a, b = eighths(rng, (M, K)), eighths(rng, (K, N))
    c = np.full((M, N), np.nan, np.float16)
    pairs_m = (ww.cdiv(M, 128) + 1) // 2 * 2  # whole clusters of 2 along M
    pk.pair_gemm[(pairs_m, ww.cdiv(N, BN))](
        descriptor(a, [128, BK]), descriptor(b, [BK, BN // 2]), c, M, N, K, BM=128, BN=BN, BK=BK,
        PLANT=plant, num_warps=4, ctas_per_cga=(2, 1, 1))
    return a, b, c


@pytest.mark.parametrize("M,N,K,BN", [(256, 128, 96, 128), (300, 200, 160, 64),
                                      (512, 256, 64, 256)])
def test_cta_pair_gemm_matches_numpy(interpret, M, N, K, BN):
    a, b, c = run_pair_gemm(M, N, K, BN=BN)
    np.testing.assert_array_equal(c, (a.astype(np.float64) @ b).astype(np.float16))


def test_leader_reading_the_peers_operand_before_it_lands_is_reported(interpret):
    # The leader's barrier counts its own bytes only: its wait passes before the peer's copy lands.
    with pytest.raises(ww.InterpreterError) as e:
        run_pair_gemm(256, 128, 96, plant=1)
    msg = str(e.value)
    assert f"blackwell_pair_kernels.py:{line_of(pk.pair_gemm, 'tlx.async_dot(')}:" in msg
    assert "tcgen05_mma reads shared memory that async_desc_load by program (1, 0, 0)" in msg


def test_peer_reading_its_accumulator_before_the_commit_is_reported(interpret):
    with pytest.raises(ww.InterpreterError) as e:
        run_pair_gemm(256, 128, 96, plant=2)
    msg = str(e.value)
    assert f"blackwell_pair_kernels.py:{line_of(pk.pair_gemm, 'result = tlx.local_load')}:" in msg
    assert "local_load reads tensor memory that tcgen05_mma by program (0, 0, 0)" in msg
    assert "(program (1, 0, 0))" in msg


def test_pair_kernel_needs_clusters_of_pairs(interpret):
    rng = np.random.default_rng(0)
    a, b = eighths(rng, (128, 32)), eighths(rng, (32, 128))
    c = np.zeros((128, 128), np.float16)
    with pytest.raises(ww.InterpreterError) as e:
        pk.pair_gemm[(1, 1)](descriptor(a, [128, 32]), descriptor(b, [32, 64]), c, 128, 128, 32,
                             BM=128, BN=128, BK=32, PLANT=0, num_warps=4)
    assert "pair of CTAs" in str(e.value) and "ctas_per_cga=(2, 1, 1)" in str(e.value)


@pytest.mark.parametrize("skip_first", [False, True])
def test_synchronous_async_dot_matches_numpy(interpret, skip_first):
    M, N, K = 200, 96, 128
    rng = np.random.default_rng(7)
    a, b = eighths(rng, (M, K)), eighths(rng, (K, N))
    c = np.full((M, N), np.nan, np.float16)
    pk.sync_gemm[(ww.cdiv(M, 128), ww.cdiv(N, 64))](
        descriptor(a, [128, 32]), descriptor(b, [32, 64]), c, M, N, K, BM=128, BN=64, BK=32,
        SKIP_FIRST=skip_first, num_warps=4)
    first = 32 if skip_first else 0
    ref = a[:, first:].astype(np.float64) @ b[first:]
    np.testing.assert_array_equal(c, ref.astype(np.float16))


# ---- PTX for sm_100a ----

def compile_kernel(name, signature, target="sm_100a", num_warps=4, ctas_per_cga=None):
    path = Path(pk.__file__)
    kw = {"num_ctas": 2, "cluster_dims": list(ctas_per_cga)} if ctas_per_cga else {}
    return native_loader.native().compile([(str(path), path.read_text())], name, signature, {},
                                          target=target, num_warps=num_warps, stage="ptx", **kw)


def ptx_text(result):
    return result if isinstance(result, str) else getattr(result, "ptx", None) or result["ptx"]


PAIR_SIG = ("a_desc:desc<fp16,128x32>,b_desc:desc<fp16,32x64>,c_ptr:*fp16:16,M:i32,N:i32,K:i32,"
            "BM=128,BN=128,BK=32,PLANT=0")


def test_cta_pair_forms_in_the_ptx_and_ptxas_accepts(ptxas):
    ptx = ptx_text(compile_kernel("pair_gemm", PAIR_SIG, ctas_per_cga=(2, 1, 1)))
    # Every tcgen05 op of the kernel is the pair's (PTX ISA: one .cta_group per kernel).
    assert "cta_group::1" not in ptx
    assert re.search(r"tcgen05\.alloc\.cta_group::2\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], "
                     r"128;", ptx)
    assert "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" in ptx
    # The pair meets before its collective dealloc.
    dealloc = re.search(r"tcgen05\.dealloc\.cta_group::2\.sync\.aligned\.b32 %r\d+, 128;", ptx)
    assert dealloc
    before = ptx[:dealloc.start()]
    assert before.rfind("barrier.cluster.wait.acquire") > before.rfind("tcgen05.mma")
    # Loads: this CTA's buffer, the leader's barrier (mapa to rank & ~1), .cta_group::2.
    loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::"
                       r"complete_tx::bytes\.cta_group::2 \[%r\d+\], \[%rd\d+, \{%r\d+, %r\d+\}\], "
                       r"\[(%r\d+)\];", ptx)
    assert len(loads) == 2
    for bar in loads:
        assert re.search(rf"mapa\.shared::cluster\.u32 {re.escape(bar)}, %r\d+, %r\d+;", ptx)
    assert re.search(r"and\.b32 %r\d+, %r\d+, 0xFFFFFFFE;", ptx)
    # The MMA: 256 x 128 (M = 2 x 128 rows, N = the pair's 128 columns), K = 32 as two of 16,
    # issued only by the leader.
    mmas = re.findall(r"tcgen05\.mma\.cta_group::2\.kind::f16 \[%r\d+\], %rd\d+, %rd\d+, %r\d+, "
                      r"%p\d+;", ptx)
    assert len(mmas) == 2
    idesc = (1 << 4) | (1 << 16) | ((128 >> 3) << 17) | ((256 >> 4) << 24)
    assert f", {idesc};" in ptx
    assert "%cluster_ctarank" in ptx
    # Commits multicast to the pair: the 16-bit mask 3 << (rank & ~1).
    commits = re.findall(r"tcgen05\.commit\.cta_group::2\.mbarrier::arrive::one\.shared::cluster"
                         r"\.multicast::cluster\.b64 \[%r\d+\], (%h\d+);", ptx)
    assert len(commits) == 2  # the MMA's mBarriers and the final tcgen05_commit
    assert re.search(rf"cvt\.u16\.u32 {re.escape(commits[0])}, %r\d+;", ptx)
    assert re.search(r"shl\.b32 %r\d+, 3, %r\d+;", ptx)
    ptxas(ptx, arch="sm_100a")


def test_two_ctas_false_is_the_one_cta_form():
    sig = "a_desc:desc<fp16,128x32>,b_desc:desc<fp16,32x64>,c_ptr:*fp32:16,BM=128,BN=64,BK=32"

    def body(name):
        ptx = ptx_text(compile_kernel(name, sig))
        lines = [l for l in ptx.splitlines() if not l.strip().startswith((".loc", ".file"))]
        return "\n".join(lines).replace(name, "KERNEL")

    plain = body("one_step")
    assert body("one_step_false") == plain
    assert "cta_group::2" not in plain and "tcgen05.mma.cta_group::1" in plain


def test_synchronous_async_dot_ptx(ptxas):
    ptx = ptx_text(compile_kernel(
        "sync_gemm", "a_desc:desc<fp16,128x32>,b_desc:desc<fp16,32x64>,c_ptr:*fp16:16,M:i32,"
        "N:i32,K:i32,BM=128,BN=64,BK=32,SKIP_FIRST=1"))
    # Its own mbarrier: initialized, committed to (outside the predicated MMA), waited on by every
    # thread, invalidated.
    mma = ptx.index("tcgen05.mma.cta_group::1.kind::f16")
    commit = re.search(r"tcgen05\.commit\.cta_group::1\.mbarrier::arrive::one\.shared::cluster"
                       r"\.b64 \[(%r\d+)\];", ptx)
    assert commit
    bar = re.escape(commit.group(1))
    init = [m for m in re.finditer(rf"mbarrier\.init\.shared::cta\.b64 \[{bar}\], 1;", ptx)
            if m.start() < mma][-1]
    wait = re.search(rf"mbarrier\.try_wait\.parity\.shared::cta\.b64 %p\d+, \[{bar}\], 0;", ptx)
    inval = re.search(rf"mbarrier\.inval\.shared::cta\.b64 \[{bar}\];", ptx)
    assert wait and inval
    assert init.start() < mma < commit.start() < wait.start() < inval.start()
    skip = re.search(r"tcgen05_mma_skip_\d+:", ptx)
    assert skip and mma < skip.start() < commit.start()
    ptxas(ptx, arch="sm_100a")


def test_pair_forms_need_sm100a_and_pairs():
    with pytest.raises(ww.CompilationError) as e:
        compile_kernel("pair_gemm", PAIR_SIG)  # no cluster
    assert "pair of CTAs" in str(e.value) and "ctas_per_cga=(2, 1, 1)" in str(e.value)
    with pytest.raises(ww.CompilationError) as e:
        compile_kernel("pair_gemm", PAIR_SIG, target="sm_90a", ctas_per_cga=(2, 1, 1))
    assert "sm_100a" in str(e.value)
