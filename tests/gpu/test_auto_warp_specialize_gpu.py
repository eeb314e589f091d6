"""Automatic warp specialization on the H200 (src/transforms/WarpSpecialize.cpp): tutorial 09's
kernels with their K loop or tile loop marked warp_specialize=True (tests/python/
auto_ws_kernels.py), the persistent ones run as a TMA producer warp and wgmma consumers (the
one-tile kernel stays software-pipelined), against torch.matmul, at
the tutorial's block sizes and at sizes that are not multiples of them, fp16 and bf16; the same
kernels with the flag off, for the same results; a tile loop whose K loop is the one marked."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda((9, 0), "the warp-specialized TMA GEMM is built for sm_90a")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import warpweave as ww  # noqa: E402
from auto_ws_kernels import (descriptor_persistent_ws, inner_marked_persistent_ws,  # noqa: E402
                             tma_gemm_ws, tma_persistent_ws)

DEV = "cuda"


@pytest.fixture(autouse=True)
def hopper_and_allocator(monkeypatch):
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the warp-specialized TMA GEMM is built for sm_90a")
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", "4000000")  # a ring out of step traps, not hangs
    ww.set_allocator(lambda size, alignment, stream: torch.empty(size, device=DEV,
                                                                 dtype=torch.int8))
    yield
    ww.set_allocator(None)


def cdiv(x, y):
    return -(-x // y)


def operands(M, N, K, dtype):
    torch.manual_seed(0)
    a = (torch.randn(M, K, device=DEV) / 8).to(dtype)
    b = (torch.randn(K, N, device=DEV) / 8).to(dtype)
    return a, b


def check(c, a, b):
    ref = torch.matmul(a.float(), b.float())
    tol = dict(atol=2e-2, rtol=1e-2) if c.dtype == torch.float16 else dict(atol=4e-2, rtol=2e-2)
    torch.testing.assert_close(c.float(), ref, **tol)


def run(which, a, b, block, warps, stages, ws=True, programs=132, subtile=False):
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk = block
    bt = b.T.contiguous()
    c = torch.full((M, N), float("nan"), device=DEV, dtype=a.dtype)
    consts = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
                  WARP_SPECIALIZE=ws, num_warps=warps, num_stages=stages)
    tiles = cdiv(M, bm) * cdiv(N, bn)
    if which == "descriptor_persistent":
        compiled = descriptor_persistent_ws[(min(programs, tiles),)](
            a, bt, c, M, N, K, EPILOGUE_SUBTILE=subtile, NUM_SMS=programs, **consts)
    else:
        da = ww.TensorDescriptor.from_tensor(a, [bm, bk])
        db = ww.TensorDescriptor.from_tensor(bt, [bn, bk])
        dc = ww.TensorDescriptor.from_tensor(c, [bm, bn // 2 if subtile else bn])
        if which == "tma":
            compiled = tma_gemm_ws[(tiles,)](da, db, dc, M, N, K, **consts)
        else:
            compiled = tma_persistent_ws[(min(programs, tiles),)](
                da, db, dc, M, N, K, EPILOGUE_SUBTILE=subtile, NUM_SMS=programs, **consts)
    torch.cuda.synchronize()
    # One-tile kernels stay software-pipelined (faster on the H200); persistent ones split.
    assert ("async_tasks" in compiled.kernel.tile_ir) == (ws and which != "tma")
    return c


@pytest.mark.parametrize("which", ["tma", "tma_persistent", "descriptor_persistent"])
@pytest.mark.parametrize("block,warps,stages", [((128, 128, 64), 4, 4), ((128, 256, 64), 8, 3),
                                                ((128, 128, 128), 8, 3)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_tutorial_configurations_match_torch(which, block, warps, stages, dtype):
    a, b = operands(1024, 1024, 1024, dtype)
    check(run(which, a, b, block, warps, stages), a, b)


@pytest.mark.parametrize("which", ["tma", "tma_persistent", "descriptor_persistent"])
@pytest.mark.parametrize("mnk", [(1000, 744, 328), (200, 136, 40), (128, 128, 64), (333, 520, 8)])
@pytest.mark.parametrize("programs", [3, 132])
def test_ragged_sizes_match_torch(which, mnk, programs):
    a, b = operands(*mnk, torch.float16)
    check(run(which, a, b, (128, 128, 64), 4, 3, programs=programs), a, b)


@pytest.mark.parametrize("which", ["tma_persistent", "descriptor_persistent"])
def test_subtiled_epilogue_matches_torch(which):
    a, b = operands(1000, 1000, 1000, torch.float16)
    check(run(which, a, b, (128, 256, 64), 8, 3, subtile=True), a, b)


@pytest.mark.parametrize("which", ["tma", "tma_persistent"])
def test_flag_off_gives_the_same_result(which):
    a, b = operands(4096, 4096, 4096, torch.float16)
    on = run(which, a, b, (128, 256, 64), 8, 3)
    off = run(which, a, b, (128, 256, 64), 8, 3, ws=False)
    # The same products in the same order of K steps: the same bits.
    assert torch.equal(on, off)
    check(on, a, b)


@pytest.mark.parametrize("mnk", [(1000, 744, 328), (4096, 4096, 4096)])
def test_marked_k_loop_of_a_tile_loop_matches_torch(mnk):
    a, b = operands(*mnk, torch.float16)
    M, K = a.shape
    N = b.shape[1]
    bt = b.T.contiguous()
    c = torch.full((M, N), float("nan"), device=DEV, dtype=a.dtype)
    da = ww.TensorDescriptor.from_tensor(a, [128, 64])
    db = ww.TensorDescriptor.from_tensor(bt, [256, 64])
    dc = ww.TensorDescriptor.from_tensor(c, [128, 256])
    compiled = inner_marked_persistent_ws[(132,)](da, db, dc, M, N, K, BLOCK_SIZE_M=128,
                                                  BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, NUM_SMS=132,
                                                  num_warps=8, num_stages=3)
    torch.cuda.synchronize()
    assert "async_tasks" in compiled.kernel.tile_ir
    check(c, a, b)


@pytest.mark.parametrize("which", ["tma", "tma_persistent"])
def test_fp8_operands_match_torch(which):
    # Tutorial 09's fp8 inputs (e4m3, B^T tiles read K-major), fp16 C.
    torch.manual_seed(0)
    M, N, K = 1000, 744, 1024
    a = (torch.randn(M, K, device=DEV) / 4).to(torch.float8_e4m3fn)
    b = (torch.randn(K, N, device=DEV) / 4).to(torch.float8_e4m3fn)
    bt = b.T.contiguous()
    c = torch.full((M, N), float("nan"), device=DEV, dtype=torch.float16)
    bm, bn, bk = 128, 256, 128
    da = ww.TensorDescriptor.from_tensor(a, [bm, bk])
    db = ww.TensorDescriptor.from_tensor(bt, [bn, bk])
    dc = ww.TensorDescriptor.from_tensor(c, [bm, bn])
    consts = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
                  WARP_SPECIALIZE=True, num_warps=8, num_stages=3)
    tiles = cdiv(M, bm) * cdiv(N, bn)
    if which == "tma":
        compiled = tma_gemm_ws[(tiles,)](da, db, dc, M, N, K, **consts)
    else:
        compiled = tma_persistent_ws[(min(132, tiles),)](da, db, dc, M, N, K,
                                                         EPILOGUE_SUBTILE=False, NUM_SMS=132,
                                                         **consts)
    torch.cuda.synchronize()
    assert ("async_tasks" in compiled.kernel.tile_ir) == (which != "tma")
    ref = torch.matmul(a.float(), b.float())
    torch.testing.assert_close(c.float(), ref, atol=5e-2, rtol=2e-2)
