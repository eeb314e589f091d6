"""fp8 K loops whose tl.dot has max_num_imprecise_acc (Triton's promotion: each BLOCK_K step's
wgmma chain sums into a zeroed partial accumulator that is added into the fp32 one; see
src/ir/DotTypes.h) are software-pipelined on sm_90a like the fast-accumulation loop: the tiles
arrive by cp.async (pointer loads) or TMA (host descriptors) into the stage ring num_stages - 1
iterations ahead, each step's MMA is an async wgmma into the partial, retired at the top of the
next iteration (wgmma.wait_group 0) and then added (src/transforms/SoftwarePipeline.cpp,
issuePromoted). A limit below BLOCK_K (several partials a step) leaves the loop unpipelined.

PTX: the loop's shape, ptxas without spills or C751x (wgmma serialization) notes, at the test
kernel's 128x128x128 tiles and at warpweave.ops.scaled_mm's promoted configurations (both tl
kernels). Interpreter: the pipelined Tile IR gives the unpipelined loop's results bit for bit
(num_stages=1), close to a float64 reference, ragged shapes, e4m3 / e5m2."""

import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

import eight_bit_dot_kernels as fk
from mma_testing import FP8_PAIRS, FP8_PTX_NAME, mmas

pytest.importorskip("warpweave._native")
ml_dtypes = pytest.importorskip("ml_dtypes")

NUMPY = {"fp8e4nv": ml_dtypes.float8_e4m3fn, "fp8e5": ml_dtypes.float8_e5m2}


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def cdiv(x, y):
    return -(-x // y)


@ww.jit
def persistent_promoted(a_desc, bt_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                        BK: tl.constexpr, NUM_PROGRAMS: tl.constexpr):
    """Tiles of C [M, N] (fp32) = A [M, K] @ B, B given as B^T [N, K] through host descriptors,
    a persistent loop over the tiles around the promoted K loop (its TMA ring's slot and phase
    carried through the tile loop)."""
    tiles_n = tl.cdiv(N, BN)
    for tile in range(tl.program_id(0), tl.cdiv(M, BM) * tiles_n, NUM_PROGRAMS):
        tm = tile // tiles_n
        tn = tile % tiles_n
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(tl.cdiv(K, BK)):
            a = a_desc.load([tm * BM, kk * BK])
            bt = bt_desc.load([tn * BN, kk * BK])
            acc = tl.dot(a, bt.T, acc, max_num_imprecise_acc=BK)
        rm = tm * BM + tl.arange(0, BM)
        rn = tn * BN + tl.arange(0, BN)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc,
                 mask=(rm[:, None] < M) & (rn[None, :] < N))


def fp8(rng, shape, dtype):
    # Normal values rounded to fp8: the fp32 sums round, so orders of addition show.
    return rng.standard_normal(shape).astype(np.float32).astype(NUMPY[dtype])


def loop_body(ptx, index=0):
    start = ptx.index(f"$L_for_{index}:")
    return ptx[start:ptx.index(f"bra.uni $L_for_{index};", start)]


def compile_matmul(ta, tb, block, limit, warps, stages):
    bm, bn, bk = block
    a, bt = np.zeros((1024, 1024), NUMPY[ta]), np.zeros((1024, 1024), NUMPY[tb])
    args = (a, bt, np.zeros((1024, 1024), np.float32), 1024, 1024, 1024)
    values = fk.matmul.bind(args, dict(BM=bm, BN=bn, BK=bk, LIMIT=limit))
    return fk.matmul.compile_for(values, False, (warps, stages, 1), target="sm_90a").kernel


def check_promoted_loop(body, stages):
    """The pipelined promoted loop: copies into the stages, the previous step's partial retired
    (wait_group 0) and added in fp32, no synchronous global loads."""
    assert body.count("wgmma.wait_group.sync.aligned 0") == 1, body
    assert "wgmma.wait_group.sync.aligned 1" not in body
    assert body.count("wgmma.commit_group.sync.aligned") == 1
    assert re.search(r"add\.f32", body)
    assert not re.search(r"ld\.global", body), "synchronous loads left in the K loop"


