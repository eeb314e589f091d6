"""Every configuration that bench/sweep_memory.py times on the GPU, run through its warpweave.ops
wrapper in the CPU interpreter on small odd shapes against a float64 NumPy reference, so that a
configuration the sweep may pick as a default computes the right thing."""

import importlib
import os
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
for path in (ROOT, os.path.join(ROOT, "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

import sweep_memory  # noqa: E402
from warpweave import ops  # noqa: E402


def cases(name):
    return [pytest.param(c, id=sweep_memory.config_label(c)) for c in sweep_memory.CONFIGS[name]]


def columns(name, config):
    """300 (masked blocks) or, for the TMA row kernels, 512 fp32 columns (16 swizzle spans: rows
    they take; they leave other rows to the register kernels)."""
    return 512 if sweep_memory.uses_tma(name, config) else 300


def rel_err(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300)


def test_dry_run_lists_every_kernel(capsys):
    assert sweep_memory.main(["--dry-run"]) == 0
    printed = capsys.readouterr().out
    for name in sweep_memory.KERNELS:
        assert f"{name}: {len(sweep_memory.CONFIGS[name])} configurations" in printed


@pytest.mark.parametrize("config", cases("softmax"))
def test_softmax_configs(rng, config):
    x = (rng.standard_normal((37, columns("softmax", config))) * 3).astype(np.float32)
    ref = np.exp(x - x.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    assert rel_err(ops.softmax(x, config=config), ref) < 1e-5


@pytest.mark.parametrize("config", cases("layernorm_fwd"))
def test_layernorm_fwd_configs(rng, config):
    n = columns("layernorm_fwd", config)
    x = (rng.standard_normal((37, n)) * 2 + 1).astype(np.float32)
    w, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5, config=config)
    x64 = x.astype(np.float64)
    rstd_ref = 1 / np.sqrt(x64.var(1) + 1e-5)
    ref = (x64 - x64.mean(1, keepdims=True)) * rstd_ref[:, None] * w + b
    assert rel_err(y, ref) < 1e-5
    assert rel_err(rstd, rstd_ref) < 1e-5


@pytest.mark.parametrize("config", cases("layernorm_bwd"))
def test_layernorm_bwd_configs(rng, config):
    m, n = 37, columns("layernorm_bwd", config)
    x = (rng.standard_normal((m, n)) * 2).astype(np.float32)
    dy = rng.standard_normal((m, n)).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    x64 = x.astype(np.float64)
    mean = x64.mean(1)
    rstd = 1 / np.sqrt(x64.var(1) + 1e-5)
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean.astype(np.float32), rstd.astype(np.float32),
                                   config=config)
    xhat = (x64 - mean[:, None]) * rstd[:, None]
    wdy = w * dy.astype(np.float64)
    dx_ref = (wdy - xhat * (xhat * wdy).mean(1, keepdims=True) -
              wdy.mean(1, keepdims=True)) * rstd[:, None]
    assert rel_err(dx, dx_ref) < 1e-5
    assert rel_err(dw, (dy * xhat).sum(0)) < 1e-5
    assert rel_err(db, dy.astype(np.float64).sum(0)) < 1e-5


@pytest.mark.parametrize("config", cases("row_sum"))
def test_row_sum_configs(rng, config):
    x = rng.standard_normal((37, 300)).astype(np.float32)
    assert rel_err(ops.row_sum(x, config=config), x.astype(np.float64).sum(1)) < 1e-5


@pytest.mark.parametrize("config", cases("row_max"))
def test_row_max_configs(rng, config):
    x = rng.standard_normal((37, 300)).astype(np.float32)
    x[5, 7] = x[5, 200] = 50.0  # the first of equal maxima wins
    values, indices = ops.row_max(x, config=config)
    np.testing.assert_array_equal(values, x.max(1))
    np.testing.assert_array_equal(indices, x.argmax(1))


@pytest.mark.parametrize("config", cases("embedding_bag"))
def test_embedding_bag_configs(rng, config):
    weight = rng.standard_normal((50, 136)).astype(np.float32)
    sizes = rng.integers(0, 40, 9)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    indices = rng.integers(0, 50, int(offsets[-1])).astype(np.int64)
    out = ops.embedding_bag(weight, indices, offsets, config=config)
    ref = np.stack([weight[indices[a:b]].astype(np.float64).sum(0)
                    for a, b in zip(offsets[:-1], offsets[1:])])
    assert rel_err(out, ref) < 1e-5
