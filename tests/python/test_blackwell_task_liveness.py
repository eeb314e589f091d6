"""What stays live around warp-specialized tasks on sm_100a, and libdevice's fast division (issue
19: the spills left in TLX's Blackwell attention tutorials at their setmaxnreg budgets).

- Each warp runs one task, and leaves it for the join after all tasks: falling through to the
  next task's range check, a value computed before the tasks and read by a later task was live
  across every earlier task's body, within that task's budget (TLX's 2-CTA attention forward
  spilled the persistent tile id in its 24-register MMA task, 64 bytes).
- A task's tensor-memory buffer addresses (the allocation's base plus a column) are computed in
  the task, so the base is the only tensor-memory register the tasks share (the 2-CTA attention
  backward had spilled three held addresses).
- The scalars computed before the tasks from launch values only (parameters, constants, program
  ids, scalar arithmetic) are computed again in each task that reads them (the mxfp8 attention
  forward had spilled num_pid_m, a cdiv of N_CTX, for its 24-register tasks).
- libdevice.fast_dividef is div.approx.ftz.f32, as Triton links libdevice (__nv_fast_fdividef,
  flush-to-zero); it had been IEEE div.rn.f32, whose slow path ptxas keeps per element
  (blackwell-cross-attention's SiLU task: 60 bytes of spills at registers=152).
Checked with ptxas for sm_100a; the interpreter's values against NumPy."""
import importlib
import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx
from warpweave.language.extra.libdevice import fast_dividef

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


@ww.jit
def shared_preamble(x_ptr, y_ptr, n, REGS: tl.constexpr):
    # b0..b5 are per thread and read by the default task and by the last task; the middle task
    # holds 14 per-thread values through its loop at REGS registers.
    pid = tl.program_id(0) + tlx.thread_id(0)
    b0 = pid * n + 1
    b1 = pid * n + 3
    b2 = pid * 7 + n
    b3 = pid * 11 + n
    b4 = (pid + 5) * n
    b5 = (pid + 9) * n
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(y_ptr + 192 + tlx.thread_id(0), b0 + b1 + b2 + b3 + b4 + b5)
        with tlx.async_task(num_warps=1, registers=REGS):
            x = x_ptr + tlx.thread_id(0) * 16
            a0 = tl.load(x + 0)
            a1 = tl.load(x + 1)
            a2 = tl.load(x + 2)
            a3 = tl.load(x + 3)
            a4 = tl.load(x + 4)
            a5 = tl.load(x + 5)
            a6 = tl.load(x + 6)
            a7 = tl.load(x + 7)
            a8 = tl.load(x + 8)
            a9 = tl.load(x + 9)
            a10 = tl.load(x + 10)
            a11 = tl.load(x + 11)
            a12 = tl.load(x + 12)
            a13 = tl.load(x + 13)
            for i in range(0, n):
                a0, a1, a2, a3 = a1 * 3 + a13, a2 * 5 + a0, a3 * 7 + a1, a4 * 9 + a2
                a4, a5, a6, a7 = a5 * 3 + a3, a6 * 5 + a4, a7 * 7 + a5, a8 * 9 + a6
                a8, a9, a10, a11 = a9 * 3 + a7, a10 * 5 + a8, a11 * 7 + a9, a12 * 9 + a10
                a12, a13 = a13 * 3 + a11, a0 * 5 + a12 + i
            total = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13
            tl.store(y_ptr + 64 + tlx.thread_id(0), total)
        with tlx.async_task(num_warps=1, registers=REGS):
            tl.store(y_ptr + 128 + tlx.thread_id(0), b0 + b1 + b2 + b3 + b4 + b5)


def shared_preamble_ptx():
    x, y = np.zeros(32 * 16 + 16, np.int32), np.zeros(256, np.int32)
    values = shared_preamble.bind((x, y, 5), dict(REGS=24))
    return shared_preamble.compile_for(values, False, (4, 1, 1), target="sm_100a").kernel.ptx


def test_tasks_leave_for_the_join(requires_ptxas, ptxas):
    ptx = shared_preamble_ptx()
    join = re.findall(r"^\$(L_tasks_join_\d+):$", ptx, re.M)
    assert len(join) == 1, ptx
    # Three tasks and the idle warps' register release: each ends with the branch to the join.
    assert ptx.count(f"bra.uni ${join[0]};") == 4
    run = ptxas(ptx, arch="sm_100a", verbose=True)
    assert run.spill_bytes == 0, run.log
    # Falling through to the next task's check instead (as before) keeps b0..b5 live through
    # the middle task's loop, within its 24 registers.
    through = ptxas(ptx.replace(f"\tbra.uni ${join[0]};\n", ""), arch="sm_100a", verbose=True)
    assert through.spill_bytes > 0, through.log


