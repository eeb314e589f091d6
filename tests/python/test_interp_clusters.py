"""The interpreter runs the CTAs of a thread-block cluster together (launches with
ctas_per_cga=(C, 1, 1)): cluster_barrier across CTAs, remote mbarrier arrives, multicast TMA loads,
and the located deadlock reports when a CTA never reaches a cluster barrier."""

import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def exchange_partials(x_ptr, partial_ptr, out_ptr, C: tl.constexpr, N: tl.constexpr):
    """Each CTA stores its row of x times (rank + 1) as its partial, meets its cluster, then sums
    the partials of every CTA of the cluster (its own included) into its row of out."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    offs = tl.arange(0, N)
    tl.store(partial_ptr + pid * N + offs, tl.load(x_ptr + pid * N + offs) * (rank + 1))
    tlx.cluster_barrier()
    first = pid - rank
    total = tl.zeros([N], dtype=tl.float32)
    for peer in range(0, C):
        total += tl.load(partial_ptr + (first + peer) * N + offs, cache_modifier=".cg")
    tl.store(out_ptr + pid * N + offs, total)


def exchange_reference(x, c):
    partial = x * (np.arange(x.shape[0]) % c + 1)[:, None]
    sums = partial.reshape(-1, c, x.shape[1]).sum(1)
    return np.repeat(sums, c, axis=0)


@pytest.mark.parametrize("c,clusters", [(2, 1), (2, 3), (4, 2)])
def test_cluster_barrier_orders_global_stores_before_peers_loads(c, clusters):
    rng = np.random.default_rng(c * 10 + clusters)
    n = 32
    x = rng.integers(-8, 9, (c * clusters, n)).astype(np.float32)
    partial = np.full_like(x, np.nan)
    out = np.full_like(x, np.nan)
    exchange_partials[(c * clusters,)](x, partial, out, C=c, N=n, ctas_per_cga=(c, 1, 1))
    np.testing.assert_array_equal(out, exchange_reference(x, c))


def test_cluster_barrier_exchange_under_seeded_schedules(monkeypatch):
    # Other interleavings of the CTAs give the same sums: the barrier orders every store before
    # every peer's load whatever runs first.
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", "11")
    monkeypatch.setenv("WARPWEAVE_INTERP_SCHEDULES", "8")
    x = np.arange(4 * 16, dtype=np.float32).reshape(4, 16)
    out = np.full_like(x, np.nan)
    exchange_partials[(4,)](x, np.zeros_like(x), out, C=4, N=16, ctas_per_cga=(4, 1, 1))
    np.testing.assert_array_equal(out, exchange_reference(x, 4))


@ww.jit
def skip_cluster_barrier(out_ptr, SKIPPER: tl.constexpr):
    rank = tlx.cluster_cta_rank()
    if rank != SKIPPER:
        tlx.cluster_barrier()
    tl.store(out_ptr + tl.program_id(0), rank)


def line_of(fn, text):
    import inspect

    lines, first = inspect.getsourcelines(fn.fn if hasattr(fn, "fn") else fn)
    for i, line in enumerate(lines):
        if text in line:
            return first + i
    raise AssertionError(text)


@pytest.mark.parametrize("skipper", [0, 1])
def test_cta_that_skips_the_cluster_barrier_is_a_located_deadlock(skipper):
    out = np.zeros(2, np.int32)
    with pytest.raises(ww.InterpreterError) as e:
        skip_cluster_barrier[(2,)](out, SKIPPER=skipper, ctas_per_cga=(2, 1, 1))
    msg = str(e.value)
    waiter = 1 - skipper
    assert f"deadlock in the cluster of programs (0, 0, 0) to (1, 0, 0): program ({waiter}, 0, 0)" \
           f" waits at cluster_barrier, which every CTA of the cluster must reach, but program " \
           f"({skipper}, 0, 0) exited without reaching it" in msg, msg
    assert f":{line_of(skip_cluster_barrier, 'tlx.cluster_barrier()')}:" in msg, msg
    assert f"program ({skipper}, 0, 0) has finished" in msg, msg


@ww.jit
def spin_on_peer_flag(flag_ptr, out_ptr):
    """Rank 0 spins until rank 1 raises a flag in global memory (both CTAs of a cluster are
    resident together on the GPU, so the spin ends)."""
    rank = tlx.cluster_cta_rank()
    pid = tl.program_id(0)
    first = pid - rank
    if rank == 0:
        seen = tl.atomic_add(flag_ptr + first, 0)
        while seen == 0:
            seen = tl.atomic_add(flag_ptr + first, 0)
        tl.store(out_ptr + pid, seen)
    else:
        tl.atomic_xchg(flag_ptr + first, pid + 10)
        tl.store(out_ptr + pid, -1)
    tlx.cluster_barrier()


def test_a_cta_spinning_on_its_peers_flag_lets_the_peer_run():
    flags = np.zeros(4, np.int32)
    out = np.zeros(4, np.int32)
    spin_on_peer_flag[(4,)](flags, out, ctas_per_cga=(2, 1, 1))
    np.testing.assert_array_equal(out, [11, -1, 13, -1])


@ww.jit
def task_blocks_while_peer_waits(out_ptr):
    """Rank 1's default task waits on a barrier nobody arrives on, so its program never reaches
    the cluster barrier rank 0 waits at."""
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    rank = tlx.cluster_cta_rank()
    with tlx.async_tasks():
        with tlx.async_task("default"):
            if rank == 1:
                tlx.barrier_wait(bars[0], 0)
        with tlx.async_task(num_warps=4):
            tl.store(out_ptr + tl.program_id(0), rank)
    tlx.cluster_barrier()


def test_peer_blocked_in_its_async_tasks_is_a_located_deadlock():
    with pytest.raises(ww.InterpreterError) as e:
        task_blocks_while_peer_waits[(2,)](np.zeros(2, np.int32), ctas_per_cga=(2, 1, 1))
    msg = str(e.value)
    assert "deadlock in the cluster of programs (0, 0, 0) to (1, 0, 0): program (0, 0, 0) waits " \
           "at cluster_barrier, which every CTA of the cluster must reach, but program (1, 0, 0) " \
           "is blocked elsewhere" in msg, msg
    wait_line = line_of(task_blocks_while_peer_waits, "tlx.barrier_wait(bars[0], 0)")
    assert re.search(rf":{wait_line}:\d+: note: program \(1, 0, 0\) default task waits on barrier 0 "
                     r"of 'bars'", msg), msg


@ww.jit
def cluster_barrier_in_task(out_ptr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(out_ptr + tl.program_id(0), 1)
        with tlx.async_task(num_warps=4):
            tlx.cluster_barrier()


def test_cluster_barrier_in_one_task_only_is_a_located_deadlock():
    # Inside async tasks every task must reach it (every thread arrives on the GPU); the default
    # task here finishes without it.
    with pytest.raises(ww.InterpreterError, match="deadlock") as e:
        cluster_barrier_in_task[(2,)](np.zeros(2, np.int32), ctas_per_cga=(2, 1, 1))
    assert "cluster_barrier" in str(e.value), str(e.value)


@ww.jit
def fault_in_one_cta(out_ptr):
    rank = tlx.cluster_cta_rank()
    if rank == 1:
        tl.store(out_ptr + 100, rank)
    tlx.cluster_barrier()
    tl.store(out_ptr + tl.program_id(0), rank)


def test_a_fault_in_one_cta_is_reported_while_its_peer_waits():
    # The peer blocked at the cluster barrier is abandoned; the fault is the error, not a hang.
    with pytest.raises(ww.InterpreterError, match=re.escape(
            "out-of-bounds store of 4 bytes at offset 400 past the end of argument 'out_ptr' "
            "(8 bytes) in program (1, 0, 0)")):
        fault_in_one_cta[(2,)](np.zeros(2, np.int32), ctas_per_cga=(2, 1, 1))


@ww.jit
def ring_handoff(token_ptr, out_ptr):
    """CTA r stores a token, then arrives on the barrier of CTA r + 1 (mod the cluster size); each
    CTA waits on its own barrier and then reads the token of the CTA before it."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    size = tlx.cluster_size_1d()
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tl.store(token_ptr + pid, pid * 7 + 3)
    tlx.barrier_arrive(bars[0], 1, remote_cta_rank=(rank + 1) % size)
    tlx.barrier_wait(bars[0], 0)
    before = pid - rank + (rank + size - 1) % size
    tl.store(out_ptr + pid, tl.load(token_ptr + before))
    tlx.cluster_barrier()


