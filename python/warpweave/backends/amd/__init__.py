"""`warpweave.backends.amd`: where Triton keeps its AMD (HIP) backend. warpweave compiles for
NVIDIA GPUs only; the package exists so that programs importing it (TLX's unit tests do, then
skip themselves without a HIP runtime) load, and using anything in it says why it cannot work."""

from . import compiler  # noqa: F401

__all__ = ["compiler"]
