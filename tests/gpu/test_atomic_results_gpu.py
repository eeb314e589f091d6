"""Atomics on tensors smaller than the threads' layout (several threads hold each element), their
results used (tests/python/test_atomic_codegen.py holds the kernel; Triton's
test_tensor_atomic_use_result): each element's atomic must run once and every holder must read
its result, at 1, 4 and 8 warps."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import test_atomic_codegen as m  # noqa: E402


@pytest.mark.parametrize("size", [1, 2, 16, 64])
@pytest.mark.parametrize("op", ["add", "cas"])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_small_tensor_atomic_runs_once_and_every_holder_reads_it(size, op, num_warps):
    index = (torch.arange(size, device="cuda", dtype=torch.int32) if op == "add" else
             torch.zeros(size, device="cuda", dtype=torch.int32))
    out = torch.zeros(size * size, device="cuda", dtype=torch.int32)
    m._small_tensor_results[(1, )](index, out, SIZE=size, OP=op, num_warps=num_warps)
    old = torch.arange(size, device="cuda") if op == "add" else torch.zeros(size, device="cuda",
                                                                            dtype=torch.int64)
    expect = torch.zeros((size, size), device="cuda", dtype=torch.int32)
    expect[old] = 5
    assert torch.equal(out.view(size, size), expect)
    assert torch.equal(index, torch.arange(size, device="cuda", dtype=torch.int32) *
                       (2 if op == "add" else 1))


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_float_min_max_atomics(kind, dtype):
    vals = torch.randn(128, device="cuda", dtype=dtype) * 1e3
    x = torch.tensor([0.0, -1e30, 1e30, -0.5], device="cuda", dtype=dtype)
    grouped = torch.cat([x[:, None], vals.view(32, 4).t()], dim=1)
    expect = grouped.max(dim=1).values if kind == "max" else grouped.min(dim=1).values
    m._float_min_max[(1, )](x, vals, BLOCK=128, KIND=kind)
    assert torch.equal(x, expect)
