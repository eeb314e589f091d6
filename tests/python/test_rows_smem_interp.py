"""Softmax with row slices held in shared memory (python/warpweave/ops/kernels/hopper/rows_smem.py) in the interpreter,
through ops.softmax(config=dict(smem=True, ...)), against NumPy: clusters of 1 to 16 CTAs, slices
of several chunks with a short last chunk, rings of 2 and 3 slices, more rows than programs (the
ring wraps), fewer rows than programs, the scratch exchange (dsmem=False), strided rows, and the
configurations it refuses."""

import numpy as np
import pytest

from test_kernels_interp import (TOL, assert_close, layernorm_ref, needs_bf16, np_dtype, randn,
                                 softmax_ref)
from warpweave import ops

pytest.importorskip("warpweave._native")

# (rows, cols, config): 2 CTAs, 3 chunks of 64 per slice (the last short); 3 CTAs of fp16 slices
# with a ring of 3; one CTA (no cluster); 4 CTAs over 20 columns (the last two slices empty);
# 9 rows over 2 clusters (4-5 rows each: the ring wraps twice); 3 rows over 4 clusters (one idle).
CASES = [
    (5, 300, dict(smem=True, split=2, block=64, clusters=2, num_warps=4)),
    (7, 1000, dict(smem=True, split=3, block=128, num_stages=3, clusters=2, num_warps=4)),
    (6, 100, dict(smem=True, split=1, block=32, clusters=2, num_warps=4)),
    (4, 20, dict(smem=True, split=4, block=16, clusters=1, num_warps=4)),
    (9, 200, dict(smem=True, split=2, block=32, clusters=2, num_warps=4)),
    (3, 130, dict(smem=True, split=2, block=32, clusters=4, num_warps=4)),
    (2, 700, dict(smem=True, split=16, block=16, num_stages=3, clusters=1, num_warps=4)),
    (7, 300, dict(smem=True, split=3, block=32, clusters=2, num_warps=4, dsmem=False)),
    # The passes over whole chunks unrolled: 5 whole chunks by 2 (a remainder of one), 3 by 4
    # (none in the unrolled loop), the last slice's whole chunks fewer than the others'.
    (5, 700, dict(smem=True, split=2, block=64, clusters=2, num_warps=4, unroll=2)),
    (6, 400, dict(smem=True, split=1, block=128, clusters=2, num_warps=4, unroll=4)),
    (4, 1000, dict(smem=True, split=3, block=32, num_stages=3, clusters=2, num_warps=4,
                   unroll=3)),
]


