"""tl.argmax / tl.argmin skip NaN as tl.max / tl.min do (Triton's "NaN ignore" semantics): the
index of the largest / smallest number, the lowest of tied ones, 0 when every element is NaN.
The interpreter here; tests/gpu/test_argmax_nan_gpu.py runs the same kernel on the GPU, whose
combine tree once kept a NaN that came first (an H100 run of Triton's test_core)."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def arg_rows(x_ptr, val_ptr, idx_ptr, N: tl.constexpr, BLOCK: tl.constexpr, MAX: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    fill = -float("inf") if MAX else float("inf")
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=fill)
    if MAX:
        tl.store(val_ptr + row, tl.max(x, axis=0))
        tl.store(idx_ptr + row, tl.argmax(x, axis=0))
    else:
        tl.store(val_ptr + row, tl.min(x, axis=0))
        tl.store(idx_ptr + row, tl.argmin(x, axis=0))


def rows_with_nans(n, dtype, seed=0):
    """Rows of n elements: NaN first, last, everywhere but one place, everywhere, in runs, and
    ties between numbers."""
    rng = np.random.default_rng(seed)
    rows = []
    for case in range(8):
        r = rng.integers(-50, 50, size=n).astype(dtype)
        if case == 0:
            r[0] = np.nan
        elif case == 1:
            r[-1] = np.nan
        elif case == 2:
            r[:] = np.nan
            r[n // 2] = 3
        elif case == 3:
            r[:] = np.nan
        elif case == 4:
            r[::2] = np.nan
        elif case == 5:
            r[: n // 2] = np.nan
        elif case == 6:
            r[:] = 7
            r[1] = np.nan
        rows.append(r)
    return np.stack(rows)


def expected(rows, is_max, block):
    """What the kernel computes: over the row padded to `block` with -inf (max) or +inf (min),
    which are numbers: a row of NaNs shorter than the block gives the first padding index."""
    fill = -np.inf if is_max else np.inf
    idx, vals = [], []
    for r in rows:
        r = np.concatenate([r, np.full(block - len(r), fill, r.dtype)])
        numbers = np.flatnonzero(~np.isnan(r))  # (NumPy's nanargmax would tie NaN with -inf)
        if len(numbers) == 0:
            idx.append(0)
            vals.append(np.nan)
        else:
            best = r[numbers].max() if is_max else r[numbers].min()
            idx.append(int(numbers[r[numbers] == best][0]))
            vals.append(best)
    return np.array(vals), np.array(idx, np.int32)


@pytest.mark.parametrize("n,block", [(3, 4), (100, 128), (1000, 1024)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("is_max", [True, False])
def test_nan_is_skipped_in_the_interpreter(n, block, dtype, is_max):
    rows = rows_with_nans(n, dtype)
    vals = np.zeros(len(rows), dtype)
    idx = np.full(len(rows), -1, np.int32)
    arg_rows[(len(rows),)](rows, vals, idx, N=n, BLOCK=block, MAX=is_max)
    want_vals, want_idx = expected(rows, is_max, block)
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_array_equal(vals[~np.isnan(want_vals)], want_vals[~np.isnan(want_vals)])
