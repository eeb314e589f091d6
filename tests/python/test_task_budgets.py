"""Register budgets of async tasks and barrier_wait phases through Python: the interpreter (NumPy
arrays) refuses what the compiler refuses, at the same source line, and reads a run-time phase by
its lowest bit as the PTX does; ww.compile gives the tutorials' budgets."""

import importlib
import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

N = 64


@ww.jit
def consumers(out_ptr, N: tl.constexpr, REGS: tl.constexpr):
    with tlx.async_tasks():  # MARK tasks
        with tlx.async_task("default"):
            tl.store(out_ptr + tl.arange(0, N), tl.full([N], 1, tl.int32))
        with tlx.async_task(num_warps=4, registers=REGS, replicate=2):
            r: tl.constexpr = tlx.async_task_replica_id()
            tl.store(out_ptr + (r + 1) * N + tl.arange(0, N), tl.full([N], r + 2, tl.int32))


@ww.jit
def seven_warps(out_ptr, N: tl.constexpr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(out_ptr + tl.arange(0, N), tl.full([N], 1, tl.int32))
        with tlx.async_task(num_warps=7, replicate=2):  # MARK seven
            tl.store(out_ptr + N + tl.arange(0, N), tl.full([N], 2, tl.int32))


@ww.jit
def wait_phase(out_ptr, p, N: tl.constexpr):
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_arrive(bars[0])  # completes phase 0
    tlx.barrier_wait(bars[0], p)  # MARK wait
    tl.store(out_ptr + tl.arange(0, N), tl.full([N], 1, tl.int32))


@ww.jit
def wait_seven(out_ptr, N: tl.constexpr):
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_arrive(bars[0])
    tlx.barrier_wait(bars[0], 7)  # MARK seven phase
    tl.store(out_ptr + tl.arange(0, N), tl.full([N], 1, tl.int32))


def line(marker):
    with open(__file__) as f:
        return next(i for i, text in enumerate(f, 1) if f"# MARK {marker}" in text)


def where(marker):
    return f"test_task_budgets.py:{line(marker)}:"


def test_budgets_that_fit_run_in_the_interpreter():
    out = np.zeros(3 * N, np.int32)
    consumers[(1,)](out, N=N, REGS=232)
    assert list(out[::N]) == [1, 2, 3]


def test_budgets_that_cannot_fit_are_refused_by_the_interpreter_at_the_block():
    with pytest.raises(ww.CompilationError) as info:
        consumers[(1,)](np.zeros(3 * N, np.int32), N=N, REGS=248)
    text = str(info.value)
    assert where("tasks") in text, text
    assert "register budgets do not fit in the SM's 65,536 registers" in text, text
    assert "async task 1 replica 1: 4 warps x 248" in text, text


def test_tutorial_budgets_in_ptx():
    # The producer without a budget gets what the two 232-register consumers leave: 40.
    files = [(__file__, open(__file__).read())]
    k = native_loader.native().compile(files, "consumers", f"out_ptr:*i32:16, N={N}, REGS=232",
                                       {}, target="sm_90a", num_warps=4, stage="ptx")
    assert ".maxnreg 168" in k.ptx
    assert k.ptx.count("setmaxnreg.dec.sync.aligned.u32 40;") == 1
    assert k.ptx.count("setmaxnreg.inc.sync.aligned.u32 232;") == 2


def test_task_warps_must_be_a_power_of_two_in_the_interpreter():
    with pytest.raises(ww.CompilationError) as info:
        seven_warps[(1,)](np.zeros(2 * N, np.int32), N=N)
    text = str(info.value)
    assert where("seven") in text and "num_warps=7 is not supported" in text, text


@pytest.mark.parametrize("p", [0, 2, -2])
def test_run_time_phase_counts_by_its_lowest_bit(p):
    out = np.zeros(N, np.int32)
    wait_phase[(1,)](out, p, N=N)  # parity 0: phase 0 has completed
    assert (out == 1).all()


@pytest.mark.parametrize("p", [1, 3])
def test_run_time_odd_phase_waits_for_a_phase_that_never_completes(p):
    with pytest.raises(ww.InterpreterError, match="deadlock|never"):
        wait_phase[(1,)](np.zeros(N, np.int32), p, N=N)


def test_constant_phase_other_than_0_or_1_is_an_error():
    with pytest.raises(ww.CompilationError) as info:
        wait_seven[(1,)](np.zeros(N, np.int32), N=N)
    text = str(info.value)
    assert where("seven phase") in text, text
    assert re.search(r"phase is the parity of the phase to wait for: 0 or 1, got 7", text), text
