"""ops.grouped_mm's TLX warp-specialized kernel (kernels/hopper/grouped_mm_ws.py) on an sm_90
GPU: the op picks it for the ragged-M form, its values against torch._grouped_mm (CUTLASS) at
MoE sizes and against a loop of matmuls (exact products, fp16), every candidate configuration,
every output element written (outputs poisoned with NaN; rows past the last group zeros), and a
CUDA graph replay with new group sizes (offs is read on the device only); the same for the
ragged-K form (the MoE weight gradient, torch._grouped_mm(x.t(), dy, offs)), whose groups' K
ranges end anywhere inside a K step."""

import pytest

from gpu_requirements import require_cuda, seed_and_poison_outputs

torch = require_cuda((9, 0), "the TLX grouped GEMM (wgmma, TMA) needs an sm_90 GPU")

from warpweave import ops  # noqa: E402
from warpweave.ops import _grouped_mm, _tuning  # noqa: E402

DEV = "cuda"
SM90 = torch.cuda.get_device_capability() == (9, 0)
pytestmark = pytest.mark.skipif(not SM90, reason="the TLX grouped GEMM runs on sm_90 only")


@pytest.fixture(autouse=True)
def poisoned(monkeypatch):
    seed_and_poison_outputs(monkeypatch, torch, ops)
    monkeypatch.delenv("WARPWEAVE_OPS_CONFIG", raising=False)
    monkeypatch.delenv("WARPWEAVE_TARGET", raising=False)


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def offsets(sizes):
    return torch.tensor(sizes, device=DEV).cumsum(0).to(torch.int32)


def loop_reference(a, b, offs):
    out = torch.zeros(a.shape[0], b.shape[2], device=DEV)
    start = 0
    for g, end in enumerate(offs.tolist()):
        out[start:end] = a[start:end].float() @ b[g].float()
        start = end
    return out


def chosen_kernel():
    return _tuning.decisions["grouped_mm"].chosen.kernel


