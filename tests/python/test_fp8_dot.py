"""fp8 tl.dot (fp8e4nv = e4m3, fp8e5 = e5m2, mixed) on tensor cores
(tests/python/eight_bit_dot_kernels.py).

sm_90a: wgmma ...k32.f32.e4m3/e5m2 in the plain lowering, the software-pipelined K loop (B as
the transpose of a loaded [N, K] tile, read K-major from the copy) and the attention loop (P as
an fp8 A from registers); ptxas accepts the PTX without spills. sm_80 (and M < 64 on sm_90a):
exact fp16 upcasts on mma.sync m16n8k16, fp8e4nv a located error on sm_80. max_num_imprecise_acc
as Triton. The interpreter against NumPy for every form."""

import importlib
import re

import numpy as np
import pytest

import warpweave.language as tl

import eight_bit_dot_kernels as fk
from mma_testing import FP8_PAIRS, FP8_PTX_NAME, compiled, mmas

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")
ml_dtypes = pytest.importorskip("ml_dtypes")

NUMPY = {"fp8e4nv": ml_dtypes.float8_e4m3fn, "fp8e5": ml_dtypes.float8_e5m2}
TL = {"fp8e4nv": tl.float8e4nv, "fp8e5": tl.float8e5}


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def eighths(rng, shape, dtype):
    # Multiples of 1/8 in [-1, 1]: exact in both fp8 types; products and sums exact in fp32.
    return (rng.integers(-8, 9, shape) / 8).astype(NUMPY[dtype])