@pytest.mark.parametrize("c", [2, 4])
def test_remote_barrier_arrive_reaches_the_peer_cta(c):
    grid = 2 * c
    token = np.full(grid, -1, np.int32)
    out = np.full(grid, -1, np.int32)
    ring_handoff[(grid,)](token, out, ctas_per_cga=(c, 1, 1))
    pid = np.arange(grid)
    before = pid - pid % c + (pid % c + c - 1) % c
    np.testing.assert_array_equal(out, before * 7 + 3)


@ww.jit
def arrive_on_rank_one(out_ptr):
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_arrive(bars[0], 1, remote_cta_rank=1)
    tl.store(out_ptr + tl.program_id(0), 1)


@ww.jit
def arrive_after_peer_exits(out_ptr):
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    rank = tlx.cluster_cta_rank()
    if rank == 0:
        tlx.barrier_arrive(bars[0], 1, remote_cta_rank=1)
    tl.store(out_ptr + tl.program_id(0), rank)


def test_remote_arrive_on_an_exited_cta_is_reported():
    # Round-robin: rank 0 meets rank 1 at the cluster barrier after alloc_barriers, rank 1 runs
    # on to its end, then rank 0 arrives on its barrier.
    with pytest.raises(ww.InterpreterError, match=re.escape(
            "barrier_arrive with remote_cta_rank reaches program (1, 0, 0) (cluster rank 1), "
            "which has exited: a CTA must not leave while its peers may still arrive on its "
            "barriers or write its shared memory (end the kernel with tlx.cluster_barrier())")):
        arrive_after_peer_exits[(2,)](np.zeros(2, np.int32), ctas_per_cga=(2, 1, 1))


