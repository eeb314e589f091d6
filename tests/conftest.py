"""Set-up shared by the CPU (tests/python) and GPU (tests/gpu) test directories."""

import sys

import pytest


@pytest.fixture(autouse=True)
def fresh_launch_plans():
    """Each test starts without warpweave.ops's launch plans, so that a test that patches a
    wrapper's routing, kernels or allocations sees its first call of a signature take the full
    path."""
    common = sys.modules.get("warpweave.ops._common")
    if common is not None:
        common._launch_plans.clear()


@pytest.fixture
def full_path_calls(monkeypatch):
    """The ops whose calls took the wrapper's full path, not a launch plan, in call order (each
    full path checks the dtype of its first tensor: x, or a for the GEMMs, q for attention)."""
    from warpweave.ops import (_attention, _common, _elementwise, _embedding_bag, _layernorm,
                               _matmul, _reduction, _softmax)

    calls = []
    check = _common._check_dtype

    def counted(op, name, value, allowed):
        if name in ("x", "a", "q"):
            calls.append(op)
        return check(op, name, value, allowed)

    # Each op family's module calls its own binding of _check_dtype.
    for module in (_attention, _elementwise, _embedding_bag, _layernorm, _matmul, _reduction,
                   _softmax):
        monkeypatch.setattr(module, "_check_dtype", counted)
    return calls
