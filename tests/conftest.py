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


@pytest.fixture
def full_path_calls(monkeypatch):
    """The ops whose calls took the wrapper's full path, not a launch plan, in call order (each
    full path checks x's dtype first)."""
    from kernels import ops

    calls = []
    check = ops._check_dtype

    def counted(op, name, value, allowed):
        if name == "x":
            calls.append(op)
        return check(op, name, value, allowed)

    monkeypatch.setattr(ops, "_check_dtype", counted)
    return calls
