"""Variable-length attention (ops.attention_varlen / attention_varlen_bwd,
kernels/attention_varlen.py; torch.ops.warpweave.attention_varlen) in the CPU interpreter:

- the forward on NumPy arrays against a float64 NumPy reference, for batches of ragged lengths
  (empty sequences on either side, length 1, lengths that are not multiples of the blocks,
  seqlen_q != seqlen_k both ways), causal (FlashAttention's bottom-right-aligned mask) and not,
  HEAD_DIM 64 / 128 (and 16, 256), fp16 and bf16, grouped-query heads, outputs poisoned with NaN
  before each run so that an unwritten row fails;
- the gradients through torch.ops.warpweave.attention_varlen's autograd on CPU tensors against
  torch autograd of a float64 reference;
- torch.library.opcheck, torch.compile(fullgraph=True) forward and backward;
- argument errors naming the argument;
- the kernels' GPU configurations compiled with ptxas for sm_90a (no spills at HEAD_DIM 64,
  128, 256) and sm_80.
"""

import importlib
import math

import numpy as np
import pytest

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

from warpweave import ops  # noqa: E402
from warpweave.ops import _common  # noqa: E402

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BF16 = None

needs_bf16 = pytest.mark.skipif(
    BF16 is None, reason="bfloat16 NumPy arrays need ml_dtypes (pip install ml-dtypes)")
DTYPES = ["float16", pytest.param("bfloat16", marks=needs_bf16)]
# Norm-wise relative error of the output (fp16 / bf16 rounding of the stored result) and the
# largest absolute error of the lse.
TOL = {"float16": 2e-3, "bfloat16": 1e-2}

# (seqlens_q, seqlens_k, H, H_KV): empty sequences on each side, length 1, lengths off the blocks
# (the interpreter's are 32 x 16 forward, 16 x 16 backward), Lq > Lk and Lq < Lk.
BATCHES = {
    "ragged_gqa": ([0, 1, 37, 5, 20, 3], [3, 1, 37, 0, 9, 17], 4, 2),
    "equal": ([17, 64, 1], [17, 64, 1], 2, 2),
    "decode": ([1, 2], [50, 33], 3, 1),
}


def np_dtype(name):
    return BF16 if name == "bfloat16" else np.dtype(name)


