"""Kernels carrying buffer and barrier views through run-time loops (a view chosen at the end of
one iteration is used at the start of the next, and after the loop), as TLX's GDPA tutorial
carries its V tile: for tests/python/test_tlx_carried_views.py."""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx


@ww.jit
def carried_ring(x_ptr, out_ptr, steps, N: tl.constexpr):
    """Iteration i stores x + i into the slot of a two-slot ring its predecessor chose; out[0..1]
    are the slots read directly afterwards, out[2] the slot the loop left chosen."""
    ring = tlx.local_alloc((N, N), tl.float32, 2)
    offs = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    view = ring[0]
    for i in range(0, steps):
        tlx.local_store(view, x + i)
        view = ring[(i + 1) % 2]
    tl.store(out_ptr + offs, tlx.local_load(ring[0]))
    tl.store(out_ptr + N * N + offs, tlx.local_load(ring[1]))
    tl.store(out_ptr + 2 * N * N + offs, tlx.local_load(view))


@ww.jit
def carried_wgmma(a_desc, b_desc, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):
    """C = A @ B through two slots whose views (and barrier) each iteration picks for the next:
    TMA loads and wgmma read the carried views (sm_90a)."""
    a_tiles = tlx.local_alloc((BM, BK), tl.float16, 2)
    b_tiles = tlx.local_alloc((BK, BN), tl.float16, 2)
    loaded = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    a_view = a_tiles[0]
    b_view = b_tiles[0]
    bar = loaded[0]
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        tlx.barrier_expect_bytes(bar, 2 * (BM + BN) * BK)
        tlx.async_descriptor_load(a_desc, a_view, [0, k * BK], bar)
        tlx.async_descriptor_load(b_desc, b_view, [k * BK, 0], bar)
        tlx.barrier_wait(bar, (k // 2) & 1)
        acc = tlx.async_dot(a_view, b_view, acc)
        acc = tlx.async_dot_wait(0, acc)
        a_view = a_tiles[(k + 1) % 2]
        b_view = b_tiles[(k + 1) % 2]
        bar = loaded[(k + 1) % 2]
    tl.store(c_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], acc)


@ww.jit
def carried_tcgen05(a_desc, b_desc, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr,
                    BK: tl.constexpr):
    """C = A @ B accumulated in tensor memory by tcgen05 MMAs reading carried views; each MMA's
    completion barrier is carried too (sm_100a)."""
    a_tiles = tlx.local_alloc((BM, BK), tl.float16, 2)
    b_tiles = tlx.local_alloc((BK, BN), tl.float16, 2)
    acc = tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem)[0]
    loaded = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    mma_done = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    all_done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    a_view = a_tiles[0]
    b_view = b_tiles[0]
    bar = loaded[0]
    done = mma_done[0]
    for k in range(0, tl.cdiv(K, BK)):
        if k >= 2:
            tlx.barrier_wait(done, ((k - 2) // 2) & 1)  # the MMA that read this slot before
        tlx.barrier_expect_bytes(bar, 2 * (BM + BN) * BK)
        tlx.async_descriptor_load(a_desc, a_view, [0, k * BK], bar)
        tlx.async_descriptor_load(b_desc, b_view, [k * BK, 0], bar)
        tlx.barrier_wait(bar, (k // 2) & 1)
        tlx.async_dot(a_view, b_view, acc, use_acc=k > 0, mBarriers=[done])
        a_view = a_tiles[(k + 1) % 2]
        b_view = b_tiles[(k + 1) % 2]
        bar = loaded[(k + 1) % 2]
        done = mma_done[(k + 1) % 2]
    tlx.tcgen05_commit(all_done[0])
    tlx.barrier_wait(all_done[0], 0)
    tl.store(c_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :],
             tlx.local_load(acc))
