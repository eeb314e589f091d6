"""'with tlx.async_tasks():' regions whose tasks are chosen by compile-time 'if's (tlx-unit-b,
issue 16): the conditions are resolved before the tasks are counted, so each branch may hold its
own default task; a run-time condition there is a located error."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def _chosen_tasks(x_ptr, out_ptr, side_ptr, N: tl.constexpr, DOUBLE: tl.constexpr,
                  SIDE: tl.constexpr):
    offs = tl.arange(0, N)
    with tlx.async_tasks():
        if DOUBLE:
            with tlx.async_task("default"):
                tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)
        else:
            with tlx.async_task("default"):
                tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1)
        if SIDE:
            with tlx.async_task(num_warps=1, registers=96):
                tl.store(side_ptr + offs, tl.load(x_ptr + offs) - 1)


@pytest.mark.parametrize("double", [True, False])
@pytest.mark.parametrize("side", [True, False])
def test_constexpr_if_selects_tasks(double, side):
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    sentinel = np.full_like(x, -7.0)
    k = _chosen_tasks[(1,)](x, out, sentinel, N=64, DOUBLE=double, SIDE=side)
    np.testing.assert_array_equal(out, x * 2 if double else x + 1)
    np.testing.assert_array_equal(sentinel, x - 1 if side else np.full_like(x, -7.0))
    assert k.asm["tile_ir"].count("async_task") - k.asm["tile_ir"].count("async_tasks") == (
        2 if side else 1)


def test_two_defaults_left_by_constexpr_ifs_are_still_refused():
    @ww.jit
    def both(out, A: tl.constexpr):
        with tlx.async_tasks():
            if A:
                with tlx.async_task("default"):
                    tl.store(out, 1)
            with tlx.async_task("default"):
                tl.store(out, 2)

    with pytest.raises(ww.CompilationError, match="two default async tasks"):
        both[(1,)](np.zeros(1, np.int32), A=True)


def test_runtime_if_inside_async_tasks_is_a_located_error():
    @ww.jit
    def runtime_if(out, flag):
        with tlx.async_tasks():
            with tlx.async_task("default"):
                tl.store(out, 1)
            if flag:
                with tlx.async_task(num_warps=1):
                    tl.store(out, 2)

    with pytest.raises(ww.CompilationError, match=r"test_tlx_task_regions\.py:\d+:\d+: .*must be a "
                                                  r"constexpr"):
        runtime_if[(1,)](np.zeros(1, np.int32), 1)


@ww.jit
def _hinted(out_ptr, EXCLUSIVE: tl.constexpr, NS: tl.constexpr):
    with tlx.async_tasks(exclusive=EXCLUSIVE, no_ending_cluster_sync=True,
                         mbarrier_try_wait_suspend_ns=NS):
        with tlx.async_task("default"):
            tl.store(out_ptr, 1)
        with tlx.async_task(num_warps=1):
            tl.store(out_ptr + 1, 2)


@pytest.mark.parametrize("exclusive", [True, False])
def test_async_tasks_lowering_hints_are_accepted(exclusive):
    out = np.zeros(2, np.int32)
    _hinted[(1,)](out, EXCLUSIVE=exclusive, NS=1000)
    assert out.tolist() == [1, 2]


def test_async_tasks_hint_errors_are_located():
    with pytest.raises(ww.CompilationError, match=r"\.py:\d+:\d+: .*non-negative integer"):
        _hinted[(1,)](np.zeros(2, np.int32), EXCLUSIVE=False, NS=-1)

    @ww.jit
    def unknown_option(out_ptr):
        with tlx.async_tasks(overlap=True):
            with tlx.async_task("default"):
                tl.store(out_ptr, 1)

    with pytest.raises(ww.CompilationError, match="overlap"):
        unknown_option[(1,)](np.zeros(1, np.int32))
