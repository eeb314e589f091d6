"""The cluster row split (python/warpweave/ops/kernels/hopper/rows_cluster.py) in the interpreter, which runs the CTAs of
a cluster together: softmax and layer norm forward / backward through ops with config cluster=C,
against NumPy, at small sizes (odd widths, empty last slices, chunks of rows loaded ahead)."""

import numpy as np
import pytest

from test_kernels_interp import (TOL, assert_close, layernorm_bwd_ref, layernorm_ref, randn,
                                 softmax_ref)
from warpweave import ops

pytest.importorskip("warpweave._native")

# (rows, cols, config): two CTAs over rows of 300 and 4097 columns; three CTAs whose last slice
# is short; four over 20 columns (slices of 16: the last two hold nothing); chunks of rows with
# rows loaded one or two ahead and outputs stored after the next row's barrier.
CASES = [
    (3, 300, dict(cluster=2)),
    (2, 4097, dict(cluster=2)),
    (5, 1000, dict(cluster=3, rows_per_cluster=2)),
    (3, 20, dict(cluster=4)),
    (7, 300, dict(cluster=2, rows_per_cluster=3, rows_ahead=1)),
    (7, 300, dict(cluster=2, rows_per_cluster=4, rows_ahead=2, defer_store=True)),
]


@pytest.mark.parametrize("rows,cols,config", CASES)
def test_softmax_cluster(rng, rows, cols, config):
    x = randn(rng, (rows, cols), "float32", scale=3.0)
    assert_close(ops.softmax(x, config=config), softmax_ref(x), TOL["float32"], "softmax")


def test_softmax_cluster_fp16_and_strided_rows(rng):
    x = randn(rng, (4, 700), "float16", scale=3.0)
    assert_close(ops.softmax(x, config=dict(cluster=2)), softmax_ref(x), TOL["float16"], "fp16")
    wide = randn(rng, (3, 656), "float32", scale=3.0) - np.float32(200.0)
    x = wide[:, :600]
    assert_close(ops.softmax(x, config=dict(cluster=3)), softmax_ref(x), TOL["float32"],
                 "strided, values near -200")


@pytest.mark.parametrize("rows,cols,config", CASES)
def test_layernorm_fwd_cluster(rng, rows, cols, config):
    x = randn(rng, (rows, cols), "float32", scale=2.0) + np.float32(0.5)
    w, b = randn(rng, (cols,), "float32"), randn(rng, (cols,), "float32")
    y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5, config=config)
    y_ref, mean_ref, rstd_ref = layernorm_ref(x, w, b, 1e-5)
    assert_close(y, y_ref, TOL["float32"], "y")
    assert_close(mean, mean_ref, TOL["float32"], "mean")
    assert_close(rstd, rstd_ref, TOL["float32"], "rstd")


def test_layernorm_fwd_cluster_variance_beside_a_large_mean(rng):
    # Mean 1000, deviation 0.01: E[x^2] - E[x]^2 in fp32 would lose every digit of the variance
    # (ulp of 1e6 against 1e-4); the slices' (mean, M2) combine keeps it to the rounding of the
    # fp32 slice means (sums of 300 values near 1000, summed in order here: 1.3e-3 seen).
    x = randn(rng, (2, 900), "float32", scale=0.01) + np.float32(1000.0)
    ones, zeros = np.ones(900, np.float32), np.zeros(900, np.float32)
    _, _, rstd = ops.layernorm_fwd(x, ones, zeros, 0.0, config=dict(cluster=3))
    ref = 1.0 / np.sqrt(x.astype(np.float64).var(axis=1))
    assert_close(rstd, ref, 1e-2, "rstd")


@pytest.mark.parametrize("rows,cols,config", CASES + [
    # The row sums pushed into the peers' shared memory (dsmem): more rows than the exchange's
    # two slots, rows ahead, deferred stores, empty last slices.
    (rows, cols, dict(config, dsmem=True)) for rows, cols, config in (
        (5, 300, dict(cluster=2)), (7, 1000, dict(cluster=3, rows_per_cluster=4)),
        (3, 20, dict(cluster=4)), (7, 300, dict(cluster=2, rows_per_cluster=4, rows_ahead=2,
                                                defer_store=True)))])
def test_layernorm_bwd_cluster(rng, rows, cols, config):
    x = randn(rng, (rows, cols), "float32", scale=2.0)
    w, b = randn(rng, (cols,), "float32"), randn(rng, (cols,), "float32")
    dy = randn(rng, (rows, cols), "float32")
    _, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5)
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean, rstd, config=config)
    dx_ref, dw_ref, db_ref = layernorm_bwd_ref(dy, x, w, mean, rstd)
    assert_close(dx, dx_ref, TOL["float32"], "dx")
    assert_close(dw, dw_ref, TOL["float32"], "dw")
    assert_close(db, db_ref, TOL["float32"], "db")
