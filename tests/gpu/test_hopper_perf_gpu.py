"""Hopper code-quality constructs on the H200 (checks in tests/python/hopper_perf_kernels.py),
against PyTorch: a GEMM whose first k step is issued before its main loop (the accumulator
enters the loop with its wgmma in flight), as for and as while loops, and C stored through a
descriptor whose staging tile is swizzled (one TMA box, or two column blocks for 256-byte
rows). Each check runs in a subprocess with WARPWEAVE_TRAP_HANGS set."""

import importlib

import pytest

from gpu_requirements import cache_dir, run_trapped_check  # noqa: F401 (fixture)

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
native_loader = importlib.import_module("warpweave._native_loader")
if not native_loader.available():
    pytest.skip("warpweave._native is not built (pip install .)", allow_module_level=True)
if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("wgmma and TMA need an sm_90 GPU", allow_module_level=True)


@pytest.mark.parametrize("BM,BN,BK,stages", [(128, 64, 64, 4), (128, 128, 64, 4),
                                             (64, 64, 32, 2)])
@pytest.mark.parametrize("zero_init,while_loop,keep_first", [(True, False, False),
                                                             (False, False, False),
                                                             (True, True, False),
                                                             (False, False, True)])
def test_peeled_ws_gemm(BM, BN, BK, stages, zero_init, while_loop, keep_first, cache_dir):
    run_trapped_check("hopper_perf_kernels",
                      f"check_peeled_ws_gemm(512, 384, 640, {BM}, {BN}, {BK}, {stages}, "
                      f"{zero_init}, {while_loop}, {keep_first})", cache_dir, seed=5)
