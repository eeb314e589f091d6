"""Issue 16: the compiler orders shared memory outside warp-specialized code as Triton's Membar
analysis does (a pipelined GEMM of two warp groups that refills the slot its previous wgmma read
right after async_dot_wait(1) gets a CTA barrier there and runs clean in the interpreter), and a
named barrier left with an arrival nobody waits for when the tasks end is not an error (the
ping-pong bootstrap), while a wait that never completes and a missing wait still are."""

import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

HAZARD_BARRIER = "debug_barrier {smem_hazard = 1}"


@ww.jit
def ring_gemm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, S: tl.constexpr, A_IN_REGISTERS: tl.constexpr):
    """C = A @ B for one BM-row band per program: cp.async copies run S - 1 steps ahead into
    rings of S slots; each step's wgmma reads slot k % S (A through registers when
    A_IN_REGISTERS) while the copy for step k + S - 1 fills slot (k - 1) % S."""
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
    a_ring = tlx.local_alloc((BM, BK), tl.float16, S)
    b_ring = tlx.local_alloc((BK, BN), tl.float16, S)
    num_k = tl.cdiv(K, BK)
    for i in tl.static_range(S - 1):
        ta = tlx.async_load(a_ptrs + i * BK, tlx.local_view(a_ring, i),
                            mask=offs_k[None, :] < K - i * BK)
        tb = tlx.async_load(b_ptrs + i * BK * N, tlx.local_view(b_ring, i),
                            mask=offs_k[:, None] < K - i * BK)
        tlx.async_load_commit_group([ta, tb])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, num_k):
        slot = k % S
        tlx.async_load_wait_group(S - 2)
        if A_IN_REGISTERS:
            acc = tlx.async_dot(tlx.local_load(tlx.local_view(a_ring, slot)),
                                tlx.local_view(b_ring, slot), acc)
        else:
            acc = tlx.async_dot(tlx.local_view(a_ring, slot), tlx.local_view(b_ring, slot), acc)
        acc = tlx.async_dot_wait(1, acc)  # MARK wait
        ahead = k + S - 1
        ta = tlx.async_load(a_ptrs + ahead * BK, tlx.local_view(a_ring, ahead % S),  # MARK refill
                            mask=offs_k[None, :] < K - ahead * BK)
        tb = tlx.async_load(b_ptrs + ahead * BK * N, tlx.local_view(b_ring, ahead % S),
                            mask=offs_k[:, None] < K - ahead * BK)
        tlx.async_load_commit_group([ta, tb])
    acc = tlx.async_dot_wait(0, acc)
    tlx.async_load_wait_group(0)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16))


@ww.jit
def ring_gemm_in_a_task(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                        BK: tl.constexpr, S: tl.constexpr):
    """ring_gemm's loop in an async task of two warp groups: warp-specialized code is the
    user's to synchronize, so nothing is inserted and the interpreter reports the race."""
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ring = tlx.local_alloc((BM, BK), tl.float16, S)
    b_ring = tlx.local_alloc((BK, BN), tl.float16, S)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=8):
            a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
            b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
            for i in tl.static_range(S - 1):
                ta = tlx.async_load(a_ptrs + i * BK, tlx.local_view(a_ring, i))
                tb = tlx.async_load(b_ptrs + i * BK * N, tlx.local_view(b_ring, i))
                tlx.async_load_commit_group([ta, tb])
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(0, tl.cdiv(K, BK)):
                slot = k % S
                tlx.async_load_wait_group(S - 2)
                acc = tlx.async_dot(tlx.local_view(a_ring, slot), tlx.local_view(b_ring, slot),
                                    acc)
                acc = tlx.async_dot_wait(1, acc)
                ahead = k + S - 1
                ta = tlx.async_load(a_ptrs + ahead * BK, tlx.local_view(a_ring, ahead % S),  # MARK task refill
                                    mask=offs_k[None, :] < K - ahead * BK)
                tb = tlx.async_load(b_ptrs + ahead * BK * N, tlx.local_view(b_ring, ahead % S),
                                    mask=offs_k[:, None] < K - ahead * BK)
                tlx.async_load_commit_group([ta, tb])
            acc = tlx.async_dot_wait(0, acc)
            tlx.async_load_wait_group(0)
            tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16))


def line(marker):
    with open(__file__) as f:
        return next(i for i, text in enumerate(f, 1) if f"# MARK {marker}" in text)


def gemm_operands(M=128, N=32, K=80):
    rng = np.random.default_rng(16)
    a = (rng.integers(-8, 8, (M, K)) / 8).astype(np.float16)
    b = (rng.integers(-8, 8, (K, N)) / 8).astype(np.float16)
    return a, b


def run_ring_gemm(kernel, num_warps, BM=64, **extra):
    a, b = gemm_operands()
    M, K = a.shape
    N = b.shape[1]
    c = np.full((M, N), np.nan, np.float16)
    compiled = kernel[(M // BM,)](a, b, c, M, N, K, BM=BM, BN=N, BK=16, S=3,
                                  num_warps=num_warps, **extra)
    return a, b, c, compiled


def exact_product(a, b):
    # Products of eighths sum exactly in fp32.
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)


