"""GPU tests: they need PyTorch with CUDA and warpweave's extension; each skips with the reason
otherwise."""

import os
import sys

try:
    import warpweave  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def on_the_gpu(monkeypatch):
    """GPU tests run their kernels on the GPU even where WARPWEAVE_INTERPRET (or Triton's
    TRITON_INTERPRET) is set; a test that wants the interpreter sets it itself."""
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
