"""Shared buffers whose lifetimes do not overlap share bytes (src/layout/SharedMemoryPlan.cpp):
the C tile a GEMM allocates after its K loop lies over the dead A / B stages, so that 192 KiB of
stages and a 64 KiB tile fit in a CTA (sm_90a with wgmma, sm_100a with tcgen05, as TLX's
blackwell_gemm_pipelined.py at its BN 256 configurations), with a CTA barrier and a proxy fence
between the stages' last use and the tile's first write. The kernels (smem_reuse_kernels.py)
match NumPy in the interpreter, which gives every buffer storage of its own."""

import os
import re
import sys

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")

sys.path.insert(0, os.path.dirname(__file__))
from smem_reuse_kernels import cp_async_gemm_tile, tcgen05_gemm_tile, tma_gemm_tile  # noqa: E402

LIMIT = 232448  # dynamic shared memory a CTA may use on sm_90a and sm_100a


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def descriptors(a, b, c, bm, bn, bk):
    return (ww.TensorDescriptor.from_tensor(a, [bm, bk]),
            ww.TensorDescriptor.from_tensor(b, [bk, bn]),
            ww.TensorDescriptor.from_tensor(c, [bm, bn]))


def compile_tile_kernel(kernel, target, bm, bn, bk, stages, warps):
    x = np.zeros((1024, 1024), np.float16)
    values = kernel.bind((*descriptors(x, x, x, bm, bn, bk), 1024),
                         dict(BM=bm, BN=bn, BK=bk, STAGES=stages))
    return kernel.compile_for(values, False, (warps, 3, 1), target=target).kernel


def epilogue(ptx):
    """The PTX from the last stage's use to the C tile's first shared store."""
    first_store = ptx.index("st.shared")
    return ptx[:first_store]


def check(c, a, b):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = c.astype(np.float64)
    assert np.isfinite(out).all()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 2e-3


@pytest.mark.usefixtures("requires_ptxas")
@pytest.mark.parametrize("kernel,target,last_read", [
    (tma_gemm_tile, "sm_90a", "wgmma.wait_group.sync.aligned 0;"),
    (tcgen05_gemm_tile, "sm_100a", "mbarrier.try_wait.parity"),
])
def test_c_tile_after_192_kib_of_stages_fits(kernel, target, last_read):
    # 4 stages of 128x64 + 64x256 fp16 (192 KiB) and a 128x256 fp16 tile (64 KiB): 256 KiB
    # side by side, more than a CTA has.
    k = compile_tile_kernel(kernel, target, 128, 256, 64, 4, 8 if target == "sm_90a" else 4)
    assert k.cubin
    assert 4 * 48 * 1024 <= k.shared_bytes <= 4 * 48 * 1024 + 2048, k.shared_bytes
    assert k.shared_bytes <= LIMIT
    # The stages were last read through the async proxy (wgmma, tcgen05) and written by TMA; the
    # tile is written by threads: a proxy fence, then a barrier of every thread, before its first
    # store.
    body = k.ptx[k.ptx.index("{"):]
    before = epilogue(body)
    tail = before[before.rindex(last_read):]
    assert "fence.proxy.async.shared::cta" in tail
    assert tail.index("fence.proxy.async.shared::cta") < tail.rindex("bar.sync 0")


@pytest.mark.usefixtures("requires_ptxas")
def test_cp_async_stages_and_an_fp32_tile_share_bytes():
    # 6 stages of 128x64 + 64x128 fp16 (192 KiB), then a 128x128 fp32 tile (64 KiB).
    values = cp_async_gemm_tile.bind(
        (np.zeros(16, np.float16), np.zeros(16, np.float16), np.zeros(16, np.float32), 1024, 1024,
         1024), dict(BM=128, BN=128, BK=64, STAGES=6))
    k = cp_async_gemm_tile.compile_for(values, False, (4, 3, 1), target="sm_90a").kernel
    assert k.cubin
    assert k.shared_bytes <= LIMIT < 6 * 32 * 1024 + 64 * 1024
    body = k.ptx[k.ptx.index("{"):]
    # The tile's first store comes after the cp.async drain and the last wgmma wait, and a
    # barrier of every thread lies between.
    tail = epilogue(body)
    tail = tail[max(tail.rindex("cp.async.wait_group 0;"),
                    tail.rindex("wgmma.wait_group.sync.aligned 0;")):]
    assert "bar.sync 0" in tail


def test_tma_gemm_tile_in_interpreter(rng):
    M, N, K = 128, 128, 160
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    tma_gemm_tile[(2, 2)](*descriptors(a, b, c, 64, 64, 32), K, BM=64, BN=64, BK=32, STAGES=3,
                          num_warps=4)
    check(c, a, b)


