"""The Blackwell warp-specialized attention forward (kernels/blackwell/attention_ws.py, issue 19):
in the interpreter (which models tcgen05 MMAs, tensor memory and mbarriers and reports races)
against a float64 reference, O and the base-2 LSE, HEAD_DIM 64 and 128, causal and not, both
sub-tile heights (BLOCK_M 128, and 64 where N_CTX is an odd multiple of 128); planted
synchronization bugs reported at their lines; its O and LSE fed to the Blackwell backward; the
ops routing (kernel="tlx_blackwell" in the interpreter, kernel=None and "tlx" on an sm_100 GPU)
and its errors; and every configuration compiled for sm_100a through ptxas without spills. No
Blackwell GPU has run this kernel."""

import importlib
import importlib.util
import math
import re

import numpy as np
import pytest

import warpweave as ww
from warpweave import ops
from warpweave.ops import _attention, _common, _tuning
from warpweave.ops.kernels.blackwell import attention_ws

from blackwell_testing import descriptor

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


def reference(q, k, v, scale, causal):
    """(out, base-2 lse) in float64 for [ZH, N, D] inputs."""
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    s = q @ k.transpose(0, 2, 1) * scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    return (p / l) @ v, (np.log(l[..., 0]) + m[..., 0]) / math.log(2.0)


def inputs(zh, n, d, dtype, seed):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((zh, n, d)).astype(dtype) for _ in range(3))


