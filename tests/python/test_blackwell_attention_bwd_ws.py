"""The Blackwell (sm_100a) warp-specialized attention backward (kernels/blackwell/
attention_bwd_ws.py): in the interpreter (which models tensor memory, tcgen05 MMAs and their
commits, and checks every shared- and tensor-memory access for races) against a float64
reference, through ops.attention_bwd(kernel="tlx_blackwell") beside the tl kernels, with planted
synchronization bugs reported at their line, and compiled for sm_100a through ptxas at its
configurations without spills. No Blackwell GPU ran any of it."""

import importlib
import importlib.util
import math
import re

import numpy as np
import pytest

import warpweave as ww
from warpweave import ops
from warpweave.ops import _attention, _common
from warpweave.ops.kernels.blackwell import attention_bwd_ws
from warpweave.ops.kernels.hopper import attention_bwd_ws as hopper_bwd

from blackwell_testing import descriptor, line_of

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

BLOCK_M, BLOCK_N = 64, 128


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


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


def launch(kernel, q, k, v, do, out, lse, scale, causal, stages):
    """The Hopper module's preprocess, `kernel`, then its postprocess on [ZH, N, D] arrays,
    outputs and scratch poisoned with NaN."""
    zh, n, d = q.shape
    delta = np.full((zh, n), np.nan, np.float32)
    dq_accum = np.full((zh * n, d), np.nan, np.float32)
    dq, dk, dv = (np.full((zh * n, d), np.nan, q.dtype) for _ in range(3))
    q2, k2, v2, do2 = (t.reshape(zh * n, d) for t in (q, k, v, do))
    hopper_bwd.attention_bwd_ws_preprocess_kernel[(n // BLOCK_M, zh)](
        out, do, delta, dq_accum, n, HEAD_DIM=d, BLOCK_M=BLOCK_M)
    kernel[(n // BLOCK_N, zh)](
        descriptor(q2, [BLOCK_M, d]), descriptor(k2, [BLOCK_N, d]), descriptor(v2, [BLOCK_N, d]),
        descriptor(do2, [BLOCK_M, d]), descriptor(dq_accum, [BLOCK_M, d]),
        descriptor(dk, [BLOCK_N, d]), descriptor(dv, [BLOCK_N, d]), lse, delta, scale, n,
        HEAD_DIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, NUM_STAGES=stages, CAUSAL=causal,
        num_warps=4)
    hopper_bwd.attention_bwd_ws_postprocess_kernel[(n // BLOCK_M, zh)](
        dq_accum, dq, scale, n, HEAD_DIM=d, BLOCK_M=BLOCK_M)
    return [t.reshape(zh, n, d) for t in (dq, dk, dv)]


def inputs(n_ctx, head_dim, causal, dtype=np.float16, zh=2, seed=0):
    rng = np.random.default_rng(seed + n_ctx + head_dim + causal)
    q, k, v, do = (rng.standard_normal((zh, n_ctx, head_dim)).astype(dtype) for _ in range(4))
    scale = 1 / math.sqrt(head_dim)
    out, lse, *want = reference(q, k, v, do, scale, causal)
    return (q, k, v, do, out.astype(dtype), lse.astype(np.float32), scale), want


@pytest.mark.parametrize("n_ctx,head_dim,causal,stages", [
    (256, 64, False, 2), (256, 64, True, 3), (256, 128, False, 2), (256, 128, True, 2),
    (384, 128, True, 3), (384, 64, False, 2)])
def test_kernel_matches_float64_reference(interpret, n_ctx, head_dim, causal, stages):
    args, want = inputs(n_ctx, head_dim, causal)
    got = launch(attention_bwd_ws.attention_bwd_ws_kernel, *args, causal, stages)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert not np.isnan(g).any(), name
        err = np.abs(g.astype(np.float64) - w).max()
        assert err <= 2e-3 * max(1.0, np.abs(w).max()), (name, err)


def test_bf16_matches_float64_reference(interpret):
    import ml_dtypes

    args, want = inputs(256, 128, True, ml_dtypes.bfloat16)
    got = launch(attention_bwd_ws.attention_bwd_ws_kernel, *args, True, 2)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        err = np.abs(g.astype(np.float64) - w).max()
        assert err <= 2e-2 * max(1.0, np.abs(w).max()), (name, err)


@pytest.mark.parametrize("head_dim,causal", [(64, True), (128, False)])
def test_ops_kernel_tlx_blackwell_matches_the_tl_kernels(interpret, head_dim, causal):
    rng = np.random.default_rng(head_dim)
    q, k, v, do = (rng.standard_normal((1, 2, 256, head_dim)).astype(np.float16)
                   for _ in range(4))
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
    got = ops.attention_bwd(do, q, k, v, out, lse, causal=causal, kernel="tlx_blackwell")
    tl = ops.attention_bwd(do, q, k, v, out, lse, causal=causal, kernel="tl")
    _, _, *want = reference(*(t[0] for t in (q, k, v, do)), 1 / math.sqrt(head_dim), causal)
    for a, b, w in zip(got, tl, want):
        assert a.dtype == np.float16 and a.shape == q.shape
        np.testing.assert_allclose(a.astype(np.float64), b, atol=1e-3)
        np.testing.assert_allclose(a[0].astype(np.float64), w, atol=4e-3)


def test_ops_kernel_tlx_blackwell_refuses_what_it_does_not_take(interpret):
    lse = np.zeros((1, 1, 200), np.float32)
    x = np.zeros((1, 1, 200, 64), np.float16)
    with pytest.raises(ValueError, match=r"kernel='tlx_blackwell' takes HEAD_DIM 64 or 128 and "
                                         r"N_CTX a multiple of 128, got HEAD_DIM 64 and N_CTX "
                                         r"200 \(use kernel='tl'\)"):
        ops.attention_bwd(x, x, x, x, x, lse, kernel="tlx_blackwell")
    lse = np.zeros((1, 1, 128), np.float32)
    x = np.zeros((1, 1, 128, 32), np.float16)
    with pytest.raises(ValueError, match=r"got HEAD_DIM 32 and N_CTX 128"):
        ops.attention_bwd(x, x, x, x, x, lse, kernel="tlx_blackwell")
    x = np.zeros((1, 1, 128, 64), np.float32)
    with pytest.raises(ValueError, match=r"attention_bwd: 'q' has dtype float32"):
        ops.attention_bwd(x, x, x, x, x, lse, kernel="tlx_blackwell")


def test_sm100_routing_needs_a_torch_gpu():
    class Place:
        on_gpu, kind = False, "numpy"

    assert not _common._is_sm100(Place())


def planted(tmp_path, old, new):
    """attention_bwd_ws.py with `old` replaced by `new`, imported from outside the package."""
    text = open(attention_bwd_ws.__file__).read()
    assert text.count(old) == 1
    mod = tmp_path / "planted_bw_bwd.py"
    mod.write_text(text.replace(old, new))
    spec = importlib.util.spec_from_file_location("planted_bw_bwd", mod)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_missing_dp_wait_is_reported_at_the_dp_load(interpret, tmp_path):
    """Without the compute group's wait on dp_full, its tcgen05.ld of dP^T races the MMA that
    writes it: reported at the local_load."""
    wait = "                tlx.barrier_wait(tlx.local_view(dp_full, 0), j & 1)\n"
    module = planted(tmp_path, wait, "")
    args, _ = inputs(256, 64, False)
    with pytest.raises(ww.InterpreterError) as e:
        launch(module.attention_bwd_ws_kernel, *args, False, 2)
    line = line_of(module.attention_bwd_ws_kernel, "dp_t = tlx.local_load(")
    msg = str(e.value)
    assert f"planted_bw_bwd.py:{line}:" in msg
    assert "local_load reads tensor memory that tcgen05_mma" in msg
    assert "with no barrier ordering that write before this read" in msg


def test_missing_ds_wait_is_reported_at_the_dk_mma(interpret, tmp_path):
    """Without the MMA warp's wait on ds_full, the dK MMA reads dS^T in shared memory before the
    compute group's store is ordered before it: reported at that MMA."""
    wait = "    tlx.barrier_wait(tlx.local_view(ds_full, i % 2), (i // 2) & 1)\n"
    module = planted(tmp_path, wait, "")
    args, _ = inputs(256, 64, True)
    with pytest.raises(ww.InterpreterError) as e:
        launch(module.attention_bwd_ws_kernel, *args, True, 2)
    line = line_of(module.issue_dk_dq, "tlx.async_dot(ds, ")
    msg = str(e.value)
    assert f"planted_bw_bwd.py:{line}:" in msg
    assert "tcgen05_mma reads shared memory that local_store by default task wrote" in msg


def signature(head_dim, causal, stages, dtype):
    tile, kv = f"desc<{dtype},{BLOCK_M}x{head_dim}>", f"desc<{dtype},{BLOCK_N}x{head_dim}>"
    return (f"q_desc:{tile}, k_desc:{kv}, v_desc:{kv}, do_desc:{tile}, "
            f"dq_desc:desc<fp32,{BLOCK_M}x{head_dim}>, dk_desc:{kv}, dv_desc:{kv}, "
            f"lse_ptr:*fp32:16, delta_ptr:*fp32:16, sm_scale:fp32, N_CTX:i32:16, "
            f"HEAD_DIM={head_dim}, BLOCK_M={BLOCK_M}, BLOCK_N={BLOCK_N}, NUM_STAGES={stages}, "
            f"CAUSAL={int(causal)}")


@pytest.mark.parametrize("head_dim,causal,stages,dtype", [
    (64, False, 3, "fp16"), (64, True, 3, "bf16"), (64, True, 2, "fp16"),
    (128, False, 2, "fp16"), (128, True, 2, "bf16"), (128, True, 3, "fp16")])
def test_compiles_for_sm100a_without_spills(requires_ptxas, head_dim, causal, stages, dtype):
    env = attention_bwd_ws.attention_bwd_ws_kernel.environment()
    k = native_loader.native().compile(env.files, "attention_bwd_ws_kernel",
                                       signature(head_dim, causal, stages, dtype), env.globals,
                                       target="sm_100a", num_warps=4, stage="cubin")
    assert k.spill_bytes == 0
    # 12 warps (compute and dQ warp groups, the load and MMA warps padded to a third): .maxnreg
    # 168; the compute group raises its budget, the dQ group drops to 152 and the third (the
    # load and MMA warps, and two idle ones) to 80.
    assert k.registers <= 168
    ptx = k.ptx
    assert "setmaxnreg.inc.sync.aligned.u32 256" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 152" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 80" in ptx
    assert k.shared_bytes <= 232448
    # All 512 tensor-memory columns at HEAD_DIM 128 (S^T 64, dP^T 64, dV, dK, dQ 128 each); the
    # 320 of HEAD_DIM 64 round up to a power of two.
    assert re.search(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], "
                     r"512;", ptx)
    # dV's MMA reads P^T from tensor memory ([a-tmem]); the others read shared memory.
    assert re.search(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd\d+", ptx)
    assert re.search(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], %rd\d+, %rd\d+", ptx)
    # lse and delta by bulk copies, dQ by TMA reduce-adds in fp32.
    assert "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes" in ptx or \
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group" in ptx
    print(f"D{head_dim} causal={causal} stages={stages} {dtype}: {k.registers} registers, "
          f"{k.spill_bytes} spill bytes, {k.shared_bytes} B shared")


def test_shared_memory_of_the_host_configurations_fits(requires_ptxas):
    """The host's configurations (ops/_attention.py) compile within the shared memory."""
    env = attention_bwd_ws.attention_bwd_ws_kernel.environment()
    for head_dim, cfg in _attention.ATTENTION_BWD_SM100_CONFIGS.items():
        assert (cfg["BLOCK_M"], cfg["BLOCK_N"]) == (BLOCK_M, BLOCK_N)
        k = native_loader.native().compile(
            env.files, "attention_bwd_ws_kernel",
            signature(head_dim, True, cfg["NUM_STAGES"], "fp16"), env.globals,
            target="sm_100a", num_warps=4, stage="cubin")
        assert k.spill_bytes == 0 and k.shared_bytes <= 232448
