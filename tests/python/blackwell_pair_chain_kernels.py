"""Small Blackwell kernels of our own for tests/python/test_blackwell_pair_chain.py: CTA pairs
(two_ctas=True) with a synchronous MMA, A read from tensor memory, and M = 64 rows per CTA.

pair_chain: O = fp16(A @ B) @ V over a pair of CTAs, 128 rows each. Each CTA loads its A rows
and its half of B's and V's columns (TMA loads completing on the leader's barrier). The leader
issues S = A @ B synchronously (no mBarriers: it returns once the MMA completed) and commits to
both CTAs' s_done; each CTA turns its rows of S into fp16 P in tensor memory and tells the leader
(a remote arrive); the leader issues O = P @ V, A from tensor memory, synchronously again, and
commits to both CTAs' o_done. PLANT plants one bug:
  1: the leader issues P @ V without waiting for the peer's P (the pair out of step);
  2: the odd CTA reads O without waiting for o_done (only the leader waits for a synchronous
     MMA of the pair);
  3: no bug: the odd CTA zeroes O before the cluster barrier and reads it before it tells the
     leader its P is ready, so the read is ordered before the leader's P @ V (a control).

pair_m64: C = A @ B with 64 rows per CTA (the pair's MMA is 128 x N). Each CTA's [64, N]
accumulator lies in 128 lanes of N / 2 columns, row r's first half in lane r and its second in
lane 64 + r (TLX's TwoCTA_RHS); it is read through a [128, N / 2] buffer of the same
storage_alias_spec, as TLX's attention backward reads its dQ. A [128, 32] fp32 buffer comes
first in the spec (distinct): the accumulator's N / 2 columns follow it. PLANT:
  1: neither CTA waits for the commit before reading its lanes;
  2: no bug: C is read with local_load of the [64, N] accumulator itself (its lanes unfolded).

pair_m64_tmem_a: C (+)= A @ B with 64 rows per CTA and A from tensor memory: each CTA stores its
A rows into a [64, K] tile (rows in lanes r and 64 + r, TLX's TwoCTA_LHS) and tells the leader;
the leader issues the pair's MMA; each CTA reads its [64, N] accumulator with local_load.
STORE_ACC: the accumulator first gets C's values (local_store) and the MMA accumulates onto them.
"""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx


@ww.jit
def pair_chain(a_desc, b_desc, v_desc, o_ptr, M, K: tl.constexpr, N1: tl.constexpr,
               N2: tl.constexpr, PLANT: tl.constexpr):
    rank = tlx.cluster_cta_rank()
    leads = rank % 2 == 0
    row0 = tl.program_id(0) * 128
    H1: tl.constexpr = N1 // 2
    H2: tl.constexpr = N2 // 2
    a = tlx.local_view(tlx.local_alloc((128, K), tl.float16, 1), 0)
    b = tlx.local_view(tlx.local_alloc((K, H1), tl.float16, 1), 0)
    v = tlx.local_view(tlx.local_alloc((N1, H2), tl.float16, 1), 0)
    s = tlx.local_view(tlx.local_alloc((128, N1), tl.float32, 1, tlx.storage_kind.tmem), 0)
    p = tlx.local_view(tlx.local_alloc((128, N1), tl.float16, 1, tlx.storage_kind.tmem), 0)
    o = tlx.local_view(tlx.local_alloc((128, N2), tl.float32, 1, tlx.storage_kind.tmem), 0)
    loaded = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    s_done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    p_ready = tlx.alloc_barriers(num_barriers=1, arrive_count=2)
    o_done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    if PLANT == 3:
        tlx.local_store(o, tl.zeros((128, N2), tl.float32))
    tlx.cluster_barrier()  # both CTAs' barriers are initialized before any remote arrival
    tlx.barrier_expect_bytes(loaded[0], 2 * 2 * (128 * K + K * H1 + N1 * H2), pred=leads)
    tlx.async_descriptor_load(a_desc, a, [row0, 0], loaded[0], two_ctas=True)
    tlx.async_descriptor_load(b_desc, b, [0, (rank % 2) * H1], loaded[0], two_ctas=True)
    tlx.async_descriptor_load(v_desc, v, [0, (rank % 2) * H2], loaded[0], two_ctas=True)
    if leads:
        tlx.barrier_wait(loaded[0], 0)
        tlx.async_dot(a, b, s, use_acc=False, two_ctas=True)
        tlx.tcgen05_commit(s_done[0], two_ctas=True)
    tlx.barrier_wait(s_done[0], 0)
    tlx.local_store(p, tlx.local_load(s).to(tl.float16))
    if PLANT == 3:
        if not leads:
            early = tlx.local_load(o)  # zeros: the leader's P @ V waits for this CTA's p_ready
            tl.store(o_ptr + (row0 + tl.arange(0, 128))[:, None] * N2 + tl.arange(0, N2)[None, :],
                     early.to(tl.float16), mask=(row0 + tl.arange(0, 128))[:, None] < M)
    tlx.barrier_arrive(p_ready[0], 1, remote_cta_rank=rank - rank % 2)
    if leads:
        if PLANT != 1:
            tlx.barrier_wait(p_ready[0], 0)
        tlx.async_dot(p, v, o, use_acc=False, two_ctas=True)
        tlx.tcgen05_commit(o_done[0], two_ctas=True)
    if PLANT != 2:
        tlx.barrier_wait(o_done[0], 0)
    result = tlx.local_load(o)
    rows = row0 + tl.arange(0, 128)
    cols = tl.arange(0, N2)
    tl.store(o_ptr + rows[:, None] * N2 + cols[None, :], result.to(tl.float16),
             mask=rows[:, None] < M)


