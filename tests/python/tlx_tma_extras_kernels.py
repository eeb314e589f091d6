"""Kernels for test_tlx_tma_extras.py: prefetch hints, TMA through descriptors built in the
kernel (with L2 cache hints), TLX's descriptor slots, descriptors captured by async tasks and
1-D bulk copies."""

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def prefetch_then_copy(src, dst, n, BLOCK: tl.constexpr, LEVEL: tl.constexpr,
                       MASKED: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    if MASKED:
        tlx.prefetch(src + offs, level=LEVEL, mask=inside)
    else:
        tlx.prefetch(src + offs, level=LEVEL)
    tl.store(dst + offs, tl.load(src + offs, mask=inside), mask=inside)


@ww.jit
def prefetch_scalar(src, dst):
    tlx.prefetch(src)
    tl.store(dst, tl.load(src) * 2)


@ww.jit
def tile_copy_device_desc(x, y, M, N, BM: tl.constexpr, BN: tl.constexpr,
                          PREFETCH: tl.constexpr, MAP_PREFETCH: tl.constexpr,
                          LOAD_HINT: tl.constexpr, STORE_HINT: tl.constexpr):
    """Each program moves one [BM, BN] tile of x into y through shared memory with TMA, through
    descriptors made here."""
    dt: tl.constexpr = tlx.dtype_of(x)
    src = tl.make_tensor_descriptor(x, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(y, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    if MAP_PREFETCH:
        tlx.prefetch(src, tensormap=True)
        tlx.prefetch(dst, tensormap=True)
    tile = tlx.local_alloc((BM, BN), dt, 1)[0]
    full = tlx.alloc_barriers(1)[0]
    row = tl.program_id(0) * BM
    col = tl.program_id(1) * BN
    if PREFETCH:
        tlx.async_descriptor_prefetch_tensor(src, [row, col], eviction_policy=LOAD_HINT)
    tlx.barrier_expect_bytes(full, BM * BN * tlx.size_of(dt))
    tlx.async_descriptor_load(src, tile, [row, col], full, eviction_policy=LOAD_HINT)
    tlx.barrier_wait(full, 0)
    tlx.fence("async_shared")
    tlx.async_descriptor_store(dst, tile, [row, col], eviction_policy=STORE_HINT)
    tlx.async_descriptor_store_wait(0)


@ww.jit
def tile_copy_host_desc(src, dst, BM: tl.constexpr, BN: tl.constexpr):
    tlx.prefetch(src, tensormap=True)
    tlx.prefetch(dst, tensormap=True)
    dt: tl.constexpr = tlx.dtype_of(src)
    tile = tlx.local_alloc((BM, BN), dt, 1)[0]
    full = tlx.alloc_barriers(1)[0]
    row = tl.program_id(0) * BM
    col = tl.program_id(1) * BN
    tlx.barrier_expect_bytes(full, BM * BN * tlx.size_of(dt))
    tlx.async_descriptor_load(src, tile, [row, col], full)
    tlx.barrier_wait(full, 0)
    tlx.async_descriptor_store(dst, tile, [row, col])
    tlx.async_descriptor_store_wait(0)


@ww.jit
def runtime_inner_stride(x, y, n, s, B: tl.constexpr):
    d = tl.make_tensor_descriptor(x, shape=[n], strides=[s], block_shape=[B])
    tile = tlx.local_alloc((B,), tlx.dtype_of(x), 1)[0]
    full = tlx.alloc_barriers(1)[0]
    tlx.barrier_expect_bytes(full, B * tlx.size_of(tlx.dtype_of(x)))
    tlx.async_descriptor_load(d, tile, [0], full)
    tlx.barrier_wait(full, 0)
    tl.store(y + tl.arange(0, B), tlx.local_load(tile))


@ww.jit
def slot_descriptors(src, dst, SIZE, B: tl.constexpr, TMA: tl.constexpr):
    """Two descriptors made in tlx.allocate_tensor_descriptor's slots, used through
    reinterpret_tensor_descriptor: plain loads and stores, or TMA copies."""
    slots = tlx.allocate_tensor_descriptor(num=2)
    tlx.make_tensor_descriptor(desc_ptr=slots[0], base=src, shape=[SIZE],
                               strides=[tl.constexpr(1)], block_shape=[B])
    tlx.make_tensor_descriptor(slots[1], dst, [SIZE], [1], [B])
    at = tl.program_id(0) * B
    d_in = tlx.reinterpret_tensor_descriptor(desc_ptr=slots[0], block_shape=[B],
                                             dtype=tlx.dtype_of(src))
    d_out = tlx.reinterpret_tensor_descriptor(slots[1], [B], tlx.dtype_of(dst))
    if TMA:
        tile = tlx.local_alloc((B,), tlx.dtype_of(src), 1)[0]
        full = tlx.alloc_barriers(1)[0]
        tlx.barrier_expect_bytes(full, B * tlx.size_of(tlx.dtype_of(src)))
        tlx.async_descriptor_load(d_in, tile, [at], full)
        tlx.barrier_wait(full, 0)
        tlx.async_descriptor_store(d_out, tile, [at])
        tlx.async_descriptor_store_wait(0)
    else:
        d_out.store([at], d_in.load([at]) + 1)


@ww.jit
def reinterpret_as_other_dtype(src, B: tl.constexpr):
    slots = tlx.allocate_tensor_descriptor(1)
    tlx.make_tensor_descriptor(slots[0], src, [B], [1], [B])
    tlx.reinterpret_tensor_descriptor(slots[0], [B], tl.float16)


@ww.jit
def reinterpret_empty_slot(src, B: tl.constexpr):
    slots = tlx.allocate_tensor_descriptor(2)
    tlx.make_tensor_descriptor(slots[0], src, [B], [1], [B])
    tlx.reinterpret_tensor_descriptor(slots[1], [B], tlx.dtype_of(src))


@ww.jit
def _load_block(desc, at):
    return desc.load([at])


@ww.jit
def _store_block(desc, at, value):
    desc.store([at], value)


@ww.jit
def captured_by_tasks(src, dst, SIZE, B: tl.constexpr, TMA: tl.constexpr):
    """Descriptors made before the tasks and used inside the non-default one (through helpers,
    or by a producer's TMA copies)."""
    d_in = tl.make_tensor_descriptor(src, shape=[SIZE], strides=[tl.constexpr(1)], block_shape=[B])
    d_out = tl.make_tensor_descriptor(dst, shape=[SIZE], strides=[tl.constexpr(1)],
                                      block_shape=[B])
    at = tl.program_id(0) * B
    tile = tlx.local_alloc((B,), tlx.dtype_of(src), 1)[0]
    full = tlx.alloc_barriers(1)[0]
    with tlx.async_tasks(warp_specialize=True):
        with tlx.async_task("default"):
            unused = at * 3 + 1  # noqa: F841
        with tlx.async_task(num_warps=4):
            if TMA:
                tlx.async_descriptor_prefetch_tensor(d_in, [at])
                tlx.barrier_expect_bytes(full, B * tlx.size_of(tlx.dtype_of(src)))
                tlx.async_descriptor_load(d_in, tile, [at], full)
                tlx.barrier_wait(full, 0)
                tlx.async_descriptor_store(d_out, tile, [at])
                tlx.async_descriptor_store_wait(0)
            else:
                _store_block(d_out, at, _load_block(d_in, at))


@ww.jit
def bulk_round_trip(src, dst, CHUNK: tl.constexpr, BYTES: tl.constexpr, EXPLICIT: tl.constexpr):
    """CHUNK elements of src into shared memory with one bulk copy (BYTES of them when EXPLICIT),
    then the same bytes back out to dst with one bulk store."""
    buf = tlx.local_alloc((CHUNK,), tlx.dtype_of(src), num=1)[0]
    bar = tlx.alloc_barriers(1, arrive_count=1)[0]
    tlx.barrier_expect_bytes(bar, BYTES)
    if EXPLICIT:
        tlx.async_load(src, buf, bulk=True, bulk_size=BYTES, barrier=bar)
    else:
        tlx.async_load(src, buf, bulk=True, barrier=bar)
    tlx.barrier_wait(bar, 0)
    tlx.async_store(dst, buf, BYTES)
    tlx.async_descriptor_store_wait(0)


@ww.jit
def bulk_then_registers(src, dst, N: tl.constexpr):
    """A bulk copy read back through registers after its barrier."""
    buf = tlx.local_alloc((N,), tl.float32, num=1)[0]
    bar = tlx.alloc_barriers(1)[0]
    tlx.barrier_expect_bytes(bar, N * 4)
    tlx.async_load(src + tl.program_id(0) * N, buf, bulk=True, barrier=bar)
    tlx.barrier_wait(bar, 0)
    tl.store(dst + tl.program_id(0) * N + tl.arange(0, N), tlx.local_load(buf) * 2.0)


@ww.jit
def bulk_runtime_size(src, dst, nbytes, N: tl.constexpr):
    buf = tlx.local_alloc((N,), tl.uint8, num=1)[0]
    bar = tlx.alloc_barriers(1)[0]
    tlx.barrier_expect_bytes(bar, nbytes)
    tlx.async_load(src, buf, bulk=True, bulk_size=nbytes, barrier=bar)
    tlx.barrier_wait(bar, 0)
    tlx.async_store(dst, buf, nbytes)
    tlx.async_descriptor_store_wait(0)


@ww.jit
def bulk_bad_size(src, N: tl.constexpr, BYTES: tl.constexpr):
    buf = tlx.local_alloc((N,), tl.uint8, num=1)[0]
    bar = tlx.alloc_barriers(1)[0]
    tlx.async_load(src, buf, bulk=True, bulk_size=BYTES, barrier=bar)


@ww.jit
def bulk_with_mask(src, N: tl.constexpr):
    buf = tlx.local_alloc((N,), tl.uint8, num=1)[0]
    bar = tlx.alloc_barriers(1)[0]
    tlx.async_load(src, buf, mask=tl.arange(0, N) < 4, bulk=True, barrier=bar)


@ww.jit
def bulk_without_barrier(src, N: tl.constexpr):
    buf = tlx.local_alloc((N,), tl.uint8, num=1)[0]
    tlx.async_load(src, buf, bulk=True)


@ww.jit
def prefetch_bad_level(src):
    tlx.prefetch(src, level="L3")


@ww.jit
def tasks_with_bad_flag(src, flag):
    with tlx.async_tasks(warp_specialize=flag):
        with tlx.async_task("default"):
            tl.store(src, 1)


@ww.jit
def runtime_slots(src, dst, SIZE, ROUNDS, B: tl.constexpr, SLOTS: tl.constexpr,
                  TMA: tl.constexpr):
    """A descriptor per round in the slot chosen at run time (round % SLOTS), read back through
    reinterpret_tensor_descriptor with that index: block `round` of src copied to dst."""
    slots = tlx.allocate_tensor_descriptor(num=3)
    tile = tlx.local_alloc((B,), tlx.dtype_of(src), 1)[0]
    full = tlx.alloc_barriers(1)[0]
    for r in range(ROUNDS):
        s = r % SLOTS
        tlx.make_tensor_descriptor(desc_ptr=slots[s], base=src, shape=[SIZE], strides=[1],
                                   block_shape=[B])
        d = tlx.reinterpret_tensor_descriptor(desc_ptr=slots[s], block_shape=[B],
                                              dtype=tlx.dtype_of(src))
        if TMA:
            tlx.barrier_expect_bytes(full, B * tlx.size_of(tlx.dtype_of(src)))
            tlx.async_descriptor_load(d, tile, [r * B], full)
            tlx.barrier_wait(full, r & 1)
            tl.store(dst + r * B + tl.arange(0, B), tlx.local_load(tile))
        else:
            tl.store(dst + r * B + tl.arange(0, B), d.load([r * B]))


@ww.jit
def runtime_slot_read_by_another_index(src, i, j, B: tl.constexpr):
    slots = tlx.allocate_tensor_descriptor(num=2)
    tlx.make_tensor_descriptor(slots[i], src, [B], [1], [B])
    tlx.reinterpret_tensor_descriptor(slots[j], [B], tlx.dtype_of(src))


@ww.jit
def tile_reduce_4d(src, dst, BM: tl.constexpr, BN: tl.constexpr, REDUCE: tl.constexpr):
    """TLX's attention backward in small: a [BM, BN] tile loaded and stored through 4-D
    descriptors of block [1, 1, BM, BN] (rank-reduced buffers), the store a TMA reduction into
    dst (store_reduce=REDUCE), once per program: dst[z, h] gets every program's tile."""
    dt: tl.constexpr = tlx.dtype_of(src)
    tile = tlx.local_alloc((BM, BN), dt, 1)[0]
    full = tlx.alloc_barriers(1)[0]
    z = tl.program_id(1)
    h = tl.program_id(2)
    tlx.barrier_expect_bytes(full, BM * BN * tlx.size_of(dt))
    tlx.async_descriptor_load(src, tile, [z, h, tl.program_id(0) * BM, 0], full)
    tlx.barrier_wait(full, 0)
    tlx.async_descriptor_store(dst, tile, [z, h, 0, 0], store_reduce=REDUCE)
    tlx.async_descriptor_store_wait(0)


@ww.jit
def tile_reduce_bad_type(src, dst, BM: tl.constexpr, BN: tl.constexpr):
    tile = tlx.local_alloc((BM, BN), tlx.dtype_of(src), 1)[0]
    tlx.async_descriptor_store(dst, tile, [0, 0], store_reduce="xor")
