"""Triton's `JITFunction.src` and `_unsafe_update_src`: the idiom by which Triton's own language
tests build kernel variants on the GPU (`k = JITFunction(template.fn)`, then
`k._unsafe_update_src(k.src.replace("GENERATE_TEST_HERE", expr))`). The new source is what
compiles, in the interpreter and for the GPU, with errors at the file's lines."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def template(X, Z, SIZE: tl.constexpr):
    off = tl.arange(0, SIZE)
    x = tl.load(X + off)
    z = GENERATE_TEST_HERE  # noqa: F821
    tl.store(Z + off, z)


TEMPLATE_LINE = template.fn.__code__.co_firstlineno  # the decorator's line


def patched(expr):
    k = ww.JITFunction(template.fn)
    k._unsafe_update_src(k.src.replace("GENERATE_TEST_HERE", expr))
    return k


def test_src_is_the_dedented_def_without_decorators():
    src = template.src
    assert src.startswith("def template(X, Z, SIZE: tl.constexpr):\n")
    assert "@ww.jit" not in src and "GENERATE_TEST_HERE" in src


def test_updated_source_is_what_runs():
    x = np.arange(16, dtype=np.float32)
    for expr, want in [("x * 2 + 1", x * 2 + 1), ("tl.where(x > 7, x, -x)", np.where(x > 7, x, -x))]:
        z = np.zeros(16, np.float32)
        patched(expr)[(1,)](x, z, SIZE=16)
        np.testing.assert_array_equal(z, want)
    # The template itself still holds the placeholder, an undefined name.
    with pytest.raises(ww.CompilationError, match="undefined name 'GENERATE_TEST_HERE'"):
        template[(1,)](x, np.zeros(16, np.float32), SIZE=16)


def test_update_after_a_launch_recompiles():
    x = np.ones(8, np.float32)
    z = np.zeros(8, np.float32)
    k = patched("x + 1")
    k[(1,)](x, z, SIZE=8)
    assert z.tolist() == [2.0] * 8
    k._unsafe_update_src(template.src.replace("GENERATE_TEST_HERE", "x + 5"))
    k[(1,)](x, z, SIZE=8)
    assert z.tolist() == [6.0] * 8


def test_errors_in_updated_source_point_at_the_files_lines():
    k = patched("tl.exp(x) + not_defined_anywhere")
    with pytest.raises(ww.CompilationError) as e:
        k[(1,)](np.ones(4, np.float32), np.zeros(4, np.float32), SIZE=4)
    # The placeholder's line: three lines below the def, which is one below the decorator.
    assert f"test_jit_src.py:{TEMPLATE_LINE + 4}:" in str(e.value)
    assert "undefined name 'not_defined_anywhere'" in str(e.value)


def test_gpu_compile_takes_the_updated_source():
    x = np.zeros(64, np.float32)
    k = patched("tl.math.rsqrt(x)")
    values = k.bind((x, x), dict(SIZE=64))
    ptx = k.compile_for(values, False, (4, 1, 1), target="sm_90a").kernel.ptx
    assert "rsqrt.approx" in ptx
    values = template.bind((x, x), dict(SIZE=64))
    with pytest.raises(ww.CompilationError, match="GENERATE_TEST_HERE"):
        template.compile_for(values, False, (4, 1, 1), target="sm_90a")


def test_src_cannot_be_assigned():
    k = ww.JITFunction(template.fn)
    with pytest.raises(AttributeError, match="_unsafe_update_src"):
        k.src = "def template(X, Z, SIZE): pass"
    with pytest.raises(TypeError, match="as a str"):
        k._unsafe_update_src(None)
