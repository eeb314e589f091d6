"""32-bit integer division and remainder by a constant that is not a power of two lower to a
multiply-high (codegen/ScalarOps.cpp): ptxas expands div / rem by an immediate into I2F,
MUFU.RCP and an IMAD chain, which TLX's pipelined GEMM paid twice per k step for
`k % NUM_STAGES` on the path to its wgmma. The interpreter against NumPy, the sm_90a PTX (no
div / rem left, the multiply-high there) and ptxas accepting it. The values the PTX computes
are checked on the GPU (tests/gpu/test_division_magic_gpu.py) and by replaying the instruction
sequence (tests/cpp/division_magic_test.cpp)."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import division_magic_kernels as dm

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(dm.__file__)


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def compile_ptx(name, sig):
    return native_loader.native().compile([(str(KERNELS), KERNELS.read_text())], name, sig, {},
                                          target="sm_90a", num_warps=4, stage="ptx").ptx


DIV_OR_REM = re.compile(r"^\s*(div|rem)\.[su]32\b", re.M)


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_const_div_in_the_interpreter(dtype):
    x = dm.edge_values(np.dtype(dtype))
    out = np.zeros(6 * len(x), dtype)
    dm.const_div[((len(x) + 127) // 128,)](x, out, len(x), BLOCK=128)
    np.testing.assert_array_equal(out, dm.expected(x))


@pytest.mark.parametrize("ty,mulhi", [("i32", "mul.hi.s32"), ("u32", "mul.hi.u32")])
def test_const_div_ptx_uses_multiply_high(ty, mulhi, ptxas):
    ptx = compile_ptx("const_div", f"x_ptr:*{ty}:16, out_ptr:*{ty}:16, n:i32, BLOCK=128")
    assert not DIV_OR_REM.search(ptx), DIV_OR_REM.findall(ptx)
    assert ptx.count(mulhi) >= 4
    if ty == "i32":
        # 3's signed multiplier (Hacker's Delight, table 10-1).
        assert "1431655766" in ptx
    ptxas(ptx, "sm_90a")


@pytest.mark.parametrize("stages", [3, 5, 6])
def test_stage_ring(stages, ptxas):
    n = 40
    out = np.zeros(2 * n, np.int32)
    dm.stage_ring[(1,)](out, n, STAGES=stages)
    k = np.arange(n)
    np.testing.assert_array_equal(out[0::2], k % stages)
    np.testing.assert_array_equal(out[1::2], (k // stages) & 1)
    ptx = compile_ptx("stage_ring", f"out_ptr:*i32:16, n:i32, STAGES={stages}")
    assert not DIV_OR_REM.search(ptx), DIV_OR_REM.findall(ptx)
    ptxas(ptx, "sm_90a")


def test_power_of_two_and_variable_divisors_unchanged():
    # Powers of two keep their shifts; a divisor known only at run time keeps div / rem.
    ptx = compile_ptx("stage_ring", "out_ptr:*i32:16, n:i32, STAGES=4")
    assert not DIV_OR_REM.search(ptx) and "mul.hi" not in ptx