@pytest.mark.parametrize("rows,cols,config", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_softmax_smem(rng, rows, cols, config, dtype):
    x = randn(rng, (rows, cols), dtype, scale=3.0)
    assert_close(ops.softmax(x, config=config), softmax_ref(x), TOL[dtype], "softmax smem")


def test_softmax_smem_strided_rows_and_extremes(rng):
    wide = randn(rng, (4, 656), "float32", scale=3.0) - np.float32(200.0)
    x = wide[:, :600]
    config = dict(smem=True, split=3, block=64, clusters=2, num_warps=4)
    assert_close(ops.softmax(x, config=config), softmax_ref(x), TOL["float32"], "strided")
    # One slice all -inf: it adds nothing to the row's sum (no NaN from -inf - -inf).
    y = randn(rng, (2, 96), "float32")
    y[:, 48:] = -np.inf
    out = ops.softmax(y, config=dict(smem=True, split=2, block=16, clusters=1, num_warps=4))
    assert np.isfinite(out).all()
    assert_close(out, softmax_ref(y), TOL["float32"], "a slice of -inf")


@pytest.mark.parametrize("config,message", [
    (dict(smem=True, split=0), "split"),
    (dict(smem=True, block=100), "block"),
    (dict(smem=True, num_stages=1), "num_stages"),
    (dict(smem=True, split=1, block=4096, num_stages=2), "shared memory"),
    (dict(smem=True, split=4, unroll=0), "config 'unroll'"),
    (dict(smem=True, split=4, unroll=2.0), "config 'unroll'"),
])
def test_softmax_smem_refuses_bad_configs(rng, config, message):
    x = randn(rng, (2, 100000), "float32")
    with pytest.raises(ValueError, match=message):
        ops.softmax(x, config=config)


# ------------------------------------------------------------------------------------------------
# Layer norm forward over the same slices (config smem=True; an option)
# ------------------------------------------------------------------------------------------------

LAYERNORM_CASES = [
    (5, 300, dict(smem=True, split=2, block=64, clusters=2, num_warps=4)),
    (7, 1000, dict(smem=True, split=3, block=128, num_stages=3, clusters=2, num_warps=4)),
    (6, 100, dict(smem=True, split=1, block=32, clusters=2, num_warps=4)),
    (4, 20, dict(smem=True, split=4, block=16, clusters=1, num_warps=4)),
    (9, 200, dict(smem=True, split=2, block=32, clusters=2, num_warps=4)),
    # The passes over whole chunks unrolled (with w and b in shared memory too).
    (5, 700, dict(smem=True, split=2, block=64, clusters=2, num_warps=4, unroll=2)),
    (6, 1000, dict(smem=True, wb_smem=True, split=3, block=32, num_stages=3, clusters=2,
                   num_warps=4, unroll=4)),
]


@pytest.mark.parametrize("rows,cols,config", LAYERNORM_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_layernorm_fwd_smem(rng, rows, cols, config, dtype):
    x = randn(rng, (rows, cols), dtype, scale=2.0) + np.asarray(0.5, dtype)
    w, b = randn(rng, (cols,), dtype), randn(rng, (cols,), dtype)
    y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5, config=config)
    y_ref, mean_ref, rstd_ref = layernorm_ref(x, w, b, 1e-5)
    assert_close(y, y_ref, TOL[dtype], "y")
    assert_close(mean, mean_ref, TOL["float32"], "mean")
    assert_close(rstd, rstd_ref, TOL["float32"], "rstd")


# wb_smem=True: each CTA reads its w and b slices into shared memory once (zero past the slice)
# and normalizes every row from them. Odd sizes with short last chunks, empty slices (4 CTAs over
# 20 columns), rings that wrap, and w / b in a dtype other than x's.
WB_SMEM_CASES = [
    (5, 300, dict(smem=True, wb_smem=True, split=2, block=64, clusters=2, num_warps=4)),
    (7, 1001, dict(smem=True, wb_smem=True, split=4, block=128, num_stages=3, clusters=2,
                   num_warps=4)),
    (6, 97, dict(smem=True, wb_smem=True, split=1, block=32, clusters=2, num_warps=4)),
    (4, 20, dict(smem=True, wb_smem=True, split=4, block=16, clusters=1, num_warps=4)),
    (9, 203, dict(smem=True, wb_smem=True, split=2, block=32, clusters=2, num_warps=4)),
]


@pytest.mark.parametrize("rows,cols,config", WB_SMEM_CASES)
@pytest.mark.parametrize("dtype,wb_dtype", [
    ("float32", "float32"), ("float16", "float16"), ("float16", "float32"),
    ("float32", "float16"), pytest.param("float32", "bfloat16", marks=needs_bf16),
    pytest.param("bfloat16", "bfloat16", marks=needs_bf16)])
def test_layernorm_fwd_smem_wb_in_shared_memory(rng, rows, cols, config, dtype, wb_dtype):
    x = randn(rng, (rows, cols), dtype, scale=2.0) + np.asarray(0.5, dtype)
    w = (rng.standard_normal(cols) + 1.0).astype(np_dtype(wb_dtype))
    b = randn(rng, (cols,), wb_dtype)
    y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5, config=config)
    y_ref, mean_ref, rstd_ref = layernorm_ref(x, w, b, 1e-5)
    assert_close(y, y_ref, TOL[dtype], "y")
    assert_close(mean, mean_ref, TOL["float32"], "mean")
    assert_close(rstd, rstd_ref, TOL["float32"], "rstd")


def test_layernorm_fwd_smem_variance_beside_a_large_mean(rng):
    # Mean 1000, deviation 0.01: the slices' (mean, M2) combine keeps the variance that
    # E[x^2] - E[x]^2 in fp32 would lose.
    x = randn(rng, (2, 900), "float32", scale=0.01) + np.float32(1000.0)
    ones, zeros = np.ones(900, np.float32), np.zeros(900, np.float32)
    _, _, rstd = ops.layernorm_fwd(x, ones, zeros, 0.0,
                                   config=dict(smem=True, split=3, block=64, clusters=1))
    ref = 1.0 / np.sqrt(x.astype(np.float64).var(axis=1))
    assert np.allclose(rstd, ref, rtol=2e-3), (rstd, ref)
