"""fp16 x fp16 tl.dot into an fp16 accumulator (out_dtype=tl.float16, or an fp16 acc) on tensor
cores (kernels: tests/python/eight_bit_dot_kernels.py, ACC / OUT = tl.float16).

sm_90a: wgmma m64nNk16.f16.f16.f16 (instrN / 4 accumulator registers of two fp16 each); sm_80,
sm_100a and sm_90a tiles without a warp group: mma.sync m16n8k16 .f16.f16.f16.f16. ptxas accepts
every kernel and no per-element FMA dot is left. Triton's accumulator rules: no bfloat16
accumulator, bfloat16 operands into float32 only. The interpreter against a float32 NumPy
reference with fp16 tolerance. Then the kernel-wide bound on unrolled per-thread FMA dots
(batched fp64 dots, one 2-D dot per batch element): past it the dots loop over K."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave.language as tl

import batched_dot_kernels as bk
import eight_bit_dot_kernels as ek
from mma_testing import compiled, mmas

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

MMA_SYNC = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def fma_dot_steps(ptx):
    """Per-element FMA dot steps: fma of three registers in fp16 or fp32."""
    return len(re.findall(r"fma\.rn\.(f16|f32) %(h|rs|f)\d+, %\w+, %\w+, %\w+;", ptx))


def wgmma_name(N, warps, M):
    groups_n = max(1, (warps // 4) // max(1, M // 64))
    return f"wgmma.mma_async.sync.aligned.m64n{min(256, N // groups_n)}k16.f16.f16.f16"


def tile_args(M, N, K, trans_b=False):
    a, b = np.zeros((M, K), np.float16), np.zeros((K, N), np.float16)
    return (a, np.ascontiguousarray(b.T) if trans_b else b, np.zeros((M, N), np.float16))


def tile(M, N, K, trans_b=False):
    return dict(M=M, N=N, K=K, TRANS_B=trans_b, OUT=tl.float16)


def close_to(out, a, b, acc=None):
    """fp16 accumulation against the float32 product: each MMA rounds its sum to fp16, so the
    error grows with K; Triton's test_dot allows 1e-2 relative (and a little absolute) here."""
    ref = a.astype(np.float32) @ b.astype(np.float32)
    if acc is not None:
        ref += acc.astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=1e-2, atol=2e-2)


# ---- one dot of whole tiles ----------------------------------------------------------------------

TILES = [(64, 64, 64), (128, 128, 64), (64, 32, 32), (128, 64, 128), (64, 256, 16)]


