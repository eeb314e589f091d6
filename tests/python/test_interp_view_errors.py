"""Views the interpreter cannot run reach Python as located ww.InterpreterError (the PTX backend's
wording where it refuses the same view), never as an internal error."""

import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@ww.jit
def reinterpreted_view(x_ptr, out_ptr, KIND: tl.constexpr):
    buf = tlx.local_alloc((8, 8), tl.float32, 1)
    offs = tl.arange(0, 8)[:, None] * 8 + tl.arange(0, 8)[None, :]
    tlx.local_store(buf[0], tl.load(x_ptr + offs))
    if KIND == 0:  # columns 4..5 of every row
        v = tlx.local_reinterpret(tlx.local_slice(buf[0], [0, 4], [8, 2]),  # MARK 0
                                  tl.int32, [16])
    elif KIND == 1:
        t = tlx.local_trans(tlx.local_slice(buf[0], [0, 0], [4, 4]))
        v = tlx.local_reinterpret(t, tl.int32, [16])  # MARK 1
    elif KIND == 2:  # rows 2..3: contiguous bytes
        v = tlx.local_reinterpret(tlx.local_slice(buf[0], [2, 0], [2, 8]), tl.int32, [16])
    else:
        v = tlx.local_slice(tlx.local_trans(buf[0], [0, 0]), [0, 0], [2, 8])  # MARK 3
    tl.store(out_ptr + tl.arange(0, 16), tl.reshape(tlx.local_load(v), [16]).to(tl.int32,
                                                                                bitcast=True))


def line(marker):
    with open(__file__) as f:
        return next(i for i, text in enumerate(f, 1) if f"# MARK {marker}" in text)


def run(kind):
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(16, np.int32)
    reinterpreted_view[(1,)](x, out, KIND=kind)
    return x, out


@pytest.mark.parametrize("kind", [0, 1])
def test_reinterpret_of_a_non_contiguous_view_is_refused_like_the_backend(kind):
    with pytest.raises(ww.InterpreterError) as e:
        run(kind)
    assert f"test_interp_view_errors.py:{line(kind)}:13: error: tlx.local_reinterpret of a " \
           f"sliced, transposed or reinterpreted view is not supported; reinterpret the buffer " \
           f"and slice the result" in str(e.value), str(e.value)


def test_reinterpret_of_a_contiguous_slice_reads_its_bytes():
    x, out = run(2)
    np.testing.assert_array_equal(out, x[16:32].view(np.int32))


def test_transpose_that_is_not_a_permutation_is_a_located_error():
    with pytest.raises(ww.InterpreterError) as e:
        run(3)
    assert f"test_interp_view_errors.py:{line(3)}:29: error: tlx.local_trans's dims must be a " \
           f"permutation of the 2 dimensions of the buffer (each of 0..1 once)" in str(e.value), \
        str(e.value)
