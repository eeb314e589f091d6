"""32-bit `//` and `%` by constants that are not powers of two (lowered through a multiply-high,
codegen/ScalarOps.cpp) on the GPU, against C semantics computed in NumPy over edge values
(INT_MIN, INT_MAX, values around each divisor, random ones); the check is
tests/python/division_magic_kernels.py's check_const_div_gpu, run in a subprocess."""

import importlib

import pytest

from gpu_requirements import cache_dir, run_trapped_check  # noqa: F401 (fixture)

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
native_loader = importlib.import_module("warpweave._native_loader")
if not native_loader.available():
    pytest.skip("warpweave._native is not built (pip install .)", allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_const_div(dtype, cache_dir):
    run_trapped_check("division_magic_kernels", f"check_const_div_gpu({dtype!r})", cache_dir,
                      seed=0)
