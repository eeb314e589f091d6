"""Kernels for test_big_tiles.py (and tests/gpu/test_big_tiles_gpu.py): tiles larger than one
piece of hardware moves at once. A tl.dot of operands staged through TLX buffers whose result is
too large to convert through shared memory in one piece, and TMA copies of blocks with more than
256 elements along a dimension (several boxes per copy)."""

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def staged_dot(a, b, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c[BM, BN] = a[BM, BK] @ b[BK, BN]: both operands pass through a TLX buffer
    (local_store, then local_load) before the dot; the result is stored as c's type."""
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    ks = tl.arange(0, BK)
    sa = tlx.local_alloc((BM, BK), tlx.dtype_of(a), 1)[0]
    sb = tlx.local_alloc((BK, BN), tlx.dtype_of(b), 1)[0]
    tlx.local_store(sa, tl.load(a + rows[:, None] * BK + ks[None, :]))
    tlx.local_store(sb, tl.load(b + ks[:, None] * BN + cols[None, :]))
    acc = tl.dot(tlx.local_load(sa), tlx.local_load(sb))
    tl.store(c + rows[:, None] * BN + cols[None, :], acc.to(tlx.dtype_of(c)))


@ww.jit
def plain_dot(a, b, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c = a @ b with register operands, stored as c's type."""
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    ks = tl.arange(0, BK)
    x = tl.load(a + rows[:, None] * BK + ks[None, :])
    y = tl.load(b + ks[:, None] * BN + cols[None, :])
    tl.store(c + rows[:, None] * BN + cols[None, :], tl.dot(x, y).to(tlx.dtype_of(c)))


@ww.jit
def transpose_copy(x, y, M: tl.constexpr, N: tl.constexpr):
    """y[N, M] = x[M, N] transposed: a layout change of the whole tile."""
    rows = tl.arange(0, M)
    cols = tl.arange(0, N)
    t = tl.load(x + rows[:, None] * N + cols[None, :])
    tl.store(y + cols[None, :] * M + rows[:, None], t)


@ww.jit
def row_gather_device_desc(x, y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """Each program moves BM rows of BN elements of x (viewed as one row of M * N) into y in
    one TMA load and one TMA store of a [1, BM * BN] block, through BM buffers of [1, BN]
    viewed as one; descriptors made in the kernel."""
    dt: tl.constexpr = tlx.dtype_of(x)
    src = tl.make_tensor_descriptor(x, shape=[1, M * N], strides=[M * N, 1],
                                    block_shape=[1, BM * BN])
    dst = tl.make_tensor_descriptor(y, shape=[1, M * N], strides=[M * N, 1],
                                    block_shape=[1, BM * BN])
    bufs_in = tlx.local_alloc((1, BN), dt, BM)
    bufs_out = tlx.local_alloc((1, BN), dt, BM)
    bar = tlx.alloc_barriers(1)[0]
    start = tl.program_id(0) * BM * N + tl.program_id(1) * BN
    tlx.barrier_expect_bytes(bar, BM * BN * tlx.size_of(dt))
    tlx.async_descriptor_load(src, tlx.local_reinterpret(bufs_in, dt, [1, BM * BN]), [0, start],
                              bar)
    tlx.barrier_wait(bar, 0)
    for k in range(0, BM):
        # Row k doubled, so that a copy that skipped the registers would be caught.
        v = tlx.local_load(tlx.local_view(bufs_in, k))
        tlx.local_store(tlx.local_view(bufs_out, k), v + v)
    tlx.async_descriptor_store(dst, tlx.local_reinterpret(bufs_out, dt, [1, BM * BN]), [0, start])
    tlx.async_descriptor_store_wait(0)


@ww.jit
def _tile_plus_one(src, dst, BM: tl.constexpr, BN: tl.constexpr):
    """Loads this program's [BM, BN] tile through src with TMA, adds 1 in registers and stores it
    through dst with TMA."""
    dt: tl.constexpr = tlx.dtype_of(src)
    tile = tlx.local_alloc((BM, BN), dt, 1)[0]
    bar = tlx.alloc_barriers(1)[0]
    row = tl.program_id(0) * BM
    col = tl.program_id(1) * BN
    tlx.barrier_expect_bytes(bar, BM * BN * tlx.size_of(dt))
    tlx.async_descriptor_load(src, tile, [row, col], bar)
    tlx.barrier_wait(bar, 0)
    tlx.local_store(tile, tlx.local_load(tile) + 1)
    tlx.fence("async_shared")
    tlx.async_descriptor_store(dst, tile, [row, col])
    tlx.async_descriptor_store_wait(0)


@ww.jit
def tile_round_trip_device_desc(x, y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """_tile_plus_one through descriptors made here."""
    src = tl.make_tensor_descriptor(x, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(y, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    _tile_plus_one(src, dst, BM, BN)


@ww.jit
def tile_round_trip_host_desc(src, dst, BM: tl.constexpr, BN: tl.constexpr):
    """_tile_plus_one through host descriptors."""
    _tile_plus_one(src, dst, BM, BN)
