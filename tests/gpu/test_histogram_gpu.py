"""tl.histogram on the GPU (shared-memory counters, tests/python/test_histogram.py's kernel)
against torch.bincount: inputs longer and shorter than the CTA's threads (where threads hold
copies of one element and only one may count it), 1 to 8 warps, every integer width, negative
and out-of-range values, masks; also through sm_80 PTX (WARPWEAVE_TARGET=sm_80, JITted by the
driver). Outputs start poisoned."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda((8, 0), "tl.histogram's GPU lowering needs a CUDA GPU")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from test_histogram import hist_kernel  # noqa: E402

DEV = "cuda"


def reference(x, n, mask=None):
    v = x.long()
    keep = (v >= 0) & (v < n)
    if mask is not None:
        keep &= mask != 0
    return torch.bincount(v[keep], minlength=n)[:n].int()


@pytest.mark.parametrize("M,N", [(4096, 2), (2048, 512), (1024, 128), (256, 512), (32, 64), (8, 2),
                                 (1, 1)])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.int16, torch.int64, torch.uint8])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("masked", [False, True])
def test_counts_match_bincount(M, N, dtype, num_warps, masked):
    g = torch.Generator(device=DEV).manual_seed(M * N + num_warps)
    lo = 0 if dtype == torch.uint8 else -4
    hi = min(N + 4, 255 if dtype == torch.uint8 else 127 if dtype == torch.int8 else N + 4)
    x = torch.randint(lo, hi + 1, (M,), device=DEV, generator=g).to(dtype)
    m = torch.randint(0, 2, (M,), device=DEV, generator=g, dtype=torch.int32)
    z = torch.full((N,), -7, device=DEV, dtype=torch.int32)
    hist_kernel[(1,)](x, z, m, M=M, N=N, MASKED=masked, num_warps=num_warps)
    torch.cuda.synchronize()
    assert torch.equal(z, reference(x, N, m if masked else None))


def test_sm80_ptx_counts_too(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_80")
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    hist_kernel.cache.clear()
    x = torch.randint(-2, 70, (2048,), device=DEV, dtype=torch.int32)
    z = torch.full((64,), -7, device=DEV, dtype=torch.int32)
    hist_kernel[(1,)](x, z, x, M=2048, N=64, MASKED=False)
    torch.cuda.synchronize()
    ran = hist_kernel.compile_for(hist_kernel.bind((x, z, x), dict(M=2048, N=64, MASKED=False)),
                                  False, (4, 3, 1))
    hist_kernel.cache.clear()
    assert ".target sm_80" in ran.kernel.ptx and "red.shared.add.u32" in ran.kernel.ptx
    assert torch.equal(z, reference(x, 64))
