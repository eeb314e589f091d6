"""int8 / uint8 tl.dot into int32 on the GPU (tests/python/eight_bit_dot_kernels.py, the kernels
tests/python/test_int8_dot.py checks in the interpreter and in PTX): one dot of whole tiles and
the K loop (B as a transposed [N, K] tile, or through strides K- or N-contiguous), pipelined
(num_stages=3) and not (num_stages=1), at 4 and 8 warps, compiled for the GPU at hand (wgmma
.s32 on Hopper) and for sm_80 (mma.sync m16n8k32, WARPWEAVE_TARGET=sm_80, which the driver JITs
for a newer GPU). Against an exact reference: the integer products and their sums (below 2**31)
are exact in float64, so torch's float64 matmul on the GPU gives the int32 result. Outputs start
poisoned; every compiled kernel is checked to hold the tensor-core instruction its target
should use."""

import os
import re
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda((8, 0), "int8 mma.sync needs a GPU of compute capability 8.0 or newer")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import warpweave.language as tl  # noqa: E402

import eight_bit_dot_kernels as ek  # noqa: E402
from mma_gpu_testing import launch, seeded, target  # noqa: E402,F401

DEV = "cuda"
DTYPES = [torch.int8, torch.uint8]
PTX_NAME = {torch.int8: "s8", torch.uint8: "u8"}
POISON = -7777


def operand(shape, dtype):
    """Random values with the type's extremes on the first and last rows and the first column."""
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max + 1, shape, device=DEV, dtype=torch.int32).to(dtype)
    x[0, :] = info.min
    x[:, 0] = info.max
    x[-1, :] = info.max
    return x


def reference(a, b):
    # |sum| <= 255 * 255 * K < 2**31 < 2**53 for the K used here: exact in float64.
    return (a.double() @ b.double()).to(torch.int32)


def expected_mma(target, dtype, tiny):
    names = PTX_NAME[dtype] + "." + PTX_NAME[dtype]
    if target == "sm_80" or tiny or torch.cuda.get_device_capability() != (9, 0):
        return f"mma.sync.aligned.m16n8k32.row.col.satfinite.s32.{names}.s32"
    return rf"wgmma.mma_async.sync.aligned.m64n\d+k32.s32.{names}.satfinite"


def check_ptx(ptx, target, dtype, tiny=False, pipelined=None):
    """The kernel uses the tensor-core instruction its target should (and, on sm_90a, cp.async
    where the software pipeline should take the loop), and no per-element integer FMA dot."""
    assert (".target sm_80" in ptx) == (target == "sm_80")
    mma = expected_mma(target, dtype, tiny)
    assert re.search(mma, ptx), f"no {mma} in the PTX"
    assert not re.search(r"mad\.lo\.s32 %r\d+, %r\d+, %r\d+, %r\d+;", ptx)
    if pipelined is not None and "wgmma" in mma:
        assert ("cp.async.c" in ptx) == pipelined


@pytest.mark.parametrize("dtype", DTYPES, ids=["int8", "uint8"])
@pytest.mark.parametrize("trans_b", [False, True], ids=["b", "bt"])
@pytest.mark.parametrize("M,N,K,warps", [(64, 64, 64, 4), (128, 128, 64, 4), (128, 128, 64, 8),
                                         (64, 32, 32, 4), (128, 256, 128, 8), (16, 16, 32, 4),
                                         (256, 64, 256, 8)])
def test_tile_dot(target, dtype, trans_b, M, N, K, warps):
    a, b = operand((M, K), dtype), operand((K, N), dtype)
    c = torch.full((M, N), POISON, device=DEV, dtype=torch.int32)
    args = (a, b.t().contiguous() if trans_b else b, c)
    ptx = launch(ek.tile_dot, (1, ), args, dict(M=M, N=N, K=K, TRANS_B=trans_b, OUT=tl.int32),
                 warps)
    assert torch.equal(c, reference(a, b))
    check_ptx(ptx, target, dtype, tiny=M < 64)


def triton_cdiv(a, b):
    return (a + b - 1) // b


@pytest.mark.parametrize("dtype", DTYPES, ids=["int8", "uint8"])
@pytest.mark.parametrize("b_layout", ["bt", "k_major", "n_major"])
@pytest.mark.parametrize("stages", [3, 1])
@pytest.mark.parametrize("warps", [4, 8])
@pytest.mark.parametrize("M,N,K", [(256, 256, 256), (200, 136, 96), (130, 260, 32),
                                   (1024, 512, 2048)])
def test_k_loop(target, dtype, b_layout, stages, warps, M, N, K):
    a, b = operand((M, K), dtype), operand((K, N), dtype)
    c = torch.full((M, N), POISON, device=DEV, dtype=torch.int32)
    grid = (triton_cdiv(M, 128), triton_cdiv(N, 128))
    consts = dict(BM=128, BN=128, BK=64 if K >= 64 else 32, ACC=tl.int32)
    if b_layout == "bt":
        ptx = launch(ek.matmul, grid, (a, b.t().contiguous(), c, M, N, K), consts, warps, stages)
    else:
        bb = b.t().contiguous().t() if b_layout == "k_major" else b  # K- or N-contiguous
        args = (a, bb, c, M, N, K, bb.stride(0), bb.stride(1))
        ptx = launch(ek.matmul_strided_b, grid, args, consts, warps, stages)
    assert torch.equal(c, reference(a, b))
    # The sm_90a pipeline takes the loop when num_stages > 1 and B is K-major (as for fp8).
    check_ptx(ptx, target, dtype, pipelined=stages > 1 and b_layout != "n_major")


def test_large_k_loop_sums_exactly(monkeypatch):
    """4096^3 (|sum| up to 2**26): the pipelined wgmma loop on Hopper, mma.sync elsewhere."""
    monkeypatch.delenv("WARPWEAVE_TARGET", raising=False)
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    M = N = K = 4096
    a, b = operand((M, K), torch.int8), operand((N, K), torch.int8)
    c = torch.full((M, N), POISON, device=DEV, dtype=torch.int32)
    ptx = launch(ek.matmul, (M // 128, N // 128), (a, b, c, M, N, K),
                 dict(BM=128, BN=128, BK=64, ACC=tl.int32), 4)
    assert torch.equal(c, reference(a, b.t()))
    check_ptx(ptx, "native", torch.int8, pipelined=True)
