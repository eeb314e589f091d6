"""Programmatic dependent launch on the GPU: a kernel launched with launch_pdl=True that waits
with gdc_wait sees everything its predecessor on the stream wrote, launched directly and from a
captured CUDA graph."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
if torch.cuda.get_device_capability()[0] < 9:
    pytest.skip("programmatic dependent launch needs sm_90 or newer", allow_module_level=True)

import warpweave as ww
import warpweave.language as tl


@ww.jit
def _slow_fill(out_ptr, n, value, BLOCK: tl.constexpr, ROUNDS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(ROUNDS):  # keeps the producer busy so that an early consumer would be seen
        acc = acc * 0.5 + value
    tl.extra.cuda.gdc_launch_dependents()
    tl.store(out_ptr + offs, acc * 0 + value, mask=offs < n)


@ww.jit
def _add_after_wait(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.extra.cuda.gdc_wait()
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def _pair(x, y, out, n):
    grid = (ww.cdiv(n, 1024), )
    _slow_fill[grid](x, n, 3.0, BLOCK=1024, ROUNDS=4096)
    _add_after_wait[grid](x, y, out, n, BLOCK=1024, launch_pdl=True)


def test_dependent_launch_sees_the_predecessor():
    n = 1 << 22
    for _ in range(3):
        x = torch.zeros(n, device="cuda")
        y = torch.ones(n, device="cuda")
        out = torch.empty(n, device="cuda")
        _pair(x, y, out, n)
        torch.cuda.synchronize()
        assert torch.all(out == 4.0)


def test_dependent_launch_in_a_cuda_graph():
    n = 1 << 20
    x = torch.zeros(n, device="cuda")
    y = torch.ones(n, device="cuda")
    out = torch.empty(n, device="cuda")
    _pair(x, y, out, n)  # compile outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _pair(x, y, out, n)
    x.zero_()
    out.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert torch.all(out == 4.0)
