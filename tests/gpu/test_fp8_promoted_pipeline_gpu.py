"""fp8 K loops with max_num_imprecise_acc (Triton's promotion) software-pipelined on sm_90a
(tests/python/test_fp8_promoted_pipeline.py checks their PTX and, in the interpreter, bit-identity
with the unpipelined loop): on the GPU, against an fp32 reference on the fp8 inputs and
torch._scaled_mm (which promotes too), and pipelined (num_stages 3-4) against unpipelined
(num_stages=1) bit for bit: the same wgmma chains into zeroed partials, added in the same order.
Both warpweave.ops.scaled_mm tl kernels (pointer loads, host TMA descriptors) at their promoted
configuration, and the test kernel with several limits."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda((9, 0), "promoted fp8 wgmma pipelines on sm_90")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import warpweave as ww  # noqa: E402

import eight_bit_dot_kernels as fk  # noqa: E402
from mma_gpu_testing import FP8_PAIRS as PAIRS, exact_fp32_reference, fp8, fp8_dtype  # noqa: E402,F401

DEV = "cuda"


def cdiv(x, y):
    return -(-x // y)


def close(out, ref, k):
    # Promoted sums lose little: partials of at most BLOCK_K products, added in fp32.
    scale = ref.abs().max().item() + 1
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-3 * scale * max(1.0, k / 1024))


@pytest.mark.parametrize("ta,tb", PAIRS)
@pytest.mark.parametrize("M,N,K,block,limit,warps,stages", [
    (200, 136, 328, (128, 128, 64), 64, 4, 3),
    (130, 72, 40, (64, 64, 32), 32, 4, 4),
    (1024, 768, 2048, (128, 128, 128), 128, 8, 4),
    (4096, 4096, 4096, (128, 128, 128), 128, 8, 3),
])
def test_pipelined_promoted_matmul(ta, tb, M, N, K, block, limit, warps, stages):
    a, bt = fp8((M, K), ta, 7), fp8((N, K), tb, 8)
    bm, bn, bk = block
    outs = []
    for s in (stages, 1):
        c = torch.full((M, N), float("nan"), device=DEV)
        fk.matmul[(cdiv(M, bm), cdiv(N, bn))](a, bt, c, M, N, K, BM=bm, BN=bn, BK=bk, LIMIT=limit,
                                              num_warps=warps, num_stages=s)
        outs.append(c)
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1]), (outs[0] - outs[1]).abs().max()
    close(outs[0], a.float() @ bt.float().t(), K)


@pytest.mark.parametrize("kernel", ["tl", "tma"])
@pytest.mark.parametrize("rowwise", [False, True])
@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (1000, 1200, 1040)])
def test_scaled_mm_promoted_kernels(kernel, rowwise, M, N, K):
    from warpweave.ops import _scaled_mm as C
    from warpweave.ops.kernels import scaled_mm as S
    a, bt = fp8((M, K), "fp8e4nv", 1), fp8((N, K), "fp8e4nv", 2)
    if rowwise:
        sa = torch.rand(M, 1, device=DEV) + 0.5
        sb = torch.rand(1, N, device=DEV) + 0.5
    else:
        sa, sb = torch.tensor(0.75, device=DEV), torch.tensor(1.25, device=DEV)
    cfg = dict(C.SCALED_MM_GPU_SMALL_CONFIG)
    warps, stages = cfg.pop("num_warps"), cfg.pop("num_stages")
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    flags = dict(ROWWISE_A=rowwise, ROWWISE_B=rowwise, HAS_BIAS=False, FAST_ACCUM=False)
    grid = (cdiv(M, bm) * cdiv(N, bn), )
    outs = []
    for s in (stages, 1):
        c = torch.full((M, N), float("nan"), device=DEV)
        if kernel == "tl":
            b = bt.t()
            S.scaled_mm_kernel[grid](a, b, c, sa, sb, sa, M, N, K, a.stride(0), a.stride(1),
                                     b.stride(0), b.stride(1), c.stride(0), c.stride(1), **cfg,
                                     **flags, num_warps=warps, num_stages=s)
        else:
            da = ww.TensorDescriptor.from_tensor(a, [bm, bk])
            db = ww.TensorDescriptor.from_tensor(bt, [bn, bk])
            S.scaled_mm_tma_kernel[grid](da, db, c, sa, sb, sa, M, N, K, c.stride(0), c.stride(1),
                                         **cfg, **flags, num_warps=warps, num_stages=s)
        outs.append(c)
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1]), (outs[0] - outs[1]).abs().max()
    ref = (a.float() @ bt.float().t()) * sa * sb
    close(outs[0], ref, K)
    if hasattr(torch, "_scaled_mm"):
        try:
            theirs = torch._scaled_mm(a, bt.t(), scale_a=sa.reshape(-1, 1) if rowwise else sa,
                                      scale_b=sb.reshape(1, -1) if rowwise else sb,
                                      out_dtype=torch.float32, use_fast_accum=False)
        except (RuntimeError, TypeError, ValueError):
            return  # this torch's _scaled_mm does not take these scales
        theirs = theirs[0] if isinstance(theirs, tuple) else theirs
        close(outs[0], theirs, K)
