"""`libdevice` (Triton's `triton.language.extra.libdevice`): CUDA math functions for kernels,
compiled by the C++ front end; calling one from ordinary Python raises a clear error.

The names warpweave's compiler implements are listed below; any other libdevice name still
imports (so files that import a whole set of them load), and a kernel using it gets the
compiler's error naming the function at the call."""

from .. import _kernel_only

# src/specialize/TlBuiltins.cpp's libdevice names.
SUPPORTED = ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "floor",
             "ceil", "fma", "fabs", "abs", "pow", "div_rn", "fast_expf", "fast_logf", "sqrt_rn"]

__all__ = list(SUPPORTED)
for _name in SUPPORTED:
    globals()[_name] = _kernel_only("libdevice", _name)
del _name


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(name)
    return _kernel_only("libdevice", name)
