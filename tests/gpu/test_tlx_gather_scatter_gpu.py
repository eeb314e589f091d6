"""tlx.local_gather / tlx.local_scatter on the GPU (tests/python/tlx_gather_scatter_kernels.py)
against torch.gather / Tensor.scatter_, for 1-D, 2-D and 3-D buffers along each axis, one to
four warps, 32- and 64-bit indices; and the autotuned launch path keeps no tensor alive after
the call (TLX's test_gpu_memory_not_leaked)."""

import gc
import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import tlx_gather_scatter_kernels as kern  # noqa: E402

import warpweave as ww  # noqa: E402
import warpweave.language as tl  # noqa: E402

DEV = "cuda"


@pytest.fixture(autouse=True)
def trap_instead_of_hanging(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", "4000000")
    torch.manual_seed(1234)


@pytest.mark.parametrize("r,c,ir,ic,axis,warps", [(32, 32, 32, 32, 0, 1), (32, 32, 32, 32, 1, 1),
                                                  (64, 64, 64, 64, 0, 4), (64, 64, 64, 64, 1, 4),
                                                  (64, 16, 8, 16, 0, 2), (16, 64, 8, 16, 1, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_gather_2d(r, c, ir, ic, axis, warps, dtype):
    x = torch.randn(r, c, device=DEV).to(dtype)
    idx = torch.randint(0, (r, c)[axis], (ir, ic), device=DEV, dtype=torch.int32)
    out = torch.empty(ir, ic, device=DEV, dtype=dtype)
    kern.gather_2d[(1,)](x, idx, out, R=r, C=c, IR=ir, IC=ic, AXIS=axis, num_warps=warps)
    src = x[:, :ic] if axis == 0 else x[:ir, :]
    torch.testing.assert_close(out, torch.gather(src, axis, idx.long()), rtol=0, atol=0)


@pytest.mark.parametrize("n,k,warps", [(1024, 32, 1), (4096, 64, 2), (16384, 128, 4)])
@pytest.mark.parametrize("itype", [torch.int32, torch.int64])
def test_gather_1d(n, k, warps, itype):
    x = torch.randn(n, device=DEV)
    idx = torch.randint(0, n, (k,), device=DEV, dtype=itype)
    out = torch.empty(k, device=DEV)
    kern.gather_1d[(1,)](x, idx, out, N=n, K=k, num_warps=warps)
    torch.testing.assert_close(out, x[idx.long()], rtol=0, atol=0)


@pytest.mark.parametrize("axis,warps", [(0, 1), (1, 1), (0, 4), (1, 4)])
def test_scatter_2d(axis, warps):
    r, c = 64, 64
    x = torch.randn(r, c, device=DEV)
    v = torch.randn(r, c, device=DEV)
    rows = torch.arange(r, device=DEV)[:, None]
    cols = torch.arange(c, device=DEV)[None, :]
    extent = (r, c)[axis]
    idx = ((extent - 1 - rows - cols) % extent).to(torch.int32)
    out = torch.empty_like(x)
    kern.scatter_2d[(1,)](x, idx, v, out, R=r, C=c, IR=r, IC=c, AXIS=axis, num_warps=warps)
    want = x.clone().scatter_(axis, idx.long(), v)
    torch.testing.assert_close(out, want, rtol=0, atol=0)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scatter_then_gather_3d(axis):
    shape = (16, 8, 4)
    x = torch.arange(16 * 8 * 4, device=DEV, dtype=torch.float32).reshape(shape) + 200
    grids = torch.meshgrid(*[torch.arange(s, device=DEV) for s in shape], indexing="ij")
    base = sum(grids) - grids[axis]
    idx = ((shape[axis] - 1 - base - grids[axis]) % shape[axis]).to(torch.int32).contiguous()
    out = torch.empty((2,) + shape, device=DEV)
    kern.scatter_gather_3d[(1,)](x, idx, out, N=16, M=8, P=4, AXIS=axis, num_warps=1)
    tile = torch.zeros(shape, device=DEV).scatter_(axis, idx.long(), x)
    torch.testing.assert_close(out[0], x, rtol=0, atol=0)
    torch.testing.assert_close(out[1], tile, rtol=0, atol=0)


@ww.autotune(configs=[ww.Config({"BLOCK": 512}), ww.Config({"BLOCK": 1024})], key=["n"])
@ww.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def test_autotuned_launch_leaves_no_live_tensors():
    def run():
        n = 1024 * 1024
        src = torch.randn(n, device=DEV)
        dst = torch.empty_like(src)
        _copy[lambda m: (ww.cdiv(n, m["BLOCK"]),)](src, dst, n)
        torch.cuda.synchronize()
        torch.testing.assert_close(src, dst)

    gc.collect()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    run()
    gc.collect()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before
