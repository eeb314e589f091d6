"""fp16 x fp16 tl.dot into an fp16 accumulator on the GPU (tests/python/eight_bit_dot_kernels.py
with OUT / ACC = tl.float16, the kernels tests/python/test_f16_accumulate_dot.py checks in the
interpreter and in PTX): one dot of whole tiles (out_dtype=tl.float16) and the K loop
(acc = tl.zeros(..., tl.float16); acc = tl.dot(a, b, acc)), at 2, 4 and 8 warps, compiled for
the GPU at hand (wgmma .f16 accumulate on Hopper where a warp group fits) and for sm_80
(mma.sync m16n8k16 .f16, WARPWEAVE_TARGET=sm_80, which the driver JITs for a newer GPU); and
the matmul K loop of tests/python/f16_accumulate_kernels.py, software-pipelined on Hopper, at
ragged sizes and K up to 4096, against its plain form (num_stages=1) bit for bit.

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
import f16_accumulate_kernels as fk  # noqa: E402
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


# ---- the software-pipelined K loop (tests/python/f16_accumulate_kernels.py) ----------------------
# On Hopper the loop is software-pipelined (cp.async into num_stages buffers, async wgmma with one
# MMA in flight, the accumulator carried as packed fp16 words); num_stages=1 keeps the plain form,
# one synchronous wgmma per iteration, which the pipelined one must equal bit for bit (the same
# instructions in the same order).


def unit_sums_operand(shape, K):
    # Entries of about K^-1/4: a product's sums are of order 1 at every K, so that fp16's
    # roundings of the running sum (one an instruction) are what the tolerance measures.
    return (torch.randn(shape, device=DEV) * K**-0.25).to(torch.float16)


def run_pipelined(a, b, BM, BN, BK, warps, stages, add=False):
    M, K = a.shape
    N = b.shape[1]
    c = torch.full((M, N), float("nan"), device=DEV, dtype=torch.float16)
    grid = ((M + BM - 1) // BM, (N + BN - 1) // BN)
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
            c.stride(1))
    ptx = launch(fk.matmul_f16_acc, grid, args, dict(BM=BM, BN=BN, BK=BK, ADD=add), warps,
                 stages)
    return c, ptx


def check_pipelined_ptx(ptx, target, strides):
    if not uses_wgmma(target, 128, 4):
        return
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f16\.f16\.f16", ptx)
    # A row stride that is a multiple of 16 is specialized as such (Triton's rule), so that
    # operand's rows are 16-byte aligned and copied by 16-byte cp.async. With no such stride the
    # copies are loads and shared stores (cp.async moves 4 bytes at least, and a row of odd
    # stride may start at any fp16), but the MMA is still kept in flight across iterations.
    assert ("cp.async.cg.shared.global" in ptx) == any(s % 16 == 0 for s in strides)
    assert "wgmma.wait_group.sync.aligned 1;" in ptx


@pytest.mark.parametrize("add", [False, True], ids=["acc", "add"])
@pytest.mark.parametrize("BM,BN,BK,warps,stages", [(128, 128, 64, 4, 3), (128, 256, 64, 8, 3),
                                                   (64, 64, 32, 4, 4), (128, 128, 32, 8, 2)])
@pytest.mark.parametrize("M,N,K", [(256, 256, 256), (200, 136, 328), (130, 260, 40),
                                   (1000, 520, 4096), (513, 1031, 2056)])
def test_pipelined_k_loop(target, add, BM, BN, BK, warps, stages, M, N, K):
    a, b = unit_sums_operand((M, K), K), unit_sums_operand((K, N), K)
    c, ptx = run_pipelined(a, b, BM, BN, BK, warps, stages, add)
    check_close(c, a, b)
    check_pipelined_ptx(ptx, target, (a.stride(0), b.stride(0)))
    plain, _ = run_pipelined(a, b, BM, BN, BK, warps, 1, add)
    torch.testing.assert_close(c, plain, rtol=0, atol=0)


def test_pipelined_k_loop_with_b_transposed(target):
    """B [K, N] handed over as the transpose of an [N, K] tensor: its tiles are K-contiguous."""
    M, N, K = 384, 272, 1000
    a = unit_sums_operand((M, K), K)
    b = unit_sums_operand((N, K), K).t()
    c, ptx = run_pipelined(a, b, 128, 128, 64, 4, 3)
    check_close(c, a, b)
    check_pipelined_ptx(ptx, target, (a.stride(0), b.stride(1)))
