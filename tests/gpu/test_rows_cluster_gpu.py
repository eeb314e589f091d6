"""Softmax and layer norm (forward, backward) with each row split over a thread-block cluster
(python/warpweave/ops/kernels/hopper/rows_cluster.py) on an sm_90 GPU, against float64 PyTorch: the benchmark's wide
rows, odd widths (short and empty last slices), cluster sizes 2 to 16, chunks of rows per
cluster, rows fewer than clusters, strided rows, fp16 / bf16 / fp32."""

import os
import sys

import pytest

from gpu_requirements import require_cuda, seed_and_poison_outputs

torch = require_cuda((9, 0), "thread-block clusters need sm_90 or later")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from warpweave import ops  # noqa: E402
from warpweave.ops import _rows  # noqa: E402
from warpweave.ops.kernels.hopper import layernorm_tma  # noqa: E402
from warpweave.ops.kernels.hopper import softmax_tma  # noqa: E402

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
TOL = {F32: 1e-5, F16: 2e-3, BF16: 1e-2}
F = torch.nn.functional


@pytest.fixture(autouse=True)
def poisoned_outputs_and_launch_log(monkeypatch):
    """Fresh seed, outputs (and scratch) filled with NaN, and the cluster launches recorded in
    the returned list as (op, CTAs per cluster, clusters)."""
    seed_and_poison_outputs(monkeypatch, torch, ops)
    launches = []
    launch = _rows._cluster_launch

    def recorded(op, place, n_rows, n_cols, ctas, *args, **kwargs):
        result = launch(op, place, n_rows, n_cols, ctas, *args, **kwargs)
        launches.append((op, ctas, result[2]))
        return result

    monkeypatch.setattr(_rows, "_cluster_launch", recorded)
    return launches


def randn(*shape, dtype=F32, scale=1.0, shift=0.0):
    return (torch.randn(*shape, device="cuda", dtype=torch.float32) * scale + shift).to(dtype)


def assert_close(out, ref, tol, what=""):
    torch.cuda.synchronize()
    out64, ref64 = out.double(), ref.double()
    assert out.shape == ref.shape, (tuple(out.shape), tuple(ref.shape))
    assert not torch.isnan(out64).any(), f"{what}: NaN in the output"
    err = (out64 - ref64).norm().item() / max(ref64.norm().item(), 1e-300)
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol:g}"


def layernorm_bwd_ref(dy, x, w, eps=1e-5):
    xr = x.double().requires_grad_()
    wr = w.double().requires_grad_()
    br = torch.zeros_like(wr, requires_grad=True)
    F.layer_norm(xr, (x.shape[-1],), wr, br, eps).backward(dy.double())
    return xr.grad, wr.grad, br.grad


# (rows, cols, config): the benchmark's shapes with the wrapper's defaults, odd widths, cluster
# sizes 2 to 16, clusters taking chunks of rows (loaded 0-2 ahead, outputs stored late), rows
# fewer than clusters.
SOFTMAX_CASES = [
    (2048, 100000, None), (4096, 32768, dict(cluster=2, num_warps=32)), (37, 100003, None),
    (5, 40961, None), (37, 100003, dict(cluster=2)), (37, 100003, dict(cluster=7, num_warps=16)),
    (64, 40961, dict(cluster=8, programs_per_sm=1)),
    (64, 40961, dict(cluster=4, rows_per_cluster=5, rows_ahead=0)),
    (64, 40961, dict(cluster=16, rows_per_cluster=7, rows_ahead=1)),
    (64, 40961, dict(cluster=4, rows_per_cluster=6, rows_ahead=2, defer_store=True)),
    (3, 50000, dict(cluster=4, programs_per_sm=4)), (1, 20, dict(cluster=4)),
    (9, 33, dict(cluster=8, clusters=2)),
]


