"""The GEMM epilogue through stmatrix on the H200 (tests/python/gemm_epilogue_kernels.py): the
tl.dot K loop (Triton's tutorial 03 shape) and its TLX form (hopper_gemm_pipelined) at the
tutorials' configurations, on sizes with partial tiles in M, N and K, with exact operands: C
must match element for element. Each check runs in a subprocess with WARPWEAVE_TRAP_HANGS."""

import importlib

import pytest

from gpu_requirements import cache_dir, run_trapped_check  # noqa: F401 (fixture)

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
native_loader = importlib.import_module("warpweave._native_loader")
if not native_loader.available():
    pytest.skip("warpweave._native is not built (pip install .)", allow_module_level=True)
if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("wgmma and stmatrix need an sm_90 GPU", allow_module_level=True)

CONFIGS = [("dot", 128, 256, 64, 8, 3), ("dot", 128, 128, 64, 4, 4), ("dot", 64, 256, 32, 4, 4),
           ("tlx", 128, 256, 64, 8, 3)]
SIZES = [(1024, 1024, 1024), (1000, 1304, 328), (136, 200, 2048)]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "%s_%dx%dx%d_w%d_s%d" % c)
@pytest.mark.parametrize("mnk", SIZES, ids=lambda s: "x".join(map(str, s)))
def test_exact_gemm(config, mnk, cache_dir):
    kernel, bm, bn, bk, warps, stages = config
    run_trapped_check("gemm_epilogue_kernels",
                      f"check_exact_gemm({kernel!r}, {mnk[0]}, {mnk[1]}, {mnk[2]}, {bm}, {bn}, "
                      f"{bk}, {warps}, {stages})", cache_dir, seed=16)
