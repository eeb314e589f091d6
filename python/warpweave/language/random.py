"""`tl.random`: Triton's counter-based random numbers (Philox), kernel-only; the same functions as
`tl.randint`, `tl.rand`, ... (see docs/language.md, "Random numbers")."""

from . import (pair_uniform_to_normal, philox, philox_impl, rand, rand4x, randint, randint4x,
               randn, randn4x, uint_to_uniform_float)
from . import constexpr as _constexpr

#: The number of Philox rounds the functions run when `n_rounds` is not given.
N_ROUNDS_DEFAULT = _constexpr(10)

__all__ = ["N_ROUNDS_DEFAULT", "pair_uniform_to_normal", "philox", "philox_impl", "rand", "rand4x",
           "randint", "randint4x", "randn", "randn4x", "uint_to_uniform_float"]
