"""Automatic warp specialization on sm_90a (src/transforms/WarpSpecialize.cpp): tutorial 09's
kernels whose persistent tile loop (or its K loop) is marked tl.range(..., warp_specialize=True)
(tests/python/auto_ws_kernels.py) become a one-warp TMA producer task and the MMA consumers
(the default task). PTX and ptxas checks at the tutorial's block sizes, the loops the rewrite
does not take (one-tile kernels, which stay software-pipelined, pointer loads, other targets,
the flag off; tests/lit/warp-specialize shows the rewrite of a one-tile loop through ww-opt),
and the rewritten Tile IR in the
interpreter, exact against NumPy on integer-valued operands at sizes that are not multiples of
the blocks."""

import os
import re
import sys

import numpy as np
import pytest

pytest.importorskip("warpweave._native")

import warpweave as ww  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from auto_ws_kernels import (descriptor_persistent_ws, inner_marked_persistent_ws,  # noqa: E402
                             pointer_gemm_ws, tma_gemm_ws, tma_gemm_ws_pointer_epilogue,
                             tma_persistent_ws)

needs_ptxas = pytest.mark.usefixtures("requires_ptxas")

TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def count(text, needle):
    return sum(1 for line in text.splitlines() if needle in line)


def host_descs(a, bt, c, bm, bn, bk, subtile=False):
    """A [M, K], B^T [N, K], C [M, N] (C in [bm, bn // 2] blocks for a subtiled epilogue)."""
    return (ww.TensorDescriptor.from_tensor(a, [bm, bk]),
            ww.TensorDescriptor.from_tensor(bt, [bn, bk]),
            ww.TensorDescriptor.from_tensor(c, [bm, bn // 2 if subtile else bn]))


def compile_kernel(which, block, warps, stages=3, ws=True, target="sm_90a"):
    bm, bn, bk = block
    subtile = which.endswith("_subtile")
    which = which.removesuffix("_subtile")
    M = N = K = 4096
    a = np.zeros((M, K), np.float16)
    bt = np.zeros((N, K), np.float16)
    c = np.zeros((M, N), np.float16)
    consts = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
                  WARP_SPECIALIZE=ws)
    if which == "tma":
        kernel, args = tma_gemm_ws, host_descs(a, bt, c, bm, bn, bk) + (M, N, K)
    elif which == "tma_persistent":
        kernel, args = tma_persistent_ws, host_descs(a, bt, c, bm, bn, bk, subtile) + (M, N, K)
        consts.update(NUM_SMS=132, EPILOGUE_SUBTILE=subtile)
    else:
        kernel, args = descriptor_persistent_ws, (a, bt, c, M, N, K)
        consts.update(NUM_SMS=132, EPILOGUE_SUBTILE=subtile)
    values = kernel.bind(args, consts)
    return kernel.compile_for(values, False, (warps, stages, 1), target=target).kernel


def task_bodies(ptx):
    """The consumers' code (from their setmaxnreg.inc to the end of their task) and the
    producer's (from the setmaxnreg.dec after it, the idle warps' being before, to its end)."""
    inc = ptx.index("setmaxnreg.inc.sync.aligned.u32")
    consumer_end = ptx.index("$L_task_end_", inc)
    dec = ptx.index("setmaxnreg.dec.sync.aligned.u32", consumer_end)
    return ptx[inc:consumer_end], ptx[dec:ptx.index("$L_task_end_", dec)]


# ---- sm_90a: the tasks, their registers, the ring ----


@needs_ptxas
@pytest.mark.parametrize("which", ["tma_persistent", "tma_persistent_subtile",
                                   "descriptor_persistent", "descriptor_persistent_subtile"])
@pytest.mark.parametrize("block,warps,stages", [((128, 128, 64), 4, 4), ((128, 256, 64), 8, 3)])
def test_marked_loop_becomes_a_tma_producer_and_wgmma_consumers(which, block, warps, stages):
    bm, bn, bk = block
    kernel = compile_kernel(which, block, warps, stages)
    ir, ptx = kernel.tile_ir, kernel.ptx
    # Tile IR: one async_tasks block, the default task (the consumers) and a one-warp producer
    # with a 40-register budget; the ring of `stages` slots; no desc_load left in a loop.
    assert ir.count("async_tasks") == 1
    assert "async_task {num_warps = 1, num_regs = 40" in ir
    assert ir.count("async_desc_load ") == 2 and " desc_load " not in ir
    assert ir.count("async_dot ") == 1
    assert f"buffer<{stages}x{bm}x{bk}xfp16, smem>" in ir
    assert f"buffer<{stages}x{bn}x{bk}xfp16, smem>" in ir
    assert kernel.spill_bytes == 0
    # Registers move from the producer's warp group to the consumers'.
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx
    m = re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32 (\d+);", ptx)
    assert m and int(m.group(1)) >= 232
    consumer, producer = task_bodies(ptx)
    # The producer: waits for a free slot, expects both tiles' bytes, two TMA copies.
    assert count(producer, TMA_LOAD) == 2
    assert count(producer, "mbarrier.arrive.expect_tx") == 1
    assert count(producer, "mbarrier.try_wait.parity") >= 1
    assert "wgmma" not in producer
    # The consumers: wait on the slot's full barrier, async wgmma from shared memory, one left
    # in flight, the slot released by an arrive on its empty barrier.
    assert f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.f16.f16" in consumer
    assert "wgmma.wait_group.sync.aligned 1;" in consumer
    assert "mbarrier.try_wait.parity" in consumer
    assert "mbarrier.arrive" in consumer
    # Every consumer thread arrives on the empty warp barrier (initialized to num_warps * 32
    # arrivals): no meeting of the consumer warps in the K loop.
    mma = consumer.index("wgmma.mma_async")
    k_loop = consumer[consumer.rindex("$L_for_", 0, mma):consumer.index("bra.uni $L_for_", mma)]
    assert "bar.sync" not in k_loop and "mbarrier.arrive" in k_loop
    assert re.search(rf"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], {warps * 32};", ptx)
    assert TMA_LOAD not in consumer
    assert "ld.global" not in ptx


@needs_ptxas
@pytest.mark.parametrize("which", ["tma_persistent", "tma_persistent_subtile",
                                   "descriptor_persistent", "descriptor_persistent_subtile"])
@pytest.mark.parametrize("bn,bk", [(128, 64), (128, 128), (256, 64), (256, 128)])
@pytest.mark.parametrize("stages", [3, 4])
def test_tutorial_autotune_configurations_fit(which, bn, bk, stages):
    # Tutorial 09's autotuning space at 8 warps: the ring keeps as many stages as fit beside
    # the epilogue's staging tile (a subtiled epilogue stages half the tile), within the 227 KB
    # an sm_90 block may have, without spills. 128x256x128 with a whole-tile epilogue has no
    # room for two stages and runs as without the flag (the software pipeliner's ring).
    kernel = compile_kernel(which, (128, bn, bk), 8, stages)
    assert kernel.spill_bytes == 0 and kernel.shared_bytes <= 232448
    stage_bytes = (128 + bn) * bk * 2
    epilogue = 128 * (bn // 2 if which.endswith("subtile") else bn) * 2
    fits = max(s for s in range(1, stages + 1) if s * stage_bytes + epilogue + 2048 <= 232448)
    if fits < 2:
        assert "async_tasks" not in kernel.tile_ir
        return
    assert "async_tasks" in kernel.tile_ir
    assert f"buffer<{fits}x128x{bk}xfp16, smem>" in kernel.tile_ir


@needs_ptxas
def test_fp8_operands_with_k_major_b():
    # Tutorial 09's fp8 inputs: B read as the transpose of its [N, K] tile, wgmma k32 from the
    # ring (e4m3 x e4m3 into fp32).
    from warpweave import _native_loader
    path = os.path.join(os.path.dirname(__file__), "auto_ws_kernels.py")
    with open(path) as f:
        text = f.read()
    sig = ("a_desc:desc<fp8e4nv,128x128>, b_desc:desc<fp8e4nv,256x128>, "
           "c_desc:desc<fp16,128x256>, M:i32, N:i32, K:i32, BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, "
           "BLOCK_SIZE_K=128, GROUP_SIZE_M=8, EPILOGUE_SUBTILE=0, NUM_SMS=132, WARP_SPECIALIZE=1")
    kernel = _native_loader.native().compile([(path, text)], "tma_persistent_ws", sig, {},
                                             target="sm_90a", num_warps=8, stage="cubin")
    assert "async_tasks" in kernel.tile_ir and kernel.spill_bytes == 0
    consumer, producer = task_bodies(kernel.ptx)
    assert "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" in consumer
    assert count(producer, TMA_LOAD) == 2


@pytest.mark.parametrize("ws", [False, True])
def test_flag_off_and_one_tile_kernels_keep_the_software_pipeline(ws):
    # A marked K loop that is the kernel's whole loop (one tile per program) is left to the
    # pipeliner: split, it measured about 10% slower on the H200 (docs/status.md, session 20).
    kernel = compile_kernel("tma", (128, 128, 64), 4, ws=ws)
    assert "async_tasks" not in kernel.tile_ir
    assert "async_desc_load" in kernel.tile_ir  # the pipeliner's TMA ring
    assert "setmaxnreg" not in kernel.ptx


@pytest.mark.parametrize("target,which", [("sm_80", "descriptor_persistent"),
                                          ("sm_100a", "tma"),
                                          ("sm_100a", "descriptor_persistent")])
def test_other_targets_ignore_the_flag(target, which):
    # (sm_80 has no TMA: host descriptors are an error there, in-kernel ones pointer loads.)
    kernel = compile_kernel(which, (128, 128, 64), 4, target=target)
    assert "async_tasks" not in kernel.tile_ir
    assert "setmaxnreg" not in kernel.ptx


def test_pointer_loads_are_not_warp_specialized():
    x = np.zeros((512, 512), np.float16)
    values = pointer_gemm_ws.bind((x, x, x, 512, 512, 512),
                                  dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64))
    kernel = pointer_gemm_ws.compile_for(values, False, (4, 3, 1), target="sm_90a").kernel
    assert "async_tasks" not in kernel.tile_ir
    assert "async_load" in kernel.tile_ir  # still the cp.async pipeline


# ---- the rewritten Tile IR in the interpreter, exact against NumPy ----


def integer_operands(rng, M, N, K):
    # Small integers: every product and partial sum is exact in fp32, and every C value (at
    # most 4 * K in magnitude) exact in fp16, so the result must equal NumPy's exactly.
    a = rng.integers(-2, 3, (M, K)).astype(np.float16)
    b = rng.integers(-2, 3, (K, N)).astype(np.float16)
    return a, b


def exact(c, a, b):
    ref = a.astype(np.int64) @ b.astype(np.int64)
    np.testing.assert_array_equal(c.astype(np.int64), ref)


@pytest.mark.parametrize("mnk", [(200, 136, 328), (64, 64, 32), (130, 72, 40), (72, 40, 8)])
@pytest.mark.parametrize("stages", [2, 3])
def test_one_tile_k_loop_in_interpreter(rng, mnk, stages):
    M, N, K = mnk
    a, b = integer_operands(rng, M, N, K)
    bt = np.ascontiguousarray(b.T)
    c = np.full((M, N), np.nan, np.float16)
    bm, bn, bk = 64, 64, 32
    grid = (-(-M // bm) * -(-N // bn),)
    compiled = tma_gemm_ws[grid](*host_descs(a, bt, c, bm, bn, bk), M, N, K, BLOCK_SIZE_M=bm,
                                 BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=2,
                                 WARP_SPECIALIZE=True, num_warps=4, num_stages=stages)
    assert "async_tasks" not in compiled.kernel.tile_ir  # one tile per program: pipelined
    exact(c, a, b)


@pytest.mark.parametrize("mnk", [(200, 136, 328), (130, 72, 40), (64, 64, 32), (72, 40, 8)])
@pytest.mark.parametrize("programs,stages", [(3, 3), (7, 2), (1, 4)])
@pytest.mark.parametrize("which", ["tma_persistent", "tma_persistent_subtile",
                                   "descriptor_persistent", "descriptor_persistent_subtile"])
def test_persistent_loops_in_interpreter(rng, mnk, programs, stages, which):
    M, N, K = mnk
    a, b = integer_operands(rng, M, N, K)
    bt = np.ascontiguousarray(b.T)
    c = np.full((M, N), np.nan, np.float16)
    bm, bn, bk = 64, 64, 32
    common = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=2,
                  NUM_SMS=programs, WARP_SPECIALIZE=True, num_warps=4, num_stages=stages)
    subtile = which.endswith("subtile")
    if which.startswith("tma_persistent"):
        compiled = tma_persistent_ws[(programs,)](*host_descs(a, bt, c, bm, bn, bk, subtile), M,
                                                  N, K, EPILOGUE_SUBTILE=subtile, **common)
    else:
        compiled = descriptor_persistent_ws[(programs,)](
            a, bt, c, M, N, K, EPILOGUE_SUBTILE=subtile, **common)
    ir = compiled.kernel.tile_ir
    assert "async_tasks" in ir and ir.index("make_desc" if "descriptor" in which else
                                            "async_tasks") <= ir.index("async_tasks")
    exact(c, a, b)


@pytest.mark.parametrize("programs", [1, 5])
def test_marked_k_loop_of_a_tile_loop_in_interpreter(rng, programs):
    M, N, K = 200, 136, 328
    a, b = integer_operands(rng, M, N, K)
    bt = np.ascontiguousarray(b.T)
    c = np.full((M, N), np.nan, np.float16)
    compiled = inner_marked_persistent_ws[(programs,)](
        *host_descs(a, bt, c, 64, 64, 32), M, N, K, BLOCK_SIZE_M=64, BLOCK_SIZE_N=64,
        BLOCK_SIZE_K=32, NUM_SMS=programs, num_warps=4, num_stages=3)
    ir = compiled.kernel.tile_ir
    # The tile loop itself is split: both tasks run it.
    assert ir.index("async_tasks") < ir.index(" = for ")
    assert ir.count("async_task ") == 2 and ir.count(" = for ") == 4
    exact(c, a, b)


def test_one_tile_pointer_epilogue_in_interpreter(rng):
    M, N, K = 200, 136, 328
    a, b = integer_operands(rng, M, N, K)
    bt = np.ascontiguousarray(b.T)
    c = np.full((M, N), np.nan, np.float16)
    ad, bd, _ = host_descs(a, bt, c, 64, 64, 32)
    compiled = tma_gemm_ws_pointer_epilogue[(-(-M // 64) * -(-N // 64),)](
        ad, bd, c, M, N, K, BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, num_warps=4,
        num_stages=3)
    assert "async_tasks" not in compiled.kernel.tile_ir  # one tile per program: pipelined
    exact(c, a, b)


@needs_ptxas
def test_one_tile_pointer_epilogue_compiles_without_spills():
    x = np.zeros((4096, 4096), np.float16)
    ad = ww.TensorDescriptor.from_tensor(x, [128, 64])
    bd = ww.TensorDescriptor.from_tensor(x, [256, 64])
    values = tma_gemm_ws_pointer_epilogue.bind(
        (ad, bd, x, 4096, 4096, 4096), dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64))
    kernel = tma_gemm_ws_pointer_epilogue.compile_for(values, False, (8, 3, 1),
                                                      target="sm_90a").kernel
    assert "async_tasks" not in kernel.tile_ir and kernel.spill_bytes == 0
    assert "st.global" in kernel.ptx


def test_pointer_loop_in_interpreter(rng):
    M, N, K = 130, 72, 100
    a, b = integer_operands(rng, M, N, K)
    c = np.full((M, N), np.nan, np.float16)
    pointer_gemm_ws[(-(-M // 64), -(-N // 64))](a, b, c, M, N, K, BLOCK_SIZE_M=64,
                                                BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, num_warps=4)
    exact(c, a, b)


@pytest.mark.parametrize("seed,schedules", [(1, 4), (77, 3), (123456789, 2)])
@pytest.mark.parametrize("which", ["tma", "tma_persistent", "descriptor_persistent"])
def test_seeded_task_interleavings_in_interpreter(rng, monkeypatch, seed, schedules, which):
    # Seeded random interleavings of the producer and the consumers: no race, deadlock or
    # over-arrival report, and the exact product under each.
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    monkeypatch.setenv("WARPWEAVE_INTERP_SCHEDULES", str(schedules))
    M, N, K = 136, 72, 200
    a, b = integer_operands(rng, M, N, K)
    bt = np.ascontiguousarray(b.T)
    c = np.full((M, N), np.nan, np.float16)
    bm, bn, bk = 64, 64, 32
    common = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=2,
                  WARP_SPECIALIZE=True, num_warps=4, num_stages=2)
    if which == "tma":
        grid = (-(-M // bm) * -(-N // bn),)
        tma_gemm_ws[grid](*host_descs(a, bt, c, bm, bn, bk), M, N, K, **common)
    elif which == "tma_persistent":
        tma_persistent_ws[(3,)](*host_descs(a, bt, c, bm, bn, bk), M, N, K,
                                EPILOGUE_SUBTILE=False, NUM_SMS=3, **common)
    else:
        descriptor_persistent_ws[(3,)](a, bt, c, M, N, K, EPILOGUE_SUBTILE=False, NUM_SMS=3,
                                       **common)
    exact(c, a, b)