@ww.jit
def pair_m64(a_desc, b_desc, c_ptr, M, K: tl.constexpr, N: tl.constexpr, PLANT: tl.constexpr):
    rank = tlx.cluster_cta_rank()
    leads = rank % 2 == 0
    row0 = tl.program_id(0) * 64
    H: tl.constexpr = N // 2
    a = tlx.local_view(tlx.local_alloc((64, K), tl.float16, 1), 0)
    b = tlx.local_view(tlx.local_alloc((K, H), tl.float16, 1), 0)
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.tmem)
    other = tlx.local_alloc((128, 32), tl.float32, 1, tlx.storage_kind.tmem, reuse=spec)
    acc = tlx.local_alloc((64, N), tl.float32, 1, tlx.storage_kind.tmem, reuse=spec)
    lanes = tlx.local_alloc((128, H), tl.float32, 1, tlx.storage_kind.tmem, reuse=spec)
    spec.set_buffer_overlap(
        tlx.reuse_group(other, tlx.reuse_group(acc, lanes, group_type=tlx.reuse_group_type.shared),
                        group_type=tlx.reuse_group_type.distinct))
    loaded = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    # `other` holds its own values across the MMA: the accumulator's columns do not overlap it.
    tlx.local_store(other[0], tl.full((128, 32), 3.0, tl.float32))
    tlx.barrier_expect_bytes(loaded[0], 2 * 2 * (64 * K + K * H), pred=leads)
    tlx.async_descriptor_load(a_desc, a, [row0, 0], loaded[0], two_ctas=True)
    tlx.async_descriptor_load(b_desc, b, [0, (rank % 2) * H], loaded[0], two_ctas=True)
    if leads:
        tlx.barrier_wait(loaded[0], 0)
        tlx.async_dot(a, b, acc[0], use_acc=False, mBarriers=[done[0]], two_ctas=True)
    if PLANT != 1:
        tlx.barrier_wait(done[0], 0)
    kept = tlx.local_load(other[0])
    moved = tl.max(tl.abs(kept - 3.0), axis=1)  # 0 unless the MMA wrote over `other`
    if PLANT == 2:
        whole = tlx.local_load(acc[0])
        rows64 = row0 + tl.arange(0, 64)
        tl.store(c_ptr + rows64[:, None] * N + tl.arange(0, N)[None, :],
                 whole + tl.max(moved, axis=0), mask=rows64[:, None] < M)
    else:
        result = tlx.local_load(lanes[0])  # [128, H]: lane l holds row l % 64, half l // 64
        lane = tl.arange(0, 128)
        rows = row0 + lane % 64
        cols = (lane // 64)[:, None] * H + tl.arange(0, H)[None, :]
        tl.store(c_ptr + rows[:, None] * N + cols, result + moved[:, None], mask=rows[:, None] < M)


@ww.jit
def pair_m64_tmem_a(a_desc, b_desc, c_ptr, K: tl.constexpr, N: tl.constexpr,
                    STORE_ACC: tl.constexpr):
    rank = tlx.cluster_cta_rank()
    leader = rank - rank % 2
    H: tl.constexpr = N // 2
    a = tlx.local_view(tlx.local_alloc((64, K), tl.float16, 1), 0)
    b = tlx.local_view(tlx.local_alloc((K, H), tl.float16, 1), 0)
    a_tm = tlx.local_view(tlx.local_alloc((64, K), tl.float16, 1, tlx.storage_kind.tmem), 0)
    acc = tlx.local_view(tlx.local_alloc((64, N), tl.float32, 1, tlx.storage_kind.tmem), 0)
    loaded = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    ready = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=2), 0)
    done = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    tlx.barrier_expect_bytes(loaded, 2 * (64 * K + K * H))
    tlx.async_descriptor_load(a_desc, a, [tl.program_id(0) * 64, 0], loaded)
    tlx.async_descriptor_load(b_desc, b, [0, (rank % 2) * H], loaded)
    tlx.barrier_wait(loaded, 0)
    tlx.local_store(a_tm, tlx.local_load(a))
    rows = tl.program_id(0) * 64 + tl.arange(0, 64)
    offs = rows[:, None] * N + tl.arange(0, N)[None, :]
    if STORE_ACC:
        tlx.local_store(acc, tl.load(c_ptr + offs))
    # This CTA's A rows (and accumulator) are in its tensor memory, its B half in shared memory.
    tlx.barrier_arrive(ready, 1, remote_cta_rank=leader)
    if rank == leader:
        tlx.barrier_wait(ready, 0)
        tlx.async_dot(a_tm, b, acc, use_acc=STORE_ACC, mBarriers=[done], two_ctas=True)
    tlx.barrier_wait(done, 0)
    tl.store(c_ptr + offs, tlx.local_load(acc))


