"""warpweave.ops.scaled_mm (fp8) and grouped_mm (MoE) on the GPU: values against torch._scaled_mm
and torch._grouped_mm (cuBLAS / CUTLASS) and against fp32 references, every output element
written (outputs poisoned with NaN), both kernels of scaled_mm (pointer loads and TMA
descriptors), grouped_mm's gradients against PyTorch's, torch.compile(fullgraph=True) with the
default backend, and a CUDA graph capture (offs is read on the device only).

scaled_mm needs fp8 tensor cores (sm_89+); torch._scaled_mm and torch._grouped_mm run on
sm_90 (the comparisons against them skip elsewhere, with the reason)."""

import pytest

from gpu_requirements import require_cuda, seed_and_poison_outputs

torch = require_cuda((8, 9), "fp8 tl.dot needs compute capability 8.9 or later")

from warpweave import ops  # noqa: E402

W = torch.ops.warpweave
DEV = "cuda"
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
SM90 = torch.cuda.get_device_capability() >= (9, 0)


@pytest.fixture(autouse=True)
def poisoned(monkeypatch):
    seed_and_poison_outputs(monkeypatch, torch, ops)


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def fp8(shape, dtype, scale=1.0):
    return (torch.randn(shape, device=DEV) * scale).to(dtype)


# ------------------------------------------------------------------------------------------------
# scaled_mm
# ------------------------------------------------------------------------------------------------

SHAPES = [(128, 256, 128), (200, 136, 96), (1000, 1040, 512), (4096, 4096, 4096),
          (16, 8192, 1024), (8192, 16, 1024)]


@pytest.mark.parametrize("kernel", [None, "tma"])
@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("ta,tb", [(E4M3, E4M3), (E4M3, E5M2), (E5M2, E4M3)])
@pytest.mark.parametrize("rowwise", [False, True])
def test_scaled_mm_vs_fp32_reference(kernel, M, N, K, ta, tb, rowwise):
    a, bt = fp8((M, K), ta), fp8((N, K), tb)
    if rowwise:
        sa = torch.rand(M, 1, device=DEV) + 0.5
        sb = torch.rand(1, N, device=DEV) + 0.5
    else:
        sa, sb = torch.tensor(0.5, device=DEV), torch.tensor(2.0, device=DEV)
    bias = torch.randn(N, device=DEV, dtype=torch.bfloat16)
    out = ops.scaled_mm(a, bt.t(), sa, sb, out_dtype=torch.bfloat16, bias=bias, kernel=kernel)
    ref = (a.float() @ bt.float().t()) * sa * sb + bias.float()
    assert not out.isnan().any(), "an output element was not written"
    assert rel_err(out, ref) < 5e-3


@pytest.mark.parametrize("K", [40, 41, 8, 1])
@pytest.mark.parametrize("rowwise", [False, True])
def test_scaled_mm_with_rows_not_16_byte_aligned(K, rowwise):
    """K not a multiple of 16: the pointer-load kernel copies its rows byte by byte (an odd K
    starts every other row at an odd address)."""
    test_scaled_mm_vs_fp32_reference(None, 200, 136, K, E4M3, E5M2, rowwise)


@pytest.mark.skipif(not SM90, reason="torch._scaled_mm (cuBLASLt fp8) is compared on sm_90")
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("rowwise", [False, True])
def test_scaled_mm_vs_torch_scaled_mm(out_dtype, rowwise):
    M, N, K = 1024, 2048, 512
    if rowwise and out_dtype != torch.bfloat16:
        pytest.skip("torch._scaled_mm's rowwise scaling produces bfloat16 only")
    a, bt = fp8((M, K), E4M3), fp8((N, K), E4M3)
    if rowwise:
        sa, sb = torch.rand(M, 1, device=DEV) + 0.5, torch.rand(1, N, device=DEV) + 0.5
    else:
        sa, sb = torch.tensor(0.5, device=DEV), torch.tensor(2.0, device=DEV)
    out = W.scaled_mm(a, bt.t(), sa, sb, None, out_dtype)
    theirs = torch._scaled_mm(a, bt.t(), sa, sb, out_dtype=out_dtype)
    assert out.dtype == theirs.dtype and out.shape == theirs.shape
    assert rel_err(out, theirs) < 5e-3


def test_scaled_mm_exact_products():
    # Multiples of 1/8: exact in e4m3 and summed exactly in fp32, whatever the order.
    M, N, K = 512, 512, 1024
    a = (torch.randint(-8, 9, (M, K), device=DEV) / 8).to(E4M3)
    bt = (torch.randint(-8, 9, (N, K), device=DEV) / 8).to(E4M3)
    one = torch.tensor(1.0, device=DEV)
    for kernel in (None, "tma"):
        out = ops.scaled_mm(a, bt.t(), one, one, out_dtype=torch.float32, kernel=kernel)
        assert torch.equal(out, a.float() @ bt.float().t())


