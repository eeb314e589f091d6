"""`tl.math`: elementwise math functions, kernel-only (see warpweave.language)."""

from . import _kernel_only

_NAMES = """exp exp2 log log2 log1p sqrt rsqrt abs fma sin cos tan tanh erf floor ceil pow
div_rn fdiv max min""".split()

__all__ = list(_NAMES)
for _name in _NAMES:
    globals()[_name] = _kernel_only("tl.math", _name)
del _name