def test_tcgen05_gemm_tile_in_interpreter(rng):
    M, N, K = 128, 128, 192
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    tcgen05_gemm_tile[(1, 2)](*descriptors(a, b, c, 128, 64, 32), K, BM=128, BN=64, BK=32,
                              STAGES=2, num_warps=4)
    check(c, a, b)


@pytest.mark.parametrize("mnk", [(100, 60, 40), (130, 70, 300)])
def test_cp_async_gemm_tile_in_interpreter(rng, mnk):
    M, N, K = mnk
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    grid = (-(-M // 64) * -(-N // 64),)
    cp_async_gemm_tile[grid](a, b, c, M, N, K, BM=64, BN=64, BK=32, STAGES=3, num_warps=4)
    check(c, a, b)


@pytest.mark.usefixtures("requires_ptxas")
def test_split_k_tile_with_two_stages_fits():
    # Triton's tutorial 12 configuration BLOCK 128x128x128, num_stages=2, 8 warps, on a split-K
    # kernel of our own: two 64 KiB stages pipelined, the fp32 result's conversion over them.
    source = '''
import warpweave as ww
import warpweave.language as tl


@ww.jit
def split_k_gemm(a_ptr, b_ptr, c_ptr, M, N, K, K_PER_SPLIT, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    k_lo = tl.program_id(2) * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, K)
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + (k_lo + rk[None, :])
    b_ptrs = b_ptr + (k_lo + rk[:, None]) * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K_PER_SPLIT, BK)):
        left = k_hi - (k_lo + k * BK)
        a = tl.load(a_ptrs, mask=rk[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * N
    om = pid_m * BM + tl.arange(0, BM)
    on = pid_n * BN + tl.arange(0, BN)
    tl.atomic_add(c_ptr + om[:, None] * N + on[None, :], acc,
                  mask=(om[:, None] < M) & (on[None, :] < N))
'''
    native = __import__("warpweave._native_loader", fromlist=["native"]).native()
    k = native.compile([("split_k.py", source)], "split_k_gemm",
                       "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp32:16,M:i32:16,N:i32:16,"
                       "K:i32:16,K_PER_SPLIT:i32:16,BM=128,BN=128,BK=128", {}, target="sm_90a",
                       num_warps=8, num_stages=2, stage="cubin")
    assert k.cubin
    assert re.search(r"cp\.async\.cg\.shared\.global", k.ptx), "the K loop is not pipelined"
    assert 2 * 64 * 1024 <= k.shared_bytes <= LIMIT, k.shared_bytes


@ww.jit
def _copy_through_descriptors(src_desc, x_ptr, y_desc, BM: tl.constexpr, BN: tl.constexpr,
                              LOAD: tl.constexpr):
    """y's [BM, BN] tile (pid) = x's (pointer loads), or src's through its descriptor where LOAD,
    plus 1; stored through y_desc."""
    pid = tl.program_id(0)
    if LOAD:
        tile = src_desc.load([pid * BM, 0])
    else:
        rows = pid * BM + tl.arange(0, BM)
        tile = tl.load(x_ptr + rows[:, None] * BN + tl.arange(0, BN)[None, :])
    y_desc.store([pid * BM, 0], tile + 1)


@pytest.mark.usefixtures("requires_ptxas")
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_descriptor_store_stages_only_its_tile(target):
    # A store through a descriptor stages its tile in the scratch region and waits on its bulk
    # group: no mbarrier after the tile (a load's copy completes on one). TLX's grouped GEMM
    # epilogue (blackwell-grouped-gemm_test.py) stages its tiles so.
    x = np.zeros((256, 128), np.float16)
    d = ww.TensorDescriptor.from_tensor(x, [128, 128])
    tile = 128 * 128 * 2
    # The store's tile alone; a load's tile and its mbarrier (the store's tile then takes the
    # same bytes).
    for load, need in [(False, tile), (True, tile + 16)]:
        values = _copy_through_descriptors.bind((d, x, d), dict(BM=128, BN=128, LOAD=load))
        k = _copy_through_descriptors.compile_for(values, False, (4, 3, 1), target=target).kernel
        assert k.cubin
        assert k.shared_bytes == need, (load, k.shared_bytes)


@pytest.mark.parametrize("load", [False, True])
def test_copy_through_descriptors_in_interpreter(rng, load):
    x = rng.standard_normal((256, 64)).astype(np.float16)
    y = np.full_like(x, np.nan)
    _copy_through_descriptors[(2,)](ww.TensorDescriptor.from_tensor(x, [128, 64]), x,
                                    ww.TensorDescriptor.from_tensor(y, [128, 64]), BM=128, BN=64,
                                    LOAD=load)
    assert np.array_equal(y, x + np.float16(1))