# ---- PTX -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("ta,tb", FP8_PAIRS)
@pytest.mark.parametrize("stages", [3, 4])
def test_promoted_k_loop_is_pipelined_on_sm90a(ptxas, ta, tb, stages):
    k = compile_matmul(ta, tb, (128, 128, 128), 128, 8, stages)
    ptx = k.ptx
    assert mmas(ptx) == [f"wgmma.mma_async.sync.aligned.m64n128k32.f32.{FP8_PTX_NAME[ta]}."
                         f"{FP8_PTX_NAME[tb]}"]
    body = loop_body(ptx)
    check_promoted_loop(body, stages)
    # The copies run iterations ahead: 16-byte cp.async in the loop, stages - 1 groups before it.
    assert re.search(r"cp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], 16", body)
    assert "cp.async.wait_group" in body
    prologue = ptx[:ptx.index("$L_for_0:")]
    assert prologue.count("cp.async.commit_group") == stages - 1
    # Each step's four k32 wgmmas per warp group start from scale-d = 0 (the zeroed partial).
    assert body.count("wgmma.mma_async") == 4
    run = ptxas(ptx, verbose=True)
    print(f"{ta} x {tb}, {stages} stages: {run.registers} registers, {run.spill_bytes} spill "
          f"bytes")
    assert run.spill_bytes == 0
    assert not re.search(r"C75\d\d", run.log), run.log


@pytest.mark.parametrize("block,limit,warps", [((128, 128, 32), 32, 8), ((128, 128, 64), 64, 8),
                                               ((64, 128, 64), 48, 4), ((128, 64, 128), 128, 4)])
def test_promoted_k_loop_other_limits_are_pipelined(ptxas, block, limit, warps):
    """A limit whose partial spans the whole BLOCK_K (48 rounds up to two k32 steps, 64). (The
    accumulator and the partial take 2 * BLOCK_M * BLOCK_N / threads registers: 128x128 tiles
    at 4 warps spill, as the unpipelined promoted dot did.)"""
    k = compile_matmul("fp8e4nv", "fp8e5", block, limit, warps, 3)
    check_promoted_loop(loop_body(k.ptx), 3)
    run = ptxas(k.ptx, verbose=True)
    assert run.spill_bytes == 0
    assert not re.search(r"C75\d\d", run.log), run.log


def test_limit_below_block_k_stays_unpipelined():
    k = compile_matmul("fp8e4nv", "fp8e4nv", (128, 128, 128), 64, 8, 3)
    assert all(m.startswith("wgmma") for m in mmas(k.ptx)) and mmas(k.ptx)
    assert not re.search(r"cp\.async\.c[ag]", k.ptx)


def scaled_mm_kernel_compiled(kind, cfg, fast=False):
    from warpweave.ops.kernels import scaled_mm as S
    cfg = dict(cfg)
    warps, stages = cfg.pop("num_warps"), cfg.pop("num_stages")
    f8 = ml_dtypes.float8_e4m3fn
    M = N = K = 4096
    a, bt = np.zeros((M, K), f8), np.zeros((N, K), f8)
    c = np.zeros((M, N), ml_dtypes.bfloat16)
    sa, sb = np.ones(1, np.float32), np.ones(1, np.float32)
    bias = np.zeros(N, ml_dtypes.bfloat16)
    flags = dict(ROWWISE_A=1, ROWWISE_B=1, HAS_BIAS=0, FAST_ACCUM=fast)
    if kind == "tl":
        kern = S.scaled_mm_kernel
        args = (a, bt.T, c, sa, sb, bias, M, N, K, K, 1, 1, K, N, 1)
    else:
        kern = S.scaled_mm_tma_kernel
        da = ww.TensorDescriptor.from_tensor(a, [cfg["BLOCK_M"], cfg["BLOCK_K"]])
        db = ww.TensorDescriptor.from_tensor(bt, [cfg["BLOCK_N"], cfg["BLOCK_K"]])
        args = (da, db, c, sa, sb, bias, M, N, K, N, 1)
    values = kern.bind(args, dict(cfg, **flags))
    return kern.compile_for(values, False, (warps, stages, 1), target="sm_90a").kernel


