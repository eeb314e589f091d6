"""Programmatic dependent launch (Triton's launch_pdl and tl.extra.cuda.gdc_wait /
gdc_launch_dependents): the kernel-side instructions in PTX (checked by ptxas) and in the
interpreter, and the launch keyword. The GPU ordering is tests/gpu/test_pdl_gpu.py's."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl



@ww.jit
def _add_after_wait(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, USE_GDC: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if USE_GDC:
        tl.extra.cuda.gdc_wait()
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    if USE_GDC:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(out_ptr + offs, x + y, mask=mask)


def test_gdc_kernels_run_in_the_interpreter_with_launch_pdl():
    x = np.arange(1000, dtype=np.float32)
    y = np.full(1000, 2.0, np.float32)
    out = np.zeros_like(x)
    _add_after_wait[(4, )](x, y, out, 1000, BLOCK=256, USE_GDC=True, launch_pdl=True)
    np.testing.assert_array_equal(out, x + y)


def test_gdc_instructions_reach_the_ptx(tmp_path, monkeypatch, ptxas):
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    a = np.zeros(16, np.float32)
    values = _add_after_wait.bind((a, a, a, 16), {"BLOCK": 256, "USE_GDC": True})
    ptx = _add_after_wait.compile_for(values, False, (4, 3, 1)).kernel.ptx
    assert "griddepcontrol.wait;" in ptx and "griddepcontrol.launch_dependents;" in ptx
    # The wait comes before the loads it protects.
    assert ptx.index("griddepcontrol.wait;") < ptx.index("ld.global")
    ptxas(ptx, "sm_90a")
    values = _add_after_wait.bind((a, a, a, 16), {"BLOCK": 256, "USE_GDC": False})
    assert "griddepcontrol" not in _add_after_wait.compile_for(values, False, (4, 3, 1)).kernel.ptx


def test_gdc_takes_no_arguments():
    @ww.jit
    def bad(x_ptr):
        tl.extra.cuda.gdc_wait(x_ptr)

    with pytest.raises(ww.CompilationError, match="gdc_wait"):
        bad[(1, )](np.zeros(4, np.float32))


def test_extern_libs_is_accepted_and_not_needed():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros_like(x)
    _add_after_wait[(1, )](x, x, out, 8, BLOCK=8, USE_GDC=False,
                           extern_libs={"libdevice": "/nonexistent/libdevice.10.bc"})
    np.testing.assert_array_equal(out, 2 * x)
