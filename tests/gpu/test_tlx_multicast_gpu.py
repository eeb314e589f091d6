"""Multicast TMA on the H200: 2-CTA clusters where each CTA loads half of a tile for both, and
the cooperative TLX GEMM in 2-CTA clusters that share A or B through multicast, against PyTorch
(checks in tests/python/tlx_multicast_kernels.py). Each check runs in a subprocess with
WARPWEAVE_TRAP_HANGS set: a wrong cluster protocol traps instead of hanging, and the trap
cannot leave this process's CUDA context unusable for the tests after it."""

import importlib

import pytest

from gpu_requirements import cache_dir, run_trapped_check  # noqa: F401 (fixture)

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
native_loader = importlib.import_module("warpweave._native_loader")
if not native_loader.available():
    pytest.skip("warpweave._native is not built (pip install .)", allow_module_level=True)
if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("multicast TMA needs an sm_90 GPU", allow_module_level=True)


def run_check(call, cache_dir):
    run_trapped_check("tlx_multicast_kernels", call, cache_dir, seed=7)


@pytest.mark.parametrize("clusters,cols", [(1, 64), (5, 128)])
def test_each_cta_receives_both_multicast_halves(clusters, cols, cache_dir):
    run_check(f"check_multicast_halves({clusters}, {cols})", cache_dir)


@pytest.mark.parametrize("mnk", [(128, 256, 64), (1000, 776, 328), (4096, 4096, 4096),
                                 (640, 1792, 256)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cluster_gemm_matches_torch(mnk, dtype, cache_dir):
    run_check(f"check_cluster_gemm({mnk[0]}, {mnk[1]}, {mnk[2]}, {dtype!r})", cache_dir)


@pytest.mark.parametrize("config", [None, {"NUM_STAGES": 4, "EPI_SUBTILE": 4, "RASTER_N": True}])
def test_cluster_m_gemm_matches_torch(config, cache_dir):
    run_check(f"check_cluster_gemms('ws_cluster_m', {config!r})", cache_dir)
