"""tlx.local_load(..., layout=tlx.layout(...)) on a GPU: the values a kernel reads in its own
register layout are the tile's, from shared memory (sm_90a and later: runs on the H200) and
tensor memory (sm_100a: the tcgen05 layout, a separable layout read by column runs, and one
converted through shared memory; skipped below Blackwell), and values stored to tensor memory
from such layouts (tcgen05.st per column run, or converted first). Kernels of
tests/python/tlx_register_layout_kernels.py; the interpreter tests are in
tests/python/test_tlx_register_layout.py."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda((9, 0), "tlx.local_load needs sm_90a or later")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import tlx_register_layout_kernels as lk  # noqa: E402


def data(shape):
    n = shape[0] * shape[1]
    return ((torch.arange(n, dtype=torch.float32) % 97) / 8).reshape(shape).cuda()


def test_shared_memory_load_in_a_layout(monkeypatch):
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    x = data((64, 64))
    out = torch.zeros_like(x)
    lk.smem_load_in_layout[(1,)](x, out, num_warps=4)
    assert torch.equal(out, x * 3)


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_tensor_memory_load_in_a_layout(monkeypatch, mode):
    if torch.cuda.get_device_capability()[0] != 10:
        pytest.skip("tensor memory needs sm_100a")
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    x = data((128, 64))
    out = torch.zeros_like(x)
    lk.tmem_load_in_layout[(1,)](x, out, MODE=mode, num_warps=8)
    assert torch.equal(out, x * 3)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8e4nv"])
@pytest.mark.parametrize("mode", [1, 2, 3])
def test_tensor_memory_store_in_a_layout(monkeypatch, mode, dtype):
    # A value in a kernel-given layout stored to tensor memory (column runs, or converted to
    # tcgen05's layout first) reads back as the compiler's own store of it.
    if torch.cuda.get_device_capability()[0] != 10:
        pytest.skip("tensor memory needs sm_100a")
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    import warpweave.language as tl
    x = ((torch.arange(128 * 64, dtype=torch.float32) % 16) / 8).reshape(128, 64).cuda()
    out = torch.zeros_like(x)
    lk.tmem_store_in_layout[(1,)](x, out, MODE=mode, DTYPE=getattr(tl, dtype), num_warps=8)
    assert torch.equal(out, x * 3)
