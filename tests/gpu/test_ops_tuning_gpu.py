"""warpweave.ops's per-shape tuning (warpweave.ops._tuning) on the GPU: for matmul, scaled_mm,
grouped_mm (ragged M and K), attention forward and backward and variable-length attention,
the tuned call (its first call on the shape times every candidate), every candidate forced one
at a time (WARPWEAVE_OPS_CONFIG) and the fixed configuration (WARPWEAVE_OPS_TUNING=0) all match
PyTorch, with outputs poisoned with NaN. Also: a fresh process reads the choice from the disk
cache instead of timing again; a launch plan replays the tuned launch on new data; a CUDA graph
capture on an untuned shape launches the fixed configuration and replays correctly. Each test
uses a private cache directory. No timing is asserted."""

import os
import subprocess
import sys

import pytest

from gpu_requirements import require_cuda, seed_and_poison_outputs

torch = require_cuda()

from warpweave import ops  # noqa: E402
from warpweave.ops import _common, _tuning  # noqa: E402

DEV = "cuda"
F = torch.nn.functional
FP8 = torch.cuda.get_device_capability() >= (8, 9)


@pytest.fixture(autouse=True)
def private_tuning(monkeypatch, tmp_path):
    """Poisoned outputs, a fresh cache directory and no tuned choices in memory; tuning on."""
    seed_and_poison_outputs(monkeypatch, torch, ops)
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    for var in ("WARPWEAVE_CACHE_DISABLE", "WARPWEAVE_OPS_TUNING", "WARPWEAVE_OPS_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "1")  # tuning is opt-in
    monkeypatch.setattr(_tuning, "_chosen", {})
    monkeypatch.setattr(_tuning, "decisions", {})
    return tmp_path


def rel_err(a, b):
    torch.cuda.synchronize()
    assert not a.isnan().any(), "an output element was not written (NaN)"
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def tuned_forced_and_fixed(monkeypatch, op, call, check, how="timed"):
    """check(call()) tuned (timed on this first call, or `how` where an earlier call of this
    test chose for `op` too), with each candidate forced, and with tuning off; returns the
    tuned Decision."""
    # A launch plan of an earlier identical call would replay its launches without choosing.
    _common._launch_plans.clear()
    check(call(), "tuned")
    decision = _tuning.decisions[op]
    # A single candidate (e.g. HEAD_DIM 256, where one tile shape fits) is never timed.
    assert decision.how == (how if len(decision.candidates) > 1 else "fixed"), decision
    assert decision.chosen in decision.candidates
    for c in decision.candidates:
        monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", f"{op}={c!r}")
        check(call(), repr(c))
    monkeypatch.delenv("WARPWEAVE_OPS_CONFIG")
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    check(call(), "fixed")
    assert _tuning.decisions[op].chosen == decision.candidates[0]
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "1")
    print(f"{op}: {decision}")
    return decision


# ------------------------------------------------------------------------------------------------
# GEMMs
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
# 256x4096x2048: a few-tile product, whose fixed configuration is the TLX GEMM on 128x64 tiles.
@pytest.mark.parametrize("mnk", [(512, 384, 256), (4096, 4096, 4096), (48, 1000, 512),
                                 (1000, 264, 520), (300, 250, 130), (256, 4096, 2048)])
def test_matmul(monkeypatch, dtype, mnk):
    M, N, K = mnk
    a = torch.randn(M, K, device=DEV, dtype=dtype)
    b = torch.randn(K, N, device=DEV, dtype=dtype)
    ref = a.float() @ b.float()

    def check(c, what):
        assert rel_err(c, ref) < 1e-2, what

    decision = tuned_forced_and_fixed(monkeypatch, "matmul", lambda: ops.matmul(a, b), check)
    sm90 = torch.cuda.get_device_capability() == (9, 0)
    assert ("tlx_ws" in {c.kernel for c in decision.candidates}) == (sm90 and N % 8 == 0
                                                                     and K % 8 == 0)
    if sm90 and mnk == (256, 4096, 2048) and torch.cuda.get_device_properties(0).\
            multi_processor_count >= 128:
        assert decision.candidates[0]["BLOCK_N"] == 64

    def check_relu(c, what):
        assert rel_err(c, torch.relu(ref)) < 1e-2, what

    # With an activation: the tl kernel's configurations only.
    decision = tuned_forced_and_fixed(
        monkeypatch, "matmul", lambda: ops.matmul(a, b, activation="relu"), check_relu)
    assert {c.kernel for c in decision.candidates} == {"tl"}


@pytest.mark.skipif(not FP8, reason="fp8 tl.dot needs compute capability 8.9 or later")
@pytest.mark.parametrize("mnk", [(256, 256, 128), (2048, 1024, 1024), (1000, 1040, 512),
                                 (200, 136, 40), (16384, 8192, 1024)])
