"""TLX kernels using views (local_slice, local_reinterpret, local_trans), clusters and replica
ids: run by tests/python/test_tlx_features.py (interpreter, PTX) and tests/gpu/
test_tlx_features_gpu.py (H200)."""

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def slice_load(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr, OR: tl.constexpr,
               OC: tl.constexpr, SR: tl.constexpr, SC: tl.constexpr):
    """The whole [R, C] tile stored, a [SR, SC] slice at (OR, OC) loaded back."""
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    buf = tlx.local_alloc((R, C), tl.float16, 1)
    tlx.local_store(buf[0], tl.load(x_ptr + offs))
    part = tlx.local_slice(buf[0], [OR, OC], [SR, SC])
    so = tl.arange(0, SR)[:, None] * SC + tl.arange(0, SC)[None, :]
    tl.store(out_ptr + so, tlx.local_load(part))


@ww.jit
def slice_store(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr, SR: tl.constexpr,
                SC: tl.constexpr):
    """The tile assembled from slices: quadrant (i, j) of out comes from x's quadrant
    (1 - i, 1 - j) (x is [R, C], each quadrant [SR, SC] = [R / 2, C / 2])."""
    buf = tlx.local_alloc((R, C), tl.float16, 1)
    so = tl.arange(0, SR)[:, None] * C + tl.arange(0, SC)[None, :]
    for i in tl.static_range(2):
        for j in tl.static_range(2):
            src = x_ptr + (1 - i) * SR * C + (1 - j) * SC + so
            tlx.local_store(tlx.local_slice(buf[0], [i * SR, j * SC], [SR, SC]), tl.load(src))
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    tl.store(out_ptr + offs, tlx.local_load(buf[0]))


@ww.jit
def reinterpret_load(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr, R2: tl.constexpr,
                     C2: tl.constexpr):
    """fp32 [R, C] stored, read back as int16 [R2, C2] (the same bytes, row-major)."""
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    buf = tlx.local_alloc((R, C), tl.float32, 1)
    tlx.local_store(buf[0], tl.load(x_ptr + offs))
    view = tlx.local_reinterpret(buf[0], tl.int16, [R2, C2])
    o2 = tl.arange(0, R2)[:, None] * C2 + tl.arange(0, C2)[None, :]
    tl.store(out_ptr + o2, tlx.local_load(view))


@ww.jit
def reinterpret_store(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    """int32 [R, C] written through an fp32 view of an int32 buffer (bits kept), read as int32."""
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    bufs = tlx.local_alloc((R, C), tl.int32, 2)
    as_float = tlx.local_reinterpret(bufs, tl.float32)
    tlx.local_store(as_float[1], tl.load(x_ptr + offs))
    tl.store(out_ptr + offs, tlx.local_load(bufs[1]))


@ww.jit
def trans_load(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    """x [R, C] stored, read back transposed through local_trans."""
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    buf = tlx.local_alloc((R, C), tl.float16, 1)
    tlx.local_store(buf[0], tl.load(x_ptr + offs))
    t = tlx.local_load(tlx.local_trans(buf[0]))
    ot = tl.arange(0, C)[:, None] * R + tl.arange(0, R)[None, :]
    tl.store(out_ptr + ot, t)


@ww.jit
def cluster_info(out_ptr):
    """Each CTA writes (rank, size) of its cluster; CTA 0 of each cluster arrives on CTA 1's
    barrier and the other way round, each waits on its own."""
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    rank = tlx.cluster_cta_rank()
    size = tlx.cluster_size_1d()
    tlx.barrier_arrive(bars[0], 1, remote_cta_rank=(rank + 1) % size)
    tlx.barrier_wait(bars[0], 0)
    pid = tl.program_id(0)
    tl.store(out_ptr + 2 * pid, rank)
    tl.store(out_ptr + 2 * pid + 1, size)
    tlx.cluster_barrier()


@ww.jit
def cluster_barrier_in_task(out_ptr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(out_ptr, 1)
        with tlx.async_task(num_warps=4):
            tlx.cluster_barrier()


@ww.jit
def replica_ids(out_ptr, N: tl.constexpr):
    """Each consumer replica writes its id (a constexpr) over its own row."""
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4, replicate=3):
            r: tl.constexpr = tlx.async_task_replica_id()
            tl.store(out_ptr + r * N + tl.arange(0, N), tl.full([N], r * 10 + 1, tl.int32))


@ww.jit
def replica_ids_from_group(out_ptr, N: tl.constexpr):
    """Replicas placed from warp 8 on (warp_group_start_id counts warps, as in TLX): side by
    side from there."""
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4, replicate=2, warp_group_start_id=8):
            r: tl.constexpr = tlx.async_task_replica_id()
            tl.store(out_ptr + r * N + tl.arange(0, N), tl.full([N], r * 10 + 1, tl.int32))


@ww.jit
def arrive_once_per_task(out_ptr, N: tl.constexpr, COUNT: tl.constexpr):
    """A plain barrier_arrive counts once per task (here the whole CTA), whatever its warps."""
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=COUNT)
    bar = tlx.local_view(bars, 0)
    tlx.barrier_arrive(bar)
    tlx.barrier_wait(bar, 0)
    tl.store(out_ptr + tl.arange(0, N), tl.full([N], 1, tl.int32))