@ww.jit
def tmem_in_tasks(x_ptr, y_ptr, n):
    a = tlx.local_alloc((128, 64), tl.float32, 2, tlx.storage_kind.tmem)
    b = tlx.local_alloc((128, 64), tl.float32, 2, tlx.storage_kind.tmem)
    bar = tlx.alloc_barriers(num_barriers=1)
    offs = tl.arange(0, 128)[:, None] * 64 + tl.arange(0, 64)[None, :]
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(0, n):
                tlx.local_store(a[i % 2], tl.load(x_ptr + offs))
                tlx.barrier_arrive(bar[0])
        with tlx.async_task(num_warps=4, registers=152):
            for i in range(0, n):
                tlx.barrier_wait(bar[0], i & 1)
                tlx.local_store(b[i % 2], tlx.local_load(a[i % 2]) * 2)
            tl.store(y_ptr + offs, tlx.local_load(b[0]))


def test_task_computes_its_tensor_memory_addresses():
    x, y = np.zeros((128, 64), np.float32), np.zeros((128, 64), np.float32)
    values = tmem_in_tasks.bind((x, y, 3), {})
    ptx = tmem_in_tasks.compile_for(values, False, (4, 1, 1), target="sm_100a").kernel.ptx
    base = re.search(r"ld\.shared\.b32 (%r\d+), \[%r\d+\];", ptx).group(1)
    tasks = ptx.index("setmaxnreg.dec.sync.aligned.u32 152;")
    # b's columns start at 128 (a's two [128, 64] fp32 buffers first): its address is the
    # base plus 128 in the task that uses it, and nowhere before the tasks.
    adds = [m.start() for m in re.finditer(rf"add\.u32 %r\d+, {base}, 128;", ptx)]
    assert adds and all(at > tasks for at in adds), ptx


@ww.jit
def launch_scalars(y_ptr, n_ctx, n):
    tiles = tl.cdiv(n_ctx, 256)
    first = tl.program_id(0) * tiles
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(y_ptr + tlx.thread_id(0), first)
        with tlx.async_task(num_warps=1, registers=24):
            acc = tlx.thread_id(0)
            for i in range(0, n):
                acc = acc * 3 + first + i
            tl.store(y_ptr + 128 + tlx.thread_id(0), acc + tiles)


def test_tasks_compute_launch_scalars_again(requires_ptxas, ptxas):
    values = launch_scalars.bind((np.zeros(256, np.int32), 1000, 4), {})
    ptx = launch_scalars.compile_for(values, False, (4, 1, 1), target="sm_100a").kernel.ptx
    # cdiv(n_ctx, 256)'s last step and the program id: in both tasks, none before them.
    tasks = [m.start() for m in re.finditer(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32 (256|24);",
                                             ptx)]
    first_task = ptx.index("$L_task_end_")
    for pattern in (r"shr\.s32 %r\d+, %r\d+, 8;", r"mov\.u32 %r\d+, %ctaid\.x;"):
        found = [m.start() for m in re.finditer(pattern, ptx)]
        assert len(found) == 2 and min(found) > first_task, (pattern, ptx)
    assert len(tasks) == 3  # the idle warps' release, the default task, the 1-warp task
    assert ptxas(ptx, arch="sm_100a", verbose=True).spill_bytes == 0


@ww.jit
def fast_divide(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, fast_dividef(tl.load(x_ptr + offs), tl.load(y_ptr + offs)))


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_fast_dividef_is_approximate(target):
    x = np.zeros(128, np.float32)
    values = fast_divide.bind((x, x, x), dict(N=128))
    ptx = fast_divide.compile_for(values, False, (4, 1, 1), target=target).kernel.ptx
    assert "div.approx.ftz.f32" in ptx
    assert "div.rn" not in ptx and "div.full" not in ptx


def test_fast_dividef_interpreter(monkeypatch):
    # The interpreter divides with IEEE rounding (as folding does); the GPU's is within 2 ulp.
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(128).astype(np.float32)
    y = (rng.standard_normal(128) + 4).astype(np.float32)
    out = np.zeros(128, np.float32)
    fast_divide[(1,)](x, y, out, N=128)
    np.testing.assert_array_equal(out, x / y)
