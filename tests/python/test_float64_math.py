"""tl.exp / exp2 / log / log2 / sin / cos / erf (and libdevice's erfc) of float64 values on the GPU targets (Triton computes
them with libdevice's fp64 functions; the targets' instructions are fp32 approximations): built
from libdevice's fp64 pieces (specialize/TlLibdevice.cpp), where code generation refused them.
Their accuracy is checked by tests/cpp/interp_test.cpp (Float64Math, the same ops in the
interpreter, within 4 ulps); here the PTX through ptxas for sm_80 / sm_90a / sm_100a, and the
interpreter (double precision directly) against NumPy. tests/gpu/test_float64_math_gpu.py runs
them on the GPU."""
import importlib
import math
import re
from pathlib import Path

import numpy as np
import pytest

import float64_math_kernels as fk

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

FNS = ["exp", "exp2", "log", "log2", "sin", "cos", "erf", "erfc"]


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "sm_100a"])
@pytest.mark.parametrize("fn", FNS)
def test_float64_math_compiles_without_fp32_approximations(ptxas, target, fn):
    path = Path(fk.__file__)
    ptx = native_loader.native().compile(
        [(str(path), path.read_text())], "float64_math",
        f'x_ptr:*fp64:16,out_ptr:*fp64:16,n:i32,FN="{fn}",BLOCK=256', {}, target=target,
        num_warps=4, stage="ptx").ptx
    assert not re.search(r"(ex2|lg2|sin|cos)\.approx", ptx), fn
    assert ".f64" in ptx
    ptxas(ptx, arch=target)


@pytest.mark.parametrize("fn", FNS)
def test_float64_math_in_the_interpreter(monkeypatch, fn):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    rng = np.random.default_rng(2)
    x = rng.uniform(0.01, 50, 1000) if fn.startswith("log") else rng.uniform(-50, 50, 1000)
    if fn.startswith("erf"):
        x = rng.uniform(-8, 8, 1000)
    out = np.full_like(x, np.nan)
    fk.float64_math[(4, )](x, out, x.size, FN=fn, BLOCK=256)
    ref = np.array([getattr(math, fn)(v) for v in x]) if fn.startswith("erf") else getattr(np, fn)(x)
    np.testing.assert_allclose(out, ref, rtol=1e-15 if not fn.startswith("erf") else 1e-14)
