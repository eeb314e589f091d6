"""`warpweave.language.core`: the names scripts import from `triton.language.core`."""

from __future__ import annotations

from . import *  # noqa: F401,F403  (tl's names, as triton.language.core holds them)
from . import constexpr, dtype  # noqa: F401


def _aggregate(cls):
    """Triton's class decorator for aggregates (a class whose instances kernels pass around as
    one value). The class stays a plain Python class here; warpweave's compiler does not accept
    aggregate values in kernels yet, and reports the construct where a kernel uses one."""
    cls.__triton_aggregate__ = True
    return cls
