"""Cluster kernels that exchange per-CTA partials through distributed shared memory
(tlx.async_remote_shmem_store / tlx.remote_shmem_store), with their NumPy references; used by the
interpreter tests (tests/python/test_tlx_remote_shmem.py) and the GPU tests
(tests/gpu/test_tlx_remote_shmem_gpu.py)."""

import numpy as np

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def exchange_pairs(x_ptr, out_ptr, C: tl.constexpr, N: tl.constexpr, SELF: tl.constexpr):
    """Row `cluster` of x is split over the C CTAs of a cluster, N elements each. Every CTA
    reduces its slice to a (max, sum) pair and pushes it into slot `rank` of the exchange buffer
    of every peer (its own too when SELF); each then combines the C pairs into the row's
    (max, sum) and writes it to out[program]."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    row = pid // C
    xs = tl.load(x_ptr + (row * C + rank) * N + tl.arange(0, N))
    pair = tl.where(tl.arange(0, 2) == 0, tl.max(xs, 0), tl.sum(xs, 0))
    slots = tlx.local_alloc((2,), tl.float32, C)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    bar = tlx.local_view(bars, 0)
    if SELF:
        tlx.barrier_expect_bytes(bar, C * 8)
    else:
        tlx.barrier_expect_bytes(bar, (C - 1) * 8)
    mine = tlx.local_view(slots, rank)
    for peer in tl.static_range(C):
        if SELF:
            tlx.async_remote_shmem_store(mine, pair, peer, bar)
        elif peer != rank:
            tlx.async_remote_shmem_store(mine, pair, peer, bar)
    tlx.barrier_wait(bar, 0)
    best = tl.full([2], -float("inf"), tl.float32)
    total = tl.zeros([2], tl.float32)
    for peer in tl.static_range(C):
        got = pair
        if SELF:
            got = tlx.local_load(tlx.local_view(slots, peer))
        elif peer != rank:
            got = tlx.local_load(tlx.local_view(slots, peer))
        best = tl.maximum(best, got)
        total += got
    tl.store(out_ptr + pid * 2 + tl.arange(0, 2), tl.where(tl.arange(0, 2) == 0, best, total))


def exchange_pairs_reference(x, c):
    """out[program] for exchange_pairs on x of shape (clusters, c * n)."""
    row = np.stack([x.max(1), x.sum(1, dtype=np.float64)], 1)
    return np.repeat(row, c, axis=0)


@ww.jit
def exchange_rounds(x_ptr, out_ptr, C: tl.constexpr, N: tl.constexpr, ROUNDS: tl.constexpr,
                    SLOTS: tl.constexpr):
    """ROUNDS rows per cluster, each split over its C CTAs: per round every CTA pushes its
    slice's (max, sum) pair to every CTA of the cluster (itself included) through SLOTS exchange
    slots and barriers used in turn (phase (round // SLOTS) & 1), waits, and writes the combined
    pair to out[(cluster * ROUNDS + round) * C + rank]."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    cluster = pid // C
    slots = tlx.local_alloc((2,), tl.float32, C * SLOTS)
    bars = tlx.alloc_barriers(num_barriers=SLOTS, arrive_count=1)
    lane = tl.arange(0, 2)
    for i in range(ROUNDS):
        s = i % SLOTS
        bar = tlx.local_view(bars, s)
        xs = tl.load(x_ptr + ((cluster * ROUNDS + i) * C + rank) * N + tl.arange(0, N))
        pair = tl.where(lane == 0, tl.max(xs, 0), tl.sum(xs, 0))
        tlx.barrier_expect_bytes(bar, C * 8)
        mine = tlx.local_view(slots, s * C + rank)
        for peer in tl.static_range(C):
            tlx.async_remote_shmem_store(mine, pair, peer, bar)
        tlx.barrier_wait(bar, (i // SLOTS) & 1)
        best = tl.full([2], -float("inf"), tl.float32)
        total = tl.zeros([2], tl.float32)
        for peer in tl.static_range(C):
            got = tlx.local_load(tlx.local_view(slots, s * C + peer))
            best = tl.maximum(best, got)
            total += got
        tl.store(out_ptr + ((cluster * ROUNDS + i) * C + rank) * 2 + lane,
                 tl.where(lane == 0, best, total))


def exchange_rounds_reference(x, c, rounds):
    """out for exchange_rounds on x of shape (clusters * rounds, c * n)."""
    return exchange_pairs_reference(x, c).reshape(-1, rounds * c, 2)


@ww.jit
def exchange_sync(x_ptr, out_ptr, C: tl.constexpr, N: tl.constexpr):
    """exchange_pairs with the synchronous store: every CTA writes its pair into slot `rank` of
    every CTA of the cluster, then a cluster barrier makes the writes visible to their readers."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    row = pid // C
    xs = tl.load(x_ptr + (row * C + rank) * N + tl.arange(0, N))
    pair = tl.where(tl.arange(0, 2) == 0, tl.max(xs, 0), tl.sum(xs, 0))
    slots = tlx.local_alloc((2,), tl.float32, C)
    mine = tlx.local_view(slots, rank)
    for peer in tl.static_range(C):
        tlx.remote_shmem_store(mine, pair, peer)
    tlx.cluster_barrier()
    best = tl.full([2], -float("inf"), tl.float32)
    total = tl.zeros([2], tl.float32)
    for peer in tl.static_range(C):
        got = tlx.local_load(tlx.local_view(slots, peer))
        best = tl.maximum(best, got)
        total += got
    tl.store(out_ptr + pid * 2 + tl.arange(0, 2), tl.where(tl.arange(0, 2) == 0, best, total))
    # Nobody leaves while a peer may still read: the slots stay until every CTA has read them.
    tlx.cluster_barrier()


@ww.jit
def read_before_wait(out_ptr, C: tl.constexpr):
    """Reads a peer's slot after a cluster barrier but before waiting on the exchange barrier:
    the cluster barrier does not order st.async, only the barrier's phase does."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    slots = tlx.local_alloc((2,), tl.float32, C)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    bar = tlx.local_view(bars, 0)
    tlx.barrier_expect_bytes(bar, C * 8)
    pair = tl.full([2], 1.0, tl.float32) * (rank + 1)
    for peer in tl.static_range(C):
        tlx.async_remote_shmem_store(tlx.local_view(slots, rank), pair, peer, bar)
    tlx.cluster_barrier()
    got = tlx.local_load(tlx.local_view(slots, (rank + 1) % C))
    tlx.barrier_wait(bar, 0)
    tl.store(out_ptr + pid * 2 + tl.arange(0, 2), got)


@ww.jit
def expect_too_many(out_ptr, C: tl.constexpr, EXTRA: tl.constexpr):
    """Arms the exchange barrier for EXTRA bytes more than the C pushes deliver."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    slots = tlx.local_alloc((2,), tl.float32, C)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    bar = tlx.local_view(bars, 0)
    tlx.barrier_expect_bytes(bar, C * 8 + EXTRA)
    pair = tl.full([2], 1.0, tl.float32) * (rank + 1)
    for peer in tl.static_range(C):
        tlx.async_remote_shmem_store(tlx.local_view(slots, rank), pair, peer, bar)
    tlx.barrier_wait(bar, 0)
    tl.store(out_ptr + pid * 2 + tl.arange(0, 2), tlx.local_load(tlx.local_view(slots, 0)))


@ww.jit
def push_tile(x_ptr, out_ptr, R: tl.constexpr, K: tl.constexpr, C: tl.constexpr):
    """Each CTA pushes its [R, K] tile of x into slot `rank` of every CTA of the cluster (a wide,
    vectorizable value: K consecutive elements per row), waits, and writes the C tiles it
    received to out[program] in rank order."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    rows = tl.arange(0, R)[:, None] * K + tl.arange(0, K)[None, :]
    tile = tl.load(x_ptr + pid * R * K + rows)
    slots = tlx.local_alloc((R, K), tlx.dtype_of(x_ptr), C)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    bar = tlx.local_view(bars, 0)
    tlx.barrier_expect_bytes(bar, C * R * K * tlx.size_of(tlx.dtype_of(x_ptr)))
    for peer in tl.static_range(C):
        tlx.async_remote_shmem_store(tlx.local_view(slots, rank), tile, peer, bar)
    tlx.barrier_wait(bar, 0)
    for peer in tl.static_range(C):
        got = tlx.local_load(tlx.local_view(slots, peer))
        tl.store(out_ptr + (pid * C + peer) * R * K + rows, got)


@ww.jit
def bad_rank(out_ptr):
    slots = tlx.local_alloc((2,), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.async_remote_shmem_store(slots[0], tl.zeros([2], tl.float32), 1.5, bars[0])


@ww.jit
def bad_shape(out_ptr):
    slots = tlx.local_alloc((2,), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.async_remote_shmem_store(slots[0], tl.zeros([4], tl.float32), 0, bars[0])


@ww.jit
def bad_dtype(out_ptr):
    slots = tlx.local_alloc((2,), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.async_remote_shmem_store(slots[0], tl.zeros([2], tl.float16), 0, bars[0])


@ww.jit
def bad_barrier(out_ptr):
    slots = tlx.local_alloc((2,), tl.float32, 2)
    tlx.async_remote_shmem_store(slots[0], tl.zeros([2], tl.float32), 0, slots[1])


@ww.jit
def bad_dst(out_ptr):
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.async_remote_shmem_store(out_ptr, tl.zeros([2], tl.float32), 0, bars[0])


# ---------------------------------------------------------------------------------------------
# GPU checks (tests/gpu/test_tlx_remote_shmem_gpu.py runs each in a subprocess)
# ---------------------------------------------------------------------------------------------


def _small_ints(torch, shape):
    # Integers keep every sum exact in float32, whatever order the kernel adds in.
    return torch.randint(-50, 51, shape, device="cuda").to(torch.float32)


def check_exchange_pairs(c, clusters, self_push, num_warps=4):
    """Raises AssertionError unless exchange_pairs on the GPU gives every CTA its row's
    (max, sum)."""
    import torch

    n = 64
    x = _small_ints(torch, (clusters, c * n))
    out = torch.full((clusters * c, 2), float("nan"), device="cuda")
    # C = 1: a plain launch (no cluster), each CTA storing to itself (rank 0).
    cluster = {"ctas_per_cga": (c, 1, 1)} if c > 1 else {}
    exchange_pairs[(clusters * c,)](x, out, C=c, N=n, SELF=self_push, num_warps=num_warps,
                                    **cluster)
    torch.cuda.synchronize()
    expect = exchange_pairs_reference(x.cpu().numpy(), c)
    got = out.cpu().numpy()
    assert np.array_equal(got, expect), f"C={c} SELF={self_push}: {got} != {expect}"


def check_exchange_rounds(c, slots, rounds, clusters, num_warps=4):
    """Raises AssertionError unless every round of exchange_rounds on the GPU combines the right
    pairs (slots and barrier phases reused across rounds)."""
    import torch

    n = 32
    x = _small_ints(torch, (clusters * rounds, c * n))
    out = torch.full((clusters, rounds * c, 2), float("nan"), device="cuda")
    exchange_rounds[(clusters * c,)](x, out, C=c, N=n, ROUNDS=rounds, SLOTS=slots,
                                     num_warps=num_warps, ctas_per_cga=(c, 1, 1))
    torch.cuda.synchronize()
    expect = exchange_rounds_reference(x.cpu().numpy(), c, rounds)
    got = out.cpu().numpy()
    bad = np.argwhere(got != expect)
    assert bad.size == 0, f"C={c} SLOTS={slots}: {len(bad)} wrong values, first at {bad[:4]}"


def check_exchange_sync(c, clusters):
    """Raises AssertionError unless exchange_sync (st.shared::cluster + cluster barrier) on the
    GPU gives every CTA its row's (max, sum)."""
    import torch

    n = 64
    x = _small_ints(torch, (clusters, c * n))
    out = torch.full((clusters * c, 2), float("nan"), device="cuda")
    exchange_sync[(clusters * c,)](x, out, C=c, N=n, ctas_per_cga=(c, 1, 1))
    torch.cuda.synchronize()
    assert np.array_equal(out.cpu().numpy(), exchange_pairs_reference(x.cpu().numpy(), c))


def check_push_tile(dtype_name, rows, c):
    """Raises AssertionError unless every CTA receives every CTA's tile through push_tile."""
    import torch

    k = 64
    x = torch.randn(c, rows, k, device="cuda").to(getattr(torch, dtype_name))
    out = torch.full((c, c, rows, k), float("nan"), device="cuda", dtype=x.dtype)
    push_tile[(c,)](x, out, R=rows, K=k, C=c, ctas_per_cga=(c, 1, 1))
    torch.cuda.synchronize()
    for pid in range(c):
        assert torch.equal(out[pid], x), f"program {pid} received other tiles"


@ww.jit
def exchange_in_task(x_ptr, out_ptr, C: tl.constexpr, N: tl.constexpr):
    """exchange_pairs (every CTA stores to every CTA) run by a 4-warp async task beside an idle
    default task: the task's own warps store, once per element."""
    slots = tlx.local_alloc((2,), tl.float32, C)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4):
            pid = tl.program_id(0)
            rank = tlx.cluster_cta_rank()
            xs = tl.load(x_ptr + ((pid // C) * C + rank) * N + tl.arange(0, N))
            pair = tl.where(tl.arange(0, 2) == 0, tl.max(xs, 0), tl.sum(xs, 0))
            bar = tlx.local_view(bars, 0)
            tlx.barrier_expect_bytes(bar, C * 8)
            for peer in tl.static_range(C):
                tlx.async_remote_shmem_store(tlx.local_view(slots, rank), pair, peer, bar)
            tlx.barrier_wait(bar, 0)
            best = tl.full([2], -float("inf"), tl.float32)
            total = tl.zeros([2], tl.float32)
            for peer in tl.static_range(C):
                got = tlx.local_load(tlx.local_view(slots, peer))
                best = tl.maximum(best, got)
                total += got
            tl.store(out_ptr + pid * 2 + tl.arange(0, 2),
                     tl.where(tl.arange(0, 2) == 0, best, total))


@ww.jit
def constant_rank(out_ptr, RANK: tl.constexpr):
    slots = tlx.local_alloc((2,), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.async_remote_shmem_store(slots[0], tl.zeros([2], tl.float32), RANK, bars[0])


@ww.jit
def exchange_scalars(x_ptr, out_ptr, C: tl.constexpr, N: tl.constexpr):
    """exchange_pairs with the max and the sum stored as two scalars into 1-element slots."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    xs = tl.load(x_ptr + ((pid // C) * C + rank) * N + tl.arange(0, N))
    maxes = tlx.local_alloc((1,), tl.float32, C)
    sums = tlx.local_alloc((1,), tl.float32, C)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], C * 8)
    for peer in tl.static_range(C):
        tlx.async_remote_shmem_store(maxes[rank], tl.max(xs, 0), peer, bars[0])
        tlx.async_remote_shmem_store(sums[rank], tl.sum(xs, 0), peer, bars[0])
    tlx.barrier_wait(bars[0], 0)
    best = tl.full([1], -float("inf"), tl.float32)
    total = tl.zeros([1], tl.float32)
    for peer in tl.static_range(C):
        best = tl.maximum(best, tlx.local_load(maxes[peer]))
        total += tlx.local_load(sums[peer])
    tl.store(out_ptr + pid * 2 + tl.arange(0, 1), best)
    tl.store(out_ptr + pid * 2 + 1 + tl.arange(0, 1), total)


@ww.jit
def sync_store_without_barrier(out_ptr, C: tl.constexpr):
    """remote_shmem_store, then reading the peers' slots with no cluster barrier between."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    slots = tlx.local_alloc((2,), tl.float32, C)
    pair = tl.full([2], 1.0, tl.float32) * (rank + 1)
    for peer in tl.static_range(C):
        tlx.remote_shmem_store(slots[rank], pair, peer)
    got = tlx.local_load(slots[(rank + 1) % C])
    tl.store(out_ptr + pid * 2 + tl.arange(0, 2), got)
    tlx.cluster_barrier()


@ww.jit
def exchange_row_sums(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, C: tl.constexpr):
    """TLX's pattern for row sums split over a cluster: each CTA sums its [M, N] slice of M rows
    into an [M, 1] partial, keeps it in its own slot with local_store and stores it into its slot
    of every other CTA; then each adds the C partials in rank order."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    rows = tl.arange(0, M)[:, None] * (C * N) + rank * N + tl.arange(0, N)[None, :]
    data = tl.load(x_ptr + (pid // C) * M * C * N + rows)
    partial = tl.reshape(tl.sum(data, axis=1), (M, 1))
    sums = tlx.local_alloc((M, 1), tl.float32, C)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], (C - 1) * M * 4)
    tlx.local_store(sums[rank], partial)
    for peer in tl.static_range(C):
        if rank != peer:
            tlx.async_remote_shmem_store(dst=sums[rank], src=partial, remote_cta_rank=peer,
                                         barrier=bars[0])
    tlx.barrier_wait(bars[0], 0)
    total = tl.zeros((M, 1), tl.float32)
    for peer in tl.static_range(C):
        total += tlx.local_load(sums[peer])
    tl.store(out_ptr + pid * M + tl.arange(0, M)[:, None], total)


@ww.jit
def expect_too_few(out_ptr, C: tl.constexpr):
    """Stores to every CTA including itself but arms for the peers' bytes only ((C - 1) * 8)."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    slots = tlx.local_alloc((2,), tl.float32, C)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    bar = tlx.local_view(bars, 0)
    tlx.barrier_expect_bytes(bar, (C - 1) * 8)
    pair = tl.full([2], 1.0, tl.float32) * (rank + 1)
    for peer in tl.static_range(C):
        tlx.async_remote_shmem_store(tlx.local_view(slots, rank), pair, peer, bar)
    tlx.barrier_wait(bar, 0)
    total = tl.zeros([2], tl.float32)
    for peer in tl.static_range(C):
        total += tlx.local_load(tlx.local_view(slots, peer))
    tl.store(out_ptr + pid * 2 + tl.arange(0, 2), total)
