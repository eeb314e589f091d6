"""tl tier 1 compiled for sm_80 (WARPWEAVE_TARGET=sm_80: mma.sync, ldmatrix, cp.async, no wgmma
or TMA) and run on the GPU at hand: on the project's H200 the runtime hands the sm_80 PTX to the
driver's JIT, which compiles it for sm_90. Every result is checked against PyTorch on fresh random
inputs, with outputs poisoned first; every kernel that ran is checked to be sm_80 code."""

import math
import os
import sys

import pytest

from gpu_requirements import require_cuda, seed_and_poison_outputs

torch = require_cuda((8, 0), "the sm_80 code path needs a GPU of compute capability 8.0 or newer")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import scan_kernels  # noqa: E402

from warpweave import ops  # noqa: E402
from warpweave.ops.kernels import attention as attention_kernels  # noqa: E402
from warpweave.ops.kernels import layernorm as layernorm_kernels  # noqa: E402
from warpweave.ops.kernels import matmul as matmul_kernels  # noqa: E402
from warpweave.ops.kernels import reduction as reduction_kernels  # noqa: E402
from warpweave.ops.kernels import softmax as softmax_kernels  # noqa: E402
from warpweave.ops.kernels import vector_add as vector_add_kernels  # noqa: E402

import warpweave as ww  # noqa: E402
import warpweave.language as tl  # noqa: E402

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
TOL = {F32: 1e-5, F16: 2e-3, BF16: 1e-2}
DEV = "cuda"


@pytest.fixture(scope="module", autouse=True)
def forced_sm80():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WARPWEAVE_TARGET", "sm_80")
        mp.delenv("WARPWEAVE_INTERPRET", raising=False)
        yield


@pytest.fixture(autouse=True)
def fresh_seed_and_poisoned_outputs(monkeypatch):
    seed_and_poison_outputs(monkeypatch, torch, ops)


def randn(*shape, dtype=F32, scale=1.0, shift=0.0):
    return (torch.randn(*shape, device=DEV, dtype=torch.float32) * scale + shift).to(dtype)


def assert_close(out, ref, tol, what=""):
    torch.cuda.synchronize()
    out64, ref64 = out.double(), ref.double()
    assert out.shape == ref.shape, (tuple(out.shape), tuple(ref.shape))
    assert not torch.isnan(out64).any(), f"{what}: NaN in the output"
    denom = ref64.norm().item()
    err = (out64 - ref64).norm().item() / (denom if denom > 0 else 1.0)
    if err > tol:
        # Where the wrong elements sit (every 8th column, one warp's rows...) says which
        # fragment or layout is off, from this one run.
        bad = (out64 - ref64).abs() > 10 * tol * ref64.abs().max().clamp_min(1e-30)
        where = bad.nonzero()[:8].tolist()
        pytest.fail(f"{what}: relative error {err:.3g} > {tol:g}; {bad.sum().item()} of "
                    f"{bad.numel()} elements off, first at {where}")


def assert_sm80(*jitfns, needs=()):
    """Every GPU kernel these functions compiled in this module is sm_80 code; `needs`: PTX
    instructions at least one of them must hold (e.g. mma.sync for tl.dot)."""
    ptx = []
    for fn in jitfns:
        for compiled in fn.cache.values():
            target = getattr(compiled.kernel, "target", None)
            if target is None or compiled.interpret:
                continue
            if target == "sm_80":
                ptx.append(compiled.kernel.ptx)
    assert ptx, f"no sm_80 kernel of {[f.__name__ for f in jitfns]} was compiled"
    for p in ptx:
        assert ".target sm_80" in p and "wgmma" not in p and "cp.async.bulk" not in p
    for instruction in needs:
        assert any(instruction in p for p in ptx), f"no {instruction} in the sm_80 PTX"


# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1000, 98_317])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_add(n, dtype):
    x, y = randn(n, dtype=dtype), randn(n, dtype=dtype)
    out = ops.add(x, y)
    torch.cuda.synchronize()
    assert out.dtype == dtype and torch.equal(out, x + y)
    assert_sm80(vector_add_kernels.add_kernel, vector_add_kernels.add_kernel_persistent)


@pytest.mark.parametrize("shape", [(3, 17), (1000, 781)])
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_softmax(shape, dtype):
    x = randn(*shape, dtype=dtype, scale=3.0)
    out = ops.softmax(x)
    assert out.dtype == dtype
    assert_close(out, torch.softmax(x.double(), dim=-1), TOL[dtype], "softmax")
    assert_sm80(softmax_kernels.softmax_kernel, softmax_kernels.softmax_online_kernel)


@pytest.mark.parametrize("shape", [(3, 17), (1000, 781)])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_layernorm_forward_and_backward(shape, dtype):
    n = shape[-1]
    x = randn(*shape, dtype=dtype, scale=2.0, shift=1.0)
    w, b = randn(n, dtype=dtype), randn(n, dtype=dtype)
    dy = randn(*shape, dtype=dtype)
    y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5)
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean, rstd)
    x64, w64, b64 = (t.double().requires_grad_() for t in (x, w, b))
    ref = torch.nn.functional.layer_norm(x64, (n,), w64, b64, 1e-5)
    ref.backward(dy.double())
    assert_close(y, ref.detach(), TOL[dtype], "y")
    assert_close(mean, x64.detach().mean(-1), 1e-5, "mean")
    assert_close(dx, x64.grad, TOL[dtype], "dx")
    assert_close(dw, w64.grad, TOL[dtype], "dw")
    assert_close(db, b64.grad, TOL[dtype], "db")
    assert_sm80(layernorm_kernels.layernorm_fwd_fused_kernel,
                layernorm_kernels.layernorm_fwd_kernel, layernorm_kernels.layernorm_bwd_dx_kernel,
                layernorm_kernels.layernorm_bwd_dwdb_kernel)


@pytest.mark.parametrize("mnk", [(3, 17, 5), (1000, 781, 333), (512, 512, 512)])
@pytest.mark.parametrize("dtype", [F16, BF16])
def test_matmul(mnk, dtype):
    m, n, k = mnk
    a, b = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)
    c = ops.matmul(a, b)
    assert c.dtype == dtype and c.shape == (m, n)
    assert_close(c, a.double() @ b.double(), TOL[dtype], "c")
    kind = "f16" if dtype == F16 else "bf16"
    assert_sm80(matmul_kernels.matmul_kernel,
                needs=[f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32"])


@ww.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               PRECISION: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, input_precision=PRECISION))


