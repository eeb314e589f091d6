"""tlx.assert_same_layout (issue 19, TLX's layout surface): a compile-time check that the layout
the compiler assigns a tensor or buffer is another value's or the register layout a tlx.layout
describes; it emits no code, and a mismatch is a compile error at the call showing both maps."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def _pair(x_ptr, y_ptr, N: tl.constexpr, TRANSPOSE: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * N + r[None, :])
    y = tl.load(y_ptr + r[:, None] * N + r[None, :])
    if TRANSPOSE:
        tlx.assert_same_layout(x, tl.trans(y))
    else:
        tlx.assert_same_layout(x, y)
    tl.store(y_ptr + r[:, None] * N + r[None, :], x + y)


def test_two_loads_of_one_shape_share_a_layout_and_the_kernel_runs():
    x = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    y = np.ones_like(x)
    k = _pair[(1,)](x, y, N=32, TRANSPOSE=False)
    np.testing.assert_array_equal(y, x + 1)
    # Nothing of the check is left in the IR.
    assert "assert_same_layout" not in k.asm["tile_ir"] + k.asm["ttgir"]


def test_a_transposed_value_is_reported_at_the_call_with_both_layouts():
    x = np.zeros((32, 32), np.float32)
    with pytest.raises(ww.CompilationError) as info:
        _pair[(1,)](x, x.copy(), N=32, TRANSPOSE=True)
    msg = str(info.value)
    line = _pair.fn.__code__.co_firstlineno + 6  # the call under `if TRANSPOSE:`
    assert f"test_tlx_assert_same_layout.py:{line}:" in msg
    assert "tlx.assert_same_layout failed: tensor<32x32xfp32> has the layout" in msg
    assert "the other value has" in msg and msg.count("- register:") == 2


# A register layout as TLX writes one: (thread modes, value modes) as shape / stride over the
# tile's row-major offsets. 128 x 32 fp32 on 4 warps, a row per thread.
_ROW_PER_THREAD = tlx.layout(shape=((32, 4), (32,)), stride=((32, 1024), (1,)))


@ww.jit
def _pinned(x_ptr, y_ptr, LAYOUT: tl.constexpr, EXPECT: tl.constexpr):
    buf = tlx.local_alloc((128, 32), tl.float32, 1)
    r = tl.arange(0, 128)[:, None] * 32 + tl.arange(0, 32)[None, :]
    tlx.local_store(buf[0], tl.load(x_ptr + r))
    v = tlx.local_load(buf[0], layout=LAYOUT)
    tlx.assert_same_layout(v, EXPECT)
    tl.store(y_ptr + r, v * 2)


def test_a_value_loaded_with_a_layout_has_that_layout():
    x = np.arange(128 * 32, dtype=np.float32).reshape(128, 32)
    y = np.zeros_like(x)
    _pinned[(1,)](x, y, LAYOUT=_ROW_PER_THREAD, EXPECT=_ROW_PER_THREAD)
    np.testing.assert_array_equal(y, 2 * x)


def test_another_layout_object_is_reported():
    # The same threads and rows, a thread's columns held in another register order.
    other = _ROW_PER_THREAD
    swapped = tlx.layout(shape=((32, 4), (2, 16)), stride=((32, 1024), (16, 1)))
    x = np.zeros((128, 32), np.float32)
    with pytest.raises(ww.CompilationError, match="the layout given is"):
        _pinned[(1,)](x, x.copy(), LAYOUT=other, EXPECT=swapped)


def test_buffers_compare_their_allocations():
    @ww.jit
    def two(out_ptr, SAME: tl.constexpr):
        a = tlx.local_alloc((64, 64), tl.float16, 1)
        b = tlx.local_alloc((64, 64), tl.float16, 1,
                            layout=None if SAME else tlx.swizzled_layout(3, 0, 6, order=[1, 0]))
        tlx.local_store(a[0], tl.zeros((64, 64), tl.float16))
        tlx.local_store(b[0], tl.zeros((64, 64), tl.float16))
        tlx.assert_same_layout(a[0], b[0])
        tl.store(out_ptr, 1)

    out = np.zeros(1, np.int32)
    two[(1,)](out, SAME=True)
    assert out[0] == 1
    with pytest.raises(ww.CompilationError, match="the other buffer has"):
        two[(1,)](out, SAME=False)


def test_bad_arguments_are_located_errors():
    @ww.jit
    def bad(x_ptr, WHAT: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, 32))
        if WHAT == 0:
            tlx.assert_same_layout(x, tl.zeros((16,), tl.float32))
        else:
            tlx.assert_same_layout(3, x)

    x = np.zeros(32, np.float32)
    with pytest.raises(ww.CompilationError, match="compares values of one kind and shape"):
        bad[(1,)](x, WHAT=0)
    with pytest.raises(ww.CompilationError, match="takes a tensor or a buffer"):
        bad[(1,)](x, WHAT=1)
