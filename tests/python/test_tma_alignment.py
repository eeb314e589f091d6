"""TMA boxes start 16-byte aligned along their innermost dimension, or the H200 stops the kernel
with an illegal instruction. The PTX backend checks what the compiler cannot prove: a constant
offset off the boundary is a compile error at its line; a run-time offset AxisInfo cannot prove
a multiple of 16 bytes is checked before the copy (a device-side assert naming the copy's file
and line); offsets proven aligned (block * 8) cost nothing. The interpreter's report of the same
rule is tested in test_host_descriptors_interp.py."""

import importlib
import re

import numpy as np
import pytest

import warpweave as ww
import tma_alignment_kernels as tk

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def ptx_of(kernel, col, **consts):
    x = np.zeros((16, 64), np.float16)
    out = np.zeros((16, 16), np.float16)
    desc = ww.TensorDescriptor.from_tensor(x, [16, 16])
    args = (desc, out) if col is None else (desc, out, col)
    values = kernel.bind(args, dict(ROWS=16, COLS=16, **consts))
    return kernel.compile_for(values, False, (4, 1, 1), target="sm_90a").kernel.ptx


@pytest.mark.parametrize("kernel,construct", [(tk.load_at, "desc.load"),
                                              (tk.tlx_load_at, "tlx.async_descriptor_load")])
def test_a_run_time_offset_is_checked_before_the_copy(kernel, construct):
    ptx = ptx_of(kernel, 5)
    assert "call.uni __assertfail" in ptx
    assert re.search(r"and\.b32 %r\d+, %r\d+, 7;", ptx)  # 8 fp16 elements
    # The check comes first, then the copy; its message names the rule and the construct.
    assert ptx.index("__assertfail (") < ptx.index("cp.async.bulk.tensor")
    strings = bytes(int(b) for s in re.findall(r"\.b8 \w+\[\d+\] = \{([^}]*)\}", ptx)
                    for b in s.split(","))
    assert f"TMA copy ({construct}) must be 16-byte aligned, a multiple of 8 float16".encode() \
        in strings
    assert b"tma_alignment_kernels.py" in strings


def test_an_offset_proven_aligned_is_not_checked():
    ptx = ptx_of(tk.load_at_block, 3)
    assert "__assertfail" not in ptx
    assert "cp.async.bulk.tensor" in ptx


def test_a_constant_offset_off_the_boundary_is_a_compile_error():
    with pytest.raises(ww.CompilationError) as info:
        ptx_of(tk.load_at_constant, None, COL=4)
    msg = str(info.value)
    assert "tma_alignment_kernels.py:" in msg
    assert "must be 16-byte aligned, a multiple of 8 float16 elements; it is 4" in msg
    assert "__assertfail" not in ptx_of(tk.load_at_constant, None, COL=8)