def test_mixtral_sized_ragged_groups_vs_torch_grouped_mm(monkeypatch):
    # G = 8, 8192 rows in ragged groups (empty, 1 row, not multiples of 128), K = 7168.
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    sizes = [0, 1000, 1, 3000, 127, 129, 2900, 1035]
    G, K, N = 8, 7168, 4096
    offs = offsets(sizes)
    a = torch.randn(sum(sizes), K, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(G, K, N, device=DEV, dtype=torch.bfloat16) / K ** 0.5
    out = ops.grouped_mm(a, b, offs)
    assert chosen_kernel() == "tlx_ws"
    assert not out.isnan().any(), "an output element was not written"
    assert rel_err(out, torch._grouped_mm(a, b, offs)) < 1e-2


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_tail_rows_are_zeros_and_exact_products(monkeypatch, dtype):
    # Multiples of 1/8 with K = 512: every product and sum is exact in fp32 and in the output.
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    sizes = [3, 0, 0, 29, 64, 65, 127, 129, 255, 257, 0]
    M_total, K, N = sum(sizes) + 100, 512, 1408
    offs = offsets(sizes)
    a = (torch.randint(-8, 9, (M_total, K), device=DEV) / 8).to(dtype)
    b = (torch.randint(-8, 9, (len(sizes), K, N), device=DEV) / 8).to(dtype)
    out = ops.grouped_mm(a, b, offs)
    assert chosen_kernel() == "tlx_ws"
    assert torch.equal(out, loop_reference(a, b, offs).to(dtype))
    assert torch.equal(ops.grouped_mm(a, b, offs, kernel="tlx"), out)


def test_every_candidate_at_deepseek_shapes(monkeypatch):
    # 64 experts, 2048 -> 1408, skewed with empty experts.
    sizes = [0 if g % 4 == 1 else (g * 37) % 700 for g in range(64)]
    G, K, N = 64, 2048, 1408
    offs = offsets(sizes)
    a = torch.randn(sum(sizes), K, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(G, K, N, device=DEV, dtype=torch.bfloat16) / K ** 0.5
    theirs = torch._grouped_mm(a, b, offs)
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "1")
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", "grouped_mm=default")
    ops.grouped_mm(a, b, offs)
    candidates = [c for c in _tuning.decisions["grouped_mm"].candidates if c.kernel == "tlx_ws"]
    assert len(candidates) == len(_grouped_mm.GROUPED_MM_TLX_CONFIGS)
    for c in candidates:
        monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", f"grouped_mm={c!r}")
        out = ops.grouped_mm(a, b, offs)
        assert _tuning.decisions["grouped_mm"].chosen == c
        assert not out.isnan().any(), c
        assert rel_err(out, theirs) < 1e-2, c


def test_cuda_graph_replays_new_group_sizes(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    G, K, N, M = 8, 1024, 2048, 4096
    a = torch.randn(M, K, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(G, K, N, device=DEV, dtype=torch.bfloat16) / K ** 0.5
    offs = offsets([512] * 8)
    ops.grouped_mm(a, b, offs)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.grouped_mm(a, b, offs)
    assert chosen_kernel() == "tlx_ws"
    for sizes in ([512] * 8, [0, 4000, 0, 1, 0, 0, 95, 0], [100] * 8):
        offs.copy_(offsets(sizes))
        graph.replay()
        torch.cuda.synchronize()
        assert rel_err(out, loop_reference(a, b, offs)) < 1e-2, sizes


def test_calls_it_does_not_take_run_the_tl_kernel(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    offs = offsets([100, 0, 156])
    a = torch.randn(256, 96, device=DEV, dtype=torch.bfloat16)  # K % 64 != 0
    b = torch.randn(3, 96, 256, device=DEV, dtype=torch.bfloat16)
    out = ops.grouped_mm(a, b, offs)
    assert chosen_kernel() == "tl"
    assert rel_err(out, loop_reference(a, b, offs)) < 1e-2
    bs = torch.randn(3, 128, 512, device=DEV, dtype=torch.bfloat16)[:, :, ::2]
    a = torch.randn(256, 128, device=DEV, dtype=torch.bfloat16)
    out = ops.grouped_mm(a, bs, offs)  # b's rows strided
    assert chosen_kernel() == "tl"
    assert rel_err(out, loop_reference(a, bs, offs)) < 1e-2


@pytest.mark.parametrize("K", [2048, 1000])
def test_expert_major_weights_vs_torch_grouped_mm(monkeypatch, K):
    # b = w.transpose(1, 2) of w [G, N, K] (the common weight layout, and the backward's dA):
    # K-major B tiles; K = 1000 is not a multiple of the 64-deep K step.
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    sizes = [0 if g % 4 == 1 else 100 + (g * 53) % 400 for g in range(16)]
    G, N = 16, 1400
    offs = offsets(sizes)
    a = torch.randn(sum(sizes) + 33, K, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(G, N, K, device=DEV, dtype=torch.bfloat16) / K ** 0.5
    out = ops.grouped_mm(a, w.transpose(1, 2), offs)
    assert chosen_kernel() == "tlx_ws"
    assert not out.isnan().any(), "an output element was not written"
    ref = loop_reference(a, w.transpose(1, 2), offs)
    assert rel_err(out, ref) < 1e-2
    assert not out[offs[-1]:].any()
    if K % 16 == 0:
        theirs = torch._grouped_mm(a[:offs[-1]], w.transpose(1, 2), offs)
        assert rel_err(out[:offs[-1]], theirs) < 1e-2


def test_gradients_take_it_and_match_pytorch(monkeypatch):
    # The backward's dA is grouped_mm(grad, b.transpose(1, 2), offs): K-major, the TLX kernel.
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    sizes = [300, 0, 129, 500]
    G, K, N = 4, 512, 768
    offs = offsets(sizes)
    a = torch.randn(sum(sizes), K, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    b = (torch.randn(G, K, N, device=DEV, dtype=torch.bfloat16) / K ** 0.5).requires_grad_()
    out = torch.ops.warpweave.grouped_mm(a, b, offs)
    grad = torch.randn_like(out)
    out.backward(grad)
    # dB = grouped_mm(a.t(), grad, offs): the ragged-K form, a's columns contiguous.
    assert chosen_k() == "tlx_ws"
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    torch._grouped_mm(a2, b2, offs).backward(grad)
    assert rel_err(a.grad, a2.grad) < 1e-2
    assert rel_err(b.grad, b2.grad) < 1e-2


# ------------------------------------------------------------------------------------------------
# Ragged K: a [M, K_total] x b [K_total, N] -> [G, M, N], a = x.t() (the weight gradient) or a
# with contiguous rows
# ------------------------------------------------------------------------------------------------


def loop_reference_k(a, b, offs):
    out = torch.zeros(offs.shape[0], a.shape[0], b.shape[1], device=DEV)
    start = 0
    for g, end in enumerate(offs.tolist()):
        out[g] = a[:, start:end].float() @ b[start:end].float()
        start = end
    return out


def chosen_k():
    return _tuning.decisions["grouped_mm_ragged_k"].chosen.kernel


def a_of(x, layout):
    """x [T, M] as a [M, T]: its transpose ("m", the weight gradient's) or a copy with
    contiguous rows ("k")."""
    return x.t() if layout == "m" else x.t().contiguous()


@pytest.mark.parametrize("layout", ["m", "k"])
def test_ragged_k_weight_gradient_vs_torch_grouped_mm(monkeypatch, layout):
    # G = 8, 8192 tokens in ragged groups (empty, 16 tokens, not multiples of the 64-deep K
    # step; multiples of 16, as MoE token splits are padded for torch._grouped_mm), M = 2048,
    # N = 1408 (5.5 tiles of 256). (Groups of any size: the exact test below.)
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    sizes = [0, 1008, 16, 2992, 112, 144, 2896, 1024]
    G, M, N = 8, 2048, 1408
    offs = offsets(sizes)
    x = torch.randn(sum(sizes), M, device=DEV, dtype=torch.bfloat16)
    dy = torch.randn(sum(sizes), N, device=DEV, dtype=torch.bfloat16) / 64
    out = ops.grouped_mm(a_of(x, layout), dy, offs)
    assert chosen_k() == "tlx_ws"
    assert out.shape == (G, M, N)
    assert not out.isnan().any(), "an output element was not written"
    assert not out[0].any()  # the empty group
    assert rel_err(out, loop_reference_k(x.t(), dy, offs)) < 1e-2
    if layout == "m":
        assert rel_err(out, torch._grouped_mm(x.t(), dy, offs)) < 1e-2


@pytest.mark.parametrize("layout", ["m", "k"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_ragged_k_exact_products_with_partial_k_steps(monkeypatch, dtype, layout):
    # Multiples of 1/8 and at most 512 columns a group: every product and sum is exact in fp32.
    # Groups end inside K steps (1, 63, 65, ...); tokens past the last group (104) are
    # infinities, which the last group's partial step reads and must zero. Groups start at
    # every token residue mod 8 (3, 1, 2, 4, 5, 6, 7, ...): with a's rows contiguous ("k") the
    # kernel's boxes start at the token rounded down to 8 (TMA's 16-byte aligned inner
    # coordinate; the H200 raised an illegal instruction without that) and the previous
    # group's tokens it reads must be zeroed, or the sums are no longer exact. M and N partial
    # tiles; T a multiple of 8 (a's rows in the "k" layout: 16-byte pitches).
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    sizes = [3, 0, 0, 29, 64, 65, 127, 129, 255, 257, 1, 0, 512, 2, 1, 1, 65, 9]
    T, M, N = sum(sizes) + 104, 200, 328
    assert T % 8 == 0
    offs = offsets(sizes)
    x = (torch.randint(-8, 9, (T, M), device=DEV) / 8).to(dtype)
    dy = (torch.randint(-8, 9, (T, N), device=DEV) / 8).to(dtype)
    x[sum(sizes):] = float("inf")
    dy[sum(sizes):] = float("inf")
    out = ops.grouped_mm(a_of(x, layout), dy, offs)
    assert chosen_k() == "tlx_ws"
    assert torch.equal(out, loop_reference_k(x.t(), dy, offs).to(dtype))
    assert torch.equal(ops.grouped_mm(a_of(x, layout), dy, offs, kernel="tlx"), out)


def test_ragged_k_every_candidate_at_deepseek_shapes(monkeypatch):
    # 64 experts' weight gradients, 2048 x 1408, skewed token splits with empty experts.
    sizes = [0 if g % 4 == 1 else (g * 37) % 700 for g in range(64)]
    G, M, N = 64, 2048, 1408
    offs = offsets(sizes)
    x = torch.randn(sum(sizes), M, device=DEV, dtype=torch.bfloat16)
    dy = torch.randn(sum(sizes), N, device=DEV, dtype=torch.bfloat16) / 16
    theirs = loop_reference_k(x.t(), dy, offs)
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "1")
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", "grouped_mm_ragged_k=default")
    ops.grouped_mm(x.t(), dy, offs)
    candidates = [c for c in _tuning.decisions["grouped_mm_ragged_k"].candidates
                  if c.kernel == "tlx_ws"]
    assert len(candidates) == len(_grouped_mm.GROUPED_MM_TLX_CONFIGS)
    for c in candidates:
        monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", f"grouped_mm_ragged_k={c!r}")
        out = ops.grouped_mm(x.t(), dy, offs)
        assert _tuning.decisions["grouped_mm_ragged_k"].chosen == c
        assert not out.isnan().any(), c
        assert rel_err(out, theirs) < 1e-2, c


def test_ragged_k_cuda_graph_replays_new_group_sizes(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    G, M, N, T = 8, 1024, 2048, 4096
    x = torch.randn(T, M, device=DEV, dtype=torch.bfloat16)
    dy = torch.randn(T, N, device=DEV, dtype=torch.bfloat16) / 64
    offs = offsets([512] * 8)
    ops.grouped_mm(x.t(), dy, offs)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.grouped_mm(x.t(), dy, offs)
    assert chosen_k() == "tlx_ws"
    for sizes in ([512] * 8, [0, 4000, 0, 1, 0, 0, 95, 0], [100] * 8):
        offs.copy_(offsets(sizes))
        graph.replay()
        torch.cuda.synchronize()
        assert rel_err(out, loop_reference_k(x.t(), dy, offs)) < 1e-2, sizes


def test_ragged_k_calls_it_does_not_take_run_the_tl_kernel(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    offs = offsets([100, 0, 156])
    a = torch.randn(256, 256, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(256, 132, device=DEV, dtype=torch.bfloat16)  # N % 8 != 0
    out = ops.grouped_mm(a, b, offs)
    assert chosen_k() == "tl"
    assert rel_err(out, loop_reference_k(a, b, offs)) < 1e-2
    a = torch.randn(512, 512, device=DEV, dtype=torch.bfloat16)[::2, ::2]  # strided both ways
    b = torch.randn(256, 128, device=DEV, dtype=torch.bfloat16)
    out = ops.grouped_mm(a, b, offs)
    assert chosen_k() == "tl"
    assert rel_err(out, loop_reference_k(a, b, offs)) < 1e-2
