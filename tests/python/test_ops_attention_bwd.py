"""Attention backward (python/warpweave/ops/kernels/attention_bwd.py) in the CPU interpreter at
small sizes, against PyTorch's scaled_dot_product_attention in float64: through the NumPy API
(ops.attention_bwd) and through torch.ops.warpweave.attention's autograd, causal and not, HEAD_DIM
64 (and 32), N_CTX not a multiple of the blocks."""

import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

from warpweave import ops  # noqa: E402

F = torch.nn.functional


def reference(q, k, v, do, causal, sm_scale=None):
    """(out, dq, dk, dv) of PyTorch's attention in float64."""
    qt, kt, vt = (torch.tensor(np.asarray(a, np.float64), requires_grad=True) for a in (q, k, v))
    out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=sm_scale)
    out.backward(torch.tensor(np.asarray(do, np.float64)))
    return out.detach().numpy(), qt.grad.numpy(), kt.grad.numpy(), vt.grad.numpy()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(1, 2, 40, 64), (2, 1, 33, 32)])
def test_attention_bwd_numpy(causal, shape):
    rng = np.random.default_rng(7)
    q, k, v, do = (rng.standard_normal(shape).astype(np.float16) for _ in range(4))
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = ops.attention_bwd(do, q, k, v, out, lse, causal=causal)
    ref = reference(q, k, v, do, causal)
    for name, mine, theirs in zip(("out", "dq", "dk", "dv"), (out, dq, dk, dv), ref):
        assert mine.dtype == np.float16, name
        err = np.abs(mine.astype(np.float64) - theirs).max()
        assert err <= 4e-3 * max(1.0, np.abs(theirs).max()), (name, err)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_autograd_bf16_with_sm_scale(causal):
    torch.manual_seed(3)
    shape = (1, 2, 48, 64)
    q, k, v = (torch.randn(shape, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out, lse = torch.ops.warpweave.attention(q, k, v, causal, 0.2)
    assert lse.shape == shape[:3] and lse.dtype == torch.float32 and not lse.requires_grad
    do = torch.randn(shape, dtype=torch.bfloat16)
    out.backward(do)
    ref = reference(q.detach().float(), k.detach().float(), v.detach().float(), do.float(),
                    causal, 0.2)
    for name, mine, theirs in zip(("out", "dq", "dk", "dv"), (out, q.grad, k.grad, v.grad), ref):
        err = (mine.detach().double() - torch.tensor(theirs)).abs().max().item()
        assert err <= 3e-2 * max(1.0, np.abs(theirs).max()), (name, err)


def test_attention_bwd_checks_its_arguments():
    q = np.zeros((1, 1, 16, 64), np.float16)
    lse = np.zeros((1, 1, 16), np.float32)
    with pytest.raises(ValueError, match=r"attention_bwd: 'lse' must have shape \(1, 1, 16\)"):
        ops.attention_bwd(q, q, q, q, q, lse[:, :, :8])
    with pytest.raises(ValueError, match=r"attention_bwd: 'do' has dtype float32 but 'q' has "
                                         r"float16"):
        ops.attention_bwd(q.astype(np.float32), q, q, q, q, lse)
    with pytest.raises(ValueError, match=r"attention_bwd: 'q' has HEAD_DIM 48"):
        q48 = np.zeros((1, 1, 16, 48), np.float16)
        ops.attention_bwd(q48, q48, q48, q48, q48, lse)
