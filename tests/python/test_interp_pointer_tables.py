"""Pointers read from memory in the interpreter (issue 17): a kernel that loads its tensors'
addresses from a table (Triton's grouped GEMM tutorial passes `torch.tensor([a.data_ptr(), ...])`)
reaches the live host memory behind them, as Triton's interpreter does, and every such access is
still checked against the allocation that holds it."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

pytest.importorskip("warpweave._native")


@ww.jit
def _gather_rows(table_ptr, sizes_ptr, out_ptr, BLOCK: tl.constexpr):
    g = tl.program_id(0)
    src = tl.load(table_ptr + g).to(tl.pointer_type(tl.float32))
    n = tl.load(sizes_ptr + g)
    offs = tl.arange(0, BLOCK)
    v = tl.load(src + offs, mask=offs < n, other=-1.0)
    tl.store(out_ptr + g * BLOCK + offs, v)


@ww.jit
def _scale_through_table(table_ptr, sizes_ptr, factor, BLOCK: tl.constexpr):
    g = tl.program_id(0)
    dst = tl.load(table_ptr + g).to(tl.pointer_type(tl.float32))
    n = tl.load(sizes_ptr + g)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(dst + offs, mask=m) * factor, mask=m)


@ww.jit
def _grouped_matmul(a_ptrs, b_ptrs, c_ptrs, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    g = tl.program_id(0)
    a = tl.load(a_ptrs + g).to(tl.pointer_type(tl.float32))
    b = tl.load(b_ptrs + g).to(tl.pointer_type(tl.float32))
    c = tl.load(c_ptrs + g).to(tl.pointer_type(tl.float32))
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    rk = tl.arange(0, K)
    x = tl.load(a + rm * K + rk[None, :])
    y = tl.load(b + rk[:, None] * N + rn)
    tl.store(c + rm * N + rn, tl.dot(x, y, input_precision="ieee"))


def test_numpy_arrays_named_by_a_table_are_read():
    rng = np.random.default_rng(0)
    rows = [rng.standard_normal(n).astype(np.float32) for n in (5, 16, 1)]
    table = np.array([r.ctypes.data for r in rows], dtype=np.int64)
    sizes = np.array([r.size for r in rows], dtype=np.int32)
    out = np.zeros((3, 16), dtype=np.float32)
    _gather_rows[(3,)](table, sizes, out, BLOCK=16)
    for g, r in enumerate(rows):
        np.testing.assert_array_equal(out[g, :r.size], r)
        assert (out[g, r.size:] == -1.0).all()


def test_stores_through_a_table_land_in_each_array():
    rows = [np.arange(n, dtype=np.float32) + 1 for n in (3, 8)]
    table = np.array([r.ctypes.data for r in rows], dtype=np.int64)
    sizes = np.array([3, 8], dtype=np.int32)
    _scale_through_table[(2,)](table, sizes, 2.5, BLOCK=8)
    np.testing.assert_array_equal(rows[0], np.array([2.5, 5, 7.5], dtype=np.float32))
    np.testing.assert_array_equal(rows[1], (np.arange(8, dtype=np.float32) + 1) * 2.5)


def test_torch_grouped_matmul_through_pointer_tables(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    gen = torch.Generator().manual_seed(1)
    a = [torch.randn(16, 16, generator=gen) for _ in range(3)]
    b = [torch.randn(16, 16, generator=gen) for _ in range(3)]
    c = [torch.zeros(16, 16) for _ in range(3)]
    table = lambda ts: torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64)
    _grouped_matmul[(3,)](table(a), table(b), table(c), M=16, N=16, K=16)
    for x, y, z in zip(a, b, c):
        torch.testing.assert_close(z, x @ y, atol=1e-4, rtol=1e-4)


def test_torch_views_reach_their_whole_storage(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    base = torch.arange(32, dtype=torch.float32)
    view = base[8:]  # its data_ptr lies inside base's storage
    table = torch.tensor([view.data_ptr()], dtype=torch.int64)
    out = torch.zeros(16)
    _gather_rows[(1,)](table, torch.tensor([16], dtype=torch.int32), out, BLOCK=16)
    torch.testing.assert_close(out, base[8:24])


def test_reading_past_the_allocation_a_table_names_is_a_fault():
    row = np.arange(4, dtype=np.float32)
    table = np.array([row.ctypes.data], dtype=np.int64)
    sizes = np.array([16], dtype=np.int32)  # the kernel believes 16 elements are there
    out = np.zeros(16, dtype=np.float32)
    with pytest.raises(ww.InterpreterError) as e:
        _gather_rows[(1,)](table, sizes, out, BLOCK=16)
    msg = str(e.value)
    assert "(0 bytes past the end of the host allocation at 0x%x (16 bytes)" % row.ctypes.data in msg
    assert "element [4]" in msg
    assert "test_interp_pointer_tables.py:%d:" % (_gather_rows.fn.__code__.co_firstlineno + 6) in msg


def test_an_access_straddling_the_end_of_a_table_named_allocation_is_a_fault():
    buf = np.zeros(3, dtype=np.int16)  # 6 bytes: a float32 at byte 4 would cross its end
    table = np.array([buf.ctypes.data + 4], dtype=np.int64)
    out = np.zeros(16, dtype=np.float32)
    with pytest.raises(ww.InterpreterError, match="out-of-bounds load of 4 bytes at offset 4 past "
                       "the end of the host allocation at 0x[0-9a-f]+ .6 bytes., reached through an "
                       "address the kernel read"):
        _gather_rows[(1,)](table, np.array([1], dtype=np.int32), out, BLOCK=16)


def test_storing_into_a_read_only_array_through_a_table_is_a_fault():
    row = np.arange(4, dtype=np.float32)
    row.flags.writeable = False
    table = np.array([row.ctypes.data], dtype=np.int64)
    with pytest.raises(ww.InterpreterError, match="store of 4 bytes at offset 0 into the read-only "
                       "host allocation"):
        _scale_through_table[(1,)](table, np.array([4], dtype=np.int32), 2.0, BLOCK=4)
    np.testing.assert_array_equal(row, np.arange(4, dtype=np.float32))


def test_an_address_no_live_memory_holds_is_still_refused():
    table = np.array([16], dtype=np.int64)  # address 16: nothing lives there
    out = np.zeros(16, dtype=np.float32)
    with pytest.raises(ww.InterpreterError, match="not derived from any buffer argument"):
        _gather_rows[(1,)](table, np.array([1], dtype=np.int32), out, BLOCK=16)


@ww.jit
def _copy_in_tasks(table_ptr, out_ptr, BLOCK: tl.constexpr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            src = tl.load(table_ptr).to(tl.pointer_type(tl.float32))
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(src + offs))
        with tlx.async_task(num_warps=4):
            src = tl.load(table_ptr + 1).to(tl.pointer_type(tl.float32))
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + BLOCK + offs, tl.load(src + offs))


def test_async_tasks_reach_memory_named_by_a_table():
    # The interpreter runs each task as an agent on a thread of its own; the lookup still sees
    # the arrays this function holds.
    a = np.arange(16, dtype=np.float32)
    b = np.arange(16, 32, dtype=np.float32)
    table = np.array([a.ctypes.data, b.ctypes.data], dtype=np.int64)
    out = np.zeros(32, dtype=np.float32)
    _copy_in_tasks[(1,)](table, out, BLOCK=16)
    np.testing.assert_array_equal(out, np.arange(32, dtype=np.float32))