def exact(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def tile_args(rng, M, N, K, ta, tb, trans_b):
    a, b = eighths(rng, (M, K), ta), eighths(rng, (K, N), tb)
    c = np.full((M, N), np.nan, np.float32)
    return a, b, (a, np.ascontiguousarray(b.T) if trans_b else b, c)


# ---- the plain lowering --------------------------------------------------------------------------


@pytest.mark.parametrize("ta,tb", FP8_PAIRS)
@pytest.mark.parametrize("trans_b", [True, False])
@pytest.mark.parametrize("M,N,K,warps", [(64, 64, 64, 4), (128, 256, 128, 8), (64, 32, 32, 4)])
def test_tile_dot_is_an_fp8_wgmma_on_sm90a(ta, tb, trans_b, M, N, K, warps):
    rng = np.random.default_rng(M + N + K)
    a, b, args = tile_args(rng, M, N, K, ta, tb, trans_b)
    kw = dict(M=M, N=N, K=K, TRANS_B=trans_b, OUT=tl.float32)
    k = compiled(fk.tile_dot, args, kw, "sm_90a", warps)
    assert all(m.startswith("wgmma") and f"k32.f32.{FP8_PTX_NAME[ta]}.{FP8_PTX_NAME[tb]}" in m
               for m in mmas(k.ptx)), mmas(k.ptx)
    assert mmas(k.ptx) and "fma.rn.f32" not in k.ptx
    assert k.spill_bytes == 0
    fk.tile_dot[(1, )](*args, **kw, num_warps=warps)
    np.testing.assert_array_equal(args[2], exact(a, b))


def test_fp16_out_dtype_sums_in_fp32_and_rounds_once():
    rng = np.random.default_rng(3)
    a, b, args = tile_args(rng, 64, 64, 64, "fp8e5", "fp8e4nv", True)
    args = args[:2] + (np.full((64, 64), np.nan, np.float16), )
    kw = dict(M=64, N=64, K=64, TRANS_B=True, OUT=tl.float16)
    k = compiled(fk.tile_dot, args, kw, "sm_90a")
    assert mmas(k.ptx) == ["wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e4m3"]
    assert "cvt.rn.f16.f32" in k.ptx
    fk.tile_dot[(1, )](*args, **kw)
    np.testing.assert_array_equal(args[2], exact(a, b).astype(np.float16))


def test_small_m_on_sm90a_multiplies_fp16_upcasts_on_mma_sync():
    rng = np.random.default_rng(4)
    a, b, args = tile_args(rng, 32, 64, 64, "fp8e4nv", "fp8e5", True)
    kw = dict(M=32, N=64, K=64, TRANS_B=True, OUT=tl.float32)
    k = compiled(fk.tile_dot, args, kw, "sm_90a")
    assert mmas(k.ptx) == ["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"]
    assert "cvt.rn.f16x2.e4m3x2" in k.ptx and "shl.b16" in k.ptx  # e4m3 by cvt, e5m2 by a shift
    fk.tile_dot[(1, )](*args, **kw)
    np.testing.assert_array_equal(args[2], exact(a, b))


@pytest.mark.parametrize("trans_b", [True, False])
def test_fp8e5_on_sm80_multiplies_fp16_upcasts_on_mma_sync(trans_b):
    rng = np.random.default_rng(5)
    _, _, args = tile_args(rng, 64, 64, 64, "fp8e5", "fp8e5", trans_b)
    k = compiled(fk.tile_dot, args, dict(M=64, N=64, K=64, TRANS_B=trans_b, OUT=tl.float32),
                 "sm_80")
    assert mmas(k.ptx) == ["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"]
    assert "cvt.rn.f16x2.e5m2x2" not in k.ptx  # sm_89+ only: e5m2 is the high byte of an fp16
    assert "fma.rn.f32" not in k.ptx


@pytest.mark.parametrize("ta,tb", [("fp8e4nv", "fp8e4nv"), ("fp8e5", "fp8e4nv")])
def test_fp8e4nv_on_sm80_is_a_located_error(ta, tb):
    rng = np.random.default_rng(6)
    _, _, args = tile_args(rng, 64, 64, 64, ta, tb, True)
    with pytest.raises(Exception, match=r"eight_bit_dot_kernels\.py:\d+:\d+: error: "
                       r"tl\.dot of .* "
                       r"not supported on sm_80: fp8e4nv needs sm_89"):
        compiled(fk.tile_dot, args, dict(M=64, N=64, K=64, TRANS_B=True, OUT=tl.float32), "sm_80")


# ---- max_num_imprecise_acc -----------------------------------------------------------------------


@pytest.mark.parametrize("limit,kind,adds", [(None, "wgmma", 0), (128, "wgmma", 1), (64, "wgmma", 2),
                                             (48, "wgmma", 2), (32, "wgmma", 4), (16, "mma", 0),
                                             (0, "mma", 0)])
def test_max_num_imprecise_acc_as_triton(limit, kind, adds):
    rng = np.random.default_rng(7)
    a, b, args = tile_args(rng, 64, 64, 128, "fp8e4nv", "fp8e5", True)
    kw = dict(M=64, N=64, K=128, TRANS_B=True, OUT=tl.float32, LIMIT=limit)
    k = compiled(fk.tile_dot, args, kw, "sm_90a")
    assert all(m.startswith(kind) for m in mmas(k.ptx)), mmas(k.ptx)
    if kind == "wgmma":
        # Each partial accumulator is retired, then added into the fp32 result.
        assert k.ptx.count("wgmma.wait_group") == max(adds, 1)
    fk.tile_dot[(1, )](*args, **kw)
    np.testing.assert_array_equal(args[2], exact(a, b))


def test_max_num_imprecise_acc_above_k_is_a_located_error():
    rng = np.random.default_rng(8)
    _, _, args = tile_args(rng, 64, 64, 64, "fp8e5", "fp8e5", True)
    with pytest.raises(Exception, match=r"eight_bit_dot_kernels\.py:\d+:\d+: error: "
                       r"max_num_imprecise_acc \(128\) must be <= K \(64\)"):
        fk.tile_dot[(1, )](*args, M=64, N=64, K=64, TRANS_B=True, OUT=tl.float32, LIMIT=128)


# ---- the pipelined K loop ------------------------------------------------------------------------


@pytest.mark.parametrize("ta,tb", FP8_PAIRS)
def test_k_loop_is_pipelined_with_fp8_wgmma(ta, tb):
    rng = np.random.default_rng(9)
    M, N, K = 256, 256, 256
    a, bt = eighths(rng, (M, K), ta), eighths(rng, (N, K), tb)
    args = (a, bt, np.zeros((M, N), np.float32), M, N, K)
    k = compiled(fk.matmul, args, dict(BM=128, BN=128, BK=64), "sm_90a", 4, 3)
    assert mmas(k.ptx) == [f"wgmma.mma_async.sync.aligned.m64n128k32.f32.{FP8_PTX_NAME[ta]}."
                           f"{FP8_PTX_NAME[tb]}"]
    # The copies run iterations ahead, 16 bytes (16 fp8 elements) each: 8-bit elements are
    # packed 4 to a register only when they pass through registers, which cp.async's do not.
    sizes = re.findall(r"cp\.async\.c[ag]\.shared\.global \[[^]]*\], \[[^]]*\], (\d+)", k.ptx)
    assert sizes and set(sizes) == {"16"}, sorted(set(sizes))
    assert "cp.async.ca" not in k.ptx
    # B is read K-major straight from its copy: no fp8 tile passes through registers.
    assert not re.search(r"ld\.shared\S*\.b8", k.ptx)
    assert k.spill_bytes == 0


@pytest.mark.parametrize("ta,tb", FP8_PAIRS)
@pytest.mark.parametrize("M,N,K", [(256, 256, 256), (200, 136, 96)])
def test_k_loop_in_interpreter(ta, tb, M, N, K):
    rng = np.random.default_rng(M + K)
    a, bt = eighths(rng, (M, K), ta), eighths(rng, (N, K), tb)
    c = np.full((M, N), np.nan, np.float32)
    fk.matmul[(-(-M // 128), -(-N // 128))](a, bt, c, M, N, K, BM=128, BN=128, BK=64, num_warps=4,
                                              num_stages=3)
    np.testing.assert_array_equal(c, exact(a, bt.T))


@pytest.mark.parametrize("K", [40, 41])
def test_k_loop_with_unaligned_rows_copies_byte_by_byte(K):
    """Rows of K fp8 elements, K not a multiple of 16: the copies cannot be 16-byte cp.async,
    and each element moves alone, one byte from global memory to one byte of shared memory
    (they were 2-byte accesses: misaligned at odd addresses on the GPU, and each wrote its
    neighbour's byte in shared memory)."""
    rng = np.random.default_rng(K)
    M, N = 200, 136
    a, bt = eighths(rng, (M, K), "fp8e4nv"), eighths(rng, (N, K), "fp8e5")
    c = np.full((M, N), np.nan, np.float32)
    args = (a, bt, c, M, N, K)
    k = compiled(fk.matmul, args, dict(BM=128, BN=128, BK=64), "sm_90a", 4, 3)
    assert mmas(k.ptx) == ["wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2"]
    assert re.findall(r"ld\.global\.b8", k.ptx) and re.findall(r"st\.shared\.b8", k.ptx)
    assert not re.search(r"ld\.global\S*\.b16|st\.shared\S*\.b16", k.ptx)
    fk.matmul[(2, 2)](*args, BM=128, BN=128, BK=64, num_warps=4, num_stages=3)
    np.testing.assert_array_equal(c, exact(a, bt.T))


def test_k_loop_with_a_partial_accumulator_stays_unpipelined_on_wgmma():
    rng = np.random.default_rng(10)
    a, bt = eighths(rng, (128, 128), "fp8e4nv"), eighths(rng, (128, 128), "fp8e4nv")
    args = (a, bt, np.zeros((128, 128), np.float32), 128, 128, 128)
    k = compiled(fk.matmul, args, dict(BM=128, BN=128, BK=64, LIMIT=32), "sm_90a", 4, 3)
    assert all(m.startswith("wgmma") for m in mmas(k.ptx)) and mmas(k.ptx)
    assert not re.search(r"cp\.async\.c[ag]", k.ptx)


@pytest.mark.parametrize("k_major", [True, False])
def test_k_loop_with_b_through_strides(k_major):
    """Tutorial 03's fp8 form: B [K, N] read through its strides. K-contiguous (the tutorial's
    `b.T`), the copy transposes the addresses into an [N, K] buffer and stays pipelined; N-major,
    the dot is still a wgmma, unpipelined (its operands staged K-major through registers)."""
    rng = np.random.default_rng(14)
    M = N = K = 256
    a, b = eighths(rng, (M, K), "fp8e5"), eighths(rng, (K, N), "fp8e4nv")
    bb = np.ascontiguousarray(b.T).T if k_major else b
    c = np.full((M, N), np.nan, np.float32)
    args = (a, bb, c, M, N, K, bb.strides[0], bb.strides[1])
    kw = dict(BM=128, BN=128, BK=64)
    k = compiled(fk.matmul_strided_b, args, kw, "sm_90a", 4, 3)
    assert mmas(k.ptx) == ["wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e4m3"]
    assert bool(re.search(r"cp\.async\.c[ag]\.shared\.global", k.ptx)) == k_major
    assert k.spill_bytes == 0
    fk.matmul_strided_b[(2, 2)](*args, **kw, num_warps=4, num_stages=3)
    np.testing.assert_array_equal(c, exact(a, b))


# ---- the attention loop --------------------------------------------------------------------------


def attention_args(rng, tq, tv, n_ctx=256, d=64):
    q, k = eighths(rng, (n_ctx, d), tq), eighths(rng, (n_ctx, d), tq)
    vt = eighths(rng, (d, n_ctx), tv)
    return (q, k, vt, np.full((n_ctx, d), np.nan, np.float32), n_ctx, 0.125)


@pytest.mark.parametrize("tq,tv", FP8_PAIRS)
def test_attention_loop_is_pipelined_with_fp8_wgmma(tq, tv):
    args = attention_args(np.random.default_rng(12), tq, tv)
    k = compiled(fk.attention, args, dict(D=64, BM=128, BN=64, P_TYPE=TL[tv]), "sm_90a", 4, 3)
    names = mmas(k.ptx)
    for t in (tq, tv):
        assert f"wgmma.mma_async.sync.aligned.m64n64k32.f32.{FP8_PTX_NAME[t]}.{FP8_PTX_NAME[t]}" \
            in names
    # P V takes P from registers: a {...} list of four 32-bit words in place of A's descriptor.
    assert re.search(r"wgmma\.mma_async\S+ \{[^}]*\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}", k.ptx)
    assert re.search(r"cp\.async\.c[ag]\.shared\.global", k.ptx) and "fma.rn.f32" not in k.ptx
    assert k.spill_bytes == 0


@pytest.mark.parametrize("tq,tv", FP8_PAIRS)
def test_attention_loop_in_interpreter(tq, tv):
    q, k, vt, o, n_ctx, scale = attention_args(np.random.default_rng(13), tq, tv)
    fk.attention[(n_ctx // 128, )](q, k, vt, o, n_ctx, scale, D=64, BM=128, BN=64,
                                   P_TYPE=TL[tv], num_warps=4, num_stages=3)
    p = np.exp2(exact(q, k.T) * scale).astype(np.float32)
    ref = exact(p.astype(NUMPY[tv]), vt.T) / p.sum(1, dtype=np.float64)[:, None]
    np.testing.assert_allclose(o, ref, rtol=1e-5, atol=1e-6)