def test_scaled_mm_compile_fullgraph():
    a, bt = fp8((256, 512), E4M3), fp8((384, 512), E4M3)
    sa, sb = torch.rand(256, 1, device=DEV), torch.rand(1, 384, device=DEV)

    def f(a, b, sa, sb):
        return torch.relu(W.scaled_mm(a, b, sa, sb, None, torch.bfloat16)).float().sum(1)

    torch.testing.assert_close(torch.compile(f, fullgraph=True)(a, bt.t(), sa, sb),
                               f(a, bt.t(), sa, sb))


# ------------------------------------------------------------------------------------------------
# grouped_mm
# ------------------------------------------------------------------------------------------------

# MoE-like ragged splits: empty experts, one-row experts, skewed loads.
SPLITS = [[0, 128, 0, 77, 1, 1000, 0, 300], [512] * 8, [0] * 7 + [2048],
          [3, 0, 0, 29, 64, 65, 127, 129, 255, 257]]


def offsets(sizes):
    return torch.tensor(sizes, device=DEV).cumsum(0).to(torch.int32)


def loop_reference(a, b, offs):
    out = torch.zeros(a.shape[0], b.shape[2], device=DEV)
    start = 0
    for g, end in enumerate(offs.tolist()):
        out[start:end] = a[start:end].float() @ b[g].float()
        start = end
    return out


@pytest.mark.parametrize("sizes", SPLITS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("K,N", [(1024, 2048), (256, 136)])
def test_grouped_mm_vs_loop_of_matmul(sizes, dtype, K, N):
    offs = offsets(sizes)
    M = sum(sizes) + 5  # rows past the last group: zeros
    a = torch.randn(M, K, device=DEV, dtype=dtype)
    b = torch.randn(len(sizes), K, N, device=DEV, dtype=dtype) / K ** 0.5
    out = ops.grouped_mm(a, b, offs)
    assert not out.isnan().any(), "an output element was not written"
    assert rel_err(out, loop_reference(a, b, offs)) < 1e-2
    assert (out[sum(sizes):] == 0).all()


@pytest.mark.skipif(not SM90, reason="torch._grouped_mm (CUTLASS) runs on sm_90 and later")
@pytest.mark.parametrize("sizes", SPLITS)
def test_grouped_mm_vs_torch_grouped_mm(sizes):
    offs = offsets(sizes)
    M, K, N = sum(sizes), 1024, 2048
    a = torch.randn(M, K, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(len(sizes), K, N, device=DEV, dtype=torch.bfloat16) / K ** 0.5
    theirs = torch._grouped_mm(a, b, offs)
    assert rel_err(W.grouped_mm(a, b, offs), theirs) < 1e-2


def test_grouped_mm_ragged_k():
    sizes = [0, 300, 1, 0, 700, 23]
    offs = offsets(sizes)
    M, N, K_total = 512, 256, sum(sizes) + 7
    a = torch.randn(M, K_total, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(K_total, N, device=DEV, dtype=torch.bfloat16)
    out = ops.grouped_mm(a, b, offs)
    assert out.shape == (len(sizes), M, N) and not out.isnan().any()
    start = 0
    for g, end in enumerate(offs.tolist()):
        ref = a[:, start:end].float() @ b[start:end].float()
        assert rel_err(out[g], ref) < 1e-2 if end > start else (out[g] == 0).all()
        start = end


@pytest.mark.parametrize("sizes", [[0, 128, 0, 77, 1, 1000, 0, 300], [512] * 4])
def test_grouped_mm_gradients_vs_pytorch(sizes):
    offs = offsets(sizes)
    M, K, N = sum(sizes), 512, 768
    a0 = torch.randn(M, K, device=DEV, dtype=torch.bfloat16)
    b0 = torch.randn(len(sizes), K, N, device=DEV, dtype=torch.bfloat16) / K ** 0.5
    a1, b1 = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    a2, b2 = a0.float().requires_grad_(), b0.float().requires_grad_()
    out = W.grouped_mm(a1, b1, offs)
    ref = loop_reference(a2, b2, offs)
    g = torch.randn(M, N, device=DEV)
    out.backward(g.bfloat16())
    ref.backward(g.bfloat16().float())
    assert rel_err(a1.grad, a2.grad) < 2e-2
    assert rel_err(b1.grad, b2.grad) < 2e-2


def test_grouped_mm_compile_fullgraph_and_cuda_graph():
    sizes = [0, 256, 100, 0, 900]
    offs = offsets(sizes)
    a = torch.randn(sum(sizes), 512, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(len(sizes), 512, 256, device=DEV, dtype=torch.bfloat16, requires_grad=True)

    def moe(x, w, offs):
        return torch.nn.functional.silu(W.grouped_mm(x, w, offs)).float().sum()

    expected = moe(a, b, offs)
    out = torch.compile(moe, fullgraph=True)(a, b, offs)
    torch.testing.assert_close(out, expected, rtol=1e-3, atol=1e-2)
    # offs is read on the device only: the call captures into a CUDA graph and replays with
    # other group sizes.
    x, w = a.detach(), b.detach()
    ops.grouped_mm(x, w, offs)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = ops.grouped_mm(x, w, offs)
    offs.copy_(offsets([256, 0, 0, 700, 300]))
    graph.replay()
    torch.cuda.synchronize()
    assert rel_err(y, loop_reference(x, w, offs)) < 1e-2
