"""What every GPU test module needs before it runs: PyTorch, warpweave's extension, a CUDA GPU the
driver can use (and, for some, a minimum compute capability). Each missing piece skips the calling
module with its reason, so a CPU machine reports why nothing ran. Also the set-up the kernel
library's GPU tests share: a fresh printed seed and poisoned outputs."""

import importlib
import os
import subprocess
import sys

import pytest


def require_cuda(capability=None, why=None):
    """Returns torch, or skips the module being imported. `capability`: the lowest (major, minor)
    the module needs, with `why` as the skip reason."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    native_loader = importlib.import_module("warpweave._native_loader")
    if not native_loader.available():
        pytest.skip("warpweave._native is not built (pip install .)", allow_module_level=True)
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to PyTorch", allow_module_level=True)
    ok, reason = native_loader.native().cuda_available()
    if not ok:
        pytest.skip(f"CUDA driver unusable: {reason}", allow_module_level=True)
    if capability and torch.cuda.get_device_capability() < tuple(capability):
        pytest.skip(why or f"needs compute capability {capability}", allow_module_level=True)
    return torch


def seed_and_poison_outputs(monkeypatch, torch, ops):
    """Seeds torch from os.urandom (printed, to reproduce a failure), makes every output the
    kernel library allocates start as NaN (-7777 for integers) so that an element a kernel never
    writes fails its test, and runs on the GPU even where WARPWEAVE_INTERPRET is set."""
    from warpweave.ops import _common

    seed = int.from_bytes(os.urandom(4), "little")
    print(f"random seed {seed}")
    torch.manual_seed(seed)
    allocate = _common._Place.empty

    def poisoned(self, shape, dtype):
        out = allocate(self, shape, dtype)
        out.fill_(float("nan") if out.is_floating_point() else -7777)
        return out

    monkeypatch.setattr(_common._Place, "empty", poisoned)
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """One private kernel cache for a module's trapped subprocesses (run_trapped_check): their
    kernels carry the trap-on-hang check."""
    return tmp_path_factory.mktemp("cache")


def run_trapped_check(module, call, cache_dir, seed):
    """Runs `module.call` (a check in tests/python/<module>.py) in a fresh Python with PyTorch
    seeded and WARPWEAVE_TRAP_HANGS set, so that a wrong cluster protocol traps instead of
    hanging and the trap cannot leave this process's CUDA context unusable; asserts it passed."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [os.path.join(here, "..", "python"), os.path.join(here, "..", "..")]
    env = dict(os.environ)
    env.pop("WARPWEAVE_INTERPRET", None)
    env["WARPWEAVE_TRAP_HANGS"] = "4000000"
    env["WARPWEAVE_CACHE_DIR"] = str(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    code = f"import torch; torch.manual_seed({seed}); import {module} as k; k.{call}"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]


def timed(fn, reps=20):
    """Milliseconds per call of fn on the current CUDA stream: one warm-up call, then the mean
    of `reps` calls between two CUDA events."""
    import torch

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps
