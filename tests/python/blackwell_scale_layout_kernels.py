"""Small Blackwell kernels of our own for tests/python/test_blackwell_scale_layouts.py: block
scales of tlx.async_dot_scaled in the layouts TLX's own unit tests use beyond the [128 or N, cols]
tiles of blackwell_scaled_kernels.py: tensor-memory scale tiles of other shapes (64 rows for B of
N <= 64, more rows and fewer scales than the MMA reads, more scales than it reads), subslices of
them, tlx.tmem_copy of TLX's [32 n, 16] form, and shared-memory scales as [rows / 128, cols / 4,
2, 256] tiles."""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx


@ww.jit
def scales_round_trip(in_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    # A [R, C] uint8 tile stored into a tensor-memory scale tile and loaded back.
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    s = tlx.local_view(tlx.local_alloc((R, C), tl.uint8, 1, tlx.storage_kind.tmem), 0)
    tlx.local_store(s, tl.load(in_ptr + offs))
    tl.store(out_ptr + offs, tlx.local_load(s))


@ww.jit
def copy_chunk_rows(in_ptr, out_ptr, N_CHUNKS: tl.constexpr):
    # TLX's unit-test form of tmem_copy: a [32 n, 16] shared-memory tile (n chunks of the cuBLAS
    # layout) into a [128, 16 n] scale tile first filled with 0xEE; the tile read back after.
    CHUNK_ROWS: tl.constexpr = 32 * N_CHUNKS
    COLS: tl.constexpr = 16 * N_CHUNKS
    src = tlx.local_view(tlx.local_alloc((CHUNK_ROWS, 16), tl.uint8, 1), 0)
    dst = tlx.local_view(tlx.local_alloc((128, COLS), tl.uint8, 1, tlx.storage_kind.tmem), 0)
    done = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    tlx.local_store(src, tl.load(in_ptr + tl.arange(0, CHUNK_ROWS)[:, None] * 16 +
                                 tl.arange(0, 16)[None, :]))
    tlx.local_store(dst, tl.full((128, COLS), 0xEE, tl.uint8))
    tlx.fence("async_shared")
    tlx.tmem_copy(src, dst)
    tlx.tcgen05_commit(done)
    tlx.barrier_wait(done, 0)
    offs = tl.arange(0, 128)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    tl.store(out_ptr + offs, tlx.local_load(dst))


@ww.jit
def mma_tmem_scales(a_ptr, b_desc, sa_ptr, sb_ptr, c_ptr, K: tl.constexpr, N: tl.constexpr,
                    SA_R: tl.constexpr, SA_C: tl.constexpr, SB_R: tl.constexpr,
                    SB_C: tl.constexpr, NUM: tl.constexpr = 1):
    # A (fp8, from registers into tensor memory) times B ([N, K] by TMA, through local_trans),
    # the scales stored from registers into tensor-memory tiles of the shapes given ([SA_R, SA_C]
    # and [SB_R, SB_C], the last of NUM buffers), whatever the MMA reads of their columns.
    rows = tl.arange(0, 128)
    a = tl.load(a_ptr + rows[:, None] * K + tl.arange(0, K)[None, :])
    sa = tl.load(sa_ptr + tl.arange(0, SA_R)[:, None] * SA_C + tl.arange(0, SA_C)[None, :])
    sb = tl.load(sb_ptr + tl.arange(0, SB_R)[:, None] * SB_C + tl.arange(0, SB_C)[None, :])
    a_tm = tlx.local_view(tlx.local_alloc((128, K), tlx.dtype_of(b_desc), 1, tlx.storage_kind.tmem), 0)
    sa_tm = tlx.local_alloc((SA_R, SA_C), tl.uint8, NUM, tlx.storage_kind.tmem)[NUM - 1]
    sb_tm = tlx.local_alloc((SB_R, SB_C), tl.uint8, NUM, tlx.storage_kind.tmem)[NUM - 1]
    acc = tlx.local_view(tlx.local_alloc((128, N), tl.float32, 1, tlx.storage_kind.tmem), 0)
    b_t = tlx.local_view(tlx.local_alloc((N, K), tlx.dtype_of(b_desc), 1), 0)
    bar = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    done = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    tlx.barrier_expect_bytes(bar, N * K)
    tlx.async_descriptor_load(b_desc, b_t, [0, 0], bar)
    tlx.local_store(a_tm, a.to(tlx.dtype_of(b_desc)))
    tlx.local_store(sa_tm, sa)
    tlx.local_store(sb_tm, sb)
    tlx.barrier_wait(bar, 0)
    tlx.async_dot_scaled(a_tm, tlx.local_trans(b_t), acc, sa_tm, "e4m3", sb_tm, "e4m3",
                         use_acc=False, mBarriers=[done])
    tlx.barrier_wait(done, 0)
    tl.store(c_ptr + rows[:, None] * N + tl.arange(0, N)[None, :], tlx.local_load(acc))


@ww.jit
def mma_subslice_scales(a_desc, b_desc, sa_desc, sb_desc, c_ptr, K: tl.constexpr,
                        N: tl.constexpr):
    # A's [128, K / 32] scale tile filled by one tmem_copy per half (into tlx.subslice's of it),
    # B's by one whole copy; then one MMA over all of K.
    HALF: tl.constexpr = K // 64
    RK: tl.constexpr = K // 128
    a_t = tlx.local_view(tlx.local_alloc((128, K), tl.float8e4nv, 1), 0)
    b_t = tlx.local_view(tlx.local_alloc((N, K), tl.float8e4nv, 1), 0)
    sa_lo = tlx.local_view(tlx.local_alloc((1, 1, RK // 2, 2, 256), tl.uint8, 1), 0)
    sa_hi = tlx.local_view(tlx.local_alloc((1, 1, RK // 2, 2, 256), tl.uint8, 1), 0)
    sb_t = tlx.local_view(tlx.local_alloc((1, 1, RK, 2, 256), tl.uint8, 1), 0)
    sa_tm = tlx.local_view(tlx.local_alloc((128, K // 32), tl.uint8, 1, tlx.storage_kind.tmem), 0)
    sb_tm = tlx.local_view(tlx.local_alloc((128, K // 32), tl.uint8, 1, tlx.storage_kind.tmem), 0)
    acc = tlx.local_view(tlx.local_alloc((128, N), tl.float32, 1, tlx.storage_kind.tmem), 0)
    bar = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    done = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    tlx.barrier_expect_bytes(bar, (128 + N) * K + 2 * RK * 512)
    tlx.async_descriptor_load(a_desc, a_t, [0, 0], bar)
    tlx.async_descriptor_load(b_desc, b_t, [0, 0], bar)
    tlx.async_descriptor_load(sa_desc, sa_lo, [0, 0, 0, 0, 0], bar)
    tlx.async_descriptor_load(sa_desc, sa_hi, [0, 0, RK // 2, 0, 0], bar)
    tlx.async_descriptor_load(sb_desc, sb_t, [0, 0, 0, 0, 0], bar)
    tlx.barrier_wait(bar, 0)
    tlx.tmem_copy(sa_lo, tlx.subslice(sa_tm, 0, HALF))
    tlx.tmem_copy(sa_hi, tlx.subslice(sa_tm, HALF, HALF))
    tlx.tmem_copy(sb_t, sb_tm)
    tlx.async_dot_scaled(a_t, tlx.local_trans(b_t), acc, sa_tm, "e4m3", sb_tm, "e4m3",
                         use_acc=False, mBarriers=[done])
    tlx.barrier_wait(done, 0)
    rows = tl.arange(0, 128)
    tl.store(c_ptr + rows[:, None] * N + tl.arange(0, N)[None, :], tlx.local_load(acc))


@ww.jit
def mma_4d_smem_scales(a_desc, b_desc, sa_desc, sb_desc, c_ptr, K: tl.constexpr,
                       N: tl.constexpr):
    # Scales in shared memory as [rows / 128, cols / 4, 2, 256] tiles (4-D TMA boxes), read by
    # the MMA (which copies them into tensor memory itself).
    RK: tl.constexpr = K // 128
    RN: tl.constexpr = (N + 127) // 128
    a_t = tlx.local_view(tlx.local_alloc((128, K), tl.float8e4nv, 1), 0)
    b_t = tlx.local_view(tlx.local_alloc((N, K), tl.float8e4nv, 1), 0)
    sa_t = tlx.local_view(tlx.local_alloc((1, RK, 2, 256), tl.uint8, 1), 0)
    sb_t = tlx.local_view(tlx.local_alloc((RN, RK, 2, 256), tl.uint8, 1), 0)
    acc = tlx.local_view(tlx.local_alloc((128, N), tl.float32, 1, tlx.storage_kind.tmem), 0)
    bar = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    done = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    tlx.barrier_expect_bytes(bar, (128 + N) * K + (1 + RN) * RK * 512)
    tlx.async_descriptor_load(a_desc, a_t, [0, 0], bar)
    tlx.async_descriptor_load(b_desc, b_t, [0, 0], bar)
    tlx.async_descriptor_load(sa_desc, sa_t, [0, 0, 0, 0], bar)
    tlx.async_descriptor_load(sb_desc, sb_t, [0, 0, 0, 0], bar)
    tlx.barrier_wait(bar, 0)
    tlx.async_dot_scaled(a_t, tlx.local_trans(b_t), acc, sa_t, "e4m3", sb_t, "e4m3",
                         use_acc=False, mBarriers=[done])
    tlx.barrier_wait(done, 0)
    rows = tl.arange(0, 128)
    tl.store(c_ptr + rows[:, None] * N + tl.arange(0, N)[None, :], tlx.local_load(acc))
