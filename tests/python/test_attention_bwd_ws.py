"""The Hopper warp-specialized attention backward (kernels/hopper/attention_bwd_ws.py): in the
interpreter against a float64 reference (its race and barrier checks on: a missing hand-over of
dS between the consumers is reported), through ops.attention_bwd(kernel="tlx") beside the tl
kernels, and compiled for sm_90a at its GPU configurations without spills."""

import importlib
import importlib.util
import math

import numpy as np
import pytest

import warpweave as ww
from warpweave import ops
from warpweave.ops import _attention
from warpweave.ops.kernels.hopper import attention_bwd_ws

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


def descriptor(t, block):
    return ww.TensorDescriptor(t, list(t.shape), [int(s) // t.itemsize for s in t.strides], block)


def reference(q, k, v, do, scale, causal):
    """(out, base-2 lse, dq, dk, dv) in float64 for [ZH, N, D] inputs."""
    q, k, v, do = (t.astype(np.float64) for t in (q, k, v, do))
    s = q @ k.transpose(0, 2, 1) * scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    p /= l
    out = p @ v
    lse = (np.log(l[..., 0]) + m[..., 0]) / math.log(2.0)
    dp = do @ v.transpose(0, 2, 1)
    ds = p * (dp - (do * out).sum(-1, keepdims=True))
    return out, lse, ds @ k * scale, ds.transpose(0, 2, 1) @ q * scale, p.transpose(0, 2, 1) @ do


def launch(q, k, v, do, out, lse, scale, causal, stages=2, defer_dk=False, bm=64,
           dq_split=-1):
    """The three kernels on [ZH, N, D] arrays, outputs and scratch poisoned with NaN."""
    zh, n, d = q.shape
    bn = 128
    delta = np.full((zh, n), np.nan, np.float32)
    dq_accum = np.full((zh * n, d), np.nan, np.float32)
    dq, dk, dv = (np.full((zh * n, d), np.nan, q.dtype) for _ in range(3))
    q2, k2, v2, do2 = (t.reshape(zh * n, d) for t in (q, k, v, do))
    attention_bwd_ws.attention_bwd_ws_preprocess_kernel[(n // bm, zh)](
        out, do, delta, dq_accum, n, HEAD_DIM=d, BLOCK_M=bm)
    attention_bwd_ws.attention_bwd_ws_kernel[(n // bn, zh)](
        descriptor(q2, [bm, d]), descriptor(k2, [bn // 2, d]), descriptor(v2, [bn // 2, d]),
        descriptor(do2, [bm, d]),
        descriptor(dq_accum, _attention._bwd_tlx_dq_tile(bm, d, dq_split)),
        descriptor(dk, [bn // 2, d]), descriptor(dv, [bn // 2, d]), lse, delta, scale, n,
        HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, NUM_STAGES=stages, CAUSAL=causal, DEFER_DK=defer_dk,
        DQ_SPLIT=dq_split, num_warps=4)
    attention_bwd_ws.attention_bwd_ws_postprocess_kernel[(n // bm, zh)](
        dq_accum, dq, scale, n, HEAD_DIM=d, BLOCK_M=bm)
    return (t.reshape(zh, n, d) for t in (dq, dk, dv))


@pytest.mark.parametrize("defer_dk", [False, True])
@pytest.mark.parametrize("n_ctx,head_dim,causal,stages,bm", [
    (256, 64, False, 2, 64), (256, 64, True, 2, 64), (384, 64, True, 3, 64),
    (256, 128, False, 2, 64), (384, 128, True, 2, 64), (384, 128, False, 3, 64),
    (384, 64, True, 2, 128), (256, 64, False, 2, 128)])
@pytest.mark.parametrize("dq_split", [-1, 2])
def test_kernel_matches_float64_reference(n_ctx, head_dim, causal, stages, bm, defer_dk,
                                          dq_split):
    if dq_split == 2 and bm != 128:
        pytest.skip("dQ split by query rows takes BLOCK_M 128")
    rng = np.random.default_rng(n_ctx + head_dim + causal)
    zh = 2
    q, k, v, do = (rng.standard_normal((zh, n_ctx, head_dim)).astype(np.float16)
                   for _ in range(4))
    scale = 1 / math.sqrt(head_dim)
    out, lse, *want = reference(q, k, v, do, scale, causal)
    got = launch(q, k, v, do, out.astype(np.float16), lse.astype(np.float32), scale, causal,
                 stages, defer_dk, bm, dq_split)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert not np.isnan(g).any(), name
        err = np.abs(g.astype(np.float64) - w).max()
        assert err <= 4e-3 * max(1.0, np.abs(w).max()), (name, err)


@pytest.mark.parametrize("head_dim,causal", [(64, True), (128, False)])
def test_ops_kernel_tlx_matches_the_tl_kernels(head_dim, causal):
    rng = np.random.default_rng(head_dim)
    q, k, v, do = (rng.standard_normal((1, 2, 256, head_dim)).astype(np.float16)
                   for _ in range(4))
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
    tlx = ops.attention_bwd(do, q, k, v, out, lse, causal=causal, kernel="tlx")
    tl = ops.attention_bwd(do, q, k, v, out, lse, causal=causal, kernel="tl")
    _, _, *want = reference(*(t[0] for t in (q, k, v, do)), 1 / math.sqrt(head_dim), causal)
    for a, b, w in zip(tlx, tl, want):
        np.testing.assert_allclose(a.astype(np.float64), b, atol=1e-3)
        np.testing.assert_allclose(a[0].astype(np.float64), w, atol=4e-3)


def test_ops_kernel_tlx_refuses_shapes_it_does_not_take():
    x = np.zeros((1, 1, 200, 64), np.float16)
    lse = np.zeros((1, 1, 200), np.float32)
    with pytest.raises(ValueError, match=r"kernel='tlx' takes HEAD_DIM 64 or 128 and N_CTX a "
                                         r"multiple of 128, got HEAD_DIM 64 and N_CTX 200"):
        ops.attention_bwd(x, x, x, x, x, lse, kernel="tlx")
    with pytest.raises(ValueError, match="'kernel' must be None, 'tl', 'tlx' or 'tlx_blackwell'"):
        ops.attention_bwd(x, x, x, x, x, lse, kernel="cudnn")


def planted_copy(tmp_path, old, new):
    """attention_bwd_ws.py with `old` replaced by `new`, imported from outside the package."""
    text = open(attention_bwd_ws.__file__).read()
    planted = text.replace(old, new)
    assert planted != text
    # A copy outside the package imports the shared row helpers absolutely.
    planted = planted.replace("from ..attention_bwd import",
                              "from warpweave.ops.kernels.attention_bwd import")
    mod = tmp_path / "planted_bwd.py"
    mod.write_text(planted)
    spec = importlib.util.spec_from_file_location("planted_bwd", mod)
    planted_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(planted_module)
    return planted_module


def test_deferred_dk_released_too_early_is_reported(tmp_path, monkeypatch):
    """DEFER_DK releases a block's Q stage only after the next block's first wait has completed
    that block's dK MMA. Released as soon as S^T is done instead, the producer's next TMA load
    into the stage can overwrite Q under the running dK MMA: the interpreter reports it."""
    planted = planted_copy(
        tmp_path,
        "        if j > j_first:\n            tlx.barrier_arrive(tlx.local_view(q_empty, (j - 1) % "
        "NUM_STAGES))",
        "        tlx.barrier_arrive(tlx.local_view(q_empty, stage))")
    rng = np.random.default_rng(5)
    q, k, v, do = (rng.standard_normal((1, 384, 64)).astype(np.float16) for _ in range(4))
    out, lse, *_ = reference(q, k, v, do, 0.1, False)
    monkeypatch.setattr(attention_bwd_ws, "attention_bwd_ws_kernel",
                        planted.attention_bwd_ws_kernel)
    with pytest.raises(Exception, match=r"planted_bwd\.py:\d+:\d+: error: async_dot reads "
                                        r"shared memory that async_desc_load"):
        list(launch(q, k, v, do, out.astype(np.float16), lse.astype(np.float32), 0.1, False,
                    2, True))


def test_missing_ds_hand_over_is_reported(tmp_path):
    """Without the named barrier between writing dS and the other consumer's dQ wgmma, the
    interpreter reports the unwritten (or unordered) shared memory at the dQ wgmma."""
    planted_module = planted_copy(
        tmp_path, "        tlx.named_barrier_wait(DS_BAR, BOTH_GROUPS)\n        if me == 0:",
        "        if me == 0:")
    rng = np.random.default_rng(3)
    q, k, v, do = (rng.standard_normal((1, 256, 128)).astype(np.float16) for _ in range(4))
    out, lse, *_ = reference(q, k, v, do, 0.1, False)
    saved = attention_bwd_ws.attention_bwd_ws_kernel
    try:
        attention_bwd_ws.attention_bwd_ws_kernel = planted_module.attention_bwd_ws_kernel
        with pytest.raises(Exception, match=r"planted_bwd\.py:\d+:\d+: error: async_dot reads "
                                            r"shared memory"):
            list(launch(q, k, v, do, out.astype(np.float16), lse.astype(np.float32), 0.1, False))
    finally:
        attention_bwd_ws.attention_bwd_ws_kernel = saved


def signature(head_dim, causal, stages, dtype="fp16", bm=64):
    d, bn = head_dim, 128
    tile, half = f"desc<{dtype},{bm}x{d}>", f"desc<{dtype},{bn // 2}x{d}>"
    dq_rows, dq_cols = _attention._bwd_tlx_dq_tile(bm, d, 2 if bm == 128 else -1)
    return (f"q_desc:{tile}, k_desc:{half}, v_desc:{half}, do_desc:{tile}, "
            f"dq_desc:desc<fp32,{dq_rows}x{dq_cols}>, dk_desc:{half}, dv_desc:{half}, "
            f"lse_ptr:*fp32:16, delta_ptr:*fp32:16, sm_scale:fp32, N_CTX:i32:16, HEAD_DIM={d}, "
            f"BLOCK_M={bm}, BLOCK_N={bn}, NUM_STAGES={stages}, CAUSAL={int(causal)}")


@pytest.mark.parametrize("head_dim,causal,stages,dtype,variant", [
    (64, False, 2, "fp16", ""), (64, True, 3, "fp16", ""), (128, False, 2, "fp16", ""),
    (128, True, 2, "bf16", ""), (128, True, 3, "fp16", ""), (64, True, 2, "fp16", "defer"),
    (128, False, 3, "fp16", "defer"), (128, True, 2, "fp16", "defer"),
    (64, True, 3, "fp16", "rows")])
def test_compiles_for_sm90a_without_spills(head_dim, causal, stages, dtype, variant):
    """variant "defer": DEFER_DK; "rows": 128-query steps with dQ split by rows (DQ_SPLIT=2)."""
    env = attention_bwd_ws.attention_bwd_ws_kernel.environment()
    bm = 128 if variant == "rows" else 64
    extra = dict(DEFER_DK=int(variant == "defer"), DQ_SPLIT=2 if variant == "rows" else -1)
    sig = signature(head_dim, causal, stages, dtype, bm) + "".join(
        f", {k}={v}" for k, v in extra.items())
    k = native_loader.native().compile(env.files, "attention_bwd_ws_kernel", sig, env.globals,
                                       target="sm_90a", num_warps=4, stage="cubin")
    assert k.spill_bytes == 0
    # 12 warps: .maxnreg 168; the consumers raise theirs to 240, the producer drops to 24.
    assert k.registers <= 168
    assert "setmaxnreg.inc.sync.aligned.u32 240" in k.ptx
    assert "setmaxnreg.dec.sync.aligned.u32 24" in k.ptx
    assert k.shared_bytes <= 232448
    cfg = dict(BLOCK_M=bm, BLOCK_N=128, NUM_STAGES=stages, DQ_SPLIT=extra["DQ_SPLIT"])
    assert abs(k.shared_bytes - _attention._bwd_tlx_shared(cfg, head_dim, 2)) <= 2048
    ptx = k.ptx
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group" in ptx
    # dV and dK take P^T and dS^T from registers (wgmma with A as four 32-bit registers).
    assert "wgmma.mma_async.sync.aligned.m64n" + str(head_dim) + "k16.f32" in ptx
    print(f"D{head_dim} causal={causal} stages={stages} {dtype}: {k.registers} registers, "
          f"{k.spill_bytes} spill bytes, {k.shared_bytes} B shared")
