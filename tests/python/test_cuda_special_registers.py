"""`tl.extra.cuda.smid()` and `globaltimer()` (Triton's): one `mov` from %smid (int32) or
%globaltimer (int64) on the GPU; in the interpreter every program runs on SM 0 and the timer is
the host's steady clock in nanoseconds. Called directly, imported, or passed as a constexpr."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave.language.extra.cuda import globaltimer, smid

pytest.importorskip("warpweave._native")


@ww.jit
def store_sm(Out, get_smid: tl.constexpr):
    tl.store(Out + tl.program_id(0), get_smid())


@ww.jit
def elapsed(Out, Sm):
    t0 = tl.extra.cuda.globaltimer()
    s = smid()
    t1 = globaltimer()
    tl.store(Out + tl.program_id(0), t1 - t0)
    tl.store(Sm + tl.program_id(0), s)


def test_interpreter_runs_every_program_on_sm_0_with_a_monotonic_timer():
    out = np.full(16, 7, np.int32)
    store_sm[(16,)](out, tl.extra.cuda.smid)
    assert out.tolist() == [0] * 16
    dt, sm = np.full(4, -1, np.int64), np.full(4, -1, np.int32)
    elapsed[(4,)](dt, sm)
    assert (dt >= 0).all() and sm.tolist() == [0] * 4


def test_ptx_reads_the_special_registers_once_each(ptxas):
    out = np.zeros(16, np.int32)
    values = store_sm.bind((out, tl.extra.cuda.smid), {})
    ptx = store_sm.compile_for(values, False, (4, 1, 1), target="sm_90a").kernel.ptx
    assert ptx.count("%smid") == 1  # Triton's test_smid checks the same
    ptxas(ptx, "sm_90a")
    dt, sm = np.zeros(4, np.int64), np.zeros(4, np.int32)
    values = elapsed.bind((dt, sm), {})
    ptx = elapsed.compile_for(values, False, (4, 1, 1), target="sm_90a").kernel.ptx
    assert ptx.count("mov.u64") >= 2 and ptx.count("%globaltimer") == 2  # two readings
    assert "mov.u32" in ptx and "%smid" in ptx
    ptxas(ptx, "sm_90a")


def test_called_from_python_they_say_where_they_belong():
    with pytest.raises(RuntimeError, match="kernel code only"):
        smid()
    with pytest.raises(RuntimeError, match="kernel code only"):
        tl.extra.cuda.gdc_wait()


@ww.jit
def fill_threads(Out, get_num_threads: tl.constexpr):
    n: tl.constexpr = get_num_threads()
    tl.store(Out + tl.arange(0, n), tl.full((n,), tl.extra.cuda.num_warps(), tl.int32))


@pytest.mark.parametrize("warps", [1, 4, 8])
def test_num_threads_and_num_warps_are_compile_time_values(warps):
    # Triton's test_num_threads: tl.extra.cuda.num_threads passed as a constexpr function, its
    # value a tl.arange bound.
    out = np.zeros(512, np.int32)
    fill_threads[(1,)](out, get_num_threads=tl.extra.cuda.num_threads, num_warps=warps)
    assert (out[:32 * warps] == warps).all() and (out[32 * warps:] == 0).all()
