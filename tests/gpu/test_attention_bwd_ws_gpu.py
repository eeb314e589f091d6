"""The Hopper warp-specialized attention backward (kernels/hopper/attention_bwd_ws.py, through
ops.attention_bwd(kernel="tlx")) on an sm_90 GPU against PyTorch's autograd of
scaled_dot_product_attention in fp32: HEAD_DIM 64 and 128, causal and not, up to 4 x 32 x 4096;
the kernels launched directly on gradients poisoned with NaN (every element written, dq_accum
zeroed by the preprocess); both ring depths, with DEFER_DK and with dQ split by query rows;
and kernel=None choosing between the tl pair and the TLX kernel when tuning."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

from warpweave import ops  # noqa: E402
from warpweave.ops import _attention, _tuning  # noqa: E402

DEV = "cuda"
F = torch.nn.functional

pytestmark = pytest.mark.skipif(torch.cuda.get_device_capability() != (9, 0),
                                reason="the TLX backward needs an sm_90 GPU")


def sdpa_grads(q, k, v, do, causal, sm_scale=None):
    qr, kr, vr = (t.detach().float().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal, scale=sm_scale)
    out.backward(do.float())
    return qr.grad, kr.grad, vr.grad


def check(name, mine, ref, tol):
    assert not torch.isnan(mine).any(), name
    err = (mine.float() - ref).abs().max().item()
    scale = max(1.0, ref.abs().max().item())
    assert err <= tol * scale, (name, err, scale)


def inputs(shape, dtype, seed):
    torch.manual_seed(seed)
    q, k, v, do = (torch.randn(shape, device=DEV, dtype=dtype) for _ in range(4))
    return q, k, v, do


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("z,h,n_ctx,head_dim", [(4, 32, 4096, 128), (2, 4, 1024, 64),
                                                (1, 2, 128, 128), (2, 3, 640, 64),
                                                (1, 4, 2048, 128)])
def test_tlx_backward_matches_sdpa_autograd(causal, z, h, n_ctx, head_dim):
    q, k, v, do = inputs((z, h, n_ctx, head_dim), torch.float16, 0)
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = ops.attention_bwd(do, q, k, v, out, lse, causal=causal, kernel="tlx")
    torch.cuda.synchronize()
    ref = sdpa_grads(q, k, v, do, causal)
    for name, mine, want in zip(("dq", "dk", "dv"), (dq, dk, dv), ref):
        check(name, mine, want, 2e-2)


@pytest.mark.parametrize("variant", [{}, dict(DEFER_DK=True), dict(BLOCK_M=128, DQ_SPLIT=2)])
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("head_dim,causal", [(128, True), (64, False), (128, False),
                                             (64, True)])
def test_kernels_write_every_gradient_element(stages, head_dim, causal, variant):
    if variant.get("BLOCK_M") == 128 and head_dim != 64:
        pytest.skip("128-query steps fit in shared memory at HEAD_DIM 64 only")
    """The three kernels launched on NaN-poisoned outputs, delta and dq_accum."""
    z, h, n_ctx = 2, 3, 768
    q, k, v, do = inputs((z, h, n_ctx, head_dim), torch.bfloat16, 1)
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
    delta = torch.full((z * h, n_ctx), float("nan"), device=DEV)
    dq_accum = torch.full((z * h * n_ctx, head_dim), float("nan"), device=DEV)
    config = dict(_attention.ATTENTION_BWD_TLX_CONFIG, NUM_STAGES=stages, **variant)
    place = _attention._Place("test", {"q": q})
    _attention._launch_bwd_tlx(place, _tuning.direct, "test", q, k, v, do, out,
                               lse.reshape(z * h, n_ctx), delta, dq_accum, dq, dk, dv,
                               head_dim ** -0.5, causal, config)
    torch.cuda.synchronize()
    ref = sdpa_grads(q, k, v, do, causal)
    for name, mine, want in zip(("dq", "dk", "dv"), (dq, dk, dv), ref):
        check(name, mine, want, 3e-2)


def test_autograd_and_tuned_choice_match_sdpa(monkeypatch):
    """kernel=None on sm_90 tunes the tl pair against the TLX kernel: whichever wins, the
    gradients match."""
    q, k, v, do = inputs((2, 8, 1024, 128), torch.float16, 2)
    out, lse = ops.attention(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = ops.attention_bwd(do, q, k, v, out, lse, causal=True)
    torch.cuda.synchronize()
    decision = _tuning.decisions.get("attention_bwd_kernel")
    assert decision is not None and {c.kernel for c in decision.candidates} == {"tl", "tlx"}
    print(decision)
    ref = sdpa_grads(q, k, v, do, True)
    for name, mine, want in zip(("dq", "dk", "dv"), (dq, dk, dv), ref):
        check(name, mine, want, 2e-2)
