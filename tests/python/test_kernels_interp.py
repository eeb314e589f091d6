"""Every host wrapper of warpweave.ops, run in the CPU interpreter on NumPy arrays, against a
float64 NumPy reference: fresh random inputs (the seed is printed), odd sizes, outputs poisoned
before each run, relative error ||out - ref|| / ||ref|| within each dtype's threshold."""

import importlib
import math
import os
import sys

import numpy as np
import pytest

import warpweave as ww

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

from warpweave import ops  # noqa: E402
from warpweave.ops import _common, _elementwise  # noqa: E402
from warpweave.ops.kernels.hopper import layernorm_tma  # noqa: E402
from warpweave.ops.kernels import reduction as reduction_kernels  # noqa: E402
from warpweave.ops.kernels.hopper import softmax_tma  # noqa: E402

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BF16 = None

needs_bf16 = pytest.mark.skipif(
    BF16 is None, reason="bfloat16 NumPy arrays need ml_dtypes (pip install ml-dtypes)")

# fp32 results carry fp32 rounding of fp32 arithmetic; fp16/bf16 results are rounded to 11 or 8
# significant bits when stored, which alone costs ~3e-4 / ~2e-3 in the norm-wise relative error.
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def dtype_param(name):
    if name == "bfloat16":
        return pytest.param(name, marks=needs_bf16)
    return name


FLOAT_DTYPES = [dtype_param(d) for d in ("float32", "float16", "bfloat16")]
HALF_DTYPES = [dtype_param(d) for d in ("float16", "bfloat16")]


def np_dtype(name):
    return BF16 if name == "bfloat16" else np.dtype(name)


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    """Every array the wrappers allocate starts as NaN (floats) or -7777 (ints), so an element
    the kernel fails to write cannot pass."""
    allocate = _common._Place.empty

    def poisoned(self, shape, dtype):
        out = allocate(self, shape, dtype)
        out[...] = np.nan if dtype in ("float16", "bfloat16", "float32", "float64") else -7777
        return out

    monkeypatch.setattr(_common._Place, "empty", poisoned)


def randn(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np_dtype(dtype))


def f64(a):
    return np.asarray(a).astype(np.float64)


def rel_err(out, ref):
    out, ref = f64(out), f64(ref)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert not np.isnan(out).any(), "NaN in the output (an element was not written?)"
    denom = np.linalg.norm(ref)
    return np.linalg.norm(out - ref) / (denom if denom > 0 else 1.0)


def assert_close(out, ref, tol, what=""):
    err = rel_err(out, ref)
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol:g}"


# ------------------------------------------------------------------------------------------------
# add
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1,), (17,), (3, 17), (1000, 781)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + ["int32"])
def test_add(rng, shape, dtype):
    if dtype == "int32":
        x = rng.integers(-1 << 20, 1 << 20, shape, dtype=np.int32)
        y = rng.integers(-1 << 20, 1 << 20, shape, dtype=np.int32)
    else:
        x, y = randn(rng, shape, dtype), randn(rng, shape, dtype)
    out = ops.add(x, y)
    assert out.dtype == x.dtype and out.shape == x.shape
    # One rounding of an exact sum: bit-identical to NumPy's own add.
    np.testing.assert_array_equal(out, x + y)


def test_add_persistent_kernel(rng, monkeypatch):
    # Vectors past 2**31 elements take add_kernel_persistent; lower the threshold to run it here.
    monkeypatch.setattr(_elementwise, "ADD_PERSISTENT_FROM", 1000)
    x, y = randn(rng, (5, 40001), "float32"), randn(rng, (5, 40001), "float32")
    np.testing.assert_array_equal(ops.add(x, y), x + y)


def test_add_of_strided_views(rng):
    base = randn(rng, (40, 50), "float32")
    x, y = base[::2, 1:], base[1::2, :-1]
    out = ops.add(x, y)
    np.testing.assert_array_equal(out, x + y)


# ------------------------------------------------------------------------------------------------
# softmax
# ------------------------------------------------------------------------------------------------


def softmax_ref(x):
    x = f64(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (1000, 781), (2, 3, 40)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax(rng, shape, dtype):
    x = randn(rng, shape, dtype, scale=3.0)
    out = ops.softmax(x)
    assert out.dtype == x.dtype and out.shape == x.shape
    assert_close(out, softmax_ref(x), TOL[dtype], "softmax")


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (5, 1000)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_online_kernel(rng, shape, dtype):
    # Rows span several of the online kernel's blocks; large values test the running rescale.
    x = randn(rng, shape, dtype, scale=20.0)
    out = ops.softmax(x, online=True)
    assert_close(out, softmax_ref(x), TOL[dtype], "online softmax")


def test_softmax_of_strided_rows_and_extreme_values(rng):
    base = randn(rng, (7, 64), "float32", scale=4.0)
    x = base[:, 3:50]  # row stride 64, 47 columns
    x[2, 5] = 1e4  # one dominant entry: the others underflow to 0
    x[4, :] = -1e30  # all equal (and huge): uniform
    for online in (False, True):
        out = ops.softmax(x, online=online)
        assert_close(out, softmax_ref(x), TOL["float32"], f"online={online}")
        np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)


