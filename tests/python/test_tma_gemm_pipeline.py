"""A plain tl.dot K loop over host tensor descriptors (Triton's tutorial 09 `matmul_kernel_tma`
form; tests/python/tma_gemm_kernels.py) is software-pipelined for sm_90a like the attention loop:
the A and B tiles arrive by TMA into num_stages swizzled slots completing on one mbarrier per
slot (expect-tx), num_stages - 1 iterations ahead; the dot is an async wgmma straight from the
slots with one group in flight. The persistent form carries the ring's slot and phase across
tiles. The sm_90a Tile IR runs in the interpreter against NumPy; the PTX at the tutorial's
configurations assembles for sm_90a without spills, the stages' bytes shared with the
epilogue's descriptor store."""

import os
import re
import sys

import numpy as np
import pytest

import warpweave as ww

pytest.importorskip("warpweave._native")

sys.path.insert(0, os.path.dirname(__file__))
from tma_gemm_kernels import desc_gemm, desc_gemm_persistent, device_desc_gemm  # noqa: E402


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def cdiv(x, y):
    return -(-x // y)


def descriptors(a, b, c, block, b_kn):
    bm, bn, bk = block
    db = (ww.TensorDescriptor.from_tensor(b, [bk, bn]) if b_kn else
          ww.TensorDescriptor.from_tensor(np.ascontiguousarray(b.T), [bn, bk]))
    return (ww.TensorDescriptor.from_tensor(a, [bm, bk]), db,
            ww.TensorDescriptor.from_tensor(c, [bm, bn]))


def check(c, a, b):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = c.astype(np.float64)
    assert np.isfinite(out).all()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 2e-3


@pytest.mark.parametrize("mnk,stages,warps,b_kn", [
    ((200, 136, 328), 3, 4, False),  # K = 10.25 blocks; partial M and N edge tiles
    ((200, 136, 328), 2, 8, False),  # two slots, one copy ahead; two warp groups
    ((130, 72, 40), 4, 4, False),    # two K blocks: the prologue's third copy is predicated off
    ((200, 136, 328), 3, 4, True),   # B as K x N tiles, read N-major
])
def test_pipelined_tma_gemm_in_interpreter(rng, mnk, stages, warps, b_kn):
    M, N, K = mnk
    block = (64, 64, 32)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    grid = (cdiv(M, 64) * cdiv(N, 64),)
    compiled = desc_gemm[grid](*descriptors(a, b, c, block, b_kn), M, N, K, BM=64, BN=64, BK=32,
                               GROUP=2, B_KN=b_kn, WS=False, num_warps=warps,
                               num_stages=stages)
    assert compiled.interpret
    ir = compiled.kernel.tile_ir
    assert " = dot " not in ir and " desc_load " not in ir
    # num_stages - 1 iterations in the prologue and one in the loop, A and B each.
    assert ir.count("async_desc_load ") == 2 * stages
    assert ir.count("alloc_barriers") == 1
    assert f"buffer<{stages}x64x32xfp16, smem>" in ir
    assert ir.count("async_dot_wait") == 2  # {pendings = 1} in the loop, 0 after it
    check(c, a, b)


@pytest.mark.parametrize("programs,stages,warps,ws", [(3, 3, 4, False), (2, 4, 8, True),
                                                      (7, 2, 4, False)])
def test_persistent_tma_gemm_in_interpreter(rng, programs, stages, warps, ws):
    M, N, K = 200, 136, 328
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    compiled = desc_gemm_persistent[(programs,)](
        *descriptors(a, b, c, (64, 64, 32), False), M, N, K, BM=64, BN=64, BK=32, GROUP=2,
        NUM_PROGRAMS=programs, WS=ws, num_warps=warps, num_stages=stages)
    ir = compiled.kernel.tile_ir
    if ws:
        # warp_specialize=True: a TMA producer task and the consumers (test_auto_warp_specialize).
        assert ir.count("async_task ") == 2 and ir.count("async_desc_load ") == 2
        check(c, a, b)
        return
    assert ir.count("async_desc_load ") == 2 * stages
    # One ring of barriers for the whole kernel, before the tile loop, whose slot and phase the
    # tile loop carries.
    assert ir.index("alloc_barriers") < ir.index(" = for ")
    tile_loop = ir[ir.index(" = for "):].split("\n")[0]
    assert "pipeline_slot" in tile_loop and "pipeline_phase" in tile_loop
    check(c, a, b)


def compile_sm90a(kernel, block, stages, warps, persistent=False, b_kn=False):
    bm, bn, bk = block
    x = np.zeros((4096, 4096), np.float16)
    da = ww.TensorDescriptor.from_tensor(x, [bm, bk])
    db = ww.TensorDescriptor.from_tensor(x, [bk, bn] if b_kn else [bn, bk])
    dc = ww.TensorDescriptor.from_tensor(x, [bm, bn])
    consts = dict(BM=bm, BN=bn, BK=bk, GROUP=8, WS=False)
    if persistent:
        consts["NUM_PROGRAMS"] = 132
    else:
        consts["B_KN"] = b_kn
    values = kernel.bind((da, db, dc, 4096, 4096, 4096), consts)
    return kernel.compile_for(values, False, (warps, stages, 1), target="sm_90a").kernel


needs_ptxas = pytest.mark.usefixtures("requires_ptxas")


def loop_body(ptx):
    start = ptx.index("$L_for_0:")
    return ptx[start:ptx.index("bra.uni $L_for_0;", start)]


@needs_ptxas
@pytest.mark.parametrize("block,stages,warps", [((128, 256, 64), 3, 8), ((128, 256, 64), 4, 8),
                                                ((128, 128, 64), 4, 4), ((128, 128, 128), 3, 8)])
def test_tutorial_configuration_is_pipelined_with_tma(block, stages, warps):
    kernel = compile_sm90a(desc_gemm, block, stages, warps)
    ptx = kernel.ptx
    bm, bn, bk = block
    print(f"{block} stages {stages} warps {warps}: {kernel.registers} registers, "
          f"{kernel.spill_bytes} spill bytes, {kernel.shared_bytes} B shared")
    assert kernel.spill_bytes == 0
    body = loop_body(ptx)
    # The loop: one mbarrier wait on the slot, wgmmas from shared memory (descriptors, no
    # ld.shared), one group left in flight, then the next TMA copies behind one expect-tx.
    assert body.count("mbarrier.try_wait.parity") == 1
    assert body.count("mbarrier.arrive.expect_tx") == 1
    # A tile's rows wider than the 128-byte swizzle go as one box per 128 bytes.
    boxes = max(1, bk * 2 // 128)
    assert body.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier") == 2 * boxes
    assert f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.f16.f16" in body
    assert "wgmma.wait_group.sync.aligned 1;" in body
    assert body.index("wgmma.wait_group.sync.aligned 1;") < body.index("cp.async.bulk.tensor")
    for sync in ("ld.shared", "ld.global", "cp.async.cg", "cp.async.wait"):
        assert sync not in body
    # The accumulator stays in the wgmma's registers: no copies of it before the back edge.
    assert body.count("mov.f32") <= 8
    # num_stages - 1 copies ahead: that many expect-tx before the loop.
    assert ptx[:ptx.index("$L_for_0:")].count("mbarrier.arrive.expect_tx") == stages - 1
    # The stages' bytes are shared with the epilogue's descriptor store (M x N fp16): the
    # kernel takes the stages and its barriers, not the sum.
    stage_bytes = (bm + bn) * bk * 2
    assert kernel.shared_bytes <= stages * stage_bytes + 1024
    assert kernel.shared_bytes >= stages * stage_bytes


@needs_ptxas
def test_four_stages_of_128x256x64_fit():
    # 4 x 48 KB of stages and the 64 KB epilogue tile would not fit side by side (256 KB).
    kernel = compile_sm90a(desc_gemm, (128, 256, 64), 4, 8)
    ptx = kernel.ptx
    assert ptx[:ptx.index("$L_for_0:")].count("mbarrier.arrive.expect_tx") == 3
    assert kernel.shared_bytes == 4 * 48 * 1024 + 1024


@needs_ptxas
@pytest.mark.parametrize("block,stages,warps", [((128, 256, 64), 4, 8), ((128, 128, 64), 3, 4)])
def test_persistent_tutorial_configuration(block, stages, warps):
    kernel = compile_sm90a(desc_gemm_persistent, block, stages, warps, persistent=True)
    assert kernel.spill_bytes == 0
    ptx = kernel.ptx
    # The barriers are initialized once, before the tile loop.
    assert ptx.count("mbarrier.init") == stages
    assert ptx.index("mbarrier.init") < ptx.index("$L_for_0:")
    inner = re.findall(r"\$L_for_(\d+):", ptx)
    assert len(inner) == 2
    body = ptx[ptx.index(f"$L_for_{inner[1]}:"):ptx.index(f"bra.uni $L_for_{inner[1]};")]
    assert body.count("mbarrier.try_wait.parity") == 1
    assert body.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier") == 2


@needs_ptxas
@pytest.mark.parametrize("block,stages,warps", [((128, 256, 64), 3, 8), ((128, 128, 64), 4, 4)])
def test_epilogue_descriptor_store_writes_matrices(block, stages, warps):
    # c_desc.store(acc.to(fp16)): the accumulator goes to the TMA tile in 8x8 matrices
    # (stmatrix .x4, a thread's 8 elements each), not as 4-byte st.shared with an address each.
    kernel = compile_sm90a(desc_gemm, block, stages, warps)
    assert kernel.spill_bytes == 0
    tail = kernel.ptx.rsplit("wgmma.wait_group.sync.aligned 0;", 1)[1]
    per_thread = block[0] * block[1] // (32 * warps)
    assert tail.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == per_thread // 8
    assert "st.shared" not in tail
    assert tail.index("stmatrix") < tail.index("cp.async.bulk.tensor.2d.global.shared::cta")


@needs_ptxas
def test_b_as_k_by_n_tiles():
    kernel = compile_sm90a(desc_gemm, (128, 128, 64), 3, 4, b_kn=True)
    assert kernel.spill_bytes == 0
    body = loop_body(kernel.ptx)
    # A's 128-byte rows in one box, B's 256-byte ones ([64, 128] fp16) in two.
    assert body.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier") == 3
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in body


def test_descriptors_made_in_the_kernel_in_interpreter(rng):
    # Their K loop is the same TMA ring over tensor maps the kernel writes (the PTX is checked
    # in tests/python/test_device_descriptor_tma.py).
    M, N, K = 200, 136, 328
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    compiled = device_desc_gemm[(cdiv(M, 64) * cdiv(N, 64),)](
        a, np.ascontiguousarray(b.T), c, M, N, K, BM=64, BN=64, BK=32, GROUP=2, num_stages=3)
    assert compiled.kernel.tile_ir.count("async_desc_load ") == 2 * 3
    check(c, a, b)
