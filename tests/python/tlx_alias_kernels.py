"""TLX kernels whose buffers share shared memory through tlx.storage_alias_spec and
spec.set_buffer_overlap(tlx.reuse_group(...)), and kernels indexing one element or row of a
buffer view (bufs[0][i]): run by tests/python/test_tlx_storage_alias.py and
tests/python/test_tlx_local_index.py (interpreter and sm_90a PTX)."""

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def alias_same_type(out_ptr, R: tl.constexpr, C: tl.constexpr, DISTINCT: tl.constexpr):
    """Two allocations of 2 x [R, C] fp16 in one spec, shared (same bytes at each index) or
    distinct (disjoint). Writes x[0] = 10, y[1] = 20, x[1] = 30 (after y[1]) and reads back
    y[0], x[1], x[0], y[1] into out[0..3]."""
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.smem)
    x = tlx.local_alloc((R, C), tl.float16, 2, tlx.storage_kind.smem, reuse=spec)
    y = tlx.local_alloc((R, C), tl.float16, 2, reuse=spec)
    if DISTINCT:
        spec.set_buffer_overlap(tlx.reuse_group(x, y, group_type=tlx.reuse_group_type.distinct))
    else:
        spec.set_buffer_overlap(tlx.reuse_group(x, y))
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    tlx.local_store(y[0], tl.full((R, C), -1.0, tl.float16))
    tlx.local_store(x[0], tl.full((R, C), 10.0, tl.float16))
    tlx.local_store(y[1], tl.full((R, C), 20.0, tl.float16))
    tlx.local_store(x[1], tl.full((R, C), 30.0, tl.float16))
    tl.store(out_ptr + offs, tlx.local_load(y[0]))
    tl.store(out_ptr + R * C + offs, tlx.local_load(x[1]))
    tl.store(out_ptr + 2 * R * C + offs, tlx.local_load(x[0]))
    tl.store(out_ptr + 3 * R * C + offs, tlx.local_load(y[1]))


@ww.jit
def alias_wide_narrow(out_ptr, R: tl.constexpr, C: tl.constexpr):
    """A 2 x [R, C] int32 allocation shared with a 2 x [R, C] int16 one: buffer i of the
    narrow one starts where buffer i of the wide one does (its spacing is the wide one's), so
    its elements read the wide buffer's first bytes. The wide buffers hold i * 65536 + 7 + i."""
    spec = tlx.storage_alias_spec()
    wide = tlx.local_alloc((R, C), tl.int32, 2, reuse=spec)
    narrow = tlx.local_alloc((R, C), tl.int16, 2, reuse=spec)
    spec.set_buffer_overlap(tlx.reuse_group(wide, narrow, group_type=tlx.reuse_group_type.shared))
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    for i in tl.static_range(2):
        tlx.local_store(wide[i], tl.full((R, C), i * 65536 + 7 + i, tl.int32))
    for i in tl.static_range(2):
        tl.store(out_ptr + i * R * C + offs, tlx.local_load(narrow[i]).to(tl.int32))