@pytest.fixture
def tma_launches(monkeypatch):
    """The grids the TMA row kernels are launched with (to check that a tma=True call took them
    rather than falling back to the register kernels)."""
    launched = []
    for module, name in ((softmax_tma, "softmax_tma_kernel"),
                         (layernorm_tma, "layernorm_fwd_tma_kernel"),
                         (layernorm_tma, "layernorm_bwd_tma_kernel")):
        kernel = getattr(module, name)

        class Spy:
            def __getitem__(self, grid, kernel=kernel, name=name):
                launched.append((name, grid))
                return kernel[grid]

            def warmup(self, *args, kernel=kernel, **kwargs):
                return kernel.warmup(*args, **kwargs)

        monkeypatch.setattr(module, name, Spy())
    return launched


# Rows of 8, 16 and 32 swizzle spans; row counts below, at and above the 8 interpreter programs,
# so that programs get 0, 1 or several rows and the ring wraps (stages 1 to 4).
TMA_ROW_CASES = [("float32", (13, 256)), ("float16", (1, 1024)), ("float16", (8, 512)),
                 ("float32", (37, 512)), ("bfloat16", (19, 2048))]


def tma_cases():
    """(dtype, shape, config): stages 1, 2 and 4, the rows written back by plain stores and, at
    2 stages, by TMA copies out of shared memory."""
    for dtype, shape in TMA_ROW_CASES:
        for stages, tma_store in ((1, False), (2, False), (4, False), (2, True)):
            marks = [needs_bf16] if dtype == "bfloat16" else []
            config = dict(tma=True, num_stages=stages, num_warps=4, tma_store=tma_store)
            yield pytest.param(dtype, shape, config, marks=marks,
                               id=f"{dtype}-{shape[0]}x{shape[1]}-stages{stages}"
                               + ("-tma_store" if tma_store else ""))


@pytest.mark.parametrize("dtype,shape,config", list(tma_cases()))
def test_softmax_tma(rng, tma_launches, dtype, shape, config):
    x = randn(rng, shape, dtype, scale=3.0)
    out = ops.softmax(x, config=config)
    assert [name for name, _ in tma_launches] == ["softmax_tma_kernel"]
    assert out.dtype == x.dtype and out.shape == x.shape
    assert_close(out, softmax_ref(x), TOL[dtype], "softmax")


@pytest.mark.parametrize("dtype,shape,split,stages", [
    ("float16", (37, 2048), 2, 2), ("float32", (5, 1024), 2, 1), ("float16", (9, 4096), 4, 3),
    ("bfloat16", (2, 2048), 2, 2)])
def test_softmax_tma_rows_split_over_a_cluster(rng, tma_launches, dtype, shape, split, stages):
    # The slices' (max, sum) pairs exchanged per row; rows with large and -inf entries, so that
    # a slice's own max differs from the row's.
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    x = randn(rng, shape, dtype, scale=4.0)
    x[0, : shape[1] // 2] = -np.inf
    x[-1, -1] = 30.0
    out = ops.softmax(x, config=dict(tma=True, split=split, num_warps=4, num_stages=stages))
    (name, grid), = tma_launches
    assert name == "softmax_tma_kernel" and grid[0] % split == 0, tma_launches
    assert_close(out, softmax_ref(x), TOL[dtype], "softmax")


def test_tma_option_falls_back_where_rows_do_not_fit_one_copy(rng, tma_launches):
    base = randn(rng, (6, 1024), "float16")
    for x in (base[:, :1000], base[:, :512], randn(rng, (5, 768), "float16")):
        # Not a whole number of swizzle spans, strided rows, 12 spans (not a power of two).
        assert_close(ops.softmax(x, config=dict(tma=True)), softmax_ref(x), TOL["float16"], "")
    assert tma_launches == []


# ------------------------------------------------------------------------------------------------
# layernorm
# ------------------------------------------------------------------------------------------------


def layernorm_ref(x, w, b, eps):
    x, w, b = f64(x), f64(w), f64(b)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    return (x - mean) * rstd * w + b, mean[..., 0], rstd[..., 0]


def layernorm_bwd_ref(dy, x, w, mean, rstd):
    """The gradients of layernorm_ref for a loss with gradient dy (checked by finite differences
    in test_layernorm_bwd_reference_matches_finite_differences)."""
    dy, x, w = f64(dy), f64(x), f64(w)
    n = x.shape[-1]
    xhat = (x - f64(mean)[..., None]) * f64(rstd)[..., None]
    wdy = w * dy
    c1 = (xhat * wdy).sum(axis=-1, keepdims=True) / n
    c2 = wdy.sum(axis=-1, keepdims=True) / n
    dx = (wdy - (xhat * c1 + c2)) * f64(rstd)[..., None]
    lead = tuple(range(x.ndim - 1))
    return dx, (dy * xhat).sum(axis=lead), dy.sum(axis=lead)


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (1000, 781), (2, 5, 33)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_layernorm_fwd(rng, shape, dtype):
    n = shape[-1]
    x = randn(rng, shape, dtype, scale=2.0) + np.asarray(3.0, np_dtype(dtype))
    w, b = randn(rng, (n,), dtype), randn(rng, (n,), dtype)
    y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5)
    y_ref, mean_ref, rstd_ref = layernorm_ref(x, w, b, 1e-5)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert mean.dtype == np.float32 and mean.shape == shape[:-1] and rstd.shape == shape[:-1]
    assert_close(y, y_ref, TOL[dtype], "y")
    assert_close(mean, mean_ref, 1e-5, "mean")
    assert_close(rstd, rstd_ref, 1e-5, "rstd")


