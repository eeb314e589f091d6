"""GPU tests: they need PyTorch with CUDA and warpweave's extension; each skips with the reason
otherwise."""

import os
import sys

try:
    import warpweave  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
