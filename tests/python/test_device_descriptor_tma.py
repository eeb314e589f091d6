"""Descriptors made in the kernel (tl.make_tensor_descriptor) as TMA tensor maps on sm_90a:
the kernel writes each map once, where it is made (before the loops in tutorial 09's
descriptor-persistent form), a tl.dot K loop over two of them is pipelined with TMA rings as
one over host descriptors is, and desc.store is a TMA store clipped at the tensor's edges.
Descriptors the TMA ring cannot take (made in the K loop, beside a tl.load, with a run-time
innermost stride) and every descriptor on sm_80 go through pointer loads (cp.async-pipelined
on sm_90a). The kernels are tests/python/tma_gemm_kernels.py's; their sm_90a Tile IR runs in
the interpreter against NumPy, with sizes that are not multiples of the blocks."""

import os
import re
import sys

import numpy as np
import pytest

pytest.importorskip("warpweave._native")

sys.path.insert(0, os.path.dirname(__file__))
from tma_gemm_kernels import (batched_copy_new_desc_each_step, carried_descriptor,  # noqa: E402
                              device_desc_gemm, device_desc_gemm_made_in_loop,
                              device_desc_gemm_mixed, device_desc_gemm_persistent,
                              device_desc_gemm_row_sums, device_desc_gemm_strided)

needs_ptxas = pytest.mark.usefixtures("requires_ptxas")

TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
MAP_ADDRESS = "tensormap.replace.tile.global_address"
RELEASE = "fence.proxy.tensormap::generic.release.gpu"
ACQUIRE = "fence.proxy.tensormap::generic.acquire.gpu"


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def cdiv(x, y):
    return -(-x // y)


def check(c, a, b):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = c.astype(np.float64)
    assert np.isfinite(out).all()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 2e-3


def compile_gemm(kernel, consts, stages, warps, target="sm_90a", extra=()):
    x = np.zeros((4096, 4096), np.float16)
    values = kernel.bind((x, x, x, 4096, 4096, 4096) + tuple(extra), consts)
    return kernel.compile_for(values, False, (warps, stages, 1), target=target).kernel


def loops(ptx):
    """{label number: body text} of every `$L_for_N` loop of the PTX."""
    out = {}
    for n in re.findall(r"\$L_for_(\d+):", ptx):
        start = ptx.index(f"$L_for_{n}:")
        out[int(n)] = ptx[start:ptx.index(f"bra.uni $L_for_{n};", start)]
    return out


def count(text, needle):
    return sum(1 for line in text.splitlines() if needle in line)


def swizzle_modes(ptx):
    return re.findall(r"tensormap\.replace\.tile\.swizzle_mode\.global\.b1024\.b32 \[%\w+\], "
                      r"(\d+);", ptx)


# ---- PTX: TMA rings, maps written once ----


@needs_ptxas
@pytest.mark.parametrize("block,stages,warps", [((128, 256, 64), 3, 8), ((128, 128, 64), 4, 4),
                                                ((128, 128, 128), 3, 8)])
def test_k_loop_over_device_descriptors_is_a_tma_ring(block, stages, warps):
    bm, bn, bk = block
    kernel = compile_gemm(device_desc_gemm, dict(BM=bm, BN=bn, BK=bk, GROUP=8), stages, warps)
    ptx = kernel.ptx
    assert kernel.spill_bytes == 0
    first_loop = ptx.index("$L_for_0:")
    before, (body,) = ptx[:first_loop], loops(ptx).values()
    after = ptx[ptx.index("bra.uni $L_for_0;"):]
    # The three tensor maps are written and fenced once, before the K loop.
    assert count(before, MAP_ADDRESS) == 3 and MAP_ADDRESS not in ptx[first_loop:]
    assert count(before, RELEASE) == 3 and count(before, ACQUIRE) == 3
    # The loop: one mbarrier wait on the slot, the next copies behind one expect-tx, wgmma from
    # shared memory; nothing through pointers.
    assert count(body, "mbarrier.try_wait.parity") == 1
    assert count(body, "mbarrier.arrive.expect_tx") == 1
    boxes = max(1, bk * 2 // 128)  # rows wider than the 128-byte swizzle go as column boxes
    assert count(body, TMA_LOAD) == 2 * boxes
    assert f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.f16.f16" in body
    for sync in ("ld.global", "cp.async.cg", "cp.async.wait", "tensormap"):
        assert sync not in body
    assert count(before, "mbarrier.arrive.expect_tx") == stages - 1
    # C leaves through the map by TMA (the tile staged in the 128-byte swizzle its map declares,
    # one box per 128 bytes of a row); no st.global after the loop.
    assert count(after, TMA_STORE) == bn * 2 // 128
    assert "st.global" not in after
    assert swizzle_modes(ptx) == ["3", "3", "3"]
    assert kernel.global_scratch_size == 3 * 128
    assert [p[0] for p in kernel.params][-1] == "__ww_global_scratch"


@needs_ptxas
@pytest.mark.parametrize("subtile", [False, True])
@pytest.mark.parametrize("block,stages,warps", [((128, 256, 64), 4, 8), ((128, 128, 64), 3, 4)])
def test_persistent_form_writes_the_maps_before_the_tile_loop(block, stages, warps, subtile):
    bm, bn, bk = block
    kernel = compile_gemm(device_desc_gemm_persistent,
                          dict(BM=bm, BN=bn, BK=bk, GROUP=8, NUM_PROGRAMS=132, SUBTILE=subtile),
                          stages, warps)
    ptx = kernel.ptx
    assert kernel.spill_bytes == 0
    body = loops(ptx)
    assert len(body) == 2
    tile_loop, k_loop = (body[n] for n in sorted(body))
    tiles_start = ptx.index("$L_for_")
    # Maps and ring barriers once per program, before the tile loop.
    assert count(ptx[:tiles_start], MAP_ADDRESS) == 3 and MAP_ADDRESS not in ptx[tiles_start:]
    assert count(ptx[:tiles_start], ACQUIRE) == 3 and ACQUIRE not in ptx[tiles_start:]
    assert count(ptx, "mbarrier.init") == stages
    assert ptx.index("mbarrier.init") < tiles_start
    assert count(k_loop, "mbarrier.try_wait.parity") == 1
    assert count(k_loop, TMA_LOAD) == 2
    assert "ld.global" not in tile_loop and "cp.async.cg" not in tile_loop
    # Each tile's C goes out by TMA: one store of [BM, BN] or two halves.
    cn = bn // 2 if subtile else bn
    assert count(tile_loop, TMA_STORE) == (2 if subtile else 1) * cn * 2 // 128
    assert kernel.global_scratch_size == 3 * 128


@needs_ptxas
def test_sm80_loads_and_stores_through_pointers():
    kernel = compile_gemm(device_desc_gemm, dict(BM=128, BN=128, BK=64, GROUP=8), 3, 4,
                          target="sm_80")
    ptx = kernel.ptx
    assert "tensormap" not in ptx and "cp.async.bulk" not in ptx
    (body,) = loops(ptx).values()
    assert "ld.global" in body
    assert "st.global" in ptx[ptx.index("bra.uni $L_for_0;"):]
    assert kernel.global_scratch_size == 0
    assert "__ww_global_scratch" not in [p[0] for p in kernel.params]
    assert "make_desc" not in kernel.tile_ir and "desc_load" not in kernel.tile_ir


@needs_ptxas
def test_sm100a_copies_through_the_maps():
    kernel = compile_gemm(device_desc_gemm, dict(BM=128, BN=128, BK=64, GROUP=8), 3, 4,
                          target="sm_100a")
    ptx = kernel.ptx
    assert count(ptx, MAP_ADDRESS) == 3
    assert count(ptx, TMA_LOAD) >= 2 and count(ptx, TMA_STORE) >= 1
    assert "ld.global" not in ptx
    assert kernel.global_scratch_size == 3 * 128


@needs_ptxas
@pytest.mark.parametrize("kernel,maps", [(device_desc_gemm_made_in_loop, 1),
                                         (device_desc_gemm_mixed, 0),
                                         (device_desc_gemm_strided, 1)])
def test_loops_the_tma_ring_does_not_take_are_pipelined_over_pointers(kernel, maps):
    # A descriptor made in the K loop, a tl.load beside a desc.load, a run-time innermost
    # stride: the K loop's descriptor loads are pointer loads copied by cp.async; C's
    # descriptor (where there is one) still stores by TMA through the one map left.
    extra = (4096, 7) if kernel is device_desc_gemm_strided else ()
    compiled = compile_gemm(kernel, dict(BM=128, BN=128, BK=64), 3, 4, extra=extra)
    ptx = compiled.ptx
    if kernel is not device_desc_gemm_strided:  # (A's elements 7 apart are copied one by one)
        assert compiled.spill_bytes == 0
    (body,) = loops(ptx).values()
    assert "cp.async.cg.shared.global" in body
    assert "wgmma.mma_async" in body
    for tma in ("tensormap", "cp.async.bulk.tensor", "mbarrier"):
        assert tma not in body
    assert count(ptx, MAP_ADDRESS) == maps
    assert compiled.global_scratch_size == 128 * maps
    assert count(ptx, TMA_STORE) == (2 if maps else 0)


@needs_ptxas
def test_descriptor_made_in_a_loop_rewrites_its_map_each_step():
    x = np.zeros((64, 64), np.float16)
    values = batched_copy_new_desc_each_step.bind((x, x, 64, 64, 4), dict(BM=64, BN=64))
    kernel = batched_copy_new_desc_each_step.compile_for(values, False, (4, 3, 1),
                                                         target="sm_90a").kernel
    (body,) = loops(kernel.ptx).values()
    assert count(body, MAP_ADDRESS) == 2
    assert count(body, RELEASE) == 2 and count(body, ACQUIRE) == 2
    assert count(body, TMA_LOAD) == 1 and count(body, TMA_STORE) == 1
    assert kernel.global_scratch_size == 2 * 128


@needs_ptxas
def test_desc_load_through_a_ring_descriptor_reads_its_swizzle():
    # A's map takes the TMA ring's 128-byte swizzle; the desc.load after the loop through the
    # same map lands in a tile of that swizzle (one TMA load of a 1024-byte-aligned tile).
    kernel = compile_gemm(device_desc_gemm_row_sums, dict(BM=128, BN=128, BK=64), 3, 4)
    ptx = kernel.ptx
    assert kernel.spill_bytes == 0
    assert swizzle_modes(ptx) == ["3", "3", "3"]
    after = ptx[ptx.index("bra.uni $L_for_0;"):]
    assert count(after, TMA_LOAD) == 1 and count(after, TMA_STORE) == 2


@needs_ptxas
def test_descriptor_carried_by_a_loop_and_chosen_by_an_if():
    # The loop and the if carry the tensor map's 64-bit address (ptxas refused the f32
    # registers they were given before).
    x = np.zeros(1000, np.float32)
    values = carried_descriptor.bind((x, x, x, 1000, 3), dict(B=64))
    kernel = carried_descriptor.compile_for(values, False, (4, 3, 1), target="sm_90a").kernel
    assert len(kernel.cubin) > 0
    assert count(kernel.ptx, MAP_ADDRESS) == 2
    assert count(kernel.ptx, "cp.async.bulk.tensor.1d.shared::cluster.global") == 1


# ---- the same Tile IR in the interpreter ----


@pytest.mark.parametrize("mnk", [(200, 136, 328), (64, 64, 32), (130, 72, 40)])
@pytest.mark.parametrize("programs,stages,subtile", [(3, 3, False), (7, 2, True), (1, 4, False)])
def test_persistent_form_in_interpreter(rng, mnk, programs, stages, subtile):
    M, N, K = mnk
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    compiled = device_desc_gemm_persistent[(programs,)](
        a, np.ascontiguousarray(b.T), c, M, N, K, BM=64, BN=64, BK=32, GROUP=2,
        NUM_PROGRAMS=programs, SUBTILE=subtile, num_warps=4, num_stages=stages)
    ir = compiled.kernel.tile_ir
    # The K loop is the TMA ring over the tensor maps made before the tile loop.
    assert ir.count("async_desc_load ") == 2 * stages and " desc_load " not in ir
    assert ir.index("make_desc") < ir.index(" = for ")
    check(c, a, b)


def test_desc_load_through_a_ring_descriptor_in_interpreter(rng):
    M, N, K = 200, 136, 328
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    device_desc_gemm_row_sums[(cdiv(M, 64), cdiv(N, 64))](a, np.ascontiguousarray(b.T), c, M, N,
                                                          K, BM=64, BN=64, BK=32, num_stages=3)
    sums = a[:, :32].astype(np.float64).sum(axis=1)[:, None]
    ref = a.astype(np.float64) @ b.astype(np.float64) + sums
    assert np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref) < 2e-3


@pytest.mark.parametrize("kernel", [device_desc_gemm_made_in_loop, device_desc_gemm_mixed,
                                    device_desc_gemm_strided])
def test_pointer_fallbacks_in_interpreter(rng, kernel):
    M, N, K = 200, 136, 328
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    args = (a, np.ascontiguousarray(b.T), c, M, N, K)
    if kernel is device_desc_gemm_strided:
        # A given as the transpose of a K x M array: strides (1, M) elements.
        a_t = np.ascontiguousarray(a.T)
        args = (a_t, np.ascontiguousarray(b.T), c, M, N, K, 1, M)
    compiled = kernel[(cdiv(M, 64), cdiv(N, 64))](*args, BM=64, BN=64, BK=32, num_warps=4,
                                                  num_stages=3)
    ir = compiled.kernel.tile_ir
    assert "async_load " in ir and "async_desc_load" not in ir
    check(c, a, b)


@pytest.mark.parametrize("m,n,bm,bn", [(100, 72, 64, 32), (64, 64, 64, 64), (33, 200, 16, 64)])
def test_maps_made_in_a_loop_in_interpreter(rng, m, n, bm, bn):
    batch = 3
    x = rng.standard_normal((batch, m, n)).astype(np.float16)
    y = np.full_like(x, np.nan)
    # One program more than the tensor needs along each dim: its boxes lie wholly outside.
    batched_copy_new_desc_each_step[(cdiv(m, bm) + 1, cdiv(n, bn) + 1)](x, y, m, n, batch, BM=bm,
                                                                         BN=bn)
    expected = 2 * x + np.arange(batch, dtype=np.float16)[:, None, None]
    np.testing.assert_array_equal(y, expected)


def test_descriptor_carried_by_a_loop_in_interpreter(rng):
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32)
    out = np.full_like(x, np.nan)
    carried_descriptor[(1,)](x, y, out, 1000, 3, B=64)
    np.testing.assert_array_equal(out, np.concatenate([x[:192], y[192:]]) + 1)
