"""fp32 division as Triton compiles it for GPUs: `/` is div.full.f32 (Triton's arith.divf lowering,
within 2 ulp, no slow path), tl.math.div_rn / tl.fdiv(ieee_rounding=True) / libdevice.div_rn
round as IEEE says (div.rn.f32), fp64 `/` is div.rn.f64 and a power-of-two divisor is a multiply.
The interpreter and constant folding divide with IEEE rounding in every case."""

import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")

SOURCE = '''import warpweave as ww
import warpweave.language as tl
from warpweave.language.extra import libdevice


@ww.jit
def divide(X, Y, OUT, FORM: tl.constexpr):
    offs = tl.arange(0, 128)
    x = tl.load(X + offs)
    y = tl.load(Y + offs)
    if FORM == "slash":
        q = x / y
    elif FORM == "div_rn":
        q = tl.math.div_rn(x, y)
    elif FORM == "fdiv_ieee":
        q = tl.fdiv(x, y, ieee_rounding=True)
    elif FORM == "fdiv":
        q = tl.fdiv(x, y)
    elif FORM == "libdevice":
        q = libdevice.div_rn(x, y)
    else:
        q = x / 8.0
    tl.store(OUT + offs, q)
'''


def ptx(tmp_path, form, elem="fp32", target="sm_90a"):
    path = tmp_path / "divide.py"
    path.write_text(SOURCE)
    native = importlib.import_module("warpweave._native_loader").native()
    sig = f"X:*{elem}:16,Y:*{elem}:16,OUT:*{elem}:16,FORM=\"{form}\""
    return native.compile([(str(path), SOURCE)], "divide", sig, {}, target=target,
                          stage="ptx").ptx


@pytest.mark.parametrize("target", ["sm_90a", "sm_80", "sm_100a"])
@pytest.mark.parametrize("form, instruction", [
    ("slash", "div.full.f32"), ("fdiv", "div.full.f32"), ("div_rn", "div.rn.f32"),
    ("fdiv_ieee", "div.rn.f32"), ("libdevice", "div.rn.f32"), ("pow2", None)])
def test_fp32_division_forms(tmp_path, form, instruction, target):
    text = ptx(tmp_path, form, target=target)
    other = {"div.full.f32": "div.rn.f32", "div.rn.f32": "div.full.f32"}
    if instruction is None:
        assert "div." not in text and "mul.f32" in text
    else:
        assert instruction in text and other[instruction] not in text


def test_fp16_and_fp64_division(tmp_path):
    # 16-bit floats divide in fp32 (approximate, as Triton), fp64 with IEEE rounding.
    assert "div.full.f32" in ptx(tmp_path, "slash", "fp16")
    text = ptx(tmp_path, "slash", "fp64")
    assert "div.rn.f64" in text and "div.full" not in text


@ww.jit
def divide_kernel(X, Y, OUT, IEEE: tl.constexpr):
    offs = tl.arange(0, 128)
    x = tl.load(X + offs)
    y = tl.load(Y + offs)
    if IEEE:
        q = tl.math.div_rn(x, y)
    else:
        q = x / y
    tl.store(OUT + offs, q)


@pytest.mark.parametrize("ieee", [False, True])
def test_interpreter_rounds_as_ieee(ieee):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(128).astype(np.float32)
    y = (rng.standard_normal(128) + 3).astype(np.float32)
    out = np.zeros(128, np.float32)
    divide_kernel[(1,)](x, y, out, IEEE=ieee)
    np.testing.assert_array_equal(out, x / y)