def test_remote_arrive_without_a_cluster_launch_is_refused():
    with pytest.raises(ww.InterpreterError,
                       match=re.escape("barrier_arrive with remote_cta_rank names CTA rank 1, "
                                       "outside the cluster of 1 CTA (ranks 0..0); launch with "
                                       "ctas_per_cga=(n, 1, 1)")):
        arrive_on_rank_one[(2,)](np.zeros(2, np.int32))


def test_grid_must_be_a_multiple_of_the_cluster_size():
    with pytest.raises(ValueError, match=re.escape(
            "kernel 'ring_handoff' runs in clusters of 2 CTAs (ctas_per_cga): grid[0] = 3 must "
            "be a multiple of 2")):
        ring_handoff[(3,)](np.zeros(3, np.int32), np.zeros(3, np.int32), ctas_per_cga=(2, 1, 1))


# ---- multicast TMA loads (tests/python/tlx_multicast_kernels.py) and the 2-CTA cluster GEMMs ----

def descriptor(t, block):
    return ww.TensorDescriptor(t, list(t.shape), [int(s) // t.itemsize for s in t.strides], block)


def multicast_kernels():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent / "tlx_multicast_kernels.py"
    spec = importlib.util.spec_from_file_location("tlx_multicast_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("clusters,cols", [(1, 64), (3, 32)])
def test_multicast_halves_land_in_both_ctas(clusters, cols):
    """check_multicast_halves on NumPy arrays: each CTA loads one half of its cluster's tile into
    both CTAs, so every CTA stores the whole tile."""
    kern = multicast_kernels()
    half = 64
    rng = np.random.default_rng(clusters)
    x = rng.standard_normal((clusters * 2 * half, cols)).astype(np.float16)
    out = np.full((clusters * 2 * 2 * half, cols), np.nan, np.float16)
    kern.multicast_halves[(clusters * 2,)](descriptor(x, [half, cols]), descriptor(out, [half, cols]),
                                           HALF=half, COLS=cols, ctas_per_cga=(2, 1, 1))
    tiles = x.reshape(clusters, 2 * half, cols)
    np.testing.assert_array_equal(out, np.stack([tiles, tiles], 1).reshape(-1, cols))


@ww.jit
def multicast_before_peer_alloc(in_desc, out_desc, HALF: tl.constexpr, COLS: tl.constexpr):
    """multicast_halves with the barriers allocated before the buffers: after the cluster barrier
    that follows alloc_barriers, one CTA may multicast into its peer before the peer has run its
    local_alloc (the GPU's shared memory is laid out statically, so that is fine)."""
    dtype: tl.constexpr = tlx.dtype_of(in_desc)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    halves = tlx.local_alloc((HALF, COLS), dtype, 2)
    rank = tlx.cluster_cta_rank()
    full = tlx.local_view(bars, 0)
    tlx.barrier_expect_bytes(full, 2 * HALF * COLS * tlx.size_of(dtype))
    tlx.async_descriptor_load(in_desc, tlx.local_view(halves, rank), [rank * HALF, 0], full,
                              multicast_targets=[0, 1])
    tlx.barrier_wait(full, 0)
    for h in tl.static_range(2):
        out_desc.store([tl.program_id(0) * 2 * HALF + h * HALF, 0],
                       tlx.local_load(tlx.local_view(halves, h)))
    tlx.cluster_barrier()


def test_multicast_into_a_peer_before_its_local_alloc_ran():
    x = np.arange(2 * 16 * 32, dtype=np.float32).reshape(32, 32)
    out = np.full((64, 32), np.nan, np.float32)
    multicast_before_peer_alloc[(2,)](descriptor(x, [16, 32]), descriptor(out, [16, 32]), HALF=16,
                                      COLS=32, ctas_per_cga=(2, 1, 1))
    np.testing.assert_array_equal(out, np.concatenate([x, x]))


def halves(rng, shape, scale=8):
    # Multiples of 1/scale in [-1, 1]: products and their sums over K are exact in fp32.
    return (rng.integers(-scale, scale + 1, shape) / scale).astype(np.float16)


def halves(rng, shape, scale=8):
    # Multiples of 1/scale in [-1, 1]: products and their sums over K are exact in fp32.
    return (rng.integers(-scale, scale + 1, shape) / scale).astype(np.float16)


def cluster_gemm(a, b, variant, config=None, num_sms=132):
    """ops.matmul_tlx(a, b, variant, config)'s launch of gemm_ws_kernel, on NumPy arrays (the op
    itself takes CUDA tensors only)."""
    from warpweave import ops
    from warpweave.ops.kernels.hopper import gemm_ws

    cfg = dict(ops.TLX_GEMM_CONFIGS[variant], **(config or {}))
    m, k = a.shape
    n = b.shape[1]
    c = np.full((m, n), np.nan, np.float16)
    cluster_m, cluster_n = cfg.get("CLUSTER_M", 1), cfg.get("CLUSTER_N", 1)
    cluster = cluster_m * cluster_n
    half, bn, bk = cfg["BLOCK_M"] // 2, cfg["BLOCK_N"], cfg["BLOCK_K"]
    c_cols = bn // cfg.get("EPI_SUBTILE", 1) if cfg.get("SMEM_EPILOGUE") else bn
    sms = cfg.pop("NUM_SMS", num_sms) // cluster * cluster
    work = ww.cdiv(ww.cdiv(m, cfg["BLOCK_M"]), cluster_m) * ww.cdiv(ww.cdiv(n, bn), cluster_n)
    gemm_ws.gemm_ws_kernel[(min(sms // cluster, work) * cluster,)](
        descriptor(a, [half, bk]), descriptor(b, [bk, bn // cluster_m]), descriptor(c, [half, c_cols]),
        m, n, k, **cfg, NUM_SMS=sms, num_warps=4, ctas_per_cga=(cluster, 1, 1))
    return c


@pytest.mark.parametrize("variant", ["ws_cluster", "ws_cluster_m"])
@pytest.mark.parametrize("m,n,k,config", [
    # The library's configuration (128 x 256 tiles): one cluster, the second CTA's tile clipped.
    (200, 136, 64, None),
    # Small tiles, two clusters walking several tiles each: the stages go round the ring many
    # times, every release reaching both CTAs' empty barriers.
    (72, 104, 56, dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, NUM_STAGES=2, NUM_SMS=4,
                       EPI_SUBTILE=2)),
])
def test_cluster_gemm_matches_numpy(variant, m, n, k, config):
    rng = np.random.default_rng(m + n + k)
    a, b = halves(rng, (m, k)), halves(rng, (k, n))
    c = cluster_gemm(a, b, variant, config)
    np.testing.assert_array_equal(c, (a.astype(np.float64) @ b).astype(np.float16))


@ww.jit
def multicast_ring(in_desc, out_desc, HALF: tl.constexpr, COLS: tl.constexpr,
                   STEPS: tl.constexpr, PEER_RELEASE: tl.constexpr):
    """Per step, each CTA of a 2-CTA cluster multicasts one half of the step's tile into both
    CTAs' one-stage buffer, reads the whole tile and stores it. The stage is free again once both
    CTAs read it (PEER_RELEASE: each arrives on its own and its peer's empty barrier); without
    that, a CTA refills its peer's stage before the peer has read it."""
    dtype: tl.constexpr = tlx.dtype_of(in_desc)
    bufs = tlx.local_alloc((HALF, COLS), dtype, 2)
    full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=1, arrive_count=2 if PEER_RELEASE else 1)
    rank = tlx.cluster_cta_rank()
    pid = tl.program_id(0)
    first_row = (pid // 2) * STEPS * 2 * HALF
    for step in range(STEPS):
        tlx.barrier_wait(empty[0], (step & 1) ^ 1)
        tlx.barrier_expect_bytes(full[0], 2 * HALF * COLS * tlx.size_of(dtype))
        tlx.async_descriptor_load(in_desc, bufs[rank], [first_row + step * 2 * HALF + rank * HALF, 0],
                                  full[0], multicast_targets=[0, 1])
        tlx.barrier_wait(full[0], step & 1)
        for h in tl.static_range(2):
            out_desc.store([(pid * STEPS + step) * 2 * HALF + h * HALF, 0], tlx.local_load(bufs[h]))
        tlx.barrier_arrive(empty[0])
        if PEER_RELEASE:
            tlx.barrier_arrive(empty[0], 1, remote_cta_rank=1 - rank)
    tlx.cluster_barrier()


def run_multicast_ring(peer_release, clusters=2, steps=3, half=16, cols=32):
    x = np.arange(clusters * steps * 2 * half * cols, dtype=np.float32).reshape(-1, cols)
    out = np.full((2 * x.shape[0], cols), np.nan, np.float32)
    multicast_ring[(2 * clusters,)](descriptor(x, [half, cols]), descriptor(out, [half, cols]),
                                    HALF=half, COLS=cols, STEPS=steps, PEER_RELEASE=peer_release,
                                    ctas_per_cga=(2, 1, 1))
    tiles = x.reshape(clusters, steps * 2 * half, cols)
    return out, np.stack([tiles, tiles], 1).reshape(-1, cols)


@pytest.mark.parametrize("seed", [0, 5])
def test_multicast_ring_with_peer_release_runs_clean(seed, monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    monkeypatch.setenv("WARPWEAVE_INTERP_SCHEDULES", "4")
    out, expect = run_multicast_ring(peer_release=True)
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("seed", [0, 3])
def test_refilling_a_peer_stage_before_it_was_read_is_a_race(seed, monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    monkeypatch.setenv("WARPWEAVE_INTERP_SCHEDULES", "3")
    # Shared memory stays per CTA, but a multicast writes the peer's: its race checks see the
    # peer's accesses, which only the peer's remote arrive orders before the refill.
    with pytest.raises(ww.InterpreterError) as e:
        run_multicast_ring(peer_release=False)
    msg = str(e.value)
    # The peer's read, and its copies' landings before it, are unordered with the refill.
    assert re.search(r"error: async_desc_load overwrites shared memory that (async_desc_load|"
                     r"local_load) by program \(\d, 0, 0\) (wrote|read), with no barrier ordering "
                     r"that access before this write \(program \(\d, 0, 0\)\)", msg), msg
    assert f":{line_of(multicast_ring, 'tlx.async_descriptor_load(in_desc')}:" in msg, msg


@pytest.mark.parametrize("variant", ["ws_cluster", "ws_cluster_m"])
def test_cluster_gemm_under_seeded_schedules(variant, monkeypatch):
    # Other interleavings of the two CTAs' producers and consumers (and early TMA landings) find
    # no race or over-arrival either.
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", "21")
    monkeypatch.setenv("WARPWEAVE_INTERP_SCHEDULES", "6")
    rng = np.random.default_rng(3)
    a, b = halves(rng, (72, 40)), halves(rng, (40, 72))
    c = cluster_gemm(a, b, variant, dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2,
                                         NUM_STAGES=2, NUM_SMS=4, EPI_SUBTILE=2))
    np.testing.assert_array_equal(c, (a.astype(np.float64) @ b).astype(np.float16))
