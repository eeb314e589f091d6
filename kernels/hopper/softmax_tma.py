"""Hopper row softmax that streams rows through shared memory with TMA: the bytes in flight live in
a ring of shared buffers rather than in registers, so a program keeps NUM_STAGES rows loading.

Each row of x (contiguous, n_cols = TILE_R * TILE_C) is viewed as one [TILE_R, TILE_C] block of
the 2-D tensor x.view(n_rows * TILE_R, TILE_C); TILE_C * element size is 128 bytes, so one TMA
copy fills one 128-byte-swizzled buffer with a whole row.

softmax_tma_kernel: persistent programs take rows pid, pid + P, ...; row i of a program waits on
stage i % NUM_STAGES, is read into registers, and that stage is refilled with row i + NUM_STAGES
before the row is reduced and stored with vectorized stores.
    grid = (min(n_rows, NUM_SMS * programs per SM),)
    in_desc: TensorDescriptor(x viewed as [n_rows * TILE_R, TILE_C], block [TILE_R, TILE_C])
    constexprs: TILE_R (n_cols / TILE_C, a power of two from 8 to 256), TILE_C (128 bytes of
                elements), NUM_STAGES (rows loading per program, e.g. 3), STORE_EVICT (the
                stores' eviction_policy: "" or "evict_first")
    signature: in_desc:desc<fp16,64x64>, out_ptr:*fp16:16, n_rows:i32, TILE_R=64, TILE_C=64,
               NUM_STAGES=3
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def load_row(in_desc, bufs, bars, stage, row, pred, TILE_R: tl.constexpr,
             ROW_BYTES: tl.constexpr):
    """Starts the TMA copy of row `row` into `stage` (when pred), completing the stage's barrier."""
    bar = tlx.local_view(bars, stage)
    tlx.barrier_expect_bytes(bar, ROW_BYTES, pred=pred)
    tlx.async_descriptor_load(in_desc, tlx.local_view(bufs, stage), [row * TILE_R, 0], bar,
                              pred=pred, eviction_policy="evict_first")


@ww.jit
def softmax_tma_kernel(in_desc, out_ptr, n_rows, TILE_R: tl.constexpr, TILE_C: tl.constexpr,
                       NUM_STAGES: tl.constexpr, STORE_EVICT: tl.constexpr = ""):
    tl.static_assert(NUM_STAGES >= 1)
    dtype: tl.constexpr = tlx.dtype_of(in_desc)
    ROW_BYTES: tl.constexpr = TILE_R * TILE_C * tlx.size_of(dtype)
    bufs = tlx.local_alloc((TILE_R, TILE_C), dtype, NUM_STAGES)
    bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    n_mine = tl.cdiv(n_rows - pid, step)
    for s in tl.static_range(NUM_STAGES):
        load_row(in_desc, bufs, bars, s, pid + s * step, s < n_mine, TILE_R, ROW_BYTES)
    offsets = tl.arange(0, TILE_R)[:, None] * TILE_C + tl.arange(0, TILE_C)[None, :]
    for i in range(0, n_mine):
        stage = i % NUM_STAGES
        # Each barrier completes once per trip around the ring: its phase flips every trip.
        tlx.barrier_wait(tlx.local_view(bars, stage), (i // NUM_STAGES) & 1)
        x = tlx.local_load(tlx.local_view(bufs, stage)).to(tl.float32)
        # Every thread has read the stage before the one issuing thread refills it.
        tl.debug_barrier()
        load_row(in_desc, bufs, bars, stage, pid + (i + NUM_STAGES) * step,
                 i + NUM_STAGES < n_mine, TILE_R, ROW_BYTES)
        row_max = tl.max(tl.max(x, axis=1), axis=0)
        numerator = tl.exp(x - row_max)
        y = numerator * (1.0 / tl.sum(tl.sum(numerator, axis=1), axis=0))
        row = pid + i * step
        tl.store(out_ptr + row.to(tl.int64) * (TILE_R * TILE_C) + offsets,
                 y.to(out_ptr.dtype.element_ty), eviction_policy=STORE_EVICT)
