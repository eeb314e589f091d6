"""warpweave.ops's launch plans on the GPU: repeated calls of the row wrappers with one argument
signature replay the first call's launches (TMA descriptors rebuilt over the new tensors on
sm_90+) and match PyTorch on new data every time; outputs are fresh tensors per call."""

import os
import sys

import pytest

from gpu_requirements import require_cuda, seed_and_poison_outputs

torch = require_cuda()

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from warpweave import ops  # noqa: E402
from warpweave.ops import _common  # noqa: E402

F = torch.nn.functional
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-5}


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    """Outputs start as NaN (an element a kernel never writes fails the checks)."""
    seed_and_poison_outputs(monkeypatch, torch, ops)


def close(out, ref, dtype, what):
    torch.cuda.synchronize()
    assert not torch.isnan(out.double()).any(), f"{what}: NaN (an element never written)"
    err = (out.double() - ref.double()).norm().item() / max(ref.double().norm().item(), 1e-300)
    assert err <= TOL[dtype], f"{what}: relative error {err:.3g}"


def uses_descriptors(op):
    return any(layout is not None for key, plan in _common._launch_plans.items() if key[0] == op
               for launch in plan.launches for _, _, layout, _ in launch.slots)


@pytest.mark.parametrize("rows,cols,dtype", [
    (4096, 1024, torch.float16), (1000, 4096, torch.bfloat16), (513, 2048, torch.float32),
    (300, 3000, torch.float16), (64, 50000, torch.float16),
    # 96 KB rows: six 16 KB slices, not a cluster size the backward's TMA split takes.
    (40, 49152, torch.float16),
])
def test_row_wrappers_replay_on_new_data(full_path_calls, rows, cols, dtype):
    w = torch.randn(cols, device="cuda", dtype=dtype)
    b = torch.randn(cols, device="cuda", dtype=dtype)
    outputs = []
    for call in range(3):
        x = (torch.randn(rows, cols, device="cuda") * (call + 1)).to(dtype)
        dy = torch.randn(rows, cols, device="cuda").to(dtype)
        out = ops.softmax(x)
        close(out, torch.softmax(x.double(), dim=-1), dtype, f"softmax call {call}")
        y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5)
        close(y, F.layer_norm(x.double(), (cols,), w.double(), b.double(), 1e-5), dtype,
              f"layernorm_fwd call {call}")
        xr = x.double().requires_grad_()
        wr, br = w.double().requires_grad_(), b.double().requires_grad_()
        F.layer_norm(xr, (cols,), wr, br, 1e-5).backward(dy.double())
        dx, dw, db = ops.layernorm_bwd(dy, x, w, mean, rstd)
        close(dx, xr.grad, dtype, f"dx call {call}")
        close(dw, wr.grad, dtype, f"dw call {call}")
        close(db, br.grad, dtype, f"db call {call}")
        outputs.append(out)
    assert full_path_calls == ["softmax", "layernorm_fwd", "layernorm_bwd"]
    assert outputs[0].data_ptr() != outputs[1].data_ptr() != outputs[2].data_ptr()
    row_bytes = cols * x.element_size()
    if (torch.cuda.get_device_capability()[0] >= 9 and 2048 <= row_bytes <= 32768
            and row_bytes & (row_bytes - 1) == 0):
        # The TMA row kernels' plans rebuild their descriptors over each call's tensors.
        assert uses_descriptors("softmax") and uses_descriptors("layernorm_fwd")


def test_views_and_strides_are_their_own_signatures(full_path_calls):
    wide = torch.randn(2048, 1536, device="cuda", dtype=torch.float16)
    for x in (wide, wide[:, :1024], wide[:, :1024], wide[1:, :1024], wide.T.contiguous()):
        close(ops.softmax(x), torch.softmax(x.double(), dim=-1), torch.float16, "softmax")
    # Only the repeated view replays: the others differ in shape or strides.
    assert len(full_path_calls) == 4


def full_path(monkeypatch, fn, *args, **kwargs):
    with monkeypatch.context() as m:
        m.setattr(_common, "LAUNCH_PLANS", False)
        return fn(*args, **kwargs)


@pytest.mark.parametrize("mnk,dtype", [((2048, 2048, 2048), torch.float16),
                                       ((512, 4096, 4096), torch.bfloat16),
                                       ((300, 264, 520), torch.float16)])
def test_matmul_replays_bit_for_bit(full_path_calls, monkeypatch, mnk, dtype):
    """ops.matmul's second call with a signature replays the first's launch (the TLX GEMM over
    descriptors rebuilt on the new tensors on sm_90): the same bits as the full path."""
    M, N, K = mnk
    for call in range(3):
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype)
        c = ops.matmul(a, b)
        close(c, a.double() @ b.double(), dtype, f"matmul call {call}")
        torch.testing.assert_close(c, full_path(monkeypatch, ops.matmul, a, b), rtol=0, atol=0)
    # One full path of the wrapper, then replays; the other three are the references.
    assert full_path_calls == ["matmul"] * 4
    if torch.cuda.get_device_capability() == (9, 0) and M * N > 300 * 264:
        assert uses_descriptors("matmul")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(8, 16, 1024, 64), (2, 4, 512, 128), (1, 3, 200, 64)])
def test_attention_replays_bit_for_bit(full_path_calls, monkeypatch, shape, causal):
    dtype = torch.float16
    for call in range(2):
        q, k, v, do = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(4))
        out, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        close(out, ref, dtype, f"attention call {call}")
        full = full_path(monkeypatch, ops.attention, q, k, v, causal=causal, return_lse=True)
        torch.testing.assert_close((out, lse), full, rtol=0, atol=0)
        grads = ops.attention_bwd(do, q, k, v, out, lse, causal=causal)
        # The TLX backward adds dQ by fp32 reductions, whose order (and last bits) vary.
        for got, want in zip(grads, full_path(monkeypatch, ops.attention_bwd, do, q, k, v, out,
                                              lse, causal=causal)):
            torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
    assert full_path_calls == ["attention", "attention", "attention_bwd", "attention_bwd"] + \
        ["attention", "attention_bwd"]
