"""GPU tests: they need PyTorch with CUDA and warpweave's extension; each skips with the reason
otherwise."""

import os
import sys

import pytest

try:
    import warpweave  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))


@pytest.fixture(autouse=True)
def fresh_launch_plans():
    """Each test starts without kernels/ops.py's launch plans, so that a test that patches a
    wrapper's routing, kernels or allocations sees its first call of a signature take the full
    path."""
    ops = sys.modules.get("kernels.ops")
    if ops is not None:
        ops._launch_plans.clear()
