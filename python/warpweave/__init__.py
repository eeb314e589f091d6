"""warpweave: tile-level GPU kernels with explicit warp-group orchestration.

    import warpweave as ww
    import warpweave.language as tl
    from warpweave import tlx

    @ww.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr): ...

    kernel[grid](x, n, BLOCK=1024)
"""

from __future__ import annotations

__version__ = "0.1.0"

from . import language, tlx  # noqa: E402
from .autotuner import Config, autotune, heuristics  # noqa: E402
from .jit import JITFunction, jit  # noqa: E402
from .language import cdiv, constexpr, next_power_of_2  # noqa: E402
from .tensor_descriptor import TensorDescriptor  # noqa: E402
from . import testing  # noqa: E402
from ._native_loader import available as _native_available  # noqa: E402

if _native_available():
    from ._native import (CompilationError, CudaError, InterpreterError,  # noqa: E402
                          LaunchError)
else:
    class CompilationError(Exception):
        """A kernel failed to compile (the C++ extension is not built)."""

    class InterpreterError(Exception):
        """The interpreter found a fault in a kernel."""

    class CudaError(RuntimeError):
        """A CUDA driver call failed."""

    class LaunchError(ValueError):
        """A launch was refused before reaching the driver."""

__all__ = [
    "jit", "JITFunction", "Config", "autotune", "heuristics", "cdiv", "next_power_of_2",
    "constexpr", "TensorDescriptor", "testing", "language", "tlx", "CompilationError",
    "InterpreterError", "CudaError", "LaunchError", "__version__",
]
