"""Descriptors made in the kernel (tl.make_tensor_descriptor) as TMA tensor maps on the GPU
(tests/python/tma_gemm_kernels.py, attnregs_kernels.py): the kernel writes the maps in
set_allocator's scratch, its K loop is a TMA ring and C leaves by TMA stores that clip at the
tensor's edges. Against torch: the plain and the persistent GEMM (tutorial 09's
matmul_kernel_descriptor_persistent form, launched as the tutorial launches it) at odd sizes and
4096^3, fp16 and bf16; the loops whose descriptor loads fall back to pointer loads; descriptors
made anew in each step of a loop; attention over in-kernel descriptors; the sm_80 target (no
TMA) on the same GPU; a launch without an allocator."""

import math
import os
import sys

import pytest

from gpu_requirements import require_cuda, timed

torch = require_cuda((9, 0), "TMA tensor maps need Hopper")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import warpweave as ww  # noqa: E402
from attnregs_kernels import attention_device_desc_fwd  # noqa: E402
from tma_gemm_kernels import (batched_copy_new_desc_each_step, carried_descriptor,  # noqa: E402
                              device_desc_gemm,
                              device_desc_gemm_made_in_loop, device_desc_gemm_mixed,
                              device_desc_gemm_persistent, device_desc_gemm_row_sums,
                              device_desc_gemm_strided)

DEV = "cuda"
GUARD = 8192  # elements after C, which no store may touch


