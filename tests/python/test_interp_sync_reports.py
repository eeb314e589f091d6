"""The synchronization checker names the cause, not only the symptom: a read that races because
its barrier_wait used the wrong parity names that wait; a wait that blocks forever on a missing
arrival names the barrier's arrival count and who has (and has not) arrived."""

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
def one_tile_copy(x_desc, out_ptr, BLOCK: tl.constexpr, PARITY: tl.constexpr):
    buf = tlx.local_alloc((BLOCK, BLOCK), tl.float32, 1)
    full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_expect_bytes(tlx.local_view(full, 0), BLOCK * BLOCK * 4)
            tlx.async_descriptor_load(x_desc, tlx.local_view(buf, 0), [0, 0],  # MARK copy
                                      tlx.local_view(full, 0))
        with tlx.async_task(num_warps=4):
            tlx.barrier_wait(tlx.local_view(full, 0), PARITY)  # MARK wait
            v = tlx.local_load(tlx.local_view(buf, 0))  # MARK read
            offs = tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
            tl.store(out_ptr + offs, v)


@ww.jit
def two_arrivers(out_ptr, BLOCK: tl.constexpr, ARRIVE_COUNT: tl.constexpr,
                 SECOND: tl.constexpr):
    buf = tlx.local_alloc((BLOCK, BLOCK), tl.float32, 1)
    ready = tlx.alloc_barriers(num_barriers=1, arrive_count=ARRIVE_COUNT)  # MARK alloc
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.local_store(tlx.local_view(buf, 0), tl.zeros([BLOCK, BLOCK], tl.float32) + 3.0)
            tlx.barrier_arrive(tlx.local_view(ready, 0))  # MARK first arrive
        with tlx.async_task(num_warps=4):
            if SECOND:
                tlx.barrier_arrive(tlx.local_view(ready, 0))
            tlx.barrier_wait(tlx.local_view(ready, 0), 0)  # MARK blocked wait
            v = tlx.local_load(tlx.local_view(buf, 0))
            offs = tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
            tl.store(out_ptr + offs, v)


def line(marker):
    with open(__file__) as f:
        return next(i for i, text in enumerate(f, 1) if f"# MARK {marker}" in text)


B = 8


def run_copy(parity):
    x = (np.arange(B * B) % 7).astype(np.float32).reshape(B, B)
    out = np.full((B, B), np.nan, np.float32)
    desc = ww.TensorDescriptor(x, list(x.shape), [B, 1], [B, B])
    one_tile_copy[(1,)](desc, out, BLOCK=B, PARITY=parity)
    return x, out


def test_right_parity_runs_clean():
    x, out = run_copy(0)
    np.testing.assert_array_equal(out, x)


def test_wrong_parity_race_names_the_wait():
    with pytest.raises(ww.InterpreterError) as e:
        run_copy(1)
    msg = str(e.value)
    # Reported at the read, as before...
    assert f"test_interp_sync_reports.py:{line('read')}:" in msg.splitlines()[0]
    assert "still writing" in msg
    # ...and the note names the wait that let it through and why it passed.
    assert f"test_interp_sync_reports.py:{line('wait')}:" in msg
    assert "passed at once" in msg
    assert "for parity 1" in msg
    assert "wait for parity 0" in msg


def test_missing_arrival_names_arrivers():
    out = np.zeros((B, B), np.float32)
    with pytest.raises(ww.InterpreterError) as e:
        two_arrivers[(1,)](out, BLOCK=B, ARRIVE_COUNT=2, SECOND=False)
    msg = str(e.value)
    assert "deadlock" in msg
    assert f"test_interp_sync_reports.py:{line('blocked wait')}:" in msg
    # The barrier's arrival count, where it was set, and who did arrive.
    assert f"test_interp_sync_reports.py:{line('alloc')}:" in msg
    assert "initialized here for 2 arrivals per phase" in msg
    assert f"test_interp_sync_reports.py:{line('first arrive')}:" in msg
    assert "arrived on the phase in progress: default task" in msg


def test_both_arrivals_run_clean():
    out = np.zeros((B, B), np.float32)
    two_arrivers[(1,)](out, BLOCK=B, ARRIVE_COUNT=2, SECOND=True)
    np.testing.assert_array_equal(out, np.full((B, B), 3.0, np.float32))
