"""Triton's launch options and test helpers that Triton programs and tests use (issue 17):
`enable_fp_fusion` (a launch option and `knobs.language.default_fp_fusion`; with it a multiply
and its add are one fma.rn in the PTX, without it they carry an explicit rounding, so ptxas
cannot contract them), num_warps errors that are Triton's AssertionError as well as a ValueError, and
`_internal_testing._fresh_knobs_impl` (the fresh_knobs fixture of Triton's conftest)."""

import importlib
import os
import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


def native():
    return importlib.import_module("warpweave._native_loader").native()


# ------------------------------------------------------------------------------------------------
# enable_fp_fusion
# ------------------------------------------------------------------------------------------------

MUL_ADD_SOURCE = '''import warpweave as ww
import warpweave.language as tl


@ww.jit
def mul_add(X):
    offs = tl.arange(0, 128)
    tl.store(X + offs, tl.load(X + offs) * 1.5 + 1.0)
'''


@pytest.mark.parametrize("fusion", [True, False])
def test_fp_fusion_option_in_the_ptx(tmp_path, fusion):
    path = tmp_path / "mul_add.py"
    path.write_text(MUL_ADD_SOURCE)
    ptx = native().compile([(str(path), MUL_ADD_SOURCE)], "mul_add", "X:*fp32:16", {},
                           target="sm_90a", stage="ptx", fp_fusion=fusion).ptx
    # With fusion the multiply and its add are one fma.rn, as in Triton's PTX (Triton's own
    # test_enable_fp_fusion looks for it); without, .rn keeps ptxas from contracting them.
    if fusion:
        assert re.search(r"fma\.rn\.f32 %f\d+, %f\d+, 0f3FC00000, 0f3F800000;", ptx), ptx
        assert "mul.f32" not in ptx and "add.f32" not in ptx and ".rn.f32" in ptx
    else:
        assert "mul.rn.f32" in ptx and "add.rn.f32" in ptx
        assert "mul.f32" not in ptx and "add.f32" not in ptx


@ww.jit
def mul_add_kernel(X):
    offs = tl.arange(0, 128)
    tl.store(X + offs, tl.load(X + offs) * 1.5 + 1.0)


def test_enable_fp_fusion_launch_option_and_knob(monkeypatch):
    x = np.ones(128, np.float32)
    mul_add_kernel[(1,)](x, enable_fp_fusion=False)
    np.testing.assert_array_equal(x, np.full(128, 2.5, np.float32))
    k = mul_add_kernel.warmup(x, grid=(1,), enable_fp_fusion=False)
    assert k.options[4:] == (False,)
    assert ww.knobs.language.default_fp_fusion is True
    monkeypatch.delenv("WARPWEAVE_DEFAULT_FP_FUSION", raising=False)
    ww.knobs.language.default_fp_fusion = False
    try:
        assert os.environ["WARPWEAVE_DEFAULT_FP_FUSION"] == "0"
        assert ww.knobs.language.default_fp_fusion is False
        assert mul_add_kernel.warmup(x, grid=(1,)).options[4:] == (False,)
        assert mul_add_kernel.warmup(x, grid=(1,), enable_fp_fusion=True).options[4:] == ()
    finally:
        ww.knobs.language.default_fp_fusion = None
    assert ww.knobs.language.default_fp_fusion is True


# ------------------------------------------------------------------------------------------------
# Host API: option errors, compile errors, fresh knobs
# ------------------------------------------------------------------------------------------------


@ww.jit
def empty_kernel(X):
    pass


def test_num_warps_not_a_power_of_two_is_an_assertion_and_a_value_error():
    for cls in (AssertionError, ValueError):
        with pytest.raises(cls, match="must be a power of 2"):
            empty_kernel.warmup(np.zeros(1), grid=(1,), num_warps=3)


def test_fresh_knobs_reset_and_restore(monkeypatch):
    from warpweave import knobs
    from warpweave._internal_testing import _fresh_knobs_impl

    monkeypatch.setenv("WARPWEAVE_PRINT_AUTOTUNING", "1")
    hook = lambda metadata: None  # noqa: E731
    old_runtime = knobs.runtime
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        fresh, reset = _fresh_knobs_impl(skipped_attr={"nvidia", "amd"})
        k = fresh()
        assert k is knobs
        assert knobs.autotuning.print is False  # its variable is cleared
        assert "WARPWEAVE_PRINT_AUTOTUNING" not in os.environ
        assert not knobs.runtime.launch_enter_hook  # a fresh, empty chain
        assert knobs.runtime is not old_runtime
        interpret = os.environ.get("WARPWEAVE_INTERPRET")
        assert knobs.runtime.interpret == bool(interpret and interpret != "0")  # kept
        knobs.language.default_fp_fusion = False
        os.environ["WARPWEAVE_SOMETHING_NEW"] = "1"
        reset()
        assert knobs.runtime is old_runtime and hook in knobs.runtime.launch_enter_hook.calls
        assert os.environ["WARPWEAVE_PRINT_AUTOTUNING"] == "1"
        assert "WARPWEAVE_SOMETHING_NEW" not in os.environ
        assert knobs.language.default_fp_fusion is True
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
