"""fp16 x fp16 tl.dot into an fp16 accumulator on the GPU (tests/python/eight_bit_dot_kernels.py
with OUT / ACC = tl.float16, the kernels tests/python/test_f16_accumulate_dot.py checks in the
interpreter and in PTX): one dot of whole tiles (out_dtype=tl.float16) and the K loop
(acc = tl.zeros(..., tl.float16); acc = tl.dot(a, b, acc)), at 2, 4 and 8 warps, compiled for
the GPU at hand (wgmma .f16 accumulate on Hopper where a warp group fits) and for sm_80
(mma.sync m16n8k16 .f16, WARPWEAVE_TARGET=sm_80, which the driver JITs for a newer GPU).

The reference is torch's float32 matmul: the tensor cores add each instruction's products in
higher precision and round the sum to fp16 once per instruction, so the result differs from it
by fp16 roundings that grow with K; the tolerance is Triton's test_dot one for fp16
accumulation. Operands are scaled so that sums stay well inside fp16's range. Outputs start as
NaN; every compiled kernel is checked to hold the f16-accumulate MMA its target should use and no
per-element FMA dot."""

import os
import re
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda((8, 0), "fp16 mma.sync needs a GPU of compute capability 8.0 or newer")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import warpweave.language as tl  # noqa: E402

import eight_bit_dot_kernels as ek  # noqa: E402
from mma_gpu_testing import launch, seeded, target  # noqa: E402,F401

DEV = "cuda"


def operand(shape, K):
    # Entries of about 1 / sqrt(K): the sums are of order 1 at every K.
    return (torch.randn(shape, device=DEV) / K**0.5).to(torch.float16)


def check_close(c, a, b):
    assert c.dtype == torch.float16
    ref = a.float() @ b.float()
    # One fp16 rounding per 16 of K: their random walk grows as sqrt(K).
    K = a.shape[1]
    torch.testing.assert_close(c.float(), ref, rtol=1e-2, atol=1e-2 * max(1.0, (K / 128)**0.5))


def uses_wgmma(target, M, warps):
    return target == "native" and torch.cuda.get_device_capability() == (9, 0) and \
        warps % 4 == 0 and M >= 64


def check_ptx(ptx, target, M, warps):
    assert (".target sm_80" in ptx) == (target == "sm_80")
    if uses_wgmma(target, M, warps):
        mma = r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f16\.f16\.f16"
    else:
        mma = r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f16\.f16\.f16\.f16"
    assert re.search(mma, ptx), f"no {mma} in the PTX"
    assert not re.search(r"fma\.rn\.(f16|f32) %\w+, %\w+, %\w+, %\w+;", ptx)


@pytest.mark.parametrize("trans_b", [False, True], ids=["b", "bt"])
@pytest.mark.parametrize("M,N,K,warps", [(64, 64, 64, 4), (128, 128, 64, 4), (128, 128, 64, 8),
                                         (128, 128, 64, 2), (64, 32, 32, 4), (128, 256, 128, 8),
                                         (16, 16, 16, 4), (256, 64, 256, 8), (64, 256, 16, 4)])
def test_tile_dot(target, trans_b, M, N, K, warps):
    a, b = operand((M, K), K), operand((K, N), K)
    c = torch.full((M, N), float("nan"), device=DEV, dtype=torch.float16)
    args = (a, b.t().contiguous() if trans_b else b, c)
    ptx = launch(ek.tile_dot, (1, ), args,
                 dict(M=M, N=N, K=K, TRANS_B=trans_b, OUT=tl.float16), warps)
    check_close(c, a, b)
    check_ptx(ptx, target, M, warps)


@pytest.mark.parametrize("stages", [1, 3])
@pytest.mark.parametrize("warps", [2, 4, 8])
@pytest.mark.parametrize("M,N,K", [(256, 256, 256), (200, 136, 96), (130, 260, 32),
                                   (512, 512, 1024)])
def test_k_loop(target, stages, warps, M, N, K):
    a, b = operand((M, K), K), operand((K, N), K)
    c = torch.full((M, N), float("nan"), device=DEV, dtype=torch.float16)
    grid = ((M + 127) // 128, (N + 127) // 128)
    consts = dict(BM=128, BN=128, BK=64 if K >= 64 else 32, ACC=tl.float16)
    ptx = launch(ek.matmul, grid, (a, b.t().contiguous(), c, M, N, K), consts, warps, stages)
    check_close(c, a, b)
    check_ptx(ptx, target, 128, warps)
