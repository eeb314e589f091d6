"""fp8 tl.dot on the GPU (tests/python/eight_bit_dot_kernels.py, the kernels
tests/python/test_fp8_dot.py checks in the interpreter and in PTX): one dot of whole tiles (M/N/K
64..256, e4m3 / e5m2 / mixed, B as loaded or transposed, max_num_imprecise_acc), the pipelined K
loop up to 4096^3 and the attention loop, against an fp32 reference on the fp8-rounded inputs
(and torch._scaled_mm where this torch has it). Hopper's fp8 wgmma accumulates with reduced
precision, hence the tolerances."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import warpweave.language as tl  # noqa: E402

import eight_bit_dot_kernels as fk  # noqa: E402
from mma_gpu_testing import FP8_PAIRS as PAIRS, exact_fp32_reference, fp8, fp8_dtype  # noqa: E402,F401

DEV = "cuda"
TL = {"fp8e4nv": tl.float8e4nv, "fp8e5": tl.float8e5}


def reference(a, b):
    return a.float() @ b.float()


def close(out, ref, k):
    # Each of the K products is exact in fp32; the sum is what reduced-precision accumulation
    # changes: bound the error by the magnitude of the terms.
    scale = (ref.abs().max().item() + 1) * max(1.0, k / 256)
    torch.testing.assert_close(out, ref, rtol=0, atol=2e-3 * scale)


@pytest.mark.parametrize("ta,tb", PAIRS)
@pytest.mark.parametrize("trans_b", [True, False])
@pytest.mark.parametrize("M,N,K,warps", [(64, 64, 64, 4), (128, 64, 128, 4), (64, 256, 256, 4),
                                         (256, 128, 64, 8), (32, 64, 64, 4)])
def test_tile_dot(ta, tb, trans_b, M, N, K, warps):
    a, b = fp8((M, K), ta, 1), fp8((K, N), tb, 2)
    c = torch.full((M, N), float("nan"), device=DEV)
    fk.tile_dot[(1, )](a, b.t().contiguous() if trans_b else b, c, M=M, N=N, K=K,
                       TRANS_B=trans_b, OUT=tl.float32, num_warps=warps)
    close(c, reference(a, b), K)


def test_tile_dot_into_fp16():
    a, b = fp8((64, 128), "fp8e5", 3), fp8((128, 64), "fp8e4nv", 4)
    c = torch.full((64, 64), float("nan"), device=DEV, dtype=torch.float16)
    fk.tile_dot[(1, )](a, b.t().contiguous(), c, M=64, N=64, K=128, TRANS_B=True,
                       OUT=tl.float16)
    close(c.float(), reference(a, b), 128)


@pytest.mark.parametrize("limit", [None, 0, 32, 64, 256])
def test_max_num_imprecise_acc(limit):
    a, b = fp8((64, 256), "fp8e4nv", 5), fp8((256, 64), "fp8e4nv", 6)
    c = torch.full((64, 64), float("nan"), device=DEV)
    fk.tile_dot[(1, )](a, b.t().contiguous(), c, M=64, N=64, K=256, TRANS_B=True,
                       OUT=tl.float32, LIMIT=limit)
    close(c, reference(a, b), 256)


@pytest.mark.parametrize("ta,tb", PAIRS)
# K = 40 and 41: rows not 16-byte aligned, copied byte by byte (odd rows start at odd addresses).
@pytest.mark.parametrize("M,N,K", [(256, 256, 256), (200, 136, 96), (200, 136, 40), (200, 136, 41),
                                   (4096, 4096, 4096)])
def test_pipelined_matmul(ta, tb, M, N, K):
    a, bt = fp8((M, K), ta, 7), fp8((N, K), tb, 8)
    c = torch.full((M, N), float("nan"), device=DEV)
    fk.matmul[(triton_cdiv(M, 128), triton_cdiv(N, 128))](a, bt, c, M, N, K, BM=128, BN=128,
                                                          BK=64, num_warps=4, num_stages=3)
    ref = reference(a, bt.t())
    close(c, ref, K)
    if M == 4096 and ta == tb and hasattr(torch, "_scaled_mm"):
        one = torch.ones((), device=DEV)
        try:
            scaled = torch._scaled_mm(a, bt.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
        except (RuntimeError, TypeError, ValueError):
            return  # this torch's _scaled_mm does not take these types (e5m2 x e5m2 on torch 2.11)
        scaled = scaled[0] if isinstance(scaled, tuple) else scaled
        close(c, scaled, K)


def triton_cdiv(a, b):
    return (a + b - 1) // b


@pytest.mark.parametrize("k_major", [True, False])
@pytest.mark.parametrize("M,N,K", [(256, 256, 256), (4096, 4096, 4096)])
def test_matmul_with_b_through_strides(k_major, M, N, K):
    a, b = fp8((M, K), "fp8e5", 12), fp8((K, N), "fp8e5", 13)
    bb = b.t().contiguous().t() if k_major else b  # tutorial 03 hands B over as b.T in fp8
    c = torch.full((M, N), float("nan"), device=DEV)
    fk.matmul_strided_b[(triton_cdiv(M, 128), triton_cdiv(N, 128))](
        a, bb, c, M, N, K, bb.stride(0), bb.stride(1), BM=128, BN=128, BK=64, num_warps=4,
        num_stages=3)
    close(c, reference(a, b), K)


@pytest.mark.parametrize("tq,tv", PAIRS)
def test_attention_loop(tq, tv):
    n_ctx, d = 1024, 64
    q, k = fp8((n_ctx, d), tq, 9), fp8((n_ctx, d), tq, 10)
    vt = fp8((d, n_ctx), tv, 11)
    o = torch.full((n_ctx, d), float("nan"), device=DEV)
    scale = 0.05
    fk.attention[(n_ctx // 128, )](q, k, vt, o, n_ctx, scale, D=d, BM=128, BN=64, P_TYPE=TL[tv],
                                   num_warps=4, num_stages=3)
    p = torch.exp2(reference(q, k.t()) * scale)
    ref = reference(p.to(fp8_dtype(tv)), vt.t()) / p.sum(1, keepdim=True)
    torch.testing.assert_close(o, ref, rtol=2e-2, atol=2e-2)
