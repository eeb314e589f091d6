"""Kernels for the multicast TMA tests (CPU codegen in test_tlx_hopper_codegen.py, the H200 in
tests/gpu/test_tlx_multicast_gpu.py): each CTA of a 2-CTA cluster loads half of a tile and
multicasts it to both CTAs, which then both hold the whole tile."""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def multicast_halves(in_desc, out_desc, HALF: tl.constexpr, COLS: tl.constexpr):
    """Cluster c's tile is rows [c * 2 * HALF, (c + 1) * 2 * HALF) of in; CTA r loads half r into
    both CTAs' buffer r. Each CTA (program p) then stores the whole tile to out rows
    [p * 2 * HALF, (p + 1) * 2 * HALF)."""
    dtype: tl.constexpr = tlx.dtype_of(in_desc)
    halves = tlx.local_alloc((HALF, COLS), dtype, 2)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    rank = tlx.cluster_cta_rank()
    cluster = tl.program_id(0) // 2
    full = tlx.local_view(bars, 0)
    # Both halves land here: this CTA's own copy and the peer's.
    tlx.barrier_expect_bytes(full, 2 * HALF * COLS * tlx.size_of(dtype))
    tlx.async_descriptor_load(in_desc, tlx.local_view(halves, rank),
                              [cluster * 2 * HALF + rank * HALF, 0], full,
                              multicast_targets=[0, 1])
    tlx.barrier_wait(full, 0)
    for h in tl.static_range(2):
        tlx.async_descriptor_store(out_desc, tlx.local_view(halves, h),
                                   [tl.program_id(0) * 2 * HALF + h * HALF, 0])
    tlx.async_descriptor_store_wait(0)
    # Neither CTA leaves while the other's multicast may still write into it.
    tlx.cluster_barrier()
