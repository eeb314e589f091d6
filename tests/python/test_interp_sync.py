"""Synchronization bugs planted in a TLX producer/consumer ring reach Python as
ww.InterpreterError in the wwc format, naming this file's lines; the clean ring runs clean and
sums right under seeded schedules."""

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
def ring_sum(x_desc, out_ptr, NUM_TILES: tl.constexpr, BLOCK: tl.constexpr,
             CONSUMERS: tl.constexpr, EXPECT: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float32, 2)
    full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=2, arrive_count=1)  # MARK alloc empty
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(NUM_TILES):
                s = i % 2
                tlx.barrier_wait(tlx.local_view(empty, s), ((i // 2) & 1) ^ 1)
                tlx.barrier_expect_bytes(tlx.local_view(full, s), EXPECT)  # MARK expect
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s),  # MARK load
                                          [i * BLOCK, 0], tlx.local_view(full, s))
        with tlx.async_task(num_warps=4, replicate=CONSUMERS):
            acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
            for i in range(NUM_TILES):
                s = i % 2
                tlx.barrier_wait(tlx.local_view(full, s), (i // 2) & 1)
                acc += tlx.local_load(tlx.local_view(bufs, s))  # MARK read
                tlx.barrier_arrive(tlx.local_view(empty, s))  # MARK arrive
            offs = tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
            tl.store(out_ptr + offs, acc)


def line(marker):
    with open(__file__) as f:
        return next(i for i, text in enumerate(f, 1) if f"# MARK {marker}" in text)


TILES, BLOCK = 5, 8


def run(consumers=1, expect=BLOCK * BLOCK * 4):
    x = (np.arange(TILES * BLOCK * BLOCK) % 13).astype(np.float32).reshape(TILES * BLOCK, BLOCK)
    out = np.full((BLOCK, BLOCK), np.nan, np.float32)
    desc = ww.TensorDescriptor(x, list(x.shape), [BLOCK, 1], [BLOCK, BLOCK])
    ring_sum[(1,)](desc, out, NUM_TILES=TILES, BLOCK=BLOCK, CONSUMERS=consumers, EXPECT=expect)
    return x, out


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 42])
def test_clean_ring_runs_clean_under_seeds(monkeypatch, seed):
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    monkeypatch.setenv("WARPWEAVE_INTERP_SCHEDULES", "2")
    x, out = run()
    np.testing.assert_array_equal(out, x.reshape(TILES, BLOCK, BLOCK).sum(axis=0))


def test_two_consumers_on_a_count_one_barrier_are_an_over_arrival(monkeypatch):
    monkeypatch.delenv("WARPWEAVE_INTERP_SEED", raising=False)
    monkeypatch.delenv("WARPWEAVE_INTERP_SCHEDULES", raising=False)
    with pytest.raises(ww.InterpreterError) as e:
        run(consumers=2)
    text = str(e.value)
    arrive = line("arrive")
    assert f"test_interp_sync.py:{arrive}:17: error: over-arrival: barrier_arrive by async task " \
           f"1 replica 1 on phase 1 of barrier 0 of 'empty' comes before any barrier_wait has " \
           f"seen phase 0 complete" in text, text
    assert f"test_interp_sync.py:{arrive}:17: note: phase 0 was completed here by async task 1 " \
           f"replica 0" in text, text
    assert f"test_interp_sync.py:{line('alloc empty')}:13: note: the barrier was initialized " \
           f"here for 1 arrival per phase" in text, text


@pytest.mark.parametrize("seed", range(1, 13))
def test_two_consumers_under_seeds_report_the_surplus_arrival_or_its_race(monkeypatch, seed):
    # In some interleavings one replica's read of a slot comes after the producer refilled it
    # (the other replica's arrival alone completed the slot's phase): that race is reported
    # first, with notes at the refill, the producer's wait and the arrival that let it pass.
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    with pytest.raises(ww.InterpreterError) as e:
        run(consumers=2)
    text = str(e.value)
    arrive = f"test_interp_sync.py:{line('arrive')}:17"
    over_arrival = f"{arrive}: error: over-arrival" in text
    race = (f"test_interp_sync.py:{line('read')}:24: error: local_load reads shared memory" in
            text and f"{arrive}: note: whose phase was completed by async task 1 replica" in text)
    assert over_arrival or race, text
    assert f"(found under WARPWEAVE_INTERP_SEED={seed})" in text


def test_expected_bytes_short_of_the_copy_are_reported_at_the_copy():
    with pytest.raises(ww.InterpreterError) as e:
        run(expect=BLOCK * BLOCK * 2)
    text = str(e.value)
    assert f"test_interp_sync.py:{line('load')}:" in text, text
    assert "more than its phase expects" in text, text
    assert f"test_interp_sync.py:{line('expect')}:17: note: barrier_expect_bytes" in text, text


def test_expected_bytes_beyond_the_copy_deadlock_naming_the_expect():
    with pytest.raises(ww.InterpreterError) as e:
        run(expect=BLOCK * BLOCK * 8)
    text = str(e.value)
    assert "deadlock" in text, text
    assert "still expects 256 transaction bytes" in text, text
    assert f"test_interp_sync.py:{line('expect')}:17: note: barrier_expect_bytes by default " \
           f"task here: the phase expects 512 transaction bytes, its copies delivered 256" in text


# ---- Two warp groups in one agent: async_dot_wait retires a wgmma for its own group only ----

def gemm_operands(M=64, N=32, K=80):
    rng = np.random.default_rng(7)
    a = (rng.integers(-8, 8, (M, K)) / 8).astype(np.float16)
    b = (rng.integers(-8, 8, (K, N)) / 8).astype(np.float16)
    return a, b


def run_gemm(kernel, num_warps, BM=64, BN=32, BK=16, compiled=False, **extra):
    a, b = gemm_operands()
    M, K = a.shape
    N = b.shape[1]
    c = np.full((M, N), np.nan, np.float16)

    def desc(x, block):
        return ww.TensorDescriptor(x, list(x.shape), [x.shape[1], 1], block)

    k = kernel[(ww.cdiv(M, BM) * ww.cdiv(N, BN),)](
        desc(a, [BM, BK]), desc(b, [BK, BN]), desc(c, [BM, BN]), M, N, K, BLOCK_M=BM,
        BLOCK_N=BN, BLOCK_K=BK, NUM_STAGES=3, num_warps=num_warps, **extra)
    return (a, b, c, k) if compiled else (a, b, c)


@pytest.mark.parametrize("seed", [0, 5, 99])
def test_refill_after_one_warp_groups_wait_gets_the_compilers_barrier(monkeypatch, seed):
    # The pipelined GEMM before its fix: the refill right after async_dot_wait(1) is fine for
    # one warp group but races with the other group's wgmma when num_warps=8. As Triton's
    # compiler does, warpweave now places a CTA barrier before the refill outside async tasks
    # (the interpreter still reports the race inside them: interp_test's
    # TaskOfTwoWarpGroupsNeedsATaskBarrierBeforeItsOwnRefill, and test_smem_barriers.py).
    from sync_bug_kernels.gemm_pipelined_unsynced import gemm_pipelined_unsynced
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    a, b, c, compiled = run_gemm(gemm_pipelined_unsynced, num_warps=8, compiled=True)
    np.testing.assert_array_equal(c, (a.astype(np.float32) @ b.astype(np.float32))
                                  .astype(np.float16))
    # The barrier sits in the K loop, after the wait, before the refill's first TMA load.
    ir = compiled.asm["tile_ir"]
    barrier = ir.index("debug_barrier {smem_hazard = 1}")
    assert ir.index("async_dot_wait", ir.index(" = for ")) < barrier < \
        ir.index(" async_desc_load ", barrier), ir


def test_the_unsynced_refill_is_correct_with_one_warp_group():
    from sync_bug_kernels.gemm_pipelined_unsynced import gemm_pipelined_unsynced
    a, b, c = run_gemm(gemm_pipelined_unsynced, num_warps=4)
    np.testing.assert_array_equal(c, (a.astype(np.float32) @ b.astype(np.float32))
                                  .astype(np.float16))


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_fixed_pipelined_gemm_with_two_warp_groups_runs_clean(monkeypatch, seed):
    import os
    import sys
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    if root not in sys.path:
        sys.path.insert(0, root)
    from warpweave.ops.kernels.hopper import gemm_pipelined
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    monkeypatch.setenv("WARPWEAVE_INTERP_SCHEDULES", "2")
    a, b, c = run_gemm(gemm_pipelined.gemm_pipelined_kernel, num_warps=8, GROUP_M=2)
    np.testing.assert_array_equal(c, (a.astype(np.float32) @ b.astype(np.float32))
                                  .astype(np.float16))
