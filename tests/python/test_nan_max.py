"""tl.maximum / tl.minimum / tl.clamp / tl.max with NaN operands: as Triton's default, a NaN yields the other
operand (PTX max.f32 on the GPU, the same rule in the interpreter); propagate_nan=True makes NaN
win (max.NaN.f32). The interpreter runs the kernel; the PTX is checked for every target."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def nan_kernel(x_ptr, y_ptr, out_ptr, row_ptr, PROPAGATE: tl.constexpr):
    offs = tl.arange(0, 16)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, tl.maximum(x, y, propagate_nan=PROPAGATE))
    tl.store(out_ptr + 16 + offs, tl.minimum(x, y, propagate_nan=PROPAGATE))
    tl.store(out_ptr + 32 + offs, tl.clamp(x, -1.0, 5.0, propagate_nan=PROPAGATE))
    tl.store(row_ptr, tl.max(x, axis=0))


def _inputs():
    x = np.arange(16, dtype=np.float32) - 4.0
    y = np.full(16, 2.0, np.float32)
    x[3] = np.nan
    y[5] = np.nan
    return x, y


def test_nan_yields_the_other_operand_unless_propagated():
    x, y = _inputs()
    for propagate in (False, True):
        out = np.zeros(48, np.float32)
        row = np.zeros(1, np.float32)
        nan_kernel[(1,)](x, y, out, row, PROPAGATE=propagate)
        if propagate:
            expect_max, expect_min = np.maximum(x, y), np.minimum(x, y)
        else:
            expect_max, expect_min = np.fmax(x, y), np.fmin(x, y)
        np.testing.assert_array_equal(out[:16], expect_max)
        np.testing.assert_array_equal(out[16:32], expect_min)
        clamped = np.minimum(np.maximum(x, -1.0), 5.0) if propagate else np.clip(
            np.nan_to_num(x, nan=-1.0), -1.0, 5.0)
        np.testing.assert_array_equal(out[32:], clamped)
        assert row[0] == np.nanmax(x)  # tl.max skips NaN (Triton's default)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80", "sm_100a"])
def test_the_ptx_uses_max_f32_and_max_nan_f32_as_asked(target, monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TARGET", target)
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    x, y = _inputs()
    out, row = np.zeros(48, np.float32), np.zeros(1, np.float32)
    for propagate, wanted, unwanted in ((False, "max.f32", "max.NaN.f32"),
                                        (True, "max.NaN.f32", None)):
        values = nan_kernel.bind((x, y, out, row), {"PROPAGATE": propagate})
        ptx = nan_kernel.compile_for(values, False, (4, 3, 1)).kernel.ptx
        assert wanted in ptx and ("min.NaN.f32" in ptx) == propagate
        if unwanted:
            assert unwanted not in ptx


def test_propagate_nan_must_be_a_constant():
    @ww.jit
    def bad(x_ptr, flag):
        v = tl.load(x_ptr)
        tl.store(x_ptr, tl.maximum(v, v, propagate_nan=flag))

    with pytest.raises(ww.CompilationError, match="propagate_nan must be tl.PropagateNan.ALL / "
                                                  "NONE or a compile-time True / False"):
        bad[(1,)](np.zeros(1, np.float32), 1)


@ww.jit
def triton_style(x_ptr, y_ptr, out_ptr):
    # As Triton (and PyTorch Inductor's helpers) spell it: the third argument, positional.
    offs = tl.arange(0, 16)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, tl.maximum(x, y, tl.PropagateNan.ALL))
    tl.store(out_ptr + 16 + offs, tl.minimum(x, y, propagate_nan=tl.PropagateNan.NONE))


def test_triton_propagate_nan_enum():
    x, y = _inputs()
    out = np.zeros(32, np.float32)
    triton_style[(1,)](x, y, out)
    np.testing.assert_array_equal(out[:16], np.maximum(x, y))
    np.testing.assert_array_equal(out[16:], np.fmin(x, y))
