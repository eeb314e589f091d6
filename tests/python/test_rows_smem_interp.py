"""Softmax with row slices held in shared memory (kernels/hopper/rows_smem.py) in the interpreter,
through ops.softmax(config=dict(smem=True, ...)), against NumPy: clusters of 1 to 16 CTAs, slices
of several chunks with a short last chunk, rings of 2 and 3 slices, more rows than programs (the
ring wraps), fewer rows than programs, the scratch exchange (dsmem=False), strided rows, and the
configurations it refuses."""

import numpy as np
import pytest

from test_kernels_interp import TOL, assert_close, randn, softmax_ref
from kernels import ops

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
])
def test_softmax_smem_refuses_bad_configs(rng, config, message):
    x = randn(rng, (2, 100000), "float32")
    with pytest.raises(ValueError, match=message):
        ops.softmax(x, config=config)
