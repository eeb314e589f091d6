"""torch.ops.warpweave.* on the GPU (CUDA tensors): values and gradients against PyTorch, the
attention backward kernel (causal and not, HEAD_DIM 64 and 128) against SDPA in fp32, the
sm_90 routing of ops.matmul / ops.attention to the TLX kernels against the tl ones, a CPU / CUDA
mix refused, and torch.compile(fullgraph=True) of a small model with the default backend."""

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

from warpweave import ops  # noqa: E402

W = torch.ops.warpweave
F = torch.nn.functional
DEV = "cuda"


def leaves(*tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(64, 1000), (8, 4096), (3, 5, 333)])
def test_softmax_and_layernorm_gradients(dtype, shape):
    x = torch.randn(shape, device=DEV, dtype=dtype)
    (a,), (b,) = leaves(x), leaves(x)
    y = W.softmax(a)
    ref = torch.softmax(b.float(), -1)
    g = torch.randn_like(y)
    y.backward(g)
    ref.backward(g.float())
    assert rel_err(y, ref) < 1e-2 and rel_err(a.grad, b.grad) < 2e-2
    n = shape[-1]
    w, bias = torch.randn(n, device=DEV, dtype=dtype), torch.randn(n, device=DEV, dtype=dtype)
    (x1, w1, b1), (x2, w2, b2) = leaves(x, w, bias), leaves(x, w, bias)
    y = W.layernorm(x1, w1, b1, 1e-5)[0]
    ref = F.layer_norm(x2.float(), (n,), w2.float(), b2.float(), 1e-5)
    y.backward(g)
    ref.backward(g.float())
    assert rel_err(y, ref) < 1e-2
    for mine, theirs in ((x1, x2), (w1, w2), (b1, b2)):
        assert rel_err(mine.grad, theirs.grad) < 2e-2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mnk", [(512, 512, 512), (1000, 264, 520), (4096, 4096, 4096)])
def test_matmul_routing_and_gradients(dtype, mnk):
    M, N, K = mnk
    a = torch.randn(M, K, device=DEV, dtype=dtype)
    b = torch.randn(K, N, device=DEV, dtype=dtype)
    ref = a.float() @ b.float()
    auto = ops.matmul(a, b)  # the TLX GEMM on sm_90 (K, N multiples of 8), the tl kernel else
    tl_path = ops.matmul(a, b, kernel="tl")
    assert rel_err(auto, ref) < 1e-2 and rel_err(tl_path, ref) < 1e-2
    bias = torch.randn(N, device=DEV)
    a1, b1, bias1 = leaves(a, b, bias)
    c = W.matmul(a1, b1, bias1, "relu")
    a2, b2, bias2 = leaves(a.float(), b.float(), bias)
    r = torch.relu(a2 @ b2 + bias2)
    g = torch.randn_like(r)
    c.backward(g.to(dtype))
    r.backward(g)
    assert rel_err(c, r) < 1e-2
    for mine, theirs in ((a1, a2), (b1, b2), (bias1, bias2)):
        assert rel_err(mine.grad, theirs.grad) < 2e-2


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("n_ctx", [128, 1000, 4096])
def test_attention_forward_and_backward(causal, head_dim, n_ctx):
    shape = (2, 4, n_ctx, head_dim)
    q, k, v = (torch.randn(shape, device=DEV, dtype=torch.float16) for _ in range(3))
    (q1, k1, v1), (q2, k2, v2) = leaves(q, k, v), leaves(q.float(), k.float(), v.float())
    out, lse = W.attention(q1, k1, v1, causal, None)
    ref = F.scaled_dot_product_attention(q2, k2, v2, is_causal=causal)
    do = torch.randn(shape, device=DEV, dtype=torch.float16)
    out.backward(do)
    ref.backward(do.float())
    assert rel_err(out, ref) < 5e-3
    for name, mine, theirs in (("dq", q1, q2), ("dk", k1, k2), ("dv", v1, v2)):
        assert rel_err(mine.grad, theirs.grad) < 1e-2, name
    # The tl kernel and the TLX one (sm_90 routing) agree.
    if n_ctx % 128 == 0:
        tl_out = ops.attention(q, k, v, causal=causal, kernel="tl")
        assert rel_err(out.detach(), tl_out) < 5e-3


def test_embedding_bag_gradients():
    weight = torch.randn(1000, 128, device=DEV)
    indices = torch.randint(0, 1000, (4096,), device=DEV)
    offsets = torch.arange(0, 4097, 32, device=DEV)
    psw = torch.randn(4096, device=DEV)
    (w1, p1), (w2, p2) = leaves(weight, psw), leaves(weight, psw)
    out = W.embedding_bag(w1, indices, offsets, p1, "sum")
    ref = F.embedding_bag(indices, w2, offsets, mode="sum", per_sample_weights=p2,
                          include_last_offset=True)
    g = torch.randn_like(out)
    out.backward(g)
    ref.backward(g)
    assert rel_err(out, ref) < 1e-5
    assert rel_err(w1.grad, w2.grad) < 1e-5 and rel_err(p1.grad, p2.grad) < 1e-5


def test_cpu_and_cuda_mix_is_refused():
    with pytest.raises(ValueError, match=r"warpweave::add: 'y' is on cpu but 'x' is on cuda"):
        W.add(torch.ones(4, device=DEV), torch.ones(4))


def test_torch_compile_fullgraph_default_backend():
    def block(x, w, b, proj, bias):
        h = W.layernorm(x, w, b, 1e-5)[0]
        return W.softmax(W.matmul(h, proj, bias, "relu"))

    x = torch.randn(256, 512, device=DEV, dtype=torch.float16, requires_grad=True)
    w, b = torch.ones(512, device=DEV, dtype=torch.float16), torch.zeros(512, device=DEV,
                                                                          dtype=torch.float16)
    proj = torch.randn(512, 256, device=DEV, dtype=torch.float16) * 0.05
    bias = torch.zeros(256, device=DEV)
    eager = block(x, w, b, proj, bias)
    compiled = torch.compile(block, fullgraph=True)(x, w, b, proj, bias)
    assert rel_err(compiled, eager) < 1e-3
    compiled.float().square().sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
