"""What every GPU test module needs before it runs: PyTorch, warpweave's extension, a CUDA GPU the
driver can use (and, for some, a minimum compute capability). Each missing piece skips the calling
module with its reason, so a CPU machine reports why nothing ran."""

import importlib

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
