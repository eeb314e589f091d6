"""Softmax with each row's slices held in shared memory (python/warpweave/ops/kernels/hopper/rows_smem.py) on an sm_90
GPU, against float64 PyTorch: the defaults at rows past 32 KB (one CTA a row, clusters of 2 and 4
exchanging through distributed shared memory), odd widths (short last chunks and slices, an
empty last slice), more rows than resident clusters, fewer rows than clusters, strided rows,
the scratch exchange (dsmem=False), fp16 / bf16 / fp32; and the layer norm backward's TMA kernel
over clusters of 2 and 4 CTAs (its default at rows of 32 and 64 KB), which exchanges the same
way."""

import os
import sys

import pytest

from gpu_requirements import require_cuda, seed_and_poison_outputs

torch = require_cuda((9, 0), "thread-block clusters need sm_90 or later")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from warpweave import ops  # noqa: E402
from warpweave.ops.kernels.hopper import rows_smem  # noqa: E402
# The float64 checks and inputs of the register split's tests.
from test_rows_cluster_gpu import BF16, F16, F32, TOL, assert_close, randn  # noqa: E402


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    seed_and_poison_outputs(monkeypatch, torch, ops)


class RecordedKernel:
    """Stands in for the smem kernel in ops: records each launch as (grid, constexprs and
    options) and runs it; everything else (warmup) goes to the kernel."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.launches = []

    def __getitem__(self, grid):
        def run(*args, **meta):
            self.launches.append((grid, meta))
            return self.kernel[grid](*args, **meta)

        return run

    def __getattr__(self, name):
        return getattr(self.kernel, name)


def launched(monkeypatch):
    recorded = RecordedKernel(rows_smem.softmax_smem_kernel)
    monkeypatch.setattr(rows_smem, "softmax_smem_kernel", recorded)
    return recorded.launches


@pytest.mark.parametrize("rows,cols,dtype,ctas", [
    (4096, 32768, F16, 1), (2048, 100000, F16, 2), (2048, 100000, F32, 4),
    (1000, 16384, F32, 2), (300, 100000, BF16, 2), (77, 70001, F32, 4), (5, 130003, F16, 4),
    (40, 262144, F32, 16), (33, 262144, BF16, 16),
])
def test_softmax_smem_defaults(monkeypatch, rows, cols, dtype, ctas):
    seen = launched(monkeypatch)
    x = randn(rows, cols, dtype=dtype, scale=3.0)
    out = ops.softmax(x)
    assert_close(out, torch.softmax(x.double(), -1), TOL[dtype], f"{rows}x{cols}")
    assert len(seen) == 1 and seen[0][1]["C"] == ctas, seen
    # A persistent grid of whole clusters, no more than fit at once.
    grid = seen[0][0][0]
    assert grid % ctas == 0 and grid // ctas <= max(1, 132 // ctas * 2), grid


@pytest.mark.parametrize("config", [
    dict(smem=True, split=2, block=4096, num_stages=2, dsmem=False),
    dict(smem=True, split=3, block=2048, num_stages=3),
    dict(smem=True, split=8, block=1024, num_stages=3),
    dict(smem=True, split=4, block=2048, num_stages=2, clusters=3),
    dict(smem=True, split=1, block=4096, num_stages=2, num_warps=16),
    # The passes over whole chunks unrolled: 4 whole chunks a slice, one group of 4, or none of
    # 13 (every chunk in the remainder loop).
    dict(smem=True, split=2, block=4096, num_stages=2, unroll=4),
    dict(smem=True, split=2, block=4096, num_stages=2, unroll=13),
])
def test_softmax_smem_configurations(config):
    x = randn(999, 40000, dtype=F16, scale=3.0)
    assert_close(ops.softmax(x, config=config), torch.softmax(x.double(), -1), TOL[F16],
                 str(config))


def test_softmax_smem_strided_and_extreme_rows():
    base = randn(64, 50000, dtype=F32, scale=3.0)
    x = base[:, :45000]
    config = dict(smem=True, split=2, block=2048, num_stages=2)
    assert_close(ops.softmax(x, config=config), torch.softmax(x.double(), -1), TOL[F32],
                 "strided rows")
    # Huge magnitudes and a slice of -inf only: no overflow, no NaN from -inf - -inf.
    y = randn(8, 65536, dtype=F32, scale=1000.0)
    y[:, 32768:] = -float("inf")
    out = ops.softmax(y, config=dict(smem=True, split=4, block=2048, num_stages=2))
    assert_close(out, torch.softmax(y.double(), -1), TOL[F32], "a slice of -inf")
    # Fewer rows than clusters.
    z = randn(3, 100000, dtype=F16, scale=3.0)
    assert_close(ops.softmax(z), torch.softmax(z.double(), -1), TOL[F16], "3 rows")


@pytest.mark.parametrize("rows,cols,dtype", [(8192, 16384, F16), (4096, 32768, F16),
                                             (999, 16384, BF16), (301, 32768, F16)])
def test_layernorm_bwd_tma_split_defaults(rows, cols, dtype):
    x = randn(rows, cols, dtype=dtype, scale=2.0, shift=0.5)
    w = randn(cols, dtype=dtype)
    dy = randn(rows, cols, dtype=dtype)
    x64 = x.double()
    mean = x64.mean(-1)
    rstd = torch.rsqrt(x64.var(-1, unbiased=False) + 1e-5)
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean.float(), rstd.float())
    xr = x64.clone().requires_grad_()
    wr = w.double().requires_grad_()
    br = torch.zeros(cols, dtype=torch.float64, device="cuda", requires_grad=True)
    torch.nn.functional.layer_norm(xr, (cols,), wr, br, 1e-5).backward(dy.double())
    assert_close(dx, xr.grad, TOL[dtype], "dx")
    assert_close(dw, wr.grad, TOL[dtype], "dw")
    assert_close(db, br.grad, TOL[dtype], "db")


@pytest.mark.parametrize("rows,cols,config", [
    (4096, 32768, dict(smem=True, split=1, block=4096, num_stages=3)),
    (2048, 100000, dict(smem=True, split=2, block=4096, num_stages=2)),
    (301, 70001, dict(smem=True, split=4, block=2048, num_stages=2, num_warps=16)),
    (64, 262144, dict(smem=True, split=16, block=4096, num_stages=3)),
])
@pytest.mark.parametrize("dtype", [F16, F32])
def test_layernorm_fwd_smem_option(rows, cols, config, dtype):
    if dtype == F32 and cols * 4 // config["split"] > 110_000:
        pytest.skip("fp32 slices of this split do not fit two in shared memory")
    x = randn(rows, cols, dtype=dtype, scale=2.0, shift=0.5)
    check_layernorm_fwd(x, randn(cols, dtype=dtype), randn(cols, dtype=dtype), config, dtype)


def check_layernorm_fwd(x, w, b, config, dtype):
    """ops.layernorm_fwd(x, w, b) under config against float64 PyTorch: y, mean and rstd."""
    y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5, config=config)
    x64 = x.double()
    ref = torch.nn.functional.layer_norm(x64, (x.shape[-1],), w.double(), b.double(), 1e-5)
    assert_close(y, ref, TOL[dtype], "y")
    assert_close(mean, x64.mean(-1), TOL[F32], "mean")
    assert_close(rstd, torch.rsqrt(x64.var(-1, unbiased=False) + 1e-5), TOL[F32], "rstd")


@pytest.mark.parametrize("rows,cols,config", [
    (4096, 32768, dict(smem=True, wb_smem=True, split=2, block=4096, num_stages=2)),
    (4096, 32768, dict(smem=True, wb_smem=True, split=4, block=4096, num_stages=3)),
    (2048, 100000, dict(smem=True, wb_smem=True, split=4, block=4096, num_stages=2)),
    (301, 70001, dict(smem=True, wb_smem=True, split=4, block=2048, num_stages=2, num_warps=16)),
    (2048, 100000, dict(smem=True, wb_smem=True, split=4, block=4096, num_stages=2, unroll=4)),
])
@pytest.mark.parametrize("dtype,wb_dtype", [(F16, F16), (BF16, BF16), (F16, F32)])
def test_layernorm_fwd_smem_wb_smem(rows, cols, config, dtype, wb_dtype):
    # w and b copied once per CTA into shared memory (odd widths: masked tails, zero past the
    # slice), also in a dtype wider than x's, against float64 PyTorch.
    slice_cols = -(-(-(-cols // config["split"])) // 16) * 16
    chunks = -(-slice_cols // config["block"])
    itemsize = torch.tensor([], dtype=dtype).element_size()
    wb_itemsize = torch.tensor([], dtype=wb_dtype).element_size()
    if (config["num_stages"] * itemsize + 2 * wb_itemsize) * chunks * config["block"] > 230_400:
        pytest.skip("the ring and fp32 w and b slices of this split do not fit in shared memory")
    x = randn(rows, cols, dtype=dtype, scale=2.0, shift=0.5)
    check_layernorm_fwd(x, randn(cols, dtype=wb_dtype, shift=1.0), randn(cols, dtype=wb_dtype),
                        config, dtype)
