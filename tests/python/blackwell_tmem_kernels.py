"""Small Blackwell kernels of our own for tests/python/test_blackwell_tcgen05.py: a GEMM whose
accumulator lives in tensor memory (tcgen05 MMA with completion barriers, a final commit), with
a flag that plants the bug of reading the accumulator before its commit completes, and a kernel
that reads tensor memory nothing wrote."""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx


@ww.jit
def tmem_gemm(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, READ_EARLY: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_tiles = tlx.local_alloc((BM, BK), tl.float16, 2)
    b_tiles = tlx.local_alloc((BK, BN), tl.float16, 2)
    acc_bufs = tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem)
    acc = tlx.local_view(acc_bufs, 0)
    loaded = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    mma_done = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    all_done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    steps = tl.cdiv(K, BK)
    for k in range(steps):
        slot = k % 2
        if k >= 2:
            # the MMA that read this slot two steps ago has completed
            tlx.barrier_wait(tlx.local_view(mma_done, slot), ((k - 2) // 2) & 1)
        bar = tlx.local_view(loaded, slot)
        tlx.barrier_expect_bytes(bar, 2 * (BM + BN) * BK)
        tlx.async_descriptor_load(a_desc, tlx.local_view(a_tiles, slot), [pid_m * BM, k * BK], bar)
        tlx.async_descriptor_load(b_desc, tlx.local_view(b_tiles, slot), [k * BK, pid_n * BN], bar)
        tlx.barrier_wait(bar, (k // 2) & 1)
        tlx.async_dot(tlx.local_view(a_tiles, slot), tlx.local_view(b_tiles, slot), acc,
                      use_acc=k > 0, mBarriers=[tlx.local_view(mma_done, slot)])
    tlx.tcgen05_commit(tlx.local_view(all_done, 0))
    if not READ_EARLY:
        tlx.barrier_wait(tlx.local_view(all_done, 0), 0)
    result = tlx.local_load(acc)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], result.to(tl.float16), mask=mask)


@ww.jit
def tmem_unwritten(out_ptr, BN: tl.constexpr, ACCUMULATE: tl.constexpr):
    # Buffer 1 is never written: a local_load of it gets the memory's garbage (the interpreter's
    # poison, NaN); with ACCUMULATE an MMA accumulates into it (use_acc=True), which is reported.
    bufs = tlx.local_alloc((128, BN), tl.float32, 2, tlx.storage_kind.tmem)
    tlx.local_store(tlx.local_view(bufs, 0), tl.full((128, BN), 1.0, tl.float32))
    if ACCUMULATE:
        a = tlx.local_view(tlx.local_alloc((128, 16), tl.float16, 1), 0)
        b = tlx.local_view(tlx.local_alloc((16, BN), tl.float16, 1), 0)
        tlx.local_store(a, tl.full((128, 16), 1.0, tl.float16))
        tlx.local_store(b, tl.full((16, BN), 1.0, tl.float16))
        tlx.async_dot(a, b, tlx.local_view(bufs, 1), use_acc=True)
    x = tlx.local_load(tlx.local_view(bufs, 1))
    tl.store(out_ptr + tl.arange(0, 128)[:, None] * BN + tl.arange(0, BN)[None, :], x)


@ww.jit
def tmem_round_trip(x_ptr, out_ptr, BN: tl.constexpr):
    bufs = tlx.local_alloc((128, 2 * BN), tl.float32, 1, tlx.storage_kind.tmem)
    offs = tl.arange(0, 128)[:, None] * BN + tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + offs)
    tile = tlx.local_view(bufs, 0)
    tlx.local_store(tlx.local_slice(tile, [0, BN], [128, BN]), x * 2.0)
    y = tlx.local_load(tlx.local_slice(tile, [0, BN], [128, BN]))
    tl.store(out_ptr + offs, y + 1.0)


@ww.jit
def tmem_subslice_halves(x_ptr, out_ptr, BN: tl.constexpr):
    # tlx.subslice(buf, offset, size): TLX's column slice of a TMEM buffer; out = left + 2 * right.
    tile = tlx.local_view(tlx.local_alloc((128, 2 * BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    offs = tl.arange(0, 128)[:, None] * (2 * BN) + tl.arange(0, 2 * BN)[None, :]
    tlx.local_store(tile, tl.load(x_ptr + offs))
    left = tlx.local_load(tlx.subslice(tile, 0, BN))
    right = tlx.local_load(tlx.subslice(tile, BN, BN))
    half = tl.arange(0, 128)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(out_ptr + half, left + 2.0 * right)


@ww.jit
def tmem_chain(a_desc, b_desc, v_desc, out_ptr, BM: tl.constexpr, BK: tl.constexpr,
               BN: tl.constexpr, BD: tl.constexpr):
    # out = ((a @ b) as fp16) @ v, with the fp16 product kept in tensor memory (two to a column)
    # and read from there as the second MMA's A. BM is 128 or 64 (tcgen05.mma M = 64).
    a = tlx.local_view(tlx.local_alloc((BM, BK), tl.float16, 1), 0)
    b = tlx.local_view(tlx.local_alloc((BK, BN), tl.float16, 1), 0)
    v = tlx.local_view(tlx.local_alloc((BN, BD), tl.float16, 1), 0)
    s = tlx.local_view(tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    p = tlx.local_view(tlx.local_alloc((BM, BN), tl.float16, 1, tlx.storage_kind.tmem), 0)
    o = tlx.local_view(tlx.local_alloc((BM, BD), tl.float32, 1, tlx.storage_kind.tmem), 0)
    bars = tlx.alloc_barriers(num_barriers=3, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], 2 * (BM * BK + BK * BN + BN * BD))
    tlx.async_descriptor_load(a_desc, a, [0, 0], bars[0])
    tlx.async_descriptor_load(b_desc, b, [0, 0], bars[0])
    tlx.async_descriptor_load(v_desc, v, [0, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    tlx.async_dot(a, b, s, use_acc=False, mBarriers=[bars[1]])
    tlx.barrier_wait(bars[1], 0)
    tlx.local_store(p, tlx.local_load(s).to(tl.float16))
    tlx.async_dot(p, v, o, use_acc=False, mBarriers=[bars[2]])
    tlx.barrier_wait(bars[2], 0)
    result = tlx.local_load(o)
    tl.store(out_ptr + tl.arange(0, BM)[:, None] * BD + tl.arange(0, BD)[None, :], result)


@ww.jit
def tmem_overlay(a_desc, b_desc, v_desc, out_ptr, rowmax_ptr, BM: tl.constexpr, BK: tl.constexpr,
                 BN: tl.constexpr, BD: tl.constexpr, TOO_BIG: tl.constexpr):
    # reuse= overlays an allocation's columns (TLX's attention pattern): S [BM, BN] fp32 takes BN
    # columns; the fp16 P [BM, BN] takes BN / 2, so p[1] is S's upper half; the [BM, 1] tiles are
    # S's columns one by one, m[1] its second. out = (S as fp16) @ v, rowmax = max of S's rows.
    s_tiles = tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem)
    p_tiles = tlx.local_alloc((BM, BN), tl.float16, 2 + TOO_BIG, tlx.storage_kind.tmem,
                              reuse=s_tiles)
    m_tiles = tlx.local_alloc((BM, 1), tl.float32, BN, tlx.storage_kind.tmem, reuse=s_tiles)
    o = tlx.local_view(tlx.local_alloc((BM, BD), tl.float32, 1, tlx.storage_kind.tmem), 0)
    a = tlx.local_view(tlx.local_alloc((BM, BK), tl.float16, 1), 0)
    b = tlx.local_view(tlx.local_alloc((BK, BN), tl.float16, 1), 0)
    v = tlx.local_view(tlx.local_alloc((BN, BD), tl.float16, 1), 0)
    bars = tlx.alloc_barriers(num_barriers=3, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], 2 * (BM * BK + BK * BN + BN * BD))
    tlx.async_descriptor_load(a_desc, a, [0, 0], bars[0])
    tlx.async_descriptor_load(b_desc, b, [0, 0], bars[0])
    tlx.async_descriptor_load(v_desc, v, [0, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    tlx.async_dot(a, b, s_tiles[0], use_acc=False, mBarriers=[bars[1]])
    tlx.barrier_wait(bars[1], 0)
    s = tlx.local_load(s_tiles[0])
    tlx.local_store(p_tiles[1], s.to(tl.float16))
    tlx.local_store(m_tiles[1], tl.max(s, 1)[:, None])
    tlx.async_dot(p_tiles[1], v, o, use_acc=False, mBarriers=[bars[2]])
    tlx.barrier_wait(bars[2], 0)
    rows = tl.arange(0, BM)
    tl.store(out_ptr + rows[:, None] * BD + tl.arange(0, BD)[None, :], tlx.local_load(o))
    tl.store(rowmax_ptr + rows[:, None], tlx.local_load(m_tiles[1]))


@ww.jit
def tmem_overlay_steps(a_desc, b_desc, v_desc, out_ptr, STEPS: tl.constexpr, BM: tl.constexpr,
                       BK: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    # out = sum over steps k of (a_k @ b_k as fp16) @ v_k, with P over S's upper half as in
    # TLX's attention: step k's S MMA overwrites P while step k - 1's PV MMA may still read it,
    # which the tensor core orders (one thread's MMAs run in issue order); the wait for S's
    # commit then covers the PV MMA too (a commit tracks every earlier MMA).
    s_tiles = tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem)
    p_tiles = tlx.local_alloc((BM, BN), tl.float16, 2, tlx.storage_kind.tmem, reuse=s_tiles)
    o = tlx.local_view(tlx.local_alloc((BM, BD), tl.float32, 1, tlx.storage_kind.tmem), 0)
    a = tlx.local_alloc((BM, BK), tl.float16, STEPS)
    b = tlx.local_alloc((BK, BN), tl.float16, STEPS)
    v = tlx.local_alloc((BN, BD), tl.float16, STEPS)
    loaded = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    s_done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    o_done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(loaded[0], 2 * STEPS * (BM * BK + BK * BN + BN * BD))
    for k in tl.static_range(STEPS):
        tlx.async_descriptor_load(a_desc, a[k], [0, k * BK], loaded[0])
        tlx.async_descriptor_load(b_desc, b[k], [k * BK, 0], loaded[0])
        tlx.async_descriptor_load(v_desc, v[k], [k * BN, 0], loaded[0])
    tlx.barrier_wait(loaded[0], 0)
    for k in tl.static_range(STEPS):
        tlx.async_dot(a[k], b[k], s_tiles[0], use_acc=False, mBarriers=[s_done[0]])
        tlx.barrier_wait(s_done[0], k % 2)
        tlx.local_store(p_tiles[1], tlx.local_load(s_tiles[0]).to(tl.float16))
        tlx.async_dot(p_tiles[1], v[k], o, use_acc=k > 0, force_async=True)
    tlx.tcgen05_commit(o_done[0])
    tlx.barrier_wait(o_done[0], 0)
    tl.store(out_ptr + tl.arange(0, BM)[:, None] * BD + tl.arange(0, BD)[None, :],
             tlx.local_load(o))


@ww.jit
def tmem_alias_members(x_ptr, a_desc, b_desc, out_ptr, BN: tl.constexpr):
    """Two tensor-memory members of one storage_alias_spec in distinct places: x is stored into
    one, an MMA's product lands in the other; out = x + 2 * (the product)."""
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.tmem)
    first = tlx.local_alloc((128, BN), tl.float32, 1, tlx.storage_kind.tmem, reuse=spec)
    second = tlx.local_alloc((128, BN), tl.float32, 1, tlx.storage_kind.tmem, reuse=spec)
    spec.set_buffer_overlap(
        tlx.reuse_group(first, second, group_type=tlx.reuse_group_type.distinct))
    offs = tl.arange(0, 128)[:, None] * BN + tl.arange(0, BN)[None, :]
    tlx.local_store(tlx.local_view(first, 0), tl.load(x_ptr + offs))
    a = tlx.local_alloc((128, 16), tl.float16, 1)
    b = tlx.local_alloc((16, BN), tl.float16, 1)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], 2 * (128 + BN) * 16)
    tlx.async_descriptor_load(a_desc, a[0], [0, 0], bar[0])
    tlx.async_descriptor_load(b_desc, b[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tlx.async_dot(a[0], b[0], tlx.local_view(second, 0), use_acc=False, mBarriers=[done[0]])
    tlx.barrier_wait(done[0], 0)
    got = tlx.local_load(tlx.local_view(first, 0))
    got += 2.0 * tlx.local_load(tlx.local_view(second, 0))
    tl.store(out_ptr + offs, got)


@ww.jit
def tmem_alias_subtiles(out_ptr, k):
    """TLX's attention layout of tensor memory in small: QK (2 x [128, 64] fp32) shares its
    columns with P (4 x [128, 32] fp16, two subtiles per QK buffer: group_size=2) and alpha
    (2 x [128, 1] fp32) placed apart from P. QK gets a ramp (1000 j + column), P[i] the value
    i + 1, alpha[j] 100 + j, then P[k] (k at run time) 5; out = QK read back."""
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.tmem)
    qk = tlx.local_alloc((128, 64), tl.float32, 2, tlx.storage_kind.tmem, reuse=spec)
    p = tlx.local_alloc((128, 32), tl.float16, 4, tlx.storage_kind.tmem, reuse=spec)
    alpha = tlx.local_alloc((128, 1), tl.float32, 2, tlx.storage_kind.tmem, reuse=spec)
    spec.set_buffer_overlap(
        tlx.reuse_group(
            qk,
            tlx.reuse_group(tlx.reuse_group(p, group_size=2), alpha,
                            group_type=tlx.reuse_group_type.distinct),
            group_type=tlx.reuse_group_type.shared))
    rows = tl.arange(0, 128)[:, None]
    cols = tl.arange(0, 64)[None, :]
    for j in tl.static_range(2):
        tlx.local_store(qk[j], (1000 * j + cols + 0 * rows).to(tl.float32))
    for i in tl.static_range(4):
        tlx.local_store(p[i], tl.full((128, 32), i + 1, tl.float16))
    for j in tl.static_range(2):
        tlx.local_store(alpha[j], tl.full((128, 1), 100 + j, tl.float32))
    tlx.local_store(p[k], tl.full((128, 32), 5, tl.float16))
    for j in tl.static_range(2):
        tl.store(out_ptr + j * 128 * 64 + rows * 64 + cols, tlx.local_load(qk[j]))


@ww.jit
def tmem_alias_race(a_desc, b_desc, out_ptr, CLASH: tl.constexpr):
    """An MMA writes QK[0] asynchronously; before its barrier is waited for, P[1] (which lies
    over QK[0]'s last 16 columns) or, without CLASH, alpha[1] (within QK[1]) is stored."""
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.tmem)
    qk = tlx.local_alloc((128, 64), tl.float32, 2, tlx.storage_kind.tmem, reuse=spec)
    p = tlx.local_alloc((128, 32), tl.float16, 4, tlx.storage_kind.tmem, reuse=spec)
    alpha = tlx.local_alloc((128, 1), tl.float32, 2, tlx.storage_kind.tmem, reuse=spec)
    spec.set_buffer_overlap(
        tlx.reuse_group(
            qk,
            tlx.reuse_group(tlx.reuse_group(p, group_size=2), alpha,
                            group_type=tlx.reuse_group_type.distinct),
            group_type=tlx.reuse_group_type.shared))
    a = tlx.local_alloc((128, 16), tl.float16, 1)
    b = tlx.local_alloc((16, 64), tl.float16, 1)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], 2 * (128 + 64) * 16)
    tlx.async_descriptor_load(a_desc, a[0], [0, 0], bar[0])
    tlx.async_descriptor_load(b_desc, b[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tlx.async_dot(a[0], b[0], qk[0], use_acc=False, mBarriers=[done[0]])
    if CLASH:
        tlx.local_store(p[1], tl.full((128, 32), 1.0, tl.float16))
    else:
        tlx.local_store(alpha[1], tl.full((128, 1), 1.0, tl.float32))
    tlx.barrier_wait(done[0], 0)
    tl.store(out_ptr + tl.arange(0, 128)[:, None] * 64 + tl.arange(0, 64)[None, :],
             tlx.local_load(qk[0]))
