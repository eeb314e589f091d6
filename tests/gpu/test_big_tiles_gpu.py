"""Big tiles on Hopper (tests/python/big_tiles_kernels.py): a tl.dot whose 512x512 result is
converted through shared memory in rounds before its store, and TMA copies of blocks longer than
256 elements along a dimension (several boxes per copy), checked against torch."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda((9, 0), "wgmma and TMA need Hopper")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import big_tiles_kernels as kern  # noqa: E402

import warpweave as ww  # noqa: E402

DEV = "cuda"


@pytest.fixture(autouse=True)
def scratch_allocator(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", "4000000")

    def alloc(size, align, stream):
        return torch.empty(size, dtype=torch.int8, device=DEV)

    ww.set_allocator(alloc)
    yield
    ww.set_allocator(None)


@pytest.mark.parametrize("K", [16, 32])
def test_staged_dot_512x512(K):
    torch.manual_seed(K)
    a = torch.randn((512, K), dtype=torch.float16, device=DEV)
    b = torch.randn((K, 512), dtype=torch.float16, device=DEV)
    c = torch.zeros((512, 512), dtype=torch.float16, device=DEV)
    kern.staged_dot[(1,)](a, b, c, BM=512, BN=512, BK=K)
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=1e-2, atol=1e-2)


def test_dot_result_in_two_rounds():
    torch.manual_seed(1)
    a = torch.randn((128, 32), dtype=torch.float16, device=DEV)
    b = torch.randn((32, 256), dtype=torch.float16, device=DEV)
    c = torch.zeros((128, 256), dtype=torch.float32, device=DEV)
    kern.plain_dot[(1,)](a, b, c, BM=128, BN=256, BK=32, num_warps=8)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


def test_row_gather_of_8192_elements():
    M, N, BM, BN = 256, 128, 64, 128
    x = torch.randint(-1000, 1000, (M, N), dtype=torch.int16, device=DEV)
    y = torch.empty_like(x)
    kern.row_gather_device_desc[(M // BM, N // BN)](x, y, M, N, BM=BM, BN=BN)
    torch.testing.assert_close(y, 2 * x)


@pytest.mark.parametrize("BM,BN", [(512, 64), (64, 512), (512, 128), (4, 1024)])
def test_tile_round_trip_device_desc(BM, BN):
    M, N = 2 * BM, 2 * BN
    x = torch.randn((M, N), dtype=torch.float16, device=DEV)
    y = torch.zeros_like(x)
    kern.tile_round_trip_device_desc[(2, 2)](x, y, M, N, BM=BM, BN=BN)
    torch.testing.assert_close(y, x + 1)


@pytest.mark.parametrize("BM,BN", [(512, 64), (64, 512), (4, 1024)])
def test_tile_round_trip_host_desc(BM, BN):
    M, N = 2 * BM, 2 * BN
    x = torch.randn((M, N), dtype=torch.float16, device=DEV)
    y = torch.zeros_like(x)
    src = ww.TensorDescriptor.from_tensor(x, [BM, BN])
    dst = ww.TensorDescriptor.from_tensor(y, [BM, BN])
    kern.tile_round_trip_host_desc[(2, 2)](src, dst, BM=BM, BN=BN)
    torch.testing.assert_close(y, x + 1)
