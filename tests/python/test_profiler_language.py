"""Proton's in-kernel scopes (warpweave.profiler.language; upstream triton.profiler.language:
enter_scope, exit_scope, `with scope(name):`). Proton records them only under its
instrumentation backend, which warpweave does not have; with it off they emit nothing. So here
the PTX of a kernel with scopes is that of the kernel without them, the interpreter runs them as
nothing, and a scope name that is not a string constant is a located error, as in Proton."""
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww
import warpweave.profiler.language as pl

import profiler_scope_kernels as sk
from blackwell_testing import line_of

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(sk.__file__)


def compile_here(kernel, signature, target="sm_90a"):
    return native_loader.native().compile([(str(KERNELS), KERNELS.read_text())], kernel, signature,
                                          {}, target=target, num_warps=4, stage="ptx")


def instructions(result):
    # The PTX without its line information (the scoped kernel's statements sit on other lines).
    ptx = result if isinstance(result, str) else getattr(result, "ptx", None) or result["ptx"]
    return [l for l in ptx.splitlines() if not l.strip().startswith((".loc", ".file", "//"))]


@pytest.mark.parametrize("target", ["sm_90a", "sm_80", "sm_100a"])
def test_scopes_compile_to_nothing(target):
    sig = "x_ptr:*fp32:16,y_ptr:*fp32:16,N=128,SCOPES={}"
    with_scopes = instructions(compile_here("scoped_affine", sig.format(1), target))
    without = instructions(compile_here("scoped_affine", sig.format(0), target))
    assert with_scopes == without


def test_scopes_under_a_runtime_condition_compile_to_nothing(ptxas):
    result = compile_here("scoped_runtime_branch",
                          "x_ptr:*fp32:16,y_ptr:*fp32:16,n:i32,N=64,TILE=1")
    ptx = "\n".join(instructions(result))
    # Nothing but the loop's own compare: no record, no clock read, no global timer.
    assert "clock" not in ptx and "globaltimer" not in ptx
    ptxas(ptx, arch="sm_90a")


def test_interpreter_runs_scopes_as_nothing(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    x = np.arange(128, dtype=np.float32)
    y = np.zeros_like(x)
    sk.scoped_affine[(1,)](x, y, N=128, SCOPES=True)
    np.testing.assert_array_equal(y, 2 * x + 1)
    x = np.arange(3 * 64, dtype=np.float32)
    y = np.zeros_like(x)
    sk.scoped_runtime_branch[(1,)](x, y, 3, N=64, TILE=1)
    np.testing.assert_array_equal(y, x + np.repeat(np.arange(3), 64))


def test_scope_name_must_be_a_string_constant():
    with pytest.raises(ww.CompilationError) as e:
        compile_here("scope_name_not_a_string", "x_ptr:*fp32:16,N=64")
    line = line_of(sk.scope_name_not_a_string, "pl.enter_scope(N)")
    assert f"profiler_scope_kernels.py:{line}:" in str(e.value)
    assert "pl.enter_scope's name must be a string constant, got 64" in str(e.value)


def test_scope_is_a_context_only():
    with pytest.raises(ww.CompilationError) as e:
        compile_here("scope_outside_with", "x_ptr:*fp32:16,N=64")
    line = line_of(sk.scope_outside_with, "pl.scope(")
    assert f"profiler_scope_kernels.py:{line}:" in str(e.value)
    assert "use it as 'with pl.scope(name):'" in str(e.value)


def test_scopes_are_kernel_only_in_python():
    with pytest.raises(RuntimeError, match="can only be called inside a @ww.jit kernel"):
        pl.enter_scope("host")
    with pytest.raises(RuntimeError, match="can only be called inside a @ww.jit kernel"):
        with pl.scope("host"):
            pass


def test_semantic_switches_take_protons_names():
    pl.enable_semantic("triton")
    pl.disable_semantic("triton")
    with pytest.raises(KeyError):
        pl.enable_semantic("numba")