def test_layernorm_fwd_long_rows_walk_several_blocks(rng):
    # Blocks hold at most 8192 columns: 20000 takes three steps, the last one masked.
    x = randn(rng, (2, 20000), "float32")
    w, b = randn(rng, (20000,), "float32"), randn(rng, (20000,), "float32")
    y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-6)
    y_ref, mean_ref, rstd_ref = layernorm_ref(x, w, b, 1e-6)
    assert_close(y, y_ref, 1e-5, "y")
    assert_close(rstd, rstd_ref, 1e-5, "rstd")


def test_layernorm_bwd_reference_matches_finite_differences(rng):
    x, w, b = rng.standard_normal((3, 6)), rng.standard_normal(6), rng.standard_normal(6)
    dy = rng.standard_normal((3, 6))
    _, mean, rstd = layernorm_ref(x, w, b, 1e-5)
    dx, dw, db = layernorm_bwd_ref(dy, x, w, mean, rstd)

    def loss(x_, w_, b_):
        return (layernorm_ref(x_, w_, b_, 1e-5)[0] * dy).sum()

    h = 1e-6
    for grad, arg in ((dx, 0), (dw, 1), (db, 2)):
        args = [x, w, b]
        numeric = np.zeros_like(args[arg])
        for i in np.ndindex(args[arg].shape):
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[arg][i] += h
            minus[arg][i] -= h
            numeric[i] = (loss(*plus) - loss(*minus)) / (2 * h)
        np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (300, 781), (2, 5, 33)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_layernorm_bwd(rng, shape, dtype):
    n = shape[-1]
    x = randn(rng, shape, dtype, scale=2.0)
    w = randn(rng, (n,), dtype)
    dy = randn(rng, shape, dtype)
    # The statistics come from the forward kernel, as in training.
    _, mean, rstd = ops.layernorm_fwd(x, w, randn(rng, (n,), dtype), 1e-5)
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean, rstd)
    dx_ref, dw_ref, db_ref = layernorm_bwd_ref(dy, x, w, mean, rstd)
    assert dx.dtype == x.dtype and dx.shape == x.shape
    assert dw.dtype == w.dtype and dw.shape == (n,) and db.shape == (n,)
    # dx of a single column is 0 up to rounding (the normalized value does not depend on x).
    if n > 1:
        assert_close(dx, dx_ref, TOL[dtype], "dx")
    else:
        assert np.abs(f64(dx)).max() < 1e-3
    assert_close(dw, dw_ref, TOL[dtype], "dw")
    assert_close(db, db_ref, TOL[dtype], "db")


@pytest.mark.parametrize("dtype,shape,config", list(tma_cases()))
def test_layernorm_tma(rng, tma_launches, dtype, shape, config):
    n = shape[-1]
    x = randn(rng, shape, dtype, scale=2.0) + np.asarray(3.0, np_dtype(dtype))
    w, b, dy = randn(rng, (n,), dtype), randn(rng, (n,), dtype), randn(rng, shape, dtype)
    y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5, config=config)
    y_ref, mean_ref, rstd_ref = layernorm_ref(x, w, b, 1e-5)
    assert_close(y, y_ref, TOL[dtype], "y")
    assert_close(mean, mean_ref, 1e-5, "mean")
    assert_close(rstd, rstd_ref, 1e-5, "rstd")
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean, rstd, config=config)
    assert [name for name, _ in tma_launches] == ["layernorm_fwd_tma_kernel",
                                                   "layernorm_bwd_tma_kernel"]
    assert dx.dtype == x.dtype and dw.dtype == w.dtype and db.dtype == w.dtype
    for got, ref, what in zip((dx, dw, db), layernorm_bwd_ref(dy, x, w, mean, rstd),
                              ("dx", "dw", "db")):
        assert_close(got, ref, TOL[dtype], what)


@pytest.mark.parametrize("dtype,shape,split,stages", [
    ("float16", (37, 2048), 2, 3), ("float16", (3, 1024), 2, 1), ("float32", (11, 1024), 2, 2),
    ("float16", (9, 4096), 4, 2)])
def test_layernorm_bwd_tma_rows_split_over_a_cluster(rng, tma_launches, dtype, shape, split,
                                                     stages):
    # Each row's slices streamed by the CTAs of a cluster, the row sums exchanged per row; row
    # counts below and above the interpreter's clusters (4 SMs x 2 programs / split).
    check_layernorm_bwd_tma(rng, dtype, shape, dict(tma=True, split=split, num_warps=4,
                                                     num_stages=stages), split, tma_launches)


def check_layernorm_bwd_tma(rng, dtype, shape, config, cluster, tma_launches):
    """The backward under config (one TMA kernel launch in clusters of `cluster` CTAs) on random
    rows against NumPy."""
    n = shape[-1]
    x = randn(rng, shape, dtype, scale=2.0) + np.asarray(1.0, np_dtype(dtype))
    w, b, dy = randn(rng, (n,), dtype), randn(rng, (n,), dtype), randn(rng, shape, dtype)
    _, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5)
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean, rstd, config=config)
    (name, grid), = tma_launches
    assert name == "layernorm_bwd_tma_kernel" and grid[0] % cluster == 0, tma_launches
    for got, ref, what in zip((dx, dw, db), layernorm_bwd_ref(dy, x, w, mean, rstd),
                              ("dx", "dw", "db")):
        assert_close(got, ref, TOL[dtype], what)


def test_layernorm_bwd_split_must_be_a_cluster_size(rng):
    x = randn(rng, (4, 1024), "float16")
    stats = np.zeros(4, np.float32)
    for bad in (3, 0, 16, True, 2.0):
        with pytest.raises(ValueError, match="config 'split'"):
            ops.layernorm_bwd(x, x, x[0], stats, stats, config=dict(tma=True, split=bad))


