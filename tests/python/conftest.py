"""Test set-up: use the installed warpweave (with its C++ extension) when there is one; else the
source tree, whose pure-Python parts are tested on their own and whose native tests skip."""

import os
import sys

import pytest

try:
    import warpweave  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))


@pytest.fixture
def rng():
    """A NumPy generator with a fresh seed, printed so a failing run can be replayed."""
    import numpy as np

    seed = int.from_bytes(os.urandom(4), "little")
    print(f"random seed {seed}")
    return np.random.default_rng(seed)
