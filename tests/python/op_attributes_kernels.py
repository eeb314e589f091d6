"""Kernels of test_op_attributes.py: tl.load / tl.store with the cache_modifier and
eviction_policy given as constexprs, and an atomic with its sem / scope."""

import warpweave as ww
import warpweave.language as tl


@ww.jit
def copy_with_hints(x_ptr, y_ptr, N: tl.constexpr, LOAD_CACHE: tl.constexpr,
                    STORE_CACHE: tl.constexpr, LOAD_EVICT: tl.constexpr,
                    STORE_EVICT: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs, cache_modifier=LOAD_CACHE, eviction_policy=LOAD_EVICT)
    tl.store(y_ptr + offs, x + 1.0, cache_modifier=STORE_CACHE, eviction_policy=STORE_EVICT)
