"""`warpweave.backends`: Triton's backend namespace, reduced to what host code reads: the
`GPUTarget` of `backends.compiler` (warpweave has one backend, CUDA)."""

from . import compiler  # noqa: F401
from .compiler import GPUTarget  # noqa: F401

__all__ = ["compiler", "GPUTarget"]
