"""Attention's backward pass with its multi-dot loops software-pipelined (SoftwarePipeline.cpp,
analyzeMultiDot: loop-invariant A operands stored once into shared memory, the per-iteration B
tiles copied by cp.async S - 1 iterations ahead, every dot an async wgmma) on the GPU against
PyTorch's autograd of scaled_dot_product_attention: ops.attention_bwd and
torch.ops.warpweave.attention's backward, HEAD_DIM 64 and 128, causal and not; and the two small
multi-dot kernels of tests/python/test_multi_dot_pipeline.py against torch."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

from warpweave import ops  # noqa: E402
import test_multi_dot_pipeline as multi  # noqa: E402

DEV = "cuda"
F = torch.nn.functional


def sdpa_grads(q, k, v, do, causal, sm_scale=None):
    qr, kr, vr = (t.detach().float().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal, scale=sm_scale)
    out.backward(do.float())
    return out.detach(), qr.grad, kr.grad, vr.grad


def check(name, mine, ref, tol):
    err = (mine.float() - ref).abs().max().item()
    scale = max(1.0, ref.abs().max().item())
    assert err <= tol * scale, (name, err, scale)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("z,h,n_ctx", [(1, 2, 128), (2, 3, 1000), (1, 4, 1024)])
def test_ops_attention_bwd_matches_sdpa_autograd(head_dim, causal, z, h, n_ctx):
    torch.manual_seed(0)
    shape = (z, h, n_ctx, head_dim)
    q, k, v, do = (torch.randn(shape, device=DEV, dtype=torch.float16) for _ in range(4))
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = ops.attention_bwd(do, q, k, v, out, lse, causal=causal)
    torch.cuda.synchronize()
    ref_out, ref_dq, ref_dk, ref_dv = sdpa_grads(q, k, v, do, causal)
    check("out", out, ref_out, 1e-2)
    for name, mine, ref in (("dq", dq, ref_dq), ("dk", dk, ref_dk), ("dv", dv, ref_dv)):
        check(name, mine, ref, 2e-2)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_autograd_backward_matches_sdpa(head_dim, causal):
    torch.manual_seed(1)
    shape = (2, 2, 512, head_dim)
    q, k, v = (torch.randn(shape, device=DEV, dtype=torch.float16, requires_grad=True)
               for _ in range(3))
    out, _ = torch.ops.warpweave.attention(q, k, v, causal, 0.125)
    do = torch.randn(shape, device=DEV, dtype=torch.float16)
    out.backward(do)
    ref_out, ref_dq, ref_dk, ref_dv = sdpa_grads(q, k, v, do, causal, 0.125)
    check("out", out.detach(), ref_out, 1e-2)
    for name, mine, ref in (("dq", q.grad, ref_dq), ("dk", k.grad, ref_dk),
                            ("dv", v.grad, ref_dv)):
        check(name, mine, ref, 2e-2)


@pytest.mark.parametrize("iters,num_stages", [(1, 3), (7, 3), (9, 5)])
def test_multi_dot_kernel_matches_torch(iters, num_stages):
    torch.manual_seed(2)
    M, D, N = 64, 32, 32
    x = torch.randn((M, D), device=DEV, dtype=torch.float16) * 0.5
    b = torch.randn((iters, D, N), device=DEV, dtype=torch.float16) * 0.5
    c = torch.randn((iters, N, D), device=DEV, dtype=torch.float16) * 0.5
    out = torch.full((M * D + M * N,), float("nan"), device=DEV)
    multi.multi_dot_kernel[(1,)](x, b, c, out, iters, M=M, D=D, N=N, num_warps=4,
                                 num_stages=num_stages)
    acc, side = multi.multi_dot_ref(x.cpu().numpy(), b.cpu().numpy(), c.cpu().numpy())
    check("acc", out[:M * D].view(M, D).cpu(), torch.tensor(acc).float(), 2e-2)
    check("side", out[M * D:].view(M, N).cpu(), torch.tensor(side).float(), 1e-3)


@pytest.mark.parametrize("iters,num_stages", [(1, 5), (3, 3), (10, 5)])
def test_dkdv_like_kernel_matches_torch(iters, num_stages):
    torch.manual_seed(3)
    N, D, M = 64, 32, 16
    k = torch.randn((N, D), device=DEV, dtype=torch.float16) * 0.5
    q = torch.randn((iters, M, D), device=DEV, dtype=torch.float16) * 0.5
    do = torch.randn((iters, M, D), device=DEV, dtype=torch.float16) * 0.5
    out = torch.full((2 * N * D,), float("nan"), device=DEV)
    multi.dkdv_like_kernel[(1,)](k, q, do, out, iters, N=N, D=D, M=M, num_warps=4,
                                 num_stages=num_stages)
    k64 = k.double()
    dk = torch.zeros((N, D), device=DEV, dtype=torch.float64)
    dv = torch.zeros((N, D), device=DEV, dtype=torch.float64)
    for j in range(iters):
        q64, do64 = q[j].double(), do[j].double()
        dv += (0.25 * (k64 @ q64.T)).half().double() @ do64
        dk += (k64 @ do64.T).half().double() @ q64
    check("dk", out[:N * D].view(N, D), dk.float(), 2e-2)
    check("dv", out[N * D:].view(N, D), dv.float(), 2e-2)


@pytest.mark.parametrize("iters,num_stages", [(1, 3), (6, 4)])
def test_two_loops_kernel_matches_torch(iters, num_stages):
    """Two multi-dot loops whose buffers share their bytes (the second's stores and copies
    after the first's last reads)."""
    torch.manual_seed(4)
    M, D, N = 64, 32, 32
    x, y = (torch.randn((M, D), device=DEV, dtype=torch.float16) * 0.5 for _ in range(2))
    b = torch.randn((iters, D, N), device=DEV, dtype=torch.float16) * 0.5
    c = torch.randn((iters, N, D), device=DEV, dtype=torch.float16) * 0.5
    out = torch.full((M * D + M * N,), float("nan"), device=DEV)
    multi.two_loops_kernel[(1,)](x, y, b, c, out, iters, M=M, D=D, N=N, num_warps=4,
                                 num_stages=num_stages)
    bn, cn = b.cpu().numpy(), c.cpu().numpy()
    acc_x, side_x = multi.multi_dot_ref(x.cpu().numpy(), bn, cn)
    acc_y, side_y = multi.multi_dot_ref(y.cpu().numpy(), bn, cn)
    check("acc", out[:M * D].view(M, D).cpu(), torch.tensor(acc_x + acc_y).float(), 2e-2)
    check("side", out[M * D:].view(M, N).cpu(), torch.tensor(2 * (side_x + side_y)).float(),
          2e-3)