def cu(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def inputs(rng, batch, head_dim, dtype):
    lq, lk, h, h_kv = BATCHES[batch]
    q = rng.standard_normal((sum(lq), h, head_dim)).astype(np_dtype(dtype))
    k = rng.standard_normal((sum(lk), h_kv, head_dim)).astype(np_dtype(dtype))
    v = rng.standard_normal((sum(lk), h_kv, head_dim)).astype(np_dtype(dtype))
    return q, k, v, cu(lq), cu(lk), max(lq), max(lk)


def reference(q, k, v, cu_q, cu_k, causal, sm_scale):
    """(out, lse [H, total_q]) in float64: per sequence and head, the bottom-right-aligned causal
    mask; a query that sees no key gets zeros and lse +inf (FlashAttention's convention)."""
    q, k, v = (np.asarray(a).astype(np.float64) for a in (q, k, v))
    group = q.shape[1] // k.shape[1]
    out = np.zeros_like(q)
    lse = np.full((q.shape[1], q.shape[0]), np.inf)
    for b in range(len(cu_q) - 1):
        qs, qe, ks, ke = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        lq, lk = qe - qs, ke - ks
        for h in range(q.shape[1]):
            s = q[qs:qe, h] @ k[ks:ke, h // group].T * sm_scale
            if causal:
                s = np.where(np.arange(lk)[None, :] <= np.arange(lq)[:, None] + lk - lq, s,
                             -np.inf)
            for r in range(lq):
                if not np.isfinite(s[r]).any():
                    continue
                m = s[r].max()
                p = np.exp(s[r] - m)
                out[qs + r, h] = p @ v[ks:ke, h // group] / p.sum()
                lse[h, qs + r] = m + np.log(p.sum())
    return out, lse


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy % (1 << 32)
    print(f"seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    """Every array the wrappers allocate starts as NaN, so a row the kernels fail to write
    cannot pass."""
    allocate = _common._Place.empty

    def poisoned(self, shape, dtype):
        out = allocate(self, shape, dtype)
        if self.kind == "numpy":
            out[...] = np.nan
        return out

    monkeypatch.setattr(_common._Place, "empty", poisoned)


def check_forward(out, lse, ref, ref_lse, dtype):
    assert np.isfinite(np.asarray(out, np.float64)).all()
    err = np.linalg.norm(out.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30)
    assert err <= TOL[dtype], f"out: relative error {err:.2e}"
    # Queries that see no key: lse +inf, exactly where the reference has it.
    np.testing.assert_array_equal(np.isposinf(lse), np.isposinf(ref_lse))
    seen = np.isfinite(ref_lse)
    if seen.any():
        lse_err = np.abs(lse[seen] - ref_lse[seen]).max()
        assert lse_err <= 1e-4 * max(1.0, np.abs(ref_lse[seen]).max()), f"lse: {lse_err:.2e}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batch", list(BATCHES))
def test_forward(rng, batch, causal, head_dim, dtype):
    q, k, v, cu_q, cu_k, max_q, max_k = inputs(rng, batch, head_dim, dtype)
    sm_scale = 0.5 / math.sqrt(head_dim) + 0.05
    out, lse = ops.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=causal,
                                    sm_scale=sm_scale, return_lse=True)
    assert out.dtype == q.dtype and out.shape == q.shape
    assert lse.dtype == np.float32 and lse.shape == (q.shape[1], q.shape[0])
    check_forward(out, lse, *reference(q, k, v, cu_q, cu_k, causal, sm_scale), dtype)


def test_bottom_right_causal_mask_as_flash_attention_documents_it():
    # FlashAttention's docstring: seqlen_q 2, seqlen_k 5 keeps [1 1 1 1 0], [1 1 1 1 1];
    # seqlen_q 5, seqlen_k 2 keeps nothing in rows 0-2, [1 0] in row 3, [1 1] in row 4.
    # With v = the identity (one-hot keys) and equal scores, out[i] is the mask's row i over
    # its count.
    for lq, lk, mask in ((2, 5, [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]),
                         (5, 2, [[0, 0], [0, 0], [0, 0], [1, 0], [1, 1]])):
        q = np.zeros((lq, 1, 16), np.float16)
        k = np.zeros((lk, 1, 16), np.float16)
        v = np.zeros((lk, 1, 16), np.float16)
        v[np.arange(lk), 0, np.arange(lk)] = 1
        out = ops.attention_varlen(q, k, v, cu([lq]), cu([lk]), lq, lk, causal=True)
        mask = np.array(mask, np.float64)
        expected = mask / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        np.testing.assert_allclose(out[:, 0, :lk].astype(np.float64), expected, atol=1e-3)


@pytest.mark.parametrize("head_dim", [16, 256])
def test_forward_other_head_dims(rng, head_dim):
    q, k, v, cu_q, cu_k, max_q, max_k = inputs(rng, "ragged_gqa", head_dim, "float16")
    out, lse = ops.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=True,
                                    return_lse=True)
    check_forward(out, lse, *reference(q, k, v, cu_q, cu_k, True, 1 / math.sqrt(head_dim)),
                  "float16")


def test_forward_strided_inputs_and_default_scale(rng):
    # q, k, v are slices of one packed [total, 3, H, D] QKV projection.
    lengths = [9, 0, 30]
    qkv = rng.standard_normal((sum(lengths), 3, 2, 32)).astype(np.float16)
    q, k, v = (qkv[:, i] for i in range(3))
    c = cu(lengths)
    out = ops.attention_varlen(q, k, v, c, c, 30, 30, causal=True)
    ref, _ = reference(q, k, v, c, c, True, 1 / math.sqrt(32))
    assert np.linalg.norm(out.astype(np.float64) - ref) <= 2e-3 * np.linalg.norm(ref)


def test_gpu_block_sizes_in_the_interpreter(rng, monkeypatch):
    # The GPU configuration (forward 128 x 64, backward 64 x 64 blocks) run on NumPy arrays:
    # sequences shorter than, equal to and longer than one block.
    monkeypatch.setattr(_common._Place, "on_gpu", property(lambda self: True))
    lq, lk = [130, 0, 64, 7], [70, 5, 64, 140]
    q = rng.standard_normal((sum(lq), 2, 64)).astype(np.float16)
    k, v = (rng.standard_normal((sum(lk), 1, 64)).astype(np.float16) for _ in range(2))
    out, lse = ops.attention_varlen(q, k, v, cu(lq), cu(lk), 130, 140, causal=True,
                                    return_lse=True)
    check_forward(out, lse, *reference(q, k, v, cu(lq), cu(lk), True, 0.125), "float16")
    do = rng.standard_normal(q.shape).astype(np.float16)
    grads = ops.attention_varlen_bwd(do, q, k, v, out, lse, cu(lq), cu(lk), 130, 140,
                                     causal=True)
    for got, ref in zip(grads, torch_reference(q, k, v, do, cu(lq), cu(lk), True, 0.125)[1:]):
        assert np.linalg.norm(got.astype(np.float64) - ref) <= 5e-3 * np.linalg.norm(ref)


# ------------------------------------------------------------------------------------------------
# Gradients: torch.ops.warpweave.attention_varlen's autograd against float64 torch autograd
# ------------------------------------------------------------------------------------------------


def torch_reference(q, k, v, do, cu_q, cu_k, causal, sm_scale):
    """(out, dq, dk, dv) as float64 NumPy arrays, from torch autograd of a per-sequence
    reference (bottom-right causal mask; rows that see no key give zeros)."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    q, k, v = (torch.tensor(np.asarray(a, np.float64), requires_grad=True) for a in (q, k, v))
    group = q.shape[1] // k.shape[1]
    outs = []
    for b in range(len(cu_q) - 1):
        qs, qe, ks, ke = (int(x) for x in (cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]))
        lq, lk = qe - qs, ke - ks
        kb = k[ks:ke].repeat_interleave(group, dim=1)
        vb = v[ks:ke].repeat_interleave(group, dim=1)
        s = torch.einsum("qhd,khd->hqk", q[qs:qe], kb) * sm_scale
        if causal:
            keep = torch.arange(lk)[None, :] <= torch.arange(lq)[:, None] + lk - lq
            s = s.masked_fill(~keep, float("-inf"))
        m = s.amax(-1, keepdim=True) if lk else s.new_zeros(s.shape[:-1] + (1,))
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m).detach()
        p = torch.exp(s - m)
        total = p.sum(-1, keepdim=True)
        p = p / torch.where(total == 0, torch.ones_like(total), total)
        outs.append(torch.einsum("hqk,khd->qhd", p, vb))
    out = torch.cat(outs)
    out.backward(torch.tensor(np.asarray(do, np.float64)))
    return out.detach().numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy()


def as_torch(a):
    import torch

    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


@pytest.mark.parametrize("dtype,head_dim", [("float16", 64), ("bfloat16", 64),
                                            ("float16", 128)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batch", ["ragged_gqa", "decode"])
def test_gradients_through_the_torch_op(rng, batch, causal, dtype, head_dim):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if dtype == "bfloat16" and BF16 is None:
        pytest.skip("bfloat16 NumPy arrays need ml_dtypes")
    q, k, v, cu_q, cu_k, max_q, max_k = inputs(rng, batch, head_dim, dtype)
    do = rng.standard_normal(q.shape).astype(np_dtype(dtype))
    sm_scale = 0.1
    tq, tk, tv = (as_torch(a).requires_grad_() for a in (q, k, v))
    out, lse = torch.ops.warpweave.attention_varlen(
        tq, tk, tv, torch.from_numpy(cu_q), torch.from_numpy(cu_k), max_q, max_k, causal,
        sm_scale)
    assert lse.shape == (q.shape[1], q.shape[0]) and not lse.requires_grad
    out.backward(as_torch(do))
    ref = torch_reference(q, k, v, do, cu_q, cu_k, causal, sm_scale)
    tol = {"float16": 5e-3, "bfloat16": 2e-2}[dtype]
    for name, mine, theirs in zip(("out", "dq", "dk", "dv"), (out, tq.grad, tk.grad, tv.grad),
                                  ref):
        assert mine.dtype == tq.dtype and tuple(mine.shape) == theirs.shape, name
        mine = mine.detach().double().numpy()
        err = np.linalg.norm(mine - theirs) / max(np.linalg.norm(theirs), 1e-30)
        assert err <= tol, f"{name}: relative error {err:.2e}"


def test_numpy_backward_and_interpret_mode_cpu_tensors(rng, monkeypatch):
    # ops.attention_varlen_bwd on NumPy arrays, and the plain API on CPU tensors under
    # WARPWEAVE_INTERPRET=1 (cu_seqlens read on the host for the checks).
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    q, k, v, cu_q, cu_k, max_q, max_k = inputs(rng, "ragged_gqa", 64, "float16")
    do = rng.standard_normal(q.shape).astype(np.float16)
    out, lse = ops.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=True,
                                    return_lse=True)
    dq, dk, dv = ops.attention_varlen_bwd(do, q, k, v, out, lse, cu_q, cu_k, max_q, max_k,
                                          causal=True)
    ref = torch_reference(q, k, v, do, cu_q, cu_k, True, 1 / 8)
    for mine, theirs in zip((out, dq, dk, dv), ref):
        assert np.linalg.norm(mine.astype(np.float64) - theirs) <= 5e-3 * np.linalg.norm(theirs)
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    tout = ops.attention_varlen(*(torch.from_numpy(a) for a in (q, k, v, cu_q, cu_k)), max_q,
                                max_k, causal=True)
    np.testing.assert_array_equal(tout.numpy(), out)
    with pytest.raises(ValueError, match=r"'max_seqlen_q' is 36 but 'cu_seqlens_q' holds a "
                                         r"sequence of 37"):
        ops.attention_varlen(*(torch.from_numpy(a) for a in (q, k, v, cu_q, cu_k)), 36, max_k)


# ------------------------------------------------------------------------------------------------
# torch.library: opcheck, torch.compile
# ------------------------------------------------------------------------------------------------


def torch_inputs(torch, lq=(5, 0, 19), lk=(7, 3, 19), h=2, h_kv=1, d=32):
    torch.manual_seed(0)
    q = torch.randn(sum(lq), h, d, dtype=torch.float16, requires_grad=True)
    k = torch.randn(sum(lk), h_kv, d, dtype=torch.float16, requires_grad=True)
    v = torch.randn(sum(lk), h_kv, d, dtype=torch.float16, requires_grad=True)
    return q, k, v, torch.from_numpy(cu(lq)), torch.from_numpy(cu(lk)), max(lq), max(lk)


def test_opcheck():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    args = torch_inputs(torch)
    torch.library.opcheck(torch.ops.warpweave.attention_varlen.default, (*args, True, None),
                          test_utils=("test_schema", "test_autograd_registration",
                                      "test_faketensor"))


def test_torch_compile_fullgraph_forward_and_backward():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    W = torch.ops.warpweave

    def f(q, k, v, cu_q, cu_k, max_q, max_k):
        out, _ = W.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, True, None)
        return out.float().square().sum()

    q, k, v, cu_q, cu_k, max_q, max_k = torch_inputs(torch)
    eager = f(q, k, v, cu_q, cu_k, max_q, max_k)
    eager.backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v, cu_q, cu_k, max_q,
                                                                     max_k)
    torch.testing.assert_close(compiled, eager)
    compiled.backward()
    for t, g in zip((q, k, v), grads):
        torch.testing.assert_close(t.grad, g)


# ------------------------------------------------------------------------------------------------
# Argument errors name the argument
# ------------------------------------------------------------------------------------------------


def test_argument_errors():
    h = np.zeros((8, 2, 16), np.float16)
    kv = np.zeros((6, 1, 16), np.float16)
    c8, c6 = cu([3, 5]), cu([2, 4])
    good = (h, kv, kv, c8, c6, 5, 4)

    def call(*replace, **kwargs):
        args = list(good)
        for i, value in replace:
            args[i] = value
        return ops.attention_varlen(*args, **kwargs)

    cases = [
        (lambda: call((0, h.astype(np.float32))), r"'q' has dtype float32; expected float16 "
                                                  r"or bfloat16"),
        (lambda: call((0, h[0])), r"'q' must be 3-D \[total_q, H, HEAD_DIM\]"),
        (lambda: call((1, kv.astype(BF16 or np.float32))), r"'k' has dtype"),
        (lambda: call((2, kv[:5])), r"'v' must have shape \(6, 1, 16\)"),
        (lambda: call((1, np.zeros((6, 1, 32), np.float16))), r"'k' .*HEAD_DIM must be q's"),
        (lambda: call((1, np.zeros((6, 3, 16), np.float16)), (2, np.zeros((6, 3, 16),
                                                                           np.float16))),
         r"'k' has 3 heads; q's head count \(2\) must be a multiple"),
        (lambda: call((0, np.zeros((8, 2, 24), np.float16)), (1, np.zeros((6, 1, 24),
                                                                           np.float16)),
                      (2, np.zeros((6, 1, 24), np.float16))), r"'q' has HEAD_DIM 24"),
        (lambda: call((3, c8.astype(np.int64))), r"'cu_seqlens_q' has dtype int64; expected "
                                                 r"int32"),
        (lambda: call((4, c6[:2])), r"'cu_seqlens_k' has 2 entries but 'cu_seqlens_q' has 3"),
        (lambda: call((3, np.zeros(0, np.int32))), r"'cu_seqlens_q' is empty"),
        (lambda: call((3, np.array([0, 3, 7], np.int32))), r"'cu_seqlens_q' must rise from 0 "
                                                           r"to 8"),
        (lambda: call((4, np.array([0, 5, 6], np.int32))),
         r"'max_seqlen_k' is 4 but 'cu_seqlens_k' holds a sequence of 5"),
        (lambda: call((4, np.array([1, 2, 6], np.int32))), r"'cu_seqlens_k' must rise from 0"),
        (lambda: call((5, 4)), r"'max_seqlen_q' is 4 but 'cu_seqlens_q' holds a sequence of 5"),
        (lambda: call((6, -1)), r"'max_seqlen_k' must be a non-negative int"),
        (lambda: call((5, 5.0)), r"'max_seqlen_q' must be a non-negative int"),
        (lambda: call(causal=1), r"'causal' must be True or False"),
        (lambda: call(sm_scale=float("inf")), r"'sm_scale' must be a finite number"),
        (lambda: ops.attention_varlen_bwd(h, h, kv, kv, h, np.zeros((2, 7), np.float32),
                                          c8, c6, 5, 4), r"'lse' must have shape \(2, 8\)"),
        (lambda: ops.attention_varlen_bwd(h[:7], h, kv, kv, h, np.zeros((2, 8), np.float32),
                                          c8, c6, 5, 4), r"'do' must have shape \(8, 2, 16\)"),
    ]
    for fn, message in cases:
        with pytest.raises(ValueError, match=message):
            fn()
    # The good call passes.
    assert call().shape == h.shape


def test_torch_op_errors_name_the_op_and_argument():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    W = torch.ops.warpweave
    q, k, v, cu_q, cu_k, max_q, max_k = torch_inputs(torch)
    with pytest.raises(ValueError, match=r"warpweave::attention_varlen.*'cu_seqlens_q' has "
                                         r"dtype int64"):
        W.attention_varlen(q, k, v, cu_q.long(), cu_k, max_q, max_k, False, None)
    with pytest.raises(ValueError, match=r"warpweave::attention_varlen.*'max_seqlen_k' is 3"):
        W.attention_varlen(q, k, v, cu_q, cu_k, max_q, 3, False, None)
    with pytest.raises(ValueError, match=r"warpweave::attention_varlen: 'cu_seqlens_k' is on "
                                         r"meta"):
        W.attention_varlen(q, k, v, cu_q, cu_k.to("meta"), max_q, max_k, False, None)

    def f(q, k, v, cu_q, cu_k):
        return W.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, False, None)[0]

    # Under torch.compile the fake implementation reports it while tracing.
    with pytest.raises(Exception, match=r"warpweave::attention_varlen: 'k' has 3 heads"):
        torch.compile(f, fullgraph=True, backend="aot_eager")(
            q, torch.cat([k] * 3, 1), torch.cat([v] * 3, 1), cu_q, cu_k)