@pytest.mark.parametrize("rowwise", [False, True])
def test_scaled_mm(monkeypatch, mnk, rowwise):
    M, N, K = mnk
    a = torch.randn(M, K, device=DEV).to(torch.float8_e4m3fn)
    bt = torch.randn(N, K, device=DEV).to(torch.float8_e4m3fn)
    if rowwise:
        sa, sb = torch.rand(M, 1, device=DEV) + 0.5, torch.rand(1, N, device=DEV) + 0.5
    else:
        sa, sb = torch.tensor(0.5, device=DEV), torch.tensor(2.0, device=DEV)
    bias = torch.randn(N, device=DEV, dtype=torch.bfloat16)
    ref = (a.float() @ bt.float().t()) * sa * sb + bias.float()

    def check(c, what):
        assert rel_err(c, ref) < 1e-2, what

    decision = tuned_forced_and_fixed(monkeypatch, "scaled_mm", lambda: ops.scaled_mm(
        a, bt.t(), sa, sb, out_dtype=torch.bfloat16, bias=bias), check)
    assert ("tma" in {c.kernel for c in decision.candidates}) == (K % 16 == 0)


def groups(sizes):
    offs = torch.tensor(sizes, device=DEV).cumsum(0).to(torch.int32)
    bounds, start = [], 0
    for s in sizes:
        bounds.append((start, start + s))
        start += s
    return offs, bounds


@pytest.mark.parametrize("sizes,K,N", [([512] * 8, 512, 1408), ([0, 300, 77, 1, 640, 0, 5], 256,
                                                                 384), ([64] * 16, 512, 256)])
def test_grouped_mm_ragged_rows_and_ragged_k(monkeypatch, sizes, K, N):
    offs, bounds = groups(sizes)
    G, M = len(sizes), sum(sizes)
    a = torch.randn(M, K, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(G, K, N, device=DEV, dtype=torch.bfloat16) / K ** 0.5
    ref = torch.zeros(M, N, device=DEV)
    for g, (s, e) in enumerate(bounds):
        ref[s:e] = a[s:e].float() @ b[g].float()

    def check(c, what):
        assert rel_err(c, ref) < 1e-2, what

    tuned_forced_and_fixed(monkeypatch, "grouped_mm", lambda: ops.grouped_mm(a, b, offs), check)
    # Ragged K (the weight gradient): at [M2, K_total] x [K_total, N].
    at = torch.randn(96, M, device=DEV, dtype=torch.bfloat16)
    refk = torch.stack([at[:, s:e].float() @ a[s:e].float() for s, e in bounds])

    def check_k(c, what):
        assert rel_err(c, refk) < 1e-2, what

    tuned_forced_and_fixed(monkeypatch, "grouped_mm_ragged_k",
                           lambda: ops.grouped_mm(at, a, offs), check_k)


# ------------------------------------------------------------------------------------------------
# Attention
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 4, 1024, 64), (1, 8, 4096, 128), (2, 2, 1000, 128),
                                   (1, 2, 300, 256)])
def test_attention_forward_and_backward(monkeypatch, causal, shape):
    q, k, v, do = (torch.randn(shape, device=DEV, dtype=torch.float16) for _ in range(4))
    q2, k2, v2 = (t.float().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(q2, k2, v2, is_causal=causal)
    ref.backward(do.float())

    def check(out, what):
        assert rel_err(out[0], ref) < 5e-3, what

    tuned_forced_and_fixed(monkeypatch, "attention", lambda: ops.attention(
        q, k, v, causal=causal, return_lse=True), check)
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "1")

    def check_grads(grads, what):
        for name, mine, theirs in zip(("dq", "dk", "dv"), grads, (q2.grad, k2.grad, v2.grad)):
            assert rel_err(mine, theirs) < 1e-2, (what, name)

    # One backward call chooses for both kernels: dQ's choice is in memory by its turn.
    for op, how in (("attention_bwd_dkdv", "timed"), ("attention_bwd_dq", "memory")):
        tuned_forced_and_fixed(monkeypatch, op, lambda: ops.attention_bwd(
            do, q, k, v, out, lse, causal=causal), check_grads, how)


