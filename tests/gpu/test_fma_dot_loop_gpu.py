"""tl.dot that no tensor-core form takes on the GPU (tests/python/fma_dot_kernels.py and
batched_dot_kernels.py, the kernels tests/python/test_fma_dot_loop.py checks in PTX and in the
interpreter): past 4,096 products a thread (or the kernel's 8,192 of unrolled FMA dots) each
thread loops over K, reading A and B from shared memory; within it the dot is unrolled as before.
Triton's test_dot shapes (fp32 with input_precision="ieee", 128x128x64 and 64x128x128), fp64,
int8 into int32 with M = 8, a K loop over ragged M and N, a batched fp64 dot past the kernel's
budget and the dot in an async task, at 1 to 8 warps, compiled for the GPU at hand and for sm_80
(which the driver JITs for a newer GPU).

The reference is torch's float64 matmul on the GPU: a chain of K FMAs in the operand type is
within K * u * sum |a| |b| of it (u the unit roundoff); int8 sums are exact. Outputs start as
NaN (-7777 for int32) so that an element the kernel never writes fails."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import batched_dot_kernels as bk  # noqa: E402
import fma_dot_kernels as fk  # noqa: E402
from mma_gpu_testing import launch, seeded, target  # noqa: E402,F401

DEV = "cuda"
# Products a thread of one FMA dot past which it loops over K (layout::kFmaDotProducts).
FMA_DOT_PRODUCTS = 4096


def loops_over_k(ptx):
    return "$L_dot_k" in ptx


def expect_loop(ptx, M, N, K, warps):
    per_thread = max(1, M * N // (32 * warps))
    assert loops_over_k(ptx) == (per_thread * K > FMA_DOT_PRODUCTS)


def within_fma_rounding(out, a, b, acc=None):
    u = torch.finfo(out.dtype).eps / 2
    a64, b64 = a.double(), b.double()
    ref, bound = a64 @ b64, a64.abs() @ b64.abs()
    if acc is not None:
        ref += acc.double()
        bound += acc.double().abs()
    err = (out.double() - ref).abs()
    assert not torch.isnan(out).any()
    assert bool((err <= a.shape[-1] * u * bound).all()), f"largest error {err.max().item()}"


@pytest.mark.parametrize("with_acc", [False, True], ids=["no_acc", "acc"])
@pytest.mark.parametrize("warps", [2, 4, 8])
@pytest.mark.parametrize("M,N,K", [(128, 128, 64), (64, 128, 128)])
def test_test_dot_ieee_shapes(target, M, N, K, warps, with_acc):
    a = torch.randn(M, K, device=DEV)
    b = torch.randn(K, N, device=DEV)
    acc = torch.randn(M, N, device=DEV)
    c = acc.clone() if with_acc else torch.full((M, N), float("nan"), device=DEV)
    ptx = launch(fk.tile_dot, (1, ), (a, b, c),
                 dict(M=M, N=N, K=K, PRECISION="ieee", WITH_ACC=with_acc), warps, 1)
    within_fma_rounding(c, a, b, acc if with_acc else None)
    expect_loop(ptx, M, N, K, warps)


@pytest.mark.parametrize("warps", [2, 4, 8])
@pytest.mark.parametrize("M,N,K", [(64, 64, 128), (128, 128, 64)])
def test_fp64_dot(target, M, N, K, warps):
    a = torch.randn(M, K, device=DEV, dtype=torch.float64)
    b = torch.randn(K, N, device=DEV, dtype=torch.float64)
    acc = torch.randn(M, N, device=DEV, dtype=torch.float64)
    c = acc.clone()
    ptx = launch(fk.tile_dot, (1, ), (a, b, c),
                 dict(M=M, N=N, K=K, PRECISION="ieee", WITH_ACC=True), warps, 1)
    within_fma_rounding(c, a, b, acc)
    expect_loop(ptx, M, N, K, warps)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8], ids=["s8", "u8"])
@pytest.mark.parametrize("warps", [1, 2, 4])
def test_int8_dot_under_mma_rows(target, dtype, warps):
    M, N, K = 8, 512, 128
    lo, hi = (-128, 128) if dtype == torch.int8 else (0, 256)
    a = torch.randint(lo, hi, (M, K), device=DEV, dtype=dtype)
    b = torch.randint(lo, hi, (K, N), device=DEV, dtype=dtype)
    a[0, :], b[:, 0] = lo, hi - 1  # the extremes' products
    c = torch.full((M, N), -7777, device=DEV, dtype=torch.int32)
    ptx = launch(fk.tile_dot, (1, ), (a, b, c),
                 dict(M=M, N=N, K=K, PRECISION="ieee", WITH_ACC=False), warps, 1)
    assert torch.equal(c.long(), a.long().cpu().matmul(b.long().cpu()).to(DEV))
    expect_loop(ptx, M, N, K, warps)


@pytest.mark.parametrize("stages", [1, 3])
@pytest.mark.parametrize("warps", [2, 4, 8])
@pytest.mark.parametrize("BM,BN,BK", [(128, 128, 64), (64, 128, 128)])
def test_k_loop(target, BM, BN, BK, warps, stages):
    M, N, K = 200, 136, 512  # ragged M and N
    a = torch.randn(M, K, device=DEV)
    b = torch.randn(K, N, device=DEV)
    c = torch.full((M, N), float("nan"), device=DEV)
    grid = ((M + BM - 1) // BM, (N + BN - 1) // BN)
    ptx = launch(fk.k_loop, grid, (a, b, c, M, N, K),
                 dict(BM=BM, BN=BN, BK=BK, PRECISION="ieee"), warps, stages)
    within_fma_rounding(c, a, b)
    expect_loop(ptx, BM, BN, BK, warps)


@pytest.mark.parametrize("B", [8, 16])
def test_batched_fp64_dot_past_the_kernel_budget(target, B):
    a = torch.randn(B, 64, 64, device=DEV, dtype=torch.float64)
    b = torch.randn(B, 64, 64, device=DEV, dtype=torch.float64)
    out = torch.full((B, 64, 64), float("nan"), device=DEV, dtype=torch.float64)
    ptx = launch(bk.batched_dot, (1, ), (a, b, torch.zeros_like(out), out),
                 dict(B=B, M=64, N=64, K=64, WITH_ACC=0), 4, 1)
    for i in range(B):
        within_fma_rounding(out[i], a[i], b[i])
    assert ptx.count("bra.uni $L_dot_k") == B - 4


def test_dot_in_async_task(monkeypatch):
    monkeypatch.delenv("WARPWEAVE_TARGET", raising=False)  # sm_80 has no async tasks
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("async tasks compile for sm_90a (and sm_100a) only")
    M, N, K = 64, 128, 128
    a = torch.randn(M, K, device=DEV)
    b = torch.randn(K, N, device=DEV)
    x = torch.randn(128, 64, device=DEV)
    expected_max = x.max(dim=0).values
    c = torch.full((M, N), float("nan"), device=DEV)
    ptx = launch(fk.dot_in_task, (1, ), (a, b, c, x), dict(M=M, N=N, K=K), 4, 1)
    within_fma_rounding(c, a, b)
    assert torch.equal(x[0], expected_max)
    assert loops_over_k(ptx)
