"""tl.argmax / tl.argmin skip NaN on the GPU as in the interpreter (tests/python/
test_argmax_nan.py's kernel and rows): within a thread, across lanes and across warps (rows of
4 to 1,024 elements at 1 to 8 warps), fp32, fp64 and fp16."""

import os
import sys

import numpy as np
import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from test_argmax_nan import arg_rows, expected, rows_with_nans  # noqa: E402


@pytest.mark.parametrize("n,block", [(3, 4), (100, 128), (1000, 1024)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("is_max", [True, False])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_nan_is_skipped(n, block, dtype, is_max, num_warps):
    rows = rows_with_nans(n, dtype, seed=n)
    x = torch.from_numpy(rows).cuda()
    vals = torch.zeros(len(rows), dtype=x.dtype, device="cuda")
    idx = torch.full((len(rows),), -1, dtype=torch.int32, device="cuda")
    arg_rows[(len(rows),)](x, vals, idx, N=n, BLOCK=block, MAX=is_max, num_warps=num_warps)
    torch.cuda.synchronize()
    want_vals, want_idx = expected(rows, is_max, block)
    np.testing.assert_array_equal(idx.cpu().numpy(), want_idx)
    got = vals.cpu().numpy()
    keep = ~np.isnan(want_vals)
    np.testing.assert_array_equal(got[keep], want_vals[keep])
