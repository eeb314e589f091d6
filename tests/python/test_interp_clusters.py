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


def halves(rng, shape, scale=8):
    # Multiples of 1/scale in [-1, 1]: products and their sums over K are exact in fp32.
    return (rng.integers(-scale, scale + 1, shape) / scale).astype(np.float16)