@pytest.mark.parametrize("prefetch", [0, 1, 2, 3])
@pytest.mark.parametrize("shape", [(37, 300), (9, 64), (2, 40)])
def test_layernorm_bwd_prefetch_depths(rng, shape, prefetch):
    # Programs of 5, 2 and 1 rows: the rows loaded ahead run past each program's last row.
    n = shape[-1]
    x = randn(rng, shape, "float16", scale=2.0)
    w = randn(rng, (n,), "float16")
    dy = randn(rng, shape, "float16")
    _, mean, rstd = ops.layernorm_fwd(x, w, randn(rng, (n,), "float16"), 1e-5)
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean, rstd,
                                   config=dict(prefetch=prefetch, block_n=16, num_warps=4))
    dx_ref, dw_ref, db_ref = layernorm_bwd_ref(dy, x, w, mean, rstd)
    assert_close(dx, dx_ref, TOL["float16"], "dx")
    assert_close(dw, dw_ref, TOL["float16"], "dw")
    assert_close(db, db_ref, TOL["float16"], "db")


# ------------------------------------------------------------------------------------------------
# matmul
# ------------------------------------------------------------------------------------------------


def matmul_ref(a, b, activation):
    c = f64(a) @ f64(b)
    if activation == "relu":
        return np.maximum(c, 0.0)
    if activation == "leaky_relu":
        return np.where(c >= 0, c, 0.01 * c)
    return c


@pytest.mark.parametrize("mnk", [(1, 1, 1), (3, 17, 5), (64, 48, 80), (100, 70, 130)])
@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_matmul(rng, mnk, dtype):
    m, n, k = mnk
    a, b = randn(rng, (m, k), dtype), randn(rng, (k, n), dtype)
    c = ops.matmul(a, b)
    assert c.dtype == a.dtype and c.shape == (m, n)
    assert_close(c, matmul_ref(a, b, None), TOL[dtype], "c")


@pytest.mark.parametrize("activation", ["relu", "leaky_relu"])
def test_matmul_fused_activation(rng, activation):
    a, b = randn(rng, (37, 45), "float16"), randn(rng, (45, 29), "float16")
    c = ops.matmul(a, b, activation=activation)
    assert_close(c, matmul_ref(a, b, activation), TOL["float16"], activation)


def test_matmul_of_transposed_and_strided_operands(rng):
    at = randn(rng, (50, 33), "float16")  # a = at.T: column-major [33, 50]
    big = randn(rng, (50, 80), "float16")
    b = big[:, 3:44]  # row stride 80
    c = ops.matmul(at.T, b)
    assert_close(c, matmul_ref(at.T, b, None), TOL["float16"], "c")


def test_matmul_with_empty_k_gives_zeros():
    a, b = np.ones((5, 0), np.float16), np.ones((0, 7), np.float16)
    np.testing.assert_array_equal(ops.matmul(a, b), np.zeros((5, 7), np.float16))


# ------------------------------------------------------------------------------------------------
# embedding_bag
# ------------------------------------------------------------------------------------------------


def embedding_bag_ref(weight, indices, offsets, per_sample_weights, mode):
    weight = f64(weight)
    out = np.zeros((len(offsets) - 1, weight.shape[1]))
    for bag in range(len(offsets) - 1):
        lo, hi = int(offsets[bag]), int(offsets[bag + 1])
        for i in range(lo, hi):
            s = 1.0 if per_sample_weights is None else float(per_sample_weights[i])
            out[bag] += s * weight[int(indices[i])]
        if mode == "mean" and hi > lo:
            out[bag] /= hi - lo
    return out


def random_bags(rng, num_bags, num_embeddings, index_dtype, max_bag=20):
    sizes = rng.integers(0, max_bag + 1, num_bags)
    sizes[rng.integers(0, num_bags)] = 0  # at least one empty bag
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(index_dtype)
    indices = rng.integers(0, num_embeddings, int(offsets[-1])).astype(index_dtype)
    return indices, offsets


@pytest.mark.parametrize("dim", [1, 33, 300])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag(rng, dim, dtype, mode):
    weight = randn(rng, (97, dim), dtype)
    indices, offsets = random_bags(rng, 13, 97, np.int64)
    out = ops.embedding_bag(weight, indices, offsets, mode=mode)
    assert out.dtype == weight.dtype and out.shape == (13, dim)
    ref = embedding_bag_ref(weight, indices, offsets, None, mode)
    assert_close(out, ref, TOL[dtype], mode)
    empty = np.flatnonzero(np.diff(offsets) == 0)
    assert (f64(out[empty]) == 0).all()


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_embedding_bag_with_sample_weights(rng, index_dtype):
    weight = randn(rng, (50, 70), "float32")
    indices, offsets = random_bags(rng, 9, 50, index_dtype)
    psw = randn(rng, indices.shape, "float32")
    out = ops.embedding_bag(weight, indices, offsets, per_sample_weights=psw)
    ref = embedding_bag_ref(weight, indices, offsets, psw, "sum")
    assert_close(out, ref, TOL["float32"], "weighted sum")


def test_embedding_bag_of_a_strided_table(rng):
    table = randn(rng, (40, 100), "float16")
    weight = table[:, 10:74]  # row stride 100
    indices, offsets = random_bags(rng, 6, 40, np.int64)
    out = ops.embedding_bag(weight, indices, offsets, mode="mean")
    assert_close(out, embedding_bag_ref(weight, indices, offsets, None, "mean"), TOL["float16"])


