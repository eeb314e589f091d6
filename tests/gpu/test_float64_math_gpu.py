"""tl.exp / exp2 / log / log2 / sin / cos / erf (and libdevice's erfc) of float64 values on the GPU
(tests/python/float64_math_kernels.py), against PyTorch's float64 functions within a few ulps
(erf / erfc against PyTorch's CPU ones, the C library's), the special values (0, infinities, NaN,
subnormal results) exact."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import float64_math_kernels as fk  # noqa: E402


@pytest.mark.parametrize("fn", ["exp", "exp2", "log", "log2", "sin", "cos", "erf", "erfc"])
def test_float64_math_matches_torch(fn):
    n = 1 << 16
    if fn.startswith("log"):
        x = torch.pow(10.0, torch.empty(n, device="cuda", dtype=torch.float64).uniform_(-300, 300))
    elif fn.startswith("exp"):
        x = torch.empty(n, device="cuda", dtype=torch.float64).uniform_(-700, 700)
    elif fn.startswith("erf"):  # past the seams at 1, 6 and into erfc's subnormal tail
        x = torch.empty(n, device="cuda", dtype=torch.float64).uniform_(-8, 28)
    else:
        x = torch.empty(n, device="cuda", dtype=torch.float64).uniform_(-100, 100)
    x[:4] = torch.tensor([0.0, float("inf"), float("-inf"), float("nan")], dtype=torch.float64)
    out = torch.full_like(x, float("nan"))
    fk.float64_math[(n // 256, )](x, out, n, FN=fn, BLOCK=256)
    ref = getattr(torch, fn)(x.cpu()).cuda() if fn.startswith("erf") else getattr(torch, fn)(x)
    ulps = 8 if fn == "erfc" else 4  # erfc: three rounded factors
    # erfc's subnormal tail (a > 26.5) in units of the smallest subnormal.
    atol = ulps * 2.0**-1074 if fn == "erfc" else 0
    torch.testing.assert_close(out, ref, rtol=ulps * 2.0**-52, atol=atol, equal_nan=True)