@pytest.mark.parametrize("trans_b", [True, False])
@pytest.mark.parametrize("M,N,K", TILES)
@pytest.mark.parametrize("warps", [4, 8])
def test_tile_dot_is_an_f16_wgmma_on_sm90a(trans_b, M, N, K, warps):
    k = compiled(ek.tile_dot, tile_args(M, N, K, trans_b), tile(M, N, K, trans_b), "sm_90a", warps)
    name = wgmma_name(N, warps, M)
    assert mmas(k.ptx) == [name]
    assert k.ptx.count("wgmma.mma_async") == (K // 16) * max(1, M // 64 // max(1, warps // 4))
    # The accumulator: instrN / 4 registers, each two fp16 elements.
    instr_n = int(re.search(r"m64n(\d+)", name).group(1))
    lists = re.findall(r"wgmma\.mma_async\S+ \{([^}]*)\}", k.ptx)
    assert {len(x.split(",")) for x in lists} == {instr_n // 4}
    # wgmma writes them in place: a zero accumulator's words must not share a register.
    assert all(len(set(x.split(","))) == instr_n // 4 for x in lists)
    assert fma_dot_steps(k.ptx) == 0 and "cvt.f32.f16" not in k.ptx
    assert k.spill_bytes == 0


@pytest.mark.parametrize("target", ["sm_80", "sm_100a"])
@pytest.mark.parametrize("M,N,K", TILES)
@pytest.mark.parametrize("warps", [2, 4, 8])
def test_tile_dot_is_an_f16_mma_sync(target, M, N, K, warps):
    k = compiled(ek.tile_dot, tile_args(M, N, K), tile(M, N, K), target, warps)
    assert mmas(k.ptx) == [MMA_SYNC]
    # Every 16 x 8 x 16 tile once, split over the warps; C and D are two f16x2 words.
    assert k.ptx.count("mma.sync") == max(1, (M // 16) * (N // 8) * (K // 16) // warps)
    assert re.search(r"mma\.sync\S+ \{%r\d+, %r\d+\}, \{[^}]*\}, \{[^}]*\}, \{%r\d+, %r\d+\};",
                     k.ptx)
    assert fma_dot_steps(k.ptx) == 0
    assert k.spill_bytes == 0


@pytest.mark.parametrize("M,N,K,warps", [(32, 64, 64, 4), (16, 8, 16, 4), (64, 64, 32, 2)])
def test_sm90a_tiles_wgmma_cannot_take_are_mma_sync(M, N, K, warps):
    k = compiled(ek.tile_dot, tile_args(M, N, K), tile(M, N, K), "sm_90a", warps)
    assert mmas(k.ptx) == [MMA_SYNC]
    assert fma_dot_steps(k.ptx) == 0


@pytest.mark.parametrize("target,warps", [("sm_90a", 4), ("sm_90a", 8), ("sm_80", 2),
                                          ("sm_80", 4)])
def test_128x128x64_dot_was_refused_or_per_thread_fmas(target, warps):
    """The shape that lowered to 8,192 fp16 FMAs a thread at 4 warps (refused at 2)."""
    k = compiled(ek.tile_dot, tile_args(128, 128, 64), tile(128, 128, 64), target, warps)
    assert mmas(k.ptx) and fma_dot_steps(k.ptx) == 0
    assert k.spill_bytes == 0
    print(f"{target} {warps} warps: {k.registers} registers, {k.spill_bytes} spill bytes, "
          f"{k.ptx.count('wgmma.mma_async') + k.ptx.count('mma.sync')} MMAs")


@pytest.mark.parametrize("M,N,K", [(64, 32, 32), (64, 64, 128), (128, 64, 64), (32, 16, 16),
                                   (16, 8, 16)])
@pytest.mark.parametrize("trans_b", [True, False])
def test_tile_dot_in_interpreter(M, N, K, trans_b):
    rng = np.random.default_rng(M * 7 + N * 3 + K)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    ek.tile_dot[(1, )](a, np.ascontiguousarray(b.T) if trans_b else b, c,
                       **tile(M, N, K, trans_b))
    assert c.dtype == np.float16
    close_to(c, a, b)


# ---- the K loop (acc = tl.zeros(..., tl.float16); acc = tl.dot(a, b, acc)) -----------------------


def loop_args(M, N, K, rng=None):
    make = (lambda s: np.zeros(s, np.float16)) if rng is None else \
        (lambda s: (rng.standard_normal(s) / 4).astype(np.float16))
    a, b = make((M, K)), make((K, N))
    c = np.full((M, N), np.nan, np.float16)
    return (a, np.ascontiguousarray(b.T), c, M, N, K), a, b


@pytest.mark.parametrize("target,warps", [("sm_90a", 4), ("sm_90a", 8), ("sm_80", 2),
                                          ("sm_80", 4), ("sm_80", 8), ("sm_100a", 4)])
@pytest.mark.parametrize("stages", [1, 3])
def test_k_loop_is_an_f16_mma(target, warps, stages):
    args, _, _ = loop_args(256, 256, 256)
    k = compiled(ek.matmul, args, dict(BM=128, BN=128, BK=64, ACC=tl.float16), target, warps,
                 stages)
    expected = wgmma_name(128, warps, 128) if target == "sm_90a" else MMA_SYNC
    assert mmas(k.ptx) == [expected]
    assert fma_dot_steps(k.ptx) == 0
    # Two warps hold a 128x128 accumulator in 256 registers a thread: that spills in fp32 too.
    assert warps < 4 or k.spill_bytes == 0


@pytest.mark.parametrize("M,N,K,BK", [(100, 72, 160, 32), (64, 64, 32, 32), (128, 64, 256, 64)])
def test_k_loop_in_interpreter(M, N, K, BK):
    """Ragged M / N / K (masked), one K step and several."""
    rng = np.random.default_rng(M + N + K)
    args, a, b = loop_args(M, N, K, rng)
    grid = (-(-M // 64), -(-N // 64))
    ek.matmul[grid](*args, BM=64, BN=64, BK=BK, ACC=tl.float16, num_warps=4)
    close_to(args[2], a, b)


# ---- Triton's accumulator rules ------------------------------------------------------------------


BF16 = pytest.importorskip("ml_dtypes").bfloat16


def rule_kernel(a_type, c_type, out):
    """tile_dot of 64x32 by 32x64 `a_type` operands with out_dtype `out`, compiled for sm_90a."""
    args = (np.zeros((64, 32), a_type), np.zeros((32, 64), a_type), np.zeros((64, 64), c_type))
    return compiled(ek.tile_dot, args, dict(M=64, N=64, K=32, TRANS_B=False, OUT=out), "sm_90a")


def test_bf16_operands_with_out_dtype_float16_accumulate_in_float32():
    """Triton's rule: bfloat16 operands give a float32 product whatever out_dtype asks."""
    k = rule_kernel(BF16, np.float16, tl.float16)
    assert re.search(r"= dot .*: tensor<64x64xfp32>", k.tile_ir), k.tile_ir
    assert mmas(k.ptx) == ["wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"]


def test_fp16_out_dtype_float16_is_an_fp16_dot():
    k = rule_kernel(np.float16, np.float16, tl.float16)
    assert re.search(r"= dot .*: tensor<64x64xfp16>", k.tile_ir), k.tile_ir


@pytest.mark.parametrize("a_type", [np.float16, BF16])
def test_bfloat16_accumulators_are_located_errors(a_type):
    with pytest.raises(Exception, match=r"eight_bit_dot_kernels\.py:\d+:\d+: error: tl\.dot "
                       r"cannot accumulate into bfloat16 \(nor can Triton's\); accumulate into "
                       r"float32 \(or float16 for float16 / fp8 operands\)"):
        rule_kernel(a_type, BF16, tl.bfloat16)


def test_bf16_operands_into_an_fp16_acc_are_a_located_error():
    args = (np.zeros((128, 64), np.float16), np.zeros((128, 64), np.float16),
            np.zeros((128, 128), np.float16), 128, 128, 64)
    args = (args[0].astype(BF16), args[1].astype(BF16)) + args[2:]
    with pytest.raises(Exception, match=r"eight_bit_dot_kernels\.py:\d+:\d+: error: tl\.dot of "
                       r"bfloat16 operands accumulates into float32 only \(as Triton's\), but "
                       r"acc is tensor<64x64xfp16>; pass a float32 acc"):
        compiled(ek.matmul, args, dict(BM=64, BN=64, BK=64, ACC=tl.float16), "sm_90a")


# ---- the kernel-wide bound on unrolled per-thread FMA dots ---------------------------------------

LIMIT = 8192


def batched_fp64(B, num_warps=4):
    sig = ("a_ptr:*fp64:16,b_ptr:*fp64:16,c_ptr:*fp64:16,out_ptr:*fp64:16,"
           f"B={B},M=64,N=64,K=64,WITH_ACC=0")
    path = Path(bk.__file__)
    return native_loader.native().compile([(str(path), path.read_text())], "batched_dot", sig, {},
                                          target="sm_90a", num_warps=num_warps, stage="ptx")


def test_batched_fma_dots_past_the_kernel_bound_loop_over_k():
    """B = 8 fp64 64x64x64 dots at 4 warps: 2,048 products a thread each, 16,384 together; the
    fifth crosses the kernel's limit (it was a located error) and it and the rest loop over K
    instead of unrolling (tests/python/test_fma_dot_loop.py runs them through ptxas)."""
    ptx = batched_fp64(8).ptx
    loops = re.findall(r"@%p\d+ bra\.uni (\$L_dot_k_\d+);", ptx)
    assert len(loops) == 4 and all(f"{label}:" in ptx for label in loops)
    assert len(re.findall(r"fma\.rn\.f64", ptx)) < LIMIT + 4 * 2048


def test_batched_fma_dots_at_the_kernel_bound_compile(ptxas):
    """B = 4: exactly the limit, through ptxas."""
    ptx = batched_fp64(4).ptx
    assert len(re.findall(r"fma\.rn\.f64", ptx)) == LIMIT
    ptxas(ptx, arch="sm_90a")