@ww.jit
def arrive_from_wide_task(out_ptr, N: tl.constexpr):
    """An 8-warp task and a 4-warp task each arrive once on a count-2 barrier; the default task
    waits for both."""
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=2)
    bar = tlx.local_view(bars, 0)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(bar, 0)
            tl.store(out_ptr + tl.arange(0, N), tl.full([N], 1, tl.int32))
        with tlx.async_task(num_warps=8):
            tlx.barrier_arrive(bar)
        with tlx.async_task(num_warps=4):
            tlx.barrier_arrive(bar)


@ww.jit
def tma_through_slice(in_desc, out_desc, R: tl.constexpr, C: tl.constexpr, OR: tl.constexpr,
                      OC: tl.constexpr, SR: tl.constexpr, SC: tl.constexpr):
    """A TMA load into a slice of a bigger buffer, stored back from that slice."""
    buf = tlx.local_alloc((R, C), tl.float16, 1)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    part = tlx.local_slice(buf[0], [OR, OC], [SR, SC])
    tlx.barrier_expect_bytes(bar[0], SR * SC * 2)
    tlx.async_descriptor_load(in_desc, part, [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tlx.async_descriptor_store(out_desc, part, [0, 0])
    tlx.async_descriptor_store_wait(0)


@ww.jit
def async_dot_rows_of_a(a_desc, b_desc, c_ptr, M: tl.constexpr, N: tl.constexpr,
                        K: tl.constexpr):
    """A is the lower half of a [2M, K] buffer; B [K, N]."""
    a = tlx.local_alloc((2 * M, K), tl.float16, 1)
    b = tlx.local_alloc((K, N), tl.float16, 1)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    a_lo = tlx.local_slice(a[0], [M, 0], [M, K])
    tlx.barrier_expect_bytes(bar[0], (M * K + K * N) * 2)
    tlx.async_descriptor_load(a_desc, a_lo, [0, 0], bar[0])
    tlx.async_descriptor_load(b_desc, b[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    acc = tlx.async_dot(a_lo, b[0])
    acc = tlx.async_dot_wait(0, acc)
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(c_ptr + offs, acc)


@ww.jit
def cluster_exchange(x_ptr, out_ptr, N: tl.constexpr):
    """Each CTA writes x + its program id to its row of out, meets its cluster at
    cluster_barrier, then adds its peer's row (written before the barrier) to its own."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    peer = pid - rank + (rank + 1) % tlx.cluster_size_1d()
    offs = tl.arange(0, N)
    mine = tl.load(x_ptr + offs) + pid
    tl.store(out_ptr + pid * N + offs, mine)
    tlx.cluster_barrier()
    theirs = tl.load(out_ptr + peer * N + offs)
    tlx.cluster_barrier()
    tl.store(out_ptr + pid * N + offs, mine * 1000 + theirs)


@ww.jit
def tma_then_slice_load(in_desc, out_ptr, R: tl.constexpr, C: tl.constexpr, OR: tl.constexpr,
                        OC: tl.constexpr, SR: tl.constexpr, SC: tl.constexpr):
    """A TMA load of the whole tile (swizzled by the hardware), a slice read by local_load."""
    buf = tlx.local_alloc((R, C), tl.float16, 1)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], R * C * 2)
    tlx.async_descriptor_load(in_desc, buf[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    part = tlx.local_slice(buf[0], [OR, OC], [SR, SC])
    so = tl.arange(0, SR)[:, None] * SC + tl.arange(0, SC)[None, :]
    tl.store(out_ptr + so, tlx.local_load(part))


@ww.jit
def slice_store_then_tma(x_ptr, out_desc, R: tl.constexpr, C: tl.constexpr, SR: tl.constexpr,
                         SC: tl.constexpr):
    """Quadrants swapped as in slice_store, then the whole buffer stored by TMA (which reads
    the hardware's swizzle)."""
    buf = tlx.local_alloc((R, C), tl.float16, 1)
    so = tl.arange(0, SR)[:, None] * C + tl.arange(0, SC)[None, :]
    for i in tl.static_range(2):
        for j in tl.static_range(2):
            src = x_ptr + (1 - i) * SR * C + (1 - j) * SC + so
            tlx.local_store(tlx.local_slice(buf[0], [i * SR, j * SC], [SR, SC]), tl.load(src))
    tlx.fence_async_shared()
    tlx.async_descriptor_store(out_desc, buf[0], [0, 0])
    tlx.async_descriptor_store_wait(0)


@ww.jit
def view_zoo(x_ptr, row_ptr, wide_ptr, flat_ptr, ROW: tl.constexpr):
    """One [64, 64] fp16 tile read back through a one-row slice, an fp64 [64, 16] and a flat
    int8 [8192] reinterpretation."""
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    buf = tlx.local_alloc((64, 64), tl.float16, 1)
    tlx.local_store(buf[0], tl.load(x_ptr + offs))
    row = tlx.local_load(tlx.local_slice(buf[0], [ROW, 0], [1, 64]))
    tl.store(row_ptr + tl.arange(0, 1)[:, None] * 64 + tl.arange(0, 64)[None, :], row)
    wide = tlx.local_load(tlx.local_reinterpret(buf[0], tl.float64, [64, 16]))
    tl.store(wide_ptr + tl.arange(0, 64)[:, None] * 16 + tl.arange(0, 16)[None, :], wide)
    flat = tlx.local_load(tlx.local_reinterpret(buf[0], tl.int8, [8192]))
    tl.store(flat_ptr + tl.arange(0, 8192), flat)


@ww.jit
def slice_of_3d_transposed(x_ptr, out_ptr):
    """x [4, 16, 16] fp32; out [16, 2, 8] = x[2:4, 8:16, :] with dims (2, 0, 1)."""
    offs = (tl.arange(0, 4)[:, None, None] * 256 + tl.arange(0, 16)[None, :, None] * 16
            + tl.arange(0, 16)[None, None, :])
    buf = tlx.local_alloc((4, 16, 16), tl.float32, 1)
    tlx.local_store(buf[0], tl.load(x_ptr + offs))
    part = tlx.local_slice(buf[0], [2, 8, 0], [2, 8, 16])
    t = tlx.local_load(tlx.local_trans(part, (2, 0, 1)))
    o2 = (tl.arange(0, 16)[:, None, None] * 16 + tl.arange(0, 2)[None, :, None] * 8
          + tl.arange(0, 8)[None, None, :])
    tl.store(out_ptr + o2, t)


@ww.jit
def cluster_barrier_in_loop(out_ptr, n):
    """cluster_barrier under run-time control flow (every CTA runs the same trip count)."""
    for i in range(n):
        tlx.cluster_barrier()
    tl.store(out_ptr + tl.program_id(0), tlx.cluster_cta_rank())
