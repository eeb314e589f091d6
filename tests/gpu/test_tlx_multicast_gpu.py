"""Multicast TMA on the H200: 2-CTA clusters where each CTA loads half of a tile for both
(tests/python/tlx_multicast_kernels.py), and the cooperative TLX GEMM in 2-CTA clusters that
share A through multicast, against PyTorch."""

import importlib
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
native_loader = importlib.import_module("warpweave._native_loader")
if not native_loader.available():
    pytest.skip("warpweave._native is not built (pip install .)", allow_module_level=True)
if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("multicast TMA needs an sm_90 GPU", allow_module_level=True)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tlx_multicast_kernels as kern  # noqa: E402

import warpweave as ww  # noqa: E402
from kernels import ops  # noqa: E402


@pytest.fixture(autouse=True)
def trap_instead_of_hanging(monkeypatch):
    # A barrier that never completes traps with a report instead of hanging the run.
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", "4000000")
    torch.manual_seed(7)


@pytest.mark.parametrize("clusters,cols", [(1, 64), (5, 128)])
def test_each_cta_receives_both_multicast_halves(clusters, cols):
    half = 64
    x = torch.randn(clusters * 2 * half, cols, device="cuda", dtype=torch.float16)
    out = torch.full((clusters * 2 * 2 * half, cols), float("nan"), device="cuda",
                     dtype=torch.float16)
    in_desc = ww.TensorDescriptor(x, list(x.shape), list(x.stride()), [half, cols])
    out_desc = ww.TensorDescriptor(out, list(out.shape), list(out.stride()), [half, cols])
    kern.multicast_halves[(clusters * 2,)](in_desc, out_desc, HALF=half, COLS=cols,
                                           ctas_per_cga=(2, 1, 1))
    torch.cuda.synchronize()
    tiles = x.reshape(clusters, 2 * half, cols)
    expect = torch.stack([tiles, tiles], 1).reshape(-1, cols)  # both CTAs hold the tile
    assert torch.equal(out, expect)


@pytest.mark.parametrize("mnk", [(128, 256, 64), (1000, 776, 328), (4096, 4096, 4096),
                                 (640, 1792, 256)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cluster_gemm_matches_torch(mnk, dtype):
    m, n, k = mnk
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    c = ops.matmul_tlx(a, b, "ws_cluster")
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert err <= (2e-3 if dtype == torch.float16 else 1e-2), err