def launch(kernel, q, k, v, scale, causal, bm=128, stages=2):
    """`kernel` on [ZH, N, D] arrays (the outputs poisoned with NaN): (out, lse)."""
    zh, n, d = q.shape
    o = np.full((zh * n, d), np.nan, q.dtype)
    lse = np.full((zh, n), np.nan, np.float32)
    q2, k2, v2 = (t.reshape(zh * n, d) for t in (q, k, v))
    kernel[(n // (2 * bm), zh)](
        descriptor(q2, [bm, d]), descriptor(k2, [128, d]), descriptor(v2, [128, d]),
        descriptor(o, [bm, d]), lse, scale, n, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=128,
        NUM_STAGES=stages, CAUSAL=causal, num_warps=4)
    return o.reshape(zh, n, d), lse


def check(out, lse, q, k, v, scale, causal):
    want_out, want_lse = reference(q, k, v, scale, causal)
    assert not np.isnan(out.astype(np.float32)).any() and not np.isnan(lse).any()
    tol = 4e-3 if out.dtype == np.float16 else 2e-2  # P is rounded to the input dtype
    err = np.abs(out.astype(np.float64) - want_out).max()
    assert err <= tol * max(1.0, np.abs(want_out).max()), err
    np.testing.assert_allclose(lse, want_lse, atol=1e-4, rtol=0)


def dtype_of(name):
    if name == "fp16":
        return np.float16
    ml = pytest.importorskip("ml_dtypes", reason="bf16 NumPy arrays need ml_dtypes")
    return ml.bfloat16


# ZH x N_CTX x HEAD_DIM: 1x2x256 (one program a head), 2x1x384 (BLOCK_M 64: three 128-row
# programs), 1x1x512 (causal: unmasked blocks before the diagonal); 3 stages (HEAD_DIM 64's
# default) wrap the ring.
CASES = [
    (2, 256, 64, False, 128, 2, "fp16"),
    (2, 256, 128, True, 128, 2, "fp16"),
    (2, 256, 64, True, 128, 2, "bf16"),
    (2, 384, 128, False, 64, 2, "bf16"),
    (2, 384, 64, True, 64, 3, "fp16"),
    (1, 512, 64, True, 128, 3, "fp16"),
    (1, 512, 128, False, 128, 2, "fp16"),
]


@pytest.mark.parametrize("zh,n,d,causal,bm,stages,dt", CASES)
def test_kernel_matches_float64_reference(interpret, zh, n, d, causal, bm, stages, dt):
    q, k, v = inputs(zh, n, d, dtype_of(dt), n + d + causal)
    scale = 1 / math.sqrt(d)
    out, lse = launch(attention_ws.attention_ws_kernel, q, k, v, scale, causal, bm, stages)
    check(out, lse, q, k, v, scale, causal)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_other_schedules_report_nothing(interpret, monkeypatch, seed):
    """The interpreter's schedule under other seeds: the tasks interleave differently and the
    race checks still find nothing."""
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    q, k, v = inputs(1, 512, 64, np.float16, seed)
    out, lse = launch(attention_ws.attention_ws_kernel, q, k, v, 0.125, True, 128, 2)
    check(out, lse, q, k, v, 0.125, True)


# ---- planted synchronization bugs ----

def planted_copy(tmp_path, old, new):
    """attention_ws.py with `old` replaced by `new`, imported from outside the package, and its
    lines (where the reports must point)."""
    text = open(attention_ws.__file__).read()
    assert text.count(old) == 1, old
    # Outside the package its relative import of the Hopper file's helper names the package.
    planted = text.replace(old, new).replace("from ..hopper.attention_ws import",
                                             "from warpweave.ops.kernels.hopper.attention_ws import")
    path = tmp_path / "planted_fwd.py"
    path.write_text(planted)
    spec = importlib.util.spec_from_file_location("planted_fwd", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, planted.splitlines()


def line_with(lines, text, after=0):
    return next(i + 1 for i, line in enumerate(lines) if i >= after and text in line)


@pytest.mark.parametrize("seed", [0, 1])
def test_missing_o_fixed_wait_is_reported(interpret, monkeypatch, tmp_path, seed):
    """Without the MMA task's wait for the correction of O[0], PV_j(0) accumulates into O[0]
    while the correction warp group reads and rescales it: a tensor-memory race, reported at the
    correction's load (the MMA noted) or at the MMA."""
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    module, lines = planted_copy(
        tmp_path, "                tlx.barrier_wait(tlx.local_view(o_fixed, 0), phase)\n", "")
    q, k, v = inputs(1, 512, 64, np.float16, 4)
    with pytest.raises(ww.InterpreterError) as e:
        launch(module.attention_ws_kernel, q, k, v, 0.125, False)
    msg = str(e.value)
    load = line_with(lines, "tlx.local_store(part, tlx.local_load(part) * alpha")
    mma = line_with(lines, "tlx.async_dot(tlx.local_view(p_tiles, 1), v")
    assert re.search(rf"planted_fwd\.py:({load}|{mma}):\d+: error: .*tensor memory", msg), msg
    assert f"planted_fwd.py:{mma}:" in msg and f"planted_fwd.py:{load}:" in msg, msg


def test_missing_p_full_wait_is_reported(interpret, tmp_path):
    """Without the MMA task's wait for sub-tile 1's P, PV(1) reads tensor memory the softmax
    warp group writes with no barrier between them: reported at the MMA, the write noted."""
    module, lines = planted_copy(
        tmp_path, "                tlx.barrier_wait(tlx.local_view(p_full, 1), phase)\n", "")
    q, k, v = inputs(1, 256, 64, np.float16, 5)
    with pytest.raises(ww.InterpreterError) as e:
        launch(module.attention_ws_kernel, q, k, v, 0.125, False)
    msg = str(e.value)
    mma = line_with(lines, "tlx.async_dot(tlx.local_view(p_tiles, 3), v")
    store = line_with(lines, "tlx.local_store(p_tile, p.to(dtype))")
    assert re.search(rf"planted_fwd\.py:{mma}:\d+: error: tcgen05_mma reads tensor memory", msg), \
        msg
    assert f"planted_fwd.py:{store}:" in msg, msg


# ---- ops routing ----

@pytest.mark.parametrize("shape,causal,dt", [((1, 2, 256, 64), False, "fp16"),
                                             ((2, 1, 384, 128), True, "fp16")])
def test_ops_kernel_tlx_blackwell_runs_in_the_interpreter(shape, causal, dt):
    q, k, v = (t.reshape(shape) for t in inputs(shape[0] * shape[1], shape[2], shape[3],
                                                 dtype_of(dt), 9))
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True, kernel="tlx_blackwell")
    assert out.shape == shape and lse.shape == shape[:3]
    flat = [t.reshape(-1, *shape[2:]) for t in (q, k, v)]
    check(out.reshape(-1, *shape[2:]), lse.reshape(-1, shape[2]), *flat,
          1 / math.sqrt(shape[3]), causal)
    again = ops.attention_tlx(q, k, v, causal=causal, arch="sm_100")
    np.testing.assert_array_equal(again, out)


@pytest.mark.parametrize("causal", [False, True])
def test_blackwell_backward_takes_its_outputs(causal):
    """O and LSE have the Hopper kernel's layout: the Blackwell backward (kernel="tlx_blackwell")
    fed with them gives the gradients the tl pair gives from the tl forward's."""
    rng = np.random.default_rng(11)
    q, k, v, do = (rng.standard_normal((1, 2, 256, 64)).astype(np.float16) for _ in range(4))
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True, kernel="tlx_blackwell")
    grads = ops.attention_bwd(do, q, k, v, out, lse, causal=causal, kernel="tlx_blackwell")
    out_tl, lse_tl = ops.attention(q, k, v, causal=causal, return_lse=True, kernel="tl")
    want = ops.attention_bwd(do, q, k, v, out_tl, lse_tl, causal=causal, kernel="tl")
    for name, got, ref in zip(("dq", "dk", "dv"), grads, want):
        err = np.abs(got.astype(np.float64) - ref).max()
        assert err <= 4e-3 * max(1.0, np.abs(ref).max()), (name, err)