@pytest.mark.parametrize("a_in_registers", [False, True])
@pytest.mark.parametrize("seed", [0, 3, 11])
def test_pipelined_gemm_of_two_warp_groups_runs_clean(monkeypatch, seed, a_in_registers):
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    monkeypatch.setenv("WARPWEAVE_INTERP_SCHEDULES", "2")
    a, b, c, compiled = run_ring_gemm(ring_gemm, 8, A_IN_REGISTERS=a_in_registers)
    np.testing.assert_array_equal(c, exact_product(a, b))
    ir = compiled.asm["tile_ir"]
    # One barrier, in the loop, after the wait that retires the previous wgmma and right before
    # the refill of the slot that wgmma read: B's, or A's too when the wgmma read A's slot (A
    # read through registers was ordered by the wait group's barrier at the top of the step).
    assert ir.count(HAZARD_BARRIER) == 1, ir
    wait = ir.index("async_dot_wait", ir.index(" = for "))
    barrier = ir.index(HAZARD_BARRIER)
    assert wait < barrier, ir
    refill = ir[barrier:].split("\n")[1]
    assert ("_tb = async_load " if a_in_registers else "_ta = async_load ") in refill, ir


def test_pipelined_gemm_of_one_warp_group_needs_no_barrier():
    # async_dot_wait retires the wgmma for its warp group, which is then every thread.
    a, b, c, compiled = run_ring_gemm(ring_gemm, 4, A_IN_REGISTERS=False)
    np.testing.assert_array_equal(c, exact_product(a, b))
    assert HAZARD_BARRIER not in compiled.asm["tile_ir"]


def test_the_same_loop_in_a_task_of_two_warp_groups_is_still_reported():
    with pytest.raises(ww.InterpreterError) as e:
        run_ring_gemm(ring_gemm_in_a_task, 4)
    text = str(e.value)
    assert f"test_smem_barriers.py:{line('task refill')}:22: error: async_load overwrites shared " \
           f"memory that async_dot by async task 1 may still be reading in another warp group" \
           in text, text


# ---- named barriers: the ping-pong turn of two consumer warp groups ----

@ww.jit
def ping_pong(out_ptr, counter_ptr, TURNS: tl.constexpr, BOOTSTRAP: tl.constexpr,
              SKIP_WAIT: tl.constexpr):
    """Two consumer replicas take turns TURNS times each through named barriers 9 (consumer 0's
    turn) and 10 (consumer 1's), as the TLX Hopper ping-pong kernels do. In its turn a consumer
    writes its id to a shared tile and reads it back, and takes a ticket. Consumer 1 hands the
    first turn over (BOOTSTRAP) and its last hand-over is never taken: an arrival on barrier 9
    is left when the tasks end."""
    tile = tlx.local_alloc((8, 32), tl.float32, 1)
    offs = tl.arange(0, 8)[:, None] * 32 + tl.arange(0, 32)[None, :]
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4, replicate=2):
            cid = tlx.async_task_replica_id()
            if cid == 1:
                if BOOTSTRAP:
                    tlx.named_barrier_arrive(9, 256)  # MARK bootstrap
            for i in range(TURNS):
                if cid == 0:
                    if i == 0 or not SKIP_WAIT:
                        tlx.named_barrier_wait(9, 256)  # MARK wait 9
                else:
                    tlx.named_barrier_wait(10, 256)
                tlx.local_store(tlx.local_view(tile, 0),  # MARK store
                                tl.zeros((8, 32), dtype=tl.float32) + cid)
                seen = tlx.local_load(tlx.local_view(tile, 0))
                ticket = tl.atomic_add(counter_ptr, 1)
                tl.store(out_ptr + ticket * 256 + offs, seen)
                if cid == 0:
                    tlx.named_barrier_arrive(10, 256)
                else:
                    tlx.named_barrier_arrive(9, 256)


def run_ping_pong(turns=3, bootstrap=True, skip_wait=False):
    out = np.full((2 * turns, 8, 32), -1, np.float32)
    counter = np.zeros(1, np.int32)
    ping_pong[(1,)](out, counter, TURNS=turns, BOOTSTRAP=bootstrap, SKIP_WAIT=skip_wait)
    return out, counter


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_ping_pong_bootstrap_leaves_one_arrival_and_runs_clean(monkeypatch, seed):
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    out, counter = run_ping_pong()
    assert counter[0] == 6
    # The consumers alternated, consumer 0 first, each reading back its own id.
    np.testing.assert_array_equal(out, np.repeat([0, 1, 0, 1, 0, 1], 256).reshape(6, 8, 32)
                                  .astype(np.float32))


def test_a_wait_nothing_can_complete_is_still_a_deadlock():
    # Without the bootstrap arrival consumer 0 waits at barrier 9 for consumer 1, which waits at
    # barrier 10 for consumer 0.
    with pytest.raises(ww.InterpreterError) as e:
        run_ping_pong(bootstrap=False)
    text = str(e.value)
    assert "deadlock" in text, text
    assert f"test_smem_barriers.py:{line('wait 9')}:25: note: async task 1 replica 0 waits at " \
           f"named barrier 9 (128 of 256 threads arrived)" in text, text


def test_a_missing_wait_is_still_a_race():
    # Consumer 0 takes only its first turn: its later stores to the tile are not ordered after
    # consumer 1's reads of it.
    with pytest.raises(ww.InterpreterError) as e:
        run_ping_pong(skip_wait=True)
    text = str(e.value)
    assert f"test_smem_barriers.py:{line('store')}:17: error: local_store overwrites shared " \
           f"memory that local_store by async task 1 replica 1 wrote, with no barrier ordering " \
           f"that access before this write" in text, text