# ------------------------------------------------------------------------------------------------
# row reductions
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (1000, 781), (5, 3000)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_row_sum(rng, shape, dtype):
    x = randn(rng, shape, dtype) + np.asarray(0.5, np_dtype(dtype))
    out = ops.row_sum(x)
    assert out.dtype == np.float32 and out.shape == (shape[0],)
    # fp32 accumulation of exact inputs: fp32-level error whatever the input type.
    assert_close(out, f64(x).sum(axis=1), 1e-5, "row sums")


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (1000, 781), (5, 3000)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_row_max(rng, shape, dtype):
    x = randn(rng, shape, dtype)
    # A repeated maximum in some rows: the first column holding it must win.
    for r in range(0, shape[0], 3):
        j = rng.integers(0, shape[1])
        x[r, j:] = np.maximum(x[r, j:], np.asarray(5.0, x.dtype))
    values, indices = ops.row_max(x)
    assert values.dtype == np.float32 and indices.dtype == np.int32
    np.testing.assert_array_equal(values, f64(x).max(axis=1))
    np.testing.assert_array_equal(indices, f64(x).argmax(axis=1))


def test_row_reductions_of_strided_rows(rng):
    base = randn(rng, (9, 300), "float32")
    x = base[::2, 7:250]
    assert_close(ops.row_sum(x), f64(x).sum(axis=1), 1e-5)
    values, indices = ops.row_max(x)
    np.testing.assert_array_equal(values, x.max(axis=1))
    np.testing.assert_array_equal(indices, x.argmax(axis=1))


class LaunchSpy:
    """Wraps a kernel and records the grid of each launch, so a test can tell which path ran."""

    def __init__(self, kernel):
        self.kernel, self.grids = kernel, []

    def __getitem__(self, grid):
        def launch(*args, **meta):
            self.grids.append(tuple(grid(meta) if callable(grid) else grid))
            return self.kernel[grid](*args, **meta)
        return launch


@pytest.fixture
def partial_spies(monkeypatch):
    spies = {}
    for name in ("row_sum_partial_kernel", "row_max_partial_kernel"):
        spies[name] = LaunchSpy(getattr(reduction_kernels, name))
        monkeypatch.setattr(reduction_kernels, name, spies[name])
    return spies["row_sum_partial_kernel"], spies["row_max_partial_kernel"]


def first_max_ref(x):
    return f64(x).max(axis=1), f64(x).argmax(axis=1)