@ww.jit
def pair_scaled(a_desc, b_desc, as_desc, bs_desc, c_ptr, M, N, K, BN: tl.constexpr,
                BK: tl.constexpr, PLANT: tl.constexpr):
    # A CTA pair's mxfp8 GEMM (256 x BN per K step): each CTA loads its 128 rows of A with their
    # scales, its half of B's BN rows (B is [N, K]) and the scales of all BN of them; the leader
    # issues the block-scaled MMA, whose scale copies (tcgen05.cp) and products cover both CTAs.
    # PLANT = 1: the next K step's loads overwrite the tiles before the pair's MMA completed.
    rank = tlx.cluster_cta_rank()
    leads = rank % 2 == 0
    HALF: tl.constexpr = BN // 2
    RK: tl.constexpr = (BK + 127) // 128
    RN: tl.constexpr = (BN + 127) // 128
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_t = tlx.local_view(tlx.local_alloc((128, BK), tlx.dtype_of(a_desc), 1), 0)
    b_t = tlx.local_view(tlx.local_alloc((HALF, BK), tlx.dtype_of(b_desc), 1), 0)
    as_t = tlx.local_view(tlx.local_alloc((1, 1, RK, 2, 256), tl.uint8, 1), 0)
    bs_t = tlx.local_view(tlx.local_alloc((1, RN, RK, 2, 256), tl.uint8, 1), 0)
    acc = tlx.local_view(tlx.local_alloc((128, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    loaded = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    done = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    steps = tl.cdiv(K, BK)
    for k in range(steps):
        if k > 0 and PLANT != 1:
            tlx.barrier_wait(done, (k - 1) & 1)  # the pair's previous MMA has completed
        tlx.barrier_expect_bytes(loaded, 2 * ((128 + HALF) * BK + (1 + RN) * RK * 512),
                                 pred=leads)
        tlx.async_descriptor_load(as_desc, as_t, [0, pid_m, k * RK, 0, 0], loaded, two_ctas=True)
        tlx.async_descriptor_load(bs_desc, bs_t, [0, pid_n * RN, k * RK, 0, 0], loaded,
                                  two_ctas=True)
        tlx.async_descriptor_load(a_desc, a_t, [pid_m * 128, k * BK], loaded, two_ctas=True)
        tlx.async_descriptor_load(b_desc, b_t, [pid_n * BN + (rank % 2) * HALF, k * BK], loaded,
                                  two_ctas=True)
        if leads:
            tlx.barrier_wait(loaded, k & 1)
            tlx.async_dot_scaled(a_t, tlx.local_trans(b_t), acc, as_t, "e4m3", bs_t, "e4m3",
                                 use_acc=k > 0, mBarriers=[done], two_ctas=True)
    tlx.barrier_wait(done, (steps - 1) & 1)
    result = tlx.local_load(acc)
    rows = pid_m * 128 + tl.arange(0, 128)
    cols = pid_n * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], result, mask=mask)
