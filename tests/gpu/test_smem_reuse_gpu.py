"""Shared buffers that take the bytes of dead ones, on the H200, against PyTorch
(tests/python/smem_reuse_kernels.py): a TMA / wgmma GEMM whose 64 KiB C tile, allocated after
the K loop, lies over its 192 KiB of stages (256 KiB side by side, more than a CTA has), and a
cp.async / wgmma GEMM whose fp32 tile, written and read by threads, lies over its cp.async
stages. Partial tiles, several tiles per launch, and K loops of 3 to 64 steps. Each check runs in
a subprocess with WARPWEAVE_TRAP_HANGS set, so that a wrong barrier protocol traps instead of
hanging."""

import importlib

import pytest

from gpu_requirements import cache_dir, run_trapped_check  # noqa: F401 (fixture)

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
native_loader = importlib.import_module("warpweave._native_loader")
if not native_loader.available():
    pytest.skip("warpweave._native is not built (pip install .)", allow_module_level=True)
if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("wgmma and TMA need an sm_90 GPU", allow_module_level=True)


def run_check(call, cache_dir):
    run_trapped_check("smem_reuse_kernels", call, cache_dir, seed=19)


@pytest.mark.parametrize("m,n,k", [(128, 256, 192), (256, 512, 1024), (1024, 1024, 4096)])
def test_c_tile_over_tma_stages(m, n, k, cache_dir):
    run_check(f"check_tma_gemm_tile({m}, {n}, {k})", cache_dir)


@pytest.mark.parametrize("m,n,k", [(100, 60, 40), (300, 200, 1000), (1024, 1024, 4096)])
def test_fp32_tile_over_cp_async_stages(m, n, k, cache_dir):
    run_check(f"check_cp_async_gemm_tile({m}, {n}, {k})", cache_dir)


def test_every_configuration_shares_bytes(cache_dir):
    run_check("check_all()", cache_dir)