@pytest.mark.parametrize("shape,chunks", [((3, 5000), 3), ((3, 5000), 7), ((5, 3001), 4),
                                          ((1, 1024), 4), ((6, 700), 2)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_row_reductions_split_into_chunks(rng, partial_spies, shape, chunks, dtype):
    x = randn(rng, shape, dtype) + np.asarray(0.5, np_dtype(dtype))
    # Chunks are whole 256-column blocks (the interpreter's BLOCK_N here): fewer when the row
    # has fewer blocks than the chunks asked for.
    expected_chunks = ww.cdiv(shape[1], ww.cdiv(ww.cdiv(shape[1], chunks), 256) * 256)
    assert_close(ops.row_sum(x, config={"chunks": chunks}), f64(x).sum(axis=1), 1e-5, "sums")
    values, indices = ops.row_max(x, config={"chunks": chunks})
    ref_values, ref_indices = first_max_ref(x)
    np.testing.assert_array_equal(values, ref_values)
    np.testing.assert_array_equal(indices, ref_indices)
    sums_spy, max_spy = partial_spies
    launched = [g[1] for g in sums_spy.grids + max_spy.grids]
    assert launched == ([expected_chunks] * 2 if expected_chunks > 1 else [])


def test_row_max_split_keeps_the_first_of_equal_maxima(rng, partial_spies):
    x = randn(rng, (6, 3000), "float32")
    # Chunks of 768 columns (3000 over 4 chunks): equal maxima within a chunk, across chunks,
    # at a chunk's first column, in the last (partial) chunk, and a row of -inf.
    for r, cols in enumerate(((5, 2999), (800, 1600), (768, 1536), (2400, 2304), (2999,))):
        x[r, list(cols)] = 9.0
    x[5] = -np.inf
    values, indices = ops.row_max(x, config={"chunks": 4})
    assert partial_spies[1].grids == [(2, 4)]
    np.testing.assert_array_equal(values, [9, 9, 9, 9, 9, -np.inf])
    np.testing.assert_array_equal(indices, [5, 800, 768, 2304, 2999, 0])


@pytest.mark.parametrize("chunks", [1, 3])
def test_row_max_skips_nan(rng, chunks):
    # NaN never wins: each row gives its largest number and the first column holding it, a row
    # of only NaN gives -inf at column 0, whether the row is split (3) or not (1).
    x = randn(rng, (6, 2100), "float32")
    for r, cols in enumerate(((3,), (256, 1000), (0, 511), (2099,), tuple(range(2100)))):
        x[r, list(cols)] = np.nan
    x[5, 0] = np.nan
    x[5, 1:] = -np.inf
    values, indices = ops.row_max(x, config={"chunks": chunks})
    ref_values = np.nanmax(x[:4], axis=1)
    np.testing.assert_array_equal(values, [*ref_values, -np.inf, -np.inf])
    np.testing.assert_array_equal(indices, [*np.nanargmax(x[:4], axis=1), 0, 0])
    assert np.isnan(ops.row_sum(x, config={"chunks": chunks})[:5]).all()


def test_row_reductions_split_strided_rows(rng, partial_spies):
    base = randn(rng, (7, 6000), "float16")
    x = base[::3, 5:5900]
    assert_close(ops.row_sum(x, config={"chunks": 5}), f64(x).sum(axis=1), 1e-5)
    values, indices = ops.row_max(x, config={"chunks": 5})
    np.testing.assert_array_equal(values, f64(x).max(axis=1))
    np.testing.assert_array_equal(indices, f64(x).argmax(axis=1))
    assert [g[1] for g in partial_spies[0].grids + partial_spies[1].grids] == [5, 5]


@pytest.mark.parametrize("op", [ops.row_sum, ops.row_max])
@pytest.mark.parametrize("cols", [100, 130])
def test_unaligned_narrow_rows_compile_to_few_registers(gpu_compiles, op, cols):
    # Rows whose loads cannot be 16-byte vectors take 1024-element blocks: 4096 of them took
    # up to 254 registers a thread (two programs an SM).
    op(np.ones((4096, cols), np.float32))
    assert gpu_compiles.kernels
    for kernel in gpu_compiles.kernels:
        assert kernel.n_regs <= 64, (kernel.fn.__name__, kernel.n_regs)


@pytest.mark.parametrize("shape,split", [((3, 5000), True), ((1000, 781), False),
                                         ((2, 600), False)])
def test_row_reductions_split_only_when_rows_cannot_fill_the_gpu(rng, partial_spies, shape, split):
    # The interpreter stands in 4 SMs of 2 resident programs: 3 rows of 5000 (one program of
    # 4 rows) want 8 chunks but get 4 (chunks of at least four 256-column blocks); 1000 rows
    # fill the stand-in; 600 columns are too few blocks to split.
    x = randn(rng, shape, "float32")
    assert_close(ops.row_sum(x), f64(x).sum(axis=1), 1e-5)
    np.testing.assert_array_equal(ops.row_max(x)[1], f64(x).argmax(axis=1))
    launched = [g[1] for g in partial_spies[0].grids + partial_spies[1].grids]
    assert launched == ([4, 4] if split else [])


# ------------------------------------------------------------------------------------------------
# attention
# ------------------------------------------------------------------------------------------------


def attention_ref(q, k, v, causal, sm_scale):
    s = np.einsum("zhmd,zhnd->zhmn", f64(q), f64(k)) * sm_scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    total = p.sum(axis=-1, keepdims=True)
    lse2 = (m[..., 0] + np.log(total[..., 0])) / math.log(2.0)
    return np.einsum("zhmn,zhnd->zhmd", p / total, f64(v)), lse2


@pytest.mark.parametrize("shape", [(1, 1, 1, 16), (1, 2, 37, 16), (2, 1, 64, 32), (1, 1, 50, 64)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_attention(rng, shape, causal, dtype):
    q, k, v = (randn(rng, shape, dtype) for _ in range(3))
    sm_scale = 0.5 / math.sqrt(shape[-1]) + 0.1
    out, lse = ops.attention(q, k, v, causal=causal, sm_scale=sm_scale, return_lse=True)
    ref, lse_ref = attention_ref(q, k, v, causal, sm_scale)
    assert out.dtype == q.dtype and out.shape == shape and lse.shape == shape[:3]
    assert_close(out, ref, TOL[dtype], "out")
    assert_close(lse, lse_ref, 1e-4, "lse")


def test_attention_default_scale_and_strided_inputs(rng):
    # q, k, v are slices of one [Z, N, 3, H, D] buffer, as a fused QKV projection gives them.
    qkv = randn(rng, (2, 23, 3, 2, 32), "float16")
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    out = ops.attention(q, k, v)
    ref, _ = attention_ref(q, k, v, False, 1 / math.sqrt(32))
    assert_close(out, ref, TOL["float16"], "out")


# ------------------------------------------------------------------------------------------------
# The GPU configurations compile: each wrapper called as on an H200 (on_gpu, 132 SMs) with its
# launch replaced by a compile to a cubin (codegen + ptxas) for the target: conftest's
# gpu_compiles fixture
# ------------------------------------------------------------------------------------------------


def h(*shape):
    return np.ones(shape, np.float16)


def s(*shape):
    return np.ones(shape, np.float32)


def add_as_if_longer_than_2_31(x, y):
    saved = _elementwise.ADD_PERSISTENT_FROM
    _elementwise.ADD_PERSISTENT_FROM = 0
    try:
        return ops.add(x, y)
    finally:
        _elementwise.ADD_PERSISTENT_FROM = saved


GPU_CALLS = {
    "add": lambda: ops.add(s(4096), s(4096)),
    "add_persistent": lambda: add_as_if_longer_than_2_31(s(4096), s(4096)),
    "softmax": lambda: ops.softmax(h(64, 4096)),
    "softmax_online": lambda: ops.softmax(s(64, 40000)),
    "layernorm_fwd": lambda: ops.layernorm_fwd(h(64, 4096), h(4096), h(4096)),
    "layernorm_bwd": lambda: ops.layernorm_bwd(h(64, 4096), h(64, 4096), h(4096), s(64), s(64)),
    "softmax_tma": lambda: ops.softmax(h(64, 4096), config=dict(tma=True)),
    "layernorm_fwd_tma": lambda: ops.layernorm_fwd(h(64, 4096), h(4096), h(4096),
                                                   config=dict(tma=True)),
    "layernorm_bwd_tma": lambda: ops.layernorm_bwd(h(64, 4096), h(64, 4096), h(4096), s(64),
                                                   s(64), config=dict(tma=True)),
    "matmul": lambda: ops.matmul(h(512, 512), h(512, 512), activation="leaky_relu"),
    "embedding_bag": lambda: ops.embedding_bag(h(100, 128), np.zeros(10, np.int64),
                                               np.array([0, 5, 10])),
    "row_sum": lambda: ops.row_sum(s(64, 4096)),
    "row_max": lambda: ops.row_max(s(64, 4096)),
    "row_sum_narrow": lambda: ops.row_sum(s(4096, 100)),
    "row_max_narrow": lambda: ops.row_max(s(4096, 100)),
    "row_sum_split": lambda: ops.row_sum(h(64, 1 << 16)),  # partials, then row_sum_kernel
    "row_max_split": lambda: ops.row_max(h(64, 1 << 16)),  # partials, then the combine
    "attention_d64": lambda: ops.attention(h(1, 2, 1024, 64), h(1, 2, 1024, 64),
                                           h(1, 2, 1024, 64)),
    "attention_d128_causal": lambda: ops.attention(h(1, 2, 1024, 128), h(1, 2, 1024, 128),
                                                   h(1, 2, 1024, 128), causal=True),
    "matmul_tlx_ws": lambda: ops.matmul_tlx(h(512, 512), h(512, 512), "ws"),
    "matmul_tlx_pipelined": lambda: ops.matmul_tlx(h(512, 512), h(512, 512), "pipelined"),
    "matmul_tlx_pingpong": lambda: ops.matmul_tlx(h(512, 512), h(512, 512), "pingpong"),
    "attention_tlx": lambda: ops.attention_tlx(h(1, 2, 1024, 128), h(1, 2, 1024, 128),
                                               h(1, 2, 1024, 128)),
    "attention_tlx_causal_d64": lambda: ops.attention_tlx(
        h(1, 2, 1024, 64), h(1, 2, 1024, 64), h(1, 2, 1024, 64), causal=True),
}

# Pipeline stages that do not handle these kernels yet (strict: the test fails once they do, and
# the marker must then go). The errors are quoted from the compile.
GPU_XFAIL = {}
HOPPER_ONLY = ("matmul_tlx_ws", "matmul_tlx_pipelined", "matmul_tlx_pingpong", "attention_tlx",
               "attention_tlx_causal_d64", "softmax_tma", "layernorm_fwd_tma", "layernorm_bwd_tma")


def gpu_cases():
    for target in ("sm_90a", "sm_80", "sm_100a"):
        for name in GPU_CALLS:
            if name in HOPPER_ONLY and target != "sm_90a":
                continue
            marks = []
            if name in GPU_XFAIL:
                marks.append(pytest.mark.xfail(reason=GPU_XFAIL[name], strict=True,
                                               raises=ww.CompilationError))
            yield pytest.param(target, name, marks=marks, id=f"{target}-{name}")


@pytest.mark.parametrize("target,name", list(gpu_cases()))
def test_gpu_configuration_compiles(gpu_compiles, target, name):
    gpu_compiles.target = target
    gpu_compiles.kernels = []
    GPU_CALLS[name]()
    assert gpu_compiles.kernels, "the wrapper launched nothing"
    for kernel in gpu_compiles.kernels:
        assert len(kernel.kernel.cubin) > 0
        print(f"{target} {kernel.fn.__name__}: {kernel.n_regs} registers, {kernel.n_spills} "
              f"spill bytes, {kernel.shared} B shared")


@pytest.fixture
def gpu_configs(monkeypatch):
    """The wrappers choose their GPU block sizes and grids (as on a 132-SM H200) but, given NumPy
    arrays, still run in the interpreter: the GPU configurations' results are checked here."""
    monkeypatch.setattr(_common._Place, "on_gpu", property(lambda self: True))
    monkeypatch.setattr(_common._Place, "num_sms", lambda self: 132)


def test_gpu_configurations_compute_the_same_results(gpu_configs, rng):
    x = randn(rng, (300, 781), "float16", scale=3.0)
    assert_close(ops.softmax(x), softmax_ref(x), TOL["float16"], "softmax")
    assert_close(ops.softmax(x[:3], online=True), softmax_ref(x[:3]), TOL["float16"], "online")
    w, b, dy = randn(rng, (781,), "float16"), randn(rng, (781,), "float16"), randn(
        rng, (300, 781), "float16")
    y, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5)
    assert_close(y, layernorm_ref(x, w, b, 1e-5)[0], TOL["float16"], "layernorm y")
    for got, ref in zip(ops.layernorm_bwd(dy, x, w, mean, rstd),
                        layernorm_bwd_ref(dy, x, w, mean, rstd)):
        assert_close(got, ref, TOL["float16"], "layernorm grads")
    a, bm = randn(rng, (130, 70), "float16"), randn(rng, (70, 200), "float16")
    assert_close(ops.matmul(a, bm, "relu"), matmul_ref(a, bm, "relu"), TOL["float16"], "matmul")
    weight = randn(rng, (97, 200), "float16")
    indices, offsets = random_bags(rng, 11, 97, np.int64)
    assert_close(ops.embedding_bag(weight, indices, offsets),
                 embedding_bag_ref(weight, indices, offsets, None, "sum"), TOL["float16"], "bags")
    for shape in ((9, 2500), (100, 37), (6, 40000)):  # (6, 40000): 4 column chunks a row
        xs = randn(rng, shape, "float32")
        assert_close(ops.row_sum(xs), f64(xs).sum(axis=1), 1e-5, "row_sum")
        np.testing.assert_array_equal(ops.row_max(xs)[1], xs.argmax(axis=1))
    for causal in (False, True):
        q, k, v = (randn(rng, (1, 2, 200, 64), "float16") for _ in range(3))
        out = ops.attention(q, k, v, causal=causal, sm_scale=0.125)
        assert_close(out, attention_ref(q, k, v, causal, 0.125)[0], TOL["float16"], "attention")


def test_tlx_ops_run_in_the_interpreter(rng):
    # The warp-specialized Hopper kernels take NumPy arrays too: the interpreter runs their host
    # TMA descriptors, tasks and barriers (with its synchronization checks).
    a, b = randn(rng, (320, 192), "float16"), randn(rng, (192, 384), "float16")
    for variant in ("ws", "pingpong", "pipelined", "ws_cluster"):
        assert_close(ops.matmul_tlx(a, b, variant), matmul_ref(a, b, None), TOL["float16"],
                     variant)
    for causal, d in ((False, 128), (True, 64)):
        q, k, v = (randn(rng, (1, 2, 256, d), "float16") for _ in range(3))
        out = ops.attention_tlx(q, k, v, causal=causal, sm_scale=0.1)
        assert_close(out, attention_ref(q, k, v, causal, 0.1)[0], TOL["float16"], "attention")


# ------------------------------------------------------------------------------------------------
# argument errors
# ------------------------------------------------------------------------------------------------


def test_errors_name_the_argument():
    f16 = np.ones((4, 8), np.float16)
    cases = [
        (lambda: ops.add(np.ones(3, np.float32), np.ones(4, np.float32)), "'y'"),
        (lambda: ops.add(np.ones(3, np.float32), np.ones(3, np.float16)), "'y'"),
        (lambda: ops.add([1.0, 2.0], np.ones(2, np.float32)), "'x'"),
        (lambda: ops.softmax(np.ones((2, 3), np.int32)), "'x'"),
        (lambda: ops.matmul(f16, np.ones((9, 3), np.float16)), "'b'"),
        (lambda: ops.matmul(np.ones((4, 8), np.float32), f16.T), "'a'"),
        (lambda: ops.matmul(f16, f16.T, activation="gelu"), "'activation'"),
        (lambda: ops.layernorm_fwd(f16, np.ones(7, np.float16), np.ones(8, np.float16)), "'w'"),
        (lambda: ops.layernorm_bwd(f16, f16, np.ones(8, np.float16), np.ones(3, np.float32),
                                   np.ones(4, np.float32)), "'mean'"),
        (lambda: ops.embedding_bag(f16, np.array([0, 4]), np.array([0, 2])), "'indices'"),
        (lambda: ops.embedding_bag(f16, np.array([0, 1]), np.array([0, 3])), "'offsets'"),
        (lambda: ops.embedding_bag(f16, np.array([0.0]), np.array([0, 1])), "'indices'"),
        (lambda: ops.row_max(np.ones((3, 0), np.float32)), "'x'"),
        (lambda: ops.row_sum(np.ones(5, np.float32)), "'x'"),
        (lambda: ops.attention(*(np.ones((1, 1, 8, 24), np.float16),) * 3), "'q'"),
        (lambda: ops.matmul_tlx(f16, np.ones((8, 3), np.float16)), "'b'.*16 bytes"),
        (lambda: ops.attention_tlx(*(np.ones((1, 1, 256, 32), np.float16),) * 3),
         "'q' has HEAD_DIM 32; the kernel takes 64 or 128"),
        (lambda: ops.attention_tlx(*(np.ones((1, 1, 256, 64), np.float16),) * 3, causal="yes"),
         "'causal'"),
        (lambda: ops.attention_tlx(*(np.ones((1, 1, 256, 64), np.float16),) * 3,
                                   sm_scale=float("nan")), "'sm_scale'"),
        (lambda: ops.attention(*(np.ones((1, 1, 8, 24), np.float16),) * 3),
         "HEAD_DIM 24; the kernel takes 16, 32, 64, 128 or 256"),
        (lambda: ops.attention(np.ones((1, 1, 8, 16), np.float16),
                               np.ones((1, 1, 9, 16), np.float16),
                               np.ones((1, 1, 8, 16), np.float16)), "'k'"),
    ]
    for call, name in cases:
        with pytest.raises(ValueError, match=name):
            call()


def test_cpu_torch_tensors_are_refused_outside_interpret_mode(monkeypatch):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="'x'.*WARPWEAVE_INTERPRET"):
        ops.softmax(torch.randn(3, 5))


def test_cpu_torch_tensors_run_in_interpret_mode(monkeypatch, rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    x = torch.from_numpy(randn(rng, (6, 19), "float32"))
    out = ops.softmax(x)
    assert isinstance(out, torch.Tensor)
    assert_close(out.numpy(), softmax_ref(x.numpy()), 1e-5)


def test_empty_inputs_launch_nothing():
    assert ops.add(np.ones(0, np.float32), np.ones(0, np.float32)).shape == (0,)
    assert ops.softmax(np.ones((0, 5), np.float32)).shape == (0, 5)
    assert ops.row_sum(np.ones((0, 5), np.float32)).shape == (0,)
    assert ops.matmul(np.ones((0, 4), np.float16), np.ones((4, 3), np.float16)).shape == (0, 3)
    out = ops.embedding_bag(np.ones((3, 4), np.float32), np.zeros(0, np.int64),
                            np.zeros(1, np.int64))
    assert out.shape == (0, 4)