@pytest.mark.parametrize("dtype", [F16, BF16, F32], ids=["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("rows,cols,config", SOFTMAX_CASES)
def test_softmax_cluster(poisoned_outputs_and_launch_log, rows, cols, config, dtype):
    if rows * cols > 50_000_000 and dtype != F16:
        pytest.skip("benchmark shapes in fp16 only")
    x = randn(rows, cols, dtype=dtype, scale=4.0)
    out = ops.softmax(x, config=config)
    assert_close(out, torch.softmax(x.double(), -1), TOL[dtype], "softmax")
    # Rows take the split only when config asks (by default rows_smem's kernel:
    # tests/gpu/test_rows_smem_gpu.py).
    split = bool(config)
    assert [op for op, _, _ in poisoned_outputs_and_launch_log] == ["softmax"] * split


def test_softmax_cluster_strided_rows_and_far_negative_values(poisoned_outputs_and_launch_log):
    # Rows of a wider tensor (row stride 50016), values near -300: exp of them underflows, so the
    # slices' sums must be taken relative to their own maxima.
    wide = randn(33, 50016, scale=2.0, shift=-300.0)
    x = wide[:, :40000]
    for config in (dict(cluster=4), dict(cluster=3, programs_per_sm=1)):
        assert_close(ops.softmax(x, config=config), torch.softmax(x.double(), -1), TOL[F32],
                     f"strided {config}")
    assert len(poisoned_outputs_and_launch_log) == 2


LAYERNORM_CASES = [
    (8192, 16384, dict(cluster=2)), (37, 100003, None), (5, 40961, None),
    (37, 12000, dict(cluster=2)), (64, 16384, dict(cluster=8, rows_ahead=0)),
    (64, 16384, dict(cluster=3, rows_per_cluster=9, rows_ahead=2)),
    (64, 16384, dict(cluster=13, rows_per_cluster=64, rows_ahead=1)),
    (64, 16384, dict(cluster=2, rows_per_cluster=10, rows_ahead=2, defer_store=True)),
    (2, 16384, dict(cluster=4, programs_per_sm=4)), (3, 20, dict(cluster=4)),
]


@pytest.mark.parametrize("dtype", [F16, BF16, F32], ids=["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("rows,cols,config", LAYERNORM_CASES)
def test_layernorm_fwd_cluster(poisoned_outputs_and_launch_log, rows, cols, config, dtype):
    if rows * cols > 50_000_000 and dtype != F16:
        pytest.skip("benchmark shapes in fp16 only")
    # The forward takes the split only when config asks: cases without one ask for
    # cdiv(cols, 12800) CTAs (2 to 8).
    config = config or dict(cluster=max(2, min(8, -(-cols // 12800))))
    x = randn(rows, cols, dtype=dtype, scale=2.0, shift=0.5)
    w, b = randn(cols, dtype=dtype), randn(cols, dtype=dtype)
    y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5, config=config)
    x64 = x.double()
    assert_close(y, F.layer_norm(x64, (cols,), w.double(), b.double(), 1e-5), TOL[dtype], "y")
    assert_close(mean, x64.mean(-1), 1e-6, "mean")
    assert_close(rstd, torch.rsqrt(x64.var(-1, unbiased=False) + 1e-5), 1e-5, "rstd")
    assert [op for op, _, _ in poisoned_outputs_and_launch_log] == ["layernorm_fwd"]


def test_layernorm_fwd_cluster_variance_beside_a_large_mean(poisoned_outputs_and_launch_log):
    # Mean 1000, deviation 0.01: E[x^2] - E[x]^2 would lose every digit in fp32; the slices'
    # (mean, M2) combine keeps them to the rounding of the fp32 slice means (1e-2: the
    # interpreter's in-order sums gave 1.3e-3 at 900 columns).
    x = randn(16, 40000, scale=0.01, shift=1000.0)
    w, b = torch.ones(40000, device="cuda"), torch.zeros(40000, device="cuda")
    _, _, rstd = ops.layernorm_fwd(x, w, b, 0.0, config=dict(cluster=5))
    assert_close(rstd, torch.rsqrt(x.double().var(-1, unbiased=False)), 1e-2, "rstd")


@pytest.mark.parametrize("dtype", [F16, BF16, F32], ids=["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("rows,cols,config", LAYERNORM_CASES + [(300, 100000, None)] + [
    # The row sums pushed into the peers' shared memory (st.async) instead of global scratch.
    (300, 100000, dict(dsmem=True)), (37, 100003, dict(dsmem=True)),
    (64, 16384, dict(cluster=16, rows_per_cluster=9, rows_ahead=2, dsmem=True)),
    (64, 16384, dict(cluster=2, rows_per_cluster=10, defer_store=True, dsmem=True)),
    (3, 20, dict(cluster=4, dsmem=True))])
def test_layernorm_bwd_cluster(poisoned_outputs_and_launch_log, rows, cols, config, dtype):
    if rows * cols > 50_000_000 and dtype != F16:
        pytest.skip("benchmark shapes in fp16 only")
    x = randn(rows, cols, dtype=dtype, scale=2.0, shift=0.5)
    w, dy = randn(cols, dtype=dtype), randn(rows, cols, dtype=dtype)
    x64 = x.float()
    mean = x64.mean(-1)
    rstd = torch.rsqrt(x64.var(-1, unbiased=False) + 1e-5)
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean, rstd, config=config)
    dx_ref, dw_ref, db_ref = layernorm_bwd_ref(dy, x, w)
    # dw and db sum `rows` terms in fp32 before their rounding to w's dtype.
    assert_close(dx, dx_ref, TOL[dtype], "dx")
    assert_close(dw, dw_ref, TOL[dtype], "dw")
    assert_close(db, db_ref, TOL[dtype], "db")
    assert [op for op, _, _ in poisoned_outputs_and_launch_log] == ["layernorm_bwd"]


@pytest.mark.parametrize("rows,cols,dtype", [(8192, 16384, F16), (37, 16384, BF16),
                                             (3, 16384, F16), (301, 8192, F32)])
def test_layernorm_bwd_rows_of_32kb_default_to_the_tma_kernel_over_2_cta_clusters(
        poisoned_outputs_and_launch_log, monkeypatch, rows, cols, dtype):
    # Rows of 32 KB: each row's halves streamed by the two CTAs of a cluster (TMA), the row sums
    # exchanged per row; not the rows_cluster kernels (no _cluster_launch).
    launched = spy_launches(monkeypatch, layernorm_tma, "layernorm_bwd_tma_kernel")
    check_layernorm_bwd(rows, cols, dtype)
    assert len(launched) == 1 and launched[0][0] % 2 == 0, launched
    assert poisoned_outputs_and_launch_log == []


def check_layernorm_bwd(rows, cols, dtype, config=None):
    """ops.layernorm_bwd under config on random rows (mean and rstd from torch) against float64
    autograd: dx, dw and db."""
    x = randn(rows, cols, dtype=dtype, scale=2.0, shift=0.5)
    w, dy = randn(cols, dtype=dtype), randn(rows, cols, dtype=dtype)
    x64 = x.float()
    mean = x64.mean(-1)
    rstd = torch.rsqrt(x64.var(-1, unbiased=False) + 1e-5)
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean, rstd, config=config)
    for got, ref, what in zip((dx, dw, db), layernorm_bwd_ref(dy, x, w), ("dx", "dw", "db")):
        assert_close(got, ref, TOL[dtype], what)


def spy_launches(monkeypatch, module, name):
    """The grids kernel `name` of `module` is launched with, from now on."""
    launched = []
    kernel = getattr(module, name)

    class Spy:
        def __getitem__(self, grid):
            launched.append(grid)
            return kernel[grid]

        def warmup(self, *args, **kwargs):
            return kernel.warmup(*args, **kwargs)

    monkeypatch.setattr(module, name, Spy())
    return launched


@pytest.mark.parametrize("rows,cols,dtype", [(4096, 32768, F16), (37, 32768, BF16),
                                             (3, 32768, F16), (301, 16384, F32)])
def test_softmax_tma_kernel_with_rows_split_over_2_cta_clusters(
        poisoned_outputs_and_launch_log, monkeypatch, rows, cols, dtype):
    # Each row's halves streamed by the two CTAs of a cluster, the halves' (max, sum) pairs
    # exchanged per row; a half of -inf only and a large entry in the other half included.
    launched = spy_launches(monkeypatch, softmax_tma, "softmax_tma_kernel")
    x = randn(rows, cols, dtype=dtype, scale=3.0)
    x[0, : cols // 2] = float("-inf")
    x[-1, -1] = 40.0
    out = ops.softmax(x, config=dict(tma=True, split=2, num_warps=8, num_stages=2))
    assert_close(out, torch.softmax(x.double(), -1), TOL[dtype], "softmax")
    assert len(launched) == 1 and launched[0][0] % 2 == 0, launched
    assert poisoned_outputs_and_launch_log == []
