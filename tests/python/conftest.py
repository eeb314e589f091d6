"""Test set-up: use the installed warpweave (with its C++ extension) when there is one; else the
source tree, whose pure-Python parts are tested on their own and whose native tests skip."""

import os
import sys

try:
    import warpweave  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