def promoted_configs():
    from warpweave.ops import _scaled_mm as C
    return [cfg for cfg in C._CONFIGS if cfg["BLOCK_M"] * cfg["BLOCK_N"] <= C._PROMOTED_TILES]


@pytest.mark.parametrize("kind", ["tl", "tma"])
@pytest.mark.parametrize("index", range(2))
def test_scaled_mm_promoted_configurations_are_pipelined(ptxas, kind, index):
    """warpweave.ops.scaled_mm's FAST_ACCUM=False configurations (128x128 tiles, 8 warps)."""
    cfgs = promoted_configs()
    assert len(cfgs) == 2
    cfg = cfgs[index]
    k = scaled_mm_kernel_compiled(kind, cfg)
    ptx = k.ptx
    assert mmas(ptx) == ["wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"]
    body = loop_body(ptx)
    check_promoted_loop(body, cfg["num_stages"])
    if kind == "tl":
        assert re.search(r"cp\.async\.cg\.shared\.global", body)
    else:
        assert "cp.async.bulk.tensor" in body and "mbarrier" in body
    run = ptxas(ptx, verbose=True)
    print(f"{kind} {cfg}: {run.registers} registers, {run.spill_bytes} spill bytes")
    assert run.spill_bytes == 0
    assert not re.search(r"C75\d\d", run.log), run.log


# ---- interpreter ---------------------------------------------------------------------------------


def run_matmul(a, bt, block, limit, warps, stages):
    M, K = a.shape
    N = bt.shape[0]
    bm, bn, bk = block
    c = np.full((M, N), np.nan, np.float32)
    compiled = fk.matmul[(cdiv(M, bm), cdiv(N, bn))](a, bt, c, M, N, K, BM=bm, BN=bn, BK=bk,
                                                       LIMIT=limit, num_warps=warps,
                                                       num_stages=stages)
    return c, compiled.kernel.tile_ir


def reference_close(c, a, bt):
    ref = a.astype(np.float64) @ bt.astype(np.float64).T
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("ta,tb", FP8_PAIRS)
@pytest.mark.parametrize("mnk,block,limit,warps,stages", [
    ((200, 136, 328), (128, 128, 64), 64, 4, 3),   # ragged M, N and K (5.125 K steps)
    ((130, 72, 40), (64, 64, 32), 32, 4, 4),       # two K steps: a prologue copy predicated off
    ((256, 192, 512), (128, 64, 128), 128, 8, 3),  # limit = BLOCK_K = 128, two warp groups
    ((96, 80, 200), (64, 64, 64), 48, 4, 2),       # 48 -> one 64-wide partial, two stages
])
def test_pipelined_promoted_loop_matches_unpipelined_bit_for_bit(ta, tb, mnk, block, limit,
                                                                  warps, stages):
    M, N, K = mnk
    rng = np.random.default_rng(M * N + K)
    a, bt = fp8(rng, (M, K), ta), fp8(rng, (N, K), tb)
    c, ir = run_matmul(a, bt, block, limit, warps, stages)
    assert "async_dot" in ir and "pipeline_partial" in ir, "not pipelined"
    c1, ir1 = run_matmul(a, bt, block, limit, warps, 1)
    assert "async_dot" not in ir1
    np.testing.assert_array_equal(c, c1)
    reference_close(c, a, bt)


def test_limit_below_block_k_in_interpreter():
    """Two 32-wide partials a 64-deep step: unpipelined, the same chunked sums either way."""
    rng = np.random.default_rng(5)
    a, bt = fp8(rng, (200, 328), "fp8e5"), fp8(rng, (136, 328), "fp8e4nv")
    c, ir = run_matmul(a, bt, (128, 128, 64), 32, 4, 3)
    assert "pipeline_partial" not in ir
    c1, _ = run_matmul(a, bt, (128, 128, 64), 32, 4, 1)
    np.testing.assert_array_equal(c, c1)
    reference_close(c, a, bt)


def test_promoted_sums_differ_from_in_place_accumulation():
    """The interpreter models the promotion (a fresh fp32 partial a step, then an add), not the
    in-place sum over all of K: the two differ in rounding on these inputs."""
    rng = np.random.default_rng(11)
    a, bt = fp8(rng, (64, 512), "fp8e4nv"), fp8(rng, (64, 512), "fp8e4nv")
    promoted, _ = run_matmul(a, bt, (64, 64, 64), 64, 4, 3)
    fast, _ = run_matmul(a, bt, (64, 64, 64), None, 4, 3)
    assert not np.array_equal(promoted, fast)
    reference_close(promoted, a, bt)


