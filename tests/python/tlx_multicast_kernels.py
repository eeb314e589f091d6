"""Kernels and checks for the multicast TMA tests (CPU codegen in test_tlx_hopper_codegen.py, the
H200 in tests/gpu/test_tlx_multicast_gpu.py, which runs the checks below in subprocesses): each
CTA of a 2-CTA cluster loads half of a tile and multicasts it to both CTAs, which then both hold
the whole tile; and the cooperative GEMM in 2-CTA clusters."""
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


def check_multicast_halves(clusters, cols):
    """Raises AssertionError unless every CTA stored its cluster's whole tile."""
    import torch

    half = 64
    x = torch.randn(clusters * 2 * half, cols, device="cuda", dtype=torch.float16)
    out = torch.full((clusters * 2 * 2 * half, cols), float("nan"), device="cuda",
                     dtype=torch.float16)
    in_desc = ww.TensorDescriptor(x, list(x.shape), list(x.stride()), [half, cols])
    out_desc = ww.TensorDescriptor(out, list(out.shape), list(out.stride()), [half, cols])
    multicast_halves[(clusters * 2,)](in_desc, out_desc, HALF=half, COLS=cols,
                                      ctas_per_cga=(2, 1, 1))
    torch.cuda.synchronize()
    tiles = x.reshape(clusters, 2 * half, cols)
    expect = torch.stack([tiles, tiles], 1).reshape(-1, cols)  # both CTAs hold the tile
    assert torch.equal(out, expect), "a CTA's tile differs from its cluster's input rows"


def check_cluster_gemm(m, n, k, dtype_name, variant="ws_cluster", config=None):
    """Raises AssertionError unless matmul_tlx(..., variant, config) matches a float64 product
    (variant "ws_cluster" shares A, "ws_cluster_m" shares B)."""
    import torch

    from warpweave import ops

    dtype = getattr(torch, dtype_name)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    c = ops.matmul_tlx(a, b, variant, config)
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert err <= (2e-3 if dtype == torch.float16 else 1e-2), \
        f"{variant} {config} {m}x{n}x{k} {dtype_name}: relative error {err:.3g}"


def check_cluster_gemms(variant, config=None):
    """check_cluster_gemm over shapes with odd tile counts (a cluster's second CTA past the edge)
    and a full-size one, in both dtypes, in one process."""
    for m, n, k in [(128, 256, 64), (1000, 776, 328), (640, 1792, 256), (4096, 4096, 4096)]:
        for dtype_name in ("float16", "bfloat16"):
            check_cluster_gemm(m, n, k, dtype_name, variant, config)
