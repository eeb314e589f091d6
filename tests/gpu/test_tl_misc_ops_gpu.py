"""tl.gather, tl.map_elementwise, tl.swizzle2d, item(), range() with a negative step and the
software-converted fp8 types (float8e4b15 / float8e4b8 / float8e5b16) on the GPU, against PyTorch
and against the interpreter's encodings (tests/python/test_tl_misc_ops.py holds the kernels and
the NumPy models)."""

import os
import sys

import numpy as np
import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import test_tl_misc_ops as m  # noqa: E402

import warpweave as ww  # noqa: E402
import warpweave.language as tl  # noqa: E402

DEV = "cuda"


@pytest.mark.parametrize("src_shape,idx_shape,axis", [
    ((4, 4), (8, 4), 0), ((128, 64), (256, 64), 0), ((128, 64), (128, 128), 1), ((8, 32), (8, 4), 1),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8])
def test_gather(src_shape, idx_shape, axis, dtype):
    src = (torch.randn(src_shape, device=DEV) * 50).to(dtype)
    idx = torch.randint(0, src_shape[axis], idx_shape, device=DEV, dtype=torch.int32)
    out = torch.empty(idx_shape, device=DEV, dtype=dtype)
    m.gather2d_kernel[(1,)](src, idx, out, *src_shape, *idx_shape, AXIS=axis, METHOD=False)
    torch.testing.assert_close(out, torch.gather(src, axis, idx.long()), rtol=0, atol=0)


def test_gather_1d():
    src = torch.randn(32, device=DEV)
    idx = torch.randint(0, 32, (64,), device=DEV, dtype=torch.int32)
    out = torch.empty(64, device=DEV)
    m.gather1d_kernel[(1,)](src, idx, out, 32, 64)
    torch.testing.assert_close(out, src[idx.long()], rtol=0, atol=0)


def test_map_elementwise():
    x = torch.randint(-5, 5, (128,), device=DEV, dtype=torch.int32)
    y = torch.randint(-5, 5, (128,), device=DEV, dtype=torch.int32)
    z = torch.empty_like(x)
    m.map_compare_kernel[(1,)](x, y, z, 128)
    assert torch.equal(z, (x > y).int() - (y > x).int())
    for pack in (1, 2):
        a = torch.randint(0, 1 << 30, (512,), device=DEV, dtype=torch.int32)
        b = torch.randint(1, 1000, (512,), device=DEV, dtype=torch.int32)
        c, d = torch.empty_like(a), torch.empty_like(a)
        m.map_divmod_kernel[(1,)](a, b, c, d, 512, pack)
        assert torch.equal(c, a // b) and torch.equal(d, a % b)
    xs = torch.randn(8, 16, device=DEV)
    ys = torch.empty_like(xs)
    m.map_selu_kernel[(1,)](xs, ys, 8, 16)
    torch.testing.assert_close(ys, torch.where(xs > 0, xs, 0.5 * (torch.exp(xs) - 1)), rtol=1e-5,
                               atol=1e-5)


def test_swizzle2d_and_item():
    out = torch.full((5, 7), -1, device=DEV, dtype=torch.int32)
    m.swizzle_loop_kernel[(1,)](out, 5, 7, 3)
    expect = np.zeros((5, 7), np.int32)
    for i in range(5):
        for j in range(7):
            ni, nj = m.swizzle_reference(i, j, 5, 7, 3)
            expect[ni, nj] = i * 7 + j
    np.testing.assert_array_equal(out.cpu().numpy(), expect)
    for explicit in (False, True):
        for first, after in ((41, 41), (43, 42)):
            x = torch.tensor([first, 7, 0], device=DEV, dtype=torch.int32)
            m.item_kernel[(1,)](x, explicit, num_warps=1)
            assert x.tolist() == [after, 7, 8]


@pytest.mark.parametrize("lo,hi,step", [(15, -16, -1), (15, -16, -3), (22, 18, -1), (3, 3, -1)])
def test_range_with_negative_step(lo, hi, step):
    out = torch.zeros(1, device=DEV, dtype=torch.int64)
    m.range_kernel[(1,)](out, lo, hi, step, False)
    assert out.item() == sum(range(lo, hi, step)) + 1000 * sum(range(hi, lo, -step))


@pytest.mark.parametrize("sig", list(m.FP8))
def test_fp8_software_conversions(sig):
    bits = np.arange(256, dtype=np.uint8)
    x = ww.reinterpret(torch.from_numpy(bits.view(np.int8)).to(DEV), tl.dtype(sig))
    y = torch.empty(256, device=DEV)
    m.fp8_to_f32_kernel[(1,)](x, y, 256)
    np.testing.assert_array_equal(y.cpu().numpy(), m.decode(bits, sig).astype(np.float32))
    vals = m.decode(bits, sig)
    finite = np.sort(vals[~np.isnan(vals)])
    f = np.concatenate([finite, (finite[1:] + finite[:-1]) / 2, np.random.randn(300) * finite[-1],
                        [1e9, -1e9, np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30]])
    f = np.resize(f.astype(np.float32), 1024)
    out = torch.zeros(1024, device=DEV, dtype=torch.int8)
    m.f32_to_fp8_kernel[(1,)](torch.from_numpy(f).to(DEV), ww.reinterpret(out, tl.dtype(sig)),
                              1024, tl.dtype(sig))
    np.testing.assert_array_equal(out.cpu().numpy().view(np.uint8), m.encode(f, sig))


@pytest.mark.parametrize("num_warps", [4, 8])
def test_software_fp8_dot_matches_the_interpreter(num_warps, monkeypatch):
    # float8e4b15 operands, which the GPU dot multiplies as (exact) fp16 values.
    import test_triton_core_gaps as g

    rng = np.random.default_rng(4)
    a = rng.integers(0, 0x7F, 128 * 128, dtype=np.uint8) | (rng.integers(0, 2, 128 * 128) << 7)
    b = rng.integers(0, 0x7F, 128 * 256, dtype=np.uint8) | (rng.integers(0, 2, 128 * 256) << 7)
    a, b = a.astype(np.uint8), b.astype(np.uint8)
    out = torch.full((128 * 256,), float("nan"), device=DEV)
    g._software_fp8_dot[(1,)](torch.from_numpy(a).to(DEV), torch.from_numpy(b).to(DEV), out,
                              M=128, N=256, K=128, num_warps=num_warps)
    ref = np.zeros(128 * 256, np.float32)
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    g._software_fp8_dot[(1,)](a, b, ref, M=128, N=256, K=128)
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-5, atol=1e-5)