@ww.jit
def alias_nested(out_ptr, R: tl.constexpr, C: tl.constexpr):
    """shared(s [R, C] fp32, distinct(p [R, C] fp16, q [R, C // 2] fp32)): p covers the first
    half of each s buffer, q the second half. s[1] is filled with a ramp; q[1] and p[0] read
    back after p[0] is overwritten (s[0]'s first half changes, q[0] does not)."""
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.smem)
    s = tlx.local_alloc((R, C), tl.float32, 2, reuse=spec)
    p = tlx.local_alloc((R, C), tl.float16, 2, reuse=spec)
    q = tlx.local_alloc((R, C // 2), tl.float32, 2, reuse=spec)
    spec.set_buffer_overlap(
        tlx.reuse_group(s, tlx.reuse_group(p, q, group_type=tlx.reuse_group_type.distinct),
                        group_type=tlx.reuse_group_type.shared))
    rows = tl.arange(0, R)[:, None]
    ramp = (rows * C + tl.arange(0, C)[None, :]).to(tl.float32)
    tlx.local_store(s[0], tl.full((R, C), 5.0, tl.float32))
    tlx.local_store(s[1], ramp)
    tlx.local_store(p[0], tl.full((R, C), 2.0, tl.float16))
    half = rows * (C // 2) + tl.arange(0, C // 2)[None, :]
    tl.store(out_ptr + half, tlx.local_load(q[0]))
    tl.store(out_ptr + R * (C // 2) + half, tlx.local_load(q[1]))
    full = rows * C + tl.arange(0, C)[None, :]
    tl.store(out_ptr + R * C + full, tlx.local_load(s[0]))


@ww.jit
def alias_group_size(out_ptr, R: tl.constexpr, C: tl.constexpr):
    """shared(acc 2 x [R, C] fp32, group(sub 4 x [R, C] fp16, group_size=2)): sub[2j] and
    sub[2j + 1] are the two halves of acc[j]. Each sub buffer gets its index + 1; acc[j] read
    back as int32 shows both halves' bytes."""
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.smem)
    acc = tlx.local_alloc((R, C), tl.int32, 2, reuse=spec)
    sub = tlx.local_alloc((R, C), tl.int16, 4, reuse=spec)
    spec.set_buffer_overlap(
        tlx.reuse_group(acc, tlx.reuse_group(sub, group_size=2),
                        group_type=tlx.reuse_group_type.shared))
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    for i in tl.static_range(4):
        tlx.local_store(sub[i], tl.full((R, C), i + 1, tl.int16))
    for j in tl.static_range(2):
        tl.store(out_ptr + j * R * C + offs, tlx.local_load(acc[j]))


@ww.jit
def alias_no_overlap(out_ptr, N: tl.constexpr):
    """A spec without set_buffer_overlap: both allocations start at the region's start (the
    legacy reuse), so a 1-D fp32 buffer and an int32 one read each other's bits."""
    spec = tlx.storage_alias_spec(buffer_size_bytes=8192)
    f = tlx.local_alloc((N, ), tl.float32, 1, reuse=spec)
    g = tlx.local_alloc((N, ), tl.int32, 1, reuse=spec)
    tlx.local_store(f[0], tl.full((N, ), 1.0, tl.float32))
    tl.store(out_ptr + tl.arange(0, N), tlx.local_load(g[0]))


@ww.jit
def alias_uneven_subtiles(out_ptr, R: tl.constexpr):
    """group_size subtiles that fill only half of their place: TLX gives sub[i] the physical
    index 2 i + (i % 2) of its own buffers (quarters 0, 3, 4, 7 of the two big buffers). big
    holds -1; each sub buffer gets its index + 1; big read back as int32."""
    spec = tlx.storage_alias_spec()
    big = tlx.local_alloc((R, R), tl.int32, 2, reuse=spec)
    sub = tlx.local_alloc((R // 2, R), tl.int16, 4, reuse=spec)
    spec.set_buffer_overlap(tlx.reuse_group(big, tlx.reuse_group(sub, group_size=2)))
    offs = tl.arange(0, R)[:, None] * R + tl.arange(0, R)[None, :]
    for j in tl.static_range(2):
        tlx.local_store(big[j], tl.full((R, R), -1, tl.int32))
    for i in tl.static_range(4):
        tlx.local_store(sub[i], tl.full((R // 2, R), i + 1, tl.int16))
    for j in tl.static_range(2):
        tl.store(out_ptr + j * R * R + offs, tlx.local_load(big[j]))


@ww.jit
def alias_misplaced_member(R: tl.constexpr):
    """A distinct group placing a tile 1 KiB into its place, which is not a whole number of its
    own 8 KiB buffers: TLX refuses it (it indexes a member's own buffers)."""
    spec = tlx.storage_alias_spec()
    small = tlx.local_alloc((R, 8), tl.float16, 2, reuse=spec)
    tile = tlx.local_alloc((R, R), tl.float16, 2, reuse=spec)
    spec.set_buffer_overlap(
        tlx.reuse_group(small, tile, group_type=tlx.reuse_group_type.distinct))
    tlx.local_store(tile[0], tl.zeros((R, R), tl.float16))


@ww.jit
def alias_foreign_buffer(R: tl.constexpr):
    """A reuse_group naming a buffer of no spec: refused."""
    spec = tlx.storage_alias_spec()
    a = tlx.local_alloc((R, R), tl.float16, 2, reuse=spec)
    other = tlx.local_alloc((R, R), tl.float16, 2)
    spec.set_buffer_overlap(tlx.reuse_group(a, other))
    tlx.local_store(a[0], tl.zeros((R, R), tl.float16))


@ww.jit
def alias_small_size(R: tl.constexpr):
    """buffer_size_bytes smaller than the reuse group needs: refused."""
    spec = tlx.storage_alias_spec(buffer_size_bytes=1024)
    a = tlx.local_alloc((R, R), tl.float16, 2, reuse=spec)
    b = tlx.local_alloc((R, R), tl.float32, 2, reuse=spec)
    spec.set_buffer_overlap(tlx.reuse_group(a, b))
    tlx.local_store(a[0], tl.zeros((R, R), tl.float16))


@ww.jit
def alias_storage_mismatch(R: tl.constexpr):
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.tmem)
    a = tlx.local_alloc((R, R), tl.float16, 2, tlx.storage_kind.smem, reuse=spec)
    tlx.local_store(a[0], tl.zeros((R, R), tl.float16))


@ww.jit
def view_element_sum(x_ptr, out_ptr, N: tl.constexpr):
    """out[:] = sum of x[0:N], adding one element view (bufs[0][i], a [1] view) per iteration of
    a run-time loop."""
    offs = tl.arange(0, N)
    bufs = tlx.local_alloc((N, ), tl.float32, 1)
    tlx.local_store(bufs[0], tl.load(x_ptr + offs))
    s = tl.zeros((1, ), dtype=tl.float32)
    for i in range(0, N):
        s += tlx.local_load(bufs[0][i])
    tl.store(out_ptr + offs, tl.broadcast_to(s, (N, )))


@ww.jit
def view_row_copy(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr, NBUF: tl.constexpr):
    """Row views of a 2-D buffer view: out row r = x row (R - 1 - r), read one row at a time
    from buffer NBUF - 1 of NBUF."""
    rows = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    bufs = tlx.local_alloc((R, C), tl.float32, NBUF)
    tile = bufs[NBUF - 1]
    tlx.local_store(tile, tl.load(x_ptr + rows))
    for r in range(0, R):
        row = tlx.local_load(tile[R - 1 - r])
        tl.store(out_ptr + r * C + tl.arange(0, C), row)


@ww.jit
def reinterpret_whole_ring(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    """M buffers of [1, N] int16 reinterpreted as one [1, M * N] tile (the whole allocation):
    filled through the ring's buffers, read back through the tile."""
    ring = tlx.local_alloc((1, N), tl.int16, M)
    cols = tl.arange(0, N)[None, :]
    for k in range(0, M):
        tlx.local_store(ring[k], tl.load(x_ptr + k * N + cols))
    whole = tlx.local_reinterpret(ring, tl.int16, [1, M * N])
    tl.store(out_ptr + tl.arange(0, M * N)[None, :], tlx.local_load(whole))


@ww.jit
def alias_reuse_buffer(out_ptr, R: tl.constexpr, C: tl.constexpr):
    """TLX's reuse= of a shared-memory allocation (its blackwell_fa_ws_pipelined_persistent.py
    puts O over Q so): o and w lie over q from its first byte. q[0] gets 3.0; out[0] is o[0],
    out[1] w[0] (q[0]'s bytes as fp32 pairs of it)."""
    q = tlx.local_alloc((R, C), tl.float16, 2)
    o = tlx.local_alloc((R, C), tl.float16, 1, reuse=q)
    w = tlx.local_alloc((R, C // 2), tl.float32, 1, reuse=q)
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    half = tl.arange(0, R)[:, None] * (C // 2) + tl.arange(0, C // 2)[None, :]
    tlx.local_store(q[0], tl.full((R, C), 3.0, tl.float16))
    tl.store(out_ptr + offs, tlx.local_load(o[0]).to(tl.float32))
    tl.store(out_ptr + R * C + half, tlx.local_load(w[0]))
