"""Set-up shared by the CPU (tests/python) and GPU (tests/gpu) test directories."""

import sys

import pytest


@pytest.fixture(autouse=True)
def fresh_launch_plans():
    """Each test starts without kernels/ops.py's launch plans, so that a test that patches a
    wrapper's routing, kernels or allocations sees its first call of a signature take the full
    path."""
    ops = sys.modules.get("kernels.ops")
    if ops is not None:
        ops._launch_plans.clear()
