"""tlx.thread_id() in the CPU interpreter: one value per thread of the agent, ops on it run once
per thread, and a branch or loop on it runs thread by thread. Stores there write what the GPU
writes: a tensor's elements from the thread that holds each, a scalar from the first thread only
(codegen predicates a scalar store on it, as Triton does; checked in the PTX below). Ops the
interpreter cannot run one thread at a time are refused at their line. A named barrier counted
in fewer threads than the agent has completes phase by phase, as bar.sync does."""

import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


def marked_line(marker):
    """The line of this file that carries `# MARK marker`."""
    with open(__file__) as f:
        return next(i for i, t in enumerate(f, 1) if f"# MARK {marker}" in t)


@ww.jit
def store_from_thread(out_ptr, value, WHO: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tid = tlx.thread_id(0)
    if tid == WHO:
        tl.store(out_ptr + offs, value)


@pytest.mark.parametrize("who", [0, 5, 31])
def test_a_thread_stores_only_the_element_it_holds(who):
    # One warp, 32 elements: each thread holds one.
    out = np.zeros(32, np.int32)
    store_from_thread[(1,)](out, 42, WHO=who, BLOCK=32, num_warps=1)
    expected = np.zeros(32, np.int32)
    expected[who] = 42
    np.testing.assert_array_equal(out, expected)


@ww.jit
def scalar_from_thread(out_ptr, WHO: tl.constexpr):
    if tlx.thread_id(0) == WHO:
        tl.store(out_ptr, 7)


def test_a_scalar_store_is_the_first_threads():
    out = np.zeros(1, np.int32)
    scalar_from_thread[(1,)](out, WHO=0)
    assert out[0] == 7
    out[0] = 0
    scalar_from_thread[(1,)](out, WHO=3)
    assert out[0] == 0  # thread 3's copy of a scalar store is masked off on the GPU too


def test_codegen_masks_a_scalar_store_to_the_first_thread():
    from warpweave.backends.compiler import GPUTarget

    src = ww.compiler.ASTSource(scalar_from_thread, signature={"out_ptr": "*i32"},
                                constexprs={"WHO": 3})
    lines = [x.strip() for x in
             ww.compiler.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"].splitlines()]
    # The branch on thread 3, and inside it the store guarded by thread 0.
    assert any(x.startswith("setp.eq.s32") and x.endswith(", 3;") for x in lines), lines
    store = next(x for x in lines if "st.global" in x)
    guard = store.split()[0].lstrip("@")
    assert any(x.startswith(f"setp.eq.u32 {guard},") and x.endswith(", 0;") for x in lines), lines


@ww.jit
def ballot(out_ptr, LIMIT: tl.constexpr):
    tid = tlx.thread_id(0)
    b = tlx.vote_ballot_sync(0xFFFFFFFF, tid < LIMIT)
    if tid == 0:
        tl.store(out_ptr, b)
    if tid == 32:
        tl.store(out_ptr + 1, b)


def test_a_ballot_of_a_per_thread_predicate_is_each_warps():
    out = np.zeros(2, np.int32)
    ballot[(1,)](out, LIMIT=16, num_warps=1)
    assert out[0] == 0x0000FFFF and out[1] == 0
    out[:] = 0
    # Warp 1's ballot differs from warp 0's; thread 32's scalar store is masked off.
    ballot[(1,)](out, LIMIT=40, num_warps=4)
    assert out[0] == -1 and out[1] == 0


@ww.jit
def per_thread_trips(out_ptr, BLOCK: tl.constexpr):
    tid = tlx.thread_id(0)
    acc = 0
    for i in range(tid % 4):
        acc += i + 1
    vals = tl.full([BLOCK], 0, tl.int32) + acc
    tl.store(out_ptr + tl.arange(0, BLOCK), vals)


def test_loops_run_each_threads_own_trip_count():
    out = np.full(32, -1, np.int32)
    per_thread_trips[(1,)](out, BLOCK=32, num_warps=1)
    # Thread t adds 1 + ... + (t % 4); each element comes from the thread that holds it.
    np.testing.assert_array_equal(out, [(t % 4) * (t % 4 + 1) // 2 for t in range(32)])


@ww.jit
def task_ids(out_ptr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            if tlx.thread_id(0) == 0:
                tl.store(out_ptr, 11)
        with tlx.async_task(num_warps=1):
            tid = tlx.thread_id(0)
            if tid == 0:
                tl.store(out_ptr + 1, 22)
            tl.store(out_ptr + 2, tid + 100)


def test_a_tasks_thread_ids_count_from_its_first_thread():
    out = np.zeros(3, np.int32)
    task_ids[(1,)](out, num_warps=4)
    np.testing.assert_array_equal(out, [11, 22, 100])


@ww.jit
def arrive_from_thread(out_ptr):
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    if tlx.thread_id(0) == 0:
        tlx.barrier_arrive(tlx.local_view(bar, 0))  # MARK arrive
    tl.store(out_ptr, 1)


def test_a_barrier_under_a_thread_condition_is_a_hang_reported_at_its_line():
    with pytest.raises(ww.InterpreterError) as e:
        arrive_from_thread[(1,)](np.zeros(1, np.int32))
    text = str(e.value)
    assert f"test_interp_thread_id.py:{marked_line('arrive')}:" in text, text
    # Codegen syncs the CTA's threads before the arrive: the 127 others never come (a GPU hang).
    assert "'barrier_arrive' under a branch or loop on a value computed from tlx.thread_id(): " \
           "on the GPU it first waits at a barrier of all 128 threads" in text, text
    assert "thread 0" in text, text


@ww.jit
def thread_id_in_a_while(out_ptr, BLOCK: tl.constexpr):
    tid = tlx.thread_id(0)
    i = 0
    steps = 0
    while i < tid % 5:
        i += 1
        steps += 2
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.full([BLOCK], 0, tl.int32) + steps)


def test_a_while_condition_on_a_thread_id_runs_each_thread_on():
    out = np.full(32, -1, np.int32)
    thread_id_in_a_while[(1,)](out, BLOCK=32, num_warps=1)
    np.testing.assert_array_equal(out, [2 * (t % 5) for t in range(32)])


@ww.jit
def local_store_from_thread(out_ptr):
    buf = tlx.local_alloc((32,), tl.int32, 1)
    if tlx.thread_id(0) < 16:
        tlx.local_store(tlx.local_view(buf, 0), tl.full([32], 1, tl.int32))  # MARK local_store
    tl.store(out_ptr + tl.arange(0, 32), tlx.local_load(tlx.local_view(buf, 0)))


def test_shared_memory_under_a_thread_condition_is_a_hang_reported_at_its_line():
    with pytest.raises(ww.InterpreterError) as e:
        local_store_from_thread[(1,)](np.zeros(32, np.int32), num_warps=1)
    text = str(e.value)
    assert f"test_interp_thread_id.py:{marked_line('local_store')}:" in text, text
    assert "'local_store' under a branch or loop on a value computed from tlx.thread_id(): on " \
           "the GPU it first waits at a barrier of all 32 threads" in text, text


@ww.jit
def reduce_from_thread(x_ptr, out_ptr):
    if tlx.thread_id(0) == 0:
        tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, 32))))  # MARK sum


def test_a_collective_op_under_a_thread_condition_is_refused_at_its_line():
    with pytest.raises(ww.InterpreterError) as e:
        reduce_from_thread[(1,)](np.ones(32, np.int32), np.zeros(1, np.int32), num_warps=1)
    text = str(e.value)
    assert f"test_interp_thread_id.py:{marked_line('sum')}:" in text, text
    assert "'reduce' in code that runs one thread at a time" in text, text


@ww.jit
def warp_barrier_in_four_warps(out_ptr):
    if tlx.thread_id(0) % 32 == 0:
        tl.store(out_ptr + 1, 99)
    tlx.named_barrier_wait(14, 32)
    if tlx.thread_id(0) % 32 == 0:
        tl.store(out_ptr, 5)


def test_a_named_barrier_of_one_warp_completes_in_each_warp():
    out = np.zeros(2, np.int32)
    warp_barrier_in_four_warps[(1,)](out, num_warps=4)
    np.testing.assert_array_equal(out, [5, 99])
