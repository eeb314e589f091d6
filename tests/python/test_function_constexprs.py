"""Functions as constexprs, as Triton allows: a @jit function or a function of the language
(`tl.exp`, a libdevice function) passed for a `tl.constexpr` parameter is what the kernel calls
through that name; each function is its own specialization. Checked in the interpreter, in the
sm_90a PTX, and for the errors of values that are not such functions."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave.language.extra import libdevice

pytest.importorskip("warpweave._native")


@ww.jit
def leaky(x):
    return tl.where(x > 0, x, x * 0.125)


@ww.jit
def twice_then(x, F: tl.constexpr):
    return F(x * 2)


@ww.jit
def apply(X, Y, F: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(Y + offs, F(tl.load(X + offs)))


@ww.jit
def apply_nested(X, Y, F: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(Y + offs, twice_then(tl.load(X + offs), F))


X = np.linspace(-2, 2, 64).astype(np.float32)


@pytest.mark.parametrize("fn, ref", [
    (leaky, lambda x: np.where(x > 0, x, x * 0.125)),
    (tl.exp, np.exp),
    (tl.math.sqrt, np.sqrt),
    (libdevice.tanh, np.tanh),
])
def test_function_constexpr_is_what_the_kernel_calls(fn, ref):
    y = np.zeros_like(X)
    with np.errstate(invalid="ignore"):
        want = ref(X)
        apply[(1,)](X, y, fn, N=64)
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-6, equal_nan=True)


def test_each_function_is_its_own_specialization_and_passes_through_helpers():
    y1, y2 = np.zeros_like(X), np.zeros_like(X)
    apply_nested[(1,)](X, y1, leaky, N=64)
    apply_nested[(1,)](X, y2, tl.exp, N=64)
    np.testing.assert_allclose(y1, np.where(X > 0, 2 * X, X * 0.25), rtol=1e-6)
    np.testing.assert_allclose(y2, np.exp(2 * X), rtol=2e-6)


def test_gpu_compile_calls_the_function(requires_ptxas):
    x = np.zeros(64, np.float32)
    ptx = {}
    for name, fn in (("leaky", leaky), ("exp", tl.exp)):
        values = apply.bind((x, x, fn), dict(N=64))
        ptx[name] = apply.compile_for(values, False, (4, 1, 1), target="sm_90a").kernel.ptx
    assert "ex2.approx" in ptx["exp"] and "ex2.approx" not in ptx["leaky"]
    assert "selp.f32" in ptx["leaky"] or "setp" in ptx["leaky"]


def test_values_that_are_not_kernel_functions_are_refused():
    y = np.zeros_like(X)
    with pytest.raises(TypeError, match="a @jit function or a tl function"):
        apply[(1,)](X, y, np.exp, N=64)  # a NumPy function: not kernel code
    with pytest.raises(ww.CompilationError):
        apply[(1,)](X, y, 3, N=64)  # an int called in the kernel
