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

from . import _env  # noqa: E402

_env.mirror()  # TRITON_ spellings of warpweave's variables (see _env.py)

from . import language, tlx  # noqa: E402
from .autotuner import Config, autotune, heuristics  # noqa: E402
from .jit import JITFunction, KernelInterface, jit  # noqa: E402
from .language import cdiv, constexpr, next_power_of_2  # noqa: E402
from .tensor_descriptor import TensorDescriptor  # noqa: E402
from .errors import (AutotunerError, CompilationError, CudaError, InterpreterError,  # noqa: E402
                     LaunchError, OutOfResources, PTXASError, TritonError)
from .language import extra as _extra  # noqa: E402,F401  (language.extra.tlx is tlx)
from . import testing  # noqa: E402
from . import runtime, tools, knobs  # noqa: E402
from .runtime._allocation import set_allocator  # noqa: E402
from .compiler import compile  # noqa: E402,A001  (Triton's name)
from .runtime.jit import TensorWrapper, reinterpret  # noqa: E402


def constexpr_function(fn):
    """Triton's decorator for a plain Python function of compile-time values (layouts, block
    shapes) that kernels may call. The function is returned unchanged, so host code calls it as
    usual; warpweave's compiler does not evaluate Python functions inside kernels, so a kernel
    that calls one gets a compile error naming the call."""
    fn.__warpweave_constexpr_function__ = True
    return fn


__all__ = [
    "jit", "JITFunction", "KernelInterface", "Config", "autotune", "heuristics", "cdiv",
    "next_power_of_2", "constexpr", "TensorDescriptor", "testing", "language", "tlx", "runtime",
    "tools", "knobs", "set_allocator", "compile", "constexpr_function", "CompilationError",
    "InterpreterError", "CudaError", "LaunchError", "OutOfResources", "PTXASError",
    "AutotunerError", "TritonError", "TensorWrapper", "reinterpret", "__version__",
]