# ------------------------------------------------------------------------------------------------
# The GPU configurations compile (ptxas) for sm_90a and sm_80
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_gpu_configuration_compiles(gpu_compiles, target, head_dim):
    gpu_compiles.target = target
    compiled = gpu_compiles.kernels
    lengths = cu([1000, 24])
    q = np.ones((1024, 4, head_dim), np.float16)
    kv = np.ones((1024, 2, head_dim), np.float16)
    lse = np.ones((4, 1024), np.float32)
    ops.attention_varlen(q, kv, kv, lengths, lengths, 1000, 1000, causal=True)
    ops.attention_varlen_bwd(q, q, kv, kv, q, lse, lengths, lengths, 1000, 1000, causal=True)
    names = [kernel.fn.__name__ for kernel in compiled]
    assert names == ["attention_varlen_fwd_kernel", "attention_varlen_bwd_preprocess_kernel",
                     "attention_varlen_bwd_dkdv_kernel", "attention_varlen_bwd_dq_kernel"]
    for kernel in compiled:
        assert len(kernel.kernel.cubin) > 0
        print(f"{target} D{head_dim} {kernel.fn.__name__}: {kernel.n_regs} registers, "
              f"{kernel.n_spills} spill bytes, {kernel.shared} B shared")
    if target == "sm_90a":  # (sm_80 spills as the dense attention kernels do there)
        assert [kernel.n_spills for kernel in compiled] == [0] * 4
