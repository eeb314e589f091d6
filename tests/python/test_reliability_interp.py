"""Reliability of the interpreter's host buffers (issue 20): every access is checked against the
memory that really lies behind a NumPy argument (the buffer its .base chain ends in, not the
shape a view claims), so an np.lib.stride_tricks.as_strided view reaching past its buffer is an
InterpreterError naming the argument and the kernel's line instead of a segfault; and read-only
arrays (flags.writeable False, or views of immutable bytes) are never written: refused up front
with a ValueError naming the argument when the kernel may store to them, and refused by the
interpreter itself should a store reach one anyway."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided, sliding_window_view

import warpweave as ww
import warpweave.language as tl

native = pytest.importorskip("warpweave._native")

HERE = os.path.abspath(__file__)


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)


@ww.jit
def gather(x_ptr, out_ptr, stride, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride))


@ww.jit
def scatter(x_ptr, out_ptr, stride, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs * stride, tl.load(x_ptr + offs))


@ww.jit
def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@ww.jit
def copy_then_fill(x_ptr, out_ptr, fill_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))
    tl.store(fill_ptr + offs, tl.zeros([BLOCK], tl.float32) + 7.0)


@ww.jit
def count_into(x_ptr, counter_ptr, BLOCK: tl.constexpr):
    tl.atomic_add(counter_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK))))


@ww.jit
def strided_loop(in_ptr, out_ptr, n_tiles, BLOCK: tl.constexpr):
    # Both pointers are loop-carried: only out_ptr's is stored through.
    ip = in_ptr + tl.arange(0, BLOCK)
    op = out_ptr + tl.arange(0, BLOCK)
    for _ in range(n_tiles):
        tl.store(op, tl.load(ip) + 1.0)
        ip += BLOCK
        op += BLOCK


@ww.jit
def store_to_either(a_ptr, b_ptr, pick_a, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    target = tl.where(pick_a != 0, a_ptr, b_ptr)
    tl.store(target + offs, tl.zeros([BLOCK], tl.float32))


@ww.jit
def desc_copy(in_desc, out_desc, BLOCK: tl.constexpr):
    out_desc.store([0, 0], in_desc.load([0, 0]))


def run_isolated(body: str):
    """Runs `body` after this module's kernels in a fresh process (an access outside a buffer
    used to crash the process); returns (exit code, stderr)."""
    code = "import sys\nsys.path.insert(0, %r)\nfrom test_reliability_interp import *\n" % (
        os.path.dirname(HERE)) + textwrap.dedent(body)
    env = dict(os.environ, WARPWEAVE_CACHE_DISABLE="1")
    env.pop("WARPWEAVE_INTERPRET", None)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    return r.returncode, r.stdout, r.stderr


def line_of(text: str) -> int:
    with open(HERE) as f:
        for i, line in enumerate(f, 1):
            if text in line:
                return i
    raise AssertionError(text)


# ---- views past their buffers ----------------------------------------------------------------


def test_a_strided_view_read_past_its_buffer_is_an_error_not_a_crash():
    rc, out, err = run_isolated('''
        x = np.arange(16, dtype=np.float32)
        view = as_strided(x, shape=(64,), strides=(4 << 22,))  # 1 GiB past 64 bytes
        out = np.zeros(64, np.float32)
        try:
            gather[(1,)](view, out, 1 << 22, BLOCK=64)
        except native.InterpreterError as e:
            print("ERROR", e)
        print("out untouched", not out.any())
    ''')
    assert rc == 0, err
    load_line = line_of("tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride))")
    assert f"test_reliability_interp.py:{load_line}:" in out
    assert "out-of-bounds load of 4 bytes at offset 16777216 past the end of argument " \
           "'x_ptr' (64 bytes)" in out
    assert "out untouched True" in out


def test_a_strided_view_written_past_its_buffer_is_an_error_not_a_crash():
    rc, out, err = run_isolated('''
        x = np.zeros(16, dtype=np.float32)
        view = as_strided(x, shape=(64,), strides=(4 << 22,))
        try:
            scatter[(1,)](np.ones(64, np.float32), view, 1 << 22, BLOCK=64)
        except native.InterpreterError as e:
            print("ERROR", e)
    ''')
    assert rc == 0, err
    store_line = line_of("tl.store(out_ptr + offs * stride, tl.load(x_ptr + offs))")
    assert f"test_reliability_interp.py:{store_line}:" in out
    assert "out-of-bounds store of 4 bytes at offset 16777216 past the end of argument " \
           "'out_ptr' (64 bytes)" in out


def test_a_view_of_a_slice_is_bounded_by_the_allocation_behind_the_slice():
    base = np.arange(32, dtype=np.float32)
    middle = base[8:16]
    view = as_strided(middle, shape=(32,), strides=(4,))  # claims 32 elements from index 8
    out = np.zeros(32, np.float32)
    copy[(1,)](view, out, 24, BLOCK=32)  # the 24 that exist
    np.testing.assert_array_equal(out[:24], base[8:])
    with pytest.raises(native.InterpreterError, match=r"past the end of argument 'x_ptr' "
                                                      r"\(96 bytes\)"):
        copy[(1,)](view, out, 25, BLOCK=32)


def test_views_inside_their_buffer_still_index_as_on_the_gpu():
    x = np.arange(64, dtype=np.float32)
    windows = sliding_window_view(x, 8)  # (57, 8), strides (4, 4): overlapping rows
    out = np.zeros(8, np.float32)
    gather[(1,)](windows[10], out, 1, BLOCK=8)
    np.testing.assert_array_equal(out, x[10:18])
    col = x.reshape(8, 8)[:, 3]
    gather[(1,)](col, out, 8, BLOCK=8)  # indexes the column through the base's rows
    np.testing.assert_array_equal(out, x.reshape(8, 8)[:, 3])


def test_views_of_bytearray_memoryview_and_mmap_are_bounded_by_them():
    import mmap

    for raw in (bytearray(64), memoryview(bytearray(128))[32:96], mmap.mmap(-1, 64)):
        arr = np.frombuffer(raw, np.float32)
        assert arr.flags.writeable
        view = as_strided(arr, shape=(32,), strides=(4,))
        out = np.zeros(32, np.float32)
        copy[(1,)](view, out, 16, BLOCK=32)
        with pytest.raises(native.InterpreterError, match="past the end of argument 'x_ptr'"):
            copy[(1,)](view, out, 17, BLOCK=32)
        copy[(1,)](np.full(16, 2.0, np.float32), arr, 16, BLOCK=32)
        assert np.all(arr == 2.0)


# ---- read-only arrays ------------------------------------------------------------------------


def test_a_read_only_array_is_refused_before_anything_is_written():
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    frozen = np.zeros(16, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 'fill_ptr' of copy_then_fill is a read-only "
                                         r"array .* but the kernel may store to it"):
        copy_then_fill[(1,)](x, out, frozen, BLOCK=16)
    assert not out.any() and not frozen.any()  # refused before the run: out was not written


def test_an_array_over_immutable_bytes_is_never_written():
    data = bytes(64)
    arr = np.frombuffer(data, np.float32)
    with pytest.raises(ValueError, match=r"argument 'out_ptr' of copy is a read-only array"):
        copy[(1,)](np.ones(16, np.float32), arr, 16, BLOCK=16)
    view = as_strided(arr, shape=(16,), strides=(4,))  # as_strided says writeable: the bytes do not
    with pytest.raises(ValueError, match=r"argument 'out_ptr' of copy is a read-only array"):
        copy[(1,)](np.ones(16, np.float32), view, 16, BLOCK=16)
    assert data == bytes(64)


def test_atomics_count_as_writes():
    counter = np.zeros(1, np.float32)
    counter.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'counter_ptr' of count_into"):
        count_into[(1,)](np.ones(16, np.float32), counter, BLOCK=16)


def test_read_only_inputs_are_fine():
    data = np.arange(16, dtype=np.float32).tobytes()
    x = np.frombuffer(data, np.float32)
    out = np.zeros(16, np.float32)
    copy[(1,)](x, out, 16, BLOCK=16)
    np.testing.assert_array_equal(out, np.arange(16))
    # Loop-carried pointers keep their origins apart: only out_ptr is stored through.
    src = np.arange(32, dtype=np.float32)
    src.flags.writeable = False
    dst = np.zeros(32, np.float32)
    strided_loop[(1,)](src, dst, 2, BLOCK=16)
    np.testing.assert_array_equal(dst, np.arange(32) + 1)
    assert strided_loop.cache[next(iter(strided_loop.cache))].kernel.written_params == ["out_ptr"]


def test_a_pointer_chosen_at_run_time_may_be_either():
    a = np.ones(16, np.float32)
    b = np.ones(16, np.float32)
    b.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'b_ptr' of store_to_either"):
        store_to_either[(1,)](a, b, 1, BLOCK=16)  # stores to a only, but b could be chosen
    assert a.all()


def test_descriptors_over_read_only_arrays():
    src = np.arange(64, dtype=np.float32).reshape(8, 8)
    src.flags.writeable = False
    dst = np.zeros((8, 8), np.float32)
    desc_copy[(1,)](ww.TensorDescriptor(src, [8, 8], [8, 1], [8, 8]),
                    ww.TensorDescriptor(dst, [8, 8], [8, 1], [8, 8]), BLOCK=8)
    np.testing.assert_array_equal(dst, src)
    with pytest.raises(ValueError, match=r"argument 'out_desc' of desc_copy is a TensorDescriptor "
                                         r"over a read-only array"):
        desc_copy[(1,)](ww.TensorDescriptor(dst, [8, 8], [8, 1], [8, 8]),
                        ww.TensorDescriptor(src, [8, 8], [8, 1], [8, 8]), BLOCK=8)


def test_the_interpreter_itself_refuses_stores_to_read_only_buffers():
    out = np.zeros(16, np.float32)
    compiled = copy.warmup(np.ones(16, np.float32), out, 16, BLOCK=16)
    x = np.ones(16, np.float32)
    with pytest.raises(native.InterpreterError) as e:
        compiled.kernel.interpret((1, 1, 1), [(x.ctypes.data, 64), (out.ctypes.data, 64, False),
                                              16])
    store_line = line_of("tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask")
    assert f"test_reliability_interp.py:{store_line}:" in str(e.value)
    assert "store of 4 bytes at offset 0 into argument 'out_ptr', which is read-only" in \
        str(e.value)
    assert not out.any()
    compiled.kernel.interpret((1, 1, 1), [(x.ctypes.data, 64, False), (out.ctypes.data, 64, True),
                                          16])
    assert out.all()
