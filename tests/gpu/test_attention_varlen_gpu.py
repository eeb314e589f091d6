"""Variable-length attention on the GPU (torch.ops.warpweave.attention_varlen, CUDA tensors):
forward and backward against torch's scaled_dot_product_attention run sequence by sequence in
fp32, causal (FlashAttention's bottom-right-aligned mask) and not, HEAD_DIM 64 / 128 / 256, fp16
and bf16, grouped-query heads, ragged lengths (empty sequences on either side, length 1, lengths
off the blocks, seqlen_q != seqlen_k both ways), outputs poisoned with NaN; and
torch.compile(fullgraph=True) with the default backend."""

import pytest

from gpu_requirements import require_cuda, seed_and_poison_outputs

torch = require_cuda()

from warpweave import ops  # noqa: E402

W = torch.ops.warpweave
F = torch.nn.functional
DEV = "cuda"

# (seqlens_q, seqlens_k)
BATCHES = {
    "self": ([1000, 1, 4096, 0, 513, 128], [1000, 1, 4096, 0, 513, 128]),
    "ragged": ([0, 300, 77, 1, 2048, 5], [17, 100, 200, 64, 2048, 0]),
}


@pytest.fixture(autouse=True)
def seeded_and_poisoned(monkeypatch):
    seed_and_poison_outputs(monkeypatch, torch, ops)


def cu(lengths):
    c = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    c[1:] = torch.tensor(lengths).cumsum(0)
    return c.to(DEV)


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def sdpa_per_sequence(q, k, v, lq, lk, causal, sm_scale):
    """out [total_q, H, D] from SDPA over each sequence (k / v heads repeated for grouped-query
    attention). Queries that see no key (no keys, or before the bottom-right causal diagonal)
    are left out of SDPA, whose softmax over nothing is NaN, and get zeros."""
    group = q.shape[1] // k.shape[1]
    outs = []
    qs = ks = 0
    for n_q, n_k in zip(lq, lk):
        qb, kb, vb = q[qs:qs + n_q], k[ks:ks + n_k], v[ks:ks + n_k]
        first = min(n_q, max(0, n_q - n_k)) if causal else (0 if n_k else n_q)
        out = qb.new_zeros(qb.shape)
        if first < n_q:
            rows = torch.arange(first, n_q, device=DEV)[:, None]
            mask = torch.arange(n_k, device=DEV)[None, :] <= rows + n_k - n_q if causal else None
            o = F.scaled_dot_product_attention(
                qb[first:].transpose(0, 1), kb.repeat_interleave(group, 1).transpose(0, 1),
                vb.repeat_interleave(group, 1).transpose(0, 1), attn_mask=mask, scale=sm_scale)
            out = torch.cat([out[:first], o.transpose(0, 1)])
        outs.append(out)
        qs, ks = qs + n_q, ks + n_k
    return torch.cat(outs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batch", list(BATCHES))
def test_forward_and_backward_against_sdpa(batch, causal, head_dim, dtype):
    lq, lk = BATCHES[batch]
    h, h_kv = 8, 2
    q = torch.randn(sum(lq), h, head_dim, device=DEV, dtype=dtype)
    k = torch.randn(sum(lk), h_kv, head_dim, device=DEV, dtype=dtype)
    v = torch.randn(sum(lk), h_kv, head_dim, device=DEV, dtype=dtype)
    do = torch.randn_like(q)
    sm_scale = head_dim ** -0.5
    (q1, k1, v1) = (t.clone().requires_grad_() for t in (q, k, v))
    (q2, k2, v2) = (t.float().requires_grad_() for t in (q, k, v))
    out, lse = W.attention_varlen(q1, k1, v1, cu(lq), cu(lk), max(lq), max(lk), causal, None)
    ref = sdpa_per_sequence(q2, k2, v2, lq, lk, causal, sm_scale)
    out.backward(do)
    ref.backward(do.float())
    tol = 5e-3 if dtype == torch.float16 else 2e-2
    assert out.dtype == dtype and lse.shape == (h, sum(lq)) and lse.dtype == torch.float32
    assert rel_err(out, ref) < tol
    for name, mine, theirs in (("dq", q1, q2), ("dk", k1, k2), ("dv", v1, v2)):
        assert torch.isfinite(mine.grad).all(), name
        assert rel_err(mine.grad, theirs.grad) < 2 * tol, name


def test_matches_the_dense_kernel_on_equal_lengths():
    # One sequence per batch entry of equal lengths: the same numbers as ops.attention's
    # [Z, H, N, D] layout (its lse in base 2).
    z, h, n, d = 3, 4, 1000, 128
    q, k, v = (torch.randn(z, h, n, d, device=DEV, dtype=torch.float16) for _ in range(3))
    dense, dense_lse = ops.attention(q, k, v, causal=True, return_lse=True, kernel="tl")
    packed = [t.transpose(1, 2).reshape(z * n, h, d) for t in (q, k, v)]
    c = cu([n] * z)
    out, lse = ops.attention_varlen(*packed, c, c, n, n, causal=True, return_lse=True)
    assert rel_err(out, dense.transpose(1, 2).reshape(z * n, h, d)) < 1e-3
    base2 = dense_lse.permute(1, 0, 2).reshape(h, z * n)
    assert rel_err(lse, base2 * 0.6931471805599453) < 1e-5


def test_torch_compile_fullgraph_default_backend():
    lq = lk = [100, 0, 257]

    def block(q, k, v, cu_q, cu_k):
        out, _ = W.attention_varlen(q, k, v, cu_q, cu_k, 257, 257, True, None)
        return out.float().square().sum()

    q = torch.randn(sum(lq), 4, 64, device=DEV, dtype=torch.float16, requires_grad=True)
    k = torch.randn(sum(lk), 4, 64, device=DEV, dtype=torch.float16, requires_grad=True)
    v = torch.randn(sum(lk), 4, 64, device=DEV, dtype=torch.float16, requires_grad=True)
    eager = block(q, k, v, cu(lq), cu(lk))
    eager.backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    compiled = torch.compile(block, fullgraph=True)(q, k, v, cu(lq), cu(lk))
    assert rel_err(compiled, eager) < 1e-5
    compiled.backward()
    for t, g in zip((q, k, v), grads):
        assert rel_err(t.grad, g) < 1e-5
