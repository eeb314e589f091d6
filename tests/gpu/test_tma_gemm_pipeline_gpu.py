"""The TMA-pipelined plain tl.dot GEMM (tests/python/tma_gemm_kernels.py, Triton's persistent
matmul tutorial form: host tensor descriptors, `tl.dot(a, b.T, acc)`, sm_90a) on the GPU against
torch.matmul: odd sizes (K not a multiple of BLOCK_K, partial M / N edge tiles), B given as B^T
or as K x N, the persistent form with the ring carried across tiles, warp_specialize=True, and
the tutorial's block sizes at 2, 3 and 4 stages on 4 and 8 warps. The descriptors-made-in-the-
kernel forms are in test_device_descriptor_tma_gpu.py."""

import os
import sys

import pytest

from gpu_requirements import require_cuda, timed

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import warpweave as ww  # noqa: E402
from tma_gemm_kernels import desc_gemm, desc_gemm_persistent  # noqa: E402

DEV = "cuda"


@pytest.fixture(autouse=True)
def hopper_only():
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the TMA pipeline is built for sm_90a")


def operands(M, N, K):
    torch.manual_seed(0)
    a = torch.randn(M, K, device=DEV, dtype=torch.float16) / 8
    b = torch.randn(K, N, device=DEV, dtype=torch.float16) / 8
    return a, b


def check(c, a, b):
    ref = torch.matmul(a.float(), b.float())
    torch.testing.assert_close(c.float(), ref, atol=2e-2, rtol=1e-2)


def gemm(a, b, block, stages, warps, b_kn=False, ws=False):
    (M, K), N = a.shape, b.shape[1]
    bm, bn, bk = block
    c = torch.empty(M, N, device=DEV, dtype=torch.float16)
    da = ww.TensorDescriptor.from_tensor(a, [bm, bk])
    db = (ww.TensorDescriptor.from_tensor(b, [bk, bn]) if b_kn else
          ww.TensorDescriptor.from_tensor(b.T.contiguous(), [bn, bk]))
    dc = ww.TensorDescriptor.from_tensor(c, [bm, bn])
    grid = (cdiv(M, bm) * cdiv(N, bn),)
    desc_gemm[grid](da, db, dc, M, N, K, BM=bm, BN=bn, BK=bk, GROUP=8, B_KN=b_kn, WS=ws,
                    num_warps=warps, num_stages=stages)
    return c


def gemm_persistent(a, b, block, stages, warps, programs, ws=False):
    (M, K), N = a.shape, b.shape[1]
    bm, bn, bk = block
    c = torch.empty(M, N, device=DEV, dtype=torch.float16)
    da = ww.TensorDescriptor.from_tensor(a, [bm, bk])
    db = ww.TensorDescriptor.from_tensor(b.T.contiguous(), [bn, bk])
    dc = ww.TensorDescriptor.from_tensor(c, [bm, bn])
    tiles = cdiv(M, bm) * cdiv(N, bn)
    programs = min(programs, tiles)
    desc_gemm_persistent[(programs,)](da, db, dc, M, N, K, BM=bm, BN=bn, BK=bk, GROUP=8,
                                      NUM_PROGRAMS=programs, WS=ws, num_warps=warps,
                                      num_stages=stages)
    return c


def cdiv(x, y):
    return -(-x // y)


@pytest.mark.parametrize("mnk", [(512, 512, 512), (1000, 776, 1000), (136, 264, 72),
                                 (128, 128, 64)])
@pytest.mark.parametrize("b_kn", [False, True])
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_small_blocks_match_torch(mnk, b_kn, stages):
    a, b = operands(*mnk)
    check(gemm(a, b, (128, 128, 64), stages, 4, b_kn=b_kn), a, b)


@pytest.mark.parametrize("block", [(128, 128, 64), (128, 256, 64), (128, 128, 128),
                                   (128, 256, 128)])
@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("warps", [4, 8])
def test_tutorial_configurations_match_torch(block, stages, warps):
    if block[1] == 256 and warps == 4:
        pytest.skip("a 128x256 fp32 accumulator on 4 warps spills; the tutorial's autotuner "
                    "does not pick it")
    a, b = operands(1024, 1280, 1096)  # K = 8.56 blocks of 128
    check(gemm(a, b, block, stages, warps), a, b)
    check(gemm(a, b, block, stages, warps, ws=True), a, b)


@pytest.mark.parametrize("mnk", [(1000, 776, 1000), (4096, 4096, 4096), (136, 264, 72)])
@pytest.mark.parametrize("programs", [1, 7, 132])
@pytest.mark.parametrize("stages", [2, 4])
def test_persistent_matches_torch(mnk, programs, stages):
    a, b = operands(*mnk)
    check(gemm_persistent(a, b, (128, 256, 64), stages, 8, programs), a, b)
    check(gemm_persistent(a, b, (128, 128, 64), stages, 4, programs, ws=True), a, b)


def test_speed_at_4096_cubed(capsys):
    # Not a pass / fail bound (the timing depends on the clocks): prints TFLOP/s beside
    # torch.matmul's for the lead's notes; tools/upstream/perf_triton.py is the comparison.
    a, b = operands(4096, 4096, 4096)
    bt = b.T.contiguous()
    for block, stages, warps in [((128, 256, 64), 3, 8), ((128, 256, 64), 4, 8)]:
        bm, bn, bk = block
        c = torch.empty(4096, 4096, device=DEV, dtype=torch.float16)
        da = ww.TensorDescriptor.from_tensor(a, [bm, bk])
        db = ww.TensorDescriptor.from_tensor(bt, [bn, bk])
        dc = ww.TensorDescriptor.from_tensor(c, [bm, bn])
        grid = ((4096 // bm) * (4096 // bn),)

        def run():
            desc_gemm[grid](da, db, dc, 4096, 4096, 4096, BM=bm, BN=bn, BK=bk, GROUP=8,
                            B_KN=False, WS=False, num_warps=warps, num_stages=stages)

        run()
        check(c, a, b)
        ms = timed(run)
        ref_ms = timed(lambda: torch.matmul(a, b))
        with capsys.disabled():
            print(f"\n{block} stages {stages} warps {warps}: {2 * 4096 ** 3 / ms / 1e9:.0f} "
                  f"TFLOP/s (torch.matmul {2 * 4096 ** 3 / ref_ms / 1e9:.0f})")
