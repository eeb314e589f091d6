"""Kernels marking regions with Proton's in-kernel scopes (warpweave.profiler.language, Triton's
triton.profiler.language), for tests/python/test_profiler_language.py: the scopes compile to
nothing and the interpreter runs them as nothing."""
import warpweave as ww
import warpweave.language as tl
import warpweave.profiler.language as pl
from warpweave.profiler.language import enter_scope, exit_scope


@ww.jit
def scoped_affine(x_ptr, y_ptr, N: tl.constexpr, SCOPES: tl.constexpr):
    """y = 2 x + 1, with SCOPES every statement inside a scope of one form or another."""
    offs = tl.arange(0, N)
    if SCOPES:
        pl.enter_scope("load")
    x = tl.load(x_ptr + offs)
    if SCOPES:
        pl.exit_scope("load")
        with pl.scope("compute"):
            y = x * 2.0 + 1.0
        enter_scope("store")
    else:
        y = x * 2.0 + 1.0
    tl.store(y_ptr + offs, y)
    if SCOPES:
        exit_scope("store")


@ww.jit
def scoped_runtime_branch(x_ptr, y_ptr, n, N: tl.constexpr, TILE: tl.constexpr):
    """A scope entered under a run-time condition, as TLX's GDPA tutorial marks one tile of its
    persistent loop: y = x + i for tile i."""
    for i in range(0, n):
        if i == TILE:
            pl.enter_scope("tile")
        offs = i * N + tl.arange(0, N)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) + i)
        if i == TILE:
            pl.exit_scope("tile")


@ww.jit
def scope_name_not_a_string(x_ptr, N: tl.constexpr):
    pl.enter_scope(N)
    tl.store(x_ptr + tl.arange(0, N), tl.zeros((N, ), tl.float32))


@ww.jit
def scope_outside_with(x_ptr, N: tl.constexpr):
    s = pl.scope("region")
    tl.store(x_ptr + tl.arange(0, N), tl.zeros((N, ), tl.float32))