@pytest.fixture(autouse=True)
def scratch_allocator(monkeypatch):
    """set_allocator as tutorial 09 calls it; records each request (size, alignment, stream)."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the TMA pipeline is built for sm_90a")
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", "4000000")
    calls = []

    def alloc(size, alignment, stream):
        calls.append((size, alignment, stream))
        return torch.empty(size, device=DEV, dtype=torch.int8)

    ww.set_allocator(alloc)
    yield calls
    ww.set_allocator(None)


def cdiv(x, y):
    return -(-x // y)


def operands(M, N, K, dtype=torch.float16):
    torch.manual_seed(0)
    a = (torch.randn(M, K, device=DEV) / 8).to(dtype)
    b = (torch.randn(K, N, device=DEV) / 8).to(dtype)
    return a, b


def guarded_output(M, N, dtype=torch.float16):
    """C [M, N] at the start of a NaN-filled buffer: the rest must stay NaN."""
    buf = torch.full((M * N + GUARD,), float("nan"), device=DEV, dtype=dtype)
    return buf, buf[:M * N].view(M, N)


def check(c, a, b, buf=None):
    ref = torch.matmul(a.float(), b.float())
    tol = dict(atol=2e-2, rtol=1e-2) if c.dtype == torch.float16 else dict(atol=4e-2, rtol=2e-2)
    torch.testing.assert_close(c.float(), ref, **tol)
    if buf is not None:
        assert torch.isnan(buf[c.numel():]).all(), "a store wrote past the tensor's edge"


@pytest.mark.parametrize("mnk", [(1000, 776, 1000), (136, 264, 72), (4096, 4096, 4096),
                                 (72, 40, 24)])
@pytest.mark.parametrize("block,stages,warps", [((64, 64, 32), 3, 4), ((128, 256, 64), 3, 8),
                                                ((128, 128, 64), 4, 4), ((128, 128, 128), 2, 8)])
def test_device_descriptor_gemm_matches_torch(scratch_allocator, mnk, block, stages, warps):
    a, b = operands(*mnk)
    (M, K), N = a.shape, b.shape[1]
    bm, bn, bk = block
    buf, c = guarded_output(M, N)
    grid = cdiv(M, bm) * cdiv(N, bn)
    device_desc_gemm[(grid,)](a, b.T.contiguous(), c, M, N, K, BM=bm, BN=bn, BK=bk, GROUP=8,
                              num_warps=warps, num_stages=stages)
    check(c, a, b, buf)
    # Three tensor maps of 128 bytes per program.
    assert scratch_allocator[-1][:2] == (3 * 128 * grid, 128)


@pytest.mark.parametrize("mnk", [(1000, 776, 1000), (136, 264, 72), (4096, 4096, 4096)])
@pytest.mark.parametrize("programs", [1, 7, 132])
@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("subtile", [False, True])
def test_persistent_device_descriptor_gemm_matches_torch(mnk, programs, stages, subtile):
    a, b = operands(*mnk)
    (M, K), N = a.shape, b.shape[1]
    bt = b.T.contiguous()
    for (bm, bn, bk), warps in [((128, 256, 64), 8), ((128, 128, 64), 4)]:
        buf, c = guarded_output(M, N)
        progs = min(programs, cdiv(M, bm) * cdiv(N, bn))
        device_desc_gemm_persistent[(progs,)](a, bt, c, M, N, K, BM=bm, BN=bn, BK=bk, GROUP=8,
                                              NUM_PROGRAMS=progs, SUBTILE=subtile,
                                              num_warps=warps, num_stages=stages)
        check(c, a, b, buf)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mnk", [(4096, 4096, 4096), (1000, 776, 1000)])
def test_launched_as_tutorial_09_launches_it(scratch_allocator, dtype, mnk):
    # A grid function of the meta-parameters, NUM_SMS programs at most, an allocator that
    # returns int8 torch tensors: the scratch is NUM_SMS x 3 maps.
    a, b = operands(*mnk, dtype=dtype)
    (M, K), N = a.shape, b.shape[1]
    bt = b.T.contiguous()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    c = torch.empty(M, N, device=DEV, dtype=dtype)

    def grid(meta):
        return (min(sms, cdiv(M, meta["BM"]) * cdiv(N, meta["BN"])),)

    device_desc_gemm_persistent[grid](a, bt, c, M, N, K, BM=128, BN=256, BK=64, GROUP=8,
                                      NUM_PROGRAMS=sms, SUBTILE=True, num_warps=8,
                                      num_stages=3)
    check(c, a, b)
    programs = grid(dict(BM=128, BN=256))[0]
    assert scratch_allocator[-1][:2] == (3 * 128 * programs, 128)


@pytest.mark.parametrize("mnk", [(1000, 776, 1000), (136, 264, 72)])
@pytest.mark.parametrize("kernel", ["made_in_loop", "mixed", "strided"])
def test_pointer_fallback_loops_match_torch(mnk, kernel):
    a, b = operands(*mnk)
    (M, K), N = a.shape, b.shape[1]
    bt = b.T.contiguous()
    buf, c = guarded_output(M, N)
    grid = (cdiv(M, 128), cdiv(N, 128))
    opts = dict(BM=128, BN=128, BK=64, num_warps=4, num_stages=3)
    if kernel == "made_in_loop":
        device_desc_gemm_made_in_loop[grid](a, bt, c, M, N, K, **opts)
    elif kernel == "mixed":
        device_desc_gemm_mixed[grid](a, bt, c, M, N, K, **opts)
    else:
        # A as the transpose of a K x M tensor: strides (1, M), a run-time innermost stride.
        at = a.T.contiguous()
        device_desc_gemm_strided[grid](at.T, bt, c, M, N, K, 1, M, **opts)
    check(c, a, b, buf)


@pytest.mark.parametrize("mnk", [(1000, 776, 1000), (136, 264, 72)])
def test_desc_load_through_a_ring_descriptor_matches_torch(mnk):
    # A's map has the ring's swizzle; a desc.load after the K loop reads A's first tile through it.
    a, b = operands(*mnk)
    (M, K), N = a.shape, b.shape[1]
    buf, c = guarded_output(M, N)
    device_desc_gemm_row_sums[(cdiv(M, 128), cdiv(N, 128))](a, b.T.contiguous(), c, M, N, K,
                                                            BM=128, BN=128, BK=64, num_warps=4,
                                                            num_stages=3)
    ref = torch.matmul(a.float(), b.float()) + a[:, :64].float().sum(dim=1, keepdim=True)
    torch.testing.assert_close(c.float(), ref, atol=3e-2, rtol=1e-2)
    assert torch.isnan(buf[M * N:]).all()


@pytest.mark.parametrize("m,n,bm,bn", [(100, 72, 64, 32), (1024, 512, 128, 64),
                                       (33, 200, 16, 64)])
def test_maps_made_in_a_loop(m, n, bm, bn):
    batch = 3
    x = torch.randn(batch, m, n, device=DEV).to(torch.float16)
    y = torch.full_like(x, float("nan"))
    batched_copy_new_desc_each_step[(cdiv(m, bm) + 1, cdiv(n, bn) + 1)](x, y, m, n, batch, BM=bm,
                                                                         BN=bn)
    expected = 2 * x + torch.arange(batch, device=DEV, dtype=torch.float16)[:, None, None]
    torch.testing.assert_close(y, expected, atol=0, rtol=0)


def test_descriptor_carried_by_a_loop():
    x = torch.randn(1000, device=DEV)
    y = torch.randn(1000, device=DEV)
    out = torch.full_like(x, float("nan"))
    carried_descriptor[(1,)](x, y, out, 1000, 3, B=64)
    torch.testing.assert_close(out, torch.cat([x[:192], y[192:]]) + 1, atol=0, rtol=0)


@pytest.mark.parametrize("head_dim,block_m,block_n", [(128, 128, 64), (64, 64, 32)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads,n_ctx", [(2, 128), (3, 1024)])
def test_attention_over_device_descriptors_matches_torch(head_dim, block_m, block_n, causal,
                                                         heads, n_ctx):
    torch.manual_seed(0)
    q, k, v = (torch.randn(heads, n_ctx, head_dim, device=DEV, dtype=torch.float16)
               for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(heads, n_ctx, device=DEV, dtype=torch.float32)
    sm_scale = 1 / math.sqrt(head_dim)
    attention_device_desc_fwd[(n_ctx // block_m, heads)](q, k, v, o, lse, sm_scale, heads, n_ctx,
                                                         HEAD_DIM=head_dim, BLOCK_M=block_m,
                                                         BLOCK_N=block_n, CAUSAL=causal,
                                                         num_warps=4, num_stages=3)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                           is_causal=causal, scale=sm_scale)
    torch.testing.assert_close(o.float(), ref, atol=2e-2, rtol=2e-2)


def test_sm80_target_runs_pointer_loads(monkeypatch, scratch_allocator):
    # Ampere PTX (through the driver's JIT): no TMA, so no tensor map and no scratch.
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_80")
    a, b = operands(1000, 776, 1000)
    buf, c = guarded_output(1000, 776)
    grid = cdiv(1000, 64) * cdiv(776, 64)
    compiled = device_desc_gemm[(grid,)](a, b.T.contiguous(), c, 1000, 776, 1000, BM=64, BN=64,
                                         BK=32, GROUP=8, num_warps=4, num_stages=3)
    check(c, a, b, buf)
    assert compiled.kernel.target == "sm_80"
    assert scratch_allocator == []


def test_launch_without_an_allocator_says_what_to_do():
    ww.set_allocator(None)
    a, b = operands(128, 128, 64)
    c = torch.empty(128, 128, device=DEV, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="set_allocator"):
        device_desc_gemm[(1,)](a, b.T.contiguous(), c, 128, 128, 64, BM=128, BN=128, BK=64,
                               GROUP=8, num_warps=4, num_stages=3)


def test_speed_at_4096_cubed(capsys, monkeypatch):
    # Not a pass / fail bound: prints TFLOP/s of the persistent form beside torch.matmul's for
    # the lead's notes (tools/upstream/perf_triton.py --only 09 is the comparison with Triton).
    monkeypatch.delenv("WARPWEAVE_TRAP_HANGS")  # time the kernel as users build it
    a, b = operands(4096, 4096, 4096)
    bt = b.T.contiguous()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    c = torch.empty(4096, 4096, device=DEV, dtype=torch.float16)
    for stages, subtile in [(3, False), (4, False), (3, True)]:
        def run():
            device_desc_gemm_persistent[(sms,)](a, bt, c, 4096, 4096, 4096, BM=128, BN=256,
                                                BK=64, GROUP=8, NUM_PROGRAMS=sms,
                                                SUBTILE=subtile, num_warps=8,
                                                num_stages=stages)

        run()
        check(c, a, b)
        ms = timed(run)
        ref_ms = timed(lambda: torch.matmul(a, b))
        with capsys.disabled():
            print(f"\npersistent in-kernel descriptors, stages {stages} subtile {subtile}: "
                  f"{2 * 4096 ** 3 / ms / 1e9:.0f} TFLOP/s (torch.matmul "
                  f"{2 * 4096 ** 3 / ref_ms / 1e9:.0f})")
