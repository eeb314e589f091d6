"""Batched tl.dot (tests/python/batched_dot_kernels.py: 3-D and 4-D, as Triton's test_dot3d
writes them) on the GPU, split into one 2-D dot per batch element by the compiler: against
torch.bmm on fresh random fp16 / bf16 inputs, the output poisoned first, at 1, 4 and 8 warps."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import batched_dot_kernels as bk  # noqa: E402

SHAPES = [(4, 16, 16, 16), (2, 64, 32, 32), (8, 32, 64, 16), (1, 128, 64, 32)]


@pytest.fixture(autouse=True)
def seeded():
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"random seed {seed}")
    torch.manual_seed(seed)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b%d_%dx%dx%d" % s)
@pytest.mark.parametrize("with_acc", [False, True], ids=["no_acc", "acc"])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_batched_dot_matches_bmm(dtype, shape, with_acc, num_warps):
    B, M, N, K = shape
    a = torch.randn(B, M, K, device="cuda", dtype=dtype)
    b = torch.randn(B, K, N, device="cuda", dtype=dtype)
    c = torch.randn(B, M, N, device="cuda", dtype=torch.float32)
    out = torch.full((B, M, N), float("nan"), device="cuda")
    bk.batched_dot[(1,)](a, b, c, out, B=B, M=M, N=N, K=K, WITH_ACC=with_acc,
                         num_warps=num_warps)
    ref = torch.bmm(a.float(), b.float()) + (c if with_acc else 0)
    torch.testing.assert_close(out, ref, atol=1e-3, rtol=1e-3)


def test_four_d_batched_dot_matches_bmm():
    a = torch.randn(2, 4, 32, 16, device="cuda", dtype=torch.float16)
    b = torch.randn(2, 4, 16, 32, device="cuda", dtype=torch.float16)
    out = torch.full((2, 4, 32, 32), float("nan"), device="cuda")
    bk.batched_dot_4d[(1,)](a, b, out, B0=2, B1=4, M=32, N=32, K=16)
    torch.testing.assert_close(out, torch.matmul(a.float(), b.float()), atol=1e-3, rtol=1e-3)