@pytest.mark.parametrize("precision,tol,instruction", [
    ("tf32", 5e-3, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    ("ieee", 1e-5, "fma.rn.f32"),
])
def test_dot_fp32(precision, tol, instruction):
    a, b = randn(64, 32), randn(32, 64)
    c = torch.full((64, 64), float("nan"), device=DEV)
    dot_kernel[(1,)](a, b, c, M=64, N=64, K=32, PRECISION=precision)
    assert_close(c, a.double() @ b.double(), tol, precision)
    assert_sm80(dot_kernel, needs=[instruction])


def test_fp8_dot_is_a_clear_compile_error():
    a = randn(64, 32).to(torch.float8_e4m3fn)
    b = randn(32, 64).to(torch.float8_e4m3fn)
    c = torch.empty((64, 64), device=DEV)
    with pytest.raises(ww.CompilationError, match="sm_80") as e:
        dot_kernel[(1,)](a, b, c, M=64, N=64, K=32, PRECISION="tf32")
    assert "test_sm80_on_hopper.py:" in str(e.value)


@pytest.mark.parametrize("z,h,n_ctx,head_dim,causal,dtype", [
    (1, 2, 37, 64, True, F16), (2, 3, 1000, 64, False, BF16), (1, 2, 257, 128, True, F16)])
def test_attention(z, h, n_ctx, head_dim, causal, dtype):
    q, k, v = (randn(z, h, n_ctx, head_dim, dtype=dtype) for _ in range(3))
    sm_scale = 1 / math.sqrt(head_dim)
    out, lse = ops.attention(q, k, v, causal=causal, sm_scale=sm_scale, return_lse=True)
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    if causal:
        s = s.masked_fill(~torch.ones(n_ctx, n_ctx, device=DEV, dtype=torch.bool).tril(),
                          float("-inf"))
    ref = torch.softmax(s, -1) @ v.float()
    assert out.dtype == dtype and out.shape == q.shape
    assert_close(out, ref, TOL[dtype], "out")
    assert_close(lse, torch.logsumexp(s, -1) / math.log(2.0), 1e-4, "lse")
    assert_sm80(attention_kernels.attention_fwd_kernel, needs=["mma.sync.aligned.m16n8k16"])


@pytest.mark.parametrize("dtype", [F32, F16])
def test_row_reductions(dtype):
    x = randn(1000, 781, dtype=dtype, scale=4.0)
    assert_close(ops.row_sum(x), x.double().sum(-1), 1e-5, "row_sum")
    values, index = ops.row_max(x)
    ref_values = x.max(-1).values.float()
    assert torch.equal(values, ref_values)
    assert torch.equal(x.gather(1, index.long()[:, None])[:, 0].float(), ref_values)
    assert_sm80(reduction_kernels.row_sum_kernel, reduction_kernels.row_max_kernel)


@pytest.mark.parametrize("kind", ["sum", "max"])
@pytest.mark.parametrize("axis", [0, 1])
def test_scans(kind, axis):
    x = torch.randn(64, 64, device=DEV)
    out = torch.full_like(x, float("nan"))
    scan_kernels.scan_kernel[(1,)](x, out, M=64, N=64, AXIS=axis, KIND=kind, REVERSE=False,
                                   num_warps=4)
    ref = x.double().cumsum(axis) if kind == "sum" else x.cummax(axis).values.double()
    assert_close(out, ref, 1e-5, f"{kind} scan")
    n, block = 10000, 1024
    xi = torch.randint(-5, 6, (n,), device=DEV, dtype=torch.int32)
    outi = torch.full_like(xi, -7777)
    scan_kernels.cumsum_1d_kernel[(ww.cdiv(n, block),)](xi, outi, n, BLOCK=block)
    torch.cuda.synchronize()
    assert torch.equal(outi.long(), torch.cat([c.long().cumsum(0) for c in xi.split(block)]))
    assert_sm80(scan_kernels.scan_kernel, scan_kernels.cumsum_1d_kernel)


@ww.jit
def histogram_kernel(x_ptr, bins_ptr, total_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(bins_ptr + x, 1, mask=mask)
    tl.atomic_add(total_ptr, tl.sum(tl.where(mask, x, 0).to(tl.float32), axis=0))
    tl.atomic_max(total_ptr + 1, tl.max(tl.where(mask, x, -1).to(tl.float32), axis=0))


def test_atomics():
    n, bins = 100_003, 37
    x = torch.randint(0, bins, (n,), device=DEV, dtype=torch.int32)
    counts = torch.zeros(bins, device=DEV, dtype=torch.int32)
    totals = torch.zeros(2, device=DEV)
    histogram_kernel[(ww.cdiv(n, 1024),)](x, counts, totals, n, BLOCK=1024)
    torch.cuda.synchronize()
    assert torch.equal(counts.long(), torch.bincount(x.long(), minlength=bins))
    assert totals[0].item() == x.double().sum().item()  # integers below 2^24: exact in fp32
    assert totals[1].item() == x.max().item()
    assert_sm80(histogram_kernel, needs=["atom.global.gpu.acq_rel.add.u32"])  # results unused: still atoms
