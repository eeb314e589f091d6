"""TLX kernels with tlx.local_gather / tlx.local_scatter (shared-memory accesses at run-time
indices along one axis): run by tests/python/test_tlx_gather_scatter.py (interpreter, PTX) and
tests/gpu/test_tlx_gather_scatter_gpu.py (H200)."""

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def gather_2d(x_ptr, idx_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr, IR: tl.constexpr,
              IC: tl.constexpr, AXIS: tl.constexpr):
    """x [R, C] staged in shared memory; out[i, j] = x[idx[i, j], j] (AXIS 0) or x[i, idx[i, j]]
    (AXIS 1), for idx and out of shape [IR, IC]."""
    xo = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    buf = tlx.local_alloc((R, C), tlx.dtype_of(x_ptr), 1)
    tlx.local_store(buf[0], tl.load(x_ptr + xo))
    io = tl.arange(0, IR)[:, None] * IC + tl.arange(0, IC)[None, :]
    got = tlx.local_gather(buf[0], tl.load(idx_ptr + io), AXIS)
    tl.store(out_ptr + io, got)


@ww.jit
def scatter_2d(x_ptr, idx_ptr, v_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr,
               IR: tl.constexpr, IC: tl.constexpr, AXIS: tl.constexpr):
    """A shared [R, C] tile holding x, then values v [IR, IC] scattered into it along AXIS at
    idx [IR, IC]; the tile read back to out."""
    xo = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    buf = tlx.local_alloc((R, C), tlx.dtype_of(x_ptr), 1)
    tlx.local_store(buf[0], tl.load(x_ptr + xo))
    io = tl.arange(0, IR)[:, None] * IC + tl.arange(0, IC)[None, :]
    tlx.local_scatter(buf[0], tl.load(v_ptr + io), tl.load(idx_ptr + io), axis=AXIS)
    tl.store(out_ptr + xo, tlx.local_load(buf[0]))


@ww.jit
def gather_1d(x_ptr, idx_ptr, out_ptr, N: tl.constexpr, K: tl.constexpr):
    """out[k] = x[idx[k]] for a shared [N] buffer and K indices (the second of two buffers,
    so the view's register is not the allocation's start)."""
    bufs = tlx.local_alloc((N, ), tlx.dtype_of(x_ptr), 2)
    tlx.local_store(bufs[1], tl.load(x_ptr + tl.arange(0, N)))
    k = tl.arange(0, K)
    tl.store(out_ptr + k, tlx.local_gather(bufs[1], tl.load(idx_ptr + k), axis=0))


@ww.jit
def scatter_gather_3d(x_ptr, idx_ptr, out_ptr, N: tl.constexpr, M: tl.constexpr,
                      P: tl.constexpr, AXIS: tl.constexpr):
    """A zeroed [N, M, P] tile; x scattered into it along AXIS at idx (a permutation along the
    axis), then gathered back at the same idx into out (so out == x) and the tile written after
    it: out holds [gathered, tile]."""
    o = (tl.arange(0, N)[:, None, None] * (M * P) + tl.arange(0, M)[None, :, None] * P +
         tl.arange(0, P)[None, None, :])
    buf = tlx.local_alloc((N, M, P), tl.float32, 1)
    tlx.local_store(buf[0], tl.zeros([N, M, P], tl.float32))
    idx = tl.load(idx_ptr + o)
    tlx.local_scatter(buf[0], tl.load(x_ptr + o), idx, AXIS)
    tl.store(out_ptr + o, tlx.local_gather(buf[0], idx, AXIS))
    tl.store(out_ptr + N * M * P + o, tlx.local_load(buf[0]))


@ww.jit
def tma_then_gather(desc, idx_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    """A [R, C] fp16 tile brought by TMA (so its buffer is swizzled), gathered along rows:
    out[i, j] = tile[idx[i, j], j]."""
    buf = tlx.local_alloc((R, C), tl.float16, 1)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], R * C * 2)
    tlx.async_descriptor_load(desc, buf[0], [0, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    io = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    tl.store(out_ptr + io, tlx.local_gather(buf[0], tl.load(idx_ptr + io), 0))
