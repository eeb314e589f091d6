"""tl.cumsum, tl.cumprod and tl.associative_scan lowered to PTX, on the GPU, against torch on the
same inputs: both axes of tiles whose scanned axis spans registers, lanes and warps, reversed or
not, int32 exactly and floats within rounding."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.dirname(__file__))
import scan_kernels  # noqa: E402

DEV = "cuda"


def reference(x, axis, kind, reverse):
    x = x.double() if x.is_floating_point() else x.long()
    if reverse:
        x = x.flip(axis)
    if kind == "sum":
        y = torch.cumsum(x, axis)
    elif kind == "prod":
        y = torch.cumprod(x, axis)
    elif kind == "max":
        y = torch.cummax(x, axis).values
    else:  # the last positive element so far (the first element when none is)
        y = x.clone()
        idx = [slice(None)] * x.dim()
        for i in range(1, x.shape[axis]):
            idx[axis] = i
            prev = list(idx)
            prev[axis] = i - 1
            y[tuple(idx)] = torch.where(x[tuple(idx)] > 0, x[tuple(idx)], y[tuple(prev)])
    if reverse:
        y = y.flip(axis)
    return y


def run(x, axis, kind, reverse, num_warps):
    m, n = x.shape
    out = torch.full_like(x, -7777)
    scan_kernels.scan_kernel[(1,)](x, out, M=m, N=n, AXIS=axis, KIND=kind, REVERSE=reverse,
                                   num_warps=num_warps)
    torch.cuda.synchronize()
    return out


@pytest.mark.parametrize("shape,num_warps", [((1, 4096), 8), ((64, 64), 4), ((8, 256), 1),
                                             ((256, 16), 8), ((2, 32), 4)])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_matches_torch(shape, num_warps, axis, reverse):
    x = torch.randn(*shape, device=DEV)
    out = run(x, axis, "sum", reverse, num_warps)
    ref = reference(x, axis, "sum", reverse)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 1e-5, f"relative error {err}"
    xi = torch.randint(-1000, 1000, shape, device=DEV, dtype=torch.int32)
    assert torch.equal(run(xi, axis, "sum", reverse, num_warps).long(),
                       reference(xi, axis, "sum", reverse))


@pytest.mark.parametrize("shape,num_warps", [((64, 64), 4), ((4, 1024), 8)])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumprod_matches_torch(shape, num_warps, axis, reverse):
    x = 1 + 0.01 * torch.randn(*shape, device=DEV)
    out = run(x, axis, "prod", reverse, num_warps)
    ref = reference(x, axis, "prod", reverse)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 1e-5, f"relative error {err}"


@pytest.mark.parametrize("kind", ["max", "later_positive"])
@pytest.mark.parametrize("shape,num_warps", [((64, 64), 4), ((2, 2048), 8), ((128, 8), 2)])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_matches_a_sequential_scan(kind, shape, num_warps, axis, reverse):
    x = torch.randn(*shape, device=DEV)
    out = run(x, axis, kind, reverse, num_warps)
    assert torch.equal(out.double(), reference(x, axis, kind, reverse))


def test_cumsum_masked_blocks():
    n, block = 10000, 1024
    x = torch.randint(-5, 6, (n,), device=DEV, dtype=torch.int32)
    out = torch.full_like(x, -7777)
    scan_kernels.cumsum_1d_kernel[((n + block - 1) // block,)](x, out, n, BLOCK=block,
                                                              num_warps=4)
    torch.cuda.synchronize()
    ref = torch.cat([torch.cumsum(c.long(), 0) for c in x.split(block)])
    assert torch.equal(out.long(), ref)