def cu(lengths):
    c = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    c[1:] = torch.tensor(lengths).cumsum(0)
    return c.to(DEV)


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_attention_varlen_forward_and_backward(monkeypatch, head_dim):
    lengths = [1000, 1, 2048, 0, 513]
    h, h_kv = 8, 2
    total = sum(lengths)
    q = torch.randn(total, h, head_dim, device=DEV, dtype=torch.bfloat16)
    k, v = (torch.randn(total, h_kv, head_dim, device=DEV, dtype=torch.bfloat16)
            for _ in range(2))
    do = torch.randn_like(q)
    leaves = [t.float().requires_grad_() for t in (q, k, v)]
    refs, start = [], 0
    for n in lengths:
        qb, kb, vb = (t[start:start + n].transpose(0, 1) for t in leaves)
        kb, vb = (t.repeat_interleave(h // h_kv, 0) for t in (kb, vb))
        refs.append(F.scaled_dot_product_attention(qb, kb, vb, is_causal=True).transpose(0, 1)
                    if n else leaves[0][start:start])
        start += n
    ref = torch.cat(refs)
    ref.backward(do.float())
    cu_seq, longest = cu(lengths), max(lengths)

    def check(out, what):
        assert rel_err(out[0], ref) < 1e-2, what

    tuned_forced_and_fixed(monkeypatch, "attention_varlen", lambda: ops.attention_varlen(
        q, k, v, cu_seq, cu_seq, longest, longest, True, return_lse=True), check)
    out, lse = ops.attention_varlen(q, k, v, cu_seq, cu_seq, longest, longest, True,
                                    return_lse=True)

    def check_grads(grads, what):
        for name, mine, leaf in zip(("dq", "dk", "dv"), grads, leaves):
            assert rel_err(mine, leaf.grad) < 2e-2, (what, name)

    for op, how in (("attention_varlen_bwd_dkdv", "timed"),
                    ("attention_varlen_bwd_dq", "memory")):
        tuned_forced_and_fixed(monkeypatch, op, lambda: ops.attention_varlen_bwd(
            do, q, k, v, out, lse, cu_seq, cu_seq, longest, longest, True), check_grads, how)


# ------------------------------------------------------------------------------------------------
# The disk cache, launch plans, graph capture
# ------------------------------------------------------------------------------------------------

FRESH_PROCESS = """
import torch
from warpweave import ops
from warpweave.ops import _tuning
a = torch.randn(640, 384, device="cuda", dtype=torch.float16)
b = torch.randn(384, 520, device="cuda", dtype=torch.float16)
c = ops.matmul(a, b)
err = ((c.double() - (a.double() @ b.double())).norm() / (a.double() @ b.double()).norm()).item()
d = _tuning.decisions["matmul"]
print(f"{d.how}|{d.chosen!r}|{err < 1e-2}")
"""


def test_a_fresh_process_reads_the_choice_from_the_disk_cache(private_tuning):
    import warpweave

    env = dict(os.environ)
    env.pop("WARPWEAVE_INTERPRET", None)
    # The warpweave this process imported (an installed one, or a development tree).
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(warpweave.__file__)),
                                         env.get("PYTHONPATH", "")])

    def run():
        r = subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True,
                           text=True, timeout=600, env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        return r.stdout.strip().splitlines()[-1].split("|")

    how, chosen, ok = run()
    assert (how, ok) == ("timed", "True")
    assert list((private_tuning / "autotune").glob("*.json"))
    again = run()
    assert again == ["disk", chosen, "True"]


@pytest.mark.skipif(not FP8, reason="fp8 tl.dot needs compute capability 8.9 or later")
def test_a_launch_plan_replays_the_tuned_launch_on_new_data():
    M, N, K = 1024, 768, 512
    sb = torch.tensor(1.0, device=DEV)
    for i in range(3):
        a = torch.randn(M, K, device=DEV).to(torch.float8_e4m3fn)
        bt = torch.randn(N, K, device=DEV).to(torch.float8_e4m3fn)
        sa = torch.tensor(0.5 + i, device=DEV)
        c = ops.scaled_mm(a, bt.t(), sa, sb, out_dtype=torch.float32)
        # Hopper's fp8 accumulation is not exact: within 1.2x of torch._scaled_mm's own error
        # (its default, use_fast_accum=False, as ours) on the same data.
        ref = (a.double() @ bt.double().t()) * sa.double()
        theirs = torch._scaled_mm(a, bt.t(), sa, sb, out_dtype=torch.float32)
        assert rel_err(c, ref) <= 1.2 * rel_err(theirs, ref) + 1e-7
        if i == 0:
            assert _tuning.decisions["scaled_mm"].how == "timed"
            chosen = _tuning.decisions["scaled_mm"].chosen
            plans = [p for key, p in _common._launch_plans.items() if key[0] == "_scaled_mm"]
            assert len(plans) == 1 and len(plans[0].launches) == 1
            meta = plans[0].launches[0].meta
            assert all(meta[k] == v for k, v in chosen.config.items())


def test_graph_capture_on_an_untuned_shape(monkeypatch):
    sizes = [100, 0, 250, 30]
    offs, bounds = groups(sizes)
    a = torch.randn(sum(sizes), 256, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(len(sizes), 256, 320, device=DEV, dtype=torch.bfloat16)
    # The fixed configuration compiled and loaded outside the capture (nothing tuned).
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    ops.grouped_mm(a, b, offs)
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "1")
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        c = ops.grouped_mm(a, b, offs)
    assert _tuning.decisions["grouped_mm"].how == "provisional"
    a.copy_(torch.randn_like(a))
    graph.replay()
    ref = torch.cat([a[s:e].float() @ b[g].float() for g, (s, e) in enumerate(bounds)])
    assert rel_err(c, ref) < 1e-2
    # Outside the capture the shape is tuned.
    assert rel_err(ops.grouped_mm(a, b, offs), ref) < 1e-2
    assert _tuning.decisions["grouped_mm"].how == "timed"