def test_ops_kernel_tlx_blackwell_takes_cpu_tensors(monkeypatch):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    torch.manual_seed(0)
    q, k, v = (torch.randn((1, 2, 256, 64), dtype=torch.bfloat16) for _ in range(3))
    out, lse = ops.attention(q, k, v, causal=True, return_lse=True, kernel="tlx_blackwell")
    flat = [t.float().numpy().reshape(2, 256, 64) for t in (q, k, v)]
    want_out, want_lse = reference(*flat, 0.125, True)
    assert out.dtype == torch.bfloat16
    assert (out.double().numpy().reshape(2, 256, 64) - want_out).__abs__().max() <= 2e-2
    np.testing.assert_allclose(lse.numpy().reshape(2, 256), want_lse, atol=1e-4, rtol=0)


def test_ops_refuses_what_the_kernel_does_not_take(monkeypatch):
    x = np.ones((1, 1, 256, 64), np.float16)

    def blackwell(shape, dtype=np.float16):
        return lambda: ops.attention(*(np.ones(shape, dtype),) * 3, kernel="tlx_blackwell")

    cases = [
        (blackwell((1, 1, 200, 64)), "N_CTX 200; the kernel needs a positive multiple of 128"),
        (blackwell((1, 1, 256, 32)), "HEAD_DIM 32; the kernel takes 64 or 128"),
        (blackwell((1, 1, 256, 64), np.float32), "'q' has dtype float32"),
        (lambda: ops.attention(x, x, x, kernel="sm100"),
         "'kernel' must be None, 'tl', 'tlx' or 'tlx_blackwell'"),
        (lambda: ops.attention_tlx(x, x, x, arch="sm_80"), "'arch' must be None"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            call()
    # On a GPU that is not an sm_100 (here: an sm_90 one), the Blackwell kernel is refused.
    monkeypatch.setattr(_common._Place, "on_gpu", property(lambda self: True))
    monkeypatch.setattr(_common, "_is_sm90", lambda place: True)
    with pytest.raises(ValueError, match=r"kernel='tlx_blackwell' needs a compute capability 10 "
                                         r"GPU compiling for sm_100a"):
        ops.attention(x, x, x, kernel="tlx_blackwell")
    with pytest.raises(ValueError, match=r"arch='sm_100' needs a GPU of compute capability 10"):
        ops.attention_tlx(x, x, x, arch="sm_100")


@pytest.fixture
def sm100_compiles(monkeypatch, gpu_compiles):
    """gpu_compiles on an sm_100 device compiling for sm_100a, no tuning decisions kept."""
    gpu_compiles.target = "sm_100a"
    monkeypatch.setattr(_common, "_is_sm100", lambda place: True)
    monkeypatch.setattr(_tuning, "decisions", {})
    return gpu_compiles.kernels


@pytest.mark.parametrize("kernel", [None, "tlx"])
def test_sm100_gpus_route_the_forward_to_the_blackwell_kernel(monkeypatch, sm100_compiles,
                                                              kernel):
    for n_ctx, head_dim, block_m, stages in ((1024, 128, 128, 2), (384, 128, 64, 2),
                                             (1024, 64, 128, 3)):
        sm100_compiles.clear()
        x = np.ones((1, 2, n_ctx, head_dim), np.float16)
        ops.attention(x, x, x, causal=True, kernel=kernel)
        (compiled,) = sm100_compiles
        assert compiled.fn is attention_ws.attention_ws_kernel
        assert compiled.n_spills == 0 and compiled.shared <= _tuning._TARGET_SHARED["sm_100a"]
        assert _attention._sm100_config(n_ctx, head_dim) == dict(
            BLOCK_M=block_m, BLOCK_N=128, NUM_STAGES=stages)
        if kernel is None:
            chosen = _tuning.decisions["attention"].chosen
            assert chosen.kernel == "tlx_blackwell" and chosen.config["BLOCK_M"] == block_m
    # Shapes the kernel does not take go to the tl kernel; so does everything with the flag off.
    for flag, n_ctx in ((True, 200), (False, 1024), (False, 200)):
        monkeypatch.setattr(_attention, "ATTENTION_TLX_ON_SM100", flag)
        sm100_compiles.clear()
        x = np.ones((1, 2, n_ctx, 64), np.float16)
        ops.attention(x, x, x)
        assert [c.fn.__name__ for c in sm100_compiles] == ["attention_fwd_kernel"]


# ---- ptxas for sm_100a ----

def signature(head_dim, causal, bm, stages, dtype):
    tile, kv = f"desc<{dtype},{bm}x{head_dim}>", f"desc<{dtype},128x{head_dim}>"
    return (f"q_desc:{tile}, k_desc:{kv}, v_desc:{kv}, o_desc:{tile}, lse_ptr:*fp32:16, "
            f"sm_scale:fp32, N_CTX:i32:16, HEAD_DIM={head_dim}, BLOCK_M={bm}, BLOCK_N=128, "
            f"NUM_STAGES={stages}, CAUSAL={int(causal)}")


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n_ctx,dtype", [(1024, "fp16"), (1024, "bf16"), (384, "fp16")])
def test_default_configurations_compile_for_sm100a_without_spills(requires_ptxas, head_dim,
                                                                   causal, n_ctx, dtype):
    """The configurations ops.attention launches (BLOCK_M 64 where N_CTX is an odd multiple of
    128; 3 stages at HEAD_DIM 64)."""
    config = _attention._sm100_config(n_ctx, head_dim)
    bm, stages = config["BLOCK_M"], config["NUM_STAGES"]
    env = attention_ws.attention_ws_kernel.environment()
    k = native_loader.native().compile(env.files, "attention_ws_kernel",
                                       signature(head_dim, causal, bm, stages, dtype),
                                       env.globals, target="sm_100a", num_warps=4, stage="cubin")
    print(f"D{head_dim} causal={causal} BLOCK_M={bm} stages={stages} {dtype}: {k.registers} "
          f"registers, {k.spill_bytes} spill bytes, {k.shared_bytes} B shared")
    assert k.spill_bytes == 0
    # 16 warps (4 correction, 8 softmax, the load and MMA warps and two idle): .maxnreg 128;
    # softmax raises its warps to 192, the correction group drops to 104, the last group to 24.
    assert k.registers <= 128
    ptx = k.ptx
    assert "setmaxnreg.inc.sync.aligned.u32 192" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 104" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 24" in ptx
    # Q (2 tiles), K and V (NUM_STAGES each), alpha and l: at most 199 KB at HEAD_DIM 128.
    assert k.shared_bytes <= _tuning._TARGET_SHARED["sm_100a"]
    tiles = 2 * (2 * bm + 2 * stages * 128) * head_dim
    assert tiles <= k.shared_bytes <= tiles + 4096
    # S, P and O in tensor memory: 2 * (128 + HEAD_DIM) columns, allocated as a power of two.
    assert re.search(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 "
                     r"\[%r\d+\], 512;", ptx)
    assert "tcgen05.mma.cta_group::1.kind::f16" in ptx
    # P V takes its A operand from tensor memory ([a] before the B descriptor).
    assert re.search(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd\d+", ptx)


def test_a_third_stage_does_not_fit_at_head_dim_128(requires_ptxas):
    env = attention_ws.attention_ws_kernel.environment()
    with pytest.raises(ww.CompilationError, match="more than the 232448 a block may use"):
        native_loader.native().compile(env.files, "attention_ws_kernel",
                                       signature(128, False, 128, 3, "fp16"), env.globals,
                                       target="sm_100a", num_warps=4, stage="cubin")