@pytest.mark.parametrize("kernel", ["tl", "tma"])
def test_scaled_mm_promoted_in_interpreter_matches_unpipelined(kernel):
    from warpweave.ops.kernels import scaled_mm as S
    rng = np.random.default_rng(3)
    M, N, K = 96, 80, 160
    a = fp8(rng, (M, K), "fp8e4nv")
    bt = fp8(rng, (N, K), "fp8e5")
    sa = (rng.random(M) + 0.5).astype(np.float32)
    sb = (rng.random(N) + 0.5).astype(np.float32)
    cfg = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=2, ROWWISE_A=1, ROWWISE_B=1,
               HAS_BIAS=0, FAST_ACCUM=False)
    grid = (cdiv(M, 64) * cdiv(N, 64), )
    outs = []
    for stages in (3, 1):
        c = np.full((M, N), np.nan, np.float32)
        if kernel == "tl":
            compiled = S.scaled_mm_kernel[grid](a, bt.T, c, sa, sb, sa, M, N, K, K, 1, 1, K, N,
                                                1, **cfg, num_warps=4, num_stages=stages)
        else:
            da = ww.TensorDescriptor.from_tensor(a, [64, 32])
            db = ww.TensorDescriptor.from_tensor(bt, [64, 32])
            compiled = S.scaled_mm_tma_kernel[grid](da, db, c, sa, sb, sa, M, N, K, N, 1, **cfg,
                                                    num_warps=4, num_stages=stages)
        assert ("pipeline_partial" in compiled.kernel.tile_ir) == (stages > 1)
        outs.append(c)
    np.testing.assert_array_equal(outs[0], outs[1])
    ref = (a.astype(np.float64) @ bt.astype(np.float64).T) * sa[:, None] * sb[None, :]
    np.testing.assert_allclose(outs[0], ref, rtol=1e-5, atol=1e-4 * np.abs(ref).max())


def test_persistent_tma_promoted_loop(ptxas):
    """The promoted TMA K loop inside a persistent tile loop: bit-identical to num_stages=1 in
    the interpreter, and its PTX (128x128x128, 8 warps, 4 stages) without spills."""
    rng = np.random.default_rng(13)
    M, N, K = 200, 136, 320
    a, bt = fp8(rng, (M, K), "fp8e4nv"), fp8(rng, (N, K), "fp8e5")
    outs = []
    for stages in (3, 1):
        c = np.full((M, N), np.nan, np.float32)
        da = ww.TensorDescriptor.from_tensor(a, [64, 64])
        db = ww.TensorDescriptor.from_tensor(bt, [64, 64])
        compiled = persistent_promoted[(3, )](da, db, c, M, N, K, BM=64, BN=64, BK=64,
                                              NUM_PROGRAMS=3, num_warps=4, num_stages=stages)
        assert ("pipeline_partial" in compiled.kernel.tile_ir) == (stages > 1)
        outs.append(c)
    np.testing.assert_array_equal(outs[0], outs[1])
    reference_close(outs[0], a, bt)

    x = np.zeros((4096, 4096), ml_dtypes.float8_e4m3fn)
    da = ww.TensorDescriptor.from_tensor(x, [128, 128])
    values = persistent_promoted.bind((da, da, np.zeros((4096, 4096), np.float32), 4096, 4096,
                                       4096), dict(BM=128, BN=128, BK=128, NUM_PROGRAMS=132))
    k = persistent_promoted.compile_for(values, False, (8, 4, 1), target="sm_90a").kernel
    inner = re.findall(r"\$L_for_(\d+):", k.ptx)
    body = loop_body(k.ptx, inner[1])
    check_promoted_loop(body, 4)
    assert "cp.async.bulk.tensor" in body
    run = ptxas(k.ptx, verbose=True)
    assert run.spill_bytes == 0
    assert not re.search(r"C75\d\d", run.log), run.log
