"""Indexing inside one buffer: bufs[j][i] on a buffer view is row i of it (element i of a 1-D
buffer, as a [1] view), as TLX's local_view of a view; and tlx.local_reinterpret of a whole
multi-buffered allocation as one tile. Interpreter against NumPy, sm_90a PTX through ptxas, and
the PTX backend's refusal of swizzled rows."""

import importlib
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww  # noqa: F401
from tlx_alias_kernels import reinterpret_whole_ring, view_element_sum, view_row_copy

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(__file__).with_name("tlx_alias_kernels.py")


def compile_here(kernel, signature, stage="cubin"):
    files = [(str(KERNELS), KERNELS.read_text())]
    return native_loader.native().compile(files, kernel, signature, {}, target="sm_90a",
                                          num_warps=4, stage=stage)


def test_element_views_sum_interp():
    x = np.random.default_rng(0).integers(-8, 8, 32).astype(np.float32)
    out = np.zeros(32, np.float32)
    view_element_sum[(1,)](x, out, N=32)
    np.testing.assert_array_equal(out, np.full(32, x.sum(), np.float32))


def test_row_views_interp():
    x = np.arange(4 * 16, dtype=np.float32).reshape(4, 16)
    out = np.zeros_like(x)
    view_row_copy[(1,)](x, out, R=4, C=16, NBUF=3)
    np.testing.assert_array_equal(out, x[::-1])


def test_whole_ring_reinterpret_interp():
    x = np.arange(16 * 64, dtype=np.int16)
    out = np.zeros_like(x)
    reinterpret_whole_ring[(1,)](x, out, M=16, N=64)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("kernel,sig", [
    ("view_element_sum", "x_ptr:*fp32,out_ptr:*fp32,N=64"),
    ("view_row_copy", "x_ptr:*fp32,out_ptr:*fp32,R=4,C=32,NBUF=2"),
    ("reinterpret_whole_ring", "x_ptr:*i16,out_ptr:*i16,M=64,N=128"),
])
def test_ptxas_sm90a(kernel, sig):
    compile_here(kernel, sig)


def test_swizzled_rows_refused_in_ptx():
    # A 64 x 32 fp32 buffer gets a 128-byte swizzle: its rows are not one stride apart.
    with pytest.raises(Exception) as err:
        compile_here("view_row_copy", "x_ptr:*fp32,out_ptr:*fp32,R=64,C=32,NBUF=1", stage="ptx")
    assert "rows are swizzled" in str(err.value) and "tlx_alias_kernels.py:" in str(err.value)

