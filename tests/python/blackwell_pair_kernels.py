"""Small Blackwell kernels of our own for tests/python/test_blackwell_pairs.py: CTA pairs
(two_ctas=True) sharing one tcgen05 MMA, and the synchronous async_dot.

pair_gemm: clusters of 2 CTAs along M. Each CTA loads its BM rows of A and its half of the BN
columns of B (TMA loads that complete on the pair leader's barrier), the leader issues one
MMA of 2*BM x BN per K step into both CTAs' tensor memory, and its commits arrive on the
barriers of both CTAs. PLANT plants one bug:
  1: the leader's barrier expects the bytes of its own copies only, not the peer's: its wait
     passes before the peer's operands land, and the MMA reads the peer's shared memory while
     the peer's copy may still be writing it (the pair out of step);
  2: the odd CTA reads its accumulator without waiting for the final commit.
"""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx


@ww.jit
def pair_gemm(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, PLANT: tl.constexpr):
    rank = tlx.cluster_cta_rank()
    leads = rank % 2 == 0
    row0 = tl.program_id(0) * BM
    col0 = tl.program_id(1) * BN
    HALF: tl.constexpr = BN // 2
    a_tiles = tlx.local_alloc((BM, BK), tl.float16, 2)
    b_halves = tlx.local_alloc((BK, HALF), tl.float16, 2)
    acc = tlx.local_view(tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    loaded = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    freed = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    for k in range(tl.cdiv(K, BK)):
        slot = k % 2
        if k >= 2:
            # the pair's MMA that read this slot (in both CTAs) two steps ago has completed
            tlx.barrier_wait(freed[slot], ((k - 2) // 2) & 1)
        # The leader's barrier counts the bytes of both CTAs' copies.
        CTAS: tl.constexpr = 1 if PLANT == 1 else 2
        tlx.barrier_expect_bytes(loaded[slot], CTAS * 2 * (BM + HALF) * BK, pred=leads)
        tlx.async_descriptor_load(a_desc, a_tiles[slot], [row0, k * BK], loaded[slot],
                                  two_ctas=True)
        tlx.async_descriptor_load(b_desc, b_halves[slot], [k * BK, col0 + (rank % 2) * HALF],
                                  loaded[slot], two_ctas=True)
        if leads:
            tlx.barrier_wait(loaded[slot], (k // 2) & 1)
            tlx.async_dot(a_tiles[slot], b_halves[slot], acc, use_acc=k > 0,
                          mBarriers=[freed[slot]], two_ctas=True)
    tlx.tcgen05_commit(done[0], two_ctas=True)
    if PLANT != 2 or leads:
        tlx.barrier_wait(done[0], 0)
    result = tlx.local_load(acc)
    rows = row0 + tl.arange(0, BM)
    cols = col0 + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], result.to(tl.float16), mask=mask)


@ww.jit
def sync_gemm(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, SKIP_FIRST: tl.constexpr):
    # async_dot without mBarriers is synchronous: the accumulator is ready when it returns. With
    # SKIP_FIRST the first step's MMA is predicated off (acc then starts at the second step).
    a_tile = tlx.local_view(tlx.local_alloc((BM, BK), tl.float16, 1), 0)
    b_tile = tlx.local_view(tlx.local_alloc((BK, BN), tl.float16, 1), 0)
    acc = tlx.local_view(tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    loaded = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    row0 = tl.program_id(0) * BM
    col0 = tl.program_id(1) * BN
    first = 1 if SKIP_FIRST else 0
    for k in range(tl.cdiv(K, BK)):
        tlx.barrier_expect_bytes(loaded[0], 2 * (BM + BN) * BK)
        tlx.async_descriptor_load(a_desc, a_tile, [row0, k * BK], loaded[0])
        tlx.async_descriptor_load(b_desc, b_tile, [k * BK, col0], loaded[0])
        tlx.barrier_wait(loaded[0], k & 1)
        # The next iteration's loads overwrite the tiles: the MMA has read them by then.
        tlx.async_dot(a_tile, b_tile, acc, use_acc=k > first, pred=k >= first)
    result = tlx.local_load(acc)
    rows = row0 + tl.arange(0, BM)
    cols = col0 + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], result.to(tl.float16), mask=mask)


@ww.jit
def one_step(a_desc, b_desc, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # One MMA step of one CTA; one_step_false spells two_ctas=False everywhere and is the same.
    a = tlx.local_view(tlx.local_alloc((BM, BK), tl.float16, 1), 0)
    b = tlx.local_view(tlx.local_alloc((BK, BN), tl.float16, 1), 0)
    acc = tlx.local_view(tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    bars = tlx.alloc_barriers(num_barriers=3, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], 2 * (BM + BN) * BK)
    tlx.async_descriptor_load(a_desc, a, [0, 0], bars[0])
    tlx.async_descriptor_load(b_desc, b, [0, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    tlx.async_dot(a, b, acc, use_acc=False, mBarriers=[bars[1]])
    tlx.tcgen05_commit(bars[2])
    tlx.barrier_wait(bars[2], 0)
    result = tlx.local_load(acc)
    tl.store(c_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], result)


@ww.jit
def one_step_false(a_desc, b_desc, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    a = tlx.local_view(tlx.local_alloc((BM, BK), tl.float16, 1), 0)
    b = tlx.local_view(tlx.local_alloc((BK, BN), tl.float16, 1), 0)
    acc = tlx.local_view(tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    bars = tlx.alloc_barriers(num_barriers=3, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], 2 * (BM + BN) * BK)
    tlx.async_descriptor_load(a_desc, a, [0, 0], bars[0], two_ctas=False)
    tlx.async_descriptor_load(b_desc, b, [0, 0], bars[0], two_ctas=False)
    tlx.barrier_wait(bars[0], 0)
    tlx.async_dot(a, b, acc, use_acc=False, mBarriers=[bars[1]], two_ctas=False)
    tlx.tcgen05_commit(bars[2], two_ctas=False)
    tlx.barrier_wait(bars[2], 0)
    result = tlx.local_load(acc)
    tl.store(c_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], result)
