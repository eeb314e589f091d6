"""Multicast TMA on the H200: 2-CTA clusters where each CTA loads half of a tile for both, and
the cooperative TLX GEMM in 2-CTA clusters that share A or B through multicast, against PyTorch
(checks in tests/python/tlx_multicast_kernels.py). Each check runs in a subprocess with
WARPWEAVE_TRAP_HANGS set: a wrong cluster protocol traps instead of hanging, and the trap
cannot leave this process's CUDA context unusable for the tests after it."""

import importlib
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
native_loader = importlib.import_module("warpweave._native_loader")
if not native_loader.available():
    pytest.skip("warpweave._native is not built (pip install .)", allow_module_level=True)
if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("multicast TMA needs an sm_90 GPU", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
PATHS = [os.path.join(HERE, "..", "python"), os.path.join(HERE, "..", "..")]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    # One private cache for these subprocesses: their kernels carry the trap-on-hang check.
    return tmp_path_factory.mktemp("cache")


def run_check(call, cache_dir):
    env = dict(os.environ)
    env.pop("WARPWEAVE_INTERPRET", None)
    env["WARPWEAVE_TRAP_HANGS"] = "4000000"
    env["WARPWEAVE_CACHE_DIR"] = str(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join(PATHS + [env.get("PYTHONPATH", "")])
    code = f"import torch; torch.manual_seed(7); import tlx_multicast_kernels as k; k.{call}"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]


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
